//! The report: built from the exact counts and what the sidecar kept, and written into the run
//! directory when something changed (at most once a second).

use super::identity::{fallback_name, mode_name, names, POLICY};
use super::pace::{NAP_MIN, WRITE_EVERY};
use super::state::{now_unix, role, State};
use crate::counters::{load, COUNTS};
use smcrun_classify::{self as classify, Outcome};
use smcrun_report::{
    self as report, ConnectionCounts, Endpoint, ProcessReport, ReasonCount, SocketCounts,
};
use smcrun_rundir::process::start_ticks;
use smcrun_rundir::write as rundir;
use std::time::{Duration, Instant};

impl State {
    /// The report, from the exact counts and what the sidecar kept.
    pub fn report(&mut self) -> ProcessReport {
        // The details queued since the last look first, then the counts: a hook counts a
        // connection before it queues its details, so the report's list then lacks at most the
        // connections a hook is counting at this very moment (they are in the next write), not
        // every connection made since the last look (seen: `why` listing 2 of 4 connections).
        self.take_queued();
        let c = &COUNTS;
        // The total first: a hook counts a connection's outcome before the total (when it knows
        // it at once, a TCP connection), so every connection in this total has its outcome in the
        // loads below, unless the sidecar is still classifying it (pending). One counted between
        // the two reads has its outcome here and not yet its total: the total takes it in.
        let total = load(&c.connections);
        let tcp = load(&c.fallback) + load(&c.fallback_unseen) + c.tcp_from_start_total();
        let (smc_r, smc_d, smc_unknown) = (load(&c.smc_r), load(&c.smc_d), load(&c.smc_unknown));
        let unclassified = load(&c.unclassified);
        let total = total.max(smc_r + smc_d + smc_unknown + tcp + unclassified);
        let counts = ConnectionCounts {
            total,
            smc_r,
            smc_d,
            smc_unknown,
            tcp,
            pending: total.saturating_sub(smc_r + smc_d + smc_unknown + tcp + unclassified),
            unclassified,
            failed_connects: load(&c.failed_connects),
        };
        let mut reasons: Vec<ReasonCount> = Vec::new();
        for (&code, &n) in &self.fallbacks {
            if let Some(r) = classify::reason(Outcome::Fallback {
                reason: code,
                peer: 0,
            }) {
                reasons.push(ReasonCount { count: n, ..r });
            }
        }
        for (w, n) in c.tcp_from_start.iter().enumerate() {
            let n = load(n);
            if let (true, Some(r)) = (n > 0, classify::reason(Outcome::Tcp(w as u8))) {
                reasons.push(ReasonCount { count: n, ..r });
            }
        }
        let unseen = load(&c.fallback_unseen);
        if let (true, Some(r)) = (unseen > 0, classify::reason(Outcome::FallbackUnseen)) {
            reasons.push(ReasonCount { count: unseen, ..r });
        }
        reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(&b.text)));
        let mut endpoints: Vec<Endpoint> = self
            .endpoints
            .iter()
            .map(|((remote, server), e)| {
                let mut rs: Vec<ReasonCount> = e
                    .reasons
                    .values()
                    .map(|(r, n)| ReasonCount {
                        count: *n,
                        ..r.clone()
                    })
                    .collect();
                rs.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(&b.text)));
                Endpoint {
                    remote: remote.clone(),
                    role: role(*server).into(),
                    smc_r: e.smc_r,
                    smc_d: e.smc_d,
                    smc_unknown: e.smc_unknown,
                    tcp: e.tcp,
                    reasons: rs,
                }
            })
            .collect();
        let size = |e: &Endpoint| e.smc_r + e.smc_d + e.smc_unknown + e.tcp;
        endpoints.sort_by(|a, b| size(b).cmp(&size(a)).then(a.remote.cmp(&b.remote)));
        endpoints.truncate(report::TOP_ENDPOINTS);
        self.seq += 1;
        let (program, exe) = names();
        ProcessReport {
            version: report::REPORT_VERSION,
            seq: self.seq,
            pid: rustix::process::getpid().as_raw_nonzero().get() as u32,
            ppid: rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32),
            program,
            exe,
            uid: rustix::process::geteuid().as_raw(),
            start_ticks: start_ticks("/proc/self/stat").unwrap_or(0),
            pid_ns: smcrun_rundir::pidns::own().unwrap_or(0),
            updated_unix: now_unix(),
            exited: self.exited,
            mode: mode_name().to_string(),
            fallback: fallback_name().to_string(),
            policy: POLICY.get().copied().unwrap_or_default().to_string(),
            sockets: SocketCounts {
                converted: load(&c.converted),
                tcp_at_creation: load(&c.tcp_at_creation),
                untouched: load(&c.untouched),
            },
            connections: counts,
            reasons,
            endpoints,
            recent: self.recent.iter().cloned().collect(),
            recent_dropped: self.recent_dropped,
            detail_dropped: load(&c.detail_dropped),
            errors: self.errors,
            last_error: self.last_error.clone(),
            seq_end: 0,
        }
    }

    /// Writes the report if something changed (at most once a second unless `now`).
    pub(super) fn write_if_due(&mut self, now: bool) {
        let fp = COUNTS.fingerprint();
        let changed = self.dirty || fp != self.fingerprint || self.last_write.is_none();
        let due = now || self.last_write.is_none_or(|t| t.elapsed() >= WRITE_EVERY);
        if !changed || !due || self.report_failed || !COUNTS.touched_tcp() && !now {
            return;
        }
        // again, if a close_range or closefrom of the program's took the report's descriptor
        // (from the program's table only: a file opened in the sidecar's own table would be
        // out of reach of the exit handler and of forked children)
        let from = crate::own_table::pidfd();
        if from.is_none() {
            rundir::register(crate::fdtable::epoch(), crate::fdtable::owned);
        }
        if let Some(r) = rundir::take_refusal() {
            self.report_failed = true;
            crate::line!(
                "warning: no per-process report: {}: {r}",
                rundir::describe_dir()
            );
            return;
        }
        if !rundir::registered() {
            return;
        }
        self.dirty = false;
        self.fingerprint = fp;
        self.last_write = Some(Instant::now());
        let bytes = self.report().to_bytes();
        let written = rundir::write_report(&bytes, from);
        if written == Ok(false) {
            self.dirty = true; // the program holds every number for now: again at the next write
            return;
        }
        if let Err(e) = written {
            // One warning, then no more attempts: the program is not to be bothered again.
            self.report_failed = true;
            self.note_error(e.clone());
            crate::line!("warning: per-process report stopped: {e}");
        }
    }

    /// Whether the report shows something it does not show yet.
    pub(super) fn unwritten(&self) -> bool {
        self.dirty || COUNTS.fingerprint() != self.fingerprint
    }

    /// How long until the report may be rewritten.
    pub(super) fn next_write(&self) -> Duration {
        self.last_write
            .map_or(Duration::ZERO, |t| WRITE_EVERY.saturating_sub(t.elapsed()))
            .max(NAP_MIN)
    }
}
