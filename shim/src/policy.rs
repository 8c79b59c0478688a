//! The policy at the moment it can decide: connect() for a client, listen() for a server.
//!
//! Sockets are made SMC whenever the policy could want SMC for them (see
//! `ProgramPolicy::likely`), so the only change ever needed is SMC to TCP. The kernel has a lever
//! for it that keeps the same socket and fd: on an SMC socket still in its initial state, with no
//! nonblocking connect pending, setting a TCP_FASTOPEN option switches it to TCP fallback (reason
//! 0x03060000, OPTUNSUPP). A queue length of 0 leaves TCP's own behaviour as it was. Options the
//! program set before stay set, since they live on the internal TCP socket, and nothing is
//! re-registered anywhere (epoll, dup'ed fds, children), since the fd and its file are unchanged.

use crate::config;
use crate::convert::tell;
use crate::guard::{errno, set_errno};
use crate::log::line;
use crate::tracked;
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
    decide(fd, Role::Client, local, remote);
}

/// Turns `fd` to TCP when the policy says so for a server on its bound address.
pub fn at_listen(fd: c_int) {
    if tracked::is_smc(fd) {
        decide(fd, Role::Server, local_address(fd), None);
    }
}

fn decide(fd: c_int, role: Role, local: Option<SocketAddr>, remote: Option<SocketAddr>) {
    let cfg = config::get();
    if cfg.policy.fixed() == Some(Action::Smc) {
        return;
    }
    let d = cfg.policy.decide(role, local, remote);
    if d.action == Action::Smc {
        return;
    }
    let saved = errno();
    let before = SocketLevel::read(fd);
    let zero: c_int = 0;
    // SAFETY: setsockopt on the caller's fd with a live c_int; raw system call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_setsockopt,
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN,
            &zero as *const c_int,
            std::mem::size_of::<c_int>() as socklen_t,
        )
    };
    let failed = (r != 0).then(errno);
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
        let rule = d.rule.map(|i| i as i64 + 1).unwrap_or(0);
        match failed {
            None if rule > 0 => line!("{} fd {fd}: TCP by policy (rule {rule})", role.as_str()),
            None => line!("{} fd {fd}: TCP by policy (default)", role.as_str()),
            Some(e) => line!(
                "{} fd {fd}: the policy says TCP but the socket cannot switch ({}); it stays SMC",
                role.as_str(),
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
