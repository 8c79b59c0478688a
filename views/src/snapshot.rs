//! Everything one scrape needs, read from the kernel in one go: SMC's counters, link groups, links
//! and devices, the SMC sockets' states and modes, the RDMA devices' resources, and the runtime's
//! per-process reports. Each part is read afresh every time (the SMC family is resolved again, so
//! a module that was unloaded or reloaded in between is seen as it is now, never a stale value);
//! a [`Reader`] keeps only what it can tell is unchanged (open sockets and files, device limits).

use std::path::Path;

use smcrun_bpf::scopes::Scopes;
use smcrun_kernel::rdma::{self, ResourceSummary};
use smcrun_kernel::smc_genl::{
    Device, FallbackStats, LinkGroup, LinkGroupSmcd, SmcGenl, Stats, SysInfo,
};
use smcrun_kernel::sock_diag::{self, Mode};
use smcrun_kernel::uverbs::{self, Limits};
use smcrun_kernel::{nl, Error};
use smcrun_report::ProcessReport;

use crate::{agent_state, this_netns};

/// One part of a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<T> {
    /// The kernel answered.
    Read(T),
    /// The kernel has no such interface (the module is missing): no series, and not an error.
    Absent(String),
    /// The running kernel's version predates the interface (its text names what is missing and
    /// the Linux version that added it): no series, and not an error.
    Lacking(String),
    /// The kernel refused or answered something unreadable: no series, and a scrape error.
    Failed(String),
}

impl<T> Part<T> {
    /// What was read, if it was.
    pub fn get(&self) -> Option<&T> {
        match self {
            Part::Read(v) => Some(v),
            _ => None,
        }
    }

    /// The error text of a failed part.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Part::Failed(e) => Some(e),
            _ => None,
        }
    }

    fn from_result(r: Result<T, Error>) -> Part<T> {
        match r {
            Ok(v) => Part::Read(v),
            Err(e) => Part::from_error(&e),
        }
    }

    /// The part for an error: [`Part::Lacking`], [`Part::Absent`] or [`Part::Failed`].
    pub fn from_error(e: &Error) -> Part<T> {
        if e.is_kernel_lacking() {
            Part::Lacking(e.to_string())
        } else if e.is_module_missing() {
            Part::Absent(e.to_string())
        } else {
            Part::Failed(e.to_string())
        }
    }

    /// The sentence of a part the kernel's version lacks.
    pub fn lacking(&self) -> Option<&str> {
        match self {
            Part::Lacking(e) => Some(e),
            _ => None,
        }
    }

    fn replayed(r: Result<T, Replay>) -> Part<T> {
        match r {
            Ok(v) => Part::Read(v),
            Err(Replay::Missing(e)) => Part::Absent(e),
            Err(Replay::Bad(e)) => Part::Failed(e.to_string()),
        }
    }

    fn map_err<U>(&self) -> Part<U> {
        match self {
            Part::Read(_) => unreachable!("map_err of a read part"),
            Part::Absent(e) => Part::Absent(e.clone()),
            Part::Lacking(e) => Part::Lacking(e.clone()),
            Part::Failed(e) => Part::Failed(e.clone()),
        }
    }
}

/// Why a replayed part is not there: its capture file is missing, or does not parse.
enum Replay {
    Missing(String),
    Bad(Error),
}

impl From<Error> for Replay {
    fn from(e: Error) -> Replay {
        Replay::Bad(e)
    }
}

/// GET_STATS and GET_FBACK_STATS: the namespace's SMC counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// GET_STATS.
    pub stats: Stats,
    /// GET_FBACK_STATS.
    pub fallback: FallbackStats,
}

/// What SMC says about itself (GET_SYS_INFO, DUMP_UEID).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// Version, v2 capabilities.
    pub sys: SysInfo,
    /// The user EIDs (`None` when the kernel would not say).
    pub ueids: Option<Vec<String>>,
}

/// SMC's devices and link groups (GET_DEV_*, GET_LINK_SMCR, GET_LGR_SMCD).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    /// SMC-R link groups of this namespace, with their links.
    pub link_groups: Vec<LinkGroup>,
    /// SMC-D link groups.
    pub smcd_link_groups: Vec<LinkGroupSmcd>,
    /// SMC-R devices.
    pub smcr_devices: Vec<Device>,
    /// SMC-D devices.
    pub smcd_devices: Vec<Device>,
}

