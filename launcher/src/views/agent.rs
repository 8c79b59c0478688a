//! `smcrun agent`: a root daemon that keeps the kernel's own record of every SMC socket (see
//! `smcrun_bpf::agent`), counts ended connections per process, cgroup and program, and
//! publishes the lot for the views (`smcrun_views::agent`: a root-only file, replaced whole
//! every interval). smc.ko may come and go: the probes are attached again each time it loads.

use crate::exit::Exit;
use clap::Args;
use smcrun_bpf::agent::{self as kernel, Agent, Record};
use smcrun_telemetry::features::{kernel_release, KPROBE_MISSED};
use smcrun_views::agent::{
    Counts, Group, Overflow, Process, Sides, Socket, State, MAX_GROUPS, MAX_PROCESSES, OTHER,
    STATE_DIR, STATE_FILE,
};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `smcrun agent` options.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// Milliseconds between reads of the kernel's maps and writes of the state (10 to 60000).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(10..=60000))]
    pub interval_ms: u64,
    /// Say in one line whether this kernel can run the agent, and exit (0: it can).
    #[arg(long)]
    pub check: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// The text of a mode.
fn mode_name(m: u8) -> &'static str {
    match m {
        kernel::MODE_SMCR => "SMC-R",
        kernel::MODE_SMCD => "SMC-D",
        kernel::MODE_TCP => "TCP",
        _ => "-",
    }
}

fn role_name(r: u8) -> &'static str {
    match r {
        kernel::ROLE_CLIENT => "client",
        kernel::ROLE_SERVER => "server",
        _ => "listen",
    }
}

fn reason(code: u32) -> String {
    format!("0x{code:08x}")
}

/// Counts one connection (listening sockets are not connections).
fn count(sides: &mut Sides, r: &Record) {
    let c: &mut Counts = match r.role {
        kernel::ROLE_CLIENT => &mut sides.client,
        kernel::ROLE_SERVER => &mut sides.server,
        _ => return,
    };
    match r.mode {
        kernel::MODE_SMCR => c.smcr += 1,
        kernel::MODE_SMCD => c.smcd += 1,
        kernel::MODE_TCP => {
            c.tcp += 1;
            *c.reasons.entry(reason(r.fallback_rsn)).or_default() += 1;
        }
        _ => c.not_seen += 1,
    }
    c.tx_bytes += r.tx_bytes;
    c.rx_bytes += r.rx_bytes;
}

/// Adds `n` under `name` in a map of at most [`MAX_GROUPS`] names (then [`OTHER`]).
fn group_entry(m: &mut BTreeMap<String, Sides>, name: String) -> &mut Sides {
    let name = if m.contains_key(&name) || m.len() < MAX_GROUPS {
        name
    } else {
        OTHER.to_string()
    };
    m.entry(name).or_default()
}

/// Ended connections counted, per process, cgroup and program.
#[derive(Default)]
struct Counted {
    total: Sides,
    processes: BTreeMap<(u32, u64), Process>,
    cgroups: BTreeMap<String, Sides>,
    programs: BTreeMap<String, Sides>,
    processes_dropped: u64,
    cgroup_paths: HashMap<u64, String>,
}

fn start_ticks(pid: u32) -> u64 {
    smcrun_runtime::sidecar::start_ticks(&format!("/proc/{pid}/stat")).unwrap_or(0)
}

