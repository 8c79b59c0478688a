//! `smcrun ps` and `smcrun why PID`: the programs running under the shim, read from the reports
//! their runtimes write in the run directory (see `smcrun_rundir`).
//!
//! A report lives in the run directory of the user who started the program: a server started as
//! root that switched to nobody (memcached -u, nginx's workers) is in root's list, and USER says
//! whom it runs as now. Reports of processes that are gone are shown once, marked, and removed
//! (only those that were shown).

use crate::cmd::format;
use crate::status::{Exit, Failure, Outcome};
use clap::Args;
use smcrun_report::text::safe;
use smcrun_report::ProcessReport;
use smcrun_rundir::pidns::{Locator, Seen};
use smcrun_rundir::process::start_ticks;
use smcrun_rundir::read::RunDir;
use smcrun_views::ps::json::{AgentView, BpfScopesView, PsAllView, PsEntry, WhyKernelView};
use smcrun_views::ps::text::{
    kernel_counts, kernel_text, overflow_text, policy_text, settings_text, top_reason, why_text,
};
use std::borrow::Cow;
use std::io::{self, Write};
use std::process::ExitCode;

/// `smcrun ps` options.
#[derive(Args, Debug)]
pub struct PsArgs {
    /// Also every process that holds SMC sockets, under smcrun or not (from smc_diag and
    /// /proc/*/fd, as `ss -p` finds owners), with modes, fallback reasons and BPF scope.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Print JSON: an array of {pid, program, exe, user, uid, state, report}; with --all an
    /// object {processes: that array, smc_processes, bpf_scopes}.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// `smcrun why` options.
#[derive(Args, Debug)]
pub struct WhyArgs {
    /// The process to explain.
    pub pid: u32,
    /// Print the process's report as JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// Whether a report's process still runs: the pid exists and started when the report says (a pid
/// reused by another program does not count). A process that registered but wrote no numbers yet
/// is running if its pid exists.
fn state_of(pid: u32, r: Option<&ProcessReport>) -> &'static str {
    state_at(Seen::At(pid), r)
}

/// [`state_of`] for a report's process wherever it is: under a pid of this reader's, gone from
/// its namespace, or in one this reader cannot see into (`elsewhere`: never removed).
fn state_at(seen: Seen, r: Option<&ProcessReport>) -> &'static str {
    let pid = match seen {
        Seen::At(p) => p,
        Seen::Invisible => return "elsewhere",
        Seen::Gone => {
            return if r.is_some_and(|r| r.exited) {
                "exited"
            } else {
                "dead"
            }
        }
    };
    let now = start_ticks(&format!("/proc/{pid}/stat"));
    match (r, now) {
        (Some(r), Some(t)) if t == r.start_ticks => "running",
        (None, Some(_)) => "running",
        (Some(r), _) if r.exited => "exited",
        _ => "dead",
    }
}

/// The uid a live process runs as now (effective, from /proc), else what its report says.
fn uid_of(pid: u32, r: Option<&ProcessReport>) -> Option<u32> {
    smcrun_rundir::read::euid_of(pid).or(r.map(|r| r.uid))
}

fn user_name(uid: Option<u32>) -> String {
    let Some(uid) = uid else { return "?".into() };
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

fn entries(dir: &RunDir) -> Vec<PsEntry> {
    let mut out = Vec::new();
    let mut locator = Locator::new();
    for pid in dir.pids() {
        let report = match dir.report(pid) {
            Ok(r) => r,
            Err(e) => {
                if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    eprintln!("smcrun ps: skipping a report: {e}");
                } else {
                    // Unreadable (an older smcrun's layout) and its process is gone.
                    dir.remove(pid);
                }
                continue;
            }
        };
        let seen = locator.locate(pid, report.as_ref().map_or(0, |r| r.pid_ns));
        let state = state_at(seen, report.as_ref());
        let (here, ns_pid) = match seen {
            Seen::At(p) if p != pid => (p, Some(pid)),
            _ => (pid, None),
        };
        if report.is_none() && state != "running" {
            // Registered and gone without a number: nothing to show.
            dir.remove(pid);
            continue;
        }
        let (program, exe) = match &report {
            Some(r) => (r.program.clone(), r.exe.clone()),
            None => (
                std::fs::read_to_string(format!("/proc/{here}/comm"))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_default(),
                std::fs::read_link(format!("/proc/{here}/exe"))
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ),
        };
        let uid = match seen {
            Seen::At(p) => uid_of(p, report.as_ref()),
            _ => report.as_ref().map(|r| r.uid),
        };
        out.push(PsEntry {
            pid: here,
            ns_pid,
            program,
            exe,
            user: user_name(uid),
            uid,
            state: state.into(),
            report,
        });
    }
    out
}

