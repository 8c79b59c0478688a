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
use crate::debug::line;
use libc::{c_int, socklen_t};
use smcrun_policy::{Action, Role};
use smcrun_runtime::fdtable::{self, Kind, Phase};
use smcrun_runtime::track;
use smcrun_sys::{sock, Errno};
use std::net::SocketAddr;

/// Whether `fd` holds an SMC socket that has not connected or listened yet: the only sockets the
/// policy may still turn to TCP.
fn is_fresh_smc(fd: c_int) -> bool {
    fdtable::get(fd).is_some_and(|e| e.kind == Kind::Smc && e.phase == Phase::Open)
}

/// Turns `fd` to TCP when the policy says so for a connection to `addr`.
///
/// # Safety
/// `addr`/`len` are the caller's connect arguments.
pub unsafe fn at_connect(fd: c_int, addr: *const libc::sockaddr, len: socklen_t) {
    if !is_fresh_smc(fd) {
        return;
    }
    // The kernel refuses a longer address (EINVAL) without reading it: so is it not read here.
    if len as usize > std::mem::size_of::<libc::sockaddr_storage>() {
        return;
    }
    // SAFETY: the caller's connect arguments: `len` readable bytes at `addr`, as the kernel is
    // about to read them (the policy must decide before the connect).
    let remote = unsafe { sock::to_std(addr, len) };
    if remote.is_none() {
        return; // AF_UNSPEC (disconnect) or a bad address: the kernel will answer
    }
    let local = if config::get().policy.uses_local() {
        sock::local_addr(fd).ok().flatten()
    } else {
        None
    };
    switch_client(fd, local, remote);
}

/// Replaces `fd` by a TCP listener when the policy says so for a server on its bound address.
/// Returns the errno to fail listen() with, in the one case where the replacement lost the bound
/// address (another process took the port in between).
pub fn at_listen(fd: c_int) -> Option<c_int> {
    if !is_fresh_smc(fd) {
        return None;
    }
    let cfg = config::get();
    let local = sock::local_addr(fd).ok().flatten();
    let d = match cfg.policy.fixed() {
        Some(Action::Smc) => return None,
        _ => cfg.policy.decide(Role::Server, local, None),
    };
    if d.action == Action::Smc {
        return None;
    }
    match replace_with_tcp(fd, local) {
        Ok(()) => {
            track::policy_tcp(fd);
            if cfg.debug >= 1 {
                line!("server fd {fd}: TCP by policy ({})", rule_label(&d));
            }
            None
        }
        Err(Replace::Kept(e)) => {
            if cfg.debug >= 1 {
                line!(
                    "server fd {fd}: the policy says TCP but the listener cannot be replaced ({e}); it stays SMC"
                );
            }
            None
        }
        Err(Replace::Lost(e)) => {
            line!(
                "warning: server fd {fd}: replacing the listener with a TCP one by policy lost its address ({e})"
            );
            Some(e.0)
        }
    }
}

/// How a listener replacement failed.
enum Replace {
    /// Nothing changed: the SMC socket is still there.
    Kept(Errno),
    /// The fd holds the new TCP socket, but it could not be bound to the old address.
    Lost(Errno),
}

/// Puts a fresh TCP socket in place of the SMC socket `fd`: same family, flags, socket options and
/// bound address.
fn replace_with_tcp(fd: c_int, local: Option<SocketAddr>) -> Result<(), Replace> {
    let family = match local {
        Some(SocketAddr::V6(_)) => libc::AF_INET6,
        Some(SocketAddr::V4(_)) => libc::AF_INET,
        None => return Err(Replace::Kept(Errno(libc::ENOTSOCK))),
    };
    let fl = sock::fcntl_get(fd, libc::F_GETFL).unwrap_or(0);
    let fdfl = sock::fcntl_get(fd, libc::F_GETFD).unwrap_or(0);
    let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if fl & libc::O_NONBLOCK != 0 {
        ty |= libc::SOCK_NONBLOCK;
    }
    // The raw system call, not the shim's own socket hook.
    let new = sock::socket(family, ty, libc::IPPROTO_TCP).map_err(Replace::Kept)?;
    SocketLevel::read(fd).carry_over(new);
    for (level, name) in [
        (libc::IPPROTO_TCP, libc::TCP_NODELAY),
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
    ] {
        if let Ok(v) = sock::get_int(fd, level, name) {
            if sock::get_int(new, level, name) != Ok(v) {
                let _ = sock::set_int(new, level, name, v);
            }
        }
    }
    if family == libc::AF_INET6 {
        if let Ok(v) = sock::get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) {
            let _ = sock::set_int(new, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, v);
        }
    }
    let cloexec = if fdfl & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    // Our new socket takes the caller's fd number (closing the SMC socket and freeing its port);
    // then our copy is closed.
    let r = sock::dup3(new, fd, cloexec);
    let _ = sock::close(new);
    r.map_err(Replace::Kept)?;
    let Some(addr) = local.filter(|a| a.port() != 0) else {
        return Ok(()); // never bound: listen() binds a port itself
    };
    sock::bind(fd, addr).map_err(Replace::Lost)
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
    let before = SocketLevel::read(fd);
    let failed = sock::set_int(fd, libc::IPPROTO_TCP, libc::TCP_FASTOPEN, 0).err();
    if failed.is_none() {
        before.carry_over(fd);
        // Only once per socket: a second connect() after a failure finds it TCP already.
        track::policy_tcp(fd);
    }
    if cfg.debug >= 1 {
        match failed {
            None => line!("client fd {fd}: TCP by policy ({})", rule_label(&d)),
            Some(e) => line!(
                "client fd {fd}: the policy says TCP but the socket cannot switch ({e}); it stays SMC"
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
        let len = sock::get_bytes(fd, libc::SOL_SOCKET, name, &mut buf).ok()?;
        Some((buf, len as socklen_t))
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
            // The bytes getsockopt returned for the same option; a refusal (e.g. SO_MARK without
            // CAP_NET_ADMIN) leaves the option as it was.
            let _ = sock::set_bytes(fd, libc::SOL_SOCKET, name, &bytes[..*len as usize]);
        }
    }
}
