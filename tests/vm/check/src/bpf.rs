//! BPF mode's questions, of `smcrun attach --list --json` and `smcrun ps --all --json`: which
//! scopes are attached with which counts, and whether anything is left attached or pinned.

use crate::agent::Mode;
use crate::source::{self, compact};
use crate::Answer::{self, No, NotYet, Yes};
use clap::Subcommand;
use smcrun_bpf::pinned::PIN_DIR;
use smcrun_views::bpf::json::{
    AttachmentView, ScopeView, ScopesListView, SocketCounts, TargetView,
};
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
    /// FILE, a saved `smcrun attach --list --json`, lists exactly these network namespace
    /// scopes, each as `NETNS:MADE-SMC:KEPT-TCP:FIRST-PROGRAM` (`/run/netns/a:1:0:sechod`).
    BpfNetns { file: String, scopes: Vec<String> },
    /// FILE, a saved `smcrun ps --all --json`: every PROGRAM process with SMC-D sockets (one at
    /// least) is in SCOPE (`netns /proc/7/ns/net`), and N network namespace scopes are attached.
    BpfPsNetns {
        file: String,
        program: String,
        scope: String,
        n: usize,
    },
}

/// A scope as `bpf-scopes` names it: `KIND:CGROUP:MADE-SMC:KEPT-TCP`.
fn named(s: &ScopeView) -> String {
    match s {
        ScopeView::Cgroup(a) => format!("cgroup:{}:{}", path(a), counts(&a.sockets)),
        ScopeView::Netns(a) => format!("netns:{}:{}", path(a), counts(&a.sockets)),
        ScopeView::Tree(t) => format!("tree:-:{}", counts(&t.sockets)),
    }
}

/// A scope's sockets as the questions name them: `MADE-SMC:KEPT-TCP`.
fn counts(c: &SocketCounts) -> String {
    format!("{}:{}", c.converted, c.kept_tcp)
}

/// The cgroup directory or namespace file an attached scope names.
fn path(a: &AttachmentView) -> String {
    match &a.target {
        TargetView::Cgroup { cgroup, .. } => cgroup.display().to_string(),
        TargetView::Netns { netns, .. } => netns.display().to_string(),
    }
}

/// Yes when `got` and `want` hold the same scopes in any order; no with `what` and both.
fn same(mut got: Vec<String>, want: &[String], what: &str) -> Answer {
    got.sort();
    let mut want = want.to_vec();
    want.sort();
    let line = got.join(" ");
    if got == want {
        Yes(line)
    } else {
        No(format!("{what}: {line}, expected {}", want.join(" ")))
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
                            && a.sockets.converted == *n
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
                same(
                    l.scopes.iter().map(named).collect(),
                    scopes,
                    "scopes and counts",
                )
            }),
            Question::BpfNetns { file, scopes } => source::with_file(file, |l: &ScopesListView| {
                let got = l
                    .scopes
                    .iter()
                    .filter_map(|s| match s {
                        ScopeView::Netns(a) => Some(format!(
                            "{}:{}:{}",
                            path(a),
                            counts(&a.sockets),
                            a.programs.first().map_or("-", |p| p.program.as_str())
                        )),
                        _ => None,
                    })
                    .collect();
                same(got, scopes, "attach --list's netns scopes")
            }),
            Question::BpfPsNetns {
                file,
                program,
                scope,
                n,
            } => source::with_file(file, |ps: &PsAllView| {
                let all = ps.smc_processes.as_deref().unwrap_or_default();
                let mine: Vec<&SmcProcess> = all
                    .iter()
                    .filter(|p| &p.name == program && p.smcd > 0)
                    .collect();
                let shown: Vec<String> = all.iter().map(brief).collect();
                let netns = ps.bpf_scopes.netns.len();
                let line = format!(
                    "{} {program} processes with SMC-D sockets; {netns} netns scopes; {}",
                    mine.len(),
                    shown.join(" ")
                );
                if mine.is_empty()
                    || mine
                        .iter()
                        .any(|p| p.bpf_scope.as_deref() != Some(scope.as_str()))
                {
                    No(format!(
                        "the SMC-D {program} processes are not all in scope {scope}: {line}; {}",
                        compact(&ps.bpf_scopes)
                    ))
                } else if netns != *n {
                    No(format!("{netns} netns scopes, expected {n}: {line}"))
                } else {
                    Yes(line)
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
