//! The one classifier: how a connection ran (SMC-R, SMC-D, TCP after a fallback and why, TCP from
//! the start and why), from what the kernel says about its socket. Used by the runtime's sidecar
//! for every connection of a program and by `smcrun demo` for its own sockets, so both say the
//! same thing.

pub mod why;

use crate::why::{Why, WHY_NOT_OURS, WHY_POLICY, WHY_UNRECORDED};
use smcrun_kernel::reasons;
use smcrun_kernel::sock_diag::{self, SmcSocket};
use smcrun_report::ReasonCount;
use smcrun_settings::Why as SocketWhy;
use smcrun_sys::smc::SocketKind;
use std::net::SocketAddr;

/// How one connection ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Over SMC-R.
    SmcR,
    /// Over SMC-D.
    SmcD,
    /// Over SMC, but closed before its mode could be read.
    SmcUnknown,
    /// An SMC socket that fell back to TCP: the kernel's reason and the peer's diagnosis (0: none).
    Fallback {
        /// The local fallback reason.
        reason: u32,
        /// The peer's diagnosis.
        peer: u32,
    },
    /// An SMC socket that had fallen back when it was closed, before its reason could be read.
    FallbackUnseen,
    /// A TCP socket from the start.
    Tcp(Why),
}

/// What smc_diag says of an SMC socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The connection's transport is decided.
    Decided(Outcome),
    /// The SMC handshake is still running: look again later.
    Handshaking,
    /// A mode this smcrun does not know.
    UnknownMode(u8),
}

/// Reads one smc_diag entry.
pub fn from_diag(e: &SmcSocket) -> Verdict {
    match e.mode {
        sock_diag::Mode::Fallback => {
            let (reason, peer) = e.fallback.unwrap_or((0, 0));
            Verdict::Decided(Outcome::Fallback { reason, peer })
        }
        // INIT: the CLC handshake has not finished.
        _ if e.state == 2 => Verdict::Handshaking,
        sock_diag::Mode::SmcR => Verdict::Decided(Outcome::SmcR),
        sock_diag::Mode::SmcD => Verdict::Decided(Outcome::SmcD),
        sock_diag::Mode::Unknown(m) => Verdict::UnknownMode(m),
    }
}

/// What a socket still waiting to be classified has become when the program closes it, from its
/// real family and protocol alone (no smc_diag dump: the close must not wait): still an SMC socket
/// (its mode unknown), or an IP socket (the kernel moved the file to the internal TCP socket when
/// it fell back; the reason unknown).
pub fn at_close(kind: SocketKind) -> Option<Outcome> {
    match kind {
        SocketKind::AfSmc | SocketKind::IpprotoSmc => Some(Outcome::SmcUnknown),
        SocketKind::Ip => Some(Outcome::FallbackUnseen),
        SocketKind::Other => None,
    }
}

/// The entry of socket `fd` in an smc_diag dump, given what `/proc/self/fd` says its inode is and
/// its addresses. By inode first; then by the connection's ports: when an SMC socket falls back,
/// the kernel moves the program's file over to the internal TCP socket, so the fd's inode is no
/// longer the one smc_diag reports, while smc_diag's ports (taken from that TCP socket) still
/// match.
pub fn find(
    dump: &[SmcSocket],
    inode: Option<u64>,
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
) -> Option<&SmcSocket> {
    if let Some(ino) = inode {
        if let Some(e) = dump.iter().find(|e| e.inode == ino) {
            return Some(e);
        }
    }
    let (local, peer) = (local?, peer?);
    let same = |a: &SocketAddr, b: &SocketAddr| {
        a.port() == b.port()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    dump.iter()
        .find(|e| e.peer.port() != 0 && same(&e.local, &local) && same(&e.peer, &peer))
}

/// The inode of the socket behind the calling thread's `fd` (None: `fd` is not a socket now), as
/// smc_diag reports it.
pub fn socket_inode(fd: i32) -> Option<u64> {
    smcrun_sys::sock::socket_inode(fd)
}

/// The transport as smcrun names it: "SMC-R", "SMC-D", "SMC" (mode not seen) or "TCP".
pub fn mode_name(o: Outcome) -> &'static str {
    match o {
        Outcome::SmcR => "SMC-R",
        Outcome::SmcD => "SMC-D",
        Outcome::SmcUnknown => "SMC",
        _ => "TCP",
    }
}

/// Why a connection did not run over SMC (or why its mode is unknown), as a report's reason with
/// a count of one; None for SMC-R and SMC-D.
pub fn reason(o: Outcome) -> Option<ReasonCount> {
    let (code, errno, text) = match o {
        Outcome::SmcR | Outcome::SmcD => return None,
        Outcome::SmcUnknown => (
            None,
            None,
            "ran over SMC; closed before its mode (R or D) was read".to_string(),
        ),
        Outcome::Fallback { reason, .. } => (
            Some(format!("0x{reason:08x}")),
            None,
            reasons::describe(reason).description.into_owned(),
        ),
        Outcome::FallbackUnseen => (
            None,
            None,
            "SMC fell back to TCP; closed before the reason was read".to_string(),
        ),
        Outcome::Tcp(WHY_POLICY) => (None, None, "TCP by policy".to_string()),
        Outcome::Tcp(WHY_NOT_OURS) => (
            None,
            None,
            "accepted from a TCP listening socket this process did not make (inherited across exec, or socket activation) on a kernel that makes SMC sockets; why the listener is TCP is not known here"
                .to_string(),
        ),
        Outcome::Tcp(WHY_UNRECORDED) => (
            None,
            None,
            "TCP; the fd is beyond smcrun's table, the reason was not recorded".to_string(),
        ),
        Outcome::Tcp(e) => (
            None,
            Some(smcrun_sys::errno::name(i32::from(e)).to_string()),
            SocketWhy::of(i32::from(e)).describe().to_string(),
        ),
    };
    Some(ReasonCount {
        code,
        errno,
        text,
        count: 1,
    })
}

