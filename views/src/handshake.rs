//! `smcrun handshake status --json` (and `unload --json`): what net.smc.hs_ctrl selects in a
//! network namespace, smcrun's policy there and the kernel's counts of the connections it decided.
//! The launcher fills it in from `smcrun_bpf::handshake::Status`; a reader (the VM's guest checks)
//! reads it back.

use serde::{Deserialize, Serialize};

/// A namespace's handshake: `{"netns", "selected", "policy"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeStatusView {
    /// The network namespace's nsfs inode number.
    pub netns: u64,
    /// What net.smc.hs_ctrl selects ("" for nothing).
    pub selected: String,
    /// smcrun's policy, when one is loaded.
    pub policy: Option<HandshakePolicyView>,
}

/// smcrun's policy in the namespace and the kernel's decisions under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakePolicyView {
    /// The policy's canonical text (empty: every connection SMC).
    pub text: String,
    /// Loaded since (seconds since the epoch).
    pub since_unix: u64,
    /// Whether net.smc.hs_ctrl selects it (loaded but not selected: another one is).
    pub selected: bool,
    /// Client SYNs it let offer SMC.
    pub client_smc: u64,
    /// Client SYNs it kept TCP.
    pub client_tcp: u64,
    /// Server SYN-ACKs it let accept SMC.
    pub server_smc: u64,
    /// Server SYN-ACKs it kept TCP.
    pub server_tcp: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reads_back_as_printed() {
        // the VM's guest checks (tests/vm/check) read it back: what is printed must parse into
        // the same values, with and without a policy
        let mut s = HandshakeStatusView {
            netns: 4_026_531_840,
            selected: "smcrun_4026531840".into(),
            policy: Some(HandshakePolicyView {
                text: "smc port 6379; tcp".into(),
                since_unix: 1_796_000_000,
                selected: true,
                client_smc: 1,
                client_tcp: 2,
                server_smc: 3,
                server_tcp: 4,
            }),
        };
        for _ in 0..2 {
            let text = serde_json::to_string(&s).unwrap();
            let back: HandshakeStatusView = serde_json::from_str(&text).unwrap();
            assert_eq!(back, s, "{text}");
            s.policy = None;
            s.selected.clear();
        }
    }
}
