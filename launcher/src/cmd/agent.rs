//! `smcrun agent`: a root daemon that keeps the kernel's own record of every SMC socket (see
//! `smcrun_bpf::agent_probes`), counts ended connections per process, cgroup and program, and
//! publishes the lot for the views (`smcrun_views::agent_state`: a root-only file, replaced whole
//! every interval). smc.ko may come and go: the probes are attached again each time it loads.

use crate::status::{Exit, Failure, Outcome};
use clap::Args;
use smcrun_bpf::agent_probes::{self as kernel, Agent, Record};
use smcrun_kernel::features::{kernel_release, KPROBE_MISSED};
use smcrun_views::agent_state::{
    Counts, Group, Live, Modes, Overflow, Process, Sides, Socket, State, Summary, MAX_GROUPS,
    MAX_PROCESSES, OTHER, STATE_DIR, STATE_FILE, SUMMARY_FILE,
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

/// SIGTERM and SIGINT set [`STOP`], so the agent ends its loop and says goodbye in its state file.
/// Installing a handler stays unsafe: neither std, nix nor rustix has a safe call for it.
#[allow(unsafe_code)]
fn stop_on_signals() {
    // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only stores to an atomic, which is
    // async-signal-safe, so whatever it interrupts it cannot break; it replaces no handler of
    // smcrun's (SIGTERM and SIGINT have none).
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
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

/// The entry of `name` in a map of at most [`MAX_GROUPS`] names (then [`OTHER`]); a name is
/// copied only when it is new (this runs for every ended connection).
fn group_entry<'m>(m: &'m mut BTreeMap<String, Sides>, name: &str) -> &'m mut Sides {
    if m.contains_key(name) {
        return m.get_mut(name).expect("present");
    }
    let name = if m.len() < MAX_GROUPS { name } else { OTHER };
    m.entry(name.to_string()).or_default()
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
    /// Start times read from /proc in this interval, by pid: one read per process, not one per
    /// socket (10,000 open sockets of one server are one read). Emptied every interval, since a
    /// pid can be reused.
    ticks: HashMap<u32, u64>,
}

