//! BPF mode's JSON: `smcrun attach --cgroup|--netns ... --json`, `smcrun detach --json`, `smcrun
//! attach --list --json` (every scope: attached cgroups and network namespaces, `smcrun --bpf`
//! process trees) and `smcrun
//! policy check --bpf --json` (which rules the kernel's socket() hook honours).

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Serialize};
use smcrun_bpf::layout::Counters;
use smcrun_bpf::maps::ProgramCount;
use smcrun_bpf::pinned::{Attached, Attachment, Detached, Kind};
use smcrun_bpf::rules::Analysis;
use smcrun_bpf::scopes::TreeInfo;

use super::honour;

/// How many sockets one program made SMC in a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramView {
    /// Program name (the kernel's comm).
    pub program: String,
    /// Sockets made SMC.
    pub converted: u64,
}

impl ProgramView {
    /// The views of a scope's per-program counts.
    pub fn all(p: &[ProgramCount]) -> Vec<ProgramView> {
        p.iter()
            .map(|p| ProgramView {
                program: p.program.clone(),
                converted: p.converted,
            })
            .collect()
    }
}

/// A scope's sockets: made SMC, kept TCP by the policy. Every view of a BPF scope counts them
/// the same way (`smcrun attach --list`, `smcrun ps --all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketCounts {
    /// Made SMC.
    pub converted: u64,
    /// Kept TCP.
    pub kept_tcp: u64,
}

impl SocketCounts {
    /// The counts of `c`.
    pub fn new(c: &Counters) -> SocketCounts {
        SocketCounts {
            converted: c.converted,
            kept_tcp: c.kept_tcp,
        }
    }
}

/// What an attached scope is, as its JSON names it: `cgroup` and `cgroup_id`, or `netns` and
/// `netns_inode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetView<'a> {
    /// A cgroup.
    Cgroup {
        /// The cgroup directory.
        cgroup: Cow<'a, Path>,
        /// Its id.
        cgroup_id: u64,
    },
    /// A network namespace.
    Netns {
        /// The namespace file it was attached by.
        netns: Cow<'a, Path>,
        /// Its nsfs inode number.
        netns_inode: u64,
    },
}

impl<'a> TargetView<'a> {
    /// The view of a scope of `kind` at `path` with `id`.
    pub fn new(kind: Kind, path: &'a Path, id: u64) -> TargetView<'a> {
        match kind {
            Kind::Cgroup => TargetView::Cgroup {
                cgroup: Cow::Borrowed(path),
                cgroup_id: id,
            },
            Kind::Netns => TargetView::Netns {
                netns: Cow::Borrowed(path),
                netns_inode: id,
            },
        }
    }
}

/// `smcrun attach --cgroup PATH --json` (or `--netns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachView<'a> {
    /// The scope.
    #[serde(flatten)]
    pub target: TargetView<'a>,
    /// The policy slot it uses.
    pub slot: u32,
    /// Whether it was attached already (the policy replaced).
    pub was_attached: bool,
    /// The policy now in force.
    pub policy: String,
}

