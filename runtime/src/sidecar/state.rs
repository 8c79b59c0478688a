//! The connections the sidecar keeps track of: one look settles nonblocking connects and
//! classifies the waiting SMC connections with one smc_diag dump; each classified connection goes
//! into the recent list and the totals per endpoint.

use super::kernel::Kernel;
use super::pace::PENDING_LIMIT;
use crate::counters::{bump, COUNTS};
use crate::fdtable::{self, Entry, Phase};
use crate::record::{self, Record};
use crate::track;
use smcrun_classify::{self as classify, Outcome, Verdict};
use smcrun_report::{self as report, Connection, ReasonCount};
use smcrun_sys::sock::TcpState;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

/// Connections to or from one endpoint.
#[derive(Debug, Default, Clone)]
pub(super) struct EndpointCounts {
    pub(super) smc_r: u64,
    pub(super) smc_d: u64,
    pub(super) smc_unknown: u64,
    pub(super) tcp: u64,
    pub(super) reasons: HashMap<String, (ReasonCount, u64)>,
}

/// What the sidecar keeps between looks.
#[derive(Default)]
pub struct State {
    /// Fallbacks the sidecar classified, by reason code.
    pub(super) fallbacks: HashMap<u32, u64>,
    pub(super) endpoints: HashMap<(String, bool), EndpointCounts>,
    pub(super) recent: VecDeque<Connection>,
    pub(super) recent_dropped: u64,
    /// When each waiting connection was first seen.
    pub(super) waiting: HashMap<i32, (Entry, Instant)>,
    pub(super) errors: u64,
    pub(super) last_error: Option<String>,
    /// Something the report shows changed since it was written.
    pub(super) dirty: bool,
    pub(super) fingerprint: u64,
    pub(super) last_write: Option<Instant>,
    pub(super) seq: u64,
    pub(super) exited: bool,
    pub(super) report_failed: bool,
}

/// Now, in seconds since 1970.
pub(super) fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What one look found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// Connections still waiting to be classified, or connects still running.
    pub waiting: usize,
    /// How long the kernel queries took.
    pub cost: Duration,
}

impl State {
    /// Counts an error, keeps it for the report.
    pub(super) fn note_error(&mut self, e: String) {
        self.errors += 1;
        self.last_error = Some(e);
        self.dirty = true;
    }

    /// Takes one classified connection into the recent list and the endpoint totals.
    fn note(&mut self, r: Record) {
        let reason = classify::reason(r.outcome);
        let remote = match (r.server, r.remote) {
            (false, Some(a)) => a.to_string(),
            (true, Some(a)) => a.ip().to_string(),
            (_, None) => "unknown".to_string(),
        };
        let e = self.endpoints.entry((remote, r.server)).or_default();
        match r.outcome {
            Outcome::SmcR => e.smc_r += 1,
            Outcome::SmcD => e.smc_d += 1,
            Outcome::SmcUnknown => e.smc_unknown += 1,
            _ => e.tcp += 1,
        }
        if let (Some(rc), false) = (&reason, matches!(r.outcome, Outcome::SmcUnknown)) {
            e.reasons
                .entry(rc.label())
                .or_insert_with(|| (rc.clone(), 0))
                .1 += 1;
        }
        if self.recent.len() == report::RECENT_CONNECTIONS {
            self.recent.pop_front();
            self.recent_dropped += 1;
        }
        self.recent.push_back(Connection {
            fd: r.fd,
            role: role(r.server).into(),
            local: r.local.map(|a| a.to_string()),
            remote: r.remote.map(|a| a.to_string()),
            mode: classify::mode_name(r.outcome).into(),
            reason,
            peer_diagnosis: classify::peer_diagnosis(r.outcome),
            at_unix: now_unix(),
        });
        self.dirty = true;
    }

    /// A connection the sidecar itself classified.
    fn decided(&mut self, r: Record) {
        track::count(r.outcome);
        if let Outcome::Fallback { reason, .. } = r.outcome {
            *self.fallbacks.entry(reason).or_default() += 1;
        }
        self.note(r);
    }

    /// One look: takes the queued details, settles nonblocking connects, and classifies the
    /// waiting SMC connections. With `last` (the program exits) nothing is left waiting.
    pub fn look(&mut self, k: &dyn Kernel, last: bool) -> Look {
        let start = Instant::now();
        let mut look = Look::default();
        let mut connecting = Vec::new();
        let mut pending = Vec::new();
        fdtable::scan(&[Phase::Connecting, Phase::Pending], |fd, e| {
            match e.phase {
                Phase::Connecting => connecting.push((fd, e)),
                _ => pending.push((fd, e)),
            }
        });
        for (fd, e) in connecting {
            match k.tcp_state(fd) {
                Some(TcpState::Connected) => {
                    if track::established(fd, e, k.peer(fd), None) {
                        self.dirty = true;
                        if e.kind == fdtable::Kind::Smc {
                            pending.push((fd, e.with(Phase::Pending)));
                        }
                    }
                }
                Some(TcpState::Connecting) if !last => look.waiting += 1,
                Some(TcpState::Connecting) => {}
                // Failed (or the fd is no socket any more): not a connection.
                _ => {
                    if fdtable::transition(fd, e, Some(e.with(Phase::Open))) {
                        bump(&COUNTS.failed_connects);
                        self.dirty = true;
                    }
                }
            }
        }
        if !pending.is_empty() {
            let dump = k.smc_diag();
            if let Err(e) = &dump {
                self.note_error(e.clone());
            }
            for (fd, e) in pending {
                let since = self.waiting.entry(fd).or_insert((e, Instant::now()));
                if since.0 != e {
                    *since = (e, Instant::now());
                }
                let age = since.1.elapsed();
                let inode = k.inode(fd);
                let (local, peer) = (k.local(fd), k.peer(fd));
                let found = dump
                    .as_ref()
                    .ok()
                    .and_then(|d| classify::find(d, inode, local, peer));
                let verdict = found.map(classify::from_diag);
                match verdict {
                    Some(Verdict::Decided(o)) => {
                        if fdtable::transition(fd, e, Some(e.with(Phase::Done))) {
                            let local = found.map(|f| f.local).filter(|a| a.port() != 0).or(local);
                            self.decided(Record {
                                fd,
                                server: e.server,
                                outcome: o,
                                remote: peer,
                                local,
                            });
                        }
                        self.waiting.remove(&fd);
                    }
                    _ if last || inode.is_none() || dump.is_err() || age > PENDING_LIMIT => {
                        if fdtable::transition(fd, e, Some(e.with(Phase::Done))) {
                            bump(&COUNTS.unclassified);
                            self.dirty = true;
                        }
                        self.waiting.remove(&fd);
                    }
                    _ => look.waiting += 1,
                }
            }
            self.waiting
                .retain(|fd, (e, _)| fdtable::get(*fd) == Some(*e));
        }
        look.cost = start.elapsed();
        // The details queued by hooks, and by the connections settled just now.
        self.take_queued();
        look
    }

    /// Takes the details the hooks queued into the recent list and the endpoint totals.
    pub(super) fn take_queued(&mut self) {
        // At most one queue's worth: under a flood of connections the hooks refill it as fast as
        // it drains, and an unbounded loop here kept the report from being written (a report
        // took 0.4 s with one thread counting connections in a loop); the rest waits for the
        // next look.
        for _ in 0..record::CAPACITY {
            let Some(r) = record::pop() else { break };
            self.note(r);
        }
    }
}

/// A connection's role as the report names it.
pub(super) fn role(server: bool) -> &'static str {
    if server {
        "server"
    } else {
        "client"
    }
}