/// The peer's diagnosis of a fallback, as the report shows it (`0x03030000`), when it sent one.
pub fn peer_diagnosis(o: Outcome) -> Option<String> {
    match o {
        Outcome::Fallback { peer, .. } if peer != 0 => Some(format!("0x{peer:08x}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::sock_diag::{Mode, AF_SMC};

    fn entry(mode: Mode, state: u8, inode: u64, local: &str, peer: &str) -> SmcSocket {
        let (local, peer) = (local.parse().unwrap(), peer.parse().unwrap());
        SmcSocket {
            fallback: (mode == Mode::Fallback).then_some((0x0303_0000, 0x0305_0000)),
            ..SmcSocket::new(AF_SMC, state, mode, local, peer, inode)
        }
    }

    #[test]
    fn diag_entries_become_outcomes() {
        let r = entry(Mode::SmcR, 1, 1, "127.0.0.1:5000", "127.0.0.1:40000");
        assert_eq!(from_diag(&r), Verdict::Decided(Outcome::SmcR));
        let d = entry(Mode::SmcD, 1, 1, "127.0.0.1:5000", "127.0.0.1:40000");
        assert_eq!(from_diag(&d), Verdict::Decided(Outcome::SmcD));
        let init = entry(Mode::SmcR, 2, 1, "127.0.0.1:5000", "127.0.0.1:40000");
        assert_eq!(from_diag(&init), Verdict::Handshaking);
        let fb = entry(Mode::Fallback, 1, 1, "127.0.0.1:5000", "127.0.0.1:40000");
        assert_eq!(
            from_diag(&fb),
            Verdict::Decided(Outcome::Fallback {
                reason: 0x0303_0000,
                peer: 0x0305_0000
            })
        );
        assert_eq!(
            from_diag(&entry(Mode::Unknown(9), 1, 1, "0.0.0.0:1", "0.0.0.0:2")),
            Verdict::UnknownMode(9)
        );
    }

    #[test]
    fn find_by_inode_then_by_ports() {
        let dump = vec![
            entry(Mode::SmcR, 1, 11, "127.0.0.1:6379", "127.0.0.1:40001"),
            entry(Mode::Fallback, 1, 12, "127.0.0.1:6379", "127.0.0.1:40002"),
            entry(Mode::SmcR, 10, 13, "0.0.0.0:6379", "0.0.0.0:0"),
        ];
        let a = |s: &str| Some(s.parse().unwrap());
        assert_eq!(find(&dump, Some(11), None, None).unwrap().inode, 11);
        // A fallen-back fd reads another inode: its ports find it.
        let by_ports = find(&dump, Some(999), a("127.0.0.1:6379"), a("127.0.0.1:40002"));
        assert_eq!(by_ports.unwrap().inode, 12);
        // An unspecified address on either side still matches by port; a listener never does.
        assert_eq!(
            find(&dump, None, a("0.0.0.0:6379"), a("127.0.0.1:40001"))
                .unwrap()
                .inode,
            11
        );
        assert!(find(&dump, None, a("127.0.0.1:6379"), a("127.0.0.1:1")).is_none());
        assert!(find(&dump, Some(999), None, None).is_none());
    }

    #[test]
    fn at_close_is_coarse_but_never_a_guess() {
        assert_eq!(at_close(SocketKind::AfSmc), Some(Outcome::SmcUnknown));
        assert_eq!(at_close(SocketKind::IpprotoSmc), Some(Outcome::SmcUnknown));
        assert_eq!(at_close(SocketKind::Ip), Some(Outcome::FallbackUnseen));
        assert_eq!(at_close(SocketKind::Other), None);
    }

    #[test]
    fn reasons_in_words() {
        assert!(reason(Outcome::SmcR).is_none());
        let r = reason(Outcome::Fallback {
            reason: 0x0301_0000,
            peer: 0,
        })
        .unwrap();
        assert_eq!(r.code.as_deref(), Some("0x03010000"));
        let r = reason(Outcome::Tcp(libc::EAFNOSUPPORT as u8)).unwrap();
        assert_eq!(r.errno.as_deref(), Some("EAFNOSUPPORT"));
        assert!(r.text.contains("no AF_SMC"), "{}", r.text);
        assert_eq!(
            reason(Outcome::Tcp(WHY_POLICY)).unwrap().text,
            "TCP by policy"
        );
        assert_eq!(mode_name(Outcome::SmcUnknown), "SMC");
        assert_eq!(
            peer_diagnosis(Outcome::Fallback {
                reason: 1,
                peer: 0x0303_0000
            })
            .as_deref(),
            Some("0x03030000")
        );
    }
}
