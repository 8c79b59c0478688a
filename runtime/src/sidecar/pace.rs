//! The sidecar's timings: how often it looks while connections wait, how often it rewrites the
//! report, and how long a handshake may stay undecided.

use std::time::Duration;

/// How often the report may be rewritten.
pub(super) const WRITE_EVERY: Duration = Duration::from_secs(1);
/// The shortest and the longest wait between two looks.
pub(super) const NAP_MIN: Duration = Duration::from_millis(10);
pub(super) const NAP_MAX: Duration = Duration::from_millis(100);
/// Between those, the wait after a look is this many times what the look cost: while looks are
/// cheap (well under 5 ms: a few thousand SMC sockets on hardware) the sidecar takes at most a
/// twentieth of the time. A costlier look (tens of thousands of sockets, or the VM test bed's
/// emulation) is still repeated within 100 ms, so that a connection open for a fraction of a
/// second is classified; the share is then at most cost / (cost + 100 ms).
pub(super) const NAP_PER_COST: u32 = 20;

/// How long to wait before the next look, after one that took `cost`.
pub(super) fn nap_after(cost: Duration) -> Duration {
    cost.saturating_mul(NAP_PER_COST).clamp(NAP_MIN, NAP_MAX)
}

/// How long an SMC handshake may stay undecided before the connection is called unclassified.
pub(super) const PENDING_LIMIT: Duration = Duration::from_secs(30);
