//! Raw socket system calls with typed results. Each one leaves errno untouched and returns the
//! kernel's error as an [`Errno`].

use crate::errno::Errno;
use crate::smc::SocketKind;
use core::mem::size_of;
use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use libc::{c_int, c_long, socklen_t};

/// The result of a raw system call: errno read and restored on failure.
pub(crate) fn check(r: c_long) -> Result<c_long, Errno> {
    if r < 0 {
        let e = Errno::last();
        Err(e)
    } else {
        Ok(r)
    }
}

/// Makes a raw system call that returns an int, keeping errno.
macro_rules! sys {
    ($($arg:expr),+ $(,)?) => {
        crate::errno::keep(|| {
            // SAFETY: the caller of the macro passes arguments valid for this system call.
            check(unsafe { libc::syscall($($arg),+) })
        })
    };
}

/// `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> Result<c_int, Errno> {
    sys!(libc::SYS_socket, domain, ty, protocol).map(|fd| fd as c_int)
}

/// `close(2)` of an fd smcrun owns.
pub fn close(fd: c_int) -> Result<(), Errno> {
    sys!(libc::SYS_close, fd).map(drop)
}

/// `dup3(2)`: puts `old` on the number `new` (closing what `new` held).
pub fn dup3(old: c_int, new: c_int, flags: c_int) -> Result<(), Errno> {
    sys!(libc::SYS_dup3, old, new, flags).map(drop)
}

/// A duplicate of `fd` on the lowest free number, close-on-exec (`F_DUPFD_CLOEXEC`).
pub fn dup_cloexec(fd: c_int) -> Result<c_int, Errno> {
    sys!(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 0).map(|v| v as c_int)
}

/// `shutdown(2)`, past any preloaded hook.
pub fn shutdown(fd: c_int, how: c_int) -> Result<(), Errno> {
    sys!(libc::SYS_shutdown, fd, how).map(drop)
}

/// The device and inode of what `fd` refers to (`fstat`): tells one open socket from another
/// that later takes the same fd number.
pub fn identity_of_file(fd: c_int) -> Result<(u64, u64), Errno> {
    fstat(fd).map(|st| (st.st_dev, st.st_ino))
}

/// `fstat(2)` of `fd` in the calling thread's table.
fn fstat(fd: c_int) -> Result<libc::stat, Errno> {
    // SAFETY: all-zero is a valid `stat` (plain integers).
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys!(libc::SYS_fstat, fd, &mut st as *mut libc::stat)?;
    Ok(st)
}

/// The inode of the socket behind `fd` in the calling thread's table, as sock_diag and
/// `/proc/PID/fd` (`socket:[INODE]`) report it; None when `fd` is not a socket (`fstat`: it
/// reads the calling thread's own table, where `/proc/self/fd` is the main thread's).
pub fn socket_inode(fd: c_int) -> Option<u64> {
    let st = fstat(fd).ok()?;
    (st.st_mode & libc::S_IFMT == libc::S_IFSOCK).then_some(st.st_ino)
}

/// `fcntl(fd, cmd)` for the commands without an argument (F_GETFL, F_GETFD).
pub fn fcntl_get(fd: c_int, cmd: c_int) -> Result<c_int, Errno> {
    sys!(libc::SYS_fcntl, fd, cmd).map(|v| v as c_int)
}

/// `SIOCOUTQNSD` (linux/sockios.h): the ioctl that asks a stream socket how many written bytes
/// it has not sent yet.
pub const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// How many bytes written to `fd` the kernel has not sent yet (`SIOCOUTQNSD`); for an SMC socket,
/// what its send buffer still holds for the peer.
pub fn unsent(fd: c_int) -> Result<c_int, Errno> {
    let mut n: c_int = 0;
    sys!(libc::SYS_ioctl, fd, SIOCOUTQNSD, &mut n as *mut c_int)?;
    Ok(n)
}

/// `getsockopt(2)` of an int option.
pub fn get_int(fd: c_int, level: c_int, name: c_int) -> Result<c_int, Errno> {
    let mut v: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    sys!(
        libc::SYS_getsockopt,
        fd,
        level,
        name,
        &mut v as *mut c_int,
        &mut len as *mut socklen_t
    )?;
    Ok(v)
}

/// `getsockopt(2)` into `buf`: the number of bytes the kernel wrote.
pub fn get_bytes(fd: c_int, level: c_int, name: c_int, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut len = buf.len() as socklen_t;
    sys!(
        libc::SYS_getsockopt,
        fd,
        level,
        name,
        buf.as_mut_ptr(),
        &mut len as *mut socklen_t
    )?;
    Ok((len as usize).min(buf.len()))
}

