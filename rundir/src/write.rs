//! Writing this process's report: the runtime's side, inside other people's programs (hooks,
//! signal handlers, forked children): raw system calls (rustix), no allocation on those paths.
//! The directory and the report file are each held by one descriptor at [`HIGH_FD`] or above,
//! checked (device and inode) before every use.

use crate::layout::{dir_path, report_name, xdg_trusted, PathBuf0, PATH_MAX};
use crate::open::{check_dir_of, euid, open_dir};
use crate::refusal::{Refusal, Stage};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use rustix::fs::{self, Mode, OFlags};
use rustix::io::Errno;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Our descriptors go at or above this number, out of the way of a program's own low fds.
pub const HIGH_FD: RawFd = 100;

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

/// Checks an open directory: a directory of ours, closed to others.
fn check_dir(fd: BorrowedFd<'_>) -> Result<fs::Stat, Refusal> {
    check_dir_of(fd, euid())
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

    /// Whether ours is `fd` (a test and a load: none held is -1, never a valid `fd`).
    #[inline]
    fn holds(&self, fd: RawFd) -> bool {
        fd >= 0 && self.fd.load(Ordering::Acquire) == fd
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
    /// see [`give_up_fds`]); else what happened, in words. It starts from the number `seen` read
    /// earlier. A hook moves ours to another number before the program closes or replaces the old
    /// one (step_aside, leave_range): a failure on a number that is no longer ours is that race,
    /// and the current number is tried. Bounded: each retry needs the program to have moved it
    /// again. `from`: the pidfd of a caller with a descriptor table of its own (the numbers are
    /// the program's; the duplicate is made in the caller's table, by `pidfd_getfd`).
    fn dup_checked_from(
        &self,
        mut seen: Option<RawFd>,
        from: Option<RawFd>,
    ) -> Result<Option<OwnedFd>, String> {
        let mut tries = 0;
        loop {
            // None: given up (give_up_fds) or let go (leave_range); said at the next write
            let Some(fd) = seen else {
                return Ok(None);
            };
            match self.dup_at(fd, from) {
                Err(_) if tries < 8 && self.get() != Some(fd) => {
                    tries += 1;
                    seen = self.get();
                }
                r => return r,
            }
        }
    }

    /// [`Self::dup_checked_from`] on the number `fd`, read from [`Self::fd`].
    fn dup_at(&self, fd: RawFd, from: Option<RawFd>) -> Result<Option<OwnedFd>, String> {
        // SAFETY: borrowed only to duplicate it; a stale number fails or fails the check below.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        let dup = match from {
            None => rustix::io::fcntl_dupfd_cloexec(b, HIGH_FD),
            // SAFETY: a new descriptor of the caller's own table, owned by nothing else.
            Some(p) => smcrun_sys::table::fetch(p, fd)
                .map(|d| unsafe { OwnedFd::from_raw_fd(d) })
                .map_err(|e| Errno::from_raw_os_error(e.0)),
        };
        let d = match dup {
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
    #[inline]
    fn step_aside(&self, fd: RawFd) {
        if self.holds(fd) {
            self.move_away(fd);
        }
    }

    #[inline(never)]
    fn move_away(&self, fd: RawFd) {
        // SAFETY: `fd` is ours; borrowed to duplicate it before the program closes the number.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        self.replace(fd, rustix::io::fcntl_dupfd_cloexec(b, HIGH_FD).ok());
    }

    /// Ours now lives on `moved` instead of `fd` (which the program is closing), or nowhere. A
    /// duplicate that lost the race to another change is closed, not leaked.
    fn replace(&self, fd: RawFd, moved: Option<OwnedFd>) {
        let to = moved.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        if self
            .fd
            .compare_exchange(fd, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // the number is ours to keep now
            let _ = moved.map(IntoRawFd::into_raw_fd);
        }
    }

    /// The program is closing `first..=last`: if ours is there, it moves above the range or, when
    /// the range ends above [`HIGH_FD`], below its start; true when no such number was free and
    /// ours is let go.
    fn leave_range(&self, first: RawFd, last: RawFd) -> bool {
        let Some(fd) = self.get().filter(|fd| (first..=last).contains(fd)) else {
            return false;
        };
        // SAFETY: `fd` is ours; borrowed to duplicate it before the program closes the number.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        let above = last
            .checked_add(1)
            .and_then(|n| rustix::io::fcntl_dupfd_cloexec(b, n.max(HIGH_FD)).ok());
        let moved = above.or_else(|| {
            (first > HIGH_FD)
                .then(|| rustix::io::fcntl_dupfd_cloexec(b, HIGH_FD).ok())
                .flatten()
                .filter(|d| d.as_raw_fd() < first)
        });
        let released = moved.is_none();
        self.replace(fd, moved);
        released
    }
}

static DIR: Held = Held::new();
static REPORT: Held = Held::new();
/// The epoch (the runtime's count of forks, see [`register`]) in which registration was last
/// tried, so that each process tries once.
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
/// hooks at the first TCP socket and before a uid switch). Tried once per process (per `epoch`,
/// the runtime's count of forks). `owned` tells whether the calling process owns this memory
/// (false in a vfork child, which must not register: the runtime's `fdtable::owned`).
#[inline]
pub fn register(epoch: u16, owned: fn() -> bool) {
    if REPORT.get().is_none() && TRIED.load(Ordering::Acquire) != u32::from(epoch) {
        register_once(u32::from(epoch), owned);
    }
}

#[inline(never)]
fn register_once(epoch: u32, owned: fn() -> bool) {
    // Not from a vfork child, which shares its parent's memory.
    if !smcrun_sys::errno::keep(owned) || TRIED.swap(epoch, Ordering::AcqRel) == epoch {
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
    let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
    let file = match create_report(dir, pid) {
        // another thread's close moved the directory meanwhile (see Held::dup_checked_from): once more
        // through its new number
        Err(_) if DIR.get().is_some_and(|fd| fd != dir_fd) => {
            let moved = DIR.get().unwrap_or(-1);
            // SAFETY: as above, the number DIR holds now.
            create_report(unsafe { BorrowedFd::borrow_raw(moved) }, pid)?
        }
        r => r?,
    };
    let st = check_file(file.as_fd())?;
    REPORT.put(file, &st);
    Ok(())
}

/// In a forked child (single-threaded, maybe in a signal handler's fork): drops the parent's
/// report file and, while the child still has its parent's rights, creates its own through the
/// inherited directory descriptor (`owned`: see [`register`]).
pub fn register_child(epoch: u16, owned: fn() -> bool) {
    REPORT.drop_fd();
    TRIED.store(0, Ordering::Release);
    if DIR.get().is_some() {
        register(epoch, owned);
    }
}

/// Rewrites this process's report with `bytes` (the sidecar, at most once a second; `from`: the
/// pidfd of a caller with a descriptor table of its own, see `pidfd_getfd`). `Ok(false)`:
/// not written this time, because the program holds every descriptor the runtime could write
/// through (a full table is the program's, not a reason to stop reporting); the caller tries
/// again at its next write.
pub fn write_report(bytes: &[u8], from: Option<RawFd>) -> Result<bool, String> {
    WRITING.store(true, Ordering::SeqCst);
    let r = write_report_now(bytes, from);
    WRITING.store(false, Ordering::Release);
    r
}

/// [`write_report`]'s work, while [`WRITING`] is set.
fn write_report_now(bytes: &[u8], from: Option<RawFd>) -> Result<bool, String> {
    let Some(fd) = REPORT.dup_checked_from(REPORT.get(), from)? else {
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
/// call can be made again with the numbers freed (`owned`: see [`register`]). No allocation; raw
/// system calls.
pub fn give_up_fds(owned: fn() -> bool) -> bool {
    // Not from a vfork child: the numbers it sees are its parent's memory, the fds its own copies.
    if DIR.get().is_none() && REPORT.get().is_none() || !owned() {
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

/// The program is closing every descriptor from `first` to `last` (close_range, closefrom): ours
/// in that range move out of it first, to a free number at or above [`HIGH_FD`] that is not in
/// it. Where there is none (a closefrom(3) takes every number from 3 up), ours are let go, and
/// registration is tried again (the sidecar's next write, or the next socket): the report is made
/// again under the same name, and the process goes on reporting.
pub fn before_close_range(first: RawFd, last: RawFd) {
    let released = DIR.leave_range(first, last) | REPORT.leave_range(first, last);
    if released {
        TRIED.store(0, Ordering::Release);
    }
}

/// Whether `fd` is one of the runtime's own files (the run directory, the report): two atomic
/// loads, for the close hook's fast path.
#[inline]
pub fn holds(fd: RawFd) -> bool {
    DIR.holds(fd) || REPORT.holds(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests below move descriptors among the numbers from HIGH_FD up and dup2 over a
    /// number they gave up, which another test running in parallel may just have been given
    /// (F_DUPFD takes the lowest free one): one at a time.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A report file of ours, held as `Held` holds it.
    fn held_file(name: &str) -> (Held, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("smcrun-held-{name}-{}", std::process::id()));
        let f = fs::open(
            &path,
            OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let st = fs::fstat(&f).unwrap();
        let h = Held::new();
        h.put(high(f).unwrap(), &st);
        (h, path)
    }

    /// The sidecar read the report's number, then the program's close_range moved ours and
    /// closed the number before the sidecar duplicated it: the write goes on through the new
    /// number (CI once printed "the report's descriptor (fd 100) was closed by the program").
    #[test]
    fn a_report_moved_between_the_read_and_the_duplicate_is_found_at_its_new_number() {
        let _g = serial();
        let (h, path) = held_file("range");
        let seen = h.get();
        let old = seen.unwrap();
        assert!(!h.leave_range(old, old), "a free number above exists");
        assert_ne!(h.get(), seen);
        // SAFETY: the old number is no longer ours (moved): the program's close_range closes it.
        unsafe { libc::close(old) };
        let d = h
            .dup_checked_from(seen, None)
            .unwrap()
            .expect("a duplicate");
        assert_eq!(fs::fstat(&d).unwrap().st_ino, h.ino.load(Ordering::Relaxed));
        h.drop_fd();
        let _ = std::fs::remove_file(path);
    }

    /// The same race with dup2: the old number carries another file of the program's by the time
    /// the sidecar duplicates it.
    #[test]
    fn a_report_replaced_by_dup2_after_the_read_is_found_at_its_new_number() {
        let _g = serial();
        let (h, path) = held_file("dup2");
        let seen = h.get();
        let old = seen.unwrap();
        h.step_aside(old);
        let other = fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        // SAFETY: `old` is no longer ours; the program's dup2 puts its own file there.
        assert_eq!(unsafe { libc::dup2(other.as_raw_fd(), old) }, old);
        let d = h
            .dup_checked_from(seen, None)
            .unwrap()
            .expect("a duplicate");
        assert_eq!(fs::fstat(&d).unwrap().st_ino, h.ino.load(Ordering::Relaxed));
        // SAFETY: `old` holds /dev/null, the test's own.
        unsafe { libc::close(old) };
        h.drop_fd();
        let _ = std::fs::remove_file(path);
    }

    /// A number closed by the program without a move (no hook saw it) is still an error that
    /// names it: the retry is for a number the runtime moved, nothing else.
    #[test]
    fn a_report_closed_behind_the_hooks_is_still_an_error() {
        let _g = serial();
        let (h, path) = held_file("closed");
        let fd = h.get().unwrap();
        // SAFETY: closed behind the hooks' back, as a raw syscall would.
        unsafe { libc::close(fd) };
        let e = h.dup_checked_from(h.get(), None).unwrap_err();
        assert!(e.contains(&format!("fd {fd}")), "{e}");
        h.fd.store(-1, Ordering::Release);
        let _ = std::fs::remove_file(path);
    }
}
