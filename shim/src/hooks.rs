//! The exported symbols, and nothing else: each one hands its arguments to the real function
//! through [`crate::guard::hook`], which keeps errno, blocks re-entry and catches panics, and tells
//! the runtime what happened (`smcrun_runtime::track`).
//!
//! Only these functions are exported from the library (a cdylib exports nothing else).

use crate::config;
use crate::debug::{line, outcome};
use crate::guard::{self, errno, hook, set_errno};
use crate::real::{self, SetUid};
use crate::{convert, policy};
use libc::{c_int, c_void, socklen_t};
use smcrun_runtime::counters::{bump, COUNTS};
use smcrun_runtime::fdtable::{self, Kind, Seen};
use smcrun_runtime::track;
use smcrun_sys::sock;
use std::panic::catch_unwind;

/// Makes TCP sockets SMC sockets; see [`convert::socket`]. Both kinds of socket out of line, in
/// functions of the C ABI (which cannot unwind, as this one cannot), so that this is a test and a
/// jump, with no frame of its own.
///
/// # Safety
/// Called by C code exactly as socket(2).
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if convert::is_tcp(domain, ty, protocol) {
        tcp_socket(domain, ty, protocol)
    } else {
        other_socket(domain, ty, protocol)
    }
}

/// The socket hook for a TCP socket. Kept out of line so that the other sockets' path carries
/// none of its set-up.
#[inline(never)]
extern "C" fn tcp_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    hook(
        move || real::socket(domain, ty, protocol),
        |out| {
            let fd = convert::socket(domain, ty, protocol, out);
            if fd >= 0 {
                return fd;
            }
            again_if_out_of_fds(fd, out.entry(), &move || {
                convert::socket(domain, ty, protocol, out)
            })
        },
    )
}

/// A socket the shim leaves alone (UDP, UNIX, netlink, ...), most of the sockets most programs
/// make: the real call, then the runtime's count with atomics only (`track::other_socket_made`),
/// which can neither re-enter a hook nor touch errno, so without the guard's flag and errno care
/// (its panic barrier stays). EMFILE goes the guarded way, to be tried again with the runtime's
/// descriptors given up.
#[inline(never)]
extern "C" fn other_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let entry = errno();
    let fd = real::socket(domain, ty, protocol);
    if guard::nested() {
        return fd;
    }
    if fd >= 0 {
        let _ = catch_unwind(|| track::other_socket_made(fd));
        return fd;
    }
    other_socket_failed(domain, ty, protocol, fd, entry)
}

/// A refused socket of another kind: tried again on EMFILE (see [`again_with_our_fds`]).
#[cold]
#[inline(never)]
fn other_socket_failed(domain: c_int, ty: c_int, protocol: c_int, fd: c_int, entry: i32) -> c_int {
    hook(
        || fd,
        |out| {
            out.record(fd);
            again_with_our_fds(fd, entry, || {
                let fd = out.record(real::socket(domain, ty, protocol));
                if fd >= 0 {
                    track::other_socket_made(fd);
                }
                fd
            })
        },
    )
}

/// When a call that makes a descriptor failed with EMFILE while the runtime holds descriptors of
/// its own (the run directory, the report), those are given to the program (see
/// `smcrun_rundir::write::give_up_fds`) and the call is made once more, with the caller's errno
/// on entry: the program gets every descriptor its limit allows. Otherwise `ret` as it is. The
/// test of a success inlined, the rest out of line.
#[inline(always)]
fn again_with_our_fds(ret: c_int, entry: i32, call: impl Fn() -> c_int) -> c_int {
    if ret >= 0 {
        return ret;
    }
    again_if_out_of_fds(ret, entry, &call)
}

/// [`again_with_our_fds`] after a failure.
#[cold]
#[inline(never)]
fn again_if_out_of_fds(ret: c_int, entry: i32, call: &dyn Fn() -> c_int) -> c_int {
    if errno() != libc::EMFILE || !track::out_of_fds() {
        return ret;
    }
    set_errno(entry);
    call()
}

/// Passes bind(2) through (a server's policy decision waits for listen(), when the program is
/// known to be a server).
///
/// # Safety
/// Called by C code exactly as bind(2).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    // Without the debug lines, bind is the real call alone: no guard needed.
    if config::loaded().is_some_and(|c| c.debug < 2) {
        // SAFETY: the caller's arguments, passed on unchanged.
        return unsafe { real::bind(fd, addr, len) };
    }
    // SAFETY: as above.
    unsafe { bind_guarded(fd, addr, len) }
}