/// One RDMA device with its resource counts and limits.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaDevice {
    /// Name, index, ports.
    pub device: rdma::Device,
    /// Used counts (RES_GET), when the kernel listed this device.
    pub used: Option<ResourceSummary>,
    /// Maximums (verbs interface), when the device answered.
    pub limits: Option<Limits>,
}

/// The runtime's reports of running programs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Processes {
    /// Reports of programs still running.
    pub running: Vec<ProcessReport>,
    /// Report files that could not be read or parsed.
    pub unreadable: u64,
}

/// The SMC sockets open now, from one of two sources.
#[derive(Debug, Clone, PartialEq)]
pub enum Sockets {
    /// (state, mode) of every SMC socket of this network namespace, dumped from smc_diag.
    Diag(Vec<(u8, Mode)>),
    /// This network namespace's sockets by role and mode, from the agent's summary (its probes
    /// attached): nothing is dumped, and the agent has no TCP-like socket state to give.
    Agent(agent_state::Live),
}

/// Everything one scrape shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// SMC counters: `smc_up` is 1 exactly when these were read.
    pub counters: Part<Counters>,
    /// SMC's own description.
    pub info: Part<Info>,
    /// Devices and link groups.
    pub topology: Part<Topology>,
    /// The SMC sockets open now: the agent's count while it is attached, else smc_diag's dump.
    pub sockets: Part<Sockets>,
    /// RDMA devices (RDMA netlink).
    pub rdma: Part<Vec<RdmaDevice>>,
    /// Per-process reports (absent when no run directory is given).
    pub processes: Part<Processes>,
    /// BPF mode's scopes (`smcrun --bpf` trees, attached cgroups) and their counts.
    pub bpf: Part<Scopes>,
    /// The smcrun agent's summary (absent when no agent runs).
    pub agent: Part<agent_state::Summary>,
    /// The `net.smc.*` sysctls and their values, by name without the prefix ([`read_sysctls`]).
    pub sysctls: Vec<(String, String)>,
    /// The collectors that were on: only they have `smcrun_scrape_collector_*` series.
    pub collectors: Collectors,
    /// Seconds each collector's kernel reads took, by [`Collector::index`] (0 for a replay).
    pub seconds: [f64; Collector::ALL.len()],
}

/// One part of a scrape that can be switched on or off, as node_exporter's collectors are
/// (`--collector.NAME`, `--no-collector.NAME`): the names are defined here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collector {
    /// SMC's counters (GET_STATS, GET_FBACK_STATS).
    Counters,
    /// SMC's description of itself (GET_SYS_INFO, the UEIDs).
    Info,
    /// Link groups, links and devices.
    Topology,
    /// The census of the SMC sockets open now: the agent's count while it is attached, else the
    /// smc_diag dump of every socket (with very many sockets, most of a scrape's cost).
    Sockets,
    /// RDMA devices, their resources and limits.
    Rdma,
    /// The runtime's per-process reports.
    Processes,
    /// BPF mode's scopes.
    Bpf,
    /// The smcrun agent's state.
    Agent,
    /// The `net.smc.*` sysctls.
    Sysctl,
}

impl Collector {
    /// Every collector, in the order of a scrape.
    pub const ALL: [Collector; 9] = [
        Collector::Counters,
        Collector::Info,
        Collector::Topology,
        Collector::Sockets,
        Collector::Rdma,
        Collector::Processes,
        Collector::Bpf,
        Collector::Agent,
        Collector::Sysctl,
    ];

