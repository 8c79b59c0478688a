//! What every exported hook runs inside: a re-entrancy guard, a panic barrier and errno care.
//!
//! A hook body may itself end up in a hooked function (a debug line, another preload's hook
//! calling back); the thread-local flag sends such nested calls straight to the real function.
//! The flag is zero- (const-) initialised and has no destructor, so touching it never allocates,
//! never registers a TLS destructor and works during thread exit.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use smcrun_sys::errno::Errno;

/// The calling thread's flag, on x86_64 Linux: one byte of initial-exec TLS declared in assembly.
/// A Rust `thread_local!` in a shared library uses the general-dynamic model, which costs a call
/// into the dynamic loader (`__tls_get_addr`) and an accessor on every use: about 40 of the 150
/// instructions a pass-through hook added (callgrind, `bench/run --only hooks`). Initial-exec is a
/// load from the GOT and an `%fs`-relative access. It places the byte in the static TLS block
/// (the library is marked STATIC_TLS): a preloaded library always gets one; one `dlopen`ed into
/// a running program gets it from glibc's surplus, which is there for this.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod flag {
    use std::arch::{asm, global_asm};

    // The byte, in a TLS section of its own; global so that every codegen unit of the library
    // can name it, hidden so that it is not exported (nor can another object bind to it).
    global_asm!(
        ".pushsection .tbss.smcrun_in_hook,\"awT\",@nobits",
        ".globl smcrun_in_hook",
        ".hidden smcrun_in_hook",
        ".type smcrun_in_hook,@object",
        ".size smcrun_in_hook,1",
        "smcrun_in_hook:",
        ".zero 1",
        ".popsection",
    );

    /// The byte's offset from the thread pointer (the same for every thread: initial-exec).
    #[inline(always)]
    fn offset() -> isize {
        let off: isize;
        // SAFETY: reads the GOT entry the linker made for the symbol above (a TPOFF relocation
        // the loader fills before any code runs); no other effect.
        unsafe {
            asm!("movq smcrun_in_hook@GOTTPOFF(%rip), {}", out(reg) off,
                options(att_syntax, pure, nomem, nostack, preserves_flags));
        }
        off
    }

    /// Whether the calling thread is inside a hook.
    #[inline(always)]
    pub fn get() -> bool {
        let v: u8;
        // SAFETY: %fs points at the calling thread's TLS; `offset` is the byte's place in it.
        unsafe {
            asm!("movb %fs:({off}), {v}", off = in(reg) offset(), v = out(reg_byte) v,
                options(att_syntax, nostack, preserves_flags, readonly));
        }
        v != 0
    }

    /// Sets the calling thread's flag.
    #[inline(always)]
    pub fn set(inside: bool) {
        // SAFETY: as in `get`; writes the calling thread's own byte only.
        unsafe {
            asm!("movb {v}, %fs:({off})", off = in(reg) offset(), v = in(reg_byte) u8::from(inside),
                options(att_syntax, nostack, preserves_flags));
        }
    }
}

/// The calling thread's flag elsewhere: a const-initialised `thread_local!`.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod flag {
    use std::cell::Cell;

    thread_local! {
        static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    }

    /// Whether the calling thread is inside a hook.
    #[inline(always)]
    pub fn get() -> bool {
        IN_HOOK.with(Cell::get)
    }

    /// Sets the calling thread's flag.
    #[inline(always)]
    pub fn set(inside: bool) {
        IN_HOOK.with(|f| f.set(inside))
    }
}

/// Whether the calling thread is inside a hook: its calls then go straight to the real function.
#[inline(always)]
pub fn nested() -> bool {
    flag::get()
}

/// Sends every call of the calling thread straight to the real functions from now on (`true`),
/// or no longer (`false`): for the sidecar's thread once it has a descriptor table of its own,
/// whose descriptor numbers are not the program's (`smcrun_runtime::own_table`).
pub fn bypass_thread(on: bool) {
    flag::set(on)
}

/// The calling thread's errno.
#[inline]
pub fn errno() -> i32 {
    Errno::last().0
}

/// Sets the calling thread's errno.
#[inline]
pub fn set_errno(e: i32) {
    Errno(e).set()
}

/// The outcome of the real call, recorded by a hook body as soon as it is made, so that a panic
/// after it returns that outcome instead of calling the real function a second time; and the
/// caller's errno when the hook was entered.
pub struct Outcome(Cell<Option<(i32, i32)>>, i32);

impl Outcome {
    /// Records the real call's return value and the errno it left.
    pub fn record(&self, ret: i32) -> i32 {
        self.0.set(Some((ret, errno())));
        ret
    }

    /// [`Self::record`] for a call made with the caller's errno in place that, as a system call's
    /// C wrapper does (socket, close), leaves errno alone when it succeeds: the errno a success
    /// left is then the caller's, and only a failure's is read.
    #[inline(always)]
    pub fn record_call(&self, ret: i32) -> i32 {
        let e = if ret < 0 { errno() } else { self.1 };
        self.0.set(Some((ret, e)));
        ret
    }

    /// The caller's errno at the hook's entry (read once, by [`hook`]): what a body that makes
    /// calls of its own puts back.
    #[inline(always)]
    pub fn entry(&self) -> i32 {
        self.1
    }
}

/// Runs `body` as a hook: nested calls on the same thread, and panics before the real call was
/// made, go to `passthrough` (the real function with the caller's arguments). errno is the
/// caller's on entry to `passthrough`. Inlined into each hook, so that the closures are too.
///
/// A signal handler that runs a hook between the flag's test and its setting finds it clear,
/// runs the hook and clears it again before this one sets it: as with a thread-local Cell.
#[inline(always)]
pub fn hook(passthrough: impl Fn() -> i32, body: impl FnOnce(&Outcome) -> i32) -> i32 {
    if flag::get() {
        return passthrough();
    }
    flag::set(true);
    let entry_errno = errno();
    let outcome = Outcome(Cell::new(None), entry_errno);
    let result = catch_unwind(AssertUnwindSafe(|| body(&outcome)));
    flag::set(false);
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
}
