//! Whether a hook runs where a thread may be started: not inside a signal handler, where creating
//! the sidecar's thread (an allocation, glibc's thread-stack lock) could deadlock on a lock that
//! the interrupted code holds.
//!
//! A handler runs with its own signal (and its `sa_mask`) blocked on top of what the thread had
//! blocked, so a thread's signal mask tells a handler from the thread's normal code once the
//! thread's normal mask is known. It is known as the program's mask at start-up, and, as the
//! program changes it, through the shim's `pthread_sigmask` and `sigprocmask` hooks, which record
//! what the program set: the calling thread's own setting, and the main thread's (which the threads
//! created after it inherit). Daemons that block the signals their signal thread waits for
//! (MariaDB's main thread blocks SIGHUP, SIGTERM, SIGALRM, ... before it creates any other) are
//! then in their normal context. A mask changed behind glibc's back (a raw system call) is not
//! recorded: that thread is then only ever refused, never wrongly allowed. Not told apart: a
//! handler installed with SA_NODEFER and an empty sa_mask, a handler that sets the mask itself
//! (its mask is then recorded as the thread's), and a handler whose mask happens to equal the
//! main thread's recorded one; each matters only if the program's first TCP socket is made there.
//!
//! Masks are the 64 bits of signals 1 to 64, as the kernel reads them: no allocation, no lock. The
//! thread-locals are const-initialised without destructors, in the static TLS block of a preloaded
//! library: reaching them never allocates, in a signal handler or during thread exit.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// No mask recorded. A real mask never has every bit set (SIGKILL and SIGSTOP cannot be blocked).
const UNSET: u64 = u64::MAX;

/// The program's mask when the library was loaded (the main thread's, before `main`).
static STARTUP: AtomicU64 = AtomicU64::new(0);
/// The mask the program last set in its main thread (UNSET: never).
static MAIN: AtomicU64 = AtomicU64::new(UNSET);

thread_local! {
    /// The mask the program last set in this thread (UNSET: never). Const-initialised, no
    /// destructor: touching it never allocates.
    static THREAD: Cell<u64> = const { Cell::new(UNSET) };
    /// Whether this is the thread that loaded the library (the main thread).
    static IS_MAIN: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's blocked signals (None if the kernel refused to say, which it does not).
fn current() -> Option<u64> {
    let mut mask = 0u64;
    // SAFETY: rt_sigprocmask with a null new set only writes the calling thread's mask into the
    // 8 bytes given (sigsetsize 8, the kernel's sigset_t on Linux's 64-bit targets).
    let r = smcrun_sys::errno::keep(|| unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null::<u64>(),
            &mut mask as *mut u64,
            std::mem::size_of::<u64>(),
        )
    });
    (r == 0).then_some(mask)
}

/// Called once by the library constructor, in the main thread before `main`.
pub fn take_startup() {
    IS_MAIN.with(|m| m.set(true));
    STARTUP.store(current().unwrap_or(0), Ordering::Relaxed);
}

/// The program changed the calling thread's mask (a successful `pthread_sigmask` or
/// `sigprocmask` with a new set): records the result. One system call.
pub fn program_set() {
    let Some(now) = current() else { return };
    THREAD.with(|t| t.set(now));
    if IS_MAIN.with(Cell::get) {
        MAIN.store(now, Ordering::Relaxed);
    }
}

/// Whether the calling thread runs its normal code, not a signal handler: its mask blocks nothing
/// beyond the start-up mask, or is exactly what the program set in this thread, or in the main
/// thread. (A Java VM's threads pass as well: HotSpot blocks SIGQUIT in each with pthread_sigmask.)
pub fn normal() -> bool {
    let Some(now) = current() else { return false };
    now & !STARTUP.load(Ordering::Relaxed) == 0
        || now == THREAD.with(Cell::get)
        || now == MAIN.load(Ordering::Relaxed)
}

/// Gives the calling thread (one of the runtime's) the program's normal mask: what the program
/// last set in its main thread, else its mask at start-up. The raw system call: no hook sees it.
pub fn take_programs_mask() {
    let main = MAIN.load(Ordering::Relaxed);
    let mask = if main == UNSET {
        STARTUP.load(Ordering::Relaxed)
    } else {
        main
    };
    // SAFETY: rt_sigprocmask reads the 8 bytes of `mask` (sigsetsize 8, as in `current`) and
    // writes no old set.
    let _ = smcrun_sys::errno::keep(|| unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            std::mem::size_of::<u64>(),
        )
    });
}

/// Starts one of the runtime's own threads with every signal blocked (the program's signals are
/// the program's threads' to take), putting the caller's mask back; false if it could not start.
pub fn spawn_with_signals_blocked(
    name: &str,
    stack: usize,
    body: impl FnOnce() + Send + 'static,
) -> bool {
    // SAFETY: sigfillset/pthread_sigmask on local, initialised sets; the new thread inherits the
    // full mask, and the caller's own is restored before returning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .stack_size(stack)
            .spawn(body);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit of signal `sig` (1 to 64).
    fn bit(sig: i32) -> u64 {
        1u64 << (sig - 1)
    }

    /// Sets the calling thread's mask to exactly `mask` with the raw system call.
    fn set_raw(mask: u64) {
        // SAFETY: rt_sigprocmask reads 8 bytes from a valid u64 and writes nothing back.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &mask as *const u64,
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
        assert_eq!(r, 0);
    }

    #[test]
    fn a_handler_is_told_from_the_mask_the_program_set() {
        // A thread of its own: the test harness's threads' masks are not ours to keep.
        std::thread::spawn(|| {
            let (hup, term, usr1) = (bit(libc::SIGHUP), bit(libc::SIGTERM), bit(libc::SIGUSR1));
            set_raw(0);
            assert!(normal(), "the start-up mask (nothing blocked)");
            // A daemon blocks what its signal thread waits for, and says so through the hook.
            set_raw(hup | term);
            assert!(!normal(), "not recorded: refused, never wrongly allowed");
            program_set();
            assert!(normal(), "the mask the program set in this thread");
            // In a SIGUSR1 handler: SIGUSR1 blocked on top.
            set_raw(hup | term | usr1);
            assert!(!normal(), "a handler's mask");
            set_raw(hup | term);
            assert!(normal());
            set_raw(0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn another_threads_setting_is_not_this_threads() {
        std::thread::spawn(|| {
            set_raw(bit(libc::SIGUSR2));
            program_set();
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            set_raw(bit(libc::SIGUSR2));
            assert!(!normal(), "set in another (not the main) thread");
            set_raw(0);
        })
        .join()
        .unwrap();
    }
}