/// `setsockopt(2)` of an int option.
pub fn set_int(fd: c_int, level: c_int, name: c_int, value: c_int) -> Result<(), Errno> {
    set_bytes(fd, level, name, &value.to_ne_bytes())
}

/// `setsockopt(2)` with the raw bytes of the option's value.
pub fn set_bytes(fd: c_int, level: c_int, name: c_int, value: &[u8]) -> Result<(), Errno> {
    sys!(
        libc::SYS_setsockopt,
        fd,
        level,
        name,
        value.as_ptr(),
        value.len() as socklen_t
    )
    .map(drop)
}

/// What the socket behind `fd` really is (its `SO_DOMAIN` and `SO_PROTOCOL` read from the kernel,
/// past the shim's own `getsockopt` hook, which masks SMC sockets as TCP).
pub fn kind(fd: c_int) -> Result<SocketKind, Errno> {
    let (domain, protocol) = identity(fd)?;
    Ok(SocketKind::of(domain, protocol))
}

/// The socket's real `(SO_DOMAIN, SO_PROTOCOL)`.
pub fn identity(fd: c_int) -> Result<(c_int, c_int), Errno> {
    Ok((
        get_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?,
        get_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL)?,
    ))
}

/// A TCP state, as `tcpi_state` of `TCP_INFO` reports it (include/net/tcp_states.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    /// The handshake is still running (SYN_SENT, SYN_RECV).
    Connecting,
    /// Connected, or connected once and now closing (ESTABLISHED, FIN_WAIT*, CLOSE_WAIT, ...).
    Connected,
    /// Never connected, or the connect failed (CLOSE).
    Closed,
    /// A listening socket.
    Listening,
}

/// The TCP state of `fd` (for an SMC socket, of its internal TCP socket: SMC passes TCP-level
/// options down to it), read without consuming `SO_ERROR`, which belongs to the program.
pub fn tcp_state(fd: c_int) -> Result<TcpState, Errno> {
    let mut info = [0u8; 8];
    get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info)?;
    Ok(match info[0] {
        2 | 3 => TcpState::Connecting, // SYN_SENT, SYN_RECV
        7 => TcpState::Closed,         // CLOSE
        10 => TcpState::Listening,     // LISTEN
        _ => TcpState::Connected, // ESTABLISHED, FIN_WAIT1/2, TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING
    })
}

/// `getsockname(2)`: the socket's own address (None for a family other than IPv4/IPv6).
pub fn local_addr(fd: c_int) -> Result<Option<SocketAddr>, Errno> {
    name_of(fd, libc::SYS_getsockname)
}

/// `getpeername(2)`: the peer's address (`ENOTCONN` when not connected).
pub fn peer_addr(fd: c_int) -> Result<Option<SocketAddr>, Errno> {
    name_of(fd, libc::SYS_getpeername)
}

fn name_of(fd: c_int, call: c_long) -> Result<Option<SocketAddr>, Errno> {
    // SAFETY: an all-zero sockaddr_storage is a valid value of the type.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as socklen_t;
    sys!(
        call,
        fd,
        &mut ss as *mut libc::sockaddr_storage,
        &mut len as *mut socklen_t
    )?;
    // SAFETY: the kernel wrote `len` bytes (at most the storage's size) into `ss`.
    Ok(unsafe { to_std((&ss as *const libc::sockaddr_storage).cast(), len) })
}

/// `bind(2)` of `fd` to `addr`.
pub fn bind(fd: c_int, addr: SocketAddr) -> Result<(), Errno> {
    let (ss, len) = to_c(addr);
    sys!(
        libc::SYS_bind,
        fd,
        &ss as *const libc::sockaddr_storage,
        len
    )
    .map(drop)
}

/// Reads an IPv4 or IPv6 socket address that a program handed to (or got from) a call.
///
/// # Safety
/// `addr` must be null or point to at least `len` readable bytes. Only those bytes are read:
/// a buffer shorter than the address's family needs gives `None`.
pub unsafe fn to_std(addr: *const libc::sockaddr, len: socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    if addr.is_null() || len < size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable (checked above).
    let family = c_int::from(unsafe { addr.cast::<libc::sa_family_t>().read_unaligned() });
    if family == libc::AF_INET && len >= size_of::<libc::sockaddr_in>() {
        // SAFETY: `len` covers a whole sockaddr_in.
        let a = unsafe { addr.cast::<libc::sockaddr_in>().read_unaligned() };
        let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
        Some(SocketAddr::V4(SocketAddrV4::new(
            ip,
            u16::from_be(a.sin_port),
        )))
    } else if family == libc::AF_INET6 && len >= size_of::<libc::sockaddr_in6>() {
        // SAFETY: `len` covers a whole sockaddr_in6.
        let a = unsafe { addr.cast::<libc::sockaddr_in6>().read_unaligned() };
        let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
        Some(SocketAddr::V6(SocketAddrV6::new(
            ip,
            u16::from_be(a.sin6_port),
            a.sin6_flowinfo,
            a.sin6_scope_id,
        )))
    } else {
        None
    }
}