/// Lists the reports; those of processes that are gone are shown once, marked, and removed.
/// With `--all`, also every process that holds SMC sockets; BPF mode's scopes when there are any.
pub fn ps(a: &PsArgs) -> Outcome {
    let dir = match RunDir::open() {
        Ok(d) => d,
        Err(e) => {
            return Err(Failure::of("smcrun ps", Exit::Failed, e.to_string()));
        }
    };
    let path = match &dir {
        Some(d) => d.path.clone(),
        None => smcrun_rundir::read::path().unwrap_or_default(),
    };
    let entries = dir.as_ref().map(entries).unwrap_or_default();
    let gone = |e: &PsEntry| e.state == "exited" || e.state == "dead";
    let remove_gone = |shown: &[PsEntry]| {
        if let Some(d) = &dir {
            for e in shown.iter().filter(|e| gone(e)) {
                d.remove(e.ns_pid.unwrap_or(e.pid));
            }
        }
    };
    let scopes = crate::cmd::smc_procs::bpf_scopes();
    let agent = if a.all {
        smcrun_views::agent_state::read()
    } else {
        Err(smcrun_views::agent_state::Unavailable::NotRunning)
    };
    let others = if a.all {
        match crate::cmd::smc_procs::smc_processes(agent.as_ref().ok()) {
            Ok(list) => Some(list),
            Err(e) => {
                eprintln!("smcrun ps --all: the processes with SMC sockets cannot be listed: {e}");
                None
            }
        }
    } else {
        None
    };
    let mut out = io::stdout().lock();
    if a.json {
        let text = if a.all {
            serde_json::to_string_pretty(&PsAllView {
                processes: Cow::Borrowed(&entries),
                smc_processes: others.as_deref().map(Cow::Borrowed),
                agent: agent.as_ref().ok().map(|s| AgentView {
                    pid: s.summary.agent_pid,
                    attached: s.summary.attached,
                    error: s.summary.error.as_deref().map(Cow::Borrowed),
                    overflow: Cow::Borrowed(&s.summary.overflow),
                }),
                bpf_scopes: BpfScopesView::new(&scopes),
            })
        } else {
            serde_json::to_string_pretty(&entries)
        }
        .unwrap_or_default();
        if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
            return format::stdout_result(Err(e));
        }
        remove_gone(&entries);
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        if let Err(e) = writeln!(out, "no programs under smcrun (reports are kept in {path})") {
            return format::stdout_result(Err(e));
        }
    } else {
        let header = format!(
            "{:>7} {:<9} {:<16} {:<8} {:<11} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7}  {:<40} {:<32} EXE",
            "PID",
            "USER",
            "PROGRAM",
            "STATE",
            "MODE",
            "CONNS",
            "SMC-R",
            "SMC-D",
            "SMC-?",
            "TCP",
            "UNCLASS",
            "TOP REASON FOR TCP",
            "POLICY"
        );
        if let Err(e) = writeln!(out, "{header}") {
            return format::stdout_result(Err(e));
        }
        for (i, e) in entries.iter().enumerate() {
            let c = e
                .report
                .as_ref()
                .map(|r| r.connections.clone())
                .unwrap_or_default();
            let reason = e
                .report
                .as_ref()
                .map(top_reason)
                .unwrap_or_else(|| "-".into());
            let (mode, policy) = e
                .report
                .as_ref()
                .map(|r| (settings_text(r), policy_text(r)))
                .unwrap_or_else(|| ("-".into(), "-".into()));
            let line = format!(
                "{:>7} {:<9} {:<16} {:<8} {:<11} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7}  {:<40} {:<32} {}",
                e.pid,
                safe(&e.user),
                safe(&e.program),
                e.state,
                mode,
                c.total,
                c.smc_r,
                c.smc_d,
                c.smc_unknown,
                c.tcp,
                c.not_classified(),
                reason,
                policy,
                safe(&e.exe)
            ) + &e
                .ns_pid
                .map(|p| format!("  (pid {p} in its pid namespace)"))
                .unwrap_or_default();
            if let Err(err) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                // Only what was shown is removed.
                remove_gone(&entries[..i]);
                return format::stdout_result(Err(err));
            }
        }
        // Shown once: a gone process's report goes now that it was seen.
        remove_gone(&entries);
    }
    if a.all {
        let line = match &agent {
            Ok(s) if s.summary.attached => format!(
                "\nsmcrun agent (pid {}): KERNEL counts each process's connections since it started, as the kernel saw them{}",
                s.summary.agent_pid,
                overflow_text(&s.summary.overflow)
            ),
            Ok(s) => format!(
                "\nsmcrun agent (pid {}): not attached ({})",
                s.summary.agent_pid,
                safe(s.summary.error.as_deref().unwrap_or("?"))
            ),
            Err(e) => format!("\n{e}: process and mode from smc_diag and /proc only"),
        };
        if let Err(e) = writeln!(out, "{line}") {
            return format::stdout_result(Err(e));
        }
    }
    format::stdout_result(others_text(&mut out, &scopes, others.as_deref()))
}

