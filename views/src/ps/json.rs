//! `smcrun ps --json` and `smcrun why --json`: the programs under smcrun with their reports, and
//! with `--all` the agent and `bpf_scopes` (BPF mode's scopes with their socket counts); `why`'s
//! object for a process the agent counted.

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Serialize};
use smcrun_bpf::scopes::Scopes;
use smcrun_report::ProcessReport;

use crate::bpf::json::{ProgramView, SocketCounts};

/// `bpf_scopes`: the attached cgroups and network namespaces, and the `smcrun --bpf` trees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
                    path: Cow::Borrowed(&c.path),
                    since_unix: c.since_unix,
                    policy: Cow::Borrowed(&c.policy),
                    sockets: SocketCounts::new(&c.counters),
                    programs: ProgramView::all(&c.programs),
                })
                .collect(),
            netns: s
                .netns
                .iter()
                .map(|n| NetnsScopeView {
                    path: Cow::Borrowed(&n.path),
                    inode: n.id,
                    since_unix: n.since_unix,
                    policy: Cow::Borrowed(&n.policy),
                    sockets: SocketCounts::new(&n.counters),
                    programs: ProgramView::all(&n.programs),
                })
                .collect(),
            trees: s
                .trees
                .iter()
                .map(|t| TreeScopeView {
                    program_id: t.program_id,
                    processes: Cow::Borrowed(&t.processes),
                    sockets: SocketCounts::new(&t.counters),
                    programs: ProgramView::all(&t.programs),
                })
                .collect(),
        }
    }
}

/// An attached cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupScopeView<'a> {
    /// The cgroup directory.
    pub path: Cow<'a, Path>,
    /// Attached since (seconds since the epoch).
    pub since_unix: u64,
    /// Its policy (empty: all SMC).
    pub policy: Cow<'a, str>,
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

/// An attached network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsScopeView<'a> {
    /// The namespace file it was attached by.
    pub path: Cow<'a, Path>,
    /// Its nsfs inode number.
    pub inode: u64,
    /// Attached since (seconds since the epoch).
    pub since_unix: u64,
    /// Its policy (empty: all SMC).
    pub policy: Cow<'a, str>,
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

/// An `smcrun --bpf` process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeScopeView<'a> {
    /// The BPF program's id.
    pub program_id: u32,
    /// The tree's processes.
    pub processes: Cow<'a, [u32]>,
    /// Its sockets.
    pub sockets: SocketCounts,
    /// Sockets made SMC per program.
    pub programs: Vec<ProgramView>,
}

/// `ps --all --json`: the processes under smcrun, the other processes with SMC sockets (null
/// when they could not be listed), the agent (null when none runs) and BPF mode's scopes.
///
/// A reader (the VM's guest checks) gets it back with [`serde_json::from_str`].
#[derive(Serialize, Deserialize)]
pub struct PsAllView<'a> {
    /// The programs under smcrun.
    pub processes: Cow<'a, [PsEntry]>,
    /// The other processes with SMC sockets (null when they could not be listed).
    pub smc_processes: Option<Cow<'a, [SmcProcess]>>,
    /// The agent (null when none runs).
    pub agent: Option<AgentView<'a>>,
    /// BPF mode's scopes.
    pub bpf_scopes: BpfScopesView<'a>,
}

/// One process with SMC sockets, under smcrun or not (`ps --all`'s `smc_processes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmcProcess {
    /// Process id.
    pub pid: u32,
    /// Its command name.
    pub name: String,
    /// SMC sockets over SMC-R.
    pub smcr: usize,
    /// Over SMC-D.
    pub smcd: usize,
    /// Fallen back to TCP.
    pub fallback: usize,
    /// Listening SMC sockets (not connections).
    pub listening: usize,
    /// Fallback reasons, `0x03010000 PEERNOSMC` style, with how many sockets each, most first.
    pub reasons: Vec<(String, usize)>,
    /// The BPF scope it is in: `tree` (a `smcrun --bpf` command's), `cgroup PATH`, `netns PATH`,
    /// or `None`.
    pub bpf_scope: Option<String>,
    /// Its connections since the smcrun agent started, ended ones too, as the kernel saw them
    /// (`None` when no agent runs or it saw none of this process).
    pub kernel: Option<crate::agent_state::Sides>,
}

