//! Where per-process reports live, and how they are written and read so that no other user can
//! redirect or forge them.
//!
//! The directory is `$XDG_RUNTIME_DIR/smcrun/`, else `/run/smcrun/` for root, else
//! `/tmp/smcrun-UID/` (a process that switched uid ignores the XDG directory it inherited, and so
//! does one whose XDG directory is not its own: see [`xdg_trusted`]). It must
//! be a real directory (never a symlink) of the user, closed to others (0700). A process opens it
//! once, `O_DIRECTORY|O_NOFOLLOW`, checks the open directory itself, and does everything else
//! through that descriptor: a path swapped for a symlink after the check changes nothing.
//!
//! Each process has its own report file, `PID.json` (0600, created `O_EXCL|O_NOFOLLOW`), opened
//! early: at its first TCP socket, before it switches uid, and, for a forked child, at fork time
//! while it still has its parent's rights. It then keeps writing through that descriptor (the
//! report is rewritten in place), so a server that starts as root and runs as nobody, or a
//! daemon's grandchild, still reports into the directory of the user who started it. Both
//! descriptors sit at fd 100 or above, out of the program's way (never below: with a lower fd limit
//! the process has no report; and they are given up when the program runs out of descriptors, see
//! [`give_up_fds`]), and each is checked (device and inode) before use, so a program that closed
//! or reused the number is never written to.
//!
//! The writer side runs inside other people's programs, in hooks and forked children: it makes
//! raw system calls only (rustix) and never allocates.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use rustix::fs::{self, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Our descriptors go at or above this number, out of the way of a program's own low fds.
const HIGH_FD: RawFd = 100;

/// Longest run directory path handled.
const PATH_MAX: usize = 512;

/// Why the run directory or the report file cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path does not fit smcrun's buffer.
    TooLong,
    /// A system call failed: what was being done, and the errno.
    Io(Stage, i32),
    /// Not a directory (a symlink, a file).
    NotDirectory,
    /// Owned by another user.
    Owner(u32),
    /// Open to other users (the mode).
    Mode(u32),
    /// A report path that is not a regular file of ours with one link.
    NotOurFile,
    /// The fd limit (soft `RLIMIT_NOFILE`) leaves no number at or above [`HIGH_FD`]: the runtime
    /// keeps no descriptor, since any it kept would be one the program could have had.
    FdLimit(u32),
    /// The program reached its fd limit (this one) while the runtime held descriptors: they were
    /// closed so that the program could have them, and the report stopped there.
    GaveUp(u32),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Refusal::TooLong => write!(f, "the run directory's path is longer than {PATH_MAX} bytes"),
            Refusal::Io(what, e) => {
                write!(f, "cannot {}: {}", what.text(), smcrun_sys::errno::Errno(e))
            }
            Refusal::NotDirectory => f.write_str("it is not a directory (a symlink?); refusing it"),
            Refusal::Owner(uid) => write!(
                f,
                "it belongs to uid {uid}, not to this user (made by another user?); refusing it; set XDG_RUNTIME_DIR to a private directory"
            ),
            Refusal::Mode(m) => write!(f, "it has mode {m:o}, open to other users; expected 700"),
            Refusal::NotOurFile => {
                f.write_str("the report path is not a regular file of ours; refusing to write it")
            }
            Refusal::FdLimit(n) => write!(
                f,
                "the fd limit ({n}) leaves no descriptor at or above {HIGH_FD} for the report, and one below would be taken from the program; running without a report"
            ),
            Refusal::GaveUp(n) => write!(
                f,
                "the program reached its fd limit ({n}): the runtime closed the report's descriptors so that the program could have them; the report stops there"
            ),
        }
    }
}

/// What was being done when a system call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// mkdir of the run directory.
    CreateDir,
    /// open of the run directory.
    OpenDir,
    /// fstat of the run directory.
    StatDir,
    /// creating the report file.
    CreateReport,
    /// opening an existing report file.
    OpenReport,
    /// fstat of the report file.
    StatReport,
    /// truncating an existing report file.
    EmptyReport,
    /// moving a descriptor out of the program's way.
    MoveFd,
}

