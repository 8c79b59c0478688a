//! What the kernel says about one of this process's fds, asked with raw system calls so that the
//! shim's getsockopt hook (which masks SMC sockets as TCP) cannot change the answer.

/// The inode of the socket behind `fd`, from /proc/self/fd (None if `fd` is not a socket now).
pub fn socket_inode(fd: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    socket_link_inode(link.to_str()?)
}

/// The inode in a `/proc/PID/fd/N` link target of the form `socket:[INODE]`.
pub fn socket_link_inode(target: &str) -> Option<u64> {
    target
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The socket's real SO_DOMAIN and SO_PROTOCOL (raw system calls: the shim's getsockopt hook
/// would mask them).
pub fn raw_identity(fd: i32) -> Option<(i32, i32)> {
    let get = |opt: i32| -> Option<i32> {
        let mut v: libc::c_int = 0;
        let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the value pointer and length describe a live c_int.
        let r = unsafe {
            libc::syscall(
                libc::SYS_getsockopt,
                fd,
                libc::SOL_SOCKET,
                opt,
                &mut v as *mut libc::c_int,
                &mut l as *mut libc::socklen_t,
            )
        };
        (r == 0).then_some(v)
    };
    Some((get(libc::SO_DOMAIN)?, get(libc::SO_PROTOCOL)?))
}

/// The socket's local (`SYS_getsockname`) or peer (`SYS_getpeername`) address, by raw system
/// call.
pub fn address(fd: i32, call: libc::c_long) -> Option<std::net::SocketAddr> {
    // SAFETY: the call writes at most `len` bytes into a zeroed sockaddr_storage.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::syscall(
            call,
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len as *mut libc::socklen_t,
        ) != 0
        {
            return None;
        }
        crate::sidecar::sockaddr_to_std(&ss as *const _ as *const libc::sockaddr, len)
    }
}

/// This fd's entry in an smc_diag dump. By inode first; then by the connection's ports, because
/// when an SMC socket falls back the kernel moves the program's file over to the internal TCP
/// socket: from then on the fd reads as AF_INET/IPPROTO_TCP and its inode is no longer the one
/// smc_diag reports, while smc_diag's ports (taken from that same TCP socket) still match.
pub fn smc_entry(
    fd: i32,
    dump: &[crate::sock_diag::SmcSocket],
) -> Option<&crate::sock_diag::SmcSocket> {
    if let Some(ino) = socket_inode(fd) {
        if let Some(e) = dump.iter().find(|e| e.inode == ino) {
            return Some(e);
        }
    }
    let local = address(fd, libc::SYS_getsockname)?;
    let peer = address(fd, libc::SYS_getpeername)?;
    let same = |a: &std::net::SocketAddr, b: &std::net::SocketAddr| {
        a.port() == b.port()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    dump.iter()
        .find(|e| e.peer.port() != 0 && same(&e.local, &local) && same(&e.peer, &peer))
}