/// [`bind`] with the debug lines (or before the configuration is loaded), out of line: the
/// hook's fast path then saves no register and its real call is a jump (measured by bench/run's
/// hooks, issue 23).
///
/// # Safety
/// As bind(2).
#[inline(never)]
unsafe extern "C" fn bind_guarded(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    hook(
        // SAFETY: the caller's arguments, passed on unchanged.
        || unsafe { real::bind(fd, addr, len) },
        |out| {
            // SAFETY: as above.
            let ret = out.record(unsafe { real::bind(fd, addr, len) });
            if config::get().debug >= 2 {
                let e = errno();
                bump(&COUNTS.binds);
                line!("bind fd {fd}: {}", outcome(ret, e));
                set_errno(e);
            }
            ret
        },
    )
}

/// connect(2), after the policy's decision for a client (see [`policy::at_connect`]), telling
/// the runtime how it went.
///
/// # Safety
/// Called by C code exactly as connect(2).
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    hook(
        // SAFETY: the caller's arguments, passed on unchanged.
        || unsafe { real::connect(fd, addr, len) },
        |out| {
            // SAFETY: the caller's connect arguments.
            unsafe { policy::at_connect(fd, addr, len) };
            // SAFETY: as above.
            let ret = out.record(unsafe { real::connect(fd, addr, len) });
            let after = errno();
            let e = if ret == 0 { 0 } else { after };
            // Only once the kernel took the address (it read all `len` bytes of it): the remote
            // matters only for an established connection, and a call the kernel refused (EFAULT,
            // EINVAL for a length beyond sockaddr_storage) may have been given memory that is not
            // there.
            let took = ret == 0 || (after == libc::EISCONN);
            // SAFETY: the kernel just read the caller's `len` bytes at `addr`.
            let remote = took.then(|| unsafe { sock::to_std(addr, len) }).flatten();
            track::connect_returned(fd, ret, e, remote);
            if config::get().debug >= 2 {
                bump(&COUNTS.connects);
                line!("connect fd {fd}: {}", outcome(ret, e));
            }
            set_errno(after);
            ret
        },
    )
}

/// listen(2), after the policy's decision for a server socket (see [`policy::at_listen`]).
///
/// # Safety
/// Called by C code exactly as listen(2).
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    hook(
        || real::listen(fd, backlog),
        |out| {
            if let Some(e) = policy::at_listen(fd) {
                set_errno(e);
                return out.record(-1);
            }
            let ret = out.record(real::listen(fd, backlog));
            if ret == 0 {
                let e = errno();
                track::listening(fd);
                set_errno(e);
            }
            ret
        },
    )
}

/// After accept returned `fd` from `listener`: the news for the runtime, which reads the peer's
/// address from the new socket itself when it needs it. The caller's `addr` and `addrlen` are never
/// read: the kernel ignores `addrlen` when `addr` is null (a program may pass anything there), and
/// reading `*addrlen` before the call would fault where the kernel returns EFAULT.
fn accepted(listener: c_int, fd: c_int) {
    let e = errno();
    if fd >= 0 {
        track::accepted(listener, fd, convert::lasting_refusal);
    }
    if config::get().debug >= 2 {
        line!("accept fd {listener}: {}", outcome(fd, e));
    }
    set_errno(e);
}

/// accept(2), telling the runtime about each connection.
///
/// # Safety
/// Called by C code exactly as accept(2).
#[no_mangle]
pub unsafe extern "C" fn accept(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut socklen_t,
) -> c_int {
    hook(
        // SAFETY: the caller's arguments, passed on unchanged.
        || unsafe { real::accept(fd, addr, len) },
        |out| {
            let entry = out.entry();
            // SAFETY: the caller's arguments, passed on unchanged: C calls this hook exactly as
            // accept(2), so `addr` and `len` meet the real accept's contract.
            let ret = out.record(unsafe { real::accept(fd, addr, len) });
            let ret = again_with_our_fds(ret, entry, || {
                // SAFETY: as above: the same arguments, tried again.
                out.record(unsafe { real::accept(fd, addr, len) })
            });
            accepted(fd, ret);
            ret
        },
    )
}

