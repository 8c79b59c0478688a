//! The per-process report: what smcrun's runtime, inside a program, knows about that program's
//! connections, written as JSON into the run directory, and read by `smcrun ps`, `smcrun why` and
//! the exporter. The field names are part of smcrun's stable interface ([`REPORT_VERSION`]).
//!
//! A report is rewritten in place (through a descriptor the process opened while it still had the
//! rights it started with, so that it keeps working after a uid switch), which a reader may catch
//! half way: `seq` opens the document and `seq_end` closes it with the same number, and [`parse`]
//! tells a torn read from a whole one.

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

pub mod text;

/// Version of the report layout; bumped when a field changes meaning.
pub const REPORT_VERSION: u32 = 2;
/// Endpoints listed in a report.
pub const TOP_ENDPOINTS: usize = 16;
/// Connections kept in a report's `recent` list.
pub const RECENT_CONNECTIONS: usize = 256;

/// One process's view of its own sockets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessReport {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// The number of this write; `seq_end` repeats it at the end of the document.
    pub seq: u64,
    /// The process.
    pub pid: u32,
    /// Its parent when the report was written.
    pub ppid: u32,
    /// The name the program was started as (the base name of argv\[0\]: `redis-server`, even when
    /// that is a symlink to another file).
    pub program: String,
    /// The executable's path, symlinks resolved.
    pub exe: String,
    /// The uid the process ran as when it wrote this (it may have switched away from the uid that
    /// owns the run directory, e.g. a server that started as root and runs as nobody).
    pub uid: u32,
    /// The process start time in clock ticks since boot (`/proc/PID/stat` field 22), so a reader
    /// can tell a live process from a new one that reused the pid.
    pub start_ticks: u64,
    /// The process's pid namespace (the inode of `/proc/self/ns/pid`): `pid` is its number there.
    /// A reader in another pid namespace (the host, reading a container's reports) finds the
    /// process under its own number through it (see `smcrun_runtime::pidns`); 0 when unknown
    /// (an older report), taken as the reader's own.
    #[serde(default)]
    pub pid_ns: u64,
    /// When the report was last written (seconds since the epoch).
    pub updated_unix: u64,
    /// True once the process has exited normally (the last report it wrote).
    pub exited: bool,
    /// The shim's mode setting: "smc", "inet" or "auto".
    pub mode: String,
    /// The shim's fallback setting: "tcp" or "strict" (empty in an older smcrun's report).
    #[serde(default)]
    pub fallback: String,
    /// The policy in effect, canonical (`smc port 6379; tcp`); empty without one (every TCP
    /// socket is made SMC) or in an older smcrun's report.
    #[serde(default)]
    pub policy: String,
    /// Sockets the program created or was handed.
    pub sockets: SocketCounts,
    /// Connections (outgoing connects and accepted ones), by how they ran. Exact: counted by the
    /// hooks as they happen.
    pub connections: ConnectionCounts,
    /// Why connections did not run over SMC, most frequent first.
    pub reasons: Vec<ReasonCount>,
    /// Per remote endpoint, most connections first (at most [`TOP_ENDPOINTS`]).
    pub endpoints: Vec<Endpoint>,
    /// The most recent connections (at most [`RECENT_CONNECTIONS`]), oldest first.
    pub recent: Vec<Connection>,
    /// Connections in `endpoints` once but no longer in `recent`.
    pub recent_dropped: u64,
    /// Connections counted in `connections` but missing from `endpoints` and `recent` (their
    /// details arrived faster than the runtime could take them).
    pub detail_dropped: u64,
    /// Internal errors (kernel queries or report writes that failed).
    pub errors: u64,
    /// The last such error.
    pub last_error: Option<String>,
    /// Repeats `seq`: a document whose two numbers differ was read while being rewritten.
    pub seq_end: u64,
}

/// What happened at socket() time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SocketCounts {
    /// TCP sockets made as SMC sockets.
    pub converted: u64,
    /// TCP sockets that stayed TCP (the kernel refused an SMC socket, or the policy).
    pub tcp_at_creation: u64,
    /// Other sockets (UDP, UNIX, ...), never touched.
    pub untouched: u64,
}

/// Connections by outcome: `total` = `smc_r + smc_d + smc_unknown + tcp + pending +
/// unclassified`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectionCounts {
    /// Every connection made or accepted (a connect that failed is not one).
    pub total: u64,
    /// Ran over SMC-R.
    pub smc_r: u64,
    /// Ran over SMC-D.
    pub smc_d: u64,
    /// Ran over SMC, but closed before the runtime could read whether SMC-R or SMC-D.
    pub smc_unknown: u64,
    /// Ran over TCP (fallback, or a TCP socket from the start).
    pub tcp: u64,
    /// Open, handshake over or not, and not classified yet.
    pub pending: u64,
    /// Gone before they could be classified (closed by a call the shim does not see, or still
    /// undecided when the program exited).
    pub unclassified: u64,
    /// Connects that failed (refused, timed out, unreachable); not connections.
    pub failed_connects: u64,
}

impl ConnectionCounts {
    /// Connections without an answer: pending and unclassified.
    pub fn not_classified(&self) -> u64 {
        self.pending + self.unclassified
    }

