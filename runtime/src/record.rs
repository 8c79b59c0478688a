//! The details of classified connections (who, to or from where, how it ran), on their way from
//! the hooks to the sidecar, which keeps the recent ones and the totals per endpoint.
//!
//! A static queue (heapless' MPMC queue: a fixed array, no allocation, no lock, usable before the
//! sidecar runs and inside a signal handler); a full queue drops the detail and counts it
//! (`detail_dropped`), at once: heapless 0.8 compared its positions in 8 bits even with
//! `mpmc_large`, so a producer finding the queue of 4,096 full spun until the sidecar drained it
//! (up to a second inside the program's connect or accept; found by `bench/run`), which 0.9 fixed.
//! heapless 0.9 marks the queue deprecated because it is not strictly lock-free: a producer
//! preempted half-way through a push can make other pushes fail until it resumes. Here that is a
//! dropped detail, counted, never a wait. The counts themselves never go through here: they are
//! exact whatever happens to the details.

use crate::counters::{bump, COUNTS};
use heapless::mpmc::Queue;
use smcrun_classify::Outcome;
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

/// The queue's type.
type Details = Queue<Record, CAPACITY>;

struct Ring(UnsafeCell<Details>);

// SAFETY: the queue is Sync for Send items; the UnsafeCell is only written by `reset_in_child`,
// when the forked child has a single thread.
unsafe impl Sync for Ring {}

// Deprecated in heapless 0.9 for not being strictly lock-free; see the module's doc for why that is
// what this queue needs.
#[allow(deprecated)]
static RING: Ring = Ring(UnsafeCell::new(Details::new()));

fn ring() -> &'static Details {
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
    #[allow(deprecated)]
    // SAFETY: the caller guarantees no other thread uses the queue; the old contents are Copy.
    unsafe {
        RING.0.get().write(Details::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full queue refuses the next record at once (heapless 0.8 spun there until a consumer
    /// made room, which would hold up the program's connect or accept).
    #[test]
    fn a_full_queue_refuses_at_once() {
        #[allow(deprecated)]
        let q: Box<Details> = Box::new(Details::new());
        let r = Record {
            fd: 3,
            server: false,
            outcome: Outcome::SmcR,
            remote: None,
            local: None,
        };
        for _ in 0..CAPACITY {
            assert!(q.enqueue(r).is_ok());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let q: &'static Details = Box::leak(q);
        std::thread::spawn(move || {
            let refused = q.enqueue(r).is_err();
            let _ = tx.send(refused);
        });
        let refused = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            refused,
            Ok(true),
            "the push into a full queue did not return"
        );
        assert_eq!(q.dequeue(), Some(r));
        assert!(q.enqueue(r).is_ok(), "room again after one was taken");
    }
}
