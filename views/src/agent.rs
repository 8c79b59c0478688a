//! What `smcrun agent` publishes, and how the views read it.
//!
//! The agent (root) writes [`State`] as JSON to [`STATE_FILE`] in [`STATE_DIR`], a directory
//! of root's, mode 0700, the file mode 0600, replaced atomically. A reader trusts it only when
//! the directory and the file are root's and writable by nobody else (no other user can forge
//! or redirect it), the file is a regular file of at most [`MAX_STATE_BYTES`] (a bounded read),
//! and the agent that wrote it still runs (its pid started when the file says). Otherwise the
//! views use today's sources (smc_diag, /proc, the runtime's reports).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The agent's directory.
pub const STATE_DIR: &str = "/run/smcrun-agent";
/// The state file in it.
pub const STATE_FILE: &str = "state.json";
/// The largest state file a reader reads (the agent's own bounds keep it far below).
pub const MAX_STATE_BYTES: u64 = 32 << 20;
/// Processes the agent keeps counts for (the oldest gone ones are dropped first, and counted).
pub const MAX_PROCESSES: usize = 4096;
/// Distinct cgroups and programs with series of their own; the rest are counted as `other`.
pub const MAX_GROUPS: usize = 256;
/// The label of what did not fit in [`MAX_GROUPS`].
pub const OTHER: &str = "other";

/// Connections of one role by mode, and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Over SMC-R.
    pub smcr: u64,
    /// Over SMC-D.
    pub smcd: u64,
    /// Fallen back to TCP.
    pub tcp: u64,
    /// Ended before the kernel said a mode (a handshake that failed or was not seen).
    pub not_seen: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Fallbacks by reason code (`0x03010000`).
    pub reasons: BTreeMap<String, u64>,
}

impl Counts {
    /// Every connection counted.
    pub fn total(&self) -> u64 {
        self.smcr + self.smcd + self.tcp + self.not_seen
    }
}

/// Client and server connections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sides {
    /// Sockets that connected.
    pub client: Counts,
    /// Sockets that were accepted.
    pub server: Counts,
}

/// One process's connections since the agent started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks after boot (tells a reused pid apart).
    pub start_ticks: u64,
    /// Command name the kernel kept.
    pub comm: String,
    /// The executable (`/proc/PID/exe`), when it could be read.
    pub exe: Option<String>,
    /// Its cgroup v2 id.
    pub cgroup_id: u64,
    /// Its connections, ended and open.
    pub sides: Sides,
}

/// Counts of a cgroup or a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The cgroup v2 path (below the cgroup2 root), the program name, or [`OTHER`].
    pub name: String,
    /// Connections.
    pub sides: Sides,
}

/// An SMC socket open now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Socket {
    /// The socket's inode (what smc_diag and /proc/PID/fd show), 0 when none yet.
    pub inode: u64,
    /// The process.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// `client`, `server` or `listen`.
    pub role: String,
    /// `SMC-R`, `SMC-D`, `TCP` or `-` (not decided yet).
    pub mode: String,
    /// The SMC-R link's RDMA device and port.
    pub device: Option<String>,
    /// The fallback reason (`0x03010000`).
    pub reason: Option<String>,
    /// The peer's decline reason.
    pub peer_diagnosis: Option<String>,
    /// cgroup v2 id.
    pub cgroup_id: u64,
    /// Network namespace cookie.
    pub netns_cookie: u64,
    /// Bytes sent and received so far.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
}

/// What did not fit anywhere (each a count, never silent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overflow {
    /// Sockets not recorded: the kernel's live map was full.
    pub live_full: u64,
    /// Ended records lost: the kernel's done map was full.
    pub done_full: u64,
    /// Sends/receives whose bytes were not counted.
    pub inflight_full: u64,
    /// Records ended without their release seen.
    pub stale: u64,
    /// Processes whose counts were dropped ([`MAX_PROCESSES`]).
    pub processes_dropped: u64,
    /// Probe runs the kernel missed (a kprobe hit while its CPU ran one already, a kretprobe
    /// with all its return instances in use): a record or a byte count lost. `None` on kernels
    /// that do not count them (before 6.7).
    #[serde(default)]
    pub probes_missed: Option<u64>,
}

/// The whole published state (its `Default` is an agent that recorded nothing, which tests and
/// the manual's sample scrape fill in).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The agent's pid.
    pub agent_pid: u32,
    /// Its start time (clock ticks after boot).
    pub agent_start_ticks: u64,
    /// When this was written (milliseconds since the epoch).
    pub written_ms: u64,
    /// Whether the probes are attached (false while smc is not loaded).
    pub attached: bool,
    /// Why not, when not.
    pub error: Option<String>,
    /// How often the probes were attached (each load of smc once).
    pub attachments: u64,
    /// All connections.
    pub total: Sides,
    /// Per process.
    pub processes: Vec<Process>,
    /// Per cgroup ([`MAX_GROUPS`], then [`OTHER`]).
    pub cgroups: Vec<Group>,
    /// Per program name ([`MAX_GROUPS`], then [`OTHER`]).
    pub programs: Vec<Group>,
    /// Sockets open now.
    pub sockets: Vec<Socket>,
    /// What did not fit.
    pub overflow: Overflow,
}

