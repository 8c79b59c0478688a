//! The next definitions (normally glibc's) of the symbols the shim replaces.
//!
//! Resolved by hand with `dlsym(RTLD_NEXT)` rather than with `redhook`: redhook resolves lazily
//! without a defined order and calls the real function again when the hook panics, which could
//! create a second socket or repeat a `connect`. Here each pointer is an atomic that is filled by
//! the library constructor; a hook that runs before it (another library's constructor) fills it
//! itself. Two threads racing there store the same value, so no lock is needed and none can see a
//! half-written pointer (smc-tools' preload crashed exactly there before its v1.8.4). If the symbol
//! cannot be found at all, the raw system call is used instead, which has the same semantics.

use libc::{c_int, c_void, socklen_t};
use std::sync::atomic::{AtomicPtr, Ordering};

/// One lazily resolved symbol.
struct Symbol {
    name: &'static [u8],
    ptr: AtomicPtr<c_void>,
}

impl Symbol {
    const fn new(name: &'static [u8]) -> Self {
        Symbol {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The resolved address, or null when no later object defines the symbol.
    fn get(&self) -> *mut c_void {
        let p = self.resolved();
        if !p.is_null() {
            return p;
        }
        // SAFETY: `name` is a NUL-terminated literal; dlsym has no other precondition.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) };
        self.ptr.store(p, Ordering::Release);
        p
    }

    /// The address if it was resolved already (null: not yet, or not defined).
    #[inline(always)]
    fn resolved(&self) -> *mut c_void {
        self.ptr.load(Ordering::Acquire)
    }
}

static SOCKET: Symbol = Symbol::new(b"socket\0");
static BIND: Symbol = Symbol::new(b"bind\0");
static CONNECT: Symbol = Symbol::new(b"connect\0");
static GETSOCKOPT: Symbol = Symbol::new(b"getsockopt\0");
static ACCEPT: Symbol = Symbol::new(b"accept\0");
static LISTEN: Symbol = Symbol::new(b"listen\0");
static ACCEPT4: Symbol = Symbol::new(b"accept4\0");
static CLOSE: Symbol = Symbol::new(b"close\0");
static SHUTDOWN: Symbol = Symbol::new(b"shutdown\0");
static SETUID: Symbol = Symbol::new(b"setuid\0");
static SETEUID: Symbol = Symbol::new(b"seteuid\0");
static SETREUID: Symbol = Symbol::new(b"setreuid\0");
static SETRESUID: Symbol = Symbol::new(b"setresuid\0");
static PTHREAD_SIGMASK: Symbol = Symbol::new(b"pthread_sigmask\0");
static SIGPROCMASK: Symbol = Symbol::new(b"sigprocmask\0");
static DUP2: Symbol = Symbol::new(b"dup2\0");
static DUP3: Symbol = Symbol::new(b"dup3\0");
static CLOSE_RANGE: Symbol = Symbol::new(b"close_range\0");
static CLOSEFROM: Symbol = Symbol::new(b"closefrom\0");
static EXIT: Symbol = Symbol::new(b"_exit\0");
/// Resolved at its first call, not in the constructor: a thread's end is never on a signal
/// handler's path, and most programs never call it.
static PTHREAD_EXIT: Symbol = Symbol::new(b"pthread_exit\0");
/// Resolved at their first call, as `pthread_exit`: most programs never call them, and a program
/// has no reason to change namespaces in a signal handler (where dlsym could wait on the loader's
/// lock).
static UNSHARE: Symbol = Symbol::new(b"unshare\0");
static SETNS: Symbol = Symbol::new(b"setns\0");

/// Resolves every symbol now (called from the library constructor).
pub fn resolve_all() {
    for s in [
        &SOCKET,
        &BIND,
        &CONNECT,
        &GETSOCKOPT,
        &ACCEPT,
        &ACCEPT4,
        &LISTEN,
        &CLOSE,
        &SHUTDOWN,
        &SETUID,
        &SETEUID,
        &SETREUID,
        &SETRESUID,
        &PTHREAD_SIGMASK,
        &SIGPROCMASK,
        &DUP2,
        &DUP3,
        &CLOSE_RANGE,
        &CLOSEFROM,
        &EXIT,
    ] {
        s.get();
    }
}

/// Calls the next definition of the symbol in static `$sym` as `fn($ty...) -> c_int` with
/// `$arg...`, or evaluates `$fallback` when no later object defines it. `or syscall $nr` is the
/// fallback of most wrappers: the raw system call `$nr` with the same arguments.
///
/// A macro, not a generic function, so that each wrapper keeps its own C signature and its own
/// fallback while the resolve-and-call is written once; it expands to no lock and no allocation,
/// and touches errno only where the called function or the fallback does. The call through a
/// pointer resolved already is inline (a load, a test, the call); resolving it (dlsym) and the
/// fallback are in a cold function of their own, so that a hook's fast path keeps no registers
/// for them.
///
/// # Safety
/// Expands to unsafe operations (the call through the transmuted pointer, and the system call):
/// use it inside an `unsafe` block whose comment says why `$sym` has that signature and why the
/// arguments are valid.
macro_rules! call_next {
    ($sym:ident($($arg:ident: $ty:ty),*) or syscall $nr:ident) => {
        call_next!($sym($($arg: $ty),*) else libc::syscall(libc::$nr, $($arg),*) as c_int)
    };
    ($sym:ident($($arg:ident: $ty:ty),*) else $fallback:expr) => {{
        let p = $sym.resolved();
        if p.is_null() {
            /// The first call (or one without a later definition): resolve, then call or fall
            /// back.
            ///
            /// # Safety
            /// As the wrapper's.
            #[cold]
            #[inline(never)]
            #[allow(unused_unsafe)] // some fallbacks are safe code
            unsafe fn resolve_and_call($($arg: $ty),*) -> c_int {
                let p = $sym.get();
                if p.is_null() {
                    // SAFETY: the fallback is the wrapper's (see the macro's comment).
                    unsafe { $fallback }
                } else {
                    // SAFETY: as the wrapper's (see the macro's comment).
                    let f: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { std::mem::transmute(p) };
                    // SAFETY: as above.
                    unsafe { f($($arg),*) }
                }
            }
            resolve_and_call($($arg),*)
        } else {
            let f: unsafe extern "C" fn($($ty),*) -> c_int = std::mem::transmute(p);
            f($($arg),*)
        }
    }};
}

/// The real `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("socket") has socket's C signature; the fallback is the
    // system call with the same arguments.
    unsafe { call_next!(SOCKET(domain: c_int, ty: c_int, protocol: c_int) or syscall SYS_socket) }
}

/// The real `bind(2)`.
///
/// # Safety
/// `addr` and `len` as for bind(2); they are passed on unchanged.
pub unsafe fn bind(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    // SAFETY: a non-null pointer from dlsym("bind") has bind's C signature; the fallback is the
    // system call; the caller vouches for the arguments.
    unsafe {
        call_next!(BIND(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) or syscall SYS_bind)
    }
}

/// The real `connect(2)`.
///
/// # Safety
/// `addr` and `len` as for connect(2); they are passed on unchanged.
pub unsafe fn connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    // SAFETY: as in `bind`, for connect.
    unsafe {
        call_next!(CONNECT(fd: c_int, addr: *const libc::sockaddr, len: socklen_t)
            or syscall SYS_connect)
    }
}

