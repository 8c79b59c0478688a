//! The sidecar: a thread inside the program that classifies the program's SMC connections while
//! they are open (one smc_diag dump answers every waiting connection), settles nonblocking
//! connects, keeps the recent connections and the totals per endpoint, and writes the report.
//!
//! It is started by the first hook that runs with the signal mask the program started with (so
//! never from inside a signal handler, where creating a thread could deadlock on the allocator),
//! with every signal blocked so the program's signals keep going to its own threads. It blocks
//! without waking when there is nothing to do; the first event after that wakes it (one futex
//! wake per idle period). While connections wait, it looks often (every 10 to 100 ms, twenty times
//! what the last look cost), because a connection can only be asked about while it is open; new
//! connections arriving one by one are looked at together after that wait, not one dump each.

use crate::classify::{self, Outcome, Verdict};
use crate::counters::{bump, load, COUNTS};
use crate::fdtable::{self, Entry, Phase};
use crate::record::{self, Record};
use crate::track;
use smcrun_report::{
    self as report, Connection, ConnectionCounts, Endpoint, ProcessReport, ReasonCount,
    SocketCounts,
};
use smcrun_rundir::process::start_ticks;
use smcrun_rundir::write as rundir;
use smcrun_sys::sock::{self, TcpState};
use smcrun_telemetry::sock_diag::{self, SmcSocket};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How often the report may be rewritten.
const WRITE_EVERY: Duration = Duration::from_secs(1);
/// The shortest and the longest wait between two looks.
const NAP_MIN: Duration = Duration::from_millis(10);
const NAP_MAX: Duration = Duration::from_millis(100);
/// Between those, the wait after a look is this many times what the look cost: while looks are
/// cheap (well under 5 ms: a few thousand SMC sockets on hardware) the sidecar takes at most a
/// twentieth of the time. A costlier look (tens of thousands of sockets, or the VM test bed's
/// emulation) is still repeated within 100 ms, so that a connection open for a fraction of a
/// second is classified; the share is then at most cost / (cost + 100 ms).
const NAP_PER_COST: u32 = 20;

/// How long to wait before the next look, after one that took `cost`.
fn nap_after(cost: Duration) -> Duration {
    cost.saturating_mul(NAP_PER_COST).clamp(NAP_MIN, NAP_MAX)
}
/// How long an SMC handshake may stay undecided before the connection is called unclassified.
const PENDING_LIMIT: Duration = Duration::from_secs(30);

/// What the sidecar asks the kernel, behind a trait so that the state machine can be tested with
/// made-up answers.
pub trait Kernel {
    /// Every SMC socket of the network namespace.
    fn smc_diag(&self) -> Result<Vec<SmcSocket>, String>;
    /// The inode of the socket behind `fd` (None: `fd` is not a socket now).
    fn inode(&self, fd: i32) -> Option<u64>;
    /// The socket's local address.
    fn local(&self, fd: i32) -> Option<SocketAddr>;
    /// The socket's peer.
    fn peer(&self, fd: i32) -> Option<SocketAddr>;
    /// The TCP state of the socket's (internal) TCP socket.
    fn tcp_state(&self, fd: i32) -> Option<TcpState>;
}

/// The real kernel.
pub struct Live;

impl Kernel for Live {
    fn smc_diag(&self) -> Result<Vec<SmcSocket>, String> {
        sock_diag::dump(0).map_err(|e| format!("cannot read smc_diag: {e}"))
    }
    fn inode(&self, fd: i32) -> Option<u64> {
        crate::classify::socket_inode(fd)
    }
    fn local(&self, fd: i32) -> Option<SocketAddr> {
        sock::local_addr(fd).ok().flatten()
    }
    fn peer(&self, fd: i32) -> Option<SocketAddr> {
        sock::peer_addr(fd).ok().flatten()
    }
    fn tcp_state(&self, fd: i32) -> Option<TcpState> {
        sock::tcp_state(fd).ok()
    }
}

/// Connections to or from one endpoint.
#[derive(Debug, Default, Clone)]
struct EndpointCounts {
    smc_r: u64,
    smc_d: u64,
    smc_unknown: u64,
    tcp: u64,
    reasons: HashMap<String, (ReasonCount, u64)>,
}