impl Stage {
    const ALL: [Stage; 8] = [
        Stage::CreateDir,
        Stage::OpenDir,
        Stage::StatDir,
        Stage::CreateReport,
        Stage::OpenReport,
        Stage::StatReport,
        Stage::EmptyReport,
        Stage::MoveFd,
    ];

    fn text(self) -> &'static str {
        match self {
            Stage::CreateDir => "create the run directory",
            Stage::OpenDir => "open the run directory",
            Stage::StatDir => "stat the run directory",
            Stage::CreateReport => "create the report",
            Stage::OpenReport => "open the report",
            Stage::StatReport => "stat the report",
            Stage::EmptyReport => "empty the report",
            Stage::MoveFd => "move a descriptor",
        }
    }
}

impl Refusal {
    /// Packed into one word, so that a hook can keep it without a lock.
    fn pack(self) -> u64 {
        let (tag, a, b) = match self {
            Refusal::TooLong => (1u64, 0u64, 0u64),
            Refusal::Io(st, e) => (2, st as u64, e as u32 as u64),
            Refusal::NotDirectory => (3, 0, 0),
            Refusal::Owner(uid) => (4, 0, u64::from(uid)),
            Refusal::Mode(m) => (5, 0, u64::from(m)),
            Refusal::NotOurFile => (6, 0, 0),
            Refusal::FdLimit(n) => (7, 0, u64::from(n)),
            Refusal::GaveUp(n) => (8, 0, u64::from(n)),
        };
        tag << 56 | a << 32 | b
    }

    fn unpack(w: u64) -> Option<Refusal> {
        let b = w as u32;
        Some(match w >> 56 {
            1 => Refusal::TooLong,
            2 => Refusal::Io(*Stage::ALL.get(((w >> 32) & 0xff) as usize)?, b as i32),
            3 => Refusal::NotDirectory,
            4 => Refusal::Owner(b),
            5 => Refusal::Mode(b),
            6 => Refusal::NotOurFile,
            7 => Refusal::FdLimit(b),
            8 => Refusal::GaveUp(b),
            _ => return None,
        })
    }
}

/// A path built on the stack, NUL-terminated.
pub struct PathBuf0 {
    buf: [u8; PATH_MAX],
    len: usize,
}

