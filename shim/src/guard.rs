//! What every exported hook runs inside: a re-entrancy guard, a panic barrier and errno care.
//!
//! A hook body may itself end up in a hooked function (a debug line, another preload's hook
//! calling back); the thread-local flag sends such nested calls straight to the real function.
//! The flag is const-initialised and has no destructor, so touching it never allocates, never
//! registers a TLS destructor and works during thread exit.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use smcrun_sys::errno::Errno;

thread_local! {
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    Errno::last().0
}

/// Sets the calling thread's errno.
pub fn set_errno(e: i32) {
    Errno(e).set()
}

/// The outcome of the real call, recorded by a hook body as soon as it is made, so that a panic
/// after it returns that outcome instead of calling the real function a second time.
pub struct Outcome(Cell<Option<(i32, i32)>>);

impl Outcome {
    /// Records the real call's return value and the errno it left.
    pub fn record(&self, ret: i32) -> i32 {
        self.0.set(Some((ret, errno())));
        ret
    }
}

/// Runs `body` as a hook: nested calls on the same thread, and panics before the real call was
/// made, go to `passthrough` (the real function with the caller's arguments). errno is the
/// caller's on entry to `passthrough`.
pub fn hook(passthrough: impl Fn() -> i32, body: impl FnOnce(&Outcome) -> i32) -> i32 {
    // One thread-local lookup for the whole call (in a shared library each lookup is a call into
    // the dynamic loader's TLS resolver).
    IN_HOOK.with(|in_hook| {
        if in_hook.replace(true) {
            return passthrough();
        }
        let entry_errno = errno();
        let outcome = Outcome(Cell::new(None));
        let result = catch_unwind(AssertUnwindSafe(|| body(&outcome)));
        in_hook.set(false);
        match result {
            Ok(ret) => ret,
            Err(_) => match outcome.0.get() {
                Some((ret, e)) => {
                    set_errno(e);
                    ret
                }
                None => {
                    set_errno(entry_errno);
                    passthrough()
                }
            },
        }
    })
}