/// The real `getsockopt(2)`.
///
/// # Safety
/// `val` and `len` as for getsockopt(2); they are passed on unchanged.
pub unsafe fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: as in `bind`, for getsockopt.
    unsafe {
        call_next!(GETSOCKOPT(
                fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t
            ) or syscall SYS_getsockopt)
    }
}

/// The real `listen(2)`.
pub fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("listen") has listen's C signature; the fallback is
    // the system call.
    unsafe { call_next!(LISTEN(fd: c_int, backlog: c_int) or syscall SYS_listen) }
}

/// The real `accept(2)`.
///
/// # Safety
/// `addr` and `len` as for accept(2); they are passed on unchanged.
pub unsafe fn accept(fd: c_int, addr: *mut libc::sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: as in `bind`, for accept; the fallback is the accept4 system call with flags 0,
    // which is accept (accept and accept4 share it).
    unsafe {
        call_next!(ACCEPT(fd: c_int, addr: *mut libc::sockaddr, len: *mut socklen_t)
            else libc::syscall(libc::SYS_accept4, fd, addr, len, 0 as c_int) as c_int)
    }
}

/// The real `accept4(2)`.
///
/// # Safety
/// `addr` and `len` as for accept4(2); they are passed on unchanged.
pub unsafe fn accept4_real(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: as in `bind`, for accept4.
    unsafe {
        call_next!(ACCEPT4(fd: c_int, addr: *mut libc::sockaddr, len: *mut socklen_t, flags: c_int)
            or syscall SYS_accept4)
    }
}

