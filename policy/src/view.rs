//! A read-only view of a policy's rules, for tools that enforce a policy elsewhere than the
//! shim (BPF mode decides in the kernel at socket(), and must know what each rule asks about).

use crate::{Action, Policy, Role};

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
        assert!(p.has_default_rule());
        assert_eq!(p.default_action(), Action::Tcp);
    }
}
