//! SIGPIPE: ignored while smcrun runs, and the disposition smcrun inherited given back to the
//! program it runs (an ignored signal stays ignored across execve).

use std::sync::atomic::{AtomicBool, Ordering};

static SIGPIPE_WAS_IGNORED: AtomicBool = AtomicBool::new(false);

/// Ignores SIGPIPE, as std's start-up does for a Rust `main`, so that smcrun's writes to a closed
/// pipe fail with EPIPE instead of killing it ([`crate::start`]); the disposition it replaces is
/// kept for [`restore_inherited`].
pub fn ignore_sigpipe() {
    // SAFETY: SIG_IGN is no handler of ours, so no code of ours can run in signal context and
    // nothing else needs to hold (nix's `signal` is unsafe just the same).
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    SIGPIPE_WAS_IGNORED.store(before == libc::SIG_IGN, Ordering::Relaxed);
}

/// Puts back the SIGPIPE disposition smcrun was started with.
pub fn restore_inherited() {
    let handler = if SIGPIPE_WAS_IGNORED.load(Ordering::Relaxed) {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: as in `ignore_sigpipe`.
    unsafe {
        libc::signal(libc::SIGPIPE, handler);
    }
}