/// The real `close(2)`.
pub fn close(fd: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("close") has close's C signature; the fallback is the
    // system call.
    unsafe { call_next!(CLOSE(fd: c_int) or syscall SYS_close) }
}

/// The real `shutdown(2)`.
pub fn shutdown(fd: c_int, how: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("shutdown") has shutdown's C signature; the fallback
    // is the system call.
    unsafe { call_next!(SHUTDOWN(fd: c_int, how: c_int) or syscall SYS_shutdown) }
}

/// The real `unshare(2)`.
pub fn unshare(flags: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("unshare") has unshare's C signature; the fallback is
    // the system call with the same argument.
    unsafe { call_next!(UNSHARE(flags: c_int) or syscall SYS_unshare) }
}

/// The real `setns(2)`.
pub fn setns(fd: c_int, nstype: c_int) -> c_int {
    // SAFETY: as in `unshare`, for setns.
    unsafe { call_next!(SETNS(fd: c_int, nstype: c_int) or syscall SYS_setns) }
}

/// The real `dup2(2)`. The fallback is dup3's system call (the one every architecture has), which
/// refuses `old == new`: dup2 then only checks that `old` is open.
pub fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("dup2") has dup2's C signature; the fallback's calls
    // take integers only.
    unsafe {
        call_next!(DUP2(old: c_int, new: c_int) else if old == new {
            if libc::fcntl(old, libc::F_GETFD) < 0 { -1 } else { new }
        } else {
            libc::syscall(libc::SYS_dup3, old, new, 0 as c_int) as c_int
        })
    }
}

/// The real `dup3(2)`.
pub fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("dup3") has dup3's C signature; the fallback is the
    // system call.
    unsafe { call_next!(DUP3(old: c_int, new: c_int, flags: c_int) or syscall SYS_dup3) }
}

/// The real `close_range(2)` (glibc 2.34+; before it, the system call).
pub fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    // SAFETY: a non-null pointer from dlsym("close_range") has close_range's C signature; the
    // fallback is the system call.
    unsafe {
        call_next!(CLOSE_RANGE(first: libc::c_uint, last: libc::c_uint, flags: c_int)
            or syscall SYS_close_range)
    }
}

/// The real `closefrom(3)` (glibc 2.34+). Without it (a program on an older C library that found
/// the shim's), the close_range system call, and where the kernel lacks that (before 5.9), a
/// close of each number up to the fd limit, as glibc's own fallback does.
pub fn closefrom(first: libc::c_uint) {
    let p = CLOSEFROM.get();
    if !p.is_null() {
        // SAFETY: a non-null pointer from dlsym("closefrom") has closefrom's C signature.
        let f: unsafe extern "C" fn(c_int) = unsafe { std::mem::transmute(p) };
        // SAFETY: an integer argument; `first` came from a c_int, so it fits.
        unsafe { f(first as c_int) };
        return;
    }
    // SAFETY: integer arguments only.
    if unsafe { libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0 as c_int) } == 0 {
        return;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the kernel to fill.
    let end = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(FD_SCAN_CAP)
    } else {
        FD_SCAN_CAP
    };
    for fd in u64::from(first)..end {
        close(fd as c_int);
    }
}

