//! The sidecar: a thread inside the shimmed program that knows which of the program's connections
//! run over SMC, and why the others fell back.
//!
//! The shim's hooks call [`send`] with a small `Copy` [`Event`]: a non-blocking `try_send` on a
//! bounded crossbeam channel, which neither allocates nor locks, and a full channel counts a drop
//! instead of waiting. The one exception is the first event after the sidecar went idle: the
//! channel then wakes the sleeping thread (a futex wake under crossbeam's waker lock). While events
//! keep coming the sidecar polls (every 100 ms while events arrive or a connection waits to be
//! classified, then once more to bring the report up to date) and is never asleep in the channel,
//! so the hooks pay that wake-up at most once per idle period; when nothing happens it sleeps
//! without waking at all.
//!
//! The thread starts with the program's first TCP socket (never in a library constructor), is
//! started again in a forked child (whose numbers start from zero: [`after_fork_in_child`]), and
//! classifies each connection once established: sockets that stayed TCP at socket() time at once
//! (the errno says why), SMC sockets by looking their inode up in the kernel's smc_diag dump (one
//! dump answers every pending socket; a nonblocking connect is classified when its handshake is
//! over). It writes a report under the run directory at most once a second and only when something
//! changed, and can print a one-line summary when the program exits.

use crate::fdinfo::{address, raw_identity, smc_entry, socket_inode};
use crate::report::{
    self, Connection, ConnectionCounts, Endpoint, ProcessReport, ReasonCount, SocketCounts,
};
use crate::{reasons, rundir, sock_diag};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;
use smcrun_settings::{errno as errnos, Why};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// What a hook saw. Small and `Copy`: sending one never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A TCP socket request: made as an SMC socket, or left TCP because SMC `socket()` failed
    /// with `errno`.
    Created {
        /// The program's fd.
        fd: i32,
        /// Made as an SMC socket.
        smc: bool,
        /// The errno of the refused SMC socket (0 when `smc`).
        errno: i32,
    },
    /// `connect()` returned 0, or EINPROGRESS on a nonblocking socket.
    Connected {
        /// The program's fd.
        fd: i32,
        /// Where to.
        remote: Option<SocketAddr>,
    },
    /// The policy turned SMC socket `fd` to TCP before it connected or listened.
    PolicyTcp {
        /// The program's fd.
        fd: i32,
    },
    /// `accept()`/`accept4()` returned `fd` from `listener`.
    Accepted {
        /// The listening socket.
        listener: i32,
        /// The new connection.
        fd: i32,
        /// The peer, when the program asked accept() for it.
        remote: Option<SocketAddr>,
    },
}

/// Capacity of the event channel: a burst of this many connections within one second is counted
/// exactly; beyond it, drops are counted.
const CHANNEL_CAPACITY: usize = 4096;
/// How often the report may be rewritten, and the last look before the sidecar blocks again.
const TICK: Duration = Duration::from_secs(1);
/// How often it looks while events arrive or a connection waits to be classified: the kernel can
/// only be asked while the connection is open, and short ones close fast. Idle, the sidecar does
/// not wake at all.
const BUSY_TICK: Duration = Duration::from_millis(100);
/// How long a handshake may stay pending before the connection is called unclassified.
const PENDING_LIMIT: Duration = Duration::from_secs(30);

/// TCP sockets made as SMC sockets.
pub static CONVERTED: AtomicU64 = AtomicU64::new(0);
/// TCP sockets left TCP at socket() time.
pub static TCP_AT_CREATION: AtomicU64 = AtomicU64::new(0);
/// Sockets the shim never touches.
pub static UNTOUCHED: AtomicU64 = AtomicU64::new(0);
/// Events that found the channel full.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

struct Shared {
    tx: Sender<Event>,
    rx: Receiver<Event>,
    state: Mutex<State>,
}

/// The current process's sidecar, or null before the first TCP socket (and in a fresh fork child).
static SHARED: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());
static EXIT_SUMMARY: AtomicBool = AtomicBool::new(false);
static MODE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

/// Records the shim's mode name for the report ("smc", "inet" or "auto").
pub fn set_mode(mode: &'static str) {
    MODE.store(mode.as_ptr() as *mut u8, Ordering::Relaxed);
    MODE_LEN.store(mode.len() as u64, Ordering::Relaxed);
}
static MODE_LEN: AtomicU64 = AtomicU64::new(0);

fn mode_name() -> String {
    let p = MODE.load(Ordering::Relaxed);
    if p.is_null() {
        return "auto".into();
    }
    // SAFETY: set_mode stored a &'static str's pointer and length.
    let s = unsafe { std::slice::from_raw_parts(p, MODE_LEN.load(Ordering::Relaxed) as usize) };
    String::from_utf8_lossy(s).into_owned()
}