impl<'a> AttachView<'a> {
    /// The view of attaching the `kind` scope at `path` with `policy`.
    pub fn new(kind: Kind, path: &'a Path, a: &Attached, policy: String) -> AttachView<'a> {
        AttachView {
            target: TargetView::new(kind, path, a.id),
            slot: a.slot,
            was_attached: a.was_attached,
            policy,
        }
    }
}

/// One scope of `smcrun attach --list --json`, tagged by `"scope"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ScopeView<'a> {
    /// An attached cgroup.
    Cgroup(AttachmentView<'a>),
    /// An attached network namespace.
    Netns(AttachmentView<'a>),
    /// An `smcrun --bpf` process tree.
    Tree(TreeView<'a>),
}

impl<'a> ScopeView<'a> {
    /// The view of an attached cgroup or network namespace.
    pub fn attached(s: &'a Attachment) -> ScopeView<'a> {
        match s.kind {
            Kind::Cgroup => ScopeView::Cgroup(AttachmentView::new(s)),
            Kind::Netns => ScopeView::Netns(AttachmentView::new(s)),
        }
    }
}

/// An attached cgroup or network namespace with its counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentView<'a> {
    /// The scope.
    #[serde(flatten)]
    pub target: TargetView<'a>,
    /// Attached since (seconds since the epoch).
    pub since_unix: u64,
    /// Its policy's text (empty: all SMC).
    pub policy: Cow<'a, str>,
    /// Its sockets (`converted`, `kept_tcp`).
    #[serde(flatten)]
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

impl<'a> AttachmentView<'a> {
    /// The view of `s`.
    pub fn new(s: &'a Attachment) -> AttachmentView<'a> {
        AttachmentView {
            target: TargetView::new(s.kind, &s.path, s.id),
            since_unix: s.since_unix,
            policy: Cow::Borrowed(&s.policy),
            sockets: SocketCounts::new(&s.counters),
            programs: ProgramView::all(&s.programs),
        }
    }
}

/// An `smcrun --bpf` process tree with its counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeView<'a> {
    /// The BPF program's id.
    pub program_id: u32,
    /// Loaded since (seconds since the epoch; `null` when the boot time is unknown).
    pub since_unix: Option<u64>,
    /// The tree's processes.
    pub processes: Cow<'a, [u32]>,
    /// Its sockets (`converted`, `kept_tcp`).
    #[serde(flatten)]
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

impl<'a> TreeView<'a> {
    /// The view of `t`, loaded at `since_unix`.
    pub fn new(t: &'a TreeInfo, since_unix: Option<u64>) -> TreeView<'a> {
        TreeView {
            program_id: t.program_id,
            since_unix,
            processes: Cow::Borrowed(&t.processes),
            sockets: SocketCounts::new(&t.counters),
            programs: ProgramView::all(&t.programs),
        }
    }
}

/// `smcrun attach --list --json`: `{"scopes": [...]}`, cgroups first, then network namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopesListView<'a> {
    /// Every scope.
    pub scopes: Vec<ScopeView<'a>>,
}

/// `smcrun detach --json`: the scope's last counts and whether the program was unloaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DetachView<'a> {
    /// The scope as it was.
    #[serde(flatten)]
    pub scope: ScopeView<'a>,
    /// Whether nothing is attached any more (the program unloaded).
    pub unloaded: bool,
}

impl<'a> DetachView<'a> {
    /// The view of `d`.
    pub fn new(d: &'a Detached) -> DetachView<'a> {
        DetachView {
            scope: ScopeView::attached(&d.scope),
            unloaded: d.unloaded,
        }
    }
}

/// `smcrun policy check --bpf --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyCheckView {
    /// The policy's canonical text.
    pub policy: String,
    /// Whether BPF mode honours every rule.
    pub bpf_honours: bool,
    /// Each rule's verdict.
    pub rules: Vec<RuleView>,
}

/// How BPF mode stands to one rule, as `policy check` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleView {
    /// 1-based position in the policy.
    pub position: usize,
    /// The rule's text.
    pub text: String,
    /// `kernel`, `preload` or `cannot`.
    pub honour: &'static str,
    /// Why.
    pub why: String,
}

impl PolicyCheckView {
    /// The view of the analysis `a` of policy `policy` (its canonical text).
    pub fn new(policy: String, a: &Analysis) -> PolicyCheckView {
        PolicyCheckView {
            policy,
            bpf_honours: a.kernel.is_some(),
            rules: a
                .verdicts
                .iter()
                .map(|v| {
                    let (honour, why) = honour(&v.honour);
                    RuleView {
                        position: v.position,
                        text: v.text.clone(),
                        honour,
                        why,
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::json::golden::{assert_reads_back, assert_same, value};
    use smcrun_bpf::layout::Counters;
    use smcrun_bpf::rules;
    use smcrun_policy::Policy;

    fn count(program: &str, converted: u64) -> ProgramCount {
        ProgramCount {
            program: program.into(),
            converted,
        }
    }

    /// The cgroups and tree the golden files show.
    pub(crate) fn scopes() -> (Vec<Attachment>, TreeInfo) {
        let a = Attachment {
            kind: Kind::Cgroup,
            path: "/sys/fs/cgroup/smcrun-a".into(),
            id: 4242,
            key: 4242,
            since_unix: 1_796_000_000,
            policy: "tcp program sechod; smc".into(),
            counters: Counters {
                converted: 3,
                kept_tcp: 1,
            },
            programs: vec![count("redis-server", 2), count("memtier", 1)],
        };
        let b = Attachment {
            kind: Kind::Cgroup,
            path: "/sys/fs/cgroup/b".into(),
            id: 7,
            key: 7,
            since_unix: 0,
            policy: String::new(),
            counters: Counters::default(),
            programs: vec![],
        };
        let t = TreeInfo {
            program_id: 99,
            loaded_ns_since_boot: 0,
            processes: vec![12, 13],
            counters: Counters {
                converted: 5,
                kept_tcp: 0,
            },
            programs: vec![count("sechod", 5)],
        };
        let n = Attachment {
            kind: Kind::Netns,
            path: "/run/netns/pod-a".into(),
            id: 4_026_532_301,
            key: 8193,
            since_unix: 1_796_000_100,
            policy: String::new(),
            counters: Counters {
                converted: 2,
                kept_tcp: 0,
            },
            programs: vec![count("sechod", 2)],
        };
        (vec![a, b, n], t)
    }

    #[test]
    fn bpf_attach_list_and_detach_as_golden() {
        let (c, t) = scopes();
        let attached = Attached {
            id: 4242,
            slot: 3,
            was_attached: false,
            loaded: true,
        };
        let v = AttachView::new(Kind::Cgroup, &c[0].path, &attached, c[0].policy.clone());
        assert_same("bpf-attach", &v);
        let mut scopes: Vec<ScopeView> = c.iter().map(ScopeView::attached).collect();
        scopes.push(ScopeView::Tree(TreeView::new(&t, Some(1_796_000_005))));
        scopes.push(ScopeView::Tree(TreeView::new(&t, None)));
        assert_same("bpf-list", &ScopesListView { scopes });
        let d = Detached {
            scope: c[0].clone(),
            unloaded: true,
        };
        assert_same("bpf-detach", &DetachView::new(&d));
    }

    #[test]
    fn bpf_attach_list_reads_back_as_printed() {
        assert_reads_back::<ScopesListView>("bpf-list");
    }

    #[test]
    fn bpf_policy_check_as_golden() {
        for (name, text) in [
            ("bpf-policy-empty", ""),
            ("bpf-policy-kernel", "tcp program redis-*; smc"),
            ("bpf-policy-mixed", "tcp port 6379; tcp program /opt/*; smc"),
        ] {
            let p: Policy = text.parse().unwrap();
            let v = PolicyCheckView::new(p.to_string(), &rules::analyse(&p));
            assert_same(name, &v);
        }
    }

    #[test]
    fn bpf_tree_of_unknown_boot_time_has_null_since() {
        let (_, t) = scopes();
        let j = value(&ScopeView::Tree(TreeView::new(&t, None)));
        assert!(j["since_unix"].is_null(), "{j}");
        assert_eq!(j["scope"], "tree");
    }
}
