//! The details of classified connections (who, to or from where, how it ran), on their way from
//! the hooks to the sidecar, which keeps the recent ones and the totals per endpoint.
//!
//! A static lock-free queue (heapless' MPMC queue: a fixed array, no allocation, usable before the
//! sidecar runs and inside a signal handler); a full queue drops the detail and counts it
//! (`detail_dropped`). The counts themselves never go through here: they are exact whatever
//! happens to the details.

use crate::classify::Outcome;
use crate::counters::{bump, COUNTS};
use heapless::mpmc::Queue as MpMcQueue;
use std::cell::UnsafeCell;
use std::net::SocketAddr;

/// One classified connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The fd it had.
    pub fd: i32,
    /// Accepted rather than made.
    pub server: bool,
    /// How it ran.
    pub outcome: Outcome,
    /// The peer, when known.
    pub remote: Option<SocketAddr>,
    /// The local address, when known.
    pub local: Option<SocketAddr>,
}

/// Records waiting for the sidecar: a burst of this many between two of its looks is kept whole.
pub const CAPACITY: usize = 4096;

struct Ring(UnsafeCell<MpMcQueue<Record, CAPACITY>>);

// SAFETY: the queue is Sync for Send items; the UnsafeCell is only written by `reset_in_child`,
// when the forked child has a single thread.
unsafe impl Sync for Ring {}

// heapless deprecates its MPMC queue because it is not strictly lock-free: a thread stopped half
// way through an operation makes the others' operations fail (never wait) until it resumes. Here
// that is a dropped, counted detail, which is what a full queue does anyway.
#[allow(deprecated)]
static RING: Ring = Ring(UnsafeCell::new(MpMcQueue::new()));

fn ring() -> &'static MpMcQueue<Record, CAPACITY> {
    // SAFETY: shared access; the only mutable access is in `reset_in_child` (see there).
    unsafe { &*RING.0.get() }
}

/// Queues a record for the sidecar; a full queue counts a dropped detail.
pub fn push(r: Record) {
    if ring().enqueue(r).is_err() {
        bump(&COUNTS.detail_dropped);
    }
}

/// Takes the next record, if any.
pub fn pop() -> Option<Record> {
    ring().dequeue()
}

/// In a forked child: an empty queue. Records queued in the parent are its own, and a thread of
/// the parent may have been half way through queueing one when the process forked (a slot that
/// would never be published).
///
/// # Safety
/// Only in the child right after fork, while it has a single thread.
pub unsafe fn reset_in_child() {
    // SAFETY: the caller guarantees no other thread uses the queue; the old contents are Copy.
    #[allow(deprecated)]
    unsafe {
        RING.0.get().write(MpMcQueue::new())
    }
}