/// Asks for a one-line summary on stderr when the program exits (SMCRUN_REPORT=1); the shim
/// registers [`exit_summary`] with atexit.
pub fn enable_exit_summary() {
    EXIT_SUMMARY.store(true, Ordering::Relaxed);
}

/// The sidecar, started on first use: the thread that wins the race to install it spawns it.
fn shared() -> &'static Shared {
    let p = SHARED.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a published Shared is never freed (a fork child forgets it, it is not dropped).
        return unsafe { &*p };
    }
    let (tx, rx) = crossbeam_channel::bounded(CHANNEL_CAPACITY);
    let fresh = Box::into_raw(Box::new(Shared {
        tx,
        rx,
        state: Mutex::new(State::new()),
    }));
    match SHARED.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            // SAFETY: just published, never freed.
            let s: &'static Shared = unsafe { &*fresh };
            spawn(s);
            s
        }
        Err(existing) => {
            // SAFETY: `fresh` was never published; we own it.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as above.
            unsafe { &*existing }
        }
    }
}

/// Starts the thread with every signal blocked, so the program's signals keep going to the
/// program's own threads.
fn spawn(s: &'static Shared) {
    // SAFETY: sigfillset/pthread_sigmask on local, initialised sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let spawned = std::thread::Builder::new()
            .name("smcrun-sidecar".into())
            .stack_size(256 * 1024)
            .spawn(move || run(s));
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if spawned.is_err() {
            s.state
                .lock()
                .note_error("cannot start the sidecar thread".into());
        }
    }
}

