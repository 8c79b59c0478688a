//! A descriptor table of its own for the sidecar thread, so that the program's table keeps the
//! users it had.
//!
//! While a descriptor table has one user, the kernel looks descriptors up without taking a
//! reference on the file; once a second thread shares it, every descriptor call of every thread
//! takes the counted path. A single-threaded program under the shim paid that on every call once
//! the sidecar ran: +58 to +88 ns per bind or getsockopt on one host, 2 to 18 ns on another
//! (bench/run's hooks, issue 23), where a thread with a table of its own costs nothing
//! measurable.
//!
//! So the sidecar thread, when it starts, gives itself an empty table
//! (`close_range(CLOSE_RANGE_UNSHARE)`, Linux 5.9) and reaches the program's descriptors through
//! a pidfd of its own process (`pidfd_getfd`, Linux 5.6: a duplicate, closed after each use). Its
//! descriptors 0 to 2 are that pidfd (reads and writes on a pidfd fail), so that nothing it
//! writes to a standard stream lands in a file of its own, and it holds no copy of the program's
//! standard streams: a pipe the program closes is closed. Its lines go to the program's stderr
//! through a duplicate. Its own calls bypass the shim's hooks (their descriptor numbers are not
//! the program's).
//!
//! It stays in the shared table (as before) when the kernel lacks a call, and whenever a seccomp
//! filter is installed: a filter may kill the process on a call it does not list (systemd's
//! `SystemCallFilter=` does by default, and `pidfd_getfd` is not in `@system-service`), and no
//! call can ask a filter what it would do. Container engines install filters, so in containers
//! the sidecar shares the table. A filter installed later on every thread (`TSYNC`) stops the
//! sidecar before its next call ([`still_safe`]).
//!
//! The pidfd reaches the main thread's table. A program whose main thread leaves with
//! pthread_exit while other threads go on has its sidecar replaced, in the shim's hook before the
//! main thread goes, by one in the program's table ([`forbid`],
//! `crate::sidecar::main_thread_leaving`). A main thread that leaves with the raw exit system
//! call is not seen.

use smcrun_sys::table;
use smcrun_sys::Errno;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

thread_local! {
    /// On a thread with a table of its own: the pidfd of its process, in that table; else -1.
    static PIDFD: Cell<i32> = const { Cell::new(-1) };
}

/// The shim's switch for the calling thread's hooks: `true` sends its calls straight to the real
/// functions (set once by the library constructor).
static BYPASS_HOOKS: OnceLock<fn(bool)> = OnceLock::new();

/// Sets how the calling thread's hooks are bypassed (the shim's guard).
pub fn set_bypass(f: fn(bool)) {
    let _ = BYPASS_HOOKS.set(f);
}

fn bypass(on: bool) {
    if let Some(f) = BYPASS_HOOKS.get() {
        f(on);
    }
}

/// Why the calling thread stayed in the program's table, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    /// A seccomp filter is installed (or the thread's status could not be read).
    Seccomp,
    /// The shim's hooks cannot be bypassed (no shim: the runtime's own tests).
    NoShim,
    /// The kernel refused a call (`pidfd_open`, `pidfd_getfd` or `close_range`).
    Kernel(Errno),
    /// The program's main thread left with pthread_exit (its pidfd reaches that thread's table).
    MainGone,
}

/// What [`enter`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entered {
    /// The calling thread has a table of its own and reaches the program's through a pidfd.
    Own,
    /// The calling thread still shares the program's table.
    Shared(Shared),
    /// The table was unshared but the pidfd could not be made: the thread must not touch the
    /// program's descriptors (it sees none of them) and should end.
    Blind(Errno),
}

/// What the sidecar's table came to in this process, for the `SMCRUN_DEBUG=2` exit summary: one
/// of the codes below and an errno, as `code << 32 | errno`.
static OUTCOME: AtomicU64 = AtomicU64::new(NOT_STARTED);
const NOT_STARTED: u64 = 0;
const OWN: u64 = 1;
const SECCOMP: u64 = 2;
const NO_SHIM: u64 = 3;
const KERNEL: u64 = 4;
const BLIND: u64 = 5;
const STOPPED: u64 = 6;
const MAIN_GONE: u64 = 7;

/// Gives the calling thread (the sidecar, once, at its start) an empty table of its own, if that
/// is safe here; see the module's doc.
pub fn enter() -> Entered {
    let e = enter_now();
    let (code, errno) = match e {
        Entered::Own => (OWN, 0),
        Entered::Shared(Shared::Seccomp) => (SECCOMP, 0),
        Entered::Shared(Shared::NoShim) => (NO_SHIM, 0),
        Entered::Shared(Shared::Kernel(e)) => (KERNEL, e.0),
        Entered::Shared(Shared::MainGone) => (MAIN_GONE, 0),
        Entered::Blind(e) => (BLIND, e.0),
    };
    OUTCOME.store(code << 32 | u64::from(errno as u32), Ordering::SeqCst);
    e
}

/// Set when the program's main thread left ([`forbid`]): a sidecar that starts from then on keeps
/// the program's table (its pidfd would reach the main thread's table, which is gone).
static FORBIDDEN: AtomicBool = AtomicBool::new(false);

/// No sidecar takes a table of its own from now on (the main thread is leaving).
pub fn forbid() {
    FORBIDDEN.store(true, Ordering::SeqCst);
}

/// Whether a sidecar that started has not chosen its table yet.
pub fn undecided() -> bool {
    OUTCOME.load(Ordering::SeqCst) >> 32 == NOT_STARTED
}

/// Whether the sidecar chose a table of its own.
pub fn chose_own() -> bool {
    OUTCOME.load(Ordering::SeqCst) >> 32 == OWN
}