/// What the sidecar keeps between looks.
#[derive(Default)]
pub struct State {
    /// Fallbacks the sidecar classified, by reason code.
    fallbacks: HashMap<u32, u64>,
    endpoints: HashMap<(String, bool), EndpointCounts>,
    recent: VecDeque<Connection>,
    recent_dropped: u64,
    /// When each waiting connection was first seen.
    waiting: HashMap<i32, (Entry, Instant)>,
    errors: u64,
    last_error: Option<String>,
    /// Something the report shows changed since it was written.
    dirty: bool,
    fingerprint: u64,
    last_write: Option<Instant>,
    seq: u64,
    exited: bool,
    report_failed: bool,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What one look found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// Connections still waiting to be classified, or connects still running.
    pub waiting: usize,
    /// How long the kernel queries took.
    pub cost: Duration,
}

impl State {
    fn note_error(&mut self, e: String) {
        self.errors += 1;
        self.last_error = Some(e);
        self.dirty = true;
    }

    /// Takes one classified connection into the recent list and the endpoint totals.
    fn note(&mut self, r: Record) {
        let reason = classify::reason(r.outcome);
        let remote = match (r.server, r.remote) {
            (false, Some(a)) => a.to_string(),
            (true, Some(a)) => a.ip().to_string(),
            (_, None) => "unknown".to_string(),
        };
        let e = self.endpoints.entry((remote, r.server)).or_default();
        match r.outcome {
            Outcome::SmcR => e.smc_r += 1,
            Outcome::SmcD => e.smc_d += 1,
            Outcome::SmcUnknown => e.smc_unknown += 1,
            _ => e.tcp += 1,
        }
        if let (Some(rc), false) = (&reason, matches!(r.outcome, Outcome::SmcUnknown)) {
            e.reasons
                .entry(rc.label())
                .or_insert_with(|| (rc.clone(), 0))
                .1 += 1;
        }
        if self.recent.len() == report::RECENT_CONNECTIONS {
            self.recent.pop_front();
            self.recent_dropped += 1;
        }
        self.recent.push_back(Connection {
            fd: r.fd,
            role: role(r.server).into(),
            local: r.local.map(|a| a.to_string()),
            remote: r.remote.map(|a| a.to_string()),
            mode: classify::mode_name(r.outcome).into(),
            reason,
            peer_diagnosis: classify::peer_diagnosis(r.outcome),
            at_unix: now_unix(),
        });
        self.dirty = true;
    }

    /// A connection the sidecar itself classified.
    fn decided(&mut self, r: Record) {
        track::count(r.outcome);
        if let Outcome::Fallback { reason, .. } = r.outcome {
            *self.fallbacks.entry(reason).or_default() += 1;
        }
        self.note(r);
    }

    /// One look: takes the queued details, settles nonblocking connects, and classifies the
    /// waiting SMC connections. With `last` (the program exits) nothing is left waiting.
    pub fn look(&mut self, k: &dyn Kernel, last: bool) -> Look {
        let start = Instant::now();
        let mut look = Look::default();
        let mut connecting = Vec::new();
        let mut pending = Vec::new();
        fdtable::scan(&[Phase::Connecting, Phase::Pending], |fd, e| {
            match e.phase {
                Phase::Connecting => connecting.push((fd, e)),
                _ => pending.push((fd, e)),
            }
        });
        for (fd, e) in connecting {
            match k.tcp_state(fd) {
                Some(TcpState::Connected) => {
                    if track::established(fd, e, k.peer(fd), None) {
                        self.dirty = true;
                        if e.kind == fdtable::Kind::Smc {
                            pending.push((fd, e.with(Phase::Pending)));
                        }
                    }
                }
                Some(TcpState::Connecting) if !last => look.waiting += 1,
                Some(TcpState::Connecting) => {}
                // Failed (or the fd is no socket any more): not a connection.
                _ => {
                    if fdtable::transition(fd, e, Some(e.with(Phase::Open))) {
                        bump(&COUNTS.failed_connects);
                        self.dirty = true;
                    }
                }
            }
        }
        if !pending.is_empty() {
            let dump = k.smc_diag();
            if let Err(e) = &dump {
                self.note_error(e.clone());
            }
            for (fd, e) in pending {
                let since = self.waiting.entry(fd).or_insert((e, Instant::now()));
                if since.0 != e {
                    *since = (e, Instant::now());
                }
                let age = since.1.elapsed();
                let inode = k.inode(fd);
                let (local, peer) = (k.local(fd), k.peer(fd));
                let found = dump
                    .as_ref()
                    .ok()
                    .and_then(|d| classify::find(d, inode, local, peer));
                let verdict = found.map(classify::from_diag);
                match verdict {
                    Some(Verdict::Decided(o)) => {
                        if fdtable::transition(fd, e, Some(e.with(Phase::Done))) {
                            let local = found.map(|f| f.local).filter(|a| a.port() != 0).or(local);
                            self.decided(Record {
                                fd,
                                server: e.server,
                                outcome: o,
                                remote: peer,
                                local,
                            });
                        }
                        self.waiting.remove(&fd);
                    }
                    _ if last || inode.is_none() || dump.is_err() || age > PENDING_LIMIT => {
                        if fdtable::transition(fd, e, Some(e.with(Phase::Done))) {
                            bump(&COUNTS.unclassified);
                            self.dirty = true;
                        }
                        self.waiting.remove(&fd);
                    }
                    _ => look.waiting += 1,
                }
            }
            self.waiting
                .retain(|fd, (e, _)| fdtable::get(*fd) == Some(*e));
        }
        look.cost = start.elapsed();
        // The details queued by hooks, and by the connections settled just now.
        self.take_queued();
        look
    }

