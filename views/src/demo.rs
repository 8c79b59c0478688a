//! `smcrun demo --json`: how each socket of the demo's echo pair really ran (its mode, device,
//! link group or fallback reason, read from smc_diag) and whether every byte came back intact.
//! The demo fills it in and prints it; a reader (the VM's guest checks) reads it back.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// How one socket really ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemoSocket {
    /// The connection's number (from 1).
    pub connection: u16,
    /// `client` or `server`.
    pub side: Cow<'static, str>,
    /// Its local address.
    pub local: String,
    /// Its peer's address.
    pub peer: String,
    /// What the socket is: "AF_SMC", "IPPROTO_SMC", "TCP", or "SMC" for an SMC socket whose fd
    /// already reads as TCP because it fell back.
    pub socket: Cow<'static, str>,
    /// "SMC-R", "SMC-D", "TCP" or "SMC?": the text's `mode` column (and `ps`'s and `ss`'s word).
    pub mode: Cow<'static, str>,
    /// The SMC device the connection used: the RDMA device (`rxe_lo`, `mlx5_0`) for SMC-R, the
    /// ISM device (`loopback-ism`) for SMC-D.
    pub device: Option<String>,
    /// The link group (`00000100`), for SMC connections.
    pub link_group: Option<String>,
    /// Fallback reason code (hex) when an SMC socket fell back to TCP.
    pub fallback_reason: Option<String>,
    /// The peer's diagnosis code (hex) when it sent one.
    pub peer_diagnosis: Option<String>,
    /// In words.
    pub why: String,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemoReport {
    /// Connections made.
    pub connections: u16,
    /// Bytes each connection sent (and had echoed back).
    pub bytes_per_connection: u64,
    /// Bytes sent over all connections; as many were echoed back.
    pub bytes_sent: u64,
    /// Whether every byte came back, in order.
    pub data_intact: bool,
    /// Connections whose echo differed or came back short.
    pub mismatched_connections: u16,
    /// Sockets over SMC-R.
    pub smc_r: usize,
    /// Over SMC-D.
    pub smc_d: usize,
    /// Over TCP.
    pub tcp: usize,
    /// How long the transfer took.
    pub seconds: f64,
    /// Every socket, client and server.
    pub sockets: Vec<DemoSocket>,
}