impl PathBuf0 {
    fn new() -> Self {
        PathBuf0 {
            buf: [0; PATH_MAX],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) -> Result<(), Refusal> {
        if self.len + s.len() >= PATH_MAX || s.contains(&0) {
            return Err(Refusal::TooLong);
        }
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
        Ok(())
    }

    fn push_u32(&mut self, mut n: u32) -> Result<(), Refusal> {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }

    /// The path as a C string.
    pub fn as_cstr(&self) -> &CStr {
        // SAFETY: push() never lets a NUL in and always leaves the byte after the end zero.
        unsafe { CStr::from_bytes_with_nul_unchecked(&self.buf[..=self.len]) }
    }

    /// The path's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The run directory of user `euid`, given the `XDG_RUNTIME_DIR` the process has (only an absolute
/// one counts; `use_xdg` false for a process that switched away from the uid it started with).
pub fn dir_path(xdg: Option<&[u8]>, euid: u32, use_xdg: bool) -> Result<PathBuf0, Refusal> {
    let mut p = PathBuf0::new();
    match xdg.filter(|x| use_xdg && x.first() == Some(&b'/')) {
        Some(x) => {
            p.push(x)?;
            p.push(b"/smcrun")?;
        }
        None if euid == 0 => p.push(b"/run/smcrun")?,
        None => {
            p.push(b"/tmp/smcrun-")?;
            p.push_u32(euid)?;
        }
    }
    Ok(p)
}

/// Whether `XDG_RUNTIME_DIR` may hold the run directory of user `euid`: an absolute path reached
/// without a symlink, naming a directory of `euid` that nobody else may write (as pam_systemd makes
/// `/run/user/UID`). A directory of another user (an environment inherited through `sudo -E`, or
/// set by someone else) is not, so no variable makes a process create its run directory or write
/// its reports where another user chose. (Raw system calls on the stack: usable in a hook.)
pub fn xdg_trusted(xdg: &[u8], euid: u32) -> bool {
    let mut p = PathBuf0::new();
    if xdg.first() != Some(&b'/') || p.push(xdg).is_err() {
        return false;
    }
    let Ok(fd) = fs::openat2(
        fs::CWD,
        p.as_cstr(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        fs::ResolveFlags::NO_SYMLINKS,
    ) else {
        return false;
    };
    fs::fstat(&fd).is_ok_and(|st| {
        st.st_mode & libc::S_IFMT == libc::S_IFDIR && st.st_uid == euid && st.st_mode & 0o022 == 0
    })
}

/// The report file's name, `PID.json`.
pub fn report_name(pid: u32) -> PathBuf0 {
    let mut p = PathBuf0::new();
    let _ = p.push_u32(pid);
    let _ = p.push(b".json");
    p
}

/// Moves `fd` to a number at or above [`HIGH_FD`] (close-on-exec), closing the original. Never
/// keeps it below: with an fd limit at or under [`HIGH_FD`] (EINVAL) the runtime does without
/// (a low number would be one the program could have had: `ulimit -n 16` left it 10 sockets of 12).
fn high(fd: OwnedFd) -> Result<OwnedFd, Refusal> {
    if fd.as_raw_fd() >= HIGH_FD {
        return Ok(fd);
    }
    match rustix::io::fcntl_dupfd_cloexec(&fd, HIGH_FD) {
        Ok(h) => Ok(h),
        Err(Errno::INVAL) => Err(Refusal::FdLimit(fd_limit())),
        Err(e) => Err(Refusal::Io(Stage::MoveFd, e.raw_os_error())),
    }
}

/// The soft fd limit (`RLIMIT_NOFILE`), for messages.
fn fd_limit() -> u32 {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    l.map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks an open directory: a directory of ours, closed to others.
fn check_dir(fd: BorrowedFd<'_>) -> Result<fs::Stat, Refusal> {
    check_dir_of(fd, euid())
}

/// Checks an open directory: a directory of user `owner`, closed to others.
fn check_dir_of(fd: BorrowedFd<'_>, owner: u32) -> Result<fs::Stat, Refusal> {
    let st = fs::fstat(fd).map_err(|e| Refusal::Io(Stage::StatDir, e.raw_os_error()))?;
    let mode = st.st_mode as u32;
    if mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(Refusal::NotDirectory);
    }
    if st.st_uid != owner {
        return Err(Refusal::Owner(st.st_uid));
    }
    if mode & 0o077 != 0 {
        return Err(Refusal::Mode(mode & 0o777));
    }
    Ok(st)
}

/// Opens (creating it if needed) and checks the run directory at `path`.
pub fn open_dir(path: &CStr, create: bool) -> Result<OwnedFd, Refusal> {
    if create {
        match fs::mkdir(path, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Refusal::Io(Stage::CreateDir, e.raw_os_error())),
        }
    }
    open_dir_of(path, euid())
}

/// Opens and checks the run directory of user `owner` at `path`. One that cannot be opened
/// (EACCES: another user's, closed to us) is named by its owner when `lstat` can tell it.
fn open_dir_of(path: &CStr, owner: u32) -> Result<OwnedFd, Refusal> {
    let fd = fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        // O_NOFOLLOW on a symlink, O_DIRECTORY on something else.
        Errno::LOOP | Errno::NOTDIR => Refusal::NotDirectory,
        Errno::ACCESS => match fs::lstat(path) {
            Ok(st) if st.st_uid != owner => Refusal::Owner(st.st_uid),
            _ => Refusal::Io(Stage::OpenDir, e.raw_os_error()),
        },
        e => Refusal::Io(Stage::OpenDir, e.raw_os_error()),
    })?;
    check_dir_of(fd.as_fd(), owner)?;
    Ok(fd)
}

/// Checks an open report file: a regular file of ours with one name.
fn check_file(fd: BorrowedFd<'_>) -> Result<fs::Stat, Refusal> {
    let st = fs::fstat(fd).map_err(|e| Refusal::Io(Stage::StatReport, e.raw_os_error()))?;
    if st.st_mode as u32 & libc::S_IFMT != libc::S_IFREG || st.st_uid != euid() || st.st_nlink != 1
    {
        return Err(Refusal::NotOurFile);
    }
    Ok(st)
}