    /// Its name: the `collector` label and the `--collector.NAME` flag.
    pub fn name(self) -> &'static str {
        match self {
            Collector::Counters => "counters",
            Collector::Info => "info",
            Collector::Topology => "topology",
            Collector::Sockets => "sockets",
            Collector::Rdma => "rdma",
            Collector::Processes => "processes",
            Collector::Bpf => "bpf",
            Collector::Agent => "agent",
            Collector::Sysctl => "sysctl",
        }
    }

    /// What it reads, for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Collector::Counters => "SMC's counters: connections, bytes, buffers, fallbacks and their reasons",
            Collector::Info => "SMC's version, v2 capabilities and user EIDs",
            Collector::Topology => "link groups, links and SMC devices",
            Collector::Sockets => "the census of the SMC sockets open now (the agent's count while it is attached, else smc_diag's dump of every socket: most of a scrape's cost on hosts with tens of thousands of SMC sockets)",
            Collector::Rdma => "RDMA devices' ports and resources (used, max)",
            Collector::Processes => "the runtime's per-process reports",
            Collector::Bpf => "BPF mode's scopes and their counts",
            Collector::Agent => "the smcrun agent's record",
            Collector::Sysctl => "the numeric net.smc.* sysctls",
        }
    }

    /// The collector named `name`.
    pub fn named(name: &str) -> Option<Collector> {
        Collector::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Its place in [`Collector::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Every name, comma-separated, for messages.
    pub fn names() -> String {
        Collector::ALL.map(Collector::name).join(", ")
    }
}

/// A set of collectors: which parts a scrape reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collectors(u16);

impl Collectors {
    /// Every collector (the exporter's default, as node_exporter's defaults are its usual ones).
    pub const ALL: Collectors = Collectors((1 << Collector::ALL.len()) - 1);
    /// None (`--collector.disable-defaults` before any `--collector.NAME`).
    pub const NONE: Collectors = Collectors(0);

    /// This set with `c` on or off.
    pub fn with(self, c: Collector, on: bool) -> Collectors {
        let bit = 1 << c.index();
        Collectors(if on { self.0 | bit } else { self.0 & !bit })
    }

    /// Whether `c` is on.
    pub fn has(self, c: Collector) -> bool {
        self.0 & (1 << c.index()) != 0
    }

    /// The collectors that are on, in [`Collector::ALL`]'s order.
    pub fn on(self) -> impl Iterator<Item = Collector> {
        Collector::ALL.into_iter().filter(move |c| self.has(*c))
    }
}

/// Every `net.smc.*` sysctl this kernel has (whatever its version adds: the directory is the
/// list), by name without the prefix, values with their whitespace folded, sorted by name.
pub fn read_sysctls() -> Vec<(String, String)> {
    read_sysctls_in(Path::new(SYSCTL_DIR), &mut None)
}

/// Where the `net.smc.*` sysctls are.
const SYSCTL_DIR: &str = "/proc/sys/net/smc";

/// The sysctl files of one listing of their directory, open, sorted by name: kept by a
/// [`Reader`] while every one of them reads (see [`read_sysctls_in`]).
type SysctlFiles = Vec<(String, std::fs::File)>;

/// [`read_sysctls`] of directory `dir`, with the files `kept` open from an earlier call: each is
/// read again from its start (pread, one system call), so a changed value shows at once. The
/// files are kept only while the listing is whole and every read succeeds: a sysctl of an
/// unloaded module reads ENOENT from its open file, so after the smc module was unloaded (or
/// reloaded, with other sysctls maybe) a read fails, the kept files are dropped and the
/// directory listed again in the same call; with no directory (no smc) nothing is kept.
pub fn read_sysctls_in(dir: &Path, kept: &mut Option<SysctlFiles>) -> Vec<(String, String)> {
    use std::os::unix::fs::FileExt;
    // One pread from the start: a sysctl gives its whole value to one read with room for it
    // (a read past it gives nothing), so a short read is all of it; a full one reads on.
    let read = |f: &std::fs::File| -> Option<String> {
        let mut buf = [0u8; SYSCTL_READ_BYTES];
        let n = f.read_at(&mut buf, 0).ok()?;
        let long;
        let bytes = if n < buf.len() {
            &buf[..n]
        } else {
            let mut all = buf.to_vec();
            loop {
                let m = f.read_at(&mut buf, all.len() as u64).ok()?;
                if m == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..m]);
            }
            long = all;
            &long[..]
        };
        let v = std::str::from_utf8(bytes).ok()?;
        Some(v.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    if let Some(files) = kept.as_ref() {
        let values: Option<Vec<(String, String)>> = files
            .iter()
            .map(|(name, f)| Some((name.clone(), read(f)?)))
            .collect();
        match values {
            Some(v) => return v,
            None => *kept = None,
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut whole = true;
    let mut files: SysctlFiles = Vec::new();
    let mut out: Vec<(String, String)> = Vec::new();
    for e in entries {
        let Ok(e) = e else {
            whole = false;
            continue;
        };
        let name = e.file_name().to_string_lossy().into_owned();
        match std::fs::File::open(e.path()) {
            Ok(f) => match read(&f) {
                Some(v) => {
                    out.push((name.clone(), v));
                    files.push((name, f));
                }
                None => whole = false,
            },
            Err(_) => whole = false,
        }
    }
    out.sort();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if whole {
        *kept = Some(files);
    }
    out
}

/// The bytes of one read of a sysctl (net.smc's values are numbers: one read is all of one).
const SYSCTL_READ_BYTES: usize = 4096;

impl Snapshot {
    /// A snapshot in which the kernel had nothing (every part absent): what a kernel without SMC
    /// and RDMA gives.
    pub fn empty(why: &str) -> Snapshot {
        let a = || why.to_string();
        Snapshot {
            counters: Part::Absent(a()),
            info: Part::Absent(a()),
            topology: Part::Absent(a()),
            sockets: Part::Absent(a()),
            rdma: Part::Absent(a()),
            processes: Part::Absent(a()),
            bpf: Part::Absent(a()),
            agent: Part::Absent(a()),
            sysctls: Vec::new(),
            collectors: Collectors::ALL,
            seconds: [0.0; Collector::ALL.len()],
        }
    }

    /// The parts of the collectors that were on, for `smcrun_scrape_collector_success` and the
    /// error count: (collector, read, the failure).
    pub fn parts(&self) -> Vec<(Collector, bool, Option<&str>)> {
        fn s<T>(p: &Part<T>) -> (bool, Option<&str>) {
            (p.get().is_some(), p.failure())
        }
        self.collectors
            .on()
            .map(|c| {
                let (ok, failure) = match c {
                    Collector::Counters => s(&self.counters),
                    Collector::Info => s(&self.info),
                    Collector::Topology => s(&self.topology),
                    Collector::Sockets => s(&self.sockets),
                    Collector::Rdma => s(&self.rdma),
                    Collector::Processes => s(&self.processes),
                    Collector::Bpf => s(&self.bpf),
                    Collector::Agent => s(&self.agent),
                    // A directory listing: what is there is what this kernel has.
                    Collector::Sysctl => (true, None),
                };
                (c, ok, failure)
            })
            .collect()
    }

    /// This snapshot with only the collectors `on` (a replay's parts, say, as a scrape with those
    /// collectors would have read them).
    pub fn only(mut self, on: Collectors) -> Snapshot {
        fn keep<T>(p: &mut Part<T>, on: Collectors, c: Collector) {
            if !on.has(c) {
                *p = off(c);
            }
        }
        keep(&mut self.counters, on, Collector::Counters);
        keep(&mut self.info, on, Collector::Info);
        keep(&mut self.topology, on, Collector::Topology);
        keep(&mut self.sockets, on, Collector::Sockets);
        keep(&mut self.rdma, on, Collector::Rdma);
        keep(&mut self.processes, on, Collector::Processes);
        keep(&mut self.bpf, on, Collector::Bpf);
        keep(&mut self.agent, on, Collector::Agent);
        if !on.has(Collector::Sysctl) {
            self.sysctls.clear();
        }
        self.collectors = Collectors(self.collectors.0 & on.0);
        self
    }

    /// How many parts failed (not counting parts the kernel simply does not have).
    pub fn failures(&self) -> u64 {
        self.parts().iter().filter(|p| p.2.is_some()).count() as u64
    }
}

fn read_counters(c: &SmcGenl) -> Result<Counters, Error> {
    Ok(Counters {
        stats: c.stats()?,
        fallback: c.fallback_stats()?,
    })
}

fn read_topology(c: &SmcGenl) -> Result<Topology, Error> {
    Ok(Topology {
        link_groups: this_netns::local_groups(c.link_groups()?, this_netns::cookie()),
        smcd_link_groups: c.link_groups_smcd()?,
        smcr_devices: c.devices_smcr()?,
        smcd_devices: c.devices_smcd()?,
    })
}

/// The RDMA devices, their resource counts and limits; the limits of a device in `kept` (by
/// index and name) are not asked again, the others are and kept; a device gone is dropped.
fn read_rdma(kept: &mut Vec<KeptLimits>) -> Result<Vec<RdmaDevice>, Error> {
    let devices = rdma::devices()?;
    forget_gone(kept, &devices);
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let summaries = rdma::parse_resource_summary(&rdma::dump_raw(rdma::op::RES_GET, None)?)?;
    // The limits after the counts: the verbs context opened to ask for them is then not in this
    // scrape's own `ctx` count.
    Ok(devices
        .into_iter()
        .map(|d| {
            let limits = kept_limits(kept, &d, |name| uverbs::limits(name).ok());
            RdmaDevice {
                used: summaries
                    .iter()
                    .find(|s| s.device_index == d.index)
                    .cloned(),
                limits,
                device: d,
            }
        })
        .collect())
}

/// Drops the kept limits of devices not in `devices` (by index and name).
fn forget_gone(kept: &mut Vec<KeptLimits>, devices: &[rdma::Device]) {
    kept.retain(|(i, n, _)| devices.iter().any(|d| d.index == *i && d.name == *n));
}

/// Device `d`'s limits: kept ones (same index and name), else `ask`ed by name and kept when
/// there are some.
fn kept_limits(
    kept: &mut Vec<KeptLimits>,
    d: &rdma::Device,
    ask: impl FnOnce(&str) -> Option<Limits>,
) -> Option<Limits> {
    if let Some(k) = kept.iter().find(|(i, n, _)| *i == d.index && *n == d.name) {
        return Some(k.2);
    }
    let l = ask(&d.name)?;
    kept.push((d.index, d.name.clone(), l));
    Some(l)
}

/// A snapshot from the replies `smcrun __capture DIR` saved (`DIR/smc_GET_STATS.bin`, ...): what
/// that kernel showed then, for tests and for looking at a capture from elsewhere. A part whose
/// files are missing is absent, one whose files do not parse failed. The link groups are taken
/// as captured (the namespace they belonged to is not this one); there are no verbs limits.
pub fn replay(dir: &Path) -> Snapshot {
    use smcrun_kernel::smc_genl::{
        parse_devices, parse_devices_smcd, parse_fallback_stats, parse_link_groups,
        parse_link_groups_smcd, parse_stats, parse_sys_info, parse_ueids,
    };
    let file = |name: &str| -> Result<Vec<u8>, Replay> {
        let p = dir.join(format!("{name}.bin"));
        std::fs::read(&p).map_err(|e| Replay::Missing(format!("{}: {e}", p.display())))
    };
    let counters = Part::replayed((|| {
        Ok(Counters {
            stats: parse_stats(&file("smc_GET_STATS")?)?,
            fallback: parse_fallback_stats(&file("smc_GET_FBACK_STATS")?)?,
        })
    })());
    let info = Part::replayed((|| {
        Ok(Info {
            sys: parse_sys_info(&file("smc_GET_SYS_INFO")?)?,
            ueids: file("smc_DUMP_UEID")
                .ok()
                .and_then(|r| parse_ueids(&r).ok()),
        })
    })());
    let topology = Part::replayed((|| {
        Ok(Topology {
            link_groups: parse_link_groups(&file("smc_GET_LINK_SMCR")?)?,
            smcd_link_groups: parse_link_groups_smcd(&file("smc_GET_LGR_SMCD")?)?,
            smcr_devices: parse_devices(&file("smc_GET_DEV_SMCR")?)?,
            smcd_devices: parse_devices_smcd(&file("smc_GET_DEV_SMCD")?)?,
        })
    })());
    let sockets = Part::replayed((|| {
        Ok(Sockets::Diag(sock_diag::parse_states(&file(
            "sock_diag_ext0",
        )?)?))
    })());
    let rdma = Part::replayed((|| {
        let summaries = rdma::parse_resource_summary(&file("rdma_RES_GET")?)?;
        rdma::parse_devices(&file("rdma_GET")?)?
            .into_iter()
            .map(|mut d| {
                d.ports = rdma::parse_ports(&file(&format!("rdma_PORT_GET_{}", d.index))?)?;
                Ok(RdmaDevice {
                    used: summaries
                        .iter()
                        .find(|s| s.device_index == d.index)
                        .cloned(),
                    limits: None,
                    device: d,
                })
            })
            .collect::<Result<Vec<_>, Replay>>()
    })());
    // The rest (per-process reports, BPF scopes, the agent, sysctls) is not in a capture.
    Snapshot {
        counters,
        info,
        topology,
        sockets,
        rdma,
        ..Snapshot::empty("a capture has no per-process reports, BPF scopes, agent or sysctls")
    }
}

/// A part whose collector is off: no series, not an error, no `smcrun_scrape_collector_*`.
fn off<T>(c: Collector) -> Part<T> {
    Part::Absent(format!("the {} collector is off", c.name()))
}

/// Seconds each collector took, by [`Collector::index`].
type Seconds = [f64; Collector::ALL.len()];

/// `read()` when collector `c` is on (its time added to `seconds`), else the part is off.
fn timed<T>(
    on: Collectors,
    c: Collector,
    seconds: &mut Seconds,
    read: impl FnOnce() -> Part<T>,
) -> Part<T> {
    if !on.has(c) {
        return off(c);
    }
    let t0 = std::time::Instant::now();
    let part = read();
    seconds[c.index()] += t0.elapsed().as_secs_f64();
    part
}

/// An SMC part read through the one generic netlink socket `genl` (its error when it did not
/// open), when collector `c` is on.
fn smc_part<T>(
    genl: &Option<Part<SmcGenl>>,
    on: Collectors,
    c: Collector,
    seconds: &mut Seconds,
    read: impl FnOnce(&SmcGenl) -> Part<T>,
) -> Part<T> {
    match genl {
        Some(Part::Read(g)) => timed(on, c, seconds, || read(g)),
        Some(p) if on.has(c) => p.map_err(),
        _ => off(c),
    }
}

/// Read a snapshot from the running kernel: the parts of the collectors `on`, each timed.
pub fn read(on: Collectors) -> Snapshot {
    Reader::default().read(on)
}

/// What a process that reads snapshots again and again (the exporter, every scrape) keeps
/// between them, each only while it is known to be the same; a snapshot read with it is the one
/// [`read`] gives. Kept: the generic netlink socket (see [`nl::with_kept`]; a socket whose
/// request failed is closed, and the SMC family is resolved again every read, so a reloaded
/// module's new id is used at once; the RDMA and sock_diag sockets are reused within a read
/// only, since an open one keeps ib_core or sock_diag from being unloaded); the open `net.smc.*` sysctl files (see
/// [`read_sysctls_in`]); and each RDMA device's limits, by its index and name (a device
/// removed is forgotten at the next read, one added or renamed is asked anew: the kernel
/// gives a new device a new index; limits that could not be read are asked again next time).
/// Network namespace: the process's own, which a reader must not leave.
#[derive(Default)]
pub struct Reader {
    netlink: nl::Kept,
    sysctls: Option<SysctlFiles>,
    limits: Vec<KeptLimits>,
}

/// An RDMA device's limits, by the device's index and name.
type KeptLimits = (u32, String, Limits);

impl Reader {
    /// Read a snapshot from the running kernel, as [`read`] does.
    pub fn read(&mut self, on: Collectors) -> Snapshot {
        let Reader {
            netlink,
            sysctls,
            limits,
        } = self;
        nl::with_kept(netlink, || read_with(on, sysctls, limits))
    }

    /// The netlink protocols it keeps a socket of now (for tests).
    pub fn kept_protocols(&self) -> Vec<nl::Protocol> {
        self.netlink.protocols()
    }
}

fn read_with(
    on: Collectors,
    sysctl_files: &mut Option<SysctlFiles>,
    limits: &mut Vec<KeptLimits>,
) -> Snapshot {
    let mut seconds = [0.0; Collector::ALL.len()];
    let smc_parts = [Collector::Counters, Collector::Info, Collector::Topology];
    // One generic netlink socket for the three SMC parts; opening it counts to the first one on.
    let genl = smc_parts.into_iter().find(|c| on.has(*c)).map(|first| {
        timed(on, first, &mut seconds, || {
            Part::from_result(SmcGenl::open())
        })
    });
    let counters = smc_part(&genl, on, Collector::Counters, &mut seconds, |g| {
        Part::from_result(read_counters(g))
    });
    let info = smc_part(&genl, on, Collector::Info, &mut seconds, |g| {
        Part::from_result(g.sys_info().map(|sys| Info {
            sys,
            ueids: g.ueid_dump().ok(),
        }))
    });
    let topology = smc_part(&genl, on, Collector::Topology, &mut seconds, |g| {
        Part::from_result(read_topology(g))
    });
    // The agent's summary first: while its probes are attached, the sockets collector takes its
    // count and dumps nothing. Read once, for either collector (its time counted to the agent's
    // collector when that is on, else to the sockets').
    let summary_for = [Collector::Agent, Collector::Sockets]
        .into_iter()
        .find(|c| on.has(*c));
    let summary = summary_for.map(|c| {
        timed(on, c, &mut seconds, || match agent_state::read_summary() {
            Ok(st) => Part::Read(st),
            // No agent (or one that is gone) is no part; a summary that is refused (not
            // root's, too big, unreadable) is a failed part.
            Err(e @ agent_state::Unavailable::Refused(_)) => Part::Failed(e.to_string()),
            Err(e) => Part::Absent(e.to_string()),
        })
    });
    let sockets = timed(on, Collector::Sockets, &mut seconds, || {
        match summary.as_ref().and_then(|p| agent_live(p.get()?)) {
            Some(live) => Part::Read(Sockets::Agent(live)),
            None => Part::from_result(
                sock_diag::dump_raw(0)
                    .and_then(|raw| sock_diag::parse_states(&raw))
                    .map(Sockets::Diag),
            ),
        }
    });
    let rdma = timed(on, Collector::Rdma, &mut seconds, || {
        Part::from_result(read_rdma(limits))
    });
    let processes = timed(on, Collector::Processes, &mut seconds, read_processes);
    // Reading BPF programs needs CAP_SYS_ADMIN; without it (or without BPF) there is simply no
    // such part, not a failed scrape.
    let bpf = timed(
        on,
        Collector::Bpf,
        &mut seconds,
        || match smcrun_bpf::scopes::all() {
            Ok(sc) => Part::Read(sc),
            Err(e) => Part::Absent(e.to_string()),
        },
    );
    let agent = match summary {
        Some(p) if on.has(Collector::Agent) => p,
        _ => off(Collector::Agent),
    };
    let sysctls = timed(on, Collector::Sysctl, &mut seconds, || {
        Part::Read(read_sysctls_in(Path::new(SYSCTL_DIR), sysctl_files))
    });
    Snapshot {
        counters,
        info,
        topology,
        sockets,
        rdma,
        processes,
        bpf,
        agent,
        sysctls: sysctls.get().cloned().unwrap_or_default(),
        collectors: on,
        seconds,
    }
}

/// This network namespace's open sockets from the agent's summary, when its probes are attached
/// and it can say (see [`agent_state::Summary::live_in`]).
fn agent_live(s: &agent_state::Summary) -> Option<agent_state::Live> {
    if !s.attached {
        return None;
    }
    s.live_in(this_netns::cookie()?)
}

/// The runtime's per-process reports (of the user running the exporter).
fn read_processes() -> Part<Processes> {
    match smcrun_rundir::read::RunDir::open() {
        Ok(Some(dir)) => {
            let (running, unreadable) = crate::processes::running(&dir);
            Part::Read(Processes {
                running,
                unreadable,
            })
        }
        // No run directory yet: no program has reported.
        Ok(None) => Part::Read(Processes {
            running: Vec::new(),
            unreadable: 0,
        }),
        // A run directory that is refused (another user's, open to others) is not read.
        Err(_) => Part::Read(Processes {
            running: Vec::new(),
            unreadable: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("smcrun-snapshot-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn kept_sysctl_files_read_anew_and_relist_when_one_fails() {
        let d = tmpdir("sysctl");
        std::fs::write(d.join("wmem"), "262144\n").unwrap();
        std::fs::write(d.join("limit_smc_hs"), "0\n").unwrap();
        std::fs::write(d.join("smcr_max_conns_per_lgr"), "255\t 7\n").unwrap();
        let mut kept = None;
        let first = read_sysctls_in(&d, &mut kept);
        let want = |w: &str| {
            vec![
                ("limit_smc_hs".to_string(), "0".to_string()),
                ("smcr_max_conns_per_lgr".to_string(), "255 7".to_string()),
                ("wmem".to_string(), w.to_string()),
            ]
        };
        assert_eq!(first, want("262144"));
        assert_eq!(kept.as_ref().map(Vec::len), Some(3));
        // A changed value shows at the next read, from the kept file.
        std::fs::write(d.join("wmem"), "1048576\n").unwrap();
        assert_eq!(read_sysctls_in(&d, &mut kept), want("1048576"));
        // A kept file that no longer reads (as a sysctl of an unloaded module): listed again.
        std::fs::write(d.join("autocorking_size"), "65536\n").unwrap();
        kept.as_mut().unwrap()[0].1 = std::fs::File::open(&d).unwrap(); // a directory: EISDIR
        let relisted = read_sysctls_in(&d, &mut kept);
        assert_eq!(relisted[0], ("autocorking_size".into(), "65536".into()));
        assert_eq!(relisted[1..], want("1048576")[..]);
        assert_eq!(kept.as_ref().map(Vec::len), Some(4));
        // An entry that does not read (a directory) is left out, and nothing is kept.
        std::fs::create_dir(d.join("sub")).unwrap();
        kept = None;
        assert_eq!(read_sysctls_in(&d, &mut kept).len(), 4);
        assert!(kept.is_none());
        // No directory (smc not loaded): nothing, nothing kept.
        std::fs::remove_dir_all(&d).unwrap();
        let mut kept = None;
        assert!(read_sysctls_in(&d, &mut kept).is_empty());
        assert!(kept.is_none());
    }

    #[test]
    fn a_long_sysctl_value_is_read_whole() {
        let d = tmpdir("sysctl-long");
        let long = "1 ".repeat(SYSCTL_READ_BYTES);
        std::fs::write(d.join("v"), &long).unwrap();
        let v = read_sysctls_in(&d, &mut None);
        assert_eq!(v[0].1, long.trim_end());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn device_limits_are_kept_by_index_and_name() {
        let limits = |n: u32| Limits {
            max_qp: n,
            max_cq: n,
            max_mr: n,
            max_pd: n,
            max_srq: n,
        };
        let dev = |index: u32, name: &str| rdma::Device {
            index,
            name: name.into(),
            ..rdma::Device::default()
        };
        let mut kept = Vec::new();
        let mut asked = 0;
        let mut ask = |n: u32| {
            asked += 1;
            move |_: &str| Some(limits(n))
        };
        assert_eq!(
            kept_limits(&mut kept, &dev(1, "rxe_lo"), ask(1)),
            Some(limits(1))
        );
        // Kept: not asked again.
        assert_eq!(
            kept_limits(&mut kept, &dev(1, "rxe_lo"), |_| panic!("asked")),
            Some(limits(1))
        );
        // The device removed and made again (a new index), or renamed: asked anew.
        assert_eq!(
            kept_limits(&mut kept, &dev(2, "rxe_lo"), ask(2)),
            Some(limits(2))
        );
        assert_eq!(
            kept_limits(&mut kept, &dev(2, "rxe_eth0"), ask(3)),
            Some(limits(3))
        );
        assert_eq!(asked, 3);
        // Gone devices are forgotten.
        forget_gone(&mut kept, &[dev(2, "rxe_eth0")]);
        assert_eq!(kept, vec![(2, "rxe_eth0".to_string(), limits(3))]);
        // Limits that could not be read are not kept: asked again next time.
        assert_eq!(kept_limits(&mut kept, &dev(5, "mlx5_0"), |_| None), None);
        assert_eq!(kept.len(), 1);
    }
}
