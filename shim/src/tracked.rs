//! Which fds hold TCP sockets the shim handled, so that connect() and accept() on other sockets
//! (UDP "connects" of DNS resolvers, UNIX listeners) send the sidecar nothing.
//!
//! A fixed bitmap of atomics for fds below [`LIMIT`] (8 KiB, zero pages until touched): setting,
//! clearing and testing a bit is one atomic instruction, no lock, no allocation. A bit can go stale
//! when the program closes the fd and the number is reused by something the shim does not see
//! (open, pipe); the cost is one spurious event, which the sidecar ignores. Fds at or above the
//! limit are always treated as tracked.

use std::sync::atomic::{AtomicU64, Ordering};

/// Fds below this are tracked exactly.
pub const LIMIT: usize = 65536;
/// TCP sockets the shim handled (converted or not).
static TCP: [AtomicU64; LIMIT / 64] = [const { AtomicU64::new(0) }; LIMIT / 64];
/// Of those, the ones made as SMC sockets (the ones a policy may still turn to TCP).
static SMC: [AtomicU64; LIMIT / 64] = [const { AtomicU64::new(0) }; LIMIT / 64];

fn slot(map: &'static [AtomicU64], fd: i32) -> Option<(&'static AtomicU64, u64)> {
    let fd = usize::try_from(fd).ok()?;
    (fd < LIMIT).then(|| (&map[fd / 64], 1u64 << (fd % 64)))
}

fn set(map: &'static [AtomicU64], fd: i32, on: bool) {
    if let Some((w, b)) = slot(map, fd) {
        if on {
            w.fetch_or(b, Ordering::Relaxed);
        } else {
            w.fetch_and(!b, Ordering::Relaxed);
        }
    }
}

/// Marks `fd` as a TCP socket of interest, made as an SMC socket or not.
pub fn mark(fd: i32, smc: bool) {
    set(&TCP, fd, true);
    set(&SMC, fd, smc);
}

/// Unmarks `fd` (it now holds another kind of socket).
pub fn clear(fd: i32) {
    set(&TCP, fd, false);
    set(&SMC, fd, false);
}

/// Whether events about `fd` matter.
pub fn is_marked(fd: i32) -> bool {
    match slot(&TCP, fd) {
        Some((w, b)) => w.load(Ordering::Relaxed) & b != 0,
        None => fd >= 0,
    }
}

/// Whether `fd` was made as an SMC socket (false for fds beyond [`LIMIT`]: the policy then
/// leaves them as they are).
pub fn is_smc(fd: i32) -> bool {
    slot(&SMC, fd).is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
}