/// Queues an event from a hook. Never blocks; a full channel counts a drop.
pub fn send(ev: Event) {
    match shared().tx.try_send(ev) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Whether the sidecar runs in this process (so that hooks need not send events about sockets
/// of a program that never made a TCP socket).
pub fn active() -> bool {
    !SHARED.load(Ordering::Acquire).is_null()
}

/// For pthread_atfork's child handler: the child starts with no sidecar and zero counts; the
/// parent's state (whose lock another thread may have held at fork time) is forgotten, not used.
pub fn after_fork_in_child() {
    SHARED.store(std::ptr::null_mut(), Ordering::Release);
    for c in [&CONVERTED, &TCP_AT_CREATION, &UNTOUCHED, &DROPPED] {
        c.store(0, Ordering::Relaxed);
    }
}

/// The atexit handler: classifies what is still pending, writes the final report, and with
/// SMCRUN_REPORT=1 prints the summary line (only if the program made a TCP socket at all).
pub extern "C" fn exit_summary() {
    let _ = std::panic::catch_unwind(|| {
        let p = SHARED.load(Ordering::Acquire);
        if p.is_null() {
            return;
        }
        // SAFETY: published and never freed.
        let s = unsafe { &*p };
        let mut st = s.state.lock();
        st.drain(&s.rx);
        st.classify_pending(true);
        st.exited = true;
        st.write_report();
        if EXIT_SUMMARY.load(Ordering::Relaxed) {
            let line = st.report().summary_line() + "\n";
            // SAFETY: writing a live buffer to stderr.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
    });
}

fn run(s: &'static Shared) {
    // Busy: the last look found events or connections waiting to be classified. Then the next look
    // comes soon (connections must be looked up while they are open); once a look finds nothing new
    // the report is brought up to date and the thread blocks until the next event.
    // The thread starts because of an event: busy from the start.
    let mut busy = true;
    loop {
        let idle = !busy && !s.state.lock().dirty;
        if idle {
            match s.rx.recv() {
                Ok(ev) => s.state.lock().handle(ev),
                Err(_) => return,
            }
        } else {
            std::thread::sleep(if busy { BUSY_TICK } else { TICK });
        }
        let mut st = s.state.lock();
        let n = st.drain(&s.rx);
        st.classify_pending(false);
        busy = idle || n > 0 || !st.pending.is_empty();
        if st.dirty && st.last_write.is_none_or(|t| t.elapsed() >= TICK) {
            st.write_report();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Client,
    Server,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// What the sidecar knows of one fd.
#[derive(Debug, Clone)]
struct Sock {
    /// Made as SMC (`None`), or TCP with this errno.
    tcp_errno: Option<i32>,
    role: Option<Role>,
    remote: Option<SocketAddr>,
    since: Instant,
}

/// The "errno" of a socket that is TCP because the policy says so (in [`Event::Created`] when
/// the policy can never want SMC for it).
pub const BY_POLICY: i32 = -1;

/// The "errno" of a TCP connection accepted from a listener the shim never saw created (inherited,
/// or made before the shim was loaded).
const NOT_OURS: i32 = 0;

/// How a connection ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    SmcR,
    SmcD,
    /// An SMC socket that fell back: (reason, peer diagnosis).
    Fallback(u32, u32),
    /// A socket that was TCP from socket() on.
    TcpFromStart(i32),
}

#[derive(Debug, Default, Clone)]
struct EndpointCounts {
    smc_r: u64,
    smc_d: u64,
    tcp: u64,
    reasons: HashMap<ReasonKey, u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ReasonKey {
    Code(u32),
    Errno(i32),
}

impl ReasonKey {
    fn to_count(self, count: u64) -> ReasonCount {
        match self {
            ReasonKey::Code(c) => {
                let r = reasons::describe(c);
                ReasonCount {
                    code: Some(format!("0x{c:08x}")),
                    errno: None,
                    text: r.description.into_owned(),
                    count,
                }
            }
            ReasonKey::Errno(BY_POLICY) => ReasonCount {
                code: None,
                errno: None,
                text: "TCP by policy".into(),
                count,
            },
            ReasonKey::Errno(NOT_OURS) => ReasonCount {
                code: None,
                errno: None,
                text: "accepted from a listening socket not created under smcrun".into(),
                count,
            },
            ReasonKey::Errno(e) => ReasonCount {
                code: None,
                errno: Some(errnos::name(e).to_string()),
                text: Why::of(e).describe().to_string(),
                count,
            },
        }
    }
}

struct State {
    socks: HashMap<i32, Sock>,
    pending: Vec<i32>,
    counts: ConnectionCounts,
    reasons: HashMap<ReasonKey, u64>,
    endpoints: HashMap<(String, Role), EndpointCounts>,
    recent: VecDeque<Connection>,
    recent_dropped: u64,
    errors: u64,
    last_error: Option<String>,
    dirty: bool,
    exited: bool,
    last_write: Option<Instant>,
    report_refused: bool,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Reads an AF_INET/AF_INET6 sockaddr into a `SocketAddr` (no allocation; usable in hooks).
///
/// # Safety
/// `addr` must be null or point to `len` readable bytes.
pub unsafe fn sockaddr_to_std(
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    if addr.is_null() {
        return None;
    }
    let family = (*addr).sa_family as i32;
    if family == libc::AF_INET && len as usize >= std::mem::size_of::<libc::sockaddr_in>() {
        let a = addr.cast::<libc::sockaddr_in>().read_unaligned();
        let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
        Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
    } else if family == libc::AF_INET6 && len as usize >= std::mem::size_of::<libc::sockaddr_in6>()
    {
        let a = addr.cast::<libc::sockaddr_in6>().read_unaligned();
        let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
        Some(SocketAddr::from((ip, u16::from_be(a.sin6_port))))
    } else {
        None
    }
}

impl State {
    fn new() -> State {
        State {
            socks: HashMap::new(),
            pending: Vec::new(),
            counts: ConnectionCounts::default(),
            reasons: HashMap::new(),
            endpoints: HashMap::new(),
            recent: VecDeque::new(),
            recent_dropped: 0,
            errors: 0,
            last_error: None,
            dirty: true,
            exited: false,
            last_write: None,
            report_refused: false,
        }
    }

    fn note_error(&mut self, e: String) {
        self.errors += 1;
        self.last_error = Some(e);
        self.dirty = true;
    }

    fn drain(&mut self, rx: &Receiver<Event>) -> usize {
        let mut n = 0;
        while let Ok(ev) = rx.try_recv() {
            self.handle(ev);
            n += 1;
        }
        n
    }

    /// A new socket on `fd` replaces what the fd was before; an old connection still waiting
    /// for classification there was closed first.
    fn forget_fd(&mut self, fd: i32) {
        if self.socks.remove(&fd).is_some() {
            if let Some(i) = self.pending.iter().position(|p| *p == fd) {
                self.pending.swap_remove(i);
                self.counts.pending = self.counts.pending.saturating_sub(1);
                self.counts.unclassified += 1;
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        self.dirty = true;
        match ev {
            Event::Created { fd, smc, errno } => {
                self.forget_fd(fd);
                self.socks.insert(
                    fd,
                    Sock {
                        tcp_errno: (!smc).then_some(errno),
                        role: None,
                        remote: None,
                        since: Instant::now(),
                    },
                );
            }
            Event::PolicyTcp { fd } => {
                if let Some(s) = self.socks.get_mut(&fd) {
                    s.tcp_errno = Some(BY_POLICY);
                }
            }
            Event::Connected { fd, remote } => {
                if let Some(s) = self.socks.get_mut(&fd) {
                    if s.role.is_some() {
                        return; // a second connect() on the same socket: one connection
                    }
                    s.role = Some(Role::Client);
                    s.remote = remote;
                    s.since = Instant::now();
                    self.connection(fd);
                }
            }
            Event::Accepted {
                listener,
                fd,
                remote,
            } => {
                self.forget_fd(fd);
                let listener_errno = self.socks.get(&listener).map(|l| l.tcp_errno);
                let tcp_errno = match raw_identity(fd) {
                    Some((43, _)) | Some((_, 256)) => None,
                    // A connection that already fell back reads as TCP (the kernel moved the file
                    // to the internal TCP socket): its listener says whether it began as SMC.
                    Some((d, _)) if d == libc::AF_INET || d == libc::AF_INET6 => {
                        match listener_errno {
                            Some(e) => e,
                            None => Some(NOT_OURS),
                        }
                    }
                    Some(_) => return, // not a TCP connection (a UNIX listener)
                    // Closed already: the listener tells what it was.
                    None => match listener_errno {
                        Some(e) => e,
                        None => return,
                    },
                };
                self.socks.insert(
                    fd,
                    Sock {
                        tcp_errno,
                        role: Some(Role::Server),
                        remote,
                        since: Instant::now(),
                    },
                );
                self.connection(fd);
            }
        }
    }

    /// A connection began on `fd`: classify it now if it was TCP from the start, else queue it.
    fn connection(&mut self, fd: i32) {
        self.counts.total += 1;
        let Some(s) = self.socks.get(&fd).cloned() else {
            return;
        };
        match s.tcp_errno {
            Some(errno) => self.classified(fd, &s, Outcome::TcpFromStart(errno), None),
            None => {
                self.pending.push(fd);
                self.counts.pending += 1;
            }
        }
    }

    fn classified(&mut self, fd: i32, s: &Sock, outcome: Outcome, local: Option<SocketAddr>) {
        let role = s.role.unwrap_or(Role::Client);
        // Addresses read from the fd now are only trusted for connections the kernel just matched
        // (`local` given); by now the fd of an older connection may hold a newer one.
        let remote = s
            .remote
            .or_else(|| local.and(address(fd, libc::SYS_getpeername)));
        let (mode, key, peer) = match outcome {
            Outcome::SmcR => ("SMC-R", None, 0),
            Outcome::SmcD => ("SMC-D", None, 0),
            Outcome::Fallback(r, p) => ("TCP", Some(ReasonKey::Code(r)), p),
            Outcome::TcpFromStart(e) => ("TCP", Some(ReasonKey::Errno(e)), 0),
        };
        match mode {
            "SMC-R" => self.counts.smc_r += 1,
            "SMC-D" => self.counts.smc_d += 1,
            _ => self.counts.tcp += 1,
        }
        if let Some(k) = key {
            *self.reasons.entry(k).or_default() += 1;
        }
        let endpoint = match (role, remote) {
            (Role::Client, Some(a)) => a.to_string(),
            (Role::Server, Some(a)) => a.ip().to_string(),
            (_, None) => "unknown".to_string(),
        };
        let e = self.endpoints.entry((endpoint, role)).or_default();
        match mode {
            "SMC-R" => e.smc_r += 1,
            "SMC-D" => e.smc_d += 1,
            _ => e.tcp += 1,
        }
        if let Some(k) = key {
            *e.reasons.entry(k).or_default() += 1;
        }
        if self.recent.len() == report::RECENT_CONNECTIONS {
            self.recent.pop_front();
            self.recent_dropped += 1;
        }
        self.recent.push_back(Connection {
            fd,
            role: role.name().into(),
            local: local.map(|a| a.to_string()),
            remote: remote.map(|a| a.to_string()),
            mode: mode.into(),
            reason: key.map(|k| k.to_count(1)),
            peer_diagnosis: (peer != 0).then(|| format!("0x{peer:08x}")),
            at_unix: now_unix(),
        });
        self.dirty = true;
    }

    /// Looks every pending SMC connection up in one smc_diag dump. At exit (`last`), what is
    /// still undecided is counted as unclassified.
    fn classify_pending(&mut self, last: bool) {
        if self.pending.is_empty() {
            return;
        }
        let diag = match sock_diag::dump(0) {
            Ok(d) => d,
            Err(e) => {
                let n = self.pending.len() as u64;
                self.pending.clear();
                self.counts.pending = 0;
                self.counts.unclassified += n;
                self.note_error(format!("cannot read smc_diag: {e}"));
                return;
            }
        };
        let mut still = Vec::new();
        for fd in std::mem::take(&mut self.pending) {
            let Some(s) = self.socks.get(&fd).cloned() else {
                continue;
            };
            let entry = smc_entry(fd, &diag);
            let outcome = match entry {
                None => None,
                Some(e) => match e.mode {
                    sock_diag::Mode::Fallback => {
                        let (r, p) = e.fallback.unwrap_or((0, 0));
                        Some(Outcome::Fallback(r, p))
                    }
                    _ if e.state == 2 => None, // handshake still running (INIT)
                    sock_diag::Mode::SmcR => Some(Outcome::SmcR),
                    sock_diag::Mode::SmcD => Some(Outcome::SmcD),
                    sock_diag::Mode::Unknown(_) => None,
                },
            };
            match outcome {
                Some(o) => {
                    self.counts.pending -= 1;
                    let local = entry.map(|e| e.local);
                    self.classified(fd, &s, o, local);
                }
                None if last
                    || entry.is_none() && socket_inode(fd).is_none()
                    || s.since.elapsed() > PENDING_LIMIT =>
                {
                    self.counts.pending -= 1;
                    self.counts.unclassified += 1;
                }
                None => still.push(fd),
            }
        }
        self.pending = still;
        self.dirty = true;
    }

    fn report(&self) -> ProcessReport {
        let exe = std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let program = exe.rsplit('/').next().unwrap_or_default().to_string();
        let mut reasons: Vec<ReasonCount> =
            self.reasons.iter().map(|(k, n)| k.to_count(*n)).collect();
        reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(&b.text)));
        let mut endpoints: Vec<Endpoint> = self
            .endpoints
            .iter()
            .map(|((remote, role), c)| {
                let mut rs: Vec<ReasonCount> =
                    c.reasons.iter().map(|(k, n)| k.to_count(*n)).collect();
                rs.sort_by_key(|r| std::cmp::Reverse(r.count));
                Endpoint {
                    remote: remote.clone(),
                    role: role.name().into(),
                    smc_r: c.smc_r,
                    smc_d: c.smc_d,
                    tcp: c.tcp,
                    reasons: rs,
                }
            })
            .collect();
        endpoints.sort_by(|a, b| {
            (b.smc_r + b.smc_d + b.tcp)
                .cmp(&(a.smc_r + a.smc_d + a.tcp))
                .then(a.remote.cmp(&b.remote))
        });
        endpoints.truncate(report::TOP_ENDPOINTS);
        ProcessReport {
            version: report::REPORT_VERSION,
            // SAFETY: getpid has no preconditions.
            pid: unsafe { libc::getpid() } as u32,
            program,
            exe,
            start_ticks: start_ticks("/proc/self/stat").unwrap_or(0),
            updated_unix: now_unix(),
            exited: self.exited,
            mode: mode_name(),
            sockets: SocketCounts {
                converted: CONVERTED.load(Ordering::Relaxed),
                tcp_at_creation: TCP_AT_CREATION.load(Ordering::Relaxed),
                untouched: UNTOUCHED.load(Ordering::Relaxed),
            },
            connections: self.counts.clone(),
            reasons,
            endpoints,
            recent: self.recent.iter().cloned().collect(),
            recent_dropped: self.recent_dropped,
            dropped_events: DROPPED.load(Ordering::Relaxed),
            errors: self.errors,
            last_error: self.last_error.clone(),
        }
    }

    fn write_report(&mut self) {
        self.dirty = false;
        self.last_write = Some(Instant::now());
        if self.report_refused {
            return;
        }
        let dir = rundir::run_dir();
        let result = rundir::ensure(&dir).and_then(|()| {
            let r = self.report();
            let bytes = serde_json::to_vec_pretty(&r).map_err(|e| e.to_string())?;
            rundir::write_report(&dir, r.pid, &bytes)
        });
        if let Err(e) = result {
            // One warning, then no more attempts: the program is not to be bothered again.
            self.report_refused = true;
            self.errors += 1;
            self.last_error = Some(e.clone());
            let line = format!(
                "smcrun[{}]: warning: no per-process report: {e}\n",
                std::process::id()
            );
            // SAFETY: writing a live buffer to stderr.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
    }
}

/// Field 22 of a `/proc/PID/stat` file: the start time in clock ticks since boot.
pub fn start_ticks(stat_path: &str) -> Option<u64> {
    let s = std::fs::read_to_string(stat_path).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
