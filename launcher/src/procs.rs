//! `smcrun ps` and `smcrun why PID`: the programs running under the shim, read from the reports
//! their sidecars write in the run directory.

use clap::Args;
use serde::Serialize;
use smcrun_telemetry::report::ProcessReport;
use smcrun_telemetry::{rundir, sidecar};
use std::path::Path;
use std::process::ExitCode;

/// `smcrun ps` options.
#[derive(Args, Debug)]
pub struct PsArgs {
    /// Print JSON: an array of {pid, program, state, report}.
    #[arg(long)]
    pub json: bool,
}

/// `smcrun why` options.
#[derive(Args, Debug)]
pub struct WhyArgs {
    /// The process to explain.
    pub pid: u32,
    /// Print the process's report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Whether a report's process still runs: the pid exists and started when the report says (a
/// pid reused by another program does not count).
fn state_of(r: &ProcessReport) -> &'static str {
    match sidecar::start_ticks(&format!("/proc/{}/stat", r.pid)) {
        Some(t) if t == r.start_ticks => "running",
        _ if r.exited => "exited",
        _ => "dead",
    }
}

#[derive(Serialize)]
struct PsEntry {
    pid: u32,
    program: String,
    state: &'static str,
    report: ProcessReport,
}

fn load(dir: &Path, pid: u32) -> Result<ProcessReport, String> {
    let bytes = rundir::read_report(dir, pid)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: {e}", rundir::report_path(dir, pid).display()))
}

fn top_reason(r: &ProcessReport) -> String {
    r.reasons
        .first()
        .map(|x| {
            let id = x
                .code
                .clone()
                .or_else(|| x.errno.clone())
                .unwrap_or_default();
            format!("{id} {} ({})", x.text, x.count)
        })
        .unwrap_or_else(|| "-".into())
}

/// Lists the reports; those of processes that are gone are shown once, marked, and removed.
pub fn ps(a: &PsArgs) -> ExitCode {
    let dir = rundir::run_dir();
    if let Err(e) = rundir::check_dir(&dir) {
        if dir.exists() {
            eprintln!("smcrun ps: {e}");
            return ExitCode::from(1);
        }
    }
    let mut entries = Vec::new();
    for pid in rundir::list(&dir) {
        match load(&dir, pid) {
            Ok(report) => {
                let state = state_of(&report);
                entries.push(PsEntry {
                    pid,
                    program: report.program.clone(),
                    state,
                    report,
                });
            }
            Err(e) => eprintln!("smcrun ps: skipping a report: {e}"),
        }
    }
    for e in entries.iter().filter(|e| e.state != "running") {
        rundir::remove(&dir, e.pid);
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&entries).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    if entries.is_empty() {
        println!(
            "no programs under smcrun (reports are kept in {})",
            dir.display()
        );
        return ExitCode::SUCCESS;
    }
    println!(
        "{:>7} {:<16} {:<8} {:>9} {:>6} {:>6} {:>6} {:>7}  top reason for TCP",
        "PID", "PROGRAM", "STATE", "CONVERTED", "SMC-R", "SMC-D", "TCP", "PENDING"
    );
    for e in &entries {
        let r = &e.report;
        let c = &r.connections;
        println!(
            "{:>7} {:<16} {:<8} {:>9} {:>6} {:>6} {:>6} {:>7}  {}",
            e.pid,
            e.program,
            e.state,
            r.sockets.converted,
            c.smc_r,
            c.smc_d,
            c.tcp,
            c.pending + c.unclassified,
            top_reason(r)
        );
    }
    ExitCode::SUCCESS
}

/// Explains one process's connections.
pub fn why(a: &WhyArgs) -> ExitCode {
    let dir = rundir::run_dir();
    let r = match load(&dir, a.pid) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "smcrun why: no report for pid {} ({e}); is it running under smcrun, as this user?",
                a.pid
            );
            return ExitCode::from(1);
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    println!(
        "{} ({})",
        r.summary_line().trim_start_matches("smcrun: "),
        state_of(&r)
    );
    println!(
        "sockets: {} converted to SMC, {} TCP at socket(), {} untouched; mode {}",
        r.sockets.converted, r.sockets.tcp_at_creation, r.sockets.untouched, r.mode
    );
    if r.dropped_events > 0 || r.errors > 0 {
        println!(
            "not counted: {} events dropped, {} errors{}",
            r.dropped_events,
            r.errors,
            r.last_error
                .as_deref()
                .map(|e| format!(" (last: {e})"))
                .unwrap_or_default()
        );
    }
    println!();
    println!(
        "{:<7} {:<22} {:<22} {:<6} why",
        "role", "local", "remote", "mode"
    );
    for c in &r.recent {
        let why = match (&c.reason, &c.peer_diagnosis) {
            (Some(x), p) => {
                let id = x
                    .code
                    .clone()
                    .or_else(|| x.errno.clone())
                    .unwrap_or_default();
                let peer = p
                    .as_deref()
                    .map(|p| format!(" (peer: {p})"))
                    .unwrap_or_default();
                format!("{id} {}{peer}", x.text)
            }
            (None, _) => "-".into(),
        };
        println!(
            "{:<7} {:<22} {:<22} {:<6} {}",
            c.role,
            c.local.as_deref().unwrap_or("?"),
            c.remote.as_deref().unwrap_or("?"),
            c.mode,
            why
        );
    }
    if r.recent_dropped > 0 {
        println!(
            "(and {} older connections, counted above but not listed)",
            r.recent_dropped
        );
    }
    println!();
    println!(
        "{:<40} {:<7} {:>6} {:>6} {:>6}",
        "endpoint", "role", "SMC-R", "SMC-D", "TCP"
    );
    for e in &r.endpoints {
        println!(
            "{:<40} {:<7} {:>6} {:>6} {:>6}",
            e.remote, e.role, e.smc_r, e.smc_d, e.tcp
        );
    }
    ExitCode::SUCCESS
}