/// Creates this process's report file in the directory `dir`, `O_EXCL`; a file already there
/// under this pid (the program before an exec, or a dead process whose pid was reused) is taken
/// over if it is a regular file of ours with one link, and emptied.
pub fn create_report(dir: BorrowedFd<'_>, pid: u32) -> Result<OwnedFd, Refusal> {
    let name = report_name(pid);
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(0o600);
    let fd = match fs::openat(
        dir,
        name.as_cstr(),
        flags | OFlags::CREATE | OFlags::EXCL,
        mode,
    ) {
        Ok(fd) => fd,
        Err(Errno::EXIST) => {
            let fd =
                fs::openat(dir, name.as_cstr(), flags, Mode::empty()).map_err(|e| match e {
                    Errno::LOOP => Refusal::NotOurFile,
                    e => Refusal::Io(Stage::OpenReport, e.raw_os_error()),
                })?;
            check_file(fd.as_fd())?;
            fs::ftruncate(&fd, 0).map_err(|e| Refusal::Io(Stage::EmptyReport, e.raw_os_error()))?;
            fd
        }
        Err(e) => return Err(Refusal::Io(Stage::CreateReport, e.raw_os_error())),
    };
    check_file(fd.as_fd())?;
    high(fd)
}

/// One descriptor of ours, with the identity it must still have when used.
struct Held {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

impl Held {
    const fn new() -> Held {
        Held {
            fd: AtomicI32::new(-1),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    fn get(&self) -> Option<RawFd> {
        let fd = self.fd.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }

    fn put(&self, fd: OwnedFd, st: &fs::Stat) {
        self.dev.store(st.st_dev, Ordering::Relaxed);
        self.ino.store(st.st_ino, Ordering::Relaxed);
        self.fd.store(fd.into_raw_fd(), Ordering::Release);
    }

    /// Closes ours and forgets it.
    fn drop_fd(&self) {
        let fd = self.fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            // SAFETY: the number was ours (and is forgotten now).
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }

    /// A private duplicate of ours, if the number still holds the file we opened; `Ok(None)`
    /// while no number at or above [`HIGH_FD`] is free (the program holds them all for now: a
    /// later write may find one, and a hooked call that fails with EMFILE gives the program ours,
    /// see [`give_up_fds`]); else what happened, in words.
    fn dup_checked(&self) -> Result<Option<OwnedFd>, String> {
        // None: given up (give_up_fds); its refusal is said at the next write
        let Some(fd) = self.get() else {
            return Ok(None);
        };
        // SAFETY: borrowed only to duplicate it; a stale number fails or fails the check below.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        let d = match rustix::io::fcntl_dupfd_cloexec(b, HIGH_FD) {
            Ok(d) => d,
            Err(Errno::MFILE | Errno::INVAL) => return Ok(None),
            Err(Errno::BADF) => {
                return Err(format!(
                    "the report's descriptor (fd {fd}) was closed by the program"
                ))
            }
            Err(e) => {
                return Err(format!(
                    "cannot duplicate the report's descriptor (fd {fd}): {e}"
                ))
            }
        };
        let st = fs::fstat(&d).map_err(|e| format!("cannot stat the report: {e}"))?;
        if st.st_dev == self.dev.load(Ordering::Relaxed)
            && st.st_ino == self.ino.load(Ordering::Relaxed)
        {
            Ok(Some(d))
        } else {
            Err(format!(
                "fd {fd} no longer holds the report file (the program put another file there)"
            ))
        }
    }

    /// The program is closing `fd`: if it is ours, keep our file on another number first.
    fn step_aside(&self, fd: RawFd) {
        if self.get() != Some(fd) {
            return;
        }
        // SAFETY: `fd` is ours; borrowed to duplicate it before the program closes the number.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        let moved = rustix::io::fcntl_dupfd_cloexec(b, HIGH_FD)
            .ok()
            .map(IntoRawFd::into_raw_fd);
        let _ =
            self.fd
                .compare_exchange(fd, moved.unwrap_or(-1), Ordering::AcqRel, Ordering::Acquire);
    }
}

static DIR: Held = Held::new();
static REPORT: Held = Held::new();
/// The epoch (see `fdtable`) in which registration was last tried, so that each process tries once.
static TRIED: AtomicU32 = AtomicU32::new(0);
/// The first refusal (packed), kept to be reported once by a context that may print; the top bit
/// marks it as reported.
static REFUSAL: AtomicU64 = AtomicU64::new(0);
/// The sidecar is writing the report (it may hold a duplicate of the report's descriptor): a
/// give-up waits for it, so that the program's retry finds every number the runtime had.
static WRITING: AtomicBool = AtomicBool::new(false);
const REPORTED: u64 = 1 << 63;

/// `XDG_RUNTIME_DIR` as the program had it at start-up, and the uid it started with.
struct Start {
    xdg: [u8; PATH_MAX],
    xdg_len: AtomicU32,
    uid: AtomicU32,
}

struct StartCell(std::cell::UnsafeCell<Start>);
// SAFETY: written once by `snapshot_env` in the library constructor, before any other thread of the
// runtime reads it; read-only afterwards.
unsafe impl Sync for StartCell {}
static START: StartCell = StartCell(std::cell::UnsafeCell::new(Start {
    xdg: [0; PATH_MAX],
    xdg_len: AtomicU32::new(0),
    uid: AtomicU32::new(u32::MAX),
}));

fn start() -> &'static Start {
    // SAFETY: see StartCell.
    unsafe { &*START.0.get() }
}

/// Remembers the environment's `XDG_RUNTIME_DIR` and the euid (the library constructor calls this
/// once, before the program runs; the program may change its environment later).
pub fn snapshot_env() {
    // getenv, not std::env: no allocation in the constructor every exec'd program runs.
    // SAFETY: a NUL-terminated name; the result is null or a NUL-terminated string that stays
    // valid while the constructor runs (nothing else changes the environment then).
    let xdg = unsafe {
        let p = libc::getenv(c"XDG_RUNTIME_DIR".as_ptr());
        (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p))
    };
    // SAFETY: the only write, from the constructor, while nothing else reads START.
    let s = unsafe { &mut *START.0.get() };
    if let Some(x) = xdg {
        let b = x.to_bytes();
        if b.len() < PATH_MAX - 16 && !b.contains(&0) {
            s.xdg[..b.len()].copy_from_slice(b);
            s.xdg_len.store(b.len() as u32, Ordering::Relaxed);
        }
    }
    s.uid.store(euid(), Ordering::Relaxed);
}

