//! BPF mode's questions, of `smcrun attach --list --json` and `smcrun ps --all --json`: which
//! scopes are attached with which counts, and whether anything is left attached or pinned.

use crate::agent::Mode;
use crate::source::{self, compact};
use crate::Answer::{self, No, NotYet, Yes};
use clap::Subcommand;
use smcrun_bpf::pinned::PIN_DIR;
use smcrun_views::bpf::json::{AttachmentView, ScopeView, ScopesListView, TargetView};
use smcrun_views::ps::json::{PsAllView, SmcProcess};

const LIST: &[&str] = &["attach", "--list", "--json"];

/// What a check asks of BPF mode's scopes.
// (the prefix is the command line's: every module's questions share one list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// `smcrun attach --list --json` lists no scope and nothing is pinned in smcrun's bpffs
    /// directory (waits while something is).
    BpfNothingAttached,
    /// `smcrun attach --list --json` lists N `smcrun --bpf` process trees (waits while not).
    BpfTrees { n: usize },
    /// `smcrun attach --list --json`'s first cgroup is CGROUP, with N sockets made SMC, the first
    /// of them by PROGRAM.
    BpfCgroup {
        cgroup: String,
        n: u64,
        program: String,
    },
    /// `smcrun attach --list --json` lists exactly these scopes, each as
    /// `KIND:CGROUP:MADE-SMC:KEPT-TCP` (`cgroup:/sys/fs/cgroup/a:1:0`, `tree:-:1:0`).
    BpfScopes { scopes: Vec<String> },
    /// `smcrun ps --all --json` lists at least N processes with MODE sockets in an `smcrun
    /// --bpf` tree scope, and a tree scope.
    BpfPsTrees {
        #[arg(value_enum, ignore_case = true)]
        mode: Mode,
        n: usize,
    },
}

/// A scope as `bpf-scopes` names it: `KIND:CGROUP:MADE-SMC:KEPT-TCP`.
fn named(s: &ScopeView) -> String {
    match s {
        ScopeView::Cgroup(a) => format!("cgroup:{}:{}:{}", path(a), a.converted, a.kept_tcp),
        ScopeView::Netns(a) => format!("netns:{}:{}:{}", path(a), a.converted, a.kept_tcp),
        ScopeView::Tree(t) => format!("tree:-:{}:{}", t.converted, t.kept_tcp),
    }
}

/// The cgroup directory or namespace file an attached scope names.
fn path(a: &AttachmentView) -> String {
    match &a.target {
        TargetView::Cgroup { cgroup, .. } => cgroup.display().to_string(),
        TargetView::Netns { netns, .. } => netns.display().to_string(),
    }
}

/// A process as the check prints it: `[PID,NAME,SMCR,SMCD,LISTENING,SCOPE]`.
fn brief(p: &SmcProcess) -> String {
    format!(
        "[{},{},{},{},{},{}]",
        p.pid,
        p.name,
        p.smcr,
        p.smcd,
        p.listening,
        p.bpf_scope.as_deref().unwrap_or("-")
    )
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::BpfNothingAttached => source::with_smcrun(LIST, |l: &ScopesListView| {
                // the pins, or None when the directory is gone
                let pins: Option<Vec<String>> = std::fs::read_dir(PIN_DIR).ok().map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                });
                match pins {
                    None if l.scopes.is_empty() => Yes(String::new()),
                    None => NotYet(format!("scopes {}", compact(&l.scopes))),
                    Some(pins) => NotYet(format!(
                        "scopes {}, pinned in {PIN_DIR}: {}",
                        compact(&l.scopes),
                        pins.join(" ")
                    )),
                }
            }),
            Question::BpfTrees { n } => source::with_smcrun(LIST, |l: &ScopesListView| {
                let trees = l
                    .scopes
                    .iter()
                    .filter(|s| matches!(s, ScopeView::Tree(_)))
                    .count();
                if trees == *n {
                    Yes(String::new())
                } else {
                    NotYet(format!(
                        "attach --list lists {trees} process trees, expected {n}: {}",
                        compact(&l.scopes)
                    ))
                }
            }),
            Question::BpfCgroup { cgroup, n, program } => {
                source::with_smcrun(LIST, |l: &ScopesListView| {
                    let first = l.scopes.iter().find_map(|s| match s {
                        ScopeView::Cgroup(a) => Some(a),
                        _ => None,
                    });
                    let right = first.is_some_and(|a| {
                        path(a) == *cgroup
                            && a.converted == *n
                            && a.programs.first().is_some_and(|p| p.program == *program)
                    });
                    if right {
                        Yes(String::new())
                    } else {
                        No(format!(
                        "attach --list does not show {cgroup} with {n} sockets made SMC by {program}: {}",
                        compact(&l.scopes)
                    ))
                    }
                })
            }
            Question::BpfScopes { scopes } => source::with_smcrun(LIST, |l: &ScopesListView| {
                let mut got: Vec<String> = l.scopes.iter().map(named).collect();
                got.sort();
                let mut want = scopes.clone();
                want.sort();
                let line = got.join(" ");
                if got == want {
                    Yes(line)
                } else {
                    No(format!(
                        "scopes and counts: {line}, expected {}",
                        want.join(" ")
                    ))
                }
            }),
            Question::BpfPsTrees { mode, n } => {
                source::with_smcrun(&["ps", "--all", "--json"], |ps: &PsAllView| {
                    let all = ps.smc_processes.as_deref().unwrap_or_default();
                    let count = all
                        .iter()
                        .filter(|p| {
                            p.bpf_scope.as_deref() == Some("tree") && mode.of_process(p) > 0
                        })
                        .count();
                    let shown: Vec<String> = all.iter().map(brief).collect();
                    let line = format!(
                        "{count} processes with {} sockets in a tree scope: {}",
                        mode.name(),
                        shown.join(" ")
                    );
                    if count < *n {
                        No(format!(
                            "smcrun ps --all lists {line}; expected at least {n}"
                        ))
                    } else if ps.bpf_scopes.trees.is_empty() {
                        No(format!(
                            "smcrun ps --all shows no smcrun --bpf tree scope: {}",
                            compact(&ps.bpf_scopes)
                        ))
                    } else {
                        Yes(line)
                    }
                })
            }
        }
    }
}
