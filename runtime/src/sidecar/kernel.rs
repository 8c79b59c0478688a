//! What the sidecar asks the kernel, behind a trait so that its state machine can be tested
//! with made-up answers.

use crate::own_table;
use smcrun_kernel::sock_diag::{self, SmcSocket};
use smcrun_sys::sock::{self, TcpState};
use smcrun_sys::table;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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

/// The real kernel. On a sidecar with a descriptor table of its own (`crate::own_table`) each
/// question about one of the program's descriptors goes through a duplicate of it; the last one
/// is kept for the next question about the same descriptor (a look asks two or three in a row),
/// so that the answers are about one socket, and closed when the next descriptor is asked about
/// or when this is dropped (after each look): it never keeps a socket open.
#[derive(Default)]
pub struct Live {
    held: RefCell<Option<(i32, OwnedFd)>>,
}

impl Live {
    /// `f` on the program's `fd`, as seen from the calling thread's table.
    fn on<T>(&self, fd: i32, f: impl FnOnce(i32) -> Option<T>) -> Option<T> {
        let Some(pidfd) = own_table::pidfd() else {
            return f(fd);
        };
        let mut held = self.held.borrow_mut();
        if held.as_ref().is_none_or(|(n, _)| *n != fd) {
            *held = None;
            let copy = table::fetch(pidfd, fd).ok()?;
            // SAFETY: a new descriptor of this thread's table, owned by nothing else.
            *held = Some((fd, unsafe { OwnedFd::from_raw_fd(copy) }));
        }
        held.as_ref().and_then(|(_, d)| f(d.as_raw_fd()))
    }
}

impl Kernel for Live {
    fn smc_diag(&self) -> Result<Vec<SmcSocket>, String> {
        sock_diag::dump(0).map_err(|e| format!("cannot read smc_diag: {e}"))
    }
    fn inode(&self, fd: i32) -> Option<u64> {
        self.on(fd, smcrun_classify::socket_inode)
    }
    fn local(&self, fd: i32) -> Option<SocketAddr> {
        self.on(fd, |d| sock::local_addr(d).ok().flatten())
    }
    fn peer(&self, fd: i32) -> Option<SocketAddr> {
        self.on(fd, |d| sock::peer_addr(d).ok().flatten())
    }
    fn tcp_state(&self, fd: i32) -> Option<TcpState> {
        self.on(fd, |d| sock::tcp_state(d).ok())
    }
}