/// The path of this process's run directory now.
fn own_dir_path() -> Result<PathBuf0, Refusal> {
    let s = start();
    let n = s.xdg_len.load(Ordering::Relaxed) as usize;
    let xdg = (n > 0).then(|| &s.xdg[..n]);
    let me = euid();
    let use_xdg = s.uid.load(Ordering::Relaxed) == me && xdg.is_some_and(|x| xdg_trusted(x, me));
    dir_path(xdg, me, use_xdg)
}

fn refuse(r: Refusal) -> Refusal {
    let _ = REFUSAL.compare_exchange(0, r.pack(), Ordering::AcqRel, Ordering::Acquire);
    r
}

/// Makes sure this process has its report file (no allocation, raw system calls; called from
/// hooks at the first TCP socket and before a uid switch). Tried once per process.
pub fn register(epoch: u16) {
    let epoch = u32::from(epoch);
    if REPORT.get().is_some() || TRIED.load(Ordering::Acquire) == epoch {
        return;
    }
    // Not from a vfork child, which shares its parent's memory.
    if !smcrun_sys::errno::keep(crate::fdtable::owned)
        || TRIED.swap(epoch, Ordering::AcqRel) == epoch
    {
        return;
    }
    let _ = smcrun_sys::errno::keep(|| register_now().map_err(refuse));
}

fn register_now() -> Result<(), Refusal> {
    let dir_fd = match DIR.get() {
        Some(fd) => fd,
        None => {
            let path = own_dir_path()?;
            let fd = high(open_dir(path.as_cstr(), true)?)?;
            let st = check_dir(fd.as_fd())?;
            DIR.put(fd, &st);
            DIR.get().unwrap_or(-1)
        }
    };
    // SAFETY: DIR's fd stays open for the life of the process (the close hook steps it aside).
    let dir = unsafe { BorrowedFd::borrow_raw(dir_fd) };
    let file = create_report(dir, rustix::process::getpid().as_raw_nonzero().get() as u32)?;
    let st = check_file(file.as_fd())?;
    REPORT.put(file, &st);
    Ok(())
}

