//! Keeping the signal dispositions smcrun inherited, so the program gets them as if started
//! directly. The Rust runtime sets SIGPIPE to "ignore" before `main`, and an ignored signal stays
//! ignored across execve; so the inherited disposition is read in a constructor, which runs before
//! the runtime, and put back just before the exec.

use std::sync::atomic::{AtomicBool, Ordering};

static SIGPIPE_WAS_IGNORED: AtomicBool = AtomicBool::new(false);

#[ctor::ctor]
fn record_inherited() {
    // SAFETY: querying (not changing) a disposition with a zeroed sigaction to write into.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0 {
            SIGPIPE_WAS_IGNORED.store(old.sa_sigaction == libc::SIG_IGN, Ordering::Relaxed);
        }
    }
}

/// Puts back the SIGPIPE disposition smcrun was started with.
pub fn restore_inherited() {
    let handler = if SIGPIPE_WAS_IGNORED.load(Ordering::Relaxed) {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: installing SIG_IGN or SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, handler);
    }
}
