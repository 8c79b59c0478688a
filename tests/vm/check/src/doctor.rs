//! `smcrun doctor --json`'s questions: did the checks an operator counts on pass, and does the
//! sysctls check list every sysctl the kernel has.

use crate::source::{self, compact};
use crate::stats;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::doctor::json::DoctorView;
use smcrun_views::doctor::{Check, Status};
use smcrun_views::stats::json::StatsView;

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
/// What a check asks of `smcrun doctor --json`.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun doctor --json`, passed each of CHECKS (by id: `smc_diag`,
    /// `bpf:load`); with --exit, it says the command exited with that status.
    DoctorPassed {
        file: String,
        checks: Vec<String>,
        /// The status the command exited with.
        #[arg(long)]
        exit: Option<u8>,
    },
    /// FILE, a saved `smcrun doctor --json`: its sysctls check passed and lists each of NAMES
    /// (net.smc's, without the prefix) with its value.
    DoctorSysctls { file: String, names: Vec<String> },
    /// FILE, a saved `smcrun doctor --json`: check ID's detail says TEXT (what the kernel lacks,
    /// the Linux version that added it); with --status, the check has that status (`skip`).
    DoctorSays {
        file: String,
        id: String,
        text: String,
        #[arg(long)]
        status: Option<String>,
    },
    /// FILE, a saved `smcrun doctor --json`, passed every check but EXCEPT (an id, or the
    /// name of a per-technology row: `rx-buffer-full` is `rx-buffer-full:smcr` and `:smcd`).
    DoctorPassedBut { file: String, except: Vec<String> },
    /// DOCTOR, a saved `smcrun doctor --json`, judged the counters STATS (a `smcrun stats
    /// --json` taken right after) holds: the SMC-R rx buffer-full ratio, whose warning names
    /// net.smc.rmem at RMEM; the fallbacks of all connections, whose warning has advice.
    DoctorCounters {
        doctor: String,
        stats: String,
        rmem: String,
    },
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::DoctorPassed { file, checks, exit } => {
                source::with_file(file, |d: &DoctorView| {
                    if let Some(rc) = exit.filter(|rc| *rc != d.exit_code) {
                        return No(format!(
                            "smcrun doctor exited {rc}, its JSON says {}",
                            d.exit_code
                        ));
                    }
                    for id in checks {
                        match check(d, id) {
                            Some(c) if c.status == Status::Pass => {}
                            Some(c) => {
                                return No(format!("doctor: {id} did not pass: {}", compact(c)))
                            }
                            None => {
                                return No(format!(
                                    "doctor has no check {id}; passed: {}",
                                    passed(d)
                                ))
                            }
                        }
                    }
                    Yes(format!("exit {}, passed: {}", d.exit_code, passed(d)))
                })
            }
            Question::DoctorSysctls { file, names } => source::with_file(file, |d: &DoctorView| {
                let Some(c) = check(d, "sysctls") else {
                    return No(format!(
                        "doctor has no sysctls check; passed: {}",
                        passed(d)
                    ));
                };
                let line = format!("{} {}", spelled(c.status), c.detail);
                if c.status != Status::Pass {
                    return No(format!("doctor's sysctls check: {line}"));
                }
                let listed = |n: &str| {
                    c.detail
                        .split_whitespace()
                        .any(|w| w.strip_prefix(n).is_some_and(|v| v.starts_with('=')))
                };
                match names.iter().find(|n| !listed(n)) {
                    Some(n) => No(format!("doctor's sysctls check does not list {n}: {line}")),
                    None => Yes(line),
                }
            }),
            Question::DoctorSays {
                file,
                id,
                text,
                status,
            } => source::with_file(file, |d: &DoctorView| {
                let Some(c) = check(d, id) else {
                    return No(format!("doctor has no check {id}; passed: {}", passed(d)));
                };
                let right = status.iter().all(|s| spelled(c.status) == *s);
                if right && c.detail.contains(text.as_str()) {
                    Yes(format!("{id}: {} {}", spelled(c.status), c.detail))
                } else {
                    let is = status
                        .as_ref()
                        .map(|s| format!(" with status {s}"))
                        .unwrap_or_default();
                    No(format!(
                        "doctor: {id} does not say \"{text}\"{is}: {}",
                        compact(c)
                    ))
                }
            }),
            Question::DoctorPassedBut { file, except } => {
                source::with_file(file, |d: &DoctorView| {
                    let not: Vec<&str> = d
                        .checks
                        .iter()
                        .filter(|c| c.status != Status::Pass)
                        .filter(|c| !except.iter().any(|id| named(c, id)))
                        .map(|c| c.id.as_str())
                        .collect();
                    if not.is_empty() {
                        Yes(format!("passed: {}", passed(d)))
                    } else {
                        No(format!("doctor: not passed: {}", not.join(",")))
                    }
                })
            }
            Question::DoctorCounters {
                doctor,
                stats,
                rmem,
            } => source::with_file(doctor, |d: &DoctorView| {
                source::with_file(stats, |s: &StatsView| counters(d, s, rmem))
            }),
        }
    }
}

