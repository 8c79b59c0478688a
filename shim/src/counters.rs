//! What the hooks did, counted with relaxed atomics (no lock, no allocation) so that the numbers
//! can be reported without slowing the program down.

pub use smcrun_settings::Why;
use std::sync::atomic::{AtomicU64, Ordering};

pub use smcrun_telemetry::sidecar::{CONVERTED, TCP_AT_CREATION, UNTOUCHED};
/// bind() calls seen (counted only with SMCRUN_DEBUG=2, for its exit summary: an atomic add is not
/// free on every bind).
pub static BINDS: AtomicU64 = AtomicU64::new(0);
/// connect() calls seen (likewise only with SMCRUN_DEBUG=2).
pub static CONNECTS: AtomicU64 = AtomicU64::new(0);
static FELL_BACK: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

/// Adds one to a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Counts a socket that stayed TCP.
pub fn fell_back(why: Why) {
    bump(&TCP_AT_CREATION);
    bump(&FELL_BACK[why as usize]);
}

/// With SMCRUN_DEBUG=2, prints one summary line when the program exits.
pub fn register_exit_summary() {
    if crate::config::get().debug >= 2 {
        // SAFETY: `summary` is an extern "C" fn taking no arguments, as atexit requires.
        unsafe {
            libc::atexit(summary);
        }
    }
}

extern "C" fn summary() {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    use std::fmt::Write;
    let mut l = crate::log::Line::new();
    let _ = write!(
        l,
        "summary: {} sockets converted to SMC, {} untouched, {} binds, {} connects; stayed TCP:",
        load(&CONVERTED),
        load(&UNTOUCHED),
        load(&BINDS),
        load(&CONNECTS)
    );
    let mut any = false;
    for why in Why::ALL {
        let n = load(&FELL_BACK[why as usize]);
        if n > 0 {
            let _ = write!(l, " {}={}", why.key(), n);
            any = true;
        }
    }
    if !any {
        let _ = write!(l, " none");
    }
    l.emit();
}