fn start_ticks(pid: u32) -> u64 {
    smcrun_rundir::process::start_ticks(&format!("/proc/{pid}/stat")).unwrap_or(0)
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
    /// `pid`'s start time, read once per interval.
    fn ticks_of(&mut self, pid: u32) -> u64 {
        *self.ticks.entry(pid).or_insert_with(|| start_ticks(pid))
    }

    /// The process entry of a record, made when new (dropping a gone process's counts when
    /// there are [`MAX_PROCESSES`]).
    fn process(&mut self, r: &Record) -> &mut Process {
        let ticks = self.ticks_of(r.tgid);
        let key = (r.tgid, ticks);
        if !self.processes.contains_key(&key) && self.processes.len() >= MAX_PROCESSES {
            let keys: Vec<(u32, u64)> = self.processes.keys().copied().collect();
            let victim = keys
                .iter()
                .find(|(pid, t)| self.ticks_of(*pid) != *t)
                .or(keys.first())
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
        // No copy of a name already counted: this runs for every ended connection.
        let id = r.cgroup_id;
        if !self.cgroup_paths.contains_key(&id) && self.cgroup_paths.len() < 4 * MAX_GROUPS {
            self.cgroup_paths.insert(id, cgroup_path(id));
        }
        match self.cgroup_paths.get(&id) {
            Some(p) => count(group_entry(&mut self.cgroups, p), r),
            // past the cache's bound: found each time
            None => count(group_entry(&mut self.cgroups, &cgroup_path(id)), r),
        }
        count(
            group_entry(&mut self.programs, &kernel::text_of(&r.comm)),
            r,
        );
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

/// The open sockets counted per network namespace, by role and mode: the [`MAX_GROUPS`]
/// namespaces with the most sockets, and how many sockets the others have.
fn live_counts(live: &[Record]) -> (Vec<Live>, u64) {
    let mut by_ns: HashMap<u64, Live> = HashMap::new();
    for r in live {
        let l = by_ns.entry(r.netns_cookie).or_insert_with(|| Live {
            netns_cookie: r.netns_cookie,
            ..Live::default()
        });
        let m: &mut Modes = match r.role {
            kernel::ROLE_CLIENT => &mut l.client,
            kernel::ROLE_SERVER => &mut l.server,
            _ => &mut l.listen,
        };
        match r.mode {
            kernel::MODE_SMCR => m.smcr += 1,
            kernel::MODE_SMCD => m.smcd += 1,
            kernel::MODE_TCP => m.tcp += 1,
            _ => m.undecided += 1,
        }
    }
    let mut all: Vec<Live> = by_ns.into_values().collect();
    let n = |l: &Live| l.client.total() + l.server.total() + l.listen.total();
    all.sort_by_key(|l| (std::cmp::Reverse(n(l)), l.netns_cookie));
    let unlisted = all.iter().skip(MAX_GROUPS).map(n).sum();
    all.truncate(MAX_GROUPS);
    all.sort_by_key(|l| l.netns_cookie);
    (all, unlisted)
}

/// Seconds between two checks of the record of open sockets against smc_diag, while it is not
/// known to be complete.
const CENSUS_RECHECK: Duration = Duration::from_secs(10);

/// Whether the record of open sockets holds every SMC socket of the agent's own network
/// namespace: checked against one smc_diag dump after each attachment (sockets made before the
/// probes were attached are not recorded) and after its table of open sockets overflowed, every
/// [`CENSUS_RECHECK`] until it does; from then on the probes see every new socket.
#[derive(Default)]
struct Census {
    attachments: u64,
    live_full: u64,
    complete: bool,
    checked: Option<std::time::Instant>,
}

impl Census {
    /// The agent's network namespace when its record of open sockets is complete.
    fn complete_netns(
        &mut self,
        live: &[Record],
        attached: bool,
        attachments: u64,
        live_full: u64,
    ) -> Option<u64> {
        if (attachments, live_full) != (self.attachments, self.live_full) || !attached {
            *self = Census {
                attachments,
                live_full,
                ..Census::default()
            };
        }
        if !attached {
            return None;
        }
        let me = smcrun_views::this_netns::cookie()?;
        if !self.complete && self.checked.is_none_or(|t| t.elapsed() >= CENSUS_RECHECK) {
            self.checked = Some(std::time::Instant::now());
            let dumped = smcrun_kernel::sock_diag::dump_raw(0)
                .and_then(|raw| smcrun_kernel::sock_diag::parse(&raw));
            if let Ok(dumped) = dumped {
                self.complete = recorded_all(live, me, dumped.iter().map(|s| s.inode));
            }
        }
        self.complete.then_some(me)
    }
}

/// Whether the records `live` hold every socket (by inode) smc_diag showed in namespace `netns`:
/// a record of that namespace without an inode yet (an accepted socket no process has used)
/// stands for one socket not matched by inode.
fn recorded_all(live: &[Record], netns: u64, dumped: impl Iterator<Item = u64>) -> bool {
    let mine = live.iter().filter(|r| r.netns_cookie == netns);
    let known: std::collections::HashSet<u64> =
        mine.clone().map(|r| r.inode).filter(|i| *i != 0).collect();
    let unnamed = mine.filter(|r| r.inode == 0).count();
    dumped.filter(|i| !known.contains(i)).count() <= unnamed
}

/// The state to publish: the ended connections counted so far plus the open ones.
fn state(
    counted: &Counted,
    live: &[Record],
    kstats: kernel::AgentStats,
    attached: bool,
    error: Option<String>,
    attachments: u64,
    census_netns: Option<u64>,
) -> State {
    let mut all = Counted {
        total: counted.total.clone(),
        processes: counted.processes.clone(),
        cgroups: counted.cgroups.clone(),
        programs: counted.programs.clone(),
        processes_dropped: counted.processes_dropped,
        cgroup_paths: counted.cgroup_paths.clone(),
        ticks: counted.ticks.clone(),
    };
    // An open connection is counted once the kernel has decided its mode (which then never
    // changes), not while its handshake runs: counted as "not seen" now and as SMC-R at the next
    // interval, a counter would go down. One that ends undecided is counted "not seen" then.
    for r in live.iter().filter(|r| r.mode != kernel::MODE_UNKNOWN) {
        all.add(r);
    }
    let me = std::process::id();
    let (live_ns, live_unlisted) = live_counts(live);
    State {
        summary: Summary {
            agent_pid: me,
            agent_start_ticks: start_ticks(me),
            written_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            attached,
            error,
            attachments,
            total: all.total,
            cgroups: groups(&all.cgroups),
            programs: groups(&all.programs),
            live: live_ns,
            live_unlisted,
            census_netns,
            overflow: Overflow {
                live_full: kstats.live_full,
                done_full: kstats.done_full,
                inflight_full: kstats.inflight_full,
                stale: kstats.stale,
                processes_dropped: all.processes_dropped,
                // the probes' own count: agent() sets it
                probes_missed: None,
            },
        },
        processes: all.processes.into_values().collect(),
        sockets: live.iter().map(socket).collect(),
    }
}

/// Publishes `st`: the summary (what the exporter reads), then the whole state, each replaced
/// atomically, root's and 0600.
fn publish(dir: &OwnedFd, st: &State) {
    let summary = serde_json::to_vec(&st.summary).expect("the summary serialises");
    let whole = serde_json::to_vec(st).expect("the state serialises");
    for (name, bytes) in [(SUMMARY_FILE, summary), (STATE_FILE, whole)] {
        if let Err(e) = crate::cmd::exporter::write_atomically_mode(dir, name, &bytes, 0o600) {
            eprintln!("smcrun agent: writing {STATE_DIR}/{name}: {e}");
        }
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
    crate::cmd::exporter::open_dir(d)
}

/// `smcrun agent`.
pub fn agent(a: &AgentArgs) -> Outcome {
    let smc = match kernel::check() {
        Ok(smc) => smc,
        Err(why) => {
            return Err(Failure::of(
                "smcrun agent",
                Exit::Unavailable,
                format!("this kernel cannot run the agent: {why}"),
            ));
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
        return Ok(ExitCode::SUCCESS);
    }
    if !rustix::process::geteuid().is_root() {
        return Err(Failure::of(
            "smcrun agent",
            Exit::Unavailable,
            format!("needs root (it loads BPF programs and writes {STATE_DIR})"),
        ));
    }
    let dir = match state_dir() {
        Ok(d) => d,
        Err(e) => {
            return Err(Failure::of("smcrun agent", Exit::Failed, e.to_string()));
        }
    };
    stop_on_signals();
    let mut counted = Counted::default();
    let mut census = Census::default();
    let mut attached: Option<(u64, Agent)> = None;
    let mut attachments = 0u64;
    let mut error: Option<String> = None;
    let mut kstats = kernel::AgentStats::default();
    // Missed probe runs of the attachments before this one (`None`: the kernel does not count).
    let mut missed_before = Some(0u64);
    let mut said = String::new();
    let mut published = None;
    let mut said_missed = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        counted.ticks.clear();
        let gen = kernel::smc_generation();
        if attached.as_ref().map(|(g, _)| Some(*g)) != Some(gen) {
            // smc went away, or came back as a new load: what was attached is of no use.
            if let Some((_, mut old)) = attached.take() {
                let last = old.read();
                for r in &last.ended {
                    counted.add(r);
                }
                kstats = add_stats(kstats, last.stats);
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
        let mut drained = false;
        // No bpf() system call here: the maps are read in their mmapped pages (see
        // smcrun_bpf::agent_probes).
        let (live, cur) = match &mut attached {
            Some((_, ag)) => {
                let now = ag.read();
                drained = !now.ended.is_empty();
                now.ended.iter().for_each(|r| counted.add(r));
                (now.live, now.stats)
            }
            None => (Vec::new(), kernel::AgentStats::default()),
        };
        let stats = add_stats(kstats, cur);
        let census_netns =
            census.complete_netns(&live, attached.is_some(), attachments, stats.live_full);
        // Nothing ended and the open sockets, counters and status as last published: the files
        // say it already (an idle agent then reads its mapped pages, and writes nothing).
        let now = (
            live,
            stats,
            error.clone(),
            attachments,
            census_netns,
            missed,
        );
        if !drained && published.as_ref() == Some(&now) {
            pause(&attached, a.interval_ms);
            continue;
        }
        let (live, stats, _, _, census_netns, missed) = &now;
        let st = state(
            &counted,
            live,
            *stats,
            attached.is_some(),
            error.clone(),
            attachments,
            *census_netns,
        );
        let mut st = st;
        st.summary.overflow.probes_missed = *missed;
        publish(&dir, &st);
        published = Some(now);
        pause(&attached, a.interval_ms);
    }
    for name in [SUMMARY_FILE, STATE_FILE] {
        let _ = std::fs::remove_file(format!("{STATE_DIR}/{name}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// Waits an interval: attached, on the ring buffer of ended records (woken early when the
/// programs find it half full), else asleep.
fn pause(attached: &Option<(u64, Agent)>, interval_ms: u64) {
    let d = Duration::from_millis(interval_ms);
    match attached {
        Some((_, ag)) => ag.wait(d),
        None => std::thread::sleep(d),
    }
}

fn add_stats(a: kernel::AgentStats, b: kernel::AgentStats) -> kernel::AgentStats {
    kernel::AgentStats {
        live_full: a.live_full + b.live_full,
        done_full: a.done_full + b.done_full,
        inflight_full: a.inflight_full + b.inflight_full,
        stale: a.stale + b.stale,
        events: a.events + b.events,
        // the current attachment's
        slots_used: b.slots_used,
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

    #[test]
    fn open_sockets_are_counted_per_namespace_role_and_mode_bounded() {
        let mut live = Vec::new();
        for ns in 0..MAX_GROUPS as u64 + 3 {
            // Namespace 0 has the most sockets; the 3 past the bound have one each.
            let n = if ns == 0 { 5 } else { 1 };
            for _ in 0..n {
                live.push(Record {
                    netns_cookie: ns,
                    ..rec(kernel::ROLE_LISTEN, kernel::MODE_UNKNOWN, "l", 0)
                });
            }
        }
        live.push(Record {
            netns_cookie: 0,
            ..rec(kernel::ROLE_CLIENT, kernel::MODE_SMCD, "c", 0)
        });
        live.push(Record {
            netns_cookie: 0,
            ..rec(kernel::ROLE_SERVER, kernel::MODE_TCP, "s", 1)
        });
        let (ns, unlisted) = live_counts(&live);
        assert_eq!(ns.len(), MAX_GROUPS);
        assert_eq!(unlisted, 3);
        let zero = ns.iter().find(|l| l.netns_cookie == 0).unwrap();
        assert_eq!(zero.listen.undecided, 5);
        assert_eq!(zero.client.smcd, 1);
        assert_eq!(zero.server.tcp, 1);
        let st = state(
            &Counted::default(),
            &live,
            kernel::AgentStats::default(),
            true,
            None,
            1,
            Some(0),
        );
        assert_eq!(st.sockets.len(), live.len());
        assert_eq!(st.summary.live_unlisted, 3);
        let listed: u64 = st
            .summary
            .live
            .iter()
            .map(|l| l.client.total() + l.server.total() + l.listen.total())
            .sum();
        assert_eq!(listed + 3, live.len() as u64);
    }

    #[test]
    fn the_record_is_complete_when_it_holds_every_socket_smc_diag_shows() {
        let r = |ns: u64, inode: u64| Record {
            netns_cookie: ns,
            inode,
            ..rec(kernel::ROLE_SERVER, kernel::MODE_SMCR, "s", 0)
        };
        let live = [r(1, 10), r(1, 11), r(2, 12)];
        assert!(recorded_all(&live, 1, [10, 11].into_iter()));
        assert!(recorded_all(&live, 1, std::iter::empty()));
        // A socket from before the probes (not recorded), or one of another namespace's inode.
        assert!(!recorded_all(&live, 1, [10, 11, 9].into_iter()));
        assert!(!recorded_all(&live, 1, [12].into_iter()));
        // A record with no inode yet stands for one socket.
        let live = [r(1, 10), r(1, 0)];
        assert!(recorded_all(&live, 1, [10, 13].into_iter()));
        assert!(!recorded_all(&live, 1, [10, 13, 14].into_iter()));
    }

    #[test]
    fn an_open_connection_is_counted_once_its_mode_is_decided_so_no_count_goes_down() {
        let st = |mode| {
            state(
                &Counted::default(),
                &[rec(kernel::ROLE_CLIENT, mode, "c", 0)],
                kernel::AgentStats::default(),
                true,
                None,
                1,
                None,
            )
            .summary
            .total
            .client
        };
        // In its handshake: not counted at all (not "not seen", which would then go down).
        let early = st(kernel::MODE_UNKNOWN);
        assert_eq!(early.total(), 0, "{early:?}");
        let later = st(kernel::MODE_SMCR);
        assert_eq!((later.smcr, later.not_seen), (1, 0));
        // Ended undecided, it is "not seen".
        let mut c = Counted::default();
        c.add(&rec(kernel::ROLE_CLIENT, kernel::MODE_UNKNOWN, "c", 0));
        assert_eq!(c.total.client.not_seen, 1);
    }

    #[test]
    fn a_process_start_time_is_read_once_per_interval() {
        let mut c = Counted::default();
        for _ in 0..3 {
            c.add(&rec(kernel::ROLE_SERVER, kernel::MODE_SMCR, "s", 0));
        }
        assert_eq!(c.ticks.len(), 1);
        assert_eq!(c.processes.len(), 1);
        assert_eq!(c.processes.values().next().unwrap().sides.server.smcr, 3);
    }
}
