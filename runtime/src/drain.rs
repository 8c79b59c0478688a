//! Finishing an SMC socket's `shutdown(SHUT_WR)` in the background, as TCP does.
//!
//! TCP's `shutdown(SHUT_WR)` returns at once: the kernel queues its FIN behind the unsent data and
//! sends both when the peer makes room. SMC's blocks the caller while its send buffer drains (2 s
//! at most, then it drops what is left), and the shim's wait for the buffer (`shim/src/drain.rs`)
//! made that block last as long as the bytes kept leaving. A program that shuts down its writing
//! side while another of its threads must read for the peer to make room then deadlocks until the
//! wait gives up, and the tail is lost: the JDK's `shutdownOutput()` holds the socket's state lock,
//! which every read takes, so the reader cannot drain its receive buffer, the peer (an echo server)
//! blocks writing to it and stops reading, and the send buffer never empties (seen in the VM's java
//! check: both sides' buffers full for 10 s, then 32-64 KiB of 2 MiB gone).
//!
//! So the shim hands such a shutdown to this drainer and returns 0 at once: it keeps a duplicate
//! of the socket's fd (close-on-exec), watches the unsent bytes from its own thread, and makes the
//! real `shutdown` when they are out, or when none has left for [`STALL_MS`] (the peer stopped
//! reading: then as the call would have), then closes its duplicate. The socket lives on until
//! then even if the program closes its fd, as a TCP socket's unsent data does.
//!
//! Hooks only claim a slot (one compare-and-swap), duplicate the fd and wake the thread: no lock,
//! no allocation, async-signal-safe once the thread runs. The thread is started by the first
//! deferred shutdown made where a thread may be started (the sidecar's rule); otherwise, or with
//! every slot taken, or with no fd left for the duplicate, the caller waits as before. Before it
//! touches a duplicate, the thread checks that the fd still is the socket it duplicated (device and
//! inode): a program that `dup2`s onto that number has closed the duplicate, and the thread then
//! leaves that fd alone. A forked child closes its copies of the duplicates (the parent finishes
//! them), and the exit handler and the shim's `_exit` wait until every deferred shutdown is done,
//! so that a program that shuts down and exits loses nothing. Not covered: a program that writes
//! after its shutdown (it gets no EPIPE until the real shutdown is made), and one that execs while
//! a shutdown is deferred (the duplicate closes with the exec).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::alone::Tid;
use libc::c_int;
use smcrun_sys::sock;

/// How long the unsent bytes may stay the same before the wait for them ends, in ms: the peer is
/// then taken to have stopped reading.
pub const STALL_MS: u64 = 10_000;

/// The longest nap between two looks at a send buffer, in ms.
pub const MAX_NAP_MS: u64 = 20;

/// How a wait for a send buffer goes on, one look at a time.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// The unsent bytes at the first look.
    pub first: c_int,
    last: c_int,
    still_ms: u64,
    /// The nap before the next look, in ms.
    pub nap_ms: u64,
    /// About how long the wait has lasted, in ms.
    pub waited_ms: u64,
}

/// What a look at the send buffer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Bytes are still unsent and moving (or have not stalled long enough): look again.
    Again,
    /// Everything left (or the kernel cannot say any more).
    Done,
    /// Nothing left for [`STALL_MS`]: the peer stopped reading; this many bytes are still unsent.
    Stalled(c_int),
}

impl Progress {
    /// A wait that starts with `first` unsent bytes.
    pub const fn new(first: c_int) -> Progress {
        Progress {
            first,
            last: first,
            still_ms: 0,
            nap_ms: 1,
            waited_ms: 0,
        }
    }

    /// Records a look, made [`Progress::nap_ms`] after the previous one, that found `unsent`
    /// bytes (None: the kernel no longer says).
    pub fn look(&mut self, unsent: Option<c_int>) -> Look {
        self.waited_ms += self.nap_ms;
        let n = match unsent {
            Some(n) if n > 0 => n,
            _ => return Look::Done,
        };
        if n < self.last {
            (self.last, self.still_ms, self.nap_ms) = (n, 0, 1);
            return Look::Again;
        }
        self.still_ms += self.nap_ms;
        if self.still_ms >= STALL_MS {
            return Look::Stalled(n);
        }
        self.nap_ms = (self.nap_ms * 2).min(MAX_NAP_MS);
        Look::Again
    }
}