/// In a forked child (single-threaded, maybe in a signal handler's fork): drops the parent's
/// report file and, while the child still has its parent's rights, creates its own through the
/// inherited directory descriptor.
pub fn register_child(epoch: u16) {
    REPORT.drop_fd();
    TRIED.store(0, Ordering::Release);
    if DIR.get().is_some() {
        register(epoch);
    }
}

/// Rewrites this process's report with `bytes` (the sidecar, at most once a second). `Ok(false)`:
/// not written this time, because the program holds every descriptor the runtime could write
/// through (a full table is the program's, not a reason to stop reporting); the caller tries
/// again at its next write.
pub fn write_report(bytes: &[u8]) -> Result<bool, String> {
    WRITING.store(true, Ordering::SeqCst);
    let r = write_report_now(bytes);
    WRITING.store(false, Ordering::Release);
    r
}

/// [`write_report`]'s work, while [`WRITING`] is set.
fn write_report_now(bytes: &[u8]) -> Result<bool, String> {
    let Some(fd) = REPORT.dup_checked()? else {
        return Ok(false);
    };
    let mut done = 0;
    while done < bytes.len() {
        match rustix::io::pwrite(&fd, &bytes[done..], done as u64) {
            Ok(0) => return Err("cannot write the report: no space".into()),
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(format!("cannot write the report: {e}")),
        }
    }
    fs::ftruncate(&fd, bytes.len() as u64)
        .map(|()| true)
        .map_err(|e| format!("cannot truncate the report: {e}"))
}

/// Whether this process has a report file to write to.
pub fn registered() -> bool {
    REPORT.get().is_some()
}

/// The refusal that keeps this process from reporting, once: the caller prints it.
pub fn take_refusal() -> Option<Refusal> {
    let w = REFUSAL.load(Ordering::Acquire);
    if w == 0 || w & REPORTED != 0 {
        return None;
    }
    REFUSAL
        .compare_exchange(w, w | REPORTED, Ordering::AcqRel, Ordering::Acquire)
        .ok()
        .and_then(Refusal::unpack)
}

/// The run directory this process uses or would use, for messages.
pub fn describe_dir() -> String {
    own_dir_path()
        .map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned())
        .unwrap_or_else(|e| e.to_string())
}

/// The program ran out of descriptors (a call failed with EMFILE): if the runtime holds any, they
/// are closed (the process reports no more, and says so once) and true is returned, so that the
/// call can be made again with the numbers freed. No allocation; raw system calls.
pub fn give_up_fds() -> bool {
    // Not from a vfork child: the numbers it sees are its parent's memory, the fds its own copies.
    if DIR.get().is_none() && REPORT.get().is_none() || !crate::fdtable::owned() {
        return false;
    }
    DIR.drop_fd();
    REPORT.drop_fd();
    refuse(Refusal::GaveUp(fd_limit()));
    // A write under way may hold a duplicate: it ends within a write's time (bounded: 20 ms).
    for _ in 0..2000 {
        if !WRITING.load(Ordering::SeqCst) {
            break;
        }
        let t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000,
        };
        // SAFETY: a valid timespec, no remainder wanted.
        unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
    }
    true
}

/// The close hook's part: the program is closing `fd`; if it is one of ours, ours moves first.
pub fn before_close(fd: RawFd) {
    DIR.step_aside(fd);
    REPORT.step_aside(fd);
}

/// Reading reports: what `smcrun ps` and `smcrun why` (and the exporter) do.
pub mod read {
    use super::*;
    use smcrun_report::{ParseError, ProcessReport};

    /// The largest report read. A real one is far smaller: at most [`RECENT_CONNECTIONS`]
    /// connections and [`TOP_ENDPOINTS`] endpoints of a few hundred bytes each, and two paths of
    /// at most 4 KiB, so under 200 KiB; a file larger than this was not written by smcrun's
    /// runtime, and is not read (a 300 MB sparse file would otherwise be read whole).
    ///
    /// [`RECENT_CONNECTIONS`]: smcrun_report::RECENT_CONNECTIONS
    /// [`TOP_ENDPOINTS`]: smcrun_report::TOP_ENDPOINTS
    pub const MAX_REPORT_BYTES: u64 = 4 << 20;

