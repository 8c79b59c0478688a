//! Address ranges (`local` and `remote`): IPv4 and IPv6 CIDRs, with v4-mapped IPv6 treated as
//! IPv4 on both sides, so that `remote 10.0.0.0/8` also covers a dual-stack program connecting an
//! AF_INET6 socket to `::ffff:10.1.2.3`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a bad CIDR is said to be expected.
pub(crate) const EXPECTED: &str =
    "an IPv4 or IPv6 address or CIDR, e.g. 10.0.0.0/8, 192.168.1.5 or fd00::/8";

/// One address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cidr {
    /// An IPv4 network: the address with host bits clear, and the prefix length (0..=32).
    V4(u32, u8),
    /// An IPv6 network that is not within `::ffff:0:0/96`, or wider than it (0..=128).
    V6(u128, u8),
}

/// An address as matching sees it: IPv4, with v4-mapped IPv6 folded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ip {
    V4(u32),
    V6(u128),
}

impl Ip {
    /// Folds `::ffff:a.b.c.d` into `a.b.c.d`.
    pub(crate) fn of(ip: IpAddr) -> Ip {
        match ip {
            IpAddr::V4(a) => Ip::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Ip::V4(u32::from(v4)),
                None => Ip::V6(u128::from(a)),
            },
        }
    }
}

fn mask4(len: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(len.min(32)))
        .unwrap_or(0)
}

fn mask6(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(len.min(128)))
        .unwrap_or(0)
}

impl Cidr {
    /// Parses `ADDR` or `ADDR/LEN`. The error is (what is wrong, what was expected).
    pub(crate) fn parse(text: &str) -> Result<Cidr, (String, String)> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let (ip, max) = if let Ok(a) = addr.parse::<Ipv4Addr>() {
            (IpAddr::V4(a), 32u8)
        } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
            (IpAddr::V6(a), 128)
        } else {
            return Err(("is not an address".into(), EXPECTED.into()));
        };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max && l.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => {
                    return Err((
                        "has a bad prefix length".into(),
                        format!("a length from 0 to {max} after the '/'"),
                    ))
                }
            },
        };
        let cidr = match ip {
            IpAddr::V4(a) => Cidr::V4(u32::from(a), len),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) if len >= 96 => Cidr::V4(u32::from(v4), len - 96),
                _ => Cidr::V6(u128::from(a), len),
            },
        };
        let network = cidr.network();
        if network != cidr {
            return Err((
                "has bits set after the prefix".into(),
                format!("the network address, {network}"),
            ));
        }
        Ok(cidr)
    }

    /// The same range with the host bits cleared.
    fn network(self) -> Cidr {
        match self {
            Cidr::V4(a, l) => Cidr::V4(a & mask4(l), l),
            Cidr::V6(a, l) => Cidr::V6(a & mask6(l), l),
        }
    }

    /// Whether `ip` is in the range.
    pub(crate) fn contains(self, ip: Ip) -> bool {
        match (self, ip) {
            (Cidr::V4(net, l), Ip::V4(a)) => a & mask4(l) == net,
            (Cidr::V6(net, l), Ip::V6(a)) => a & mask6(l) == net,
            _ => false,
        }
    }

    /// Whether an address of this range can be seen on an IPv4 socket.
    pub(crate) fn is_v4(self) -> bool {
        matches!(self, Cidr::V4(..))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Cidr::V4(a, 32) => write!(f, "{}", Ipv4Addr::from(a)),
            Cidr::V4(a, l) => write!(f, "{}/{l}", Ipv4Addr::from(a)),
            Cidr::V6(a, 128) => write!(f, "{}", Ipv6Addr::from(a)),
            Cidr::V6(a, l) => write!(f, "{}/{l}", Ipv6Addr::from(a)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ip {
        Ip::of(s.parse().unwrap())
    }

    #[test]
    fn parses_and_prints_canonically() {
        for (text, canonical) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("10.1.2.3", "10.1.2.3"),
            ("10.1.2.3/32", "10.1.2.3"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("::1", "::1"),
            ("::1/128", "::1"),
            ("fd00::/8", "fd00::/8"),
            ("FD00:0::/8", "fd00::/8"),
            ("::/0", "::/0"),
            ("::ffff:10.1.2.3", "10.1.2.3"),
            ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
            ("::ffff:0:0/96", "0.0.0.0/0"),
            ("::fffe:0:0/95", "::fffe:0:0/95"),
        ] {
            let got = match Cidr::parse(text) {
                Ok(c) => c.to_string(),
                Err(e) => format!("error {e:?}"),
            };
            assert_eq!(got, canonical, "{text}");
        }
    }

    #[test]
    fn refuses_with_reasons() {
        for (text, problem) in [
            ("10.0.0.300", "is not an address"),
            ("localhost", "is not an address"),
            ("", "is not an address"),
            ("fe80::1%eth0", "is not an address"),
            ("10.0.0.0/33", "has a bad prefix length"),
            ("10.0.0.0/", "has a bad prefix length"),
            ("10.0.0.0/+8", "has a bad prefix length"),
            ("::/129", "has a bad prefix length"),
            ("10.1.2.3/8", "has bits set after the prefix"),
            ("::ffff:10.0.0.0/8", "has bits set after the prefix"),
            ("::ffff:0:0/95", "has bits set after the prefix"),
            ("10.0.0.0/8/8", "has a bad prefix length"),
        ] {
            let err = Cidr::parse(text).unwrap_err();
            assert_eq!(err.0, problem, "{text}");
        }
        assert_eq!(
            Cidr::parse("10.1.2.3/8").unwrap_err().1,
            "the network address, 10.0.0.0/8"
        );
    }

    #[test]
    fn contains_folds_v4_mapped_addresses() {
        let net = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(net.contains(ip("10.200.0.1")));
        assert!(net.contains(ip("::ffff:10.200.0.1")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(
            !net.contains(ip("::a00:1")),
            "IPv4-compatible is not mapped"
        );
        let mapped_rule = Cidr::parse("::ffff:127.0.0.0/104").unwrap();
        assert!(mapped_rule.contains(ip("127.0.0.1")));
        let six = Cidr::parse("fd00::/8").unwrap();
        assert!(six.contains(ip("fd12::1")));
        assert!(!six.contains(ip("10.0.0.1")));
        let all6 = Cidr::parse("::/0").unwrap();
        assert!(all6.contains(ip("2001:db8::1")));
        assert!(
            !all6.contains(ip("::ffff:1.2.3.4")),
            "::/0 is every IPv6 peer only"
        );
        let all4 = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all4.contains(ip("::ffff:1.2.3.4")));
        assert!(!all4.contains(ip("::1")));
    }
}