/// accept4(2), likewise.
///
/// # Safety
/// Called by C code exactly as accept4(2).
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    hook(
        // SAFETY: the caller's arguments, passed on unchanged.
        || unsafe { real::accept4_real(fd, addr, len, flags) },
        |out| {
            let entry = out.entry();
            // SAFETY: the caller's arguments, passed on unchanged: C calls this hook exactly as
            // accept4(2), so `addr` and `len` meet the real accept4's contract.
            let ret = out.record(unsafe { real::accept4_real(fd, addr, len, flags) });
            let ret = again_with_our_fds(ret, entry, || {
                // SAFETY: as above: the same arguments, tried again.
                out.record(unsafe { real::accept4_real(fd, addr, len, flags) })
            });
            accepted(fd, ret);
            ret
        },
    )
}

/// getsockopt(2), except that SO_DOMAIN and SO_PROTOCOL of an SMC socket answer as for the TCP
/// socket the program asked for; SO_ERROR tells the runtime how a nonblocking connect ended.
///
/// # Safety
/// Called by C code exactly as getsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // Only three SOL_SOCKET reads are the shim's business: every other read is the real call
    // alone, after two compares (errno is the real call's own).
    if level != libc::SOL_SOCKET
        || !matches!(name, libc::SO_DOMAIN | libc::SO_PROTOCOL | libc::SO_ERROR)
    {
        // SAFETY: the caller's arguments, passed on unchanged.
        return unsafe { real::getsockopt(fd, level, name, val, len) };
    }
    // SAFETY: as above.
    unsafe { socket_option(fd, name, val, len) }
}

/// [`getsockopt`] of SOL_SOCKET's SO_DOMAIN, SO_PROTOCOL or SO_ERROR, out of line. The real call
/// is made first and outside the guard (it can neither panic nor re-enter); only a successful
/// read that may be an SMC socket's identity (`convert::may_be_smc_identity`), or one of SO_ERROR,
/// goes on, when not inside a hook, to the guarded path.
///
/// Of the C ABI, so that the hook's call is a jump.
///
/// # Safety
/// As getsockopt(2), at level SOL_SOCKET.
#[inline(never)]
unsafe extern "C" fn socket_option(
    fd: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    let ret = unsafe { real::getsockopt(fd, libc::SOL_SOCKET, name, val, len) };
    if ret != 0 || val.is_null() || len.is_null() {
        return ret;
    }
    // SAFETY: after a successful call, `*len` bytes of `val` are the value (`len` was checked).
    let value = unsafe {
        (*len as usize >= std::mem::size_of::<c_int>())
            .then(|| val.cast::<c_int>().read_unaligned())
    };
    let Some(value) = value else { return ret };
    if name != libc::SO_ERROR && !convert::may_be_smc_identity(name, value) || guard::nested() {
        return ret;
    }
    // SAFETY: `val` holds the value read above, an int (`*len` was checked).
    unsafe { socket_option_news(fd, name, value, val) };
    ret
}

/// The guarded part of [`socket_option`] for `value`, read from `val`: SO_ERROR's news for the
/// runtime, or an SMC socket's identity rewritten as TCP's in `val`. errno is the caller's.
///
/// # Safety
/// `val` holds an int that the kernel wrote, and may be written.
#[cold]
#[inline(never)]
unsafe fn socket_option_news(fd: c_int, name: c_int, value: c_int, val: *mut c_void) {
    let _ = hook(
        || 0,
        |out| {
            let e = out.entry();
            if name == libc::SO_ERROR {
                track::so_error_read(fd, value);
            } else if let Some(v) = convert::identity_as_tcp(fd, name, value) {
                // SAFETY: the kernel's answer is there: `*len` covers an int at `val` (checked by
                // the caller, before it was read).
                unsafe { val.cast::<c_int>().write_unaligned(v) };
            }
            set_errno(e);
            0
        },
    );
}

/// close(2), after the runtime took its last look at a connection it still had to classify
/// (one getsockopt on tracked sockets only; other fds cost one atomic load), and, for a socket made
/// SMC that still holds unsent bytes, SO_LINGER so that the kernel's last close waits for them
/// (see [`crate::drain::before_close`]: two getsockopt and an ioctl per SMC socket's close).
///
/// # Safety
/// Called by C code exactly as close(2).
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    // Files, pipes and sockets the shim never handled, most closes: nothing to do but the real
    // call (two atomic loads decide it, see `track::close_look`). What the first load read goes
    // on to the guarded path.
    match catch_unwind(|| track::close_look(fd)) {
        Ok(None) => real::close(fd),
        Ok(Some(seen)) => closing(fd, seen),
        Err(_) => closing(fd, fdtable::look(fd)),
    }
}