    /// Takes the details the hooks queued into the recent list and the endpoint totals.
    fn take_queued(&mut self) {
        while let Some(r) = record::pop() {
            self.note(r);
        }
    }

    /// The report, from the exact counts and what the sidecar kept.
    pub fn report(&mut self) -> ProcessReport {
        // The details queued since the last look first, then the counts: a hook counts a
        // connection before it queues its details, so the report's list then lacks at most the
        // connections a hook is counting at this very moment (they are in the next write), not
        // every connection made since the last look (seen: `why` listing 2 of 4 connections).
        self.take_queued();
        let c = &COUNTS;
        let tcp = load(&c.fallback) + load(&c.fallback_unseen) + c.tcp_from_start_total();
        let (smc_r, smc_d, smc_unknown) = (load(&c.smc_r), load(&c.smc_d), load(&c.smc_unknown));
        let total = load(&c.connections);
        let unclassified = load(&c.unclassified);
        let counts = ConnectionCounts {
            total,
            smc_r,
            smc_d,
            smc_unknown,
            tcp,
            pending: total.saturating_sub(smc_r + smc_d + smc_unknown + tcp + unclassified),
            unclassified,
            failed_connects: load(&c.failed_connects),
        };
        let mut reasons: Vec<ReasonCount> = Vec::new();
        for (&code, &n) in &self.fallbacks {
            if let Some(r) = classify::reason(Outcome::Fallback {
                reason: code,
                peer: 0,
            }) {
                reasons.push(ReasonCount { count: n, ..r });
            }
        }
        for (w, n) in c.tcp_from_start.iter().enumerate() {
            let n = load(n);
            if let (true, Some(r)) = (n > 0, classify::reason(Outcome::Tcp(w as u8))) {
                reasons.push(ReasonCount { count: n, ..r });
            }
        }
        let unseen = load(&c.fallback_unseen);
        if let (true, Some(r)) = (unseen > 0, classify::reason(Outcome::FallbackUnseen)) {
            reasons.push(ReasonCount { count: unseen, ..r });
        }
        reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(&b.text)));
        let mut endpoints: Vec<Endpoint> = self
            .endpoints
            .iter()
            .map(|((remote, server), e)| {
                let mut rs: Vec<ReasonCount> = e
                    .reasons
                    .values()
                    .map(|(r, n)| ReasonCount {
                        count: *n,
                        ..r.clone()
                    })
                    .collect();
                rs.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(&b.text)));
                Endpoint {
                    remote: remote.clone(),
                    role: role(*server).into(),
                    smc_r: e.smc_r,
                    smc_d: e.smc_d,
                    smc_unknown: e.smc_unknown,
                    tcp: e.tcp,
                    reasons: rs,
                }
            })
            .collect();
        let size = |e: &Endpoint| e.smc_r + e.smc_d + e.smc_unknown + e.tcp;
        endpoints.sort_by(|a, b| size(b).cmp(&size(a)).then(a.remote.cmp(&b.remote)));
        endpoints.truncate(report::TOP_ENDPOINTS);
        self.seq += 1;
        let (program, exe) = names();
        ProcessReport {
            version: report::REPORT_VERSION,
            seq: self.seq,
            pid: rustix::process::getpid().as_raw_nonzero().get() as u32,
            ppid: rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32),
            program,
            exe,
            uid: rustix::process::geteuid().as_raw(),
            start_ticks: start_ticks("/proc/self/stat").unwrap_or(0),
            pid_ns: smcrun_rundir::pidns::own().unwrap_or(0),
            updated_unix: now_unix(),
            exited: self.exited,
            mode: mode_name().to_string(),
            fallback: fallback_name().to_string(),
            policy: POLICY.get().copied().unwrap_or_default().to_string(),
            sockets: SocketCounts {
                converted: load(&c.converted),
                tcp_at_creation: load(&c.tcp_at_creation),
                untouched: load(&c.untouched),
            },
            connections: counts,
            reasons,
            endpoints,
            recent: self.recent.iter().cloned().collect(),
            recent_dropped: self.recent_dropped,
            detail_dropped: load(&c.detail_dropped),
            errors: self.errors,
            last_error: self.last_error.clone(),
            seq_end: 0,
        }
    }

    /// Writes the report if something changed (at most once a second unless `now`).
    fn write_if_due(&mut self, now: bool) {
        let fp = COUNTS.fingerprint();
        let changed = self.dirty || fp != self.fingerprint || self.last_write.is_none();
        let due = now || self.last_write.is_none_or(|t| t.elapsed() >= WRITE_EVERY);
        if !changed || !due || self.report_failed || !COUNTS.touched_tcp() && !now {
            return;
        }
        if let Some(r) = rundir::take_refusal() {
            self.report_failed = true;
            crate::line!(
                "warning: no per-process report: {}: {r}",
                rundir::describe_dir()
            );
            return;
        }
        if !rundir::registered() {
            return;
        }
        self.dirty = false;
        self.fingerprint = fp;
        self.last_write = Some(Instant::now());
        let bytes = self.report().to_bytes();
        let written = rundir::write_report(&bytes);
        if written == Ok(false) {
            self.dirty = true; // the program holds every number for now: again at the next write
            return;
        }
        if let Err(e) = written {
            // One warning, then no more attempts: the program is not to be bothered again.
            self.report_failed = true;
            self.note_error(e.clone());
            crate::line!("warning: per-process report stopped: {e}");
        }
    }

    /// Whether the report shows something it does not show yet.
    fn unwritten(&self) -> bool {
        self.dirty || COUNTS.fingerprint() != self.fingerprint
    }

    /// How long until the report may be rewritten.
    fn next_write(&self) -> Duration {
        self.last_write
            .map_or(Duration::ZERO, |t| WRITE_EVERY.saturating_sub(t.elapsed()))
            .max(NAP_MIN)
    }
}

