//! Keeping the signal dispositions smcrun inherited, so the program gets them as if started
//! directly. The Rust runtime sets SIGPIPE to "ignore" before `main`, and an ignored signal stays
//! ignored across execve; so the inherited disposition is read in a constructor, which runs before
//! the runtime, and put back just before the exec.

use std::sync::atomic::{AtomicBool, Ordering};

static SIGPIPE_WAS_IGNORED: AtomicBool = AtomicBool::new(false);

#[ctor::ctor]
fn record_inherited() {
    // SAFETY: libc::sigaction is a handler stored as an integer, a sigset of integers, flags and
    // an optional function pointer: all zero bytes is a valid value (SIG_DFL, an empty mask, no
    // flags, no restorer).
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action sigaction(2) only queries: it changes no disposition, and
    // writes the current one into `old`, ours and alive for the call. (nix's sigaction cannot
    // query without installing.)
    if unsafe { libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) } == 0 {
        SIGPIPE_WAS_IGNORED.store(old.sa_sigaction == libc::SIG_IGN, Ordering::Relaxed);
    }
}

/// Puts back the SIGPIPE disposition smcrun was started with.
pub fn restore_inherited() {
    let handler = if SIGPIPE_WAS_IGNORED.load(Ordering::Relaxed) {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: SIG_IGN and SIG_DFL are no handler of ours, so no code of ours can run in signal
    // context and nothing else needs to hold (nix's `signal` is unsafe just the same).
    unsafe {
        libc::signal(libc::SIGPIPE, handler);
    }
}
