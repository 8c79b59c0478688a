//! `smcrun ss`' view: SMC sockets as sock_diag reports them, which ones a listing shows and
//! who owns them, as [`json`] and as [`text`] in smcss' columns.

use serde::{Deserialize, Serialize};
use smcrun_kernel::reasons::state;
use smcrun_kernel::sock_diag::{Mode, SmcSocket};

pub mod json;
pub mod text;

/// What a listing shows: which sockets and which columns (smcss' options, and `-p`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Listing {
    /// `-a`: every socket, listening and not yet connected ones too.
    pub all: bool,
    /// `-l`: listening sockets only.
    pub listening: bool,
    /// `-d`: shutdown, token, buffer sizes and ring cursors.
    pub debug: bool,
    /// `-R`: SMC-R sockets only, with their RDMA link.
    pub smcr: bool,
    /// `-D`: SMC-D sockets only, with their DMB.
    pub smcd: bool,
    /// `-W`: addresses not shortened.
    pub wide: bool,
    /// `-p`: the owning processes.
    pub processes: bool,
}

/// One owner of a socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub name: String,
    /// The file descriptor (`None`: the owner is the smcrun agent's record, not /proc).
    pub fd: Option<u32>,
}

/// Which sockets a listing shows (smcss: default hides LISTEN and INIT; -R/-D keep one mode).
pub fn shown(s: &SmcSocket, a: &Listing) -> bool {
    if (a.smcr && s.mode != Mode::SmcR) || (a.smcd && s.mode != Mode::SmcD) {
        return false;
    }
    if a.listening {
        s.state == state::LISTEN
    } else {
        a.all || (s.state != state::LISTEN && s.state != state::INIT)
    }
}