/// The agent as `ps --all --json` shows it.
#[derive(Serialize, Deserialize)]
pub struct AgentView<'a> {
    /// Process id.
    pub pid: u32,
    /// Whether its programs are attached.
    pub attached: bool,
    /// Why it is not attached, if it said.
    pub error: Option<Cow<'a, str>>,
    /// What it lost.
    pub overflow: Cow<'a, crate::agent_state::Overflow>,
}

/// One program under smcrun, as `ps --json` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub state: Cow<'static, str>,
    /// null: the process registered (at fork, or before a uid switch) but wrote no numbers yet.
    pub report: Option<ProcessReport>,
}

/// `why --json` of a process the agent counted: its report (null when it runs without smcrun)
/// and the kernel's counts.
#[derive(Serialize, Deserialize)]
pub struct WhyKernelView<'a> {
    /// Process id.
    pub pid: u32,
    /// Its runtime's report.
    pub report: Option<Cow<'a, ProcessReport>>,
    /// The agent's counts for it.
    pub kernel: Cow<'a, crate::agent_state::Process>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::golden::{assert_reads_back, assert_same, value};
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
        assert_reads_back::<BpfScopesView>("ps-bpf-scopes");
        assert_same(
            "ps-bpf-scopes-empty",
            &BpfScopesView::new(&Scopes::default()),
        );
    }

    #[test]
    fn why_and_ps_all_read_back_as_printed() {
        // the VM's guest checks (tests/vm/check) read these back: what is printed must parse
        // into the same values
        let mut kernel = crate::agent_state::Process {
            pid: 42,
            start_ticks: 7,
            comm: "redis-server".into(),
            exe: None,
            cgroup_id: 9,
            sides: Default::default(),
        };
        kernel.sides.server.smcd = 3;
        kernel.sides.server.reasons.insert("0x03010000".into(), 1);
        let mut report = ProcessReport::default();
        report.connections.smc_d = 3;
        let why = WhyKernelView {
            pid: 42,
            report: Some(Cow::Borrowed(&report)),
            kernel: Cow::Borrowed(&kernel),
        };
        let back: WhyKernelView =
            serde_json::from_str(&serde_json::to_string(&why).unwrap()).unwrap();
        assert_eq!(back.kernel.as_ref(), &kernel);
        assert_eq!(back.report.as_deref(), Some(&report));

        let others = vec![SmcProcess {
            pid: 42,
            name: "redis-server".into(),
            smcr: 0,
            smcd: 3,
            fallback: 1,
            listening: 1,
            reasons: vec![("0x03010000 PEERNOSMC".into(), 1)],
            bpf_scope: Some("tree".into()),
            kernel: Some(kernel.sides.clone()),
        }];
        let overflow = crate::agent_state::Overflow {
            probes_missed: Some(2),
            ..Default::default()
        };
        let all = PsAllView {
            processes: Cow::Owned(vec![PsEntry {
                pid: 42,
                ns_pid: Some(1),
                program: "redis-server".into(),
                exe: "/usr/bin/redis-server".into(),
                user: "nobody".into(),
                uid: Some(65534),
                state: "running".into(),
                report: Some(report.clone()),
            }]),
            smc_processes: Some(Cow::Borrowed(&others)),
            agent: Some(AgentView {
                pid: 5,
                attached: true,
                error: None,
                overflow: Cow::Borrowed(&overflow),
            }),
            bpf_scopes: BpfScopesView::default(),
        };
        let back: PsAllView = serde_json::from_str(&serde_json::to_string(&all).unwrap()).unwrap();
        assert_eq!(back.smc_processes.as_deref(), Some(&others[..]));
        assert_eq!(back.processes[0].ns_pid, Some(1));
        assert_eq!(back.processes[0].state, "running");
        assert_eq!(back.processes[0].report.as_ref(), Some(&report));
        let agent = back.agent.expect("the agent");
        assert_eq!((agent.pid, agent.overflow.as_ref()), (5, &overflow));
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
