//! Which rules of a policy BPF mode honours, and the kernel's rule table for those it does.
//!
//! At socket() the kernel knows the program but no address: a rule that names only programs
//! (and the default) is decided there, in the kernel, from the `rules` map. A rule about a
//! role, an address or a port falls at connect()/listen(), which only the preload sees (its
//! TCP_FASTOPEN lever also works on the IPPROTO_SMC sockets BPF mode makes): BPF mode alone
//! cannot honour it. A program pattern the kernel cannot match (a path, a `[...]` class, a `*`
//! that is not the last character, a name longer than the kernel's 15-byte program name) cannot
//! be honoured either. Such policies are refused before anything is attached, never ignored.

use crate::layout::{self, Rule, COMM_LEN, MAX_RULES};
use smcrun_policy::{Action, Policy};

/// How BPF mode stands to one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Honour {
    /// Decided in the kernel at socket().
    Kernel,
    /// Decided at connect()/listen(): needs the preload.
    NeedsPreload(String),
    /// Cannot be decided by BPF mode at all.
    Cannot(String),
}

/// One rule's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict {
    /// 1-based position in the policy.
    pub position: usize,
    /// The rule's canonical text.
    pub text: String,
    /// Whether and how BPF mode honours it.
    pub honour: Honour,
}

/// The kernel's side of a policy: rules in order and the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPolicy {
    /// At most [`MAX_RULES`].
    pub rules: Vec<Rule>,
    /// `ACTION_SMC` or `ACTION_TCP`.
    pub default_action: u32,
}

impl Default for KernelPolicy {
    /// Every TCP socket becomes SMC (no policy).
    fn default() -> KernelPolicy {
        KernelPolicy {
            rules: Vec::new(),
            default_action: layout::ACTION_SMC,
        }
    }
}

/// A policy examined for BPF mode.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Every rule, the default included, in order.
    pub verdicts: Vec<RuleVerdict>,
    /// The kernel table, when every rule is [`Honour::Kernel`].
    pub kernel: Option<KernelPolicy>,
}

impl Analysis {
    /// Rules BPF mode cannot honour without the preload.
    pub fn needing_preload(&self) -> impl Iterator<Item = &RuleVerdict> {
        self.verdicts
            .iter()
            .filter(|v| matches!(v.honour, Honour::NeedsPreload(_)))
    }

    /// Rules BPF mode cannot honour at all.
    pub fn impossible(&self) -> impl Iterator<Item = &RuleVerdict> {
        self.verdicts
            .iter()
            .filter(|v| matches!(v.honour, Honour::Cannot(_)))
    }

    /// One line for a refusal: the first rule BPF mode does not honour and why, or `None`.
    pub fn refusal(&self) -> Option<String> {
        let v = self
            .impossible()
            .next()
            .or_else(|| self.needing_preload().next())?;
        let why = match &v.honour {
            Honour::Kernel => return None,
            Honour::NeedsPreload(w) | Honour::Cannot(w) => w,
        };
        Some(format!("rule {} \"{}\" {why}", v.position, v.text))
    }
}

fn action_code(a: Action) -> u32 {
    match a {
        Action::Smc => layout::ACTION_SMC,
        Action::Tcp => layout::ACTION_TCP,
    }
}

/// The kernel rule for one `program` glob, or why there is none.
pub fn kernel_rule(glob: &str, action: Action) -> Result<Rule, String> {
    let mut r = Rule {
        action: action_code(action),
        ..Rule::default()
    };
    if glob == "*" {
        r.matching = layout::MATCH_ANY;
        return Ok(r);
    }
    if glob.contains('/') {
        return Err(format!(
            "matches program {glob:?} by path, and the kernel's socket() hook sees only the program name"
        ));
    }
    if glob.contains('[') {
        return Err(format!(
            "uses a [...] class in {glob:?}; in BPF mode a program pattern is a name with '?' for any one character and at most one '*', at its end"
        ));
    }
    let (name, prefix) = match glob.strip_suffix('*') {
        Some(n) => (n, true),
        None => (glob, false),
    };
    if name.contains('*') {
        return Err(format!(
            "has a '*' before the end of {glob:?}; in BPF mode a program pattern may end in '*', not hold one elsewhere"
        ));
    }
    if name.len() >= COMM_LEN {
        return Err(format!(
            "names {glob:?}, longer than the 15 bytes of a program name the kernel keeps (TASK_COMM_LEN)"
        ));
    }
    r.matching = if prefix {
        layout::MATCH_PREFIX
    } else {
        layout::MATCH_EXACT
    };
    r.len = name.len() as u32;
    r.name[..name.len()].copy_from_slice(name.as_bytes());
    Ok(r)
}

