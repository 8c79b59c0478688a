//! Making the SMC socket: which sockets qualify, how the kernel is asked, what is remembered, and
//! how a converted socket keeps telling the program the family and protocol it asked for.

use crate::config::{self, Config};
use crate::debug::{errno_name, line};
use crate::guard::{errno, set_errno, Outcome};
use crate::real;
use libc::c_int;
use smcrun_runtime::fdtable::{self, Kind};
use smcrun_runtime::track;
use smcrun_settings::{Fallback, Mode, Why};
use smcrun_sys::smc::{AF_SMC, IPPROTO_SMC, SMCPROTO_SMC, SMCPROTO_SMC6};
use smcrun_sys::sock;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The two ways to ask for an SMC socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmcKind {
    /// `socket(AF_INET/AF_INET6, type, IPPROTO_SMC)`.
    Inet,
    /// `socket(AF_SMC, type, SMCPROTO_SMC/SMCPROTO_SMC6)`.
    Smc,
}

impl SmcKind {
    fn label(self) -> &'static str {
        match self {
            SmcKind::Inet => "IPPROTO_SMC",
            SmcKind::Smc => "AF_SMC",
        }
    }
}

/// What this process has learnt about the kernel: nothing yet, which kind works, or that none
/// does (and why). Written with compare-and-swap from UNKNOWN only, so the first answer sticks
/// and racing threads that probed at the same time agree with it.
static LEARNT: AtomicU8 = AtomicU8::new(UNKNOWN);
/// With [`NONE_WORKS`]: the errno of the lasting refusal, and (above bit 32) its byte for the fd
/// table (`fdtable::why_errno`), computed once; one word, so that both come from the same
/// refusal when racing threads store different ones.
static NONE: AtomicU64 = AtomicU64::new(0);
const UNKNOWN: u8 = 0;
const INET_WORKS: u8 = 1;
const SMC_WORKS: u8 = 2;
const NONE_WORKS: u8 = 3;

/// The lasting refusal stored with [`NONE_WORKS`]: its errno, and that errno's byte for the fd
/// table.
#[inline(always)]
fn refusal() -> (i32, fdtable::Why) {
    let w = NONE.load(Ordering::Relaxed);
    (w as u32 as i32, (w >> 32) as fdtable::Why)
}

fn learn(state: u8) {
    let _ = LEARNT.compare_exchange(UNKNOWN, state, Ordering::AcqRel, Ordering::Acquire);
}

/// Whether `socket(domain, ty, protocol)` asks for a TCP socket, the only kind converted.
pub fn is_tcp(domain: c_int, ty: c_int, protocol: c_int) -> bool {
    (domain == libc::AF_INET || domain == libc::AF_INET6)
        && ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_STREAM
        && (protocol == 0 || protocol == libc::IPPROTO_TCP)
}

fn try_kind(kind: SmcKind, domain: c_int, ty: c_int) -> Result<c_int, i32> {
    let fd = match kind {
        SmcKind::Inet => real::socket(domain, ty, IPPROTO_SMC),
        SmcKind::Smc => {
            let proto = if domain == libc::AF_INET6 {
                SMCPROTO_SMC6
            } else {
                SMCPROTO_SMC
            };
            real::socket(AF_SMC, ty, proto)
        }
    };
    if fd >= 0 {
        Ok(fd)
    } else {
        Err(errno())
    }
}

/// Makes an SMC socket for a TCP request, in the configured mode, using what was learnt before.
/// Returns the fd and the kind, or the errno that decides the fallback.
#[inline]
fn smc_socket(mode: Mode, domain: c_int, ty: c_int) -> Result<(c_int, SmcKind), i32> {
    // this kernel refuses them for good (learnt from the first one): the fallback costs a load
    if LEARNT.load(Ordering::Acquire) == NONE_WORKS {
        return Err(refusal().0);
    }
    try_smc_socket(mode, domain, ty)
}

