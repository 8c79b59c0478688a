//! Everything one scrape needs, read from the kernel in one go: SMC's counters, link groups, links
//! and devices, the SMC sockets' states and modes, the RDMA devices' resources, and the runtime's
//! per-process reports. Each part is read afresh every time (the SMC family is resolved again, so
//! a module that was unloaded or reloaded in between is seen as it is now, never a stale value).

use std::path::Path;

use smcrun_bpf::scopes::Scopes;
use smcrun_report::ProcessReport;
use smcrun_telemetry::rdma::{self, ResourceSummary};
use smcrun_telemetry::smc_genl::{
    Device, FallbackStats, LinkGroup, LinkGroupSmcd, SmcGenl, Stats, SysInfo,
};
use smcrun_telemetry::sock_diag::{self, Mode};
use smcrun_telemetry::uverbs::{self, Limits};
use smcrun_telemetry::Error;

use crate::netns;

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
    Agent(crate::agent::Live),
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
    pub agent: Part<crate::agent::Summary>,
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
    let mut out: Vec<(String, String)> = std::fs::read_dir("/proc/sys/net/smc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = std::fs::read_to_string(e.path()).ok()?;
            Some((name, v.split_whitespace().collect::<Vec<_>>().join(" ")))
        })
        .collect();
    out.sort();
    out
}

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
        link_groups: netns::local_groups(c.link_groups()?, netns::cookie()),
        smcd_link_groups: c.link_groups_smcd()?,
        smcr_devices: c.devices_smcr()?,
        smcd_devices: c.devices_smcd()?,
    })
}

fn read_rdma() -> Result<Vec<RdmaDevice>, Error> {
    let devices = rdma::devices()?;
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let summaries = rdma::parse_resource_summary(&rdma::dump_raw(rdma::op::RES_GET, None)?)?;
    // The limits after the counts: the verbs context opened to ask for them is then not in this
    // scrape's own `ctx` count.
    Ok(devices
        .into_iter()
        .map(|d| RdmaDevice {
            used: summaries
                .iter()
                .find(|s| s.device_index == d.index)
                .cloned(),
            limits: uverbs::limits(&d.name).ok(),
            device: d,
        })
        .collect())
}

/// A snapshot from the replies `smcrun __capture DIR` saved (`DIR/smc_GET_STATS.bin`, ...): what
/// that kernel showed then, for tests and for looking at a capture from elsewhere. A part whose
/// files are missing is absent, one whose files do not parse failed. The link groups are taken
/// as captured (the namespace they belonged to is not this one); there are no verbs limits.
pub fn replay(dir: &Path) -> Snapshot {
    use smcrun_telemetry::smc_genl::{
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
        timed(on, c, &mut seconds, || match crate::agent::read_summary() {
            Ok(st) => Part::Read(st),
            // No agent (or one that is gone) is no part; a summary that is refused (not
            // root's, too big, unreadable) is a failed part.
            Err(e @ crate::agent::Unavailable::Refused(_)) => Part::Failed(e.to_string()),
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
        Part::from_result(read_rdma())
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
        Part::Read(read_sysctls())
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
/// and it can say (see [`crate::agent::Summary::live_in`]).
fn agent_live(s: &crate::agent::Summary) -> Option<crate::agent::Live> {
    if !s.attached {
        return None;
    }
    s.live_in(crate::netns::cookie()?)
}

/// The runtime's per-process reports (of the user running the exporter).
fn read_processes() -> Part<Processes> {
    match smcrun_runtime::rundir::read::RunDir::open() {
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
