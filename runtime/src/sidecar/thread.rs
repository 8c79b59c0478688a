//! The sidecar thread's life: started on demand from a hook that may start it, woken by hooks
//! (a futex), pacing its looks, forgotten in a forked child, and stopped by the exit handler after
//! the final report.

use super::kernel::Live;
use super::pace::{nap_after, NAP_MIN, NAP_PER_COST};
use super::state::State;
use crate::alone::Tid;
use crate::counters::COUNTS;
use crate::fdtable::Phase;
use crate::own_table::{self, Entered};
use smcrun_report::ProcessReport;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The running sidecar of this process.
struct Sidecar {
    state: Mutex<State>,
}

/// Null until the sidecar runs in this process (and again in a fresh fork child).
static SIDECAR: AtomicPtr<Sidecar> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not started; 1: starting or running; 2: could not start; [`PAUSED`]; [`STOPPED`].
static STARTED: AtomicU8 = AtomicU8::new(0);
/// Asked to end at its next turn, for a call that needs the program to be its only thread
/// (`crate::alone`).
const PAUSED: u8 = 3;
/// Ended when asked ([`PAUSED`]): started again, with its state, after the call.
const STOPPED: u8 = 4;
/// The sidecar thread, so that a stop can wait until it has left the process.
static TID: Tid = Tid::new();
/// Start attempts refused because the caller's signal mask was not the program's usual one.
static DEFERRED: AtomicU32 = AtomicU32::new(0);
/// Set by a hook when there is work; the sidecar waits on it (futex).
static WAKE: AtomicU32 = AtomicU32::new(0);
/// What the sidecar is doing: [`RUNNING`], [`IDLE`] or [`TIMED`].
static SLEEPING: AtomicU32 = AtomicU32::new(RUNNING);
/// Looking, or napping between looks while connections wait (hooks never wake it then).
const RUNNING: u32 = 0;
/// Blocked with nothing to do: any news wakes it.
const IDLE: u32 = 1;
/// Waiting until the report may be rewritten: only a connection to classify wakes it early.
const TIMED: u32 = 2;
/// Set by the exit handler: the final report is written, the sidecar writes no more.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Set when the program's main thread left with pthread_exit while other threads go on
/// ([`main_thread_leaving`]): from then on the sidecar checks whether it is the last thread.
static MAIN_GONE: AtomicBool = AtomicBool::new(false);
/// How often a sidecar checks whether the program's threads are all gone, once the main thread
/// has left: the longest the process outlives its last thread.
const ALONE_CHECK: Duration = Duration::from_millis(100);

/// Starts the sidecar if it does not run yet and the calling context allows it.
#[inline]
pub fn maybe_start() {
    if STARTED.load(Ordering::Acquire) == 0 {
        try_start();
    }
}

