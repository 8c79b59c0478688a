//! `smcrun ss --json`: one object per SMC socket, with a fallback's reasons decoded and the
//! details (`conninfo`, `lgrinfo`, `dmbinfo`) where they were asked for and the kernel has them.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use smcrun_kernel::reasons;
use smcrun_kernel::sock_diag::{ConnInfo, DmbInfo, LgrInfo, SmcSocket};

use crate::json::reason::ReasonView;
use crate::linkgroup::json::lgr_id;

/// `smcrun ss --json`: `{"sockets": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SsView<'a, P: Serialize> {
    /// The sockets shown.
    pub sockets: Vec<SocketView<'a, P>>,
}

/// One SMC socket. `P` is what `-p` adds as `processes` (the owners), absent without `-p`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SocketView<'a, P: Serialize> {
    /// State name (`ACTIVE`, `LISTEN`, ...).
    pub state: Cow<'static, str>,
    /// The kernel's state number.
    pub state_code: u8,
    /// Address family (AF_SMC, or AF_INET/AF_INET6 for IPPROTO_SMC).
    pub family: u8,
    /// `SMCR`, `SMCD`, `TCP` (fallback) or the like.
    pub mode: Cow<'static, str>,
    /// Owner's uid.
    pub uid: u32,
    /// Socket inode.
    pub inode: u64,
    /// Local address.
    pub local: String,
    /// Peer address.
    pub peer: String,
    /// Interface index.
    pub interface: u32,
    /// Shutdown directions (`<->`, ...).
    pub shutdown: String,
    /// Why the socket fell back to TCP (`null` for one that did not).
    pub fallback: Option<SocketFallback>,
    /// Connection details (`-d`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conninfo: Option<Cow<'a, ConnInfo>>,
    /// The SMC-R link (`-R`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lgrinfo: Option<Cow<'a, LgrInfo>>,
    /// The SMC-D DMB (`-D`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dmbinfo: Option<DmbView>,
    /// The owning processes (`-p`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<P>,
}

impl<'a> SocketView<'a, ()> {
    /// The view of `s`, without owners.
    pub fn new(s: &'a SmcSocket) -> SocketView<'a, ()> {
        SocketView::with_processes(s, None)
    }
}

impl<'a, P: Serialize> SocketView<'a, P> {
    /// The view of `s` with its owners `processes` (`Some` with `-p`).
    pub fn with_processes(s: &'a SmcSocket, processes: Option<P>) -> SocketView<'a, P> {
        SocketView {
            state: reasons::socket_state(s.state),
            state_code: s.state,
            family: s.family,
            mode: Cow::Borrowed(s.mode.label()),
            uid: s.uid,
            inode: s.inode,
            local: s.local.to_string(),
            peer: s.peer.to_string(),
            interface: s.interface,
            shutdown: reasons::shutdown(s.shutdown),
            fallback: s.fallback.map(|(r, p)| SocketFallback::new(r, p)),
            conninfo: s.conninfo.as_ref().map(Cow::Borrowed),
            lgrinfo: s.lgrinfo.as_ref().map(Cow::Borrowed),
            dmbinfo: s.dmbinfo.as_ref().map(DmbView::new),
            processes,
        }
    }
}

/// A fallback socket's reason and the peer's diagnosis (0 when the peer sent none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketFallback {
    /// The reason's code in hex.
    pub reason: String,
    /// The peer's code in hex.
    pub peer_diagnosis: String,
    /// The reason, decoded.
    pub reason_decoded: ReasonView,
    /// The peer's code, decoded.
    pub peer_diagnosis_decoded: ReasonView,
}

impl SocketFallback {
    /// The fallback with `reason` and the peer's `peer` code.
    pub fn new(reason: u32, peer: u32) -> SocketFallback {
        let reason_decoded = ReasonView::new(reason);
        let peer_diagnosis_decoded = ReasonView::new(peer);
        SocketFallback {
            reason: reason_decoded.hex.clone(),
            peer_diagnosis: peer_diagnosis_decoded.hex.clone(),
            reason_decoded,
            peer_diagnosis_decoded,
        }
    }
}

/// An SMC-D connection's DMB: GIDs and tokens as 16 hex digits, as the text shows them (JSON
/// numbers past 2^53 lose digits in most readers), and the link group's id as `smcrun
/// linkgroup` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmbView {
    /// The link group's number.
    pub link_id: u32,
    /// The link group's id as `smcrun linkgroup` prints it.
    pub lgr_id: String,
    /// Local GID.
    pub my_gid: String,
    /// Peer GID.
    pub peer_gid: String,
    /// Local DMB token.
    pub token: String,
    /// Peer DMB token.
    pub peer_token: String,
    /// Local extended GID (SMC-Dv2; `null` when the kernel has none).
    pub my_gid_ext: Option<String>,
    /// Peer extended GID.
    pub peer_gid_ext: Option<String>,
}

/// A 64-bit GID or token as 16 hex digits.
pub fn hex16(v: u64) -> String {
    format!("{v:016x}")
}

impl DmbView {
    /// The view of `d`.
    pub fn new(d: &DmbInfo) -> DmbView {
        DmbView {
            link_id: d.link_id,
            lgr_id: lgr_id(d.link_id),
            my_gid: hex16(d.my_gid),
            peer_gid: hex16(d.peer_gid),
            token: hex16(d.token),
            peer_token: hex16(d.peer_token),
            my_gid_ext: d.my_gid_ext.map(hex16),
            peer_gid_ext: d.peer_gid_ext.map(hex16),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::raw;
    use crate::json::golden::{assert_reads_back, assert_same, value};
    use smcrun_kernel::sock_diag;

    fn sockets(phase: &str, ext: u8) -> Vec<SmcSocket> {
        sock_diag::parse(&raw(phase, &format!("sock_diag_ext{ext}"))).unwrap()
    }

    #[test]
    fn ss_of_every_capture_as_golden() {
        for phase in ["smcr", "smcd", "fallback", "smcd-fallback"] {
            for ext in [0, 1, 2, 8, 15] {
                let s = sockets(phase, ext);
                let v = SsView {
                    sockets: s.iter().map(SocketView::new).collect(),
                };
                assert_same(&format!("ss-{phase}-ext{ext}"), &v);
            }
        }
    }

    #[test]
    fn ss_of_every_capture_reads_back_as_printed() {
        for phase in ["smcr", "smcd", "fallback", "smcd-fallback"] {
            for ext in [0, 1, 2, 8, 15] {
                assert_reads_back::<SsView<Vec<crate::ss::Owner>>>(&format!("ss-{phase}-ext{ext}"));
            }
        }
    }

    #[test]
    fn ss_smc_socket_has_null_fallback_and_unreported_extended_gid_is_null() {
        let s = sockets("smcd", 8);
        let d = s
            .iter()
            .find(|s| s.dmbinfo.is_some())
            .expect("an SMC-D socket");
        let mut d = d.clone();
        d.dmbinfo.as_mut().unwrap().my_gid_ext = None;
        let j = value(&SocketView::new(&d));
        assert!(j["fallback"].is_null(), "{j}");
        assert!(j["dmbinfo"]["my_gid_ext"].is_null(), "{j}");
        assert!(
            j.get("processes").is_none() && j.get("conninfo").is_none(),
            "{j}"
        );
        let j = value(&SocketView::with_processes(&d, Some([7])));
        assert_eq!(j["processes"], serde_json::json!([7]));
    }
}