#[inline(never)]
fn try_smc_socket(mode: Mode, domain: c_int, ty: c_int) -> Result<(c_int, SmcKind), i32> {
    let candidates: &[SmcKind] = match LEARNT.load(Ordering::Acquire) {
        NONE_WORKS => return Err(refusal().0),
        INET_WORKS => &[SmcKind::Inet],
        SMC_WORKS => &[SmcKind::Smc],
        _ => match mode {
            Mode::Auto => &[SmcKind::Inet, SmcKind::Smc],
            Mode::Inet => &[SmcKind::Inet],
            Mode::Smc => &[SmcKind::Smc],
        },
    };
    let mut last = 0;
    for &kind in candidates {
        match try_kind(kind, domain, ty) {
            Ok(fd) => {
                learn(if kind == SmcKind::Inet {
                    INET_WORKS
                } else {
                    SMC_WORKS
                });
                return Ok((fd, kind));
            }
            Err(e) if Why::of(e).is_lasting() => last = e,
            // A passing shortage says nothing about the kernel: do not learn from it.
            Err(e) => return Err(e),
        }
    }
    NONE.store(
        u64::from(last as u32) | u64::from(fdtable::why_errno(last)) << 32,
        Ordering::Relaxed,
    );
    learn(NONE_WORKS);
    Err(last)
}

/// The errno with which this kernel refuses SMC sockets for good (EAFNOSUPPORT: no AF_SMC), or
/// None when it makes them or the answer is not lasting. What this process learnt already, else
/// learnt now with one SMC socket made and closed at once (an exec'd worker that only accepts on
/// an inherited listener never made a socket of its own). Raw system calls and atomics only.
pub fn lasting_refusal() -> Option<i32> {
    if matches!(LEARNT.load(Ordering::Acquire), INET_WORKS | SMC_WORKS) {
        return None;
    }
    let e = errno();
    let got = match smc_socket(
        config::get().mode,
        libc::AF_INET,
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
    ) {
        Ok((fd, _)) => {
            let _ = sock::close(fd);
            None
        }
        Err(e) => Why::of(e).is_lasting().then_some(e),
    };
    set_errno(e);
    got
}

fn family_name(domain: c_int) -> &'static str {
    if domain == libc::AF_INET6 {
        "AF_INET6"
    } else {
        "AF_INET"
    }
}

fn apply_buffers(fd: c_int, cfg: &Config) {
    for (name, size, label) in [
        (libc::SO_SNDBUF, cfg.sndbuf, "SO_SNDBUF"),
        (libc::SO_RCVBUF, cfg.rcvbuf, "SO_RCVBUF"),
    ] {
        if let Some(size) = size {
            if let Err(e) = sock::set_int(fd, libc::SOL_SOCKET, name, size) {
                if cfg.debug >= 1 {
                    line!("socket fd {fd}: {label}={size} refused ({e})");
                }
            }
        }
    }
}

/// The TCP socket the program asked for, told to the runtime with the reason it is not an SMC
/// socket (the errno of the refused SMC socket, or the policy). errno holds the caller's errno at
/// the call (every caller sees to it), and the runtime's news (`track::socket_made`: atomics)
/// leaves it as the call did.
#[inline(always)]
fn tcp_socket(
    domain: c_int,
    ty: c_int,
    protocol: c_int,
    out: &Outcome,
    why: fdtable::Why,
) -> c_int {
    let fd = out.record_call(real::socket(domain, ty, protocol));
    if fd >= 0 {
        track::socket_made(fd, Kind::Tcp(why));
    }
    fd
}

/// The body of the `socket` hook for a TCP socket (the hook passes the others through itself).
/// Inlined into the hook, with the path a kernel without SMC takes for every socket after the
/// first: the configuration's answers, one load of what was learnt, the real call and the
/// runtime's news. Everything else (the policy's TCP, an SMC socket to make, strict mode, the
/// debug lines) is out of line.
#[inline(always)]
pub fn socket(domain: c_int, ty: c_int, protocol: c_int, out: &Outcome) -> c_int {
    let cfg = config::get();
    if cfg.tcp_by_policy(domain) {
        return tcp_by_policy(domain, ty, protocol, out, cfg);
    }
    // This kernel refuses SMC sockets for good (learnt from the first one): the fallback costs a
    // load, and errno is still the caller's (nothing was called).
    if LEARNT.load(Ordering::Acquire) == NONE_WORKS && cfg.fallback != Fallback::Strict {
        let (e, why) = refusal();
        let fd = tcp_socket(domain, ty, protocol, out, why);
        if cfg.debug >= 1 {
            stays_tcp(fd, domain, e);
        }
        return fd;
    }
    smc_socket_or_not(domain, ty, protocol, out, cfg)
}