    /// Connections that ran over SMC, R, D or unknown.
    pub fn smc(&self) -> u64 {
        self.smc_r + self.smc_d + self.smc_unknown
    }
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

impl ReasonCount {
    /// The code or errno, then the words: `0x03010000 peer did not indicate SMC`.
    pub fn label(&self) -> String {
        match self.code.as_deref().or(self.errno.as_deref()) {
            Some(id) => format!("{id} {}", self.text),
            None => self.text.clone(),
        }
    }
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
    /// Connections over SMC whose mode was not seen.
    pub smc_unknown: u64,
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
    /// "SMC-R", "SMC-D", "SMC" (mode not seen) or "TCP".
    pub mode: String,
    /// Why it was TCP (or why its mode is not known).
    pub reason: Option<ReasonCount>,
    /// The peer's diagnosis code (`0x03030000`), when it sent one.
    pub peer_diagnosis: Option<String>,
    /// When it was classified (seconds since the epoch).
    pub at_unix: u64,
}

/// `n` and the noun, singular or plural: `1 connection`, `2 connections`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl ProcessReport {
    /// The one-line summary printed at exit with SMCRUN_REPORT=1, e.g. `smcrun: pid 4242
    /// redis-server: 100 connections, 98 SMC-R, 2 TCP (0x03010000 peer did not indicate SMC: 2)`.
    pub fn summary_line(&self) -> String {
        let c = &self.connections;
        let mut s = format!(
            "smcrun: pid {} {}: {}, {} SMC-R",
            self.pid,
            text::safe(&self.program),
            count(c.total, "connection"),
            c.smc_r
        );
        if c.smc_d > 0 {
            s += &format!(", {} SMC-D", c.smc_d);
        }
        if c.smc_unknown > 0 {
            s += &format!(", {} SMC (mode not seen)", c.smc_unknown);
        }
        s += &format!(", {} TCP", c.tcp);
        if !self.reasons.is_empty() {
            let parts: Vec<String> = self
                .reasons
                .iter()
                .map(|r| format!("{}: {}", text::safe(&r.label()), r.count))
                .collect();
            s += &format!(" ({})", parts.join("; "));
        }
        if c.not_classified() > 0 {
            s += &format!(", {} not classified", c.not_classified());
        }
        if c.failed_connects > 0 {
            s += &format!(", {}", count(c.failed_connects, "failed connect"));
        }
        s
    }

    /// The report as written to the file: pretty JSON, `seq_end` set to `seq`.
    pub fn to_bytes(&mut self) -> Vec<u8> {
        self.seq_end = self.seq;
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

/// Why a report file could not be taken as a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Read while being rewritten (invalid JSON, or `seq` and `seq_end` differ): read again.
    Torn,
    /// Written by an smcrun with another report layout.
    Version(u32),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Torn => f.write_str("the report was being rewritten (or is not a report)"),
            ParseError::Version(v) => write!(
                f,
                "the report has layout version {v}; this smcrun reads version {REPORT_VERSION}"
            ),
        }
    }
}

/// Reads a report file's bytes. An empty file is a process that registered (at fork, or before a
/// uid switch) but has written no numbers yet: `Ok(None)`.
pub fn parse(bytes: &[u8]) -> Result<Option<ProcessReport>, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| ParseError::Torn)?;
    match v.get("version").and_then(|v| v.as_u64()) {
        Some(n) if n == u64::from(REPORT_VERSION) => {}
        Some(n) => return Err(ParseError::Version(n as u32)),
        None => return Err(ParseError::Torn),
    }
    let r: ProcessReport = serde_json::from_value(v).map_err(|_| ParseError::Torn)?;
    if r.seq != r.seq_end {
        return Err(ParseError::Torn);
    }
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ProcessReport {
        ProcessReport {
            version: REPORT_VERSION,
            seq: 7,
            pid: 4242,
            program: "redis-server".into(),
            connections: ConnectionCounts {
                total: 101,
                smc_r: 98,
                tcp: 2,
                unclassified: 1,
                failed_connects: 1,
                ..Default::default()
            },
            reasons: vec![ReasonCount {
                code: Some("0x03010000".into()),
                errno: None,
                text: "peer did not indicate SMC".into(),
                count: 2,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn summary_line_names_every_number_with_its_plural() {
        assert_eq!(
            sample().summary_line(),
            "smcrun: pid 4242 redis-server: 101 connections, 98 SMC-R, 2 TCP \
             (0x03010000 peer did not indicate SMC: 2), 1 not classified, 1 failed connect"
        );
        let one = ProcessReport {
            pid: 1,
            program: "curl".into(),
            connections: ConnectionCounts {
                total: 1,
                tcp: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            one.summary_line(),
            "smcrun: pid 1 curl: 1 connection, 0 SMC-R, 1 TCP"
        );
    }

    #[test]
    fn whole_torn_empty_and_foreign_reports() {
        let mut r = sample();
        let bytes = r.to_bytes();
        assert_eq!(parse(&bytes), Ok(Some(r.clone())));
        assert_eq!(parse(b""), Ok(None));
        assert_eq!(parse(b"\n"), Ok(None));
        // Cut anywhere: never taken as whole.
        for cut in [1, bytes.len() / 2, bytes.len() - 3] {
            assert_eq!(parse(&bytes[..cut]), Err(ParseError::Torn), "cut at {cut}");
        }
        // The front of a newer write over the back of an older one.
        let mut newer = r.clone();
        newer.seq = 8;
        let newer = newer.to_bytes();
        let mut spliced = newer[..40].to_vec();
        spliced.extend_from_slice(&bytes[40..]);
        assert_eq!(parse(&spliced), Err(ParseError::Torn));
        // A shorter rewrite before its truncate: trailing bytes of the old one.
        let mut short = bytes.clone();
        short.extend_from_slice(b"  }\n");
        assert_eq!(parse(&short), Err(ParseError::Torn));
        assert_eq!(
            parse(br#"{"version": 1, "pid": 3}"#),
            Err(ParseError::Version(1))
        );
    }
}
