//! The exported symbols, and nothing else: each one hands its arguments to the real function
//! through [`crate::guard::hook`], which keeps errno, blocks re-entry and catches panics.
//!
//! Only these functions are exported from the library (a cdylib exports nothing else).

use crate::config;
use crate::counters;
use crate::guard::hook;
use crate::log::line;
use crate::{convert, policy, real, tracked};
use libc::{c_int, c_void, socklen_t};
use smcrun_telemetry::sidecar::{self, sockaddr_to_std, Event};

/// Makes TCP sockets SMC sockets; see [`convert::socket`].
///
/// # Safety
/// Called by C code exactly as socket(2).
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    hook(
        || real::socket(domain, ty, protocol),
        |out| convert::socket(domain, ty, protocol, out),
    )
}

/// Passes bind(2) through (a server's policy decision waits for listen(), when the program is
/// known to be a server).
///
/// # Safety
/// Called by C code exactly as bind(2).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    hook(
        || real::bind(fd, addr, len),
        |out| {
            let ret = out.record(real::bind(fd, addr, len));
            if config::get().debug >= 2 {
                counters::bump(&counters::BINDS);
                line!("bind fd {fd}: {}", if ret == 0 { "ok" } else { "failed" });
            }
            ret
        },
    )
}

/// connect(2), after the policy's decision for a client (see [`policy::at_connect`]), telling
/// the sidecar about the connection.
///
/// # Safety
/// Called by C code exactly as connect(2).
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) -> c_int {
    hook(
        || real::connect(fd, addr, len),
        |out| {
            policy::at_connect(fd, addr, len);
            let ret = out.record(real::connect(fd, addr, len));
            if config::get().debug >= 2 {
                counters::bump(&counters::CONNECTS);
            }
            if (ret == 0 || crate::guard::errno() == libc::EINPROGRESS) && tracked::is_marked(fd) {
                let remote = sockaddr_to_std(addr, len);
                convert::tell(Event::Connected { fd, remote });
            }
            if config::get().debug >= 2 {
                let e = crate::guard::errno();
                line!(
                    "connect fd {fd}: {}",
                    if ret == 0 {
                        "ok"
                    } else {
                        crate::log::errno_name(e)
                    }
                );
            }
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
                crate::guard::set_errno(e);
                return out.record(-1);
            }
            out.record(real::listen(fd, backlog))
        },
    )
}

/// After a successful accept on a tracked listener: track the new connection and tell the sidecar.
///
/// # Safety
/// `addr`/`len` are the caller's accept arguments after the call returned `fd`.
unsafe fn accepted(listener: c_int, fd: c_int, addr: *mut libc::sockaddr, len: *mut socklen_t) {
    if config::get().debug >= 2 {
        let e = crate::guard::errno();
        line!(
            "accept fd {listener}: {}",
            if fd >= 0 {
                "ok"
            } else {
                crate::log::errno_name(e)
            }
        );
    }
    if fd >= 0 && tracked::is_marked(listener) && sidecar::active() {
        tracked::mark(fd, false);
        let remote = if len.is_null() {
            None
        } else {
            sockaddr_to_std(addr, *len)
        };
        convert::tell(Event::Accepted {
            listener,
            fd,
            remote,
        });
    }
}

/// accept(2), telling the sidecar about connections on TCP listeners.
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
        || real::accept(fd, addr, len),
        |out| {
            let ret = out.record(real::accept(fd, addr, len));
            accepted(fd, ret, addr, len);
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
        || real::accept4_real(fd, addr, len, flags),
        |out| {
            let ret = out.record(real::accept4_real(fd, addr, len, flags));
            accepted(fd, ret, addr, len);
            ret
        },
    )
}

/// getsockopt(2), except that SO_DOMAIN and SO_PROTOCOL of an SMC socket answer as for the TCP
/// socket the program asked for.
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
    hook(
        || real::getsockopt(fd, level, name, val, len),
        |out| {
            let ret = out.record(real::getsockopt(fd, level, name, val, len));
            if ret == 0
                && level == libc::SOL_SOCKET
                && (name == libc::SO_DOMAIN || name == libc::SO_PROTOCOL)
            {
                convert::mask_identity(fd, name, val, len);
            }
            ret
        },
    )
}
