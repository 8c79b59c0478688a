//! `smcrun ps --all --json`'s `bpf_scopes`: BPF mode's scopes with their socket counts, as the
//! processes' view shows them.

use std::path::Path;

use serde::Serialize;
use smcrun_bpf::layout::Counters;
use smcrun_bpf::scopes::Scopes;

use crate::json::bpf::ProgramView;

/// `bpf_scopes`: the attached cgroups and network namespaces, and the `smcrun --bpf` trees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BpfScopesView<'a> {
    /// Attached cgroups.
    pub cgroups: Vec<CgroupScopeView<'a>>,
    /// Attached network namespaces.
    pub netns: Vec<NetnsScopeView<'a>>,
    /// Process trees.
    pub trees: Vec<TreeScopeView<'a>>,
}

impl<'a> BpfScopesView<'a> {
    /// The view of `s`.
    pub fn new(s: &'a Scopes) -> BpfScopesView<'a> {
        BpfScopesView {
            cgroups: s
                .cgroups
                .iter()
                .map(|c| CgroupScopeView {
                    path: &c.path,
                    since_unix: c.since_unix,
                    policy: &c.policy,
                    sockets: SocketCounts::new(&c.counters),
                    programs: ProgramView::all(&c.programs),
                })
                .collect(),
            netns: s
                .netns
                .iter()
                .map(|n| NetnsScopeView {
                    path: &n.path,
                    inode: n.id,
                    since_unix: n.since_unix,
                    policy: &n.policy,
                    sockets: SocketCounts::new(&n.counters),
                    programs: ProgramView::all(&n.programs),
                })
                .collect(),
            trees: s
                .trees
                .iter()
                .map(|t| TreeScopeView {
                    program_id: t.program_id,
                    processes: &t.processes,
                    sockets: SocketCounts::new(&t.counters),
                    programs: ProgramView::all(&t.programs),
                })
                .collect(),
        }
    }
}

/// A scope's sockets: made SMC, kept TCP by the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// An attached cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupScopeView<'a> {
    /// The cgroup directory.
    pub path: &'a Path,
    /// Attached since (seconds since the epoch).
    pub since_unix: u64,
    /// Its policy (empty: all SMC).
    pub policy: &'a str,
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

/// An attached network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetnsScopeView<'a> {
    /// The namespace file it was attached by.
    pub path: &'a Path,
    /// Its nsfs inode number.
    pub inode: u64,
    /// Attached since (seconds since the epoch).
    pub since_unix: u64,
    /// Its policy (empty: all SMC).
    pub policy: &'a str,
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

/// An `smcrun --bpf` process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeScopeView<'a> {
    /// The BPF program's id.
    pub program_id: u32,
    /// The tree's processes.
    pub processes: &'a [u32],
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::golden::{assert_same, value};
    use smcrun_bpf::pinned::Kind;

    #[test]
    fn procs_bpf_scopes_as_golden() {
        let (all, tree) = crate::json::bpf::tests::scopes();
        let (netns, cgroups) = all.into_iter().partition(|a| a.kind == Kind::Netns);
        let s = Scopes {
            cgroups,
            netns,
            trees: vec![tree],
        };
        assert_same("ps-bpf-scopes", &BpfScopesView::new(&s));
        assert_same(
            "ps-bpf-scopes-empty",
            &BpfScopesView::new(&Scopes::default()),
        );
    }

    #[test]
    fn procs_scope_has_every_key_even_when_empty() {
        // BPF scopes have no value the kernel may leave out: an empty policy is "", not null
        let (all, _) = crate::json::bpf::tests::scopes();
        let (netns, cgroups) = all.into_iter().partition(|a| a.kind == Kind::Netns);
        let s = Scopes {
            cgroups,
            netns,
            trees: vec![],
        };
        let j = value(&BpfScopesView::new(&s));
        assert_eq!(j["cgroups"][1]["policy"], "");
        assert_eq!(j["cgroups"][1]["programs"], serde_json::json!([]));
        assert_eq!(j["cgroups"][1]["sockets"]["kept_tcp"], 0);
    }
}
