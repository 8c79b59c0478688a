//! The policy at the moment it can decide: connect() for a client, listen() for a server.
//!
//! Sockets are made SMC whenever the policy could want SMC for them (see
//! `ProgramPolicy::likely`), so the only change ever needed is SMC to TCP.
//!
//! A client uses the kernel's lever, which keeps the same socket and fd: on an SMC socket still in
//! its initial state, with no nonblocking connect pending, setting a TCP_FASTOPEN option switches
//! it to TCP fallback (reason 0x03060000, OPTUNSUPP); a queue length of 0 leaves TCP's own
//! behaviour as it was. Nothing needs re-registering (epoll, dup'ed fds, children): the fd and its
//! file are unchanged. SOL_SOCKET options that lived on the SMC socket are carried over.
//!
//! A listener cannot use the lever: on Linux 6.12 the connections accepted from a listener that
//! fell back before listen() inherit its fallback wake-up callbacks without the SMC socket they
//! need, so a reader blocked on one never wakes (seen in the VM test bed). So a listener the policy
//! wants as TCP is replaced before listen(): a new TCP socket with the same flags and options takes
//! the fd number (dup3) and is bound to the same address.

use crate::config;
use crate::convert::tell;
use crate::guard::{errno, set_errno};
use crate::log::line;
use crate::{real, tracked};
use libc::{c_int, socklen_t};
use smcrun_policy::{Action, Role};
use smcrun_telemetry::sidecar::{sockaddr_to_std, Event};
use std::net::SocketAddr;

/// Turns `fd` to TCP when the policy says so for a connection to `addr`.
///
/// # Safety
/// `addr`/`len` are the caller's connect arguments.
pub unsafe fn at_connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) {
    if !tracked::is_smc(fd) {
        return;
    }
    let remote = sockaddr_to_std(addr, len);
    if remote.is_none() {
        return; // AF_UNSPEC (disconnect) or a bad address: the kernel will answer
    }
    let local = if config::get().policy.uses_local() {
        local_address(fd)
    } else {
        None
    };
    switch_client(fd, local, remote);
}

/// Replaces `fd` by a TCP listener when the policy says so for a server on its bound address.
/// Returns the errno to fail listen() with, in the one case where the replacement lost the bound
/// address (another process took the port in between).
pub fn at_listen(fd: c_int) -> Option<c_int> {
    if !tracked::is_smc(fd) {
        return None;
    }
    let cfg = config::get();
    let local = local_address(fd);
    let d = match cfg.policy.fixed() {
        Some(Action::Smc) => return None,
        _ => cfg.policy.decide(Role::Server, local, None),
    };
    if d.action == Action::Smc {
        return None;
    }
    let saved = errno();
    let result = replace_with_tcp(fd, local);
    set_errno(saved);
    match result {
        Ok(()) => {
            tracked::mark(fd, false);
            tell(Event::PolicyTcp { fd });
            if cfg.debug >= 1 {
                line!("server fd {fd}: TCP by policy ({})", rule_label(&d));
            }
            None
        }
        Err(Replace::Kept(e)) => {
            if cfg.debug >= 1 {
                line!(
                    "server fd {fd}: the policy says TCP but the listener cannot be replaced ({}); it stays SMC",
                    crate::log::errno_name(e)
                );
            }
            None
        }
        Err(Replace::Lost(e)) => {
            line!(
                "warning: server fd {fd}: replacing the listener with a TCP one by policy lost its address ({})",
                crate::log::errno_name(e)
            );
            Some(e)
        }
    }
}

/// How a listener replacement failed.
enum Replace {
    /// Nothing changed: the SMC socket is still there.
    Kept(c_int),
    /// The fd holds the new TCP socket, but it could not be bound to the old address.
    Lost(c_int),
}

/// A raw system call returning an int, errno on failure.
fn sys(r: libc::c_long) -> Result<c_int, c_int> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as c_int)
    }
}

fn get_int(fd: c_int, level: c_int, name: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut l = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: getsockopt into a live c_int; raw system call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getsockopt,
            fd,
            level,
            name,
            &mut v as *mut c_int,
            &mut l as *mut socklen_t,
        )
    };
    (r == 0).then_some(v)
}

/// Puts a fresh TCP socket in place of the SMC socket `fd`: same family, flags, socket options and
/// bound address.
fn replace_with_tcp(fd: c_int, local: Option<SocketAddr>) -> Result<(), Replace> {
    let family = match local {
        Some(SocketAddr::V6(_)) => libc::AF_INET6,
        Some(SocketAddr::V4(_)) => libc::AF_INET,
        None => return Err(Replace::Kept(libc::ENOTSOCK)),
    };
    // SAFETY: fcntl queries on the caller's fd.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
        ty |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: raw socket system call (not through the shim's own hook).
    let new = sys(unsafe { libc::syscall(libc::SYS_socket, family, ty, libc::IPPROTO_TCP) })
        .map_err(Replace::Kept)?;
    SocketLevel::read(fd).carry_over(new);
    for (level, name) in [
        (libc::IPPROTO_TCP, libc::TCP_NODELAY),
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
    ] {
        if let Some(v) = get_int(fd, level, name) {
            if get_int(new, level, name) != Some(v) {
                real::setsockopt_int(new, level, name, v);
            }
        }
    }
    if family == libc::AF_INET6 {
        if let Some(v) = get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) {
            real::setsockopt_int(new, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, v);
        }
    }
    let cloexec = if fdfl >= 0 && fdfl & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    // SAFETY: dup3 of our new socket onto the caller's fd (closing the SMC socket and freeing its
    // port), then closing our copy; raw system calls.
    let r = sys(unsafe { libc::syscall(libc::SYS_dup3, new, fd, cloexec) });
    // SAFETY: `new` is ours.
    unsafe { libc::syscall(libc::SYS_close, new) };
    r.map_err(Replace::Kept)?;
    let Some(addr) = local.filter(|a| a.port() != 0) else {
        return Ok(()); // never bound: listen() binds a port itself
    };
    let (ss, len) = to_sockaddr(addr);
    // SAFETY: bind with a sockaddr built for the address's family; raw system call.
    sys(unsafe {
        libc::syscall(
            libc::SYS_bind,
            fd,
            &ss as *const libc::sockaddr_storage,
            len,
        )
    })
    .map(|_| ())
    .map_err(Replace::Lost)
}

fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid; the variant of the address's family is filled.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        match addr {
            SocketAddr::V4(a) => {
                let sin =
                    &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                (ss, std::mem::size_of::<libc::sockaddr_in>() as socklen_t)
            }
            SocketAddr::V6(a) => {
                let sin6 =
                    &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_flowinfo = a.flowinfo();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                sin6.sin6_scope_id = a.scope_id();
                (ss, std::mem::size_of::<libc::sockaddr_in6>() as socklen_t)
            }
        }
    }
}

/// How a decision names its rule in debug lines.
fn rule_label(d: &smcrun_policy::Decision) -> String {
    match d.rule {
        Some(i) => format!("rule {}", i + 1),
        None => "the default".to_string(),
    }
}

/// Turns client socket `fd` to TCP with the kernel's lever when the policy says so.
fn switch_client(fd: c_int, local: Option<SocketAddr>, remote: Option<SocketAddr>) {
    let cfg = config::get();
    if cfg.policy.fixed() == Some(Action::Smc) {
        return;
    }
    let d = cfg.policy.decide(Role::Client, local, remote);
    if d.action == Action::Smc {
        return;
    }
    let saved = errno();
    let before = SocketLevel::read(fd);
    let failed =
        (real::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_FASTOPEN, 0) != 0).then(errno);
    if failed.is_none() {
        before.carry_over(fd);
    }
    set_errno(saved);
    // Only once per socket: a second connect() after a failure finds it TCP already.
    tracked::mark(fd, false);
    if failed.is_none() {
        tell(Event::PolicyTcp { fd });
    }
    if cfg.debug >= 1 {
        match failed {
            None => line!("client fd {fd}: TCP by policy ({})", rule_label(&d)),
            Some(e) => line!(
                "client fd {fd}: the policy says TCP but the socket cannot switch ({}); it stays SMC",
                crate::log::errno_name(e)
            ),
        }
    }
}

/// SOL_SOCKET options that live on the SMC socket itself. After the switch the program's fd reaches
/// the internal TCP socket, which the kernel only brings in line with these at an SMC connect(), a
/// path the switched socket no longer takes; so the shim carries over the ones whose value differs.
/// Buffer sizes are left alone: setting one would turn off TCP's buffer autotuning.
const CARRIED: [c_int; 10] = [
    libc::SO_KEEPALIVE,
    libc::SO_REUSEADDR,
    libc::SO_REUSEPORT,
    libc::SO_BROADCAST,
    libc::SO_OOBINLINE,
    libc::SO_PRIORITY,
    libc::SO_MARK,
    libc::SO_LINGER,
    libc::SO_RCVTIMEO,
    libc::SO_SNDTIMEO,
];

/// The values of [`CARRIED`] on one socket, as raw bytes (the largest is a `struct timeval`).
struct SocketLevel {
    values: [Option<([u8; 16], socklen_t)>; CARRIED.len()],
}

impl SocketLevel {
    fn get(fd: c_int, name: c_int) -> Option<([u8; 16], socklen_t)> {
        let mut buf = [0u8; 16];
        let mut len = buf.len() as socklen_t;
        // SAFETY: getsockopt into a 16-byte buffer whose length is passed; raw system call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_getsockopt,
                fd,
                libc::SOL_SOCKET,
                name,
                buf.as_mut_ptr(),
                &mut len as *mut socklen_t,
            )
        };
        (r == 0).then_some((buf, len))
    }

    fn read(fd: c_int) -> SocketLevel {
        let mut values = [None; CARRIED.len()];
        for (v, name) in values.iter_mut().zip(CARRIED) {
            *v = Self::get(fd, name);
        }
        SocketLevel { values }
    }

    /// Sets on `fd` (now the TCP socket) every option whose value differs from what was read.
    fn carry_over(&self, fd: c_int) {
        for (v, name) in self.values.iter().zip(CARRIED) {
            let Some((bytes, len)) = v else { continue };
            if Self::get(fd, name)
                .is_some_and(|now| now.0[..now.1 as usize] == bytes[..*len as usize])
            {
                continue;
            }
            // SAFETY: setsockopt with the bytes getsockopt returned for the same option; raw system
            // call; a refusal (e.g. SO_MARK without CAP_NET_ADMIN) leaves the option as it was.
            unsafe {
                libc::syscall(
                    libc::SYS_setsockopt,
                    fd,
                    libc::SOL_SOCKET,
                    name,
                    bytes.as_ptr(),
                    *len,
                );
            }
        }
    }
}

/// The socket's bound address (raw getsockname, errno kept).
fn local_address(fd: c_int) -> Option<SocketAddr> {
    // SAFETY: getsockname into a zeroed sockaddr_storage of the right length; raw system call.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        let saved = errno();
        let r = libc::syscall(
            libc::SYS_getsockname,
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len as *mut socklen_t,
        );
        set_errno(saved);
        if r != 0 {
            return None;
        }
        sockaddr_to_std(&ss as *const _ as *const libc::sockaddr, len)
    }
}