/// Slots for deferred shutdowns: more at once than this and the caller waits itself.
const SLOTS: usize = 64;
/// A slot with nothing in it.
const FREE: i32 = -1;
/// A slot a hook has claimed and is filling.
const CLAIMED: i32 = -2;

/// Per slot: the duplicate fd, [`FREE`] or [`CLAIMED`].
static FD: [AtomicI32; SLOTS] = [const { AtomicI32::new(FREE) }; SLOTS];
/// Per slot: the `how` of the shutdown to make, and the debug level, as `how | level << 8`.
static HOW: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
/// Per slot: the socket's device and inode, to tell it from whatever later takes its number.
static DEV: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static INO: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// How many slots hold a deferred shutdown (its futex word is [`WAKE`]).
static PENDING: AtomicU32 = AtomicU32::new(0);
/// Set by a hook that filled a slot; the thread's futex word.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// The thread: 0 not started, 1 running, 2 could not be started or ended (callers wait
/// themselves), 3 being started, [`PAUSED`], [`STOPPED`].
static THREAD: AtomicU32 = AtomicU32::new(0);
/// Asked to end once no shutdown waits, for a call that needs the program to be its only thread
/// (`crate::alone`); callers wait themselves meanwhile.
const PAUSED: u32 = 4;
/// Ended when asked: started again at its next use.
const STOPPED: u32 = 5;
/// The thread, so that a stop can wait until it has left the process.
static TID: Tid = Tid::new();
/// Counts the thread's progress (bytes left a buffer, a shutdown was made): the exit handler
/// stops waiting for a thread that has made none for longer than any one wait can last.
static ACTIVITY: AtomicU64 = AtomicU64::new(0);

/// Hands `shutdown(fd, how)` of an SMC socket that still holds unsent bytes to the drainer.
/// True: it will be made (the caller returns 0); false: the caller must wait and make it itself.
/// `debug` is the `SMCRUN_DEBUG` level, for the drainer's lines.
pub fn defer(fd: c_int, how: c_int, debug: u8) -> bool {
    // a vfork child shares its parent's memory but not its fd table: the thread would act on the
    // parent's fd of that number
    if !smcrun_sys::errno::keep(crate::fdtable::owned) || !running() {
        return false;
    }
    let Some(slot) = (0..SLOTS).find(|&i| {
        FD[i]
            .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }) else {
        return false;
    };
    let (Ok((dev, ino)), Ok(dup)) = (sock::identity_of_file(fd), sock::dup_cloexec(fd)) else {
        FD[slot].store(FREE, Ordering::Release);
        return false;
    };
    HOW[slot].store(how | i32::from(debug) << 8, Ordering::Relaxed);
    DEV[slot].store(dev, Ordering::Relaxed);
    INO[slot].store(ino, Ordering::Relaxed);
    // counted before it is published, so that the thread never counts it out first
    PENDING.fetch_add(1, Ordering::AcqRel);
    FD[slot].store(dup, Ordering::Release);
    WAKE.store(1, Ordering::Release);
    let _ = rustix::thread::futex::wake(&WAKE, rustix::thread::futex::Flags::PRIVATE, 1);
    true
}

