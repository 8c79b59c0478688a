//! What `smcrun agent` publishes, and how the views read it.
//!
//! The agent (root) writes two files in [`STATE_DIR`], a directory of root's, mode 0700, each
//! mode 0600 and replaced atomically, both made of the same reading of the kernel's maps:
//! [`SUMMARY_FILE`], the [`Summary`] (totals, per cgroup and per program, the sockets open now
//! counted by network namespace, role and mode, what overflowed: bounded by [`MAX_GROUPS`], small
//! whatever the number of sockets), which is all the exporter reads; and [`STATE_FILE`], the
//! whole [`State`] (the summary's fields, then every open socket and the per-process table, which
//! grow with the sockets and processes), which only `ss -p`, `ps --all` and `why` read. Two files
//! rather than one with the summary first: a reader of the summary then neither reads nor parses
//! the large part, and each file is checked and replaced whole on its own.
//!
//! A reader trusts a file only when the directory and the file are root's and writable by nobody
//! else (no other user can forge or redirect it), the file is a regular file (a symlink is not
//! followed) of at most [`MAX_SUMMARY_BYTES`] or [`MAX_STATE_BYTES`] (a bounded read), and the
//! agent that wrote it still runs (its pid started when the file says). Otherwise the views use
//! today's sources (smc_diag, /proc, the runtime's reports).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The agent's directory.
pub const STATE_DIR: &str = "/run/smcrun-agent";
/// The whole state in it ([`State`]).
pub const STATE_FILE: &str = "state.json";
/// The summary in it ([`Summary`]): what the exporter reads.
pub const SUMMARY_FILE: &str = "summary.json";
/// The largest state file a reader reads (the agent's own bounds keep it far below).
pub const MAX_STATE_BYTES: u64 = 32 << 20;
/// The largest summary file a reader reads ([`MAX_GROUPS`] cgroups and programs, each with its
/// fallback reasons, and [`MAX_GROUPS`] network namespaces keep it far below).
pub const MAX_SUMMARY_BYTES: u64 = 4 << 20;
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

/// Sockets open now of one role, by mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modes {
    /// Over SMC-R.
    pub smcr: u64,
    /// Over SMC-D.
    pub smcd: u64,
    /// Fallen back to TCP.
    pub tcp: u64,
    /// No mode yet: a listening socket, or a connection whose handshake has not ended.
    pub undecided: u64,
}

impl Modes {
    /// Every socket counted.
    pub fn total(&self) -> u64 {
        self.smcr + self.smcd + self.tcp + self.undecided
    }
}

/// Sockets open now in one network namespace, by role and mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Live {
    /// The network namespace's cookie (`SO_NETNS_COOKIE`).
    pub netns_cookie: u64,
    /// Sockets that connected.
    pub client: Modes,
    /// Sockets that were accepted.
    pub server: Modes,
    /// Listening sockets.
    pub listen: Modes,
}

/// What did not fit anywhere (each a count, never silent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overflow {
    /// Sockets not recorded: the kernel's table of open sockets was full.
    pub live_full: u64,
    /// Ended records lost: the kernel's ring buffer of ended records was full.
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

/// The agent's bounded summary, [`SUMMARY_FILE`] (its `Default` is an agent that recorded
/// nothing, which tests and the manual's sample scrape fill in).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The agent's pid.
    pub agent_pid: u32,
    /// Its start time (clock ticks after boot).
    pub agent_start_ticks: u64,
    /// When this was written (milliseconds since the epoch): the agent writes only when
    /// something changed, so an idle agent's file keeps the time of the last change.
    pub written_ms: u64,
    /// Whether the probes are attached (false while smc is not loaded).
    pub attached: bool,
    /// Why not, when not.
    pub error: Option<String>,
    /// How often the probes were attached (each load of smc once).
    pub attachments: u64,
    /// All connections.
    pub total: Sides,
    /// Per cgroup ([`MAX_GROUPS`], then [`OTHER`]).
    pub cgroups: Vec<Group>,
    /// Per program name ([`MAX_GROUPS`], then [`OTHER`]).
    pub programs: Vec<Group>,
    /// Sockets open now, per network namespace (at most [`MAX_GROUPS`] namespaces, those with
    /// the most sockets; the sockets of the rest are in `live_unlisted`; absent in an older
    /// agent's file, which then gives no census).
    #[serde(default)]
    pub live: Vec<Live>,
    /// Open sockets of network namespaces not in `live`.
    #[serde(default)]
    pub live_unlisted: u64,
    /// The network namespace (cookie) whose open SMC sockets are all in the record: the agent's
    /// own, once every socket its smc_diag showed was recorded (sockets made before the probes
    /// were attached are not, until they close). `None` while that is not known.
    #[serde(default)]
    pub census_netns: Option<u64>,
    /// What did not fit.
    pub overflow: Overflow,
}

