//! The exact counts: relaxed atomics bumped by whoever decides an outcome (a hook, or the sidecar
//! after a compare-and-swap in [`crate::fdtable`]), so that no connection is missed at any rate and
//! none is counted twice. A forked child starts from zero: its counts are its own.

use std::sync::atomic::{AtomicU64, Ordering};

/// One counter.
pub type Counter = AtomicU64;

/// Every count of this process.
pub struct Counts {
    /// TCP sockets made as SMC sockets.
    pub converted: Counter,
    /// TCP sockets left TCP at socket() time (the kernel refused an SMC socket, or the policy).
    pub tcp_at_creation: Counter,
    /// Other sockets, untouched.
    pub untouched: Counter,
    /// Connections, made or accepted.
    pub connections: Counter,
    /// Connects that failed (not connections).
    pub failed_connects: Counter,
    /// Connections classified SMC-R.
    pub smc_r: Counter,
    /// Connections classified SMC-D.
    pub smc_d: Counter,
    /// Connections still SMC when closed, before the sidecar read their mode.
    pub smc_unknown: Counter,
    /// SMC connections that fell back, classified with their reason by the sidecar.
    pub fallback: Counter,
    /// SMC connections that had fallen back when closed, before the sidecar read the reason.
    pub fallback_unseen: Counter,
    /// TCP connections from the start, by [`crate::fdtable::Why`].
    pub tcp_from_start: [Counter; 256],
    /// Connections gone before they could be classified.
    pub unclassified: Counter,
    /// Connections classified but whose details could not be queued for the sidecar.
    pub detail_dropped: Counter,
    /// bind() calls (SMCRUN_DEBUG=2 only).
    pub binds: Counter,
    /// connect() calls (SMCRUN_DEBUG=2 only).
    pub connects: Counter,
    /// accept() calls that returned a connection (SMCRUN_DEBUG=2 only).
    pub accepts: Counter,
}

/// This process's counts.
pub static COUNTS: Counts = Counts {
    converted: Counter::new(0),
    tcp_at_creation: Counter::new(0),
    untouched: Counter::new(0),
    connections: Counter::new(0),
    failed_connects: Counter::new(0),
    smc_r: Counter::new(0),
    smc_d: Counter::new(0),
    smc_unknown: Counter::new(0),
    fallback: Counter::new(0),
    fallback_unseen: Counter::new(0),
    tcp_from_start: [const { Counter::new(0) }; 256],
    unclassified: Counter::new(0),
    detail_dropped: Counter::new(0),
    binds: Counter::new(0),
    connects: Counter::new(0),
    accepts: Counter::new(0),
};

/// Adds one. Release: a reader that sees it ([`load`]) also sees the counts bumped before it
/// on this thread (a connection's outcome before the total).
pub fn bump(c: &Counter) {
    c.fetch_add(1, Ordering::Release);
}

/// Reads one (Acquire: see [`bump`]).
pub fn load(c: &Counter) -> u64 {
    c.load(Ordering::Acquire)
}

impl Counts {
    fn all(&self) -> impl Iterator<Item = &Counter> {
        [
            &self.converted,
            &self.tcp_at_creation,
            &self.untouched,
            &self.connections,
            &self.failed_connects,
            &self.smc_r,
            &self.smc_d,
            &self.smc_unknown,
            &self.fallback,
            &self.fallback_unseen,
            &self.unclassified,
            &self.detail_dropped,
            &self.binds,
            &self.connects,
            &self.accepts,
        ]
        .into_iter()
        .chain(self.tcp_from_start.iter())
    }

    /// Zeroes every count (in a forked child).
    pub fn reset(&self) {
        for c in self.all() {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// Whether this process touched a TCP socket at all (made one, or accepted a connection).
    pub fn touched_tcp(&self) -> bool {
        load(&self.converted) + load(&self.tcp_at_creation) + load(&self.connections) > 0
    }

    /// A cheap fingerprint of every count, to tell whether a report needs rewriting.
    pub fn fingerprint(&self) -> u64 {
        self.all().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
            (h ^ load(c)).wrapping_mul(0x100_0000_01b3)
        })
    }

    /// TCP connections from the start, all reasons.
    pub fn tcp_from_start_total(&self) -> u64 {
        self.tcp_from_start.iter().map(load).sum()
    }
}