/// Whether the thread runs, starting it if it does not yet and the calling context allows it.
fn running() -> bool {
    match THREAD.load(Ordering::Acquire) {
        1 => return true,
        2 | PAUSED | STOPPED => return false,
        _ => {}
    }
    if !smcrun_sys::errno::keep(|| crate::sigmask::normal() && crate::fdtable::owned()) {
        return false;
    }
    if THREAD
        .compare_exchange(0, 3, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // another thread is starting it: wait themselves this once
        return THREAD.load(Ordering::Acquire) == 1;
    }
    let started = smcrun_sys::errno::keep(|| {
        crate::sigmask::spawn_with_signals_blocked("smcrun-drain", 64 * 1024, || {
            // it returns only when asked to end (STOPPED: started again at its next use); one
            // that panicked takes no more (the panic caught: never the program's)
            if std::panic::catch_unwind(run).is_err() {
                THREAD.store(2, Ordering::Release);
            }
        })
    });
    // 3 -> 1, unless the thread has already ended (2)
    let now = if started { 1 } else { 2 };
    THREAD
        .compare_exchange(3, now, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
        && started
}

/// The drainer's thread: looks at every deferred shutdown's send buffer until it is out.
fn run() {
    TID.set_current();
    let mut waits: [Option<(c_int, Progress)>; SLOTS] = [None; SLOTS];
    loop {
        if PENDING.load(Ordering::Acquire) == 0 {
            if THREAD
                .compare_exchange(PAUSED, STOPPED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
            if WAKE.swap(0, Ordering::AcqRel) == 0 {
                let _ = rustix::thread::futex::wait(
                    &WAKE,
                    rustix::thread::futex::Flags::PRIVATE,
                    0,
                    None,
                );
            }
            continue;
        }
        let mut nap = MAX_NAP_MS;
        for (i, wait) in waits.iter_mut().enumerate() {
            let fd = FD[i].load(Ordering::Acquire);
            if fd < 0 {
                *wait = None;
                continue;
            }
            // a new shutdown in this slot: its wait starts now
            if !matches!(wait, Some((f, _)) if *f == fd) {
                *wait = Some((fd, Progress::new(sock::unsent(fd).unwrap_or(0))));
            }
            let Some((_, progress)) = wait.as_mut() else {
                continue;
            };
            let same = sock::identity_of_file(fd)
                == Ok((
                    DEV[i].load(Ordering::Relaxed),
                    INO[i].load(Ordering::Relaxed),
                ));
            let verdict = if same {
                progress.look(sock::unsent(fd).ok())
            } else {
                Look::Done
            };
            if verdict == Look::Again {
                if progress.nap_ms == 1 {
                    ACTIVITY.fetch_add(1, Ordering::Relaxed);
                }
                nap = nap.min(progress.nap_ms);
                continue;
            }
            ACTIVITY.fetch_add(1, Ordering::Relaxed);
            let how = HOW[i].load(Ordering::Relaxed);
            if same {
                say(fd, how >> 8, progress, verdict);
                let _ = sock::shutdown(fd, how & 0xff);
                let _ = sock::close(fd);
            }
            *wait = None;
            FD[i].store(FREE, Ordering::Release);
            PENDING.fetch_sub(1, Ordering::AcqRel);
        }
        std::thread::sleep(Duration::from_millis(nap));
    }
}

/// The drainer's `SMCRUN_DEBUG` lines, as the shim's own wait says them.
fn say(fd: c_int, debug: i32, p: &Progress, verdict: Look) {
    match verdict {
        Look::Stalled(n) if debug >= 1 => crate::line!(
            "shutdown (fd {fd}, finished in the background): {n} bytes still unsent after {} s without progress: the peer has stopped reading, and the kernel may drop them",
            STALL_MS / 1000
        ),
        Look::Done if debug >= 2 && p.first > 0 => crate::line!(
            "shutdown (fd {fd}, finished in the background): waited about {} ms for {} unsent bytes to leave",
            p.waited_ms,
            p.first
        ),
        _ => {}
    }
}

/// Asks a running drainer to end once no deferred shutdown waits, and waits, until `until`, for
/// its thread to have left the process (for `crate::alone`). One still draining when `until`
/// comes goes on: the program's bytes come first.
pub(crate) fn stop_for_call(until: Instant) {
    if THREAD
        .compare_exchange(1, PAUSED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    WAKE.store(1, Ordering::Release);
    let _ = rustix::thread::futex::wake(&WAKE, rustix::thread::futex::Flags::PRIVATE, 1);
    crate::alone::wait_until(until, || {
        matches!(THREAD.load(Ordering::Acquire), STOPPED | 2) && TID.gone()
    });
}

/// Whether the drainer's thread runs (or was asked to end and has not yet).
pub(crate) fn runs() -> bool {
    matches!(THREAD.load(Ordering::Acquire), 1 | PAUSED)
}

/// For the sidecar, once the program's threads are all gone (its main thread having left): asks
/// a running drainer to end once no deferred shutdown waits, waiting up to 100 ms; true while it
/// still runs (the sidecar asks again at its next check). An idle drainer never ends by itself,
/// and glibc ends the process only with its last thread.
pub(crate) fn still_runs_at_end() -> bool {
    if !runs() {
        return false;
    }
    stop_for_call(Instant::now() + Duration::from_millis(100));
    runs()
}

/// After the call: a drainer that did not end goes on; one that ended starts again at its next
/// use, or now if a shutdown was handed to it as it ended.
pub(crate) fn go_on() {
    if THREAD
        .compare_exchange(PAUSED, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return;
    }
    // Only this leaves STOPPED: its thread is gone, and no other can have been recorded yet.
    if THREAD.load(Ordering::Acquire) == STOPPED {
        TID.clear();
        THREAD.store(0, Ordering::Release);
        if PENDING.load(Ordering::Acquire) > 0 {
            running();
            WAKE.store(1, Ordering::Release);
            let _ = rustix::thread::futex::wake(&WAKE, rustix::thread::futex::Flags::PRIVATE, 1);
        }
    }
}

/// In a forked child: the duplicates it inherited are its parent's to finish; it closes its
/// copies and starts afresh (no thread runs in the child).
pub fn forget_in_child() {
    for fd in &FD {
        let f = fd.swap(FREE, Ordering::AcqRel);
        if f >= 0 {
            let _ = sock::close(f);
        }
    }
    PENDING.store(0, Ordering::Release);
    WAKE.store(0, Ordering::Relaxed);
    THREAD.store(0, Ordering::Release);
    TID.clear();
}

/// At exit: waits until every deferred shutdown is made (each ends when its bytes are out or have
/// stalled for [`STALL_MS`]), so that a program that shuts down and exits loses nothing.
pub fn wait_at_exit() {
    // a wait ends STALL_MS after its last progress, then the kernel's shutdown may wait its own
    // 2 s (or a linger of up to STALL_MS); beyond that the thread is stuck, and exit goes on
    let idle_limit = Duration::from_millis(2 * STALL_MS + 2_000);
    let (mut seen, mut idle) = (ACTIVITY.load(Ordering::Relaxed), Duration::ZERO);
    while PENDING.load(Ordering::Acquire) > 0
        && THREAD.load(Ordering::Acquire) == 1
        && idle < idle_limit
    {
        std::thread::sleep(Duration::from_millis(2));
        let now = ACTIVITY.load(Ordering::Relaxed);
        idle = if now == seen {
            idle + Duration::from_millis(2)
        } else {
            Duration::ZERO
        };
        seen = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_when_the_bytes_are_out_or_stop_moving() {
        let mut p = Progress::new(1000);
        assert_eq!(p.look(Some(900)), Look::Again);
        assert_eq!(p.nap_ms, 1, "progress: the next look comes soon");
        assert_eq!(p.look(Some(0)), Look::Done);
        let mut p = Progress::new(1000);
        assert_eq!(p.look(None), Look::Done, "the kernel no longer says");
        let mut p = Progress::new(500);
        let mut looks = 0;
        let end = loop {
            looks += 1;
            match p.look(Some(500)) {
                Look::Again => continue,
                other => break other,
            }
        };
        assert_eq!(end, Look::Stalled(500));
        assert!(p.waited_ms >= STALL_MS, "{}", p.waited_ms);
        assert!(
            looks < 600,
            "the naps grow to {MAX_NAP_MS} ms: {looks} looks"
        );
    }
}