/// The real `_exit(2)` (glibc's `_Exit` is the same function): ends the process at once. The
/// fallback is the exit_group system call.
pub fn exit_now(status: c_int) -> ! {
    let p = EXIT.get();
    if !p.is_null() {
        // SAFETY: a non-null pointer from dlsym("_exit") has _exit's C signature (it never
        // returns).
        let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(p) };
        // SAFETY: an integer argument.
        unsafe { f(status) }
    }
    loop {
        // SAFETY: an integer argument; exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// The real `pthread_exit(3)`: ends the calling thread. glibc unwinds the thread's stack first
/// (forced unwinding, which runs C++ destructors and cleanup handlers), through this frame and the
/// hook's: both are `C-unwind` and hold nothing to drop. The fallback, never taken with glibc,
/// ends the thread with the exit system call.
pub fn pthread_exit(retval: *mut c_void) -> ! {
    let p = PTHREAD_EXIT.get();
    if !p.is_null() {
        // SAFETY: a non-null pointer from dlsym("pthread_exit") has pthread_exit's C signature
        // (it never returns, and may unwind the caller's frames).
        let f: unsafe extern "C-unwind" fn(*mut c_void) -> ! = unsafe { std::mem::transmute(p) };
        // SAFETY: `retval` is the caller's, passed on as it is.
        unsafe { f(retval) }
    }
    loop {
        // SAFETY: an integer argument; exit ends the calling thread.
        unsafe { libc::syscall(libc::SYS_exit, 0) };
    }
}

/// The highest fd count closefrom's last fallback closes up to (Linux's default `fs.nr_open`).
const FD_SCAN_CAP: u64 = 1 << 20;

/// The signal-mask calls the shim passes through (and then records what the program set).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MaskCall {
    /// pthread_sigmask(3): returns an error number.
    Pthread,
    /// sigprocmask(2): returns -1 and sets errno.
    Proc,
}

/// The real pthread_sigmask or sigprocmask. There is no system call to fall back on: the C
/// library's versions keep its own signals (thread cancellation, set*id) unblocked and the raw
/// call would not, so if the symbol cannot be found the call fails with ENOSYS.
///
/// # Safety
/// `set` and `old` as for sigprocmask(2); they are passed on unchanged.
pub unsafe fn sigmask(
    call: MaskCall,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: both symbols have this C signature; the caller vouches for the arguments.
    unsafe {
        match call {
            MaskCall::Pthread => call_next!(
                PTHREAD_SIGMASK(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t)
                else libc::ENOSYS
            ),
            MaskCall::Proc => call_next!(
                SIGPROCMASK(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t)
                else enosys()
            ),
        }
    }
}

/// The uid-changing calls the shim passes through (after opening its report file).
#[derive(Clone, Copy)]
pub enum SetUid {
    /// setuid(uid).
    Uid(libc::uid_t),
    /// seteuid(euid).
    Euid(libc::uid_t),
    /// setreuid(ruid, euid).
    Reuid(libc::uid_t, libc::uid_t),
    /// setresuid(ruid, euid, suid).
    Resuid(libc::uid_t, libc::uid_t, libc::uid_t),
}

/// The real uid-changing call. There is no system call to fall back on: the C library's versions
/// change every thread of the process (the raw system call changes one), so if the symbol cannot
/// be found the call fails with ENOSYS rather than leave other threads with the old uid.
pub fn set_uid(call: SetUid) -> c_int {
    use libc::uid_t;
    // SAFETY: each pointer comes from dlsym of the function whose C signature it is cast to.
    unsafe {
        match call {
            SetUid::Uid(u) => call_next!(SETUID(u: uid_t) else enosys()),
            SetUid::Euid(u) => call_next!(SETEUID(u: uid_t) else enosys()),
            SetUid::Reuid(r, e) => call_next!(SETREUID(r: uid_t, e: uid_t) else enosys()),
            SetUid::Resuid(r, e, s) => {
                call_next!(SETRESUID(r: uid_t, e: uid_t, s: uid_t) else enosys())
            }
        }
    }
}

/// A C library call's failure with ENOSYS: errno set, -1 returned.
fn enosys() -> c_int {
    smcrun_sys::Errno(libc::ENOSYS).set();
    -1
}
