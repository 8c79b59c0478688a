//! `smcrun handshake status --json`'s questions: is smcrun's policy the one the namespace's
//! handshake selects, and did the kernel decide connections under it; or is there none of ours.

use crate::source::{self, compact};
use crate::Answer::{self, No, Yes};
use clap::{Subcommand, ValueEnum};
use smcrun_views::handshake::{HandshakePolicyView, HandshakeStatusView};

/// A kind of decision the kernel counts under smcrun's handshake policy.
#[derive(Clone, Copy, ValueEnum)]
pub enum Decision {
    /// A client SYN let offer SMC.
    ClientSmc,
    /// A client SYN kept TCP.
    ClientTcp,
    /// A server SYN-ACK let accept SMC.
    ServerSmc,
    /// A server SYN-ACK kept TCP.
    ServerTcp,
}

impl Decision {
    fn of(self, p: &HandshakePolicyView) -> u64 {
        match self {
            Decision::ClientSmc => p.client_smc,
            Decision::ClientTcp => p.client_tcp,
            Decision::ServerSmc => p.server_smc,
            Decision::ServerTcp => p.server_tcp,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Decision::ClientSmc => "client SMC",
            Decision::ClientTcp => "client TCP",
            Decision::ServerSmc => "server SMC",
            Decision::ServerTcp => "server TCP",
        }
    }
}

/// What a check asks of `smcrun handshake status --json`.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun handshake status --json`, shows smcrun's policy loaded and selected
    /// (with --netns in that namespace, by its inode; with --selected net.smc.hs_ctrl naming
    /// it; with --policy its text), having decided at least one connection of each --decided.
    HandshakeOurs {
        file: String,
        /// The namespace's inode.
        #[arg(long)]
        netns: Option<u64>,
        /// What net.smc.hs_ctrl must select.
        #[arg(long)]
        selected: Option<String>,
        /// The policy's text.
        #[arg(long)]
        policy: Option<String>,
        /// A kind of decision the kernel must have made at least once (repeatable).
        #[arg(long, value_enum)]
        decided: Vec<Decision>,
    },
    /// FILE, a saved `smcrun handshake status --json`, shows no policy of smcrun's, in a network
    /// namespace other than --not-netns.
    HandshakeNone {
        file: String,
        /// The inode of a namespace it must not be.
        #[arg(long)]
        not_netns: Option<u64>,
    },
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::HandshakeOurs {
                file,
                netns,
                selected,
                policy,
                decided,
            } => source::with_file(file, |s: &HandshakeStatusView| {
                let Some(p) = &s.policy else {
                    return No(format!("{file}: no smcrun policy: {}", compact(s)));
                };
                let mut wrong = Vec::new();
                if let Some(n) = netns.filter(|n| *n != s.netns) {
                    wrong.push(format!("netns {}, expected {n}", s.netns));
                }
                if let Some(n) = selected.as_ref().filter(|n| **n != s.selected) {
                    wrong.push(format!(
                        "net.smc.hs_ctrl selects '{}', expected '{n}'",
                        s.selected
                    ));
                }
                if !p.selected {
                    wrong.push("ours is loaded but not selected".into());
                }
                if let Some(t) = policy.as_ref().filter(|t| **t != p.text) {
                    wrong.push(format!("the policy is '{}', expected '{t}'", p.text));
                }
                for d in decided.iter().filter(|d| d.of(p) == 0) {
                    wrong.push(format!("no {} decision", d.name()));
                }
                if wrong.is_empty() {
                    Yes(format!(
                        "netns {}: selected {} (ours), policy '{}', client SYNs {} SMC {} TCP, server SYN-ACKs {} SMC {} TCP",
                        s.netns, s.selected, p.text, p.client_smc, p.client_tcp, p.server_smc, p.server_tcp
                    ))
                } else {
                    No(format!("{file}: {}: {}", wrong.join("; "), compact(s)))
                }
            }),
            Question::HandshakeNone { file, not_netns } => {
                source::with_file(file, |s: &HandshakeStatusView| {
                    if s.policy.is_none() && *not_netns != Some(s.netns) {
                        Yes(format!("netns {}: no smcrun policy", s.netns))
                    } else {
                        No(format!(
                            "{file}: expected a namespace other than {} with no smcrun policy: {}",
                            not_netns.map_or("-".into(), |n| n.to_string()),
                            compact(s)
                        ))
                    }
                })
            }
        }
    }
}