impl Summary {
    /// The sockets open now in the network namespace `cookie`: `None` when the summary cannot
    /// say (the probes are not attached, the record of that namespace is not known to be
    /// complete, or it is among those past [`MAX_GROUPS`]).
    pub fn live_in(&self, cookie: u64) -> Option<Live> {
        if !self.attached || self.census_netns != Some(cookie) {
            return None;
        }
        match self.live.iter().find(|l| l.netns_cookie == cookie) {
            Some(l) => Some(*l),
            None if self.live_unlisted == 0 => Some(Live {
                netns_cookie: cookie,
                ..Live::default()
            }),
            None => None,
        }
    }
}

/// The whole published state, [`STATE_FILE`]: the [`Summary`]'s fields, then the parts that grow
/// with the sockets and processes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The summary (its fields at the top level of the JSON).
    #[serde(flatten)]
    pub summary: Summary,
    /// Per process.
    pub processes: Vec<Process>,
    /// Sockets open now.
    pub sockets: Vec<Socket>,
}

impl State {
    /// The counts of process `pid` (the one that runs now under that pid).
    pub fn process(&self, pid: u32) -> Option<&Process> {
        let now = smcrun_rundir::process::start_ticks(&format!("/proc/{pid}/stat"));
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

/// What the agent wrote that says which agent wrote it.
trait Written: serde::de::DeserializeOwned {
    /// The writer's pid and start time.
    fn writer(&self) -> (u32, u64);
}

impl Written for Summary {
    fn writer(&self) -> (u32, u64) {
        (self.agent_pid, self.agent_start_ticks)
    }
}

impl Written for State {
    fn writer(&self) -> (u32, u64) {
        self.summary.writer()
    }
}

/// Reads and checks file `name` in `dir`, of at most `max` bytes (see the module's text).
fn read_file<T: Written>(dir: &Path, name: &str, max: u64) -> Result<T, Unavailable> {
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
    let path = dir.join(name);
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
    if m.len() > max {
        return Err(refused(format!("{} is over {max} bytes", path.display())));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(format!("{}: {e}", path.display())))?;
    if bytes.len() as u64 > max {
        return Err(refused(format!("{} is over {max} bytes", path.display())));
    }
    let s: T =
        serde_json::from_slice(&bytes).map_err(|e| refused(format!("{}: {e}", path.display())))?;
    let (pid, ticks) = s.writer();
    let now = smcrun_rundir::process::start_ticks(&format!("/proc/{pid}/stat"));
    if now != Some(ticks) {
        return Err(Unavailable::Gone(pid));
    }
    Ok(s)
}

/// Reads and checks the whole state in `dir` (see the module's text).
pub fn read_in(dir: &Path) -> Result<State, Unavailable> {
    read_file(dir, STATE_FILE, MAX_STATE_BYTES)
}

/// Reads and checks the summary in `dir` (see the module's text): the same checks as
/// [`read_in`], on the small file.
pub fn read_summary_in(dir: &Path) -> Result<Summary, Unavailable> {
    read_file(dir, SUMMARY_FILE, MAX_SUMMARY_BYTES)
}

/// The running agent's state, from [`STATE_DIR`].
pub fn read() -> Result<State, Unavailable> {
    read_in(Path::new(STATE_DIR))
}

/// The running agent's summary, from [`STATE_DIR`].
pub fn read_summary() -> Result<Summary, Unavailable> {
    read_summary_in(Path::new(STATE_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn summary(pid: u32, ticks: u64) -> Summary {
        Summary {
            agent_pid: pid,
            agent_start_ticks: ticks,
            written_ms: 1,
            attached: true,
            attachments: 1,
            census_netns: Some(7),
            live: vec![Live {
                netns_cookie: 7,
                listen: Modes {
                    undecided: 3,
                    ..Modes::default()
                },
                ..Live::default()
            }],
            ..Summary::default()
        }
    }

    fn state(pid: u32, ticks: u64) -> State {
        State {
            summary: summary(pid, ticks),
            processes: Vec::new(),
            sockets: vec![Socket {
                inode: 1,
                pid,
                comm: "x".into(),
                role: "listen".into(),
                mode: "-".into(),
                device: None,
                reason: None,
                peer_diagnosis: None,
                cgroup_id: 1,
                netns_cookie: 7,
                tx_bytes: 0,
                rx_bytes: 0,
            }],
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
        let t = smcrun_rundir::process::start_ticks(&format!("/proc/{pid}/stat")).unwrap();
        (pid, t)
    }

    /// The trust checks on file `name` of `dir`, written from `make(pid, ticks)`, read by `read`.
    fn trust_checks<T: Serialize + PartialEq + std::fmt::Debug>(
        d: &Path,
        name: &str,
        max: u64,
        make: impl Fn(u32, u64) -> T,
        read: impl Fn(&Path) -> Result<T, Unavailable>,
    ) {
        let root = nix_is_root();
        assert_eq!(read(&d.join("none")), Err(Unavailable::NotRunning));
        assert_eq!(read(d), Err(Unavailable::NotRunning));
        let (pid, t) = me();
        let f = d.join(name);
        std::fs::write(&f, serde_json::to_vec(&make(pid, t)).unwrap()).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        if root {
            assert_eq!(read(d).unwrap(), make(pid, t));
        } else {
            // Not root's: refused, whatever it says.
            assert!(matches!(read(d), Err(Unavailable::Refused(_))));
            return;
        }
        // Another pid start: the agent that wrote it is gone.
        std::fs::write(&f, serde_json::to_vec(&make(pid, t + 1)).unwrap()).unwrap();
        assert_eq!(read(d), Err(Unavailable::Gone(pid)));
        // Writable by others: refused.
        std::fs::write(&f, serde_json::to_vec(&make(pid, t)).unwrap()).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(read(d), Err(Unavailable::Refused(_))));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        // The directory writable by others: refused.
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(read(d), Err(Unavailable::Refused(_))));
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A symlink in its place is not followed.
        std::fs::rename(&f, d.join("real")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), &f).unwrap();
        assert!(matches!(read(d), Err(Unavailable::Refused(_))));
        std::fs::remove_file(&f).unwrap();
        // Too big: refused without reading it all.
        let big = std::fs::File::create(&f).unwrap();
        big.set_len(max + 10).unwrap();
        assert!(matches!(read(d), Err(Unavailable::Refused(w)) if w.contains("over")));
        std::fs::remove_file(&f).unwrap();
    }

    #[test]
    fn a_state_is_trusted_only_when_roots_bounded_and_its_agent_runs() {
        let d = dir("a");
        trust_checks(&d, STATE_FILE, MAX_STATE_BYTES, state, read_in);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_summary_is_trusted_only_when_roots_bounded_and_its_agent_runs() {
        let d = dir("s");
        trust_checks(
            &d,
            SUMMARY_FILE,
            MAX_SUMMARY_BYTES,
            summary,
            read_summary_in,
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_state_is_the_summarys_fields_then_the_large_parts() {
        let (pid, t) = me();
        let st = state(pid, t);
        let v: serde_json::Value = serde_json::to_value(&st).unwrap();
        // The summary's fields at the top level (what `jq .attached` and the like read).
        assert_eq!(v["attached"], true);
        assert_eq!(v["live"][0]["listen"]["undecided"], 3);
        assert_eq!(v["sockets"][0]["inode"], 1);
        // A summary reader takes the summary out of a whole state, and a summary has no
        // per-socket or per-process part.
        let back: Summary = serde_json::from_value(v).unwrap();
        assert_eq!(back, st.summary);
        let sv = serde_json::to_value(&st.summary).unwrap();
        assert!(sv.get("sockets").is_none() && sv.get("processes").is_none());
    }

    #[test]
    fn an_older_agents_summary_is_read_without_a_census() {
        let mut v = serde_json::to_value(summary(1, 1)).unwrap();
        for k in ["live", "live_unlisted", "census_netns"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let s: Summary = serde_json::from_value(v).unwrap();
        assert_eq!(s.census_netns, None);
        assert_eq!(s.live_in(7), None);
    }

    #[test]
    fn live_sockets_of_a_namespace_are_known_or_said_unknown() {
        let mut s = summary(1, 1);
        assert_eq!(s.live_in(7).unwrap().listen.undecided, 3);
        // Only the namespace whose record is known complete.
        assert_eq!(s.live_in(8), None);
        s.census_netns = Some(8);
        // A namespace not listed has none, while every namespace is listed.
        assert_eq!(s.live_in(8).unwrap().listen.total(), 0);
        // When some were past the bound, an unlisted namespace's count is not known.
        s.live_unlisted = 5;
        assert_eq!(s.live_in(8), None);
        s.census_netns = Some(7);
        assert_eq!(s.live_in(7).unwrap().listen.undecided, 3);
        // Not while the probes are detached.
        s.attached = false;
        assert_eq!(s.live_in(7), None);
        // Not when it does not say (an older agent's file).
        s.attached = true;
        s.census_netns = None;
        assert_eq!(s.live_in(7), None);
    }

    fn nix_is_root() -> bool {
        rustix::process::geteuid().is_root()
    }
}
