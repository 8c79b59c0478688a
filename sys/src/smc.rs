//! The kernel's SMC numbers (include/linux/socket.h, include/uapi/linux/smc.h,
//! include/uapi/linux/in.h), defined here once for every part of smcrun.

/// `AF_SMC`: the SMC address family.
pub const AF_SMC: i32 = 43;
/// `SMCPROTO_SMC`: the `AF_SMC` protocol for IPv4 addressing.
pub const SMCPROTO_SMC: i32 = 0;
/// `SMCPROTO_SMC6`: the `AF_SMC` protocol for IPv6 addressing.
pub const SMCPROTO_SMC6: i32 = 1;
/// `IPPROTO_SMC` (Linux 6.11): an SMC socket that keeps its `AF_INET`/`AF_INET6` family.
pub const IPPROTO_SMC: i32 = 256;
/// `SOL_SMC`: the socket option level of SMC's own options.
pub const SOL_SMC: i32 = 286;

/// What kind of stream socket the kernel says an fd holds, from its real `SO_DOMAIN` and
/// `SO_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// `socket(AF_SMC, ...)`.
    AfSmc,
    /// `socket(AF_INET/AF_INET6, ..., IPPROTO_SMC)`.
    IpprotoSmc,
    /// An IP socket that is not SMC: a TCP socket, or an SMC socket that fell back (the kernel then
    /// moves the program's file over to the internal TCP socket).
    Ip,
    /// Any other family (UNIX, netlink, ...).
    Other,
}

impl SocketKind {
    /// Classifies a `(SO_DOMAIN, SO_PROTOCOL)` pair.
    pub fn of(domain: i32, protocol: i32) -> SocketKind {
        if domain == AF_SMC {
            SocketKind::AfSmc
        } else if domain == libc::AF_INET || domain == libc::AF_INET6 {
            if protocol == IPPROTO_SMC {
                SocketKind::IpprotoSmc
            } else {
                SocketKind::Ip
            }
        } else {
            SocketKind::Other
        }
    }

    /// Whether this is an SMC socket that has not fallen back.
    pub fn is_smc(self) -> bool {
        matches!(self, SocketKind::AfSmc | SocketKind::IpprotoSmc)
    }

    /// How smcrun names the kind of socket ("AF_SMC", "IPPROTO_SMC", "TCP", "other").
    pub fn label(self) -> &'static str {
        match self {
            SocketKind::AfSmc => "AF_SMC",
            SocketKind::IpprotoSmc => "IPPROTO_SMC",
            SocketKind::Ip => "TCP",
            SocketKind::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(SocketKind::of(AF_SMC, SMCPROTO_SMC6), SocketKind::AfSmc);
        assert_eq!(
            SocketKind::of(libc::AF_INET6, IPPROTO_SMC),
            SocketKind::IpprotoSmc
        );
        assert_eq!(
            SocketKind::of(libc::AF_INET, libc::IPPROTO_TCP),
            SocketKind::Ip
        );
        assert_eq!(SocketKind::of(libc::AF_UNIX, 0), SocketKind::Other);
        assert!(SocketKind::AfSmc.is_smc() && !SocketKind::Ip.is_smc());
    }
}
