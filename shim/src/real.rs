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
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        // SAFETY: `name` is a NUL-terminated literal; dlsym has no other precondition.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

static SOCKET: Symbol = Symbol::new(b"socket\0");
static BIND: Symbol = Symbol::new(b"bind\0");
static CONNECT: Symbol = Symbol::new(b"connect\0");
static GETSOCKOPT: Symbol = Symbol::new(b"getsockopt\0");
static ACCEPT: Symbol = Symbol::new(b"accept\0");
static LISTEN: Symbol = Symbol::new(b"listen\0");
static ACCEPT4: Symbol = Symbol::new(b"accept4\0");

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
    ] {
        s.get();
    }
}

/// The real `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let p = SOCKET.get();
    // SAFETY: a non-null pointer from dlsym("socket") has socket's C signature; the fallback is the
    // system call with the same arguments.
    unsafe {
        if p.is_null() {
            libc::syscall(libc::SYS_socket, domain, ty, protocol) as c_int
        } else {
            let f: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int = std::mem::transmute(p);
            f(domain, ty, protocol)
        }
    }
}

/// The real `bind(2)`.
///
/// # Safety
/// `addr` and `len` as for bind(2); they are passed on unchanged.
pub unsafe fn bind(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    let p = BIND.get();
    if p.is_null() {
        libc::syscall(libc::SYS_bind, fd, addr, len) as c_int
    } else {
        let f: unsafe extern "C" fn(c_int, *const libc::sockaddr, socklen_t) -> c_int =
            std::mem::transmute(p);
        f(fd, addr, len)
    }
}

/// The real `connect(2)`.
///
/// # Safety
/// `addr` and `len` as for connect(2); they are passed on unchanged.
pub unsafe fn connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    let p = CONNECT.get();
    if p.is_null() {
        libc::syscall(libc::SYS_connect, fd, addr, len) as c_int
    } else {
        let f: unsafe extern "C" fn(c_int, *const libc::sockaddr, socklen_t) -> c_int =
            std::mem::transmute(p);
        f(fd, addr, len)
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
    let p = GETSOCKOPT.get();
    if p.is_null() {
        libc::syscall(libc::SYS_getsockopt, fd, level, name, val, len) as c_int
    } else {
        let f: unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int =
            std::mem::transmute(p);
        f(fd, level, name, val, len)
    }
}

/// The real `listen(2)`.
pub fn listen(fd: c_int, backlog: c_int) -> c_int {
    let p = LISTEN.get();
    // SAFETY: a non-null pointer from dlsym("listen") has listen's C signature.
    unsafe {
        if p.is_null() {
            libc::syscall(libc::SYS_listen, fd, backlog) as c_int
        } else {
            let f: unsafe extern "C" fn(c_int, c_int) -> c_int = std::mem::transmute(p);
            f(fd, backlog)
        }
    }
}

/// The real `accept(2)`.
///
/// # Safety
/// `addr` and `len` as for accept(2); they are passed on unchanged.
pub unsafe fn accept(fd: c_int, addr: *mut libc::sockaddr, len: *mut socklen_t) -> c_int {
    accept4(fd, addr, len, 0, &ACCEPT)
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
    accept4(fd, addr, len, flags, &ACCEPT4)
}

/// accept and accept4 share the fallback system call (accept4 with flags 0 is accept).
unsafe fn accept4(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut socklen_t,
    flags: c_int,
    sym: &Symbol,
) -> c_int {
    let p = sym.get();
    if p.is_null() {
        return libc::syscall(libc::SYS_accept4, fd, addr, len, flags) as c_int;
    }
    if std::ptr::eq(sym, &ACCEPT) {
        let f: unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut socklen_t) -> c_int =
            std::mem::transmute(p);
        f(fd, addr, len)
    } else {
        let f: unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut socklen_t, c_int) -> c_int =
            std::mem::transmute(p);
        f(fd, addr, len, flags)
    }
}

/// `setsockopt(2)` for the shim's own use (buffer sizes, the policy's switch to TCP, options of a
/// replaced listener): the raw system call, so it never re-enters another preload's hook.
pub fn setsockopt_int(fd: c_int, level: c_int, name: c_int, value: c_int) -> c_int {
    // SAFETY: the value pointer and length describe a live c_int.
    unsafe {
        libc::syscall(
            libc::SYS_setsockopt,
            fd,
            level,
            name,
            &value as *const c_int,
            std::mem::size_of::<c_int>() as socklen_t,
        ) as c_int
    }
}
