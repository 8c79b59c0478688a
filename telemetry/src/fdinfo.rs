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
