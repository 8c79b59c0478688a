//! `smcrun ps --json`'s questions: do the programs under smcrun report the connections a check
//! made, is a killed one shown dead once.

use crate::source::{self, compact};
use crate::Answer::{self, No, NotYet, Yes};
use clap::Subcommand;
use smcrun_views::ps::json::PsEntry;

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// The processes of PROGRAM (the running ones, with --running) report N SMC-R connections
    /// or more in all (waits while fewer).
    PsSmcr {
        program: String,
        n: u64,
        /// Only processes still running.
        #[arg(long)]
        running: bool,
    },
    /// Every PID is listed with a report of SMC-R connections only (at least one, none TCP),
    /// N SMC-R connections in all (waits while one is not listed or the sum is not N).
    PsSmcrOnly {
        /// SMC-R connections of all PIDs together.
        #[arg(long)]
        total: u64,
        #[arg(required = true)]
        pids: Vec<u32>,
    },
    /// Exactly one process of UID reports N SMC-R connections (waits for it); prints its pid.
    PsUid { uid: u32, n: u64 },
    /// PID, killed, is shown dead by one `smcrun ps --json` and no longer listed by the next.
    PsKilled { pid: u32 },
    /// The first running PROGRAM reports at least --smcr SMC-R and --tcp TCP connections (none
    /// TCP with --no-tcp; its most frequent reason --top-reason, `0x03010000`); waits while not.
    /// Prints its pid.
    PsRunning {
        program: String,
        #[arg(long, default_value_t = 0)]
        smcr: u64,
        #[arg(long, default_value_t = 0)]
        tcp: u64,
        #[arg(long)]
        no_tcp: bool,
        #[arg(long)]
        top_reason: Option<String>,
    },
    /// PID is listed once, reporting N SMC-D connections (waits while not).
    PsSmcd { pid: u32, n: u64 },
}

/// An entry as a message shows it: pid, program, uid, state and its report's counts.
fn brief(e: &PsEntry) -> String {
    let uid = e.uid.map_or("-".into(), |u| u.to_string());
    let c = e
        .report
        .as_ref()
        .map_or("no report".into(), |r| compact(&r.connections));
    format!("{} {} uid {uid} {}: {c}", e.pid, e.program, e.state)
}

fn briefs<'a>(list: impl IntoIterator<Item = &'a PsEntry>) -> String {
    let all: Vec<String> = list.into_iter().map(brief).collect();
    format!("[{}]", all.join("; "))
}

/// An entry's SMC-R connections (0 without a report).
fn smcr(e: &PsEntry) -> u64 {
    e.report.as_ref().map_or(0, |r| r.connections.smc_r)
}

/// Whether an entry reports SMC-R connections only: at least one, none TCP.
fn smcr_only(e: &PsEntry) -> bool {
    e.report.as_ref().is_some_and(|r| {
        let c = &r.connections;
        c.tcp == 0 && c.smc_r == c.total && c.total >= 1
    })
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::PsSmcr {
                program,
                n,
                running,
            } => with_ps(|ps| {
                let mine: Vec<&PsEntry> = ps
                    .iter()
                    .filter(|e| &e.program == program && (!running || e.state == "running"))
                    .collect();
                let sum: u64 = mine.iter().map(|e| smcr(e)).sum();
                if sum >= *n {
                    Yes(format!(
                        "{program}: {sum} SMC-R connections in the reports of {}",
                        briefs(mine)
                    ))
                } else {
                    NotYet(format!(
                        "smcrun ps --json: {program} reports {sum} SMC-R connections, expected {n} or more: {}",
                        briefs(ps)
                    ))
                }
            }),
            Question::PsSmcrOnly { total, pids } => with_ps(|ps| {
                let mine: Vec<&PsEntry> = ps.iter().filter(|e| pids.contains(&e.pid)).collect();
                let sum: u64 = mine.iter().map(|e| smcr(e)).sum();
                if mine.len() != pids.len() || sum != *total {
                    return NotYet(format!(
                        "smcrun ps --json does not list {} processes with {total} SMC-R connections: {}",
                        pids.len(),
                        briefs(ps)
                    ));
                }
                let mixed: Vec<&PsEntry> = mine.iter().copied().filter(|e| !smcr_only(e)).collect();
                if mixed.is_empty() {
                    Yes(briefs(mine))
                } else {
                    No(format!("not every connection SMC-R: {}", briefs(mixed)))
                }
            }),
            Question::PsUid { uid, n } => with_ps(|ps| {
                let mine: Vec<&PsEntry> = ps
                    .iter()
                    .filter(|e| e.uid == Some(*uid) && smcr(e) == *n)
                    .collect();
                match mine[..] {
                    [e] => Yes(e.pid.to_string()),
                    _ => NotYet(format!(
                        "smcrun ps --json does not list one process of uid {uid} with {n} SMC-R connections: {}",
                        briefs(ps)
                    )),
                }
            }),
            Question::PsSmcd { pid, n } => with_ps(|ps| {
                let mine: Vec<&PsEntry> = ps
                    .iter()
                    .filter(|e| {
                        e.pid == *pid
                            && e.report.as_ref().is_some_and(|r| r.connections.smc_d == *n)
                    })
                    .collect();
                match mine[..] {
                    [e] => Yes(brief(e)),
                    _ => NotYet(format!(
                        "smcrun ps --json does not list {pid} once with {n} SMC-D connections: {}",
                        briefs(ps)
                    )),
                }
            }),
            Question::PsKilled { pid } => with_ps(|first| {
                let dead = first
                    .iter()
                    .filter(|e| e.pid == *pid && e.state == "dead")
                    .count();
                with_ps(|then| {
                    let again = then.iter().filter(|e| e.pid == *pid).count();
                    let line = format!("shown dead {dead} time(s), then listed {again} time(s)");
                    if dead == 1 && again == 0 {
                        Yes(line)
                    } else {
                        No(format!(
                            "smcrun ps after SIGKILL of {pid}: {line}: {}",
                            briefs(first.iter().chain(then).filter(|e| e.pid == *pid))
                        ))
                    }
                })
            }),
            Question::PsRunning {
                program,
                smcr: min_smcr,
                tcp,
                no_tcp,
                top_reason,
            } => with_ps(|ps| {
                let Some(e) = ps
                    .iter()
                    .find(|e| &e.program == program && e.state == "running")
                else {
                    return NotYet(format!(
                        "smcrun ps --json lists no running {program}: {}",
                        briefs(ps)
                    ));
                };
                let top = e
                    .report
                    .as_ref()
                    .and_then(|r| r.reasons.first())
                    .and_then(|r| r.code.clone());
                let c = e.report.as_ref().map(|r| &r.connections);
                let right = c.is_some_and(|c| {
                    c.smc_r >= *min_smcr && c.tcp >= *tcp && (!no_tcp || c.tcp == 0)
                }) && top_reason.iter().all(|want| top.as_ref() == Some(want));
                if right {
                    Yes(e.pid.to_string())
                } else {
                    let reasons = e
                        .report
                        .as_ref()
                        .map_or("none".into(), |r| compact(&r.reasons));
                    NotYet(format!("{}; reasons {reasons}", brief(e)))
                }
            }),
        }
    }
}

/// `f` of what `smcrun ps --json` lists now; not yet when it fails.
fn with_ps(f: impl FnOnce(&[PsEntry]) -> Answer) -> Answer {
    match source::smcrun::<Vec<PsEntry>>(&["ps", "--json"]) {
        Ok(ps) => f(&ps),
        Err(e) => NotYet(e),
    }
}