impl State {
    /// The counts of process `pid` (the one that runs now under that pid).
    pub fn process(&self, pid: u32) -> Option<&Process> {
        let now = smcrun_runtime::sidecar::start_ticks(&format!("/proc/{pid}/stat"));
        self.processes
            .iter()
            .find(|p| p.pid == pid && Some(p.start_ticks) == now)
    }
}

/// Why the agent's state is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No agent has written a state (the directory or the file is not there).
    NotRunning,
    /// The file is there but not to be trusted or read: why.
    Refused(String),
    /// The agent that wrote it is gone.
    Gone(u32),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NotRunning => write!(f, "no smcrun agent runs"),
            Unavailable::Refused(why) => write!(f, "the agent's state is not used: {why}"),
            Unavailable::Gone(pid) => write!(f, "the smcrun agent (pid {pid}) is gone"),
        }
    }
}

/// Whether `m` is root's and writable by nobody else.
fn roots_own(m: &std::fs::Metadata) -> bool {
    m.uid() == 0 && m.mode() & 0o022 == 0
}

/// Reads and checks the state in `dir` (see the module's text).
pub fn read_in(dir: &Path) -> Result<State, Unavailable> {
    let refused = |why: String| Unavailable::Refused(why);
    let d = match std::fs::symlink_metadata(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unavailable::NotRunning),
        Err(e) => return Err(refused(format!("{}: {e}", dir.display()))),
    };
    if !d.is_dir() || !roots_own(&d) {
        return Err(refused(format!(
            "{} is not a directory of root's that only root can write",
            dir.display()
        )));
    }
    let path = dir.join(STATE_FILE);
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unavailable::NotRunning),
        Err(e) => return Err(refused(format!("{}: {e}", path.display()))),
    };
    let m = f
        .metadata()
        .map_err(|e| refused(format!("{}: {e}", path.display())))?;
    if !m.is_file() || !roots_own(&m) {
        return Err(refused(format!(
            "{} is not a regular file of root's that only root can write",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    f.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(format!("{}: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(refused(format!(
            "{} is over {MAX_STATE_BYTES} bytes",
            path.display()
        )));
    }
    let s: State =
        serde_json::from_slice(&bytes).map_err(|e| refused(format!("{}: {e}", path.display())))?;
    let now = smcrun_runtime::sidecar::start_ticks(&format!("/proc/{}/stat", s.agent_pid));
    if now != Some(s.agent_start_ticks) {
        return Err(Unavailable::Gone(s.agent_pid));
    }
    Ok(s)
}

/// The running agent's state, from [`STATE_DIR`].
pub fn read() -> Result<State, Unavailable> {
    read_in(Path::new(STATE_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn state(pid: u32, ticks: u64) -> State {
        State {
            agent_pid: pid,
            agent_start_ticks: ticks,
            written_ms: 1,
            attached: true,
            error: None,
            attachments: 1,
            total: Sides::default(),
            processes: Vec::new(),
            cgroups: Vec::new(),
            programs: Vec::new(),
            sockets: Vec::new(),
            overflow: Overflow::default(),
        }
    }

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("smcrun-agent-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn me() -> (u32, u64) {
        let pid = std::process::id();
        let t = smcrun_runtime::sidecar::start_ticks(&format!("/proc/{pid}/stat")).unwrap();
        (pid, t)
    }

    #[test]
    fn a_state_is_trusted_only_when_roots_bounded_and_its_agent_runs() {
        let root = nix_is_root();
        let d = dir("a");
        assert_eq!(read_in(&d.join("none")), Err(Unavailable::NotRunning));
        assert_eq!(read_in(&d), Err(Unavailable::NotRunning));
        let (pid, t) = me();
        let f = d.join(STATE_FILE);
        std::fs::write(&f, serde_json::to_vec(&state(pid, t)).unwrap()).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        if root {
            assert_eq!(read_in(&d).unwrap(), state(pid, t));
        } else {
            // Not root's: refused, whatever it says.
            assert!(matches!(read_in(&d), Err(Unavailable::Refused(_))));
            return;
        }
        // Another pid start: the agent that wrote it is gone.
        std::fs::write(&f, serde_json::to_vec(&state(pid, t + 1)).unwrap()).unwrap();
        assert_eq!(read_in(&d), Err(Unavailable::Gone(pid)));
        // Writable by others: refused.
        std::fs::write(&f, serde_json::to_vec(&state(pid, t)).unwrap()).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(read_in(&d), Err(Unavailable::Refused(_))));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A symlink in its place is not followed.
        std::fs::rename(&f, d.join("real")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), &f).unwrap();
        assert!(matches!(read_in(&d), Err(Unavailable::Refused(_))));
        std::fs::remove_file(&f).unwrap();
        // Too big: refused without reading it all.
        let big = std::fs::File::create(&f).unwrap();
        big.set_len(MAX_STATE_BYTES + 10).unwrap();
        assert!(matches!(read_in(&d), Err(Unavailable::Refused(w)) if w.contains("over")));
        let _ = std::fs::remove_dir_all(&d);
    }

    fn nix_is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }
}