/// The close hook for a descriptor the runtime knows (its entry `seen` by the first look). Kept
/// out of line (in a function of the C ABI, so that the hook's call is a jump) so that the fast
/// path carries none of its set-up.
#[inline(never)]
extern "C" fn closing(fd: c_int, seen: Seen) -> c_int {
    hook(
        move || real::close(fd),
        |out| {
            before_close(fd, seen, out.entry());
            out.record_call(real::close(fd))
        },
    )
}

/// What every call that closes a descriptor the runtime knows does first, whichever call it is
/// (close, or dup2/dup3/close_range/closefrom closing it on the program's behalf), given the fd's
/// entry as `seen` a moment ago: the drain's SO_LINGER for an SMC socket with unsent bytes, then
/// the runtime's last look. errno is left as `entry`, the caller's (the runtime's look keeps it
/// itself). Inlined: close() is the hot caller.
#[inline(always)]
fn before_close(fd: c_int, seen: Seen, entry: i32) {
    if matches!(seen.entry(), Some(en) if en.kind == Kind::Smc) {
        crate::drain::before_close(fd);
        set_errno(entry);
    }
    track::closing(fd, seen);
}

/// Whether `fd` is open (fcntl F_GETFD, which touches nothing). errno is the caller's to keep.
fn is_open(fd: c_int) -> bool {
    // SAFETY: F_GETFD takes no argument and only reads the descriptor's flags.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// dup2(2) and dup3(2) close `new` before they put the duplicate there: for a descriptor the
/// runtime knows, that close is prepared as [`close`]'s (an SMC socket with unsent bytes keeps
/// them, the connection gets its last look, the runtime's own file steps aside). The JDK closes a
/// socket that another thread is blocked on this way (its "pre-close" dup2s a dead socket over
/// the fd first). Nothing is done when `new` is not closed: `old == new`, or `old` is not open
/// (the call fails with EBADF and leaves `new` as it was).
fn dup_onto(old: c_int, new: c_int, call: impl Fn() -> c_int) -> c_int {
    if old == new || catch_unwind(|| track::close_is_untouched(new)).unwrap_or(false) {
        return call();
    }
    replacing(old, new, &call)
}

/// The slow path of [`dup_onto`], out of line.
#[inline(never)]
fn replacing(old: c_int, new: c_int, call: &dyn Fn() -> c_int) -> c_int {
    hook(call, |out| {
        let e = out.entry();
        if is_open(old) {
            before_close(new, fdtable::look(new), e);
        }
        set_errno(e);
        out.record(call())
    })
}

/// dup2(2); see [`dup_onto`].
#[no_mangle]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    dup_onto(old, new, || real::dup2(old, new))
}

/// dup3(2); see [`dup_onto`].
#[no_mangle]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_onto(old, new, || real::dup3(old, new, flags))
}

/// close_range(2): each descriptor in the range that the runtime knows is prepared as [`close`]
/// prepares it, then the real call. A range that is only marked close-on-exec
/// (`CLOSE_RANGE_CLOEXEC`) closes nothing now and is passed through. With `CLOSE_RANGE_UNSHARE`
/// the calling thread closes them in a private copy of the descriptor table (a child about to
/// exec, say), and the process's other threads keep theirs: only the runtime's own files leave
/// the range, and its sockets are left as they are.
#[no_mangle]
pub extern "C" fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    hook(
        || real::close_range(first, last, flags),
        |out| {
            if flags & CLOSE_RANGE_CLOEXEC == 0 && first <= last {
                let e = out.entry();
                if flags & CLOSE_RANGE_UNSHARE == 0 {
                    before_closing_from(first, last, e);
                } else if let Ok(f) = c_int::try_from(first) {
                    track::closing_range(f, c_int::try_from(last).unwrap_or(c_int::MAX));
                }
                set_errno(e);
            }
            out.record(real::close_range(first, last, flags))
        },
    )
}