    /// The run directory of the user running the tool.
    pub struct RunDir {
        fd: OwnedFd,
        /// Whose it is: its reports must be this user's.
        owner: u32,
        /// Its path, for messages.
        pub path: String,
    }

    /// The effective uid process `pid` runs as now (from `/proc/PID/status`).
    pub fn euid_of(pid: u32) -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
        uids.split_whitespace().nth(1)?.parse().ok()
    }

    /// The current user's run directory, as the processes of this user write it.
    fn own_path() -> Result<PathBuf0, String> {
        let xdg = std::env::var_os("XDG_RUNTIME_DIR");
        let xdg = xdg.as_ref().map(|x| x.as_encoded_bytes());
        let me = euid();
        dir_path(xdg, me, xdg.is_some_and(|x| xdg_trusted(x, me))).map_err(|e| e.to_string())
    }

    /// Where the current user's reports are (the path).
    pub fn path() -> Result<String, String> {
        Ok(String::from_utf8_lossy(own_path()?.as_bytes()).into_owned())
    }

    impl RunDir {
        /// Opens the current user's run directory; `Ok(None)` when it does not exist.
        pub fn open() -> Result<Option<RunDir>, String> {
            let p = own_path()?;
            let path = String::from_utf8_lossy(p.as_bytes()).into_owned();
            match open_dir(p.as_cstr(), false) {
                Ok(fd) => Ok(Some(RunDir {
                    fd,
                    owner: euid(),
                    path,
                })),
                Err(Refusal::Io(Stage::OpenDir, e)) if e == libc::ENOENT => Ok(None),
                Err(e) => Err(format!("{path}: {e}")),
            }
        }

        /// The pids that have a report, in order.
        pub fn pids(&self) -> Vec<u32> {
            let mut pids = Vec::new();
            let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(&self.fd, 0) else {
                return pids;
            };
            let Ok(mut dir) = fs::Dir::new(dup) else {
                return pids;
            };
            while let Some(Ok(e)) = dir.read() {
                let name = e.file_name().to_bytes();
                if let Some(pid) = name
                    .strip_suffix(b".json")
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .and_then(|n| n.parse().ok())
                {
                    pids.push(pid);
                }
            }
            pids.sort_unstable();
            pids
        }

        /// Reads process `pid`'s report: `Ok(None)` when it registered but wrote no numbers yet.
        /// A report caught while being rewritten is read again (a few times). A process that
        /// registered here, switched uid and then exec'd (`runuser`, `setpriv`, `su -c`) writes its
        /// numbers into its new uid's run directory instead: that report is read when this one is
        /// empty (see [`RunDir::switched`]).
        pub fn report(&self, pid: u32) -> Result<Option<ProcessReport>, String> {
            match self.own_report(pid)? {
                Some(r) => Ok(Some(r)),
                None => Ok(self.switched(pid)),
            }
        }

        /// The report in this directory alone.
        fn own_report(&self, pid: u32) -> Result<Option<ProcessReport>, String> {
            let name = report_name(pid);
            let shown = format!("{}/{pid}.json", self.path);
            let mut last = ParseError::Torn;
            for attempt in 0..5 {
                if attempt > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                let bytes = self.read_file(&name).map_err(|e| format!("{shown}: {e}"))?;
                match smcrun_report::parse(&bytes) {
                    Ok(Some(r)) if r.pid != pid => {
                        return Err(format!("{shown}: it says it is pid {}; ignoring it", r.pid))
                    }
                    Ok(r) => return Ok(r),
                    Err(e @ ParseError::Version(_)) => return Err(format!("{shown}: {e}")),
                    Err(e) => last = e,
                }
            }
            Err(format!("{shown}: {last}"))
        }

        /// The bytes of the report file `name`: a regular file of the directory's owner with one
        /// link, opened without following a symlink and without blocking (a FIFO planted under
        /// the name is refused, never waited on), of at most [`MAX_REPORT_BYTES`].
        fn read_file(&self, name: &PathBuf0) -> Result<Vec<u8>, String> {
            use smcrun_sys::file::{kind, open_regular_at, read_bounded, NotRead};
            let (file, st) = match open_regular_at(Some(self.fd.as_fd()), name.as_cstr(), false) {
                Ok(f) => f,
                Err(NotRead::Io(e)) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err("it is a symlink, not a report; not read".into())
                }
                Err(e) => return Err(format!("{e}; not read")),
            };
            if st.st_uid != self.owner || st.st_nlink != 1 {
                return Err(format!(
                    "it is {} of uid {} with {} links, not a report of uid {} with one; not read",
                    kind(st.st_mode),
                    st.st_uid,
                    st.st_nlink,
                    self.owner
                ));
            }
            read_bounded(file, MAX_REPORT_BYTES).map_err(|e| match e {
                NotRead::TooBig(..) => format!("{e}: not a report of smcrun's; not read"),
                e => e.to_string(),
            })
        }

        /// The report of process `pid`, which registered here but wrote no numbers, when it now
        /// runs as another uid and wrote its numbers there: it switched uid and then exec'd, and
        /// the new program (whose runtime starts afresh, as that uid) opened its own run
        /// directory. That directory is found as the process's runtime found it (its uid and the
        /// `XDG_RUNTIME_DIR` it was started with, if that one is trusted for its uid), checked as
        /// that uid's, and its report is taken only for this very process (its pid and its start
        /// time). Only a reader allowed into another user's directory (root) finds anything.
        fn switched(&self, pid: u32) -> Option<ProcessReport> {
            let uid = euid_of(pid)?;
            if uid == self.owner {
                return None;
            }
            let started = crate::sidecar::start_ticks(&format!("/proc/{pid}/stat"))?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let xdg = environ
                .split(|b| *b == 0)
                .find_map(|v| v.strip_prefix(b"XDG_RUNTIME_DIR="));
            let p = dir_path(xdg, uid, xdg.is_some_and(|x| xdg_trusted(x, uid))).ok()?;
            let other = RunDir {
                fd: open_dir_of(p.as_cstr(), uid).ok()?,
                owner: uid,
                path: String::from_utf8_lossy(p.as_bytes()).into_owned(),
            };
            other
                .own_report(pid)
                .ok()
                .flatten()
                .filter(|r| r.start_ticks == started)
        }

        /// Removes process `pid`'s report (of a process that is gone).
        pub fn remove(&self, pid: u32) {
            let _ = fs::unlinkat(&self.fd, report_name(pid).as_cstr(), fs::AtFlags::empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = |x: Option<&str>, uid, use_xdg| {
            String::from_utf8(
                dir_path(x.map(str::as_bytes), uid, use_xdg)
                    .unwrap()
                    .as_bytes()
                    .to_vec(),
            )
            .unwrap()
        };
        assert_eq!(
            p(Some("/run/user/1000"), 1000, true),
            "/run/user/1000/smcrun"
        );
        assert_eq!(p(Some("relative"), 1000, true), "/tmp/smcrun-1000");
        assert_eq!(p(Some("/run/user/0"), 65534, false), "/tmp/smcrun-65534");
        assert_eq!(p(None, 0, true), "/run/smcrun");
        assert_eq!(report_name(4242).as_bytes(), b"4242.json");
        assert_eq!(
            report_name(4242).as_cstr().to_bytes_with_nul(),
            b"4242.json\0"
        );
        let long = "/x".repeat(300);
        assert!(dir_path(Some(long.as_bytes()), 1, true).is_err());
        for r in [
            Refusal::TooLong,
            Refusal::Io(Stage::MoveFd, libc::EMFILE),
            Refusal::NotDirectory,
            Refusal::Owner(1001),
            Refusal::Mode(0o755),
            Refusal::NotOurFile,
            Refusal::FdLimit(16),
            Refusal::GaveUp(1024),
        ] {
            assert_eq!(Refusal::unpack(r.pack()), Some(r));
        }
    }

    #[test]
    fn only_a_private_xdg_directory_of_ones_own_is_used() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("smcrun-xdg-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let own = base.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
        let me = euid();
        let t = |p: &std::path::Path, uid| xdg_trusted(p.as_os_str().as_encoded_bytes(), uid);
        assert!(t(&own, me));
        assert!(!t(&own, me + 1), "another user's directory");
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!t(&open, me), "a directory others may write");
        let link = base.join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(!t(&link, me), "a symlink");
        assert!(!t(&link.join("."), me), "a path through a symlink");
        assert!(!xdg_trusted(b"relative/dir", me));
        assert!(!t(&base.join("missing"), me));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
