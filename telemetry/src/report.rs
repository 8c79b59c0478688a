//! The per-process report the shim's sidecar writes and `smcrun ps` / `smcrun why` read: a JSON
//! document whose field names are part of smcrun's stable interface.

use serde::{Deserialize, Serialize};

/// Version of the report layout; bumped when a field changes meaning.
pub const REPORT_VERSION: u32 = 1;

/// One process's view of its own sockets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessReport {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// The process.
    pub pid: u32,
    /// The executable's base name.
    pub program: String,
    /// The executable's full path.
    pub exe: String,
    /// The process start time in clock ticks since boot (`/proc/PID/stat` field 22), so a reader
    /// can tell a live process from a new one that reused the pid.
    pub start_ticks: u64,
    /// When the report was last written (seconds since the epoch).
    pub updated_unix: u64,
    /// True once the process has exited normally (the last report it wrote).
    pub exited: bool,
    /// The shim's mode setting: "smc", "inet" or "auto".
    pub mode: String,
    /// Sockets the program created.
    pub sockets: SocketCounts,
    /// Connections (outgoing connects and accepted ones), by how they ran.
    pub connections: ConnectionCounts,
    /// Why connections did not run over SMC, most frequent first.
    pub reasons: Vec<ReasonCount>,
    /// Per remote endpoint, most connections first (at most [`TOP_ENDPOINTS`]).
    pub endpoints: Vec<Endpoint>,
    /// The most recent connections (at most [`RECENT_CONNECTIONS`]), oldest first.
    pub recent: Vec<Connection>,
    /// Connections classified but no longer in `recent`.
    pub recent_dropped: u64,
    /// Events the hooks could not queue because the sidecar was behind (counted, not lost
    /// silently: the numbers above miss exactly these).
    pub dropped_events: u64,
    /// Internal errors (kernel queries or report writes that failed).
    pub errors: u64,
    /// The last such error.
    pub last_error: Option<String>,
}

/// Endpoints listed in a report.
pub const TOP_ENDPOINTS: usize = 16;
/// Connections kept in a report's `recent` list.
pub const RECENT_CONNECTIONS: usize = 256;

/// What happened at socket() time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SocketCounts {
    /// TCP sockets made as SMC sockets.
    pub converted: u64,
    /// TCP sockets that stayed TCP because the kernel refused an SMC socket.
    pub tcp_at_creation: u64,
    /// Other sockets (UDP, UNIX, ...), never touched.
    pub untouched: u64,
}

/// Connections by outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectionCounts {
    /// All connections seen.
    pub total: u64,
    /// Ran over SMC-R.
    pub smc_r: u64,
    /// Ran over SMC-D.
    pub smc_d: u64,
    /// Ran over TCP (fallback, or a TCP socket from the start).
    pub tcp: u64,
    /// Not yet classified (handshake in progress).
    pub pending: u64,
    /// Closed, or otherwise gone, before they could be classified.
    pub unclassified: u64,
}

/// A reason and how often it applied.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReasonCount {
    /// The kernel's fallback reason (`0x03010000`), for SMC sockets that fell back.
    pub code: Option<String>,
    /// The errno name (`EAFNOSUPPORT`), for sockets that were TCP from socket() on.
    pub errno: Option<String>,
    /// In words, decoded.
    pub text: String,
    /// How many connections.
    pub count: u64,
}

/// Connections to (client) or from (server) one remote endpoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Endpoint {
    /// `ip:port` for outgoing connections, `ip` for accepted ones (their ports are ephemeral).
    pub remote: String,
    /// "client" or "server".
    pub role: String,
    /// Connections over SMC-R.
    pub smc_r: u64,
    /// Connections over SMC-D.
    pub smc_d: u64,
    /// Connections over TCP.
    pub tcp: u64,
    /// Why the TCP ones were TCP.
    pub reasons: Vec<ReasonCount>,
}

/// One classified connection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Connection {
    /// The file descriptor it had.
    pub fd: i32,
    /// "client" or "server".
    pub role: String,
    /// Local address, when known.
    pub local: Option<String>,
    /// Remote address, when known.
    pub remote: Option<String>,
    /// "SMC-R", "SMC-D" or "TCP".
    pub mode: String,
    /// Why it was TCP.
    pub reason: Option<ReasonCount>,
    /// The peer's diagnosis code (`0x03030000`), when it sent one.
    pub peer_diagnosis: Option<String>,
    /// When it was classified (seconds since the epoch).
    pub at_unix: u64,
}

impl ProcessReport {
    /// The one-line summary the shim prints at exit with SMCRUN_REPORT=1, e.g.
    /// `smcrun: pid 4242 redis-server: 100 connections, 98 SMC-R, 2 TCP (0x03010000 peer did not
    /// indicate SMC: 2)`.
    pub fn summary_line(&self) -> String {
        let c = &self.connections;
        let mut s = format!(
            "smcrun: pid {} {}: {} connections, {} SMC-R",
            self.pid, self.program, c.total, c.smc_r
        );
        if c.smc_d > 0 {
            s += &format!(", {} SMC-D", c.smc_d);
        }
        s += &format!(", {} TCP", c.tcp);
        if !self.reasons.is_empty() {
            let parts: Vec<String> = self
                .reasons
                .iter()
                .map(|r| match (&r.code, &r.errno) {
                    (Some(code), _) => format!("{code} {}: {}", r.text, r.count),
                    (None, Some(e)) => format!("{e} {}: {}", r.text, r.count),
                    _ => format!("{}: {}", r.text, r.count),
                })
                .collect();
            s += &format!(" ({})", parts.join("; "));
        }
        if c.pending + c.unclassified > 0 {
            s += &format!(", {} not classified", c.pending + c.unclassified);
        }
        if self.dropped_events > 0 {
            s += &format!(", {} events dropped", self.dropped_events);
        }
        s
    }
}
