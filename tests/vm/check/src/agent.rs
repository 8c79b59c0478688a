//! The agent's questions: is it attached, did it count a process's connections in one mode, do
//! `why`, `ps --all` and the preload's own report say the same, did it lose anything.

use crate::source::{self, compact};
use crate::stats::Side;
use crate::Answer::{self, No, NotYet, Yes};
use clap::{Args, Subcommand, ValueEnum};
use smcrun_views::agent_state::{Counts, Sides, State};
use smcrun_views::ps::json::{PsAllView, SmcProcess, WhyKernelView};
use std::collections::BTreeMap;

impl Side {
    /// The agent's counts of this side.
    fn of(self, s: &Sides) -> &Counts {
        match self {
            Side::Client => &s.client,
            Side::Server => &s.server,
        }
    }
}

/// A connection's mode, as the agent counts it.
#[derive(Clone, Copy, ValueEnum)]
pub enum Mode {
    /// SMC-R.
    Smcr,
    /// SMC-D.
    Smcd,
    /// Fallen back to TCP.
    Tcp,
}

impl Mode {
    fn of(self, c: &Counts) -> u64 {
        match self {
            Mode::Smcr => c.smcr,
            Mode::Smcd => c.smcd,
            Mode::Tcp => c.tcp,
        }
    }

    /// A process's sockets in this mode, as `ps --all` counts them.
    pub(crate) fn of_process(self, p: &SmcProcess) -> usize {
        match self {
            Mode::Smcr => p.smcr,
            Mode::Smcd => p.smcd,
            Mode::Tcp => p.fallback,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Smcr => "smcr",
            Mode::Smcd => "smcd",
            Mode::Tcp => "tcp",
        }
    }
}

/// A process's connections of one side in one mode: `PID SIDE MODE N`.
#[derive(Args)]
pub struct Counted {
    /// The process.
    pid: u32,
    /// Its side.
    #[arg(value_enum)]
    side: Side,
    /// The mode.
    #[arg(value_enum)]
    mode: Mode,
    /// How many.
    n: u64,
}

/// Whether the kernel counts the probes' missed runs (Linux 6.7 and later do).
#[derive(Clone, Copy, ValueEnum)]
pub enum MissedRuns {
    /// It must count them.
    Counted,
    /// It cannot (the state says null).
    NotCounted,
}

#[derive(Subcommand)]
pub enum Question {
    /// The agent's probes are attached (and were attached N times, with --attachments).
    AgentAttached {
        /// How often they must have been attached.
        #[arg(long)]
        attachments: Option<u64>,
    },
    /// The agent says it is not attached (smc is gone).
    AgentDetached,
    /// The agent counted N connections of PID's SIDE in MODE, and none in another mode or not
    /// seen (waits while fewer than N are in MODE).
    AgentSide(Counted),
    /// The agent counted at least N connections of every process's SIDE in MODE.
    AgentTotal {
        #[arg(value_enum)]
        side: Side,
        #[arg(value_enum)]
        mode: Mode,
        n: u64,
    },
    /// The agent lost nothing: no map overflowed and no probe run was missed.
    AgentLostNothing {
        /// Whether this kernel must count missed probe runs (6.7 and later) or must not.
        #[arg(long, value_enum)]
        missed_runs: Option<MissedRuns>,
    },
    /// The agent's totals of both sides have fallback reasons.
    AgentReasons,
    /// Prints `MISSED CLIENT_RX SERVER_RX`: the probe runs the agent missed, and the bytes it
    /// counted received by CPID's clients and SPID's servers.
    AgentMissed { cpid: u32, spid: u32 },
    /// `smcrun why PID --json` has the agent's N connections of SIDE in MODE.
    WhyKernel(Counted),
    /// `smcrun why PID --json` has no preload report (PID runs without the shim).
    WhyNoReport { pid: u32 },
    /// `smcrun why PID --json`'s preload report classified N connections (waits while fewer)
    /// and agrees with the agent's counts of SIDE: the same total and TCP, its SMC-R, SMC-D and
    /// "SMC, mode not read" together the agent's SMC, neither SMC-R nor SMC-D above the agent's.
    WhyReport {
        pid: u32,
        #[arg(value_enum)]
        side: Side,
        n: u64,
    },
    /// `smcrun ps --all --json` lists PID among the processes with SMC sockets with the agent's
    /// N connections of SIDE in MODE.
    PsKernel(Counted),
}

