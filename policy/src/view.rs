//! A read-only view of a policy's rules, for tools that enforce a policy elsewhere than the
//! shim (BPF mode decides in the kernel at socket(), the handshake policy in the kernel at the
//! SYN: both must know what each rule asks about, and the handshake its ports and addresses).

use crate::addr::Cidr;
use crate::{Action, Policy, Role};
use std::net::{Ipv4Addr, Ipv6Addr};

/// An address range of a rule, as the kernel compares it: IPv4 (v4-mapped IPv6 folded in, as the
/// shim's matcher does) or IPv6, with the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// An IPv4 network (host bits clear) and its prefix length, 0..=32.
    V4(Ipv4Addr, u8),
    /// An IPv6 network outside `::ffff:0:0/96` (host bits clear) and its prefix length, 0..=128.
    V6(Ipv6Addr, u8),
}

/// One rule as written: its action and which qualifiers it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleView {
    /// 0-based index in the policy (as in [`crate::Decision::rule`]).
    pub index: usize,
    /// The rule's canonical text.
    pub text: String,
    /// `smc` or `tcp`.
    pub action: Action,
    /// The `program` globs, as written (empty: every program).
    pub programs: Vec<String>,
    /// `role`, if given.
    pub role: Option<Role>,
    /// Whether it names `remote` addresses.
    pub has_remote: bool,
    /// Whether it names `local` addresses.
    pub has_local: bool,
    /// Whether it names ports.
    pub has_ports: bool,
    /// The `remote` ranges (any holds).
    pub remote: Vec<Net>,
    /// The `local` ranges (any holds).
    pub local: Vec<Net>,
    /// The `port` ranges, inclusive (any holds): the remote port of a client, the local of a
    /// server.
    pub ports: Vec<(u16, u16)>,
}

fn net(c: &Cidr) -> Net {
    match *c {
        Cidr::V4(a, l) => Net::V4(Ipv4Addr::from(a), l),
        Cidr::V6(a, l) => Net::V6(Ipv6Addr::from(a), l),
    }
}

impl Policy {
    /// The rules in order, the default rule excluded (see [`Policy::default_action`] and
    /// [`Policy::has_default_rule`]).
    pub fn rules(&self) -> Vec<RuleView> {
        self.rules
            .iter()
            .enumerate()
            .map(|(index, r)| RuleView {
                index,
                text: r.to_string(),
                action: r.action,
                programs: r.programs.iter().map(|g| g.to_string()).collect(),
                role: r.role,
                has_remote: !r.remote.is_empty(),
                has_local: !r.local.is_empty(),
                has_ports: !r.ports.is_empty(),
                remote: r.remote.iter().map(net).collect(),
                local: r.local.iter().map(net).collect(),
                ports: r.ports.iter().map(|p| (p.low, p.high)).collect(),
            })
            .collect()
    }

    /// Whether the policy ends with a default rule (an action alone).
    pub fn has_default_rule(&self) -> bool {
        self.default.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_show_their_qualifiers() {
        let p =
            Policy::parse("tcp program redis-benchmark,x?; smc role client port 80; tcp").unwrap();
        let r = p.rules();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].programs, vec!["redis-benchmark", "x?"]);
        assert_eq!(r[0].action, Action::Tcp);
        assert!(!r[0].has_ports && r[0].role.is_none());
        assert_eq!(r[1].role, Some(Role::Client));
        assert!(r[1].has_ports && !r[1].has_remote && !r[1].has_local);
        assert_eq!(r[1].text, "smc role client port 80");
        assert_eq!(r[1].ports, vec![(80, 80)]);
        let q = Policy::parse("tcp remote ::ffff:10.0.0.0/104,fd00::/8 local 127.0.0.1 port 1-9")
            .unwrap();
        let r = &q.rules()[0];
        assert_eq!(
            r.remote,
            vec![
                Net::V4(Ipv4Addr::new(10, 0, 0, 0), 8),
                Net::V6("fd00::".parse().unwrap(), 8)
            ]
        );
        assert_eq!(r.local, vec![Net::V4(Ipv4Addr::new(127, 0, 0, 1), 32)]);
        assert_eq!(r.ports, vec![(1, 9)]);
        assert!(p.has_default_rule());
        assert_eq!(p.default_action(), Action::Tcp);
    }
}