/// BPF mode's scopes (when there are any) and, with `--all`, every process with SMC sockets.
fn others_text(
    out: &mut impl Write,
    scopes: &smcrun_bpf::scopes::Scopes,
    others: Option<&[smcrun_views::ps::json::SmcProcess]>,
) -> io::Result<()> {
    let lines = smcrun_views::bpf::text::scope_lines(scopes);
    if !lines.is_empty() {
        writeln!(out, "\nBPF mode:")?;
        for l in lines {
            writeln!(out, "  {l}")?;
        }
    }
    if let Some(list) = others {
        writeln!(
            out,
            "\nevery process with SMC sockets (under smcrun or not):"
        )?;
        writeln!(
            out,
            "{:>7} {:<16} {:>6} {:>6} {:>8} {:>6}  {:<24} {:<20} {:<20} top fallback reason",
            "PID",
            "NAME",
            "SMC-R",
            "SMC-D",
            "FALLBACK",
            "LISTEN",
            "BPF SCOPE",
            "KERNEL CLIENT R/D/T/?",
            "KERNEL SERVER R/D/T/?"
        )?;
        for p in list {
            let (kc, ks) = match &p.kernel {
                Some(k) => (kernel_counts(&k.client), kernel_counts(&k.server)),
                None => ("-".to_string(), "-".to_string()),
            };
            writeln!(
                out,
                "{:>7} {:<16} {:>6} {:>6} {:>8} {:>6}  {:<24} {:<20} {:<20} {}",
                p.pid,
                safe(&p.name),
                p.smcr,
                p.smcd,
                p.fallback,
                p.listening,
                safe(p.bpf_scope.as_deref().unwrap_or("-")),
                kc,
                ks,
                p.reasons
                    .first()
                    .map(|(r, n)| format!("{} ({n})", safe(r)))
                    .unwrap_or_else(|| "-".into())
            )?;
        }
    }
    out.flush()
}

/// Explains one process's connections.
pub fn why(a: &WhyArgs) -> Outcome {
    let agent = smcrun_views::agent_state::read().ok();
    let kernel = agent.as_ref().and_then(|s| s.process(a.pid));
    let report = RunDir::open()
        .ok()
        .flatten()
        .and_then(|d| report_of(&d, a.pid).ok().flatten());
    if let Some(k) = kernel {
        let mut out = io::stdout().lock();
        let text = if a.json {
            serde_json::to_string_pretty(&WhyKernelView {
                pid: a.pid,
                report: report.as_ref().map(Cow::Borrowed),
                kernel: Cow::Borrowed(k),
            })
            .unwrap_or_default()
                + "\n"
        } else {
            let mut t = match &report {
                Some(r) => {
                    why_text(
                        r,
                        state_of(a.pid, Some(r)),
                        &user_name(uid_of(a.pid, Some(r))),
                    ) + "\n"
                }
                None => format!("pid {}: not under smcrun\n", a.pid),
            };
            t.push_str(&kernel_text(k));
            t
        };
        return format::stdout_result(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
    }
    let no_report = |why: String| {
        Err(Failure::of(
            "smcrun why",
            Exit::Failed,
            format!(
                "no report for pid {} ({why}); is it running under smcrun, started by this user? \
                 (a process that switched uid reports to the user who started it)",
                a.pid
            ),
        ))
    };
    let dir = match RunDir::open() {
        Ok(Some(d)) => d,
        Ok(None) => return no_report("no run directory".into()),
        Err(e) => return no_report(e),
    };
    let r = match report_of(&dir, a.pid) {
        Ok(Some(r)) => r,
        Ok(None) => {
            println!(
                "pid {}: under smcrun, no connections yet ({})",
                a.pid,
                state_of(a.pid, None)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return no_report(e),
    };
    let mut out = io::stdout().lock();
    let text = if a.json {
        serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
    } else {
        why_text(
            &r,
            state_of(a.pid, Some(&r)),
            &user_name(uid_of(a.pid, Some(&r))),
        )
    };
    format::stdout_result(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// The report of this reader's process `pid`: the file of its pid in its own pid namespace when
/// that is another one (a container's process, asked about by its host pid); a report of another
/// namespace's process that happens to have the same number is not it.
fn report_of(dir: &RunDir, pid: u32) -> Result<Option<ProcessReport>, String> {
    let locator = Locator::new();
    let (ns, file_pid) = match locator.inner(pid) {
        Some((ns, inner)) => (Some(ns), inner),
        None => (smcrun_rundir::pidns::own(), pid),
    };
    match dir.report(file_pid)? {
        Some(r) if r.pid_ns != 0 && Some(r.pid_ns) != ns => Err(format!(
            "{}/{file_pid}.json is of pid {file_pid} of another pid namespace, not of this pid {pid}",
            dir.path
        )),
        // Named by this reader's pid, as `smcrun ps` shows it.
        Some(mut r) => {
            r.pid = pid;
            Ok(Some(r))
        }
        None => Ok(None),
    }
}
