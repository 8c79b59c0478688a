//! What the sidecar asks the kernel, behind a trait so that its state machine can be tested
//! with made-up answers.

use smcrun_kernel::sock_diag::{self, SmcSocket};
use smcrun_sys::sock::{self, TcpState};
use std::net::SocketAddr;

/// What the sidecar asks the kernel.
pub trait Kernel {
    /// Every SMC socket of the network namespace.
    fn smc_diag(&self) -> Result<Vec<SmcSocket>, String>;
    /// The inode of the socket behind `fd` (None: `fd` is not a socket now).
    fn inode(&self, fd: i32) -> Option<u64>;
    /// The socket's local address.
    fn local(&self, fd: i32) -> Option<SocketAddr>;
    /// The socket's peer.
    fn peer(&self, fd: i32) -> Option<SocketAddr>;
    /// The TCP state of the socket's (internal) TCP socket.
    fn tcp_state(&self, fd: i32) -> Option<TcpState>;
}

/// The real kernel.
pub struct Live;

impl Kernel for Live {
    fn smc_diag(&self) -> Result<Vec<SmcSocket>, String> {
        sock_diag::dump(0).map_err(|e| format!("cannot read smc_diag: {e}"))
    }
    fn inode(&self, fd: i32) -> Option<u64> {
        smcrun_classify::socket_inode(fd)
    }
    fn local(&self, fd: i32) -> Option<SocketAddr> {
        sock::local_addr(fd).ok().flatten()
    }
    fn peer(&self, fd: i32) -> Option<SocketAddr> {
        sock::peer_addr(fd).ok().flatten()
    }
    fn tcp_state(&self, fd: i32) -> Option<TcpState> {
        sock::tcp_state(fd).ok()
    }
}