/// closefrom(3) (glibc 2.34+, which closes through its own internal close_range, out of the
/// shim's sight): the descriptors from `first` up are prepared as [`close`] prepares them, then
/// the real call.
#[no_mangle]
pub extern "C" fn closefrom(first: c_int) {
    let first = libc::c_uint::try_from(first).unwrap_or(0);
    let _ = hook(
        || {
            real::closefrom(first);
            0
        },
        |out| {
            let e = out.entry();
            before_closing_from(first, libc::c_uint::MAX, e);
            set_errno(e);
            real::closefrom(first);
            out.record(0)
        },
    );
}

/// `CLOSE_RANGE_CLOEXEC` from linux/close_range.h (libc 0.2 has no constant for it).
const CLOSE_RANGE_CLOEXEC: c_int = 1 << 2;
/// `CLOSE_RANGE_UNSHARE` from linux/close_range.h.
const CLOSE_RANGE_UNSHARE: c_int = 1 << 1;

/// Prepares every descriptor from `first` to `last` that the runtime knows for its close: the
/// runtime's own files leave the range, then each socket in its table is prepared as [`close`]
/// prepares it. The table ends at the highest fd it ever held, so a range up to `~0` costs one
/// atomic load per fd below that. `entry` is the caller's errno, as in [`before_close`].
fn before_closing_from(first: libc::c_uint, last: libc::c_uint, entry: i32) {
    let Ok(first) = c_int::try_from(first) else {
        return;
    };
    let last = c_int::try_from(last).unwrap_or(c_int::MAX);
    track::closing_range(first, last);
    for fd in first
        ..c_int::try_from(fdtable::end())
            .unwrap_or(c_int::MAX)
            .min(last.saturating_add(1))
    {
        let seen = fdtable::look(fd);
        if seen.is_entry() {
            before_close(fd, seen, entry);
        }
    }
}

/// _exit(2): the process ends now, without the exit handlers, and the kernel drops an SMC
/// socket's unsent bytes as it closes it (see [`crate::drain::before_exit`]): they are let out
/// first, as TCP would have sent them. A forked child that leaves this way (a server's worker, a
/// snapshot writer) waits only for the sockets it made or accepted itself.
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    before_ending();
    real::exit_now(status)
}

/// _Exit(2): the same as [`_exit`].
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    before_ending();
    real::exit_now(status)
}

/// What `_exit` does before the process ends, as a hook (not when re-entered, a panic caught).
fn before_ending() {
    let _ = hook(
        || 0,
        |_| {
            crate::drain::before_exit();
            0
        },
    );
}

/// pthread_exit(3). When the program's main thread leaves this way while other threads go on,
/// the runtime's sidecar must neither keep the process alive after the program's last thread
/// has ended (glibc ends a process when its last thread ends, and the sidecar is a thread) nor
/// keep a descriptor table that goes with the main thread: see
/// `smcrun_runtime::sidecar::main_thread_leaving`. Other threads go straight to the real call.
///
/// # Safety
/// Called by C code exactly as pthread_exit(3). `C-unwind`: glibc unwinds the calling thread's
/// stack through this frame, which holds nothing to drop when the real function is called.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_exit(retval: *mut c_void) -> ! {
    // SAFETY: gettid and getpid take no argument.
    if unsafe { libc::gettid() == libc::getpid() } {
        let _ = catch_unwind(smcrun_runtime::sidecar::main_thread_leaving);
    }
    real::pthread_exit(retval)
}

/// unshare(2). The flags the kernel grants only to a process with one thread (a user namespace,
/// `CLONE_THREAD`, `CLONE_VM`, `CLONE_SIGHAND`) are asked for with the runtime's threads stopped
/// (`smcrun_runtime::alone`): under the shim they would otherwise fail with EINVAL. Other flags go
/// straight to the real call.
#[no_mangle]
pub extern "C" fn unshare(flags: c_int) -> c_int {
    if !smcrun_runtime::alone::unshare_needs_alone(flags) {
        return real::unshare(flags);
    }
    alone(&|| real::unshare(flags))
}

/// setns(2): entering a user, mount or time namespace, which the kernel grants only to a process
/// with one thread, is done with the runtime's threads stopped, as in [`unshare`].
#[no_mangle]
pub extern "C" fn setns(fd: c_int, nstype: c_int) -> c_int {
    if !smcrun_runtime::alone::setns_needs_alone(fd, nstype) {
        return real::setns(fd, nstype);
    }
    alone(&|| real::setns(fd, nstype))
}