/// Examines `policy` for BPF mode.
pub fn analyse(policy: &Policy) -> Analysis {
    let mut verdicts = Vec::new();
    let mut table = Vec::new();
    for r in policy.rules() {
        let mut qualifiers = Vec::new();
        if r.role.is_some() {
            qualifiers.push("role");
        }
        if r.has_remote {
            qualifiers.push("remote");
        }
        if r.has_local {
            qualifiers.push("local");
        }
        if r.has_ports {
            qualifiers.push("port");
        }
        let honour = if !qualifiers.is_empty() {
            Honour::NeedsPreload(format!(
                "is about {}, which is known at connect()/listen(), after socket(): only the preload can honour it (run the program with the preload: smcrun --policy ... without --bpf)",
                qualifiers.join(" and ")
            ))
        } else {
            let mut honour = Honour::Kernel;
            for g in &r.programs {
                match kernel_rule(g, r.action) {
                    Ok(k) => table.push(k),
                    Err(why) => {
                        honour = Honour::Cannot(why);
                        break;
                    }
                }
            }
            honour
        };
        verdicts.push(RuleVerdict {
            position: r.index + 1,
            text: r.text,
            honour,
        });
    }
    if policy.has_default_rule() {
        verdicts.push(RuleVerdict {
            position: verdicts.len() + 1,
            text: policy.default_action().to_string(),
            honour: Honour::Kernel,
        });
    }
    if table.len() > MAX_RULES as usize {
        if let Some(v) = verdicts.iter_mut().find(|v| v.honour == Honour::Kernel) {
            v.honour = Honour::Cannot(format!(
                "is one of {} program patterns; BPF mode holds at most {MAX_RULES} per scope",
                table.len()
            ));
        }
    }
    let all_kernel = verdicts.iter().all(|v| v.honour == Honour::Kernel);
    Analysis {
        kernel: all_kernel.then(|| KernelPolicy {
            rules: table,
            default_action: action_code(policy.default_action()),
        }),
        verdicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn an(p: &str) -> Analysis {
        analyse(&Policy::parse(p).unwrap())
    }

    #[test]
    fn program_rules_go_to_the_kernel() {
        let a = an("tcp program redis-benchmark; smc program redis-*,memcache?; tcp");
        let k = a.kernel.clone().expect("honoured");
        assert_eq!(k.rules.len(), 3);
        assert_eq!(k.rules[0].matching, layout::MATCH_EXACT);
        assert_eq!(&k.rules[0].name[..15], b"redis-benchmark");
        assert_eq!(k.rules[0].action, layout::ACTION_TCP);
        assert_eq!(k.rules[1].matching, layout::MATCH_PREFIX);
        assert_eq!(k.rules[1].len, 6);
        assert_eq!(k.rules[2].len, 9);
        assert_eq!(k.default_action, layout::ACTION_TCP);
        assert!(a.refusal().is_none());
        assert_eq!(an("").kernel, Some(KernelPolicy::default()));
    }

    #[test]
    fn address_rules_need_the_preload() {
        let a = an("tcp remote 127.0.0.0/8; smc");
        assert!(a.kernel.is_none());
        let r = a.refusal().unwrap();
        assert!(
            r.starts_with("rule 1 \"tcp remote 127.0.0.0/8\" is about remote"),
            "{r}"
        );
        assert_eq!(
            an("smc role server port 6379; tcp")
                .needing_preload()
                .count(),
            1
        );
    }

    #[test]
    fn patterns_the_kernel_cannot_match_are_refused() {
        for p in [
            "tcp program /opt/*",
            "tcp program [ab]x",
            "tcp program *-server",
            "tcp program a-very-long-program-name",
        ] {
            let a = an(p);
            assert!(a.kernel.is_none(), "{p}");
            assert_eq!(a.impossible().count(), 1, "{p}");
        }
        let many: Vec<String> = (0..17).map(|i| format!("tcp program p{i}")).collect();
        assert!(an(&many.join("; ")).kernel.is_none());
    }
}
