//! The IPv4 loopback address the measured programs listen on and connect to.

/// `127.0.0.1:port` as a `sockaddr_in`, for the raw socket calls (port 0: any, for bind).
pub fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The length of a `sockaddr_in`, as bind, connect and getsockname take it.
pub const SIN_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