/// A process's counts of one side as the check prints them (the reasons left out).
fn brief(c: &Counts) -> String {
    format!(
        "smcr {} smcd {} tcp {} not_seen {} tx_bytes {} rx_bytes {}",
        c.smcr, c.smcd, c.tcp, c.not_seen, c.tx_bytes, c.rx_bytes
    )
}

/// What the agent holds, for a message: what it lost, its totals, and its open sockets
/// counted by process, role and mode.
fn context(s: &State) -> String {
    let mut open: BTreeMap<(u32, &str, &str), u64> = BTreeMap::new();
    for k in &s.sockets {
        *open.entry((k.pid, &k.role, &k.mode)).or_default() += 1;
    }
    let open: Vec<String> = open
        .iter()
        .map(|((pid, role, mode), n)| format!("{pid} {role} {mode}: {n}"))
        .collect();
    format!(
        "overflow {}; all: client {}, server {}; open sockets [{}]",
        compact(&s.summary.overflow),
        brief(&s.summary.total.client),
        brief(&s.summary.total.server),
        open.join(", ")
    )
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::AgentAttached { attachments } => with_agent(|s| {
                let m = &s.summary;
                let line = format!(
                    "attached {}, attachments {}, error {:?}",
                    m.attached, m.attachments, m.error
                );
                if m.attached && (attachments.is_none() || *attachments == Some(m.attachments)) {
                    Yes(String::new())
                } else {
                    NotYet(format!("the agent: {line}"))
                }
            }),
            Question::AgentDetached => with_agent(|s| {
                if s.summary.attached {
                    NotYet("the agent still says attached".into())
                } else {
                    Yes(String::new())
                }
            }),
            Question::AgentSide(Counted { pid, side, mode, n }) => with_agent(|s| {
                let Some(p) = s.process(*pid) else {
                    return NotYet(format!(
                        "the agent has no counts for pid {pid}; {}",
                        context(s)
                    ));
                };
                let c = side.of(&p.sides);
                if mode.of(c) != *n {
                    return NotYet(format!(
                        "the agent counted for the {} (pid {pid}) {} {}: {}; {}",
                        side.name(),
                        mode.of(c),
                        mode.name(),
                        compact(c),
                        context(s)
                    ));
                }
                if c.total() != *n {
                    return No(format!(
                        "the {} (pid {pid}) has connections not {}: {}",
                        side.name(),
                        mode.name(),
                        compact(c)
                    ));
                }
                Yes(brief(c))
            }),
            Question::AgentTotal { side, mode, n } => with_agent(|s| {
                let c = side.of(&s.summary.total);
                if mode.of(c) >= *n {
                    Yes(String::new())
                } else {
                    NotYet(format!(
                        "the agent's {} total has {} {}, expected at least {n}: {}",
                        side.name(),
                        mode.of(c),
                        mode.name(),
                        compact(c)
                    ))
                }
            }),
            Question::AgentLostNothing { missed_runs } => with_agent(|s| {
                let o = &s.summary.overflow;
                let line = compact(o);
                match (missed_runs, o.probes_missed) {
                    (Some(MissedRuns::Counted), None) => {
                        return No(format!(
                            "the agent does not count missed probe runs here: {line}"
                        ))
                    }
                    (Some(MissedRuns::NotCounted), Some(_)) => {
                        return No(format!(
                            "the agent counts missed probe runs on a kernel before 6.7: {line}"
                        ))
                    }
                    _ => {}
                }
                let lost =
                    o.live_full + o.done_full + o.inflight_full + o.probes_missed.unwrap_or(0);
                if lost == 0 {
                    Yes(line)
                } else {
                    No(format!("the agent lost records: {line}"))
                }
            }),
            Question::AgentReasons => with_agent(|s| {
                let t = &s.summary.total;
                let line = format!(
                    "client {}; server {}",
                    compact(&t.client),
                    compact(&t.server)
                );
                if t.client.reasons.is_empty() || t.server.reasons.is_empty() {
                    No(format!(
                        "the agent has no fallback reasons on a side: {line}"
                    ))
                } else {
                    Yes(line)
                }
            }),
            Question::AgentMissed { cpid, spid } => with_agent(|s| {
                let rx = |pid: u32, side: Side| {
                    s.processes
                        .iter()
                        .find(|p| p.pid == pid)
                        .map(|p| side.of(&p.sides).rx_bytes)
                };
                match (s.summary.overflow.probes_missed, rx(*cpid, Side::Client), rx(*spid, Side::Server)) {
                    (Some(m), Some(c), Some(sv)) => Yes(format!("{m} {c} {sv}")),
                    (m, c, sv) => No(format!(
                        "missed probe runs {m:?}, client {cpid} received {c:?}, server {spid} received {sv:?}: one is not counted"
                    )),
                }
            }),
            Question::WhyKernel(Counted { pid, side, mode, n }) => with_why(*pid, |w| {
                let c = side.of(&w.kernel.sides);
                if mode.of(c) == *n {
                    Yes(String::new())
                } else {
                    No(format!(
                        "smcrun why {pid} --json: the kernel's {} {}: {}, expected {n}",
                        side.name(),
                        mode.name(),
                        compact(c)
                    ))
                }
            }),
            Question::WhyNoReport { pid } => with_why(*pid, |w| {
                match &w.report {
                None => Yes(String::new()),
                Some(r) => No(format!(
                    "smcrun why {pid} --json has a preload report for a program not under the preload: {}",
                    compact(&r.connections)
                )),
            }
            }),
            Question::WhyReport { pid, side, n } => with_why(*pid, |w| {
                let Some(r) = &w.report else {
                    return NotYet(format!("smcrun why {pid} --json has no preload report"));
                };
                let r = &r.connections;
                let k = side.of(&w.kernel.sides);
                let line = format!(
                    "the preload's report total {} smc_r {} smc_d {} smc_unknown {} tcp {}",
                    r.total, r.smc_r, r.smc_d, r.smc_unknown, r.tcp
                );
                if r.smc() + r.tcp != *n {
                    return NotYet(format!(
                        "the preload's report of pid {pid} does not count {n} classified connections: {}",
                        compact(r)
                    ));
                }
                let agree = r.total == k.total()
                    && r.tcp == k.tcp
                    && r.smc() == k.smcr + k.smcd
                    && r.smc_r <= k.smcr
                    && r.smc_d <= k.smcd;
                if agree {
                    Yes(line)
                } else {
                    No(format!(
                        "the preload's report of pid {pid} and the agent disagree: report {}, kernel {}",
                        compact(r),
                        compact(k)
                    ))
                }
            }),
            Question::PsKernel(Counted { pid, side, mode, n }) => {
                source::with_smcrun(&["ps", "--all", "--json"], |ps: &PsAllView| {
                    let mine: Vec<_> = ps
                        .smc_processes
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .filter(|p| p.pid == *pid)
                        .collect();
                    let counted: Vec<Option<u64>> = mine
                        .iter()
                        .map(|p| p.kernel.as_ref().map(|k| mode.of(side.of(k))))
                        .collect();
                    if counted == [Some(*n)] {
                        Yes(String::new())
                    } else {
                        No(format!(
                            "ps --all --json does not count {n} {} for pid {pid}: {}",
                            mode.name(),
                            compact(&mine)
                        ))
                    }
                })
            }
        }
    }
}

/// `f` of the agent's state; not yet when it cannot be read.
fn with_agent(f: impl FnOnce(&State) -> Answer) -> Answer {
    match source::agent() {
        Ok(s) => f(&s),
        Err(e) => NotYet(e),
    }
}

/// `f` of `smcrun why PID --json`, a process the agent counted; no when it fails.
fn with_why(pid: u32, f: impl FnOnce(&WhyKernelView) -> Answer) -> Answer {
    source::with_smcrun(&["why", &pid.to_string(), "--json"], f)
}