/// The cgroup v2 directory whose inode is `id`, below the cgroup2 root (bounded walk).
fn cgroup_path(id: u64) -> String {
    use std::os::unix::fs::MetadataExt;
    let Some(root) = smcrun_bpf::prereq::cgroup2_root() else {
        return format!("id {id}");
    };
    let mut todo = vec![root.clone()];
    let mut seen = 0;
    while let Some(d) = todo.pop() {
        seen += 1;
        if seen > 20_000 {
            break;
        }
        if std::fs::metadata(&d).is_ok_and(|m| m.ino() == id) {
            let rel = d.strip_prefix(&root).unwrap_or(&d);
            return format!("/{}", rel.display());
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            todo.extend(
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    format!("id {id}")
}

impl Counted {
    fn cgroup_name(&mut self, id: u64) -> String {
        if let Some(p) = self.cgroup_paths.get(&id) {
            return p.clone();
        }
        let p = cgroup_path(id);
        if self.cgroup_paths.len() < 4 * MAX_GROUPS {
            self.cgroup_paths.insert(id, p.clone());
        }
        p
    }

    /// The process entry of a record, made when new (dropping a gone process's counts when
    /// there are [`MAX_PROCESSES`]).
    fn process(&mut self, r: &Record) -> &mut Process {
        let ticks = start_ticks(r.tgid);
        let key = (r.tgid, ticks);
        if !self.processes.contains_key(&key) && self.processes.len() >= MAX_PROCESSES {
            let victim = self
                .processes
                .keys()
                .find(|(pid, t)| start_ticks(*pid) != *t)
                .or_else(|| self.processes.keys().next())
                .copied();
            if let Some(v) = victim {
                self.processes.remove(&v);
                self.processes_dropped += 1;
            }
        }
        self.processes.entry(key).or_insert_with(|| Process {
            pid: r.tgid,
            start_ticks: ticks,
            comm: kernel::text(&r.comm),
            exe: std::fs::read_link(format!("/proc/{}/exe", r.tgid))
                .ok()
                .map(|p| p.display().to_string()),
            cgroup_id: r.cgroup_id,
            sides: Sides::default(),
        })
    }

    fn add(&mut self, r: &Record) {
        if r.role == kernel::ROLE_LISTEN {
            return;
        }
        count(&mut self.total, r);
        count(&mut self.process(r).sides, r);
        let cg = self.cgroup_name(r.cgroup_id);
        count(group_entry(&mut self.cgroups, cg), r);
        count(group_entry(&mut self.programs, kernel::text(&r.comm)), r);
    }
}

fn groups(m: &BTreeMap<String, Sides>) -> Vec<Group> {
    m.iter()
        .map(|(name, sides)| Group {
            name: name.clone(),
            sides: sides.clone(),
        })
        .collect()
}

fn socket(r: &Record) -> Socket {
    let dev = kernel::text(&r.dev);
    Socket {
        inode: r.inode,
        pid: r.tgid,
        comm: kernel::text(&r.comm),
        role: role_name(r.role).to_string(),
        mode: mode_name(r.mode).to_string(),
        device: (r.mode == kernel::MODE_SMCR && !dev.is_empty())
            .then(|| format!("{dev}:{}", r.ibport)),
        reason: (r.mode == kernel::MODE_TCP).then(|| reason(r.fallback_rsn)),
        peer_diagnosis: (r.mode == kernel::MODE_TCP && r.peer_diagnosis != 0)
            .then(|| reason(r.peer_diagnosis)),
        cgroup_id: r.cgroup_id,
        netns_cookie: r.netns_cookie,
        tx_bytes: r.tx_bytes,
        rx_bytes: r.rx_bytes,
    }
}

/// The state to publish: the ended connections counted so far plus the open ones.
fn state(
    counted: &Counted,
    live: &[Record],
    kstats: kernel::AgentStats,
    attached: bool,
    error: Option<String>,
    attachments: u64,
) -> State {
    let mut all = Counted {
        total: counted.total.clone(),
        processes: counted.processes.clone(),
        cgroups: counted.cgroups.clone(),
        programs: counted.programs.clone(),
        processes_dropped: counted.processes_dropped,
        cgroup_paths: counted.cgroup_paths.clone(),
    };
    for r in live {
        all.add(r);
    }
    let me = std::process::id();
    State {
        agent_pid: me,
        agent_start_ticks: start_ticks(me),
        written_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        attached,
        error,
        attachments,
        total: all.total,
        processes: all.processes.into_values().collect(),
        cgroups: groups(&all.cgroups),
        programs: groups(&all.programs),
        sockets: live.iter().map(socket).collect(),
        overflow: Overflow {
            live_full: kstats.live_full,
            done_full: kstats.done_full,
            inflight_full: kstats.inflight_full,
            stale: kstats.stale,
            processes_dropped: all.processes_dropped,
            // the probes' own count: agent() sets it
            probes_missed: None,
        },
    }
}

/// The agent's directory: made root's and 0700, refused if it is anything else.
fn state_dir() -> Result<OwnedFd, String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let d = std::path::Path::new(STATE_DIR);
    match std::fs::DirBuilder::new().mode(0o700).create(d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {STATE_DIR}: {e}")),
    }
    let m = std::fs::symlink_metadata(d).map_err(|e| format!("{STATE_DIR}: {e}"))?;
    if !m.is_dir() || m.uid() != 0 {
        return Err(format!(
            "{STATE_DIR} is not a directory of root's (a symlink or someone else's): remove it"
        ));
    }
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{STATE_DIR}: {e}"))?;
    crate::views::exporter::open_dir(d)
}

/// `smcrun agent`.
pub fn agent(a: &AgentArgs) -> ExitCode {
    let smc = match kernel::check() {
        Ok(smc) => smc,
        Err(why) => {
            eprintln!("smcrun agent: this kernel cannot run the agent: {why}");
            return ExitCode::from(Exit::Unavailable);
        }
    };
    if a.check {
        let how = match smc {
            kernel::Smc::BuiltIn => "smc built in, its types in the kernel's BTF",
            kernel::Smc::Module => "smc a module, with its BTF",
            kernel::Smc::NotLoaded => "smc a module, not loaded now: attached when it is",
        };
        let missed = if KPROBE_MISSED.missing_in(&kernel_release()) == Some(false) {
            "missed probe runs counted".to_string()
        } else {
            format!(
                "missed probe runs not counted: {}",
                KPROBE_MISSED.since_text()
            )
        };
        println!("smcrun agent: this kernel can run the agent (kprobes, BTF; {how}; {missed})");
        return ExitCode::SUCCESS;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("smcrun agent: needs root (it loads BPF programs and writes {STATE_DIR})");
        return ExitCode::from(Exit::Unavailable);
    }
    let dir = match state_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("smcrun agent: {e}");
            return ExitCode::from(Exit::Failed);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let mut counted = Counted::default();
    let mut attached: Option<(u64, Agent)> = None;
    let mut attachments = 0u64;
    let mut error: Option<String> = None;
    let mut kstats = kernel::AgentStats::default();
    // Missed probe runs of the attachments before this one (`None`: the kernel does not count).
    let mut missed_before = Some(0u64);
    let mut said = String::new();
    let mut said_missed = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        let gen = kernel::smc_generation();
        if attached.as_ref().map(|(g, _)| Some(*g)) != Some(gen) {
            // smc went away, or came back as a new load: what was attached is of no use.
            if let Some((_, old)) = attached.take() {
                for r in old.drain().unwrap_or_default() {
                    counted.add(&r);
                }
                let s = old.stats().unwrap_or_default();
                kstats = add_stats(kstats, s);
                missed_before = missed_before.zip(old.probes_missed()).map(|(a, b)| a + b);
            }
            error = match gen {
                None => Some("smc is not loaded".to_string()),
                Some(g) => match Agent::attach() {
                    Ok(ag) => {
                        attachments += 1;
                        attached = Some((g, ag));
                        None
                    }
                    Err(e) => Some(e.to_string()),
                },
            };
            let now = error.clone().unwrap_or_else(|| "attached to smc".into());
            if now != said {
                eprintln!("smcrun agent: {now}");
                said = now;
            }
        }
        let missed = match &attached {
            Some((_, ag)) => missed_before.zip(ag.probes_missed()).map(|(a, b)| a + b),
            None => missed_before,
        };
        if missed.unwrap_or(0) > said_missed {
            // which probes: a missed smc_connect or __smc_release is a connection not recorded
            // or ended late, a missed return a byte count
            if let Some(per) = attached.as_ref().and_then(|(_, ag)| ag.missed_per_probe()) {
                let per: Vec<String> = per
                    .iter()
                    .filter(|(_, k, r)| k + r > 0)
                    .map(|(p, k, r)| format!("{p} {k} kprobe + {r} recursion"))
                    .collect();
                eprintln!(
                    "smcrun agent: probe runs missed: {} (this attachment: {})",
                    missed.unwrap_or(0),
                    per.join(", ")
                );
            }
            said_missed = missed.unwrap_or(0);
        }
        let (live, cur) = match &attached {
            Some((_, ag)) => {
                match ag.drain() {
                    Ok(done) => done.iter().for_each(|r| counted.add(r)),
                    Err(e) => eprintln!("smcrun agent: {e}"),
                }
                (
                    ag.live().unwrap_or_default(),
                    ag.stats().unwrap_or_default(),
                )
            }
            None => (Vec::new(), kernel::AgentStats::default()),
        };
        let st = state(
            &counted,
            &live,
            add_stats(kstats, cur),
            attached.is_some(),
            error.clone(),
            attachments,
        );
        let mut st = st;
        st.overflow.probes_missed = missed;
        let bytes = serde_json::to_vec(&st).expect("the state serialises");
        if let Err(e) =
            crate::views::exporter::write_atomically_mode(&dir, STATE_FILE, &bytes, 0o600)
        {
            eprintln!("smcrun agent: writing {STATE_DIR}/{STATE_FILE}: {e}");
        }
        std::thread::sleep(Duration::from_millis(a.interval_ms));
    }
    let _ = std::fs::remove_file(format!("{STATE_DIR}/{STATE_FILE}"));
    ExitCode::SUCCESS
}

fn add_stats(a: kernel::AgentStats, b: kernel::AgentStats) -> kernel::AgentStats {
    kernel::AgentStats {
        live_full: a.live_full + b.live_full,
        done_full: a.done_full + b.done_full,
        inflight_full: a.inflight_full + b.inflight_full,
        stale: a.stale + b.stale,
        events: a.events + b.events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(role: u8, mode: u8, comm: &str, rsn: u32) -> Record {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm.as_bytes());
        Record {
            tgid: std::process::id(),
            role,
            mode,
            comm: c,
            fallback_rsn: rsn,
            tx_bytes: 3,
            rx_bytes: 5,
            ..Record::default()
        }
    }

    #[test]
    fn connections_are_counted_by_side_mode_and_reason_listeners_not() {
        let mut c = Counted::default();
        c.add(&rec(kernel::ROLE_CLIENT, kernel::MODE_SMCR, "a", 0));
        c.add(&rec(
            kernel::ROLE_SERVER,
            kernel::MODE_TCP,
            "a",
            0x0301_0000,
        ));
        c.add(&rec(kernel::ROLE_CLIENT, kernel::MODE_UNKNOWN, "a", 0));
        c.add(&rec(kernel::ROLE_LISTEN, kernel::MODE_UNKNOWN, "a", 0));
        assert_eq!(c.total.client.smcr, 1);
        assert_eq!(c.total.client.not_seen, 1);
        assert_eq!(c.total.server.tcp, 1);
        assert_eq!(c.total.server.reasons["0x03010000"], 1);
        assert_eq!(c.total.client.tx_bytes, 6);
        assert_eq!(c.processes.len(), 1);
        let p = c.processes.values().next().unwrap();
        assert_eq!(p.sides, c.total);
        assert_eq!(c.programs["a"], c.total);
    }

    #[test]
    fn groups_past_the_bound_are_counted_as_other() {
        let mut c = Counted::default();
        for i in 0..MAX_GROUPS + 5 {
            c.add(&rec(
                kernel::ROLE_CLIENT,
                kernel::MODE_SMCD,
                &format!("p{i}"),
                0,
            ));
        }
        assert_eq!(c.programs.len(), MAX_GROUPS + 1);
        assert_eq!(c.programs[OTHER].client.smcd, 5);
        let total: u64 = c.programs.values().map(|s| s.client.total()).sum();
        assert_eq!(total, (MAX_GROUPS + 5) as u64);
    }
}