/// Whether `c` is the check `id`, or one of the per-technology rows named `id` (`id:smcr`).
fn named(c: &Check, id: &str) -> bool {
    let tech = c.id.strip_prefix(id).and_then(|t| t.strip_prefix(':'));
    c.id == id || matches!(tech, Some("smcr" | "smcd"))
}

/// Doctor's rx buffer and fallbacks rows against the counters `s` holds.
fn counters(d: &DoctorView, s: &StatsView, rmem: &str) -> Answer {
    let (Some(rx), Some(fb)) = (check(d, "rx-buffer-full:smcr"), check(d, "fallbacks")) else {
        return No(format!(
            "doctor has no rx-buffer-full:smcr or no fallbacks row; passed: {}",
            passed(d)
        ));
    };
    let pct = format!("{:.2}%", s.smcr.rx.buffer_full_pct);
    if !rx.detail.ends_with(&format!(" {pct} (threshold 5.00%)")) {
        return No(format!(
            "doctor's rx buffer ratio '{}' is not stats' {pct}",
            rx.detail
        ));
    }
    let now = format!("net.smc.rmem (now {rmem})");
    if rx.status == Status::Warn && !rx.advice.contains(&now) {
        return No(format!(
            "doctor's rx buffer advice does not name {now}: {}",
            rx.advice
        ));
    }
    let sum = |roles: [u64; 2]| roles[0] + roles[1];
    let fell = sum(stats::fallbacks(s));
    let smc = sum(stats::successes(&s.smcr)) + sum(stats::successes(&s.smcd));
    let total = smc + s.clnt_hs_err_cnt + s.srv_hs_err_cnt + fell;
    let of = format!("{fell} of {total} connections fell back to TCP");
    if !fb.detail.starts_with(&of) {
        return No(format!(
            "doctor's fallbacks row '{}' is not stats' {fell} of {total}",
            fb.detail
        ));
    }
    if fb.status == Status::Warn && fb.advice.is_empty() {
        return No(format!("a fallbacks warning without advice: {}", fb.detail));
    }
    Yes(format!(
        "rx buffer: {}; fallbacks: {}",
        rx.detail, fb.detail
    ))
}

/// A status as the JSON spells it (`pass`).
fn spelled(s: Status) -> String {
    compact(&s).trim_matches('"').to_string()
}

/// Check `id` of `d`.
fn check<'d>(d: &'d DoctorView, id: &str) -> Option<&'d Check> {
    d.checks.iter().find(|c| c.id == id)
}

/// The ids of the checks that passed, for a message.
fn passed(d: &DoctorView) -> String {
    let ids: Vec<&str> = d
        .checks
        .iter()
        .filter(|c| c.status == Status::Pass)
        .map(|c| c.id.as_str())
        .collect();
    ids.join(",")
}
