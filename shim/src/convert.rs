//! Making the SMC socket: which sockets qualify, how the kernel is asked, what is remembered, and
//! how a converted socket keeps telling the program the family and protocol it asked for.

use crate::config::{self, Config};
use crate::counters::{self, Why};
use crate::guard::{errno, set_errno, Outcome};
use crate::log::{errno_name, line};
use crate::real;
use crate::tracked;
use libc::{c_int, c_void, socklen_t};
use smcrun_policy::{Action, Family};
use smcrun_settings::{Fallback, Mode};
use smcrun_telemetry::sidecar::{self, Event};
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

/// AF_SMC (include/linux/socket.h).
pub const AF_SMC: c_int = 43;
/// AF_SMC protocol for IPv4 addressing (include/uapi/linux/smc.h).
pub const SMCPROTO_SMC: c_int = 0;
/// AF_SMC protocol for IPv6 addressing.
pub const SMCPROTO_SMC6: c_int = 1;
/// IPPROTO_SMC (include/uapi/linux/in.h, Linux 6.11).
pub const IPPROTO_SMC: c_int = 256;

/// The two ways to ask for an SMC socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `socket(AF_INET/AF_INET6, type, IPPROTO_SMC)`.
    Inet,
    /// `socket(AF_SMC, type, SMCPROTO_SMC/SMCPROTO_SMC6)`.
    Smc,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Inet => "IPPROTO_SMC",
            Kind::Smc => "AF_SMC",
        }
    }
}

/// What this process has learnt about the kernel: nothing yet, which kind works, or that none
/// does (and why). Written with compare-and-swap from UNKNOWN only, so the first answer sticks
/// and racing threads that probed at the same time agree with it.
static LEARNT: AtomicU8 = AtomicU8::new(UNKNOWN);
static NONE_ERRNO: AtomicI32 = AtomicI32::new(0);
const UNKNOWN: u8 = 0;
const INET_WORKS: u8 = 1;
const SMC_WORKS: u8 = 2;
const NONE_WORKS: u8 = 3;

fn learn(state: u8) {
    let _ = LEARNT.compare_exchange(UNKNOWN, state, Ordering::AcqRel, Ordering::Acquire);
}

/// Whether `socket(domain, ty, protocol)` asks for a TCP socket, the only kind converted.
pub fn is_tcp(domain: c_int, ty: c_int, protocol: c_int) -> bool {
    (domain == libc::AF_INET || domain == libc::AF_INET6)
        && ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_STREAM
        && (protocol == 0 || protocol == libc::IPPROTO_TCP)
}