/// The sidecar stopped because a seccomp filter reached it ([`still_safe`]).
pub fn note_stopped() {
    OUTCOME.store(STOPPED << 32, Ordering::Relaxed);
}

/// In a forked child, whose sidecar starts again: nothing known yet.
pub fn forget_in_child() {
    OUTCOME.store(NOT_STARTED, Ordering::Relaxed);
    FORBIDDEN.store(false, Ordering::Relaxed);
}

/// Which descriptor table the sidecar has, in words, for the exit summary.
pub struct Summary;

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = OUTCOME.load(Ordering::Relaxed);
        let e = Errno(v as u32 as i32);
        match v >> 32 {
            OWN => f.write_str("its own descriptor table"),
            SECCOMP => {
                f.write_str("the program's descriptor table (a seccomp filter is installed)")
            }
            NO_SHIM => f.write_str("the program's descriptor table"),
            KERNEL => write!(
                f,
                "the program's descriptor table (the kernel refused: {e})"
            ),
            MAIN_GONE => f.write_str("the program's descriptor table (the main thread left)"),
            BLIND => write!(f, "none: it stopped (no pidfd: {e})"),
            STOPPED => f.write_str("none: it stopped (a seccomp filter reached it)"),
            _ => f.write_str("none (not started)"),
        }
    }
}

fn enter_now() -> Entered {
    if BYPASS_HOOKS.get().is_none() {
        return Entered::Shared(Shared::NoShim);
    }
    if !seccomp_off() {
        return Entered::Shared(Shared::Seccomp);
    }
    if FORBIDDEN.load(Ordering::SeqCst) {
        return Entered::Shared(Shared::MainGone);
    }
    // Both calls tried in the program's table first: a refusal leaves everything as it was.
    let probe = table::pidfd_of_process().and_then(|p| {
        let r = table::with_fetched(p, p, drop);
        let _ = smcrun_sys::sock::close(p);
        r
    });
    if let Err(e) = probe {
        return Entered::Shared(Shared::Kernel(e));
    }
    bypass(true);
    if let Err(e) = table::unshare_empty() {
        bypass(false);
        return Entered::Shared(Shared::Kernel(e));
    }
    // The table is empty: the pidfd takes 0, and 1 and 2 become copies of it.
    let filled = table::pidfd_of_process().and_then(|p| {
        smcrun_sys::sock::dup3(p, 1, libc::O_CLOEXEC)?;
        smcrun_sys::sock::dup3(p, 2, libc::O_CLOEXEC)?;
        Ok(p)
    });
    match filled {
        Ok(p) => {
            PIDFD.with(|c| c.set(p));
            Entered::Own
        }
        Err(e) => Entered::Blind(e),
    }
}

/// Whether the calling thread may still use the calls its own table needs: on a thread with a
/// table of its own, false once a seccomp filter applies to it (one installed since with
/// `SECCOMP_FILTER_FLAG_TSYNC`, which reaches every thread of the process: its next
/// `pidfd_getfd` could kill the process). The sidecar asks before each look (a read of
/// /proc/thread-self/status, never a call a filter might refuse) and stops when it is false.
pub fn still_safe() -> bool {
    pidfd().is_none() || seccomp_off()
}

/// Whether no seccomp filter applies to the calling thread (`Seccomp:` in its status is 0).
fn seccomp_off() -> bool {
    smcrun_sys::status::field("/proc/thread-self/status", "Seccomp:", |v| {
        Some(v.trim() == "0")
    })
    .unwrap_or(false)
}

/// The pidfd through which the calling thread reaches the program's descriptors, when it has a
/// table of its own (None: its descriptor numbers are the program's).
pub fn pidfd() -> Option<i32> {
    let p = PIDFD.with(Cell::get);
    (p >= 0).then_some(p)
}

/// `f` on the program's descriptor `fd`, from whichever table the calling thread has: the number
/// itself in the program's table, else a duplicate (closed after). `Err`: no such descriptor.
pub fn with_program_fd<T>(fd: i32, f: impl FnOnce(i32) -> T) -> Result<T, Errno> {
    match pidfd() {
        None => Ok(f(fd)),
        Some(p) => table::with_fetched(p, fd, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::{Kernel, Live};
    use smcrun_sys::sock::TcpState;
    use std::os::fd::AsRawFd;

    /// A thread that gave itself a table of its own still reads the program's sockets by their
    /// numbers in the program's table (inode, both addresses, TCP state), and finds nothing
    /// under a number the program does not hold. Under a seccomp filter it stays shared, and
    /// reads the same.
    #[test]
    fn a_thread_with_its_own_table_reads_the_programs_sockets() {
        set_bypass(|_| {});
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = c.as_raw_fd();
        let want = (
            smcrun_sys::sock::socket_inode(fd),
            c.local_addr().ok(),
            c.peer_addr().ok(),
        );
        assert!(want.0.is_some());
        let filtered = !seccomp_off();
        let (entered, got, state, unused) = std::thread::spawn(move || {
            let entered = enter();
            let k = Live::default();
            let got = (k.inode(fd), k.local(fd), k.peer(fd));
            (entered, got, k.tcp_state(fd), k.inode(1000))
        })
        .join()
        .unwrap();
        if filtered {
            assert_eq!(entered, Entered::Shared(Shared::Seccomp));
        } else {
            assert_eq!(entered, Entered::Own);
        }
        assert_eq!(got, want);
        assert_eq!(state, Some(TcpState::Connected));
        assert_eq!(unused, None);
        // this thread never entered: the program's table, directly
        assert_eq!(pidfd(), None);
        assert_eq!(with_program_fd(fd, |d| d), Ok(fd));
    }
}