/// A call made with the runtime's threads stopped, as a hook (the real call alone when
/// re-entered; a panic caught, and the call never made twice).
#[cold]
#[inline(never)]
fn alone(call: &dyn Fn() -> c_int) -> c_int {
    hook(call, |out| {
        smcrun_runtime::alone::around(|| out.record(call()))
    })
}

/// shutdown(2). SHUT_WR or SHUT_RDWR on a socket that runs over SMC with unsent bytes is made once
/// its send buffer has gone to the peer, in the background where it can be (see [`crate::drain`]):
/// the kernel's SMC drops what is still there after 2 s, where TCP sends it all before its FIN.
#[no_mangle]
pub extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    hook(
        || real::shutdown(fd, how),
        |out| {
            let e = out.entry();
            let deferred = crate::drain::before_shutdown(fd, how);
            set_errno(e);
            if deferred {
                return out.record(0);
            }
            out.record(real::shutdown(fd, how))
        },
    )
}

/// The uid-changing calls: the runtime opens this process's report file first, while it can still
/// create it in the run directory of the user who started the program; then the real call.
fn uid_change(call: SetUid) -> c_int {
    hook(
        || real::set_uid(call),
        |out| {
            let e = out.entry();
            track::before_uid_change();
            set_errno(e);
            out.record(real::set_uid(call))
        },
    )
}

/// setuid(2); see [`uid_change`].
#[no_mangle]
pub extern "C" fn setuid(uid: libc::uid_t) -> c_int {
    uid_change(SetUid::Uid(uid))
}

/// seteuid(2); see [`uid_change`].
#[no_mangle]
pub extern "C" fn seteuid(euid: libc::uid_t) -> c_int {
    uid_change(SetUid::Euid(euid))
}

/// setreuid(2); see [`uid_change`].
#[no_mangle]
pub extern "C" fn setreuid(ruid: libc::uid_t, euid: libc::uid_t) -> c_int {
    uid_change(SetUid::Reuid(ruid, euid))
}

/// setresuid(2); see [`uid_change`].
#[no_mangle]
pub extern "C" fn setresuid(ruid: libc::uid_t, euid: libc::uid_t, suid: libc::uid_t) -> c_int {
    uid_change(SetUid::Resuid(ruid, euid, suid))
}

/// The signal-mask calls: the real call, then, when the program set a new mask, the runtime
/// records it (one system call), so that a thread whose normal mask blocks signals (a daemon that
/// leaves them to a signal thread) is not taken for a signal handler (`smcrun_runtime::sigmask`).
fn sigmask(
    call: real::MaskCall,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    hook(
        // SAFETY: the caller's arguments, passed on unchanged.
        || unsafe { real::sigmask(call, how, set, old) },
        |out| {
            // SAFETY: as above.
            let r = out.record(unsafe { real::sigmask(call, how, set, old) });
            if r == 0 && !set.is_null() {
                let e = errno();
                smcrun_runtime::sigmask::program_set();
                set_errno(e);
            }
            r
        },
    )
}

/// pthread_sigmask(3); see [`sigmask`].
///
/// # Safety
/// Called by C code exactly as pthread_sigmask(3).
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    sigmask(real::MaskCall::Pthread, how, set, old)
}

/// sigprocmask(2); see [`sigmask`].
///
/// # Safety
/// Called by C code exactly as sigprocmask(2).
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    sigmask(real::MaskCall::Proc, how, set, old)
}

/// Not a hook: lets a program that knows it runs under smcrun wait, for at most `limit_ms`
/// milliseconds, until the runtime classified its open connections (see
/// `smcrun_runtime::sidecar::settle`); returns how many still wait. `smcrun demo` calls it through
/// dlsym, so that its exit report counts its short connections with their mode.
#[no_mangle]
pub extern "C" fn smcrun_settle(limit_ms: libc::c_uint) -> c_int {
    hook(
        || 0,
        |out| {
            let e = out.entry();
            let n =
                smcrun_runtime::sidecar::settle(std::time::Duration::from_millis(limit_ms.into()));
            set_errno(e);
            c_int::try_from(n).unwrap_or(c_int::MAX)
        },
    )
}
