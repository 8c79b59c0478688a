//! Network-namespace scopes: `smcrun attach --netns PATH|PID` makes every new TCP socket made in
//! that network namespace (a pod's, a container's) an SMC socket, with no restart, until `smcrun
//! detach --netns`. They are slots of the pinned instance ([`crate::pinned`]), keyed by the
//! namespace's cookie: set when the namespace is made and never reused, unlike its nsfs inode
//! number, so a scope left attached after its namespace is gone converts nothing else.
//!
//! The cookie is read the only way the kernel gives it: `SO_NETNS_COOKIE` of a socket made in the
//! namespace, by a short-lived thread that enters it with `setns(2)` (CAP_SYS_ADMIN, as attaching
//! needs anyway).

use crate::error::Error;
use crate::pinned::{self, Attached, Detached, Kind, Target};
use crate::rules::KernelPolicy;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// nsfs's `f_type` (include/uapi/linux/magic.h).
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `NS_GET_NSTYPE` = `_IO(0xb7, 0x3)` (include/uapi/linux/nsfs.h, Linux 4.11).
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
/// `SO_NETNS_COOKIE` (include/uapi/asm-generic/socket.h, Linux 5.14).
const SO_NETNS_COOKIE: libc::c_int = 71;

/// What an operator gave: the expected forms, for messages.
const EXPECTED: &str =
    "expected a network namespace file (/run/netns/NAME, /proc/PID/ns/net) or a process id";

/// A network namespace, resolved from a path or a process id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    /// The namespace file (`/proc/PID/ns/net` for a process id).
    pub path: PathBuf,
    /// Its nsfs inode number (what `ls -l /proc/PID/ns/net` shows in `net:[...]`).
    pub inode: u64,
    /// Its cookie (the program's key).
    pub cookie: u64,
}

/// The namespace file an argument names: a process id (all digits) is that process's
/// `/proc/PID/ns/net`, anything else a path.
fn file_of(arg: &str) -> Result<PathBuf, Error> {
    if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
        let proc = PathBuf::from(format!("/proc/{arg}"));
        if !proc.exists() {
            return Err(Error::new(format!(
                "netns {arg}: no such process; {EXPECTED}"
            )));
        }
        return Ok(proc.join("ns/net"));
    }
    Ok(PathBuf::from(arg))
}

/// Opens `path` and checks it is a network namespace file.
fn open_netns(path: &Path) -> Result<(std::fs::File, u64), Error> {
    let name = path.display();
    let f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::new(format!("netns {name}: no such file; {EXPECTED}"))
        }
        _ => Error::io(format!("netns {name}"), e),
    })?;
    // SAFETY: libc::statfs is plain integers: all zero bytes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs(2) on the fd `f` owns, into the statfs `st` we own, both alive for the call.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::io(
            format!("netns {name}"),
            std::io::Error::last_os_error(),
        ));
    }
    if st.f_type as i64 != NSFS_MAGIC {
        return Err(Error::new(format!(
            "netns {name}: not a namespace file (not on nsfs); {EXPECTED}"
        )));
    }
    // SAFETY: an ioctl without argument on an fd we own.
    let t = unsafe { libc::ioctl(f.as_raw_fd(), NS_GET_NSTYPE) };
    if t != libc::CLONE_NEWNET {
        return Err(Error::new(format!(
            "netns {name}: a namespace of another type (CLONE_* {t:#x}), not a network namespace; {EXPECTED}"
        )));
    }
    let ino = f
        .metadata()
        .map_err(|e| Error::io(format!("netns {name}"), e))?
        .ino();
    Ok((f, ino))
}

/// The cookie of the network namespace `ns` is a file of, from a thread that enters it.
fn cookie_of(ns: &std::fs::File, name: &str) -> Result<u64, Error> {
    let fd = ns.as_raw_fd();
    let r = std::thread::scope(|s| {
        s.spawn(move || -> std::io::Result<u64> {
            // SAFETY: setns(2) moves only this thread, which ends right after; `fd` outlives it.
            if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: socket(2); the fd is owned at once.
            let s =
                unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
            if s < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `s` is the new socket just made (checked non-negative); nothing else owns it.
            let sock = unsafe { OwnedFd::from_raw_fd(s) };
            let mut cookie: u64 = 0;
            let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
            // SAFETY: getsockopt(2) into a u64 we own, its size given.
            let r = unsafe {
                libc::getsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    SO_NETNS_COOKIE,
                    &mut cookie as *mut u64 as *mut libc::c_void,
                    &mut len,
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(cookie)
        })
        .join()
    });
    match r {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(Error::io(
            format!("netns {name}: cannot read its cookie (setns, then SO_NETNS_COOKIE; needs CAP_SYS_ADMIN and Linux 5.14)"),
            e,
        )),
        Err(_) => Err(Error::new(format!(
            "netns {name}: the thread reading its cookie panicked"
        ))),
    }
}

/// Opens the network namespace `arg` names (a namespace file or a process id), refusing
/// anything else with one line naming it: the open file (to enter it with setns) and its inode.
pub fn open(arg: &str) -> Result<(std::fs::File, u64), Error> {
    open_netns(&file_of(arg)?)
}

/// Resolves `arg` (a namespace file or a process id) to a network namespace, refusing anything
/// else with one line naming it.
pub fn resolve(arg: &str) -> Result<Netns, Error> {
    let path = file_of(arg)?;
    let (f, inode) = open_netns(&path)?;
    let cookie = cookie_of(&f, &path.display().to_string())?;
    Ok(Netns {
        path,
        inode,
        cookie,
    })
}

/// The nsfs inode of a process's network namespace (for `ps`: which scope it is in).
pub fn inode_of_pid(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// Attaches `ns` with `policy` (`policy_text` its canonical form). Refuses, attaching nothing,
/// when no IPPROTO_SMC socket can be made.
pub fn attach(ns: &Netns, policy_text: &str, policy: &KernelPolicy) -> Result<Attached, Error> {
    let t = Target {
        kind: Kind::Netns,
        key: ns.cookie,
        id: ns.inode,
        path: ns.path.clone(),
    };
    pinned::attach(&t, policy_text, policy)
}

/// Detaches `ns`. One that is not attached is an error naming it.
pub fn detach(ns: &Netns) -> Result<Detached, Error> {
    pinned::detach(
        Kind::Netns,
        ns.cookie,
        &format!("netns {}", ns.path.display()),
    )
}

/// Detaches the attached network namespace whose file `arg` named when it was attached and
/// that [`resolve`] cannot find any more (its process exited, its /run/netns name was deleted);
/// `None` when no scope was attached by that path.
pub fn detach_gone(arg: &str) -> Result<Option<Detached>, Error> {
    let path = file_of(arg).unwrap_or_else(|_| PathBuf::from(format!("/proc/{arg}/ns/net")));
    let Some(s) = pinned::list(Kind::Netns)?
        .into_iter()
        .find(|s| s.path == path)
    else {
        return Ok(None);
    };
    pinned::detach(Kind::Netns, s.key, &format!("netns {}", path.display())).map(Some)
}