#[inline(never)]
fn try_start() {
    // A thread that keeps signals blocked (a worker of a thread pool) may never pass the check:
    // after a few refusals, check only every 64th call.
    let d = DEFERRED.load(Ordering::Relaxed);
    if d > 8 && !d.is_multiple_of(64) {
        DEFERRED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if !smcrun_sys::errno::keep(|| crate::sigmask::normal() && crate::fdtable::owned()) {
        DEFERRED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if STARTED
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    smcrun_sys::errno::keep(start);
}

fn start() {
    // Started again after a stop (see `stop_for_call`): the same state.
    let p = SIDECAR.load(Ordering::Acquire);
    let sc: &'static Sidecar = if p.is_null() {
        let sc = Box::leak(Box::new(Sidecar {
            state: Mutex::new(State::default()),
        }));
        SIDECAR.store(sc as *const Sidecar as *mut Sidecar, Ordering::Release);
        sc
    } else {
        // SAFETY: a published sidecar is never freed.
        unsafe { &*p }
    };
    if !crate::sigmask::spawn_with_signals_blocked("smcrun-sidecar", 256 * 1024, move || run(sc)) {
        STARTED.store(2, Ordering::Release);
        if let Ok(mut st) = sc.state.lock() {
            st.note_error("cannot start the sidecar thread".into());
        }
    }
}

/// Tells the sidecar the report changed (a futex wake only when it is blocked idle: a timed wait
/// picks the change up anyway).
pub fn wake() {
    WAKE.store(1, Ordering::SeqCst);
    if SLEEPING.load(Ordering::SeqCst) == IDLE {
        futex_wake();
    }
}

/// Tells the sidecar a connection waits to be classified: it must look while the connection is
/// open, so a waiting sidecar is woken (at most once per look: after a look it naps, unwoken).
pub fn wake_now() {
    WAKE.store(1, Ordering::SeqCst);
    if SLEEPING.load(Ordering::SeqCst) != RUNNING {
        futex_wake();
    }
}

/// The program's main thread is leaving with pthread_exit (called by the shim's hook, from that
/// thread, before the real call). glibc ends a process when its last thread ends; the sidecar is
/// a thread too, so from now on it checks whether it is the last one and then ends itself, which
/// lets glibc end the process as the program's last thread would have (`exit(0)`: the exit
/// handlers run, stdio is flushed). A sidecar with a descriptor table of its own must not be that
/// last thread: the program's table goes with the program's last thread, its descriptors closed
/// before any exit handler could flush them. So one is replaced here, while this thread still
/// holds the table, by a sidecar started in the program's table (the same state), and ends.
pub fn main_thread_leaving() {
    MAIN_GONE.store(true, Ordering::SeqCst);
    own_table::forbid();
    if STARTED.load(Ordering::Acquire) != 1 {
        return;
    }
    // A sidecar just started may still be choosing its table: wait for its choice (it sees the
    // ban above, or has chosen already).
    let start = Instant::now();
    while own_table::undecided() && start.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let p = SIDECAR.load(Ordering::Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: a published sidecar is never freed.
    let sc: &'static Sidecar = unsafe { &*p };
    // Past this, no look runs from a table of its own: such a sidecar sees MAIN_GONE as soon as
    // it takes the state, and ends without looking (its pidfd reaches the main thread's table).
    drop(sc.state.lock());
    if own_table::chose_own()
        && !crate::sigmask::spawn_with_signals_blocked("smcrun-sidecar", 256 * 1024, move || {
            run(sc)
        })
    {
        STARTED.store(2, Ordering::Release);
        if let Ok(mut st) = sc.state.lock() {
            st.note_error("cannot start the sidecar again after the main thread left".into());
        }
    }
    wake_now();
}

/// Asks a running sidecar to end at its next turn and waits, until `until`, for its thread to have
/// left the process (for `crate::alone`). Its state stays for [`go_on`]. Not once the main thread
/// has left: that sidecar is the one that ends the process.
pub(crate) fn stop_for_call(until: Instant) {
    if MAIN_GONE.load(Ordering::Acquire)
        || STARTED
            .compare_exchange(1, PAUSED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    wake_now();
    // Done when its thread has exited, having ended when asked or for a reason of its own (2);
    // or when no thread was made (2, none recorded: the start failed).
    crate::alone::wait_until(until, || match STARTED.load(Ordering::Acquire) {
        STOPPED => TID.gone(),
        2 => !TID.recorded() || TID.gone(),
        _ => false,
    });
}

/// After the call: a sidecar that ended when asked starts again (the same state); one that did
/// not end in time goes on as it was.
pub(crate) fn go_on() {
    if STARTED
        .compare_exchange(PAUSED, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return;
    }
    if STARTED.load(Ordering::Acquire) == STOPPED {
        TID.clear();
        STARTED.store(0, Ordering::Release);
        maybe_start();
    }
}

/// The stack of the thread that ends a process whose main thread left: glibc's default for a
/// thread (RLIMIT_STACK's usual 8 MiB), since the program's exit handlers run on it.
const END_STACK: usize = 8 << 20;

/// Called by the sidecar when it is the process's last thread, the main thread having left:
/// glibc calls `exit(0)` in the thread that ends last, and the program's exit handlers (C++
/// destructors, atexit functions, stdio's flush) should not run on the sidecar's small stack with
/// every signal blocked. So a thread with a stack of glibc's default size and the program's signal
/// mask is started to end last: it waits until the sidecar's thread has gone. If it cannot start,
/// the sidecar ends last, as before.
fn hand_the_end_over() {
    let _ = crate::sigmask::spawn_with_signals_blocked("smcrun-end", END_STACK, || {
        crate::sigmask::take_programs_mask();
        let until = Instant::now() + Duration::from_secs(5);
        crate::alone::wait_until(until, || TID.gone());
    });
}

/// Whether the calling thread (the sidecar) is the last of the process but for the main thread,
/// which has left (a zombie that still counts in `Threads:` of /proc/self/status until the
/// process ends), and the drainer while it runs.
fn last_thread() -> bool {
    let ours = 2 + u32::from(crate::drain::runs());
    smcrun_sys::status::field("/proc/self/status", "Threads:", |v| {
        v.trim().parse::<u32>().ok()
    })
    .is_some_and(|n| n <= ours)
}

fn futex_wake() {
    let _ = rustix::thread::futex::wake(&WAKE, rustix::thread::futex::Flags::PRIVATE, 1);
}

/// Blocks until a hook wakes it (returns at once if one did since the last wait), for at most
/// `timeout` when given.
fn wait(timeout: Option<Duration>) {
    SLEEPING.store(
        if timeout.is_some() { TIMED } else { IDLE },
        Ordering::SeqCst,
    );
    if WAKE.swap(0, Ordering::SeqCst) == 0 {
        let ts = timeout.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let _ = rustix::thread::futex::wait(
            &WAKE,
            rustix::thread::futex::Flags::PRIVATE,
            0,
            ts.as_ref(),
        );
    }
    SLEEPING.store(RUNNING, Ordering::SeqCst);
}

/// In a forked child: no sidecar (its thread did not survive the fork); it starts again on demand.
/// The parent's state is forgotten, never used (another thread may have held its lock).
pub fn forget_in_child() {
    SIDECAR.store(std::ptr::null_mut(), Ordering::Release);
    STARTED.store(0, Ordering::Release);
    DEFERRED.store(0, Ordering::Relaxed);
    WAKE.store(0, Ordering::Relaxed);
    SLEEPING.store(RUNNING, Ordering::Relaxed);
    EXITING.store(false, Ordering::Relaxed);
    MAIN_GONE.store(false, Ordering::Relaxed);
    TID.clear();
    own_table::forget_in_child();
}

fn run(sc: &'static Sidecar) {
    TID.set_current();
    if let Entered::Blind(e) = own_table::enter() {
        // Its own table, but no way to the program's descriptors: no more looks from here (the
        // exit handler still classifies what waits, from the program's thread).
        if let Ok(mut st) = sc.state.lock() {
            st.note_error(format!(
                "the sidecar cannot reach the program's descriptors (no pidfd in its own table): {e}"
            ));
        }
        STARTED.store(2, Ordering::Release);
        return;
    }
    loop {
        let (look, due) = {
            let Ok(mut st) = sc.state.lock() else { return };
            if EXITING.load(Ordering::Acquire) {
                return;
            }
            if STARTED
                .compare_exchange(PAUSED, STOPPED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Asked to end for a call that needs the program alone (`stop_for_call`).
                return;
            }
            if MAIN_GONE.load(Ordering::Acquire) {
                if own_table::pidfd().is_some() {
                    // With a table of its own: replaced by a sidecar in the program's table (see
                    // `main_thread_leaving`).
                    return;
                }
                if last_thread() && !crate::drain::still_runs_at_end() {
                    // In the program's table and the last thread (the drainer, if it ran, has
                    // ended): ending lets glibc end the process, in the thread that ends last.
                    hand_the_end_over();
                    return;
                }
            }
            if !own_table::still_safe() {
                // A seccomp filter now covers this thread: no more calls from here (the exit
                // handler still classifies what waits and writes the report, from the program's
                // thread).
                st.note_error(
                    "the sidecar stopped: a seccomp filter was installed on it after it started"
                        .into(),
                );
                own_table::note_stopped();
                STARTED.store(2, Ordering::Release);
                return;
            }
            let look = st.look(&Live::default(), false);
            st.write_if_due(false);
            (look, st.unwritten().then(|| st.next_write()))
        };
        if look.waiting > 0 {
            // Connections are open and waiting: look again soon, but spend at most about a
            // twentieth of the time looking. A plain sleep: hooks do not wake it.
            std::thread::sleep(nap_after(look.cost));
        } else {
            let mut due = due;
            if look.cost > NAP_MIN / NAP_PER_COST {
                // The same wait when everything was decided: a burst of new connections (an
                // accept loop, a benchmark's clients) is then classified by one dump after it,
                // not by one dump per connection as each wakes the sidecar (seen in the VM: a
                // busy redis-server's sidecar took a fifth of the server's CPU that way).
                let nap = nap_after(look.cost);
                std::thread::sleep(nap);
                due = due.map(|d| d.saturating_sub(nap));
            }
            // Until the report may be rewritten (new connections to classify wake it early), or
            // with nothing to do until anything happens; once the main thread has left, no
            // longer than the next check of whether the program's threads are all gone.
            if MAIN_GONE.load(Ordering::Acquire) {
                due = Some(due.map_or(ALONE_CHECK, |d| d.min(ALONE_CHECK)));
            }
            wait(due);
        }
    }
}

/// Waits, for at most `limit`, until no connection of this process waits to be classified (nor
/// any connect is still running); returns how many still do. For a program that wants its own
/// connections in its report however short they are: `smcrun demo` calls it (through the shim's
/// `smcrun_settle`) before it closes them. The sidecar looks within one nap; with no sidecar
/// (never started, or not startable from here) it returns at once.
pub fn settle(limit: Duration) -> usize {
    let start = Instant::now();
    loop {
        let mut waiting = 0;
        crate::fdtable::scan(&[Phase::Connecting, Phase::Pending], |_, _| waiting += 1);
        if waiting == 0 || start.elapsed() >= limit {
            return waiting;
        }
        maybe_start();
        if STARTED.load(Ordering::Acquire) != 1 || EXITING.load(Ordering::Acquire) {
            return waiting;
        }
        wake_now();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The exit handler's part: classifies what is still waiting, writes the final report, and
/// returns it (for the summary line) when the program touched a TCP socket.
pub fn at_exit() -> Option<ProcessReport> {
    if !COUNTS.touched_tcp() {
        return None;
    }
    let p = SIDECAR.load(Ordering::Acquire);
    let mut local;
    let mut guard;
    let st: &mut State = if p.is_null() {
        local = State::default();
        &mut local
    } else {
        // SAFETY: a published sidecar is never freed.
        let sc = unsafe { &*p };
        guard = match sc.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        &mut guard
    };
    EXITING.store(true, Ordering::Release);
    st.look(&Live::default(), true);
    st.exited = true;
    st.dirty = true;
    st.write_if_due(true);
    let r = st.report();
    Some(r)
}