/// [`socket`] when the policy keeps every socket of the family on TCP.
#[inline(never)]
fn tcp_by_policy(domain: c_int, ty: c_int, protocol: c_int, out: &Outcome, cfg: &Config) -> c_int {
    let fd = tcp_socket(domain, ty, protocol, out, fdtable::WHY_POLICY);
    if fd >= 0 && cfg.debug >= 1 {
        line!(
            "socket fd {fd}: {} stream stays TCP by policy",
            family_name(domain)
        );
    }
    fd
}

/// The debug line of a TCP socket made because the kernel refused the SMC one with `e`.
#[cold]
#[inline(never)]
fn stays_tcp(fd: c_int, domain: c_int, e: i32) {
    line!(
        "socket fd {fd}: {} stream stays TCP: {} ({})",
        family_name(domain),
        Why::of(e).describe(),
        errno_name(e)
    );
}

/// [`socket`] when an SMC socket is to be tried (or strict mode refuses the call): what was
/// learnt decides how the kernel is asked, and the fallback takes the TCP socket. Out of line.
#[inline(never)]
fn smc_socket_or_not(
    domain: c_int,
    ty: c_int,
    protocol: c_int,
    out: &Outcome,
    cfg: &Config,
) -> c_int {
    let entry = out.entry();
    match smc_socket(cfg.mode, domain, ty) {
        Ok((fd, kind)) => {
            out.record(fd);
            apply_buffers(fd, cfg);
            track::socket_made(fd, Kind::Smc);
            if cfg.debug >= 1 {
                line!(
                    "socket fd {fd}: {} stream -> SMC ({})",
                    family_name(domain),
                    kind.label()
                );
            }
            set_errno(entry);
            fd
        }
        Err(e) => {
            if cfg.fallback == Fallback::Strict {
                if cfg.debug >= 1 {
                    line!(
                        "socket: {} stream refused (strict): {} ({})",
                        family_name(domain),
                        Why::of(e).describe(),
                        errno_name(e)
                    );
                }
                set_errno(e);
                return out.record(-1);
            }
            set_errno(entry);
            let fd = tcp_socket(domain, ty, protocol, out, fdtable::why_errno(e));
            if cfg.debug >= 1 {
                stays_tcp(fd, domain, e);
            }
            fd
        }
    }
}

/// Whether `value`, read with getsockopt(SOL_SOCKET, `name`), may be an SMC socket's identity
/// that [`identity_as_tcp`] would change: the hook's test before it does any more work.
#[inline]
pub fn may_be_smc_identity(name: c_int, value: c_int) -> bool {
    match name {
        libc::SO_DOMAIN => value == AF_SMC,
        libc::SO_PROTOCOL => {
            value == IPPROTO_SMC || value == SMCPROTO_SMC || value == SMCPROTO_SMC6
        }
        _ => false,
    }
}

/// After a successful `getsockopt(SOL_SOCKET, SO_DOMAIN | SO_PROTOCOL)` that answered `got`:
/// what a TCP socket would report instead, for sockets the kernel knows as SMC (None: keep `got`).
/// Decided from the socket itself, not from a table of fds, so it also covers sockets accepted
/// from a converted listener and survives dup() and fork(); the price is that a program that made
/// an AF_SMC socket on purpose sees it as TCP too.
pub fn identity_as_tcp(fd: c_int, name: c_int, got: c_int) -> Option<c_int> {
    if !may_be_smc_identity(name, got) {
        return None;
    }
    let other = |opt: c_int| sock::get_int(fd, libc::SOL_SOCKET, opt).ok();
    match name {
        // AF_SMC: the family its protocol says
        libc::SO_DOMAIN => match other(libc::SO_PROTOCOL)? {
            SMCPROTO_SMC6 => Some(libc::AF_INET6),
            _ => Some(libc::AF_INET),
        },
        libc::SO_PROTOCOL if got == IPPROTO_SMC => Some(libc::IPPROTO_TCP),
        // SMCPROTO_SMC(6) are 0 and 1: TCP only if the socket really is AF_SMC
        _ => (other(libc::SO_DOMAIN) == Some(AF_SMC)).then_some(libc::IPPROTO_TCP),
    }
}
