//! `smcrun ps --json` and `smcrun why --json`: the programs under smcrun with their reports, and
//! with `--all` the agent and `bpf_scopes` (BPF mode's scopes with their socket counts); `why`'s
//! object for a process the agent counted.

use std::path::Path;

use serde::Serialize;
use smcrun_bpf::layout::Counters;
use smcrun_bpf::scopes::Scopes;
use smcrun_report::ProcessReport;

use crate::bpf::json::ProgramView;

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

/// `ps --all --json`: the processes under smcrun, the other processes with SMC sockets (null
/// when they could not be listed), the agent (null when none runs) and BPF mode's scopes.
#[derive(Serialize)]
pub struct PsAllView<'a, O: Serialize> {
    /// The programs under smcrun.
    pub processes: &'a [PsEntry],
    /// The other processes with SMC sockets (null when they could not be listed).
    pub smc_processes: &'a Option<O>,
    /// The agent (null when none runs).
    pub agent: Option<AgentView<'a>>,
    /// BPF mode's scopes.
    pub bpf_scopes: BpfScopesView<'a>,
}

/// The agent as `ps --all --json` shows it.
#[derive(Serialize)]
pub struct AgentView<'a> {
    /// Process id.
    pub pid: u32,
    /// Whether its programs are attached.
    pub attached: bool,
    /// Why it is not attached, if it said.
    pub error: Option<&'a str>,
    /// What it lost.
    pub overflow: &'a crate::agent_state::Overflow,
}

/// One program under smcrun, as `ps --json` lists it.
#[derive(Serialize)]
pub struct PsEntry {
    /// The pid in this reader's pid namespace (the report's own pid when it is the same one).
    pub pid: u32,
    /// The pid in the process's own pid namespace, when that is another one (a container's
    /// process seen from the host); the report file is named by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<u32>,
    /// The program's name.
    pub program: String,
    /// Its executable.
    pub exe: String,
    /// The user it runs as now.
    pub user: String,
    /// That user's id.
    pub uid: Option<u32>,
    /// running, exited, dead or elsewhere.
    pub state: &'static str,
    /// null: the process registered (at fork, or before a uid switch) but wrote no numbers yet.
    pub report: Option<ProcessReport>,
}

/// `why --json` of a process the agent counted: its report (null when it runs without smcrun)
/// and the kernel's counts.
#[derive(Serialize)]
pub struct WhyKernelView<'a> {
    /// Process id.
    pub pid: u32,
    /// Its runtime's report.
    pub report: Option<&'a ProcessReport>,
    /// The agent's counts for it.
    pub kernel: &'a crate::agent_state::Process,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::golden::{assert_same, value};
    use smcrun_bpf::pinned::Kind;

    #[test]
    fn procs_bpf_scopes_as_golden() {
        let (all, tree) = crate::bpf::json::tests::scopes();
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
        let (all, _) = crate::bpf::json::tests::scopes();
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