/// The C form of a socket address, for `bind`/`connect`.
pub fn to_c(addr: SocketAddr) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid; the variant of the address's family is
    // written through a pointer to storage that is large and aligned enough for it.
    unsafe {
        let mut ss: libc::sockaddr_storage = core::mem::zeroed();
        let p = &mut ss as *mut libc::sockaddr_storage;
        match addr {
            SocketAddr::V4(a) => {
                let sin = &mut *p.cast::<libc::sockaddr_in>();
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
                (ss, size_of::<libc::sockaddr_in>() as socklen_t)
            }
            SocketAddr::V6(a) => {
                let sin6 = &mut *p.cast::<libc::sockaddr_in6>();
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_flowinfo = a.flowinfo();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                sin6.sin6_scope_id = a.scope_id();
                (ss, size_of::<libc::sockaddr_in6>() as socklen_t)
            }
        }
    }
}

/// The inode in a `/proc/PID/fd/N` link target of the form `socket:[INODE]` (what sock_diag calls
/// the socket's inode).
pub fn link_inode(target: &[u8]) -> Option<u64> {
    let digits = target.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_short_buffers_are_refused() {
        for a in ["10.1.2.3:6379", "[fd00::1]:80", "[::ffff:10.0.0.1]:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let (ss, len) = to_c(a);
            let p = (&ss as *const libc::sockaddr_storage).cast();
            // SAFETY: `ss` holds `len` bytes.
            assert_eq!(unsafe { to_std(p, len) }, Some(a));
            for short in [0, 1, 4, len - 1] {
                // SAFETY: as above, fewer bytes.
                assert_eq!(unsafe { to_std(p, short) }, None, "{a} with {short} bytes");
            }
        }
        // SAFETY: `to_std` checks for null before reading, so a null address reads nothing.
        assert_eq!(unsafe { to_std(core::ptr::null(), 16) }, None);
    }

    #[test]
    fn socket_links() {
        assert_eq!(link_inode(b"socket:[12345]"), Some(12345));
        assert_eq!(link_inode(b"pipe:[12345]"), None);
        assert_eq!(link_inode(b"socket:[x]"), None);
        assert_eq!(link_inode(b"socket:[]"), None);
        assert_eq!(link_inode(b"socket:[99999999999999999999]"), None);
        assert_eq!(link_inode(b"/dev/null"), None);
    }

    /// A socket's inode from fstat is the one `/proc/self/fd` names; a pipe or a closed
    /// descriptor has none.
    #[test]
    fn socket_inode_matches_the_proc_link() {
        extern crate std;
        let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0).unwrap();
        let link = std::fs::read_link(std::format!("/proc/self/fd/{fd}")).unwrap();
        let from_link = link_inode(link.as_os_str().as_encoded_bytes());
        assert!(from_link.is_some(), "{link:?}");
        assert_eq!(socket_inode(fd), from_link);
        close(fd).unwrap();
        assert_eq!(socket_inode(fd), None);
        let mut p = [0; 2];
        // SAFETY: pipe writes two ints into `p`.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        assert_eq!(socket_inode(p[0]), None);
        close(p[0]).unwrap();
        close(p[1]).unwrap();
    }

    #[test]
    fn errno_survives_a_failing_call() {
        Errno(libc::EINTR).set();
        assert_eq!(
            get_int(-1, libc::SOL_SOCKET, libc::SO_DOMAIN),
            Err(Errno(libc::EBADF))
        );
        assert_eq!(kind(-1), Err(Errno(libc::EBADF)));
        assert_eq!(Errno::last(), Errno(libc::EINTR));
    }

    #[test]
    fn a_tcp_socket_and_its_states() {
        let fd = socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0).unwrap();
        assert_eq!(kind(fd), Ok(SocketKind::Ip));
        assert_eq!(tcp_state(fd), Ok(TcpState::Closed));
        assert_eq!(peer_addr(fd), Err(Errno(libc::ENOTCONN)));
        bind(fd, "127.0.0.1:0".parse().unwrap()).unwrap();
        let local = local_addr(fd).unwrap().unwrap();
        assert!(local.ip().is_loopback() && local.port() != 0);
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
        assert_eq!(get_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR), Ok(1));
        close(fd).unwrap();
        // A second close(fd) is not asserted: tests run on threads, and the number may already
        // belong to another test's file (that raced once in CI and aborted the run as an IO
        // safety violation). EBADF is shown on an fd no one can own.
        assert_eq!(close(-1), Err(Errno(libc::EBADF)));
    }
}
