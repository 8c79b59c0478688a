//! `smcrun doctor --json`'s questions: did the checks an operator counts on pass, and does the
//! sysctls check list every sysctl the kernel has.

use crate::source::{self, compact};
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::doctor::json::DoctorView;
use smcrun_views::doctor::{Check, Status};

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
        }
    }
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