fn role(server: bool) -> &'static str {
    if server {
        "server"
    } else {
        "client"
    }
}

/// The name the program was started as, taken when the library is loaded: argv\[0\]'s base name
/// (Debian's redis-server is a symlink to redis-check-rdb, and the operator started
/// redis-server), before the program can rewrite its argv (nginx's workers call themselves
/// "nginx: worker process"). Copied into a fixed buffer by [`init`] from the argv the C library
/// hands the constructor: no allocation and no system call while every exec'd program starts. A
/// forked child inherits it; an exec'd program takes its own.
struct StartedAs {
    name: std::cell::UnsafeCell<[u8; 256]>,
    len: std::sync::atomic::AtomicUsize,
}
// SAFETY: `name` is written once by `init`, before `len` is published (Release) and before any
// reader (which loads `len` with Acquire first); read-only after.
unsafe impl Sync for StartedAs {}
static PROGRAM: StartedAs = StartedAs {
    name: std::cell::UnsafeCell::new([0; 256]),
    len: std::sync::atomic::AtomicUsize::new(0),
};

/// The base name of `argv0`, cut to the buffer.
fn base_name(argv0: &[u8]) -> &[u8] {
    let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or_default();
    &base[..base.len().min(256)]
}

/// The program's name (see [`PROGRAM`]; without an argv\[0\], `/proc/self/comm`) and the
/// executable's path.
fn names() -> (String, String) {
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let len = PROGRAM.len.load(Ordering::Acquire);
    let program = if len > 0 {
        // SAFETY: published by `init` before `len` (see StartedAs).
        let name = unsafe { &(&*PROGRAM.name.get())[..len] };
        String::from_utf8_lossy(name).into_owned()
    } else {
        std::fs::read_to_string("/proc/self/comm")
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default()
    };
    (program, exe)
}