fn try_kind(kind: Kind, domain: c_int, ty: c_int) -> Result<c_int, i32> {
    let fd = match kind {
        Kind::Inet => real::socket(domain, ty, IPPROTO_SMC),
        Kind::Smc => {
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
fn smc_socket(mode: Mode, domain: c_int, ty: c_int) -> Result<(c_int, Kind), i32> {
    let candidates: &[Kind] = match LEARNT.load(Ordering::Acquire) {
        NONE_WORKS => return Err(NONE_ERRNO.load(Ordering::Relaxed)),
        INET_WORKS => &[Kind::Inet],
        SMC_WORKS => &[Kind::Smc],
        _ => match mode {
            Mode::Auto => &[Kind::Inet, Kind::Smc],
            Mode::Inet => &[Kind::Inet],
            Mode::Smc => &[Kind::Smc],
        },
    };
    let mut last = 0;
    for &kind in candidates {
        match try_kind(kind, domain, ty) {
            Ok(fd) => {
                learn(if kind == Kind::Inet {
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
    NONE_ERRNO.store(last, Ordering::Relaxed);
    learn(NONE_WORKS);
    Err(last)
}

/// Hands an event to the sidecar, keeping errno (starting the sidecar, on the first TCP socket,
/// makes system calls that may set it).
pub fn tell(ev: Event) {
    let saved = errno();
    sidecar::send(ev);
    set_errno(saved);
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
            if real::setsockopt_int(fd, libc::SOL_SOCKET, name, size) != 0 && cfg.debug >= 1 {
                let e = errno();
                line!("socket fd {fd}: {label}={size} refused ({})", errno_name(e));
            }
        }
    }
}

/// The TCP socket the program asked for, tracked and told to the sidecar with the reason it is
/// not an SMC socket (the errno of the refused SMC socket, or `sidecar::BY_POLICY`).
fn tcp_socket(domain: c_int, ty: c_int, protocol: c_int, out: &Outcome, why: i32) -> c_int {
    let fd = out.record(real::socket(domain, ty, protocol));
    if fd >= 0 {
        tracked::mark(fd, false);
        tell(Event::Created {
            fd,
            smc: false,
            errno: why,
        });
    }
    fd
}

/// The body of the `socket` hook.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int, out: &Outcome) -> c_int {
    if !is_tcp(domain, ty, protocol) {
        counters::bump(&counters::UNTOUCHED);
        let fd = out.record(real::socket(domain, ty, protocol));
        tracked::clear(fd);
        return fd;
    }
    let cfg = config::get();
    let entry = errno();
    let family = if domain == libc::AF_INET6 {
        Family::V6
    } else {
        Family::V4
    };
    if cfg.policy.likely(family) == Action::Tcp {
        let fd = tcp_socket(domain, ty, protocol, out, sidecar::BY_POLICY);
        if fd >= 0 && cfg.debug >= 1 {
            line!(
                "socket fd {fd}: {} stream stays TCP by policy",
                family_name(domain)
            );
        }
        return fd;
    }
    match smc_socket(cfg.mode, domain, ty) {
        Ok((fd, kind)) => {
            out.record(fd);
            apply_buffers(fd, cfg);
            counters::bump(&counters::CONVERTED);
            tracked::mark(fd, true);
            tell(Event::Created {
                fd,
                smc: true,
                errno: 0,
            });
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
            let why = Why::of(e);
            counters::fell_back(why);
            if cfg.fallback == Fallback::Strict {
                if cfg.debug >= 1 {
                    line!(
                        "socket: {} stream refused (strict): {} ({})",
                        family_name(domain),
                        why.describe(),
                        errno_name(e)
                    );
                }
                set_errno(e);
                return out.record(-1);
            }
            set_errno(entry);
            let fd = tcp_socket(domain, ty, protocol, out, e);
            if cfg.debug >= 1 {
                line!(
                    "socket fd {fd}: {} stream stays TCP: {} ({})",
                    family_name(domain),
                    why.describe(),
                    errno_name(e)
                );
            }
            fd
        }
    }
}

/// After a successful `getsockopt(SOL_SOCKET, SO_DOMAIN | SO_PROTOCOL)`: reports what a TCP socket
/// would, for sockets the kernel knows as SMC. Decided from the socket itself, not from a table of
/// fds, so it also covers sockets accepted from a converted listener and survives dup() and
/// fork(); the price is that a program that made an AF_SMC socket on purpose sees it as TCP too.
///
/// # Safety
/// `val`/`len` are the caller's getsockopt arguments after a successful call.
pub unsafe fn mask_identity(fd: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) {
    if val.is_null() || len.is_null() || (*len as usize) < std::mem::size_of::<c_int>() {
        return;
    }
    let slot = val.cast::<c_int>();
    let got = slot.read_unaligned();
    let saved = errno();
    let other = |opt: c_int| -> Option<c_int> {
        let mut v: c_int = 0;
        let mut l = std::mem::size_of::<c_int>() as socklen_t;
        let r = real::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut c_int).cast(),
            &mut l,
        );
        (r == 0).then_some(v)
    };
    let fixed = match name {
        libc::SO_DOMAIN if got == AF_SMC => match other(libc::SO_PROTOCOL) {
            Some(SMCPROTO_SMC6) => Some(libc::AF_INET6),
            Some(_) => Some(libc::AF_INET),
            None => None,
        },
        libc::SO_PROTOCOL if got == IPPROTO_SMC => Some(libc::IPPROTO_TCP),
        libc::SO_PROTOCOL if got == SMCPROTO_SMC || got == SMCPROTO_SMC6 => {
            (other(libc::SO_DOMAIN) == Some(AF_SMC)).then_some(libc::IPPROTO_TCP)
        }
        _ => None,
    };
    if let Some(v) = fixed {
        slot.write_unaligned(v);
    }
    set_errno(saved);
}