static MODE: AtomicU8 = AtomicU8::new(2);

/// Records the shim's mode setting for the report.
pub fn set_mode(m: smcrun_settings::Mode) {
    MODE.store(
        match m {
            smcrun_settings::Mode::Smc => 0,
            smcrun_settings::Mode::Inet => 1,
            smcrun_settings::Mode::Auto => 2,
        },
        Ordering::Relaxed,
    );
}

static FALLBACK: AtomicU8 = AtomicU8::new(0);
/// The policy's canonical text, set once at start-up (it lives as long as the shim's config).
static POLICY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Records the shim's fallback setting and policy for the report (at start-up: the report shows
/// what the program runs with, `ps` and `why` and the exporter show it from there).
pub fn set_settings(fallback: smcrun_settings::Fallback, policy: &'static str) {
    FALLBACK.store(
        match fallback {
            smcrun_settings::Fallback::Tcp => 0,
            smcrun_settings::Fallback::Strict => 1,
        },
        Ordering::Relaxed,
    );
    let _ = POLICY.set(policy);
}

fn fallback_name() -> &'static str {
    match FALLBACK.load(Ordering::Relaxed) {
        1 => smcrun_settings::Fallback::Strict.name(),
        _ => smcrun_settings::Fallback::Tcp.name(),
    }
}

fn mode_name() -> &'static str {
    match MODE.load(Ordering::Relaxed) {
        0 => smcrun_settings::Mode::Smc.name(),
        1 => smcrun_settings::Mode::Inet.name(),
        _ => smcrun_settings::Mode::Auto.name(),
    }
}

/// The running sidecar of this process.
struct Sidecar {
    state: Mutex<State>,
}

/// Null until the sidecar runs in this process (and again in a fresh fork child).
static SIDECAR: AtomicPtr<Sidecar> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not started; 1: starting or running; 2: could not start.
static STARTED: AtomicU8 = AtomicU8::new(0);
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

/// Called once by the library constructor, before the program runs, with the program's
/// argv\[0\] (None when the C library passed no argv). No allocation, two system calls (the
/// process id, the signal mask): every program started under the shim pays for this, sockets or not.
pub fn init(argv0: Option<&[u8]>) {
    crate::fdtable::own();
    rundir::snapshot_env();
    if let Some(a) = argv0.map(base_name).filter(|b| !b.is_empty()) {
        // SAFETY: the constructor is the only writer, before `len` is published and before any
        // reader.
        unsafe { (&mut *PROGRAM.name.get())[..a.len()].copy_from_slice(a) };
        PROGRAM.len.store(a.len(), Ordering::Release);
    }
    crate::sigmask::take_startup();
}

/// Starts the sidecar if it does not run yet and the calling context allows it.
pub fn maybe_start() {
    if STARTED.load(Ordering::Acquire) != 0 {
        return;
    }
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
    let sc: &'static Sidecar = Box::leak(Box::new(Sidecar {
        state: Mutex::new(State::default()),
    }));
    SIDECAR.store(sc as *const Sidecar as *mut Sidecar, Ordering::Release);
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
}

fn run(sc: &'static Sidecar) {
    loop {
        let (look, due) = {
            let Ok(mut st) = sc.state.lock() else { return };
            if EXITING.load(Ordering::Acquire) {
                return;
            }
            let look = st.look(&Live, false);
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
            // with nothing to do until anything happens.
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
    st.look(&Live, true);
    st.exited = true;
    st.dirty = true;
    st.write_if_due(true);
    let r = st.report();
    Some(r)
}

#[cfg(test)]
mod tests;
