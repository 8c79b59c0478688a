//! `smcrun doctor`'s checks as data: each is pass, warn, fail (or skip, when what it needs is not
//! there) with what was found and one line of advice. [`checks`] is pure (host facts in, checks
//! out); [`Host::read`] gathers the facts of the running system.
//!
//! The advice from the live counters follows the SMC monitoring guide: a high rx buffer-full ratio
//! means the program reads too slowly or net.smc.rmem is too small; tx buffer-full or too-small
//! means net.smc.wmem; the remote variants the peer's net.smc.rmem; fallbacks by reason with what
//! to do for the most frequent one. Each shows the ratio, the threshold and the sysctl to change.

pub mod advice;
pub mod json;

use serde::Serialize;
use smcrun_kernel::features::{self, Feature};
use smcrun_kernel::kmod::{self, Availability};
use smcrun_kernel::pnet;
use smcrun_kernel::reasons;
use smcrun_kernel::smc_genl::TechStats;

use self::advice::{BUFFER_RATIO_WARN, FALLBACK_RATIO_WARN};
use crate::snapshot::{self, Counters, Info, Part, RdmaDevice, Topology};

/// How a check came out. The order is the severity: the worst decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Not run: what it needs is missing (said by another check).
    Skip,
    /// Works, but worth acting on.
    Warn,
    /// SMC cannot work this way.
    Fail,
}

impl Status {
    /// The word in the table.
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One row of the doctor's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Short stable name ("kernel", "smc", "rx-buffer-full:smcr", ...).
    pub id: String,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do (one line; empty when there is nothing to do).
    pub advice: String,
}

impl Check {
    /// A check.
    pub fn new(
        id: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
        advice: impl Into<String>,
    ) -> Check {
        Check {
            id: id.into(),
            status,
            detail: detail.into(),
            advice: advice.into(),
        }
    }
}

/// The worst of a table's checks, which decides doctor's exit status (the launcher's
/// `status::doctor` gives each its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Every check passed or was skipped.
    Passed,
    /// A check warns, none failed.
    Warnings,
    /// A check failed.
    Failed,
}

/// The verdict of a table.
pub fn verdict(checks: &[Check]) -> Verdict {
    match checks.iter().map(|c| c.status).max() {
        Some(Status::Fail) => Verdict::Failed,
        Some(Status::Warn) => Verdict::Warnings,
        _ => Verdict::Passed,
    }
}

/// What `socket(AF_SMC)` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The socket was made.
    Works,
    /// It failed with this errno.
    Refused(i32),
}

/// The facts the checks look at.
#[derive(Debug, Clone)]
pub struct Host {
    /// `uname -r`.
    pub release: String,
    /// The smc module, as found before anything was probed.
    pub smc: Availability,
    /// The smc_diag module.
    pub smc_diag: Availability,
    /// `socket(AF_SMC, SOCK_STREAM, 0)`.
    pub af_smc: Probe,
    /// `socket(AF_INET, SOCK_STREAM, IPPROTO_SMC)`.
    pub ipproto_smc: Probe,
    /// The SMC counters.
    pub counters: Part<Counters>,
    /// SMC's description (v2, UEIDs).
    pub info: Part<Info>,
    /// SMC's devices and link groups.
    pub topology: Part<Topology>,
    /// RDMA devices.
    pub rdma: Part<Vec<RdmaDevice>>,
    /// The ib_core module (for the advice when RDMA netlink is missing).
    pub ib_core: Availability,
    /// The PNET table.
    pub pnet: Part<Vec<pnet::Entry>>,
    /// `net.smc.*` sysctls and their values, by name without the prefix.
    pub sysctls: Vec<(String, String)>,
    /// RLIMIT_MEMLOCK (soft, hard) in bytes; `None` is unlimited.
    pub memlock: (Option<u64>, Option<u64>),
    /// Network devices of this namespace (to check the PNET table against).
    pub netdevs: Vec<String>,
}

pub use smcrun_kernel::features::version;

fn at_least(release: &str, feature: Feature) -> Option<bool> {
    feature.missing_in(release).map(|m| !m)
}

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EAFNOSUPPORT => "EAFNOSUPPORT".into(),
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT".into(),
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EINVAL => "EINVAL".into(),
        e => format!("errno {e}"),
    }
}

fn kernel(h: &Host) -> Check {
    let Some((major, minor)) = version(&h.release) else {
        return Check::new(
            "kernel",
            Status::Warn,
            format!("cannot read a version from the release \"{}\"", h.release),
            "the modes below are judged from the kernel's answers only",
        );
    };
    let inet = at_least(&h.release, features::IPPROTO_SMC);
    let mapped = at_least(&h.release, features::SMCR_V4_MAPPED);
    let handshake = at_least(&h.release, features::SMC_HS_CTRL);
    let modes = format!(
        "IPPROTO_SMC (--mode inet, {}+): {}; IPv4-mapped IPv6 clients over SMC-Rv2 ({}+): {}; the handshake policy (smcrun handshake, {}+): {}",
        features::IPPROTO_SMC.since_version(),
        yes_no(inet),
        features::SMCR_V4_MAPPED.since_version(),
        yes_no(mapped),
        features::SMC_HS_CTRL.since_version(),
        yes_no(handshake)
    );
    // The version says what the kernel would allow; whether SMC is there at all is the smc row's,
    // and without it this row has nothing to pass.
    if let Probe::Refused(_) = h.af_smc {
        return Check::new(
            "kernel",
            Status::Skip,
            format!(
                "Linux {major}.{minor} ({}) would allow AF_SMC (--mode smc), {modes}, but it has no SMC (see smc)",
                h.release
            ),
            "",
        );
    }
    let here = match (h.ipproto_smc, inet) {
        (Probe::Refused(e), Some(true)) => format!(
            "; IPPROTO_SMC is refused here ({}): --mode auto uses AF_SMC",
            errno_name(e)
        ),
        _ => String::new(),
    };
    Check::new(
        "kernel",
        Status::Pass,
        format!(
            "Linux {major}.{minor} ({}) allows AF_SMC sockets (--mode smc); {modes}{here}",
            h.release
        ),
        "",
    )
}

/// Does this kernel have SMC at all, and does socket(AF_SMC) work.
fn smc(h: &Host) -> Check {
    let tcp = "until then, programs under smcrun run over TCP (nothing breaks, nothing is faster)";
    match (&h.smc, h.af_smc) {
        (a, Probe::Works) => Check::new(
            "smc",
            Status::Pass,
            format!(
                "the smc module is {}; socket(AF_SMC) works",
                if a.present() { a.to_string() } else { "loaded on demand by the kernel".to_string() }
            ),
            "",
        ),
        (a, Probe::Refused(e)) if a.impossible() => Check::new(
            "smc",
            Status::Fail,
            format!(
                "this kernel has no SMC: {} (socket(AF_SMC) fails with {})",
                a.why_impossible("smc").unwrap_or_default(),
                errno_name(e)
            ),
            format!("run on a kernel built with CONFIG_SMC (most distribution kernels have it as a module); {tcp}"),
        ),
        (a, Probe::Refused(e)) if e == libc::EPERM || e == libc::EACCES => Check::new(
            "smc",
            Status::Fail,
            format!(
                "the smc module is {a}, but socket(AF_SMC) is refused with {} (a seccomp filter or an LSM policy)",
                errno_name(e)
            ),
            format!("allow socket(AF_SMC) (family 43) in the container's seccomp profile or the LSM policy; {tcp}"),
        ),
        (a, Probe::Refused(e)) => Check::new(
            "smc",
            Status::Fail,
            format!("socket(AF_SMC) fails with {}: {}", errno_name(e), a.advice("smc")),
            match a {
                Availability::Loadable { .. } => format!("modprobe smc (as root); {tcp}"),
                Availability::LoadingDisabled => format!("load smc before modules_disabled is set (at boot); {tcp}"),
                _ => tcp.to_string(),
            },
        ),
    }
}

fn smc_diag(h: &Host) -> Check {
    let a = &h.smc_diag;
    if h.af_smc != Probe::Works {
        return Check::new("smc_diag", Status::Skip, "needs smc", "");
    }
    if a.present() {
        return Check::new(
            "smc_diag",
            Status::Pass,
            format!("the smc_diag module is {a}"),
            "",
        );
    }
    Check::new(
        "smc_diag",
        Status::Warn,
        a.advice("smc_diag"),
        "without it `smcrun ss` and the runtime's fallback reasons have no socket list; the connections still use SMC",
    )
}

fn port_states(d: &RdmaDevice) -> Vec<(String, bool)> {
    d.device
        .ports
        .iter()
        .map(|p| {
            let state = p.state.map_or("?", smcrun_kernel::rdma::port_state);
            (
                format!(
                    "{} port {} {state}{}",
                    d.device.name,
                    p.index,
                    p.netdev
                        .as_ref()
                        .map_or_else(String::new, |n| format!(" on {n}"))
                ),
                state == "ACTIVE",
            )
        })
        .collect()
}

fn rdma(h: &Host) -> Check {
    let none =
        "without RDMA hardware, `smcrun setup soft-roce --netdev IF` adds a soft-RoCE device";
    match &h.rdma {
        Part::Read(devs) if !devs.is_empty() => {
            let ports: Vec<(String, bool)> = devs.iter().flat_map(port_states).collect();
            let down: Vec<&str> = ports
                .iter()
                .filter(|p| !p.1)
                .map(|p| p.0.as_str())
                .collect();
            let all = ports
                .iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            if down.is_empty() && !ports.is_empty() {
                Check::new("rdma", Status::Pass, all, "")
            } else {
                Check::new(
                    "rdma",
                    Status::Warn,
                    format!("ports not ACTIVE: {}", if down.is_empty() { "(no ports)".to_string() } else { down.join(", ") }),
                    "SMC-R uses only ACTIVE ports: check the cable/link of the interface behind the port (`ip link`)",
                )
            }
        }
        Part::Read(_) => Check::new("rdma", Status::Fail, "no RDMA devices", none),
        Part::Absent(_) => Check::new(
            "rdma",
            Status::Fail,
            format!("no RDMA devices: {}", h.ib_core.advice("ib_core")),
            if h.ib_core.impossible() {
                "SMC-R needs a kernel with RDMA (ib_core) and a RoCE device or soft-RoCE (rdma_rxe)"
                    .to_string()
            } else {
                none.to_string()
            },
        ),
        Part::Failed(e) => Check::new(
            "rdma",
            Status::Warn,
            format!("the RDMA netlink refused: {e}"),
            "run as root to see the RDMA devices",
        ),
        Part::Lacking(why) => Check::new("rdma", Status::Fail, why.clone(), none),
    }
}

fn smc_devices(h: &Host) -> Check {
    let Some(t) = h.topology.get() else {
        return skip_or_failed("smc-devices", &h.topology);
    };
    let usable: Vec<String> = t
        .smcr_devices
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .enumerate()
                .filter(|(_, p)| p.valid && p.state != 0)
                .map(move |(i, _)| format!("{} port {}", d.ib_name, i + 1))
        })
        .collect();
    let smcd = t.smcd_devices.len();
    if usable.is_empty() && smcd == 0 {
        return Check::new(
            "smc-devices",
            Status::Fail,
            "SMC sees no usable device: no active SMC-R device port and no SMC-D device",
            "SMC-R needs an ACTIVE RoCE port (see the rdma check); connections fall back with 0x03030000 NOSMCDEV",
        );
    }
    let mut found = usable;
    if smcd > 0 {
        found.push(format!("{smcd} SMC-D device(s)"));
    }
    Check::new(
        "smc-devices",
        Status::Pass,
        format!("SMC can use {}", found.join(", ")),
        "",
    )
}

fn skip_or_failed<T>(id: &str, p: &Part<T>) -> Check {
    match p {
        Part::Failed(e) => Check::new(
            id,
            Status::Warn,
            format!("SMC refused: {e}"),
            "run as root (the SMC netlink needs CAP_NET_ADMIN for some queries)",
        ),
        // the kernel's version lacks it: the one sentence the command itself prints
        Part::Lacking(why) => Check::new(id, Status::Skip, why.clone(), ""),
        _ => Check::new(id, Status::Skip, "needs smc", ""),
    }
}

fn smcr_v2(h: &Host) -> Check {
    let Some(i) = h.info.get() else {
        return skip_or_failed("smc-rv2", &h.info);
    };
    if !i.sys.smcr_v2 {
        return Check::new(
            "smc-rv2",
            Status::Warn,
            format!("this kernel's SMC ({}.{}) cannot do SMC-Rv2", i.sys.version, i.sys.release),
            format!("SMC-Rv1 only: both peers in one IP subnet with RoCE on that interface; SMC-Rv2 (routed, UEID) needs {}+", features::SMCR_V2.since_text()),
        );
    }
    match &i.ueids {
        Some(u) if !u.is_empty() => Check::new("smc-rv2", Status::Pass, format!("SMC-Rv2 available; UEID {}", u.join(", ")), ""),
        Some(_) => Check::new(
            "smc-rv2",
            Status::Warn,
            "SMC-Rv2 available, but no UEID is set: SMC-Rv2 needs one both peers share",
            "`smcrun ueid add NAME` with the same NAME on every host (without it only SMC-Rv1 works: same subnet, RoCE on that interface)",
        ),
        None => Check::new("smc-rv2", Status::Warn, "SMC-Rv2 available; the kernel did not list the UEIDs", "run as root to see them (`smcrun ueid show`)"),
    }
}

fn pnet_check(h: &Host) -> Check {
    let rows = match &h.pnet {
        Part::Read(r) => r,
        other => return skip_or_failed("pnet", other),
    };
    if rows.is_empty() {
        return Check::new(
            "pnet",
            Status::Pass,
            "the PNET table is empty: SMC pairs each interface with the RoCE device behind it",
            "",
        );
    }
    let missing: Vec<String> = rows
        .iter()
        .filter_map(|r| r.netdev.as_ref())
        .filter(|n| !h.netdevs.iter().any(|x| x == *n))
        .map(|n| format!("{n} (not in this namespace)"))
        .collect();
    let text = rows
        .iter()
        .map(|r| {
            let what = match (&r.netdev, &r.ibdev) {
                (Some(n), _) => n.clone(),
                (None, Some(d)) => format!(
                    "{d} port {}",
                    r.ibport.map_or("?".into(), |p| p.to_string())
                ),
                _ => "?".into(),
            };
            format!("{} {what}", r.pnetid)
        })
        .collect::<Vec<_>>()
        .join(", ");
    if missing.is_empty() {
        Check::new("pnet", Status::Pass, format!("PNET table: {text}"), "")
    } else {
        Check::new(
            "pnet",
            Status::Warn,
            format!("PNET table: {text}; names missing here: {}", missing.join(", ")),
            "an interface and its RDMA device must share a PNET ID: fix with `smcrun pnet del ID` / `smcrun pnet add ID --netdev IF`",
        )
    }
}

fn sysctl_value<'a>(h: &'a Host, name: &str) -> Option<&'a str> {
    h.sysctls
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn sysctls(h: &Host) -> Check {
    if h.sysctls.is_empty() {
        let why = if features::SMC_SYSCTL.missing_in(&h.release) == Some(true) {
            features::SMC_SYSCTL.lacking(&h.release)
        } else {
            "no net.smc.* sysctls (needs smc)".to_string()
        };
        return Check::new("sysctls", Status::Skip, why, "");
    }
    let all = h
        .sysctls
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    Check::new("sysctls", Status::Pass, format!("net.smc.*: {all}"), "")
}

fn ipv6_java(h: &Host) -> Check {
    if h.af_smc != Probe::Works {
        return Check::new("ipv6-java", Status::Skip, "needs smc", "");
    }
    match at_least(&h.release, features::SMCR_V4_MAPPED) {
        Some(true) => Check::new(
            "ipv6-java",
            Status::Pass,
            "AF_INET6 sockets talking to IPv4 peers (v4-mapped addresses, Java's default) can use SMC-Rv2 on this kernel",
            "",
        ),
        _ => Check::new(
            "ipv6-java",
            Status::Warn,
            "before Linux 6.14, AF_INET6 sockets talking to IPv4 peers (v4-mapped addresses, as Java and other dual-stack programs make them) fall back to TCP",
            "run Java with -Djava.net.preferIPv4Stack=true (other programs: make them use AF_INET), or use a 6.14+ kernel",
        ),
    }
}

fn bytes_text(b: Option<u64>) -> String {
    match b {
        None => "unlimited".into(),
        Some(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Some(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        Some(b) => format!("{b} B"),
    }
}

fn memlock(h: &Host) -> Check {
    Check::new(
        "memlock",
        Status::Pass,
        format!(
            "RLIMIT_MEMLOCK {} (hard {}): SMC's buffers are kernel memory and do not count against it",
            bytes_text(h.memlock.0),
            bytes_text(h.memlock.1)
        ),
        "",
    )
}

fn pct(r: f64) -> String {
    format!("{:.2}%", r * 100.0)
}

/// The buffer checks of one technology that saw traffic: each a warning with its advice above
/// the threshold, else a pass with the same figures.
fn buffers(tech: &str, t: &TechStats, h: &Host) -> Vec<Check> {
    let cur = |k: &str| sysctl_value(h, k).map_or_else(|| "?".to_string(), String::from);
    let ratio = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let th = pct(BUFFER_RATIO_WARN);
    let row = |id: &str, worst: f64, detail: String, advice: String| {
        let warn = worst > BUFFER_RATIO_WARN;
        Check::new(
            format!("{id}:{tech}"),
            if warn { Status::Warn } else { Status::Pass },
            detail,
            if warn { advice } else { String::new() },
        )
    };
    let rx = ratio(t.rx_buffers.full, t.rx_count);
    let full = ratio(t.tx_buffers.full, t.tx_count);
    let small = ratio(t.tx_buffers.size_small, t.tx_count);
    let rfull = ratio(t.tx_buffers.full_peer, t.tx_count);
    let rsmall = ratio(t.tx_buffers.size_small_peer, t.tx_count);
    vec![
        row(
            "rx-buffer-full",
            rx,
            format!(
                "receive buffer full {} times in {} receive requests: {} (threshold {th})",
                t.rx_buffers.full,
                t.rx_count,
                pct(rx)
            ),
            format!("the programs read too slowly, or net.smc.rmem (now {}) is too small: raise it (`smcrun --sysctl net.smc.rmem=N`, for new connections)", cur("rmem")),
        ),
        row(
            "tx-buffer",
            full.max(small),
            format!(
                "send buffer full in {}, too small in {} of {} send requests (threshold {th})",
                pct(full),
                pct(small),
                t.tx_count
            ),
            format!("raise net.smc.wmem (now {}): `smcrun --sysctl net.smc.wmem=N` (new connections)", cur("wmem")),
        ),
        row(
            "peer-buffer",
            rfull.max(rsmall),
            format!(
                "the peer's receive buffer was full in {}, too small in {} of {} send requests (threshold {th})",
                pct(rfull),
                pct(rsmall),
                t.tx_count
            ),
            "raise net.smc.rmem on the peers (or make them read faster)".to_string(),
        ),
    ]
}

fn fallbacks(c: &Counters) -> Check {
    let smc = c.stats.smcr.successes() + c.stats.smcd.successes();
    let hs = c.stats.client_handshake_errors + c.stats.server_handshake_errors;
    let fb = c.fallback.client_total + c.fallback.server_total;
    let total = smc + hs + fb;
    let ratio = if total == 0 {
        0.0
    } else {
        fb as f64 / total as f64
    };
    let mut by_reason: Vec<(u32, u64)> = Vec::new();
    for r in c.fallback.client.iter().chain(&c.fallback.server) {
        match by_reason.iter_mut().find(|x| x.0 == r.code) {
            Some(x) => x.1 += u64::from(r.count),
            None => by_reason.push((r.code, u64::from(r.count))),
        }
    }
    by_reason.retain(|r| r.1 > 0);
    by_reason.sort_by_key(|r| (std::cmp::Reverse(r.1), r.0));
    let top = by_reason
        .iter()
        .take(3)
        .map(|(code, n)| format!("{n}× 0x{code:08x} {}", reasons::describe(*code).name))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = format!(
        "{fb} of {total} connections fell back to TCP ({}; threshold {}){}{}",
        pct(ratio),
        pct(FALLBACK_RATIO_WARN),
        if top.is_empty() {
            String::new()
        } else {
            format!(": {top}")
        },
        if hs > 0 {
            format!("; {hs} handshake errors")
        } else {
            String::new()
        }
    );
    if ratio <= FALLBACK_RATIO_WARN {
        return Check::new("fallbacks", Status::Pass, detail, "");
    }
    let advice = match by_reason.first() {
        Some((code, _)) => {
            let r = reasons::describe(*code);
            match advice::fallback(*code) {
                Some(a) => format!("{} ({}): {a}", r.name, r.description),
                None => format!(
                    "{} ({}): see `smcrun ss -a` for the connections",
                    r.name, r.description
                ),
            }
        }
        None => "the per-reason counts are empty: see `smcrun ss -a` for the connections".into(),
    };
    Check::new("fallbacks", Status::Warn, detail, advice)
}

fn counters(h: &Host) -> Vec<Check> {
    let Some(c) = h.counters.get() else {
        return vec![skip_or_failed("traffic", &h.counters)];
    };
    let mut out = Vec::new();
    for (tech, t) in [("smcr", &c.stats.smcr), ("smcd", &c.stats.smcd)] {
        if t.rx_count + t.tx_count > 0 {
            out.extend(buffers(tech, t, h));
        }
    }
    if out.is_empty() {
        out.push(Check::new(
            "traffic",
            Status::Pass,
            "no SMC traffic since the smc module was loaded: no buffer ratios to judge yet",
            "",
        ));
    }
    out.push(fallbacks(c));
    out
}

/// Every row `smcrun doctor` can give, in the table's order, with what it looks at: those of
/// [`checks`], then the launcher's own (`bpf`, `program`, `java`; with `--bpf`, `bpf` gives way to
/// one `bpf:ID` row per `smcrun_bpf::prereq` check). The manual's table of checks
/// (docs/src/reference/doctor-checks.md) is made from this list, and tests check that [`checks`]
/// and the launcher give no other. A `:TECH` row comes once per technology that saw traffic
/// (`smcr`, `smcd`); `traffic` stands in for them when none did.
pub const ROWS: [(&str, &str); 18] = [
    ("kernel", "the version and the modes it allows: AF_SMC (any SMC kernel), IPPROTO_SMC (6.11+), IPv4-mapped IPv6 clients over SMC-Rv2 (6.14+); skipped on a kernel without SMC"),
    ("smc", "whether the kernel has SMC at all (built in, loaded, loadable, not built, no module support) and `socket(AF_SMC)` works; seccomp/LSM refusals are told apart"),
    ("smc_diag", "the smc_diag module, which `smcrun ss` and the runtime's fallback reasons read"),
    ("rdma", "RDMA devices and their port states (SMC-R uses ACTIVE ports only)"),
    ("smc-devices", "the device ports SMC can use: active SMC-R ports, SMC-D devices"),
    ("smc-rv2", "SMC-Rv2 capability and a UEID (SMC-Rv2 needs one both peers share)"),
    ("pnet", "the PNET table, and interfaces it names that are not in this namespace"),
    ("sysctls", "every `net.smc.*` sysctl and its value"),
    ("ipv6-java", "before 6.14, AF_INET6 sockets to IPv4 peers (Java's default) fall back: `-Djava.net.preferIPv4Stack=true`"),
    ("memlock", "RLIMIT_MEMLOCK (SMC's buffers are kernel memory and do not count against it)"),
    ("rx-buffer-full:TECH", "the live counters: receive buffer full, against the threshold (5 %); the advice names `net.smc.rmem`"),
    ("tx-buffer:TECH", "the live counters: send buffer full or too small (5 %); the advice names `net.smc.wmem`"),
    ("peer-buffer:TECH", "the live counters: the peer's receive buffer full or too small (5 %); the advice names the peer's `net.smc.rmem`"),
    ("traffic", "the live counters when no technology saw traffic since smc was loaded (no ratios to judge yet), or could not be read"),
    ("fallbacks", "the share of connections that fell back (threshold 10 %), the top reasons, and what to do about the first"),
    ("bpf", "BPF mode, not checked: one skipped row that points to `--bpf` (it never decides the exit status)"),
    ("program", "with `-- PROGRAM`: whether LD_PRELOAD reaches it: statically linked, Go, setuid/setgid, file capabilities, or a shell script that runs one of those"),
    ("java", "with `-- java ...`: whether its sockets can use SMC (before 6.14, not without `-Djava.net.preferIPv4Stack=true`)"),
];

/// The host's checks, in the table's order (the program's and BPF mode's are added by the caller).
pub fn checks(h: &Host) -> Vec<Check> {
    let mut out = vec![
        kernel(h),
        smc(h),
        smc_diag(h),
        rdma(h),
        smc_devices(h),
        smcr_v2(h),
        pnet_check(h),
        sysctls(h),
        ipv6_java(h),
        memlock(h),
    ];
    out.extend(counters(h));
    out
}

fn probe(family: libc::c_int, protocol: libc::c_int) -> Probe {
    // SAFETY: socket/close on a descriptor owned here.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, protocol);
        if fd >= 0 {
            libc::close(fd);
            Probe::Works
        } else {
            Probe::Refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
    }
}

impl Host {
    /// The running system's facts. Module states are taken before `socket(AF_SMC)` is tried
    /// (which makes the kernel load smc where it can).
    pub fn read() -> Host {
        let smc = kmod::availability("smc");
        // A kernel without module support and without modules.builtin (the test bed's own builds)
        // shows a built-in smc_diag only by answering: its sock_diag handler is the proof.
        let smc_diag = match kmod::availability("smc_diag") {
            a if !a.present() && smcrun_kernel::sock_diag::dump_raw(0).is_ok() => {
                Availability::BuiltIn
            }
            a => a,
        };
        let ib_core = kmod::availability("ib_core");
        let af_smc = probe(43, 0);
        let ipproto_smc = probe(libc::AF_INET, 256);
        use snapshot::{Collector, Collectors};
        let snap = snapshot::read(
            [
                Collector::Counters,
                Collector::Info,
                Collector::Topology,
                Collector::Rdma,
            ]
            .into_iter()
            .fold(Collectors::NONE, |s, c| s.with(c, true)),
        );
        let pnet = match pnet::Pnet::open().and_then(|p| p.show()) {
            Ok(r) => Part::Read(r),
            Err(e) => Part::from_error(&e),
        };
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct it is given.
        let memlock = if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0 {
            let f = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
            (f(lim.rlim_cur), f(lim.rlim_max))
        } else {
            (None, None)
        };
        let netdevs = std::fs::read_dir("/sys/class/net")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        Host {
            release: kmod::kernel_release(),
            smc,
            smc_diag,
            af_smc,
            ipproto_smc,
            counters: snap.counters,
            info: snap.info,
            topology: snap.topology,
            rdma: snap.rdma,
            ib_core,
            pnet,
            sysctls: snapshot::read_sysctls(),
            memlock,
            netdevs,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A host as the VM test bed's guest is after a capture phase.
    pub(crate) fn vm_host(phase: &str) -> Host {
        let s = crate::fixtures::snapshot(phase);
        Host {
            release: "6.12.117+deb12-amd64".into(),
            smc: Availability::Loaded,
            smc_diag: Availability::Loaded,
            af_smc: Probe::Works,
            ipproto_smc: Probe::Works,
            counters: s.counters,
            info: s.info,
            topology: s.topology,
            rdma: s.rdma,
            ib_core: Availability::Loaded,
            pnet: Part::Read(Vec::new()),
            sysctls: vec![
                ("rmem".into(), "131072".into()),
                ("wmem".into(), "262144".into()),
            ],
            memlock: (Some(8 << 20), Some(8 << 20)),
            netdevs: vec!["lo".into()],
        }
    }

    fn by_id<'a>(c: &'a [Check], id: &str) -> &'a Check {
        c.iter()
            .find(|x| x.id == id)
            .unwrap_or_else(|| panic!("no {id} in {c:#?}"))
    }

    #[test]
    fn the_vm_after_smcr_traffic_passes() {
        let c = checks(&vm_host("smcr"));
        for id in [
            "kernel",
            "smc",
            "smc_diag",
            "rdma",
            "smc-devices",
            "smc-rv2",
            "pnet",
            "sysctls",
            "memlock",
            "fallbacks",
            "rx-buffer-full:smcr",
            "tx-buffer:smcr",
        ] {
            assert_eq!(by_id(&c, id).status, Status::Pass, "{:?}", by_id(&c, id));
        }
        assert!(by_id(&c, "smc-rv2").detail.contains("SMCRUN-TEST"));
        assert!(by_id(&c, "rdma")
            .detail
            .contains("rxe_lo port 1 ACTIVE on lo"));
        assert!(by_id(&c, "kernel")
            .detail
            .contains("IPPROTO_SMC (--mode inet, 6.11+): yes"));
        assert!(by_id(&c, "kernel")
            .detail
            .contains("IPv4-mapped IPv6 clients over SMC-Rv2 (6.14+): no"));
        // 6.12 < 6.14: the Java advice.
        let j = by_id(&c, "ipv6-java");
        assert_eq!(j.status, Status::Warn);
        assert!(j.advice.contains("-Djava.net.preferIPv4Stack=true"));
        assert_eq!(verdict(&c), Verdict::Warnings);
        assert!(
            c.iter().all(|x| x.id != "rx-buffer-full:smcd"),
            "no SMC-D traffic, no SMC-D rows"
        );
    }

    #[test]
    fn fallbacks_above_the_threshold_name_the_reason_and_what_to_do() {
        let h = vm_host("fallback");
        let c = checks(&h);
        let f = by_id(&c, "fallbacks");
        let counters = h.counters.get().unwrap();
        let fb = counters.fallback.client_total + counters.fallback.server_total;
        assert!(f.detail.starts_with(&format!("{fb} of ")), "{f:?}");
        assert!(f.detail.contains("threshold 10.00%"), "{f:?}");
        assert!(
            f.detail.contains("0x03030000 NOSMCDEV") || f.detail.contains("0x03010000 PEERNOSMC"),
            "{f:?}"
        );
        // The capture: 18 SMC-R connections, then the fallbacks. Warn only above 10%.
        let total = counters.stats.smcr.successes() + fb;
        if fb as f64 / total as f64 > FALLBACK_RATIO_WARN {
            assert_eq!(f.status, Status::Warn);
            assert!(!f.advice.is_empty());
        } else {
            assert_eq!(f.status, Status::Pass);
        }
        let mut many = counters.clone();
        many.fallback.server_total += 1000;
        many.fallback.server[0].count += 1000;
        let f = fallbacks(&many);
        assert_eq!(f.status, Status::Warn);
        let top = many.fallback.server[0].code;
        assert!(f.advice.starts_with(&*reasons::describe(top).name), "{f:?}");
    }

    #[test]
    fn buffer_ratios_show_ratio_threshold_and_sysctl() {
        let mut h = vm_host("smcr");
        let (mut t_rx_full, mut t_rx) = (0, 1);
        if let Part::Read(c) = &mut h.counters {
            let t = &mut c.stats.smcr;
            t.rx_buffers.full = t.rx_count / 5;
            (t_rx_full, t_rx) = (t.rx_buffers.full, t.rx_count);
            t.tx_buffers.size_small = t.tx_count / 4;
            t.tx_buffers.full_peer = t.tx_count / 2;
        }
        let c = checks(&h);
        let rx = by_id(&c, "rx-buffer-full:smcr");
        assert_eq!(rx.status, Status::Warn);
        let want = format!(
            "{:.2}% (threshold 5.00%)",
            (t_rx_full as f64) * 100.0 / t_rx as f64
        );
        assert!(rx.detail.ends_with(&want), "{rx:?}");
        assert!(rx.advice.contains("net.smc.rmem (now 131072)"), "{rx:?}");
        let tx = by_id(&c, "tx-buffer:smcr");
        assert_eq!(tx.status, Status::Warn);
        assert!(tx.advice.contains("net.smc.wmem (now 262144)"), "{tx:?}");
        let peer = by_id(&c, "peer-buffer:smcr");
        assert!(
            peer.status == Status::Warn && peer.advice.contains("on the peers"),
            "{peer:?}"
        );
    }

    #[test]
    fn a_kernel_without_smc_is_told_so_plainly_and_never_modprobe() {
        let h = Host {
            release: "6.18.44-fc-v669".into(),
            smc: Availability::NoModuleSupport,
            smc_diag: Availability::NoModuleSupport,
            af_smc: Probe::Refused(libc::EAFNOSUPPORT),
            ipproto_smc: Probe::Refused(libc::EPROTONOSUPPORT),
            counters: Part::Absent("x".into()),
            info: Part::Absent("x".into()),
            topology: Part::Absent("x".into()),
            rdma: Part::Absent("x".into()),
            ib_core: Availability::NoModuleSupport,
            pnet: Part::Absent("x".into()),
            sysctls: Vec::new(),
            memlock: (Some(8 << 20), None),
            netdevs: vec!["lo".into()],
        };
        let c = checks(&h);
        let s = by_id(&c, "smc");
        assert_eq!(s.status, Status::Fail);
        assert!(
            s.detail.starts_with(
                "this kernel has no SMC: it is not built in, and the kernel has no module support"
            ),
            "{s:?}"
        );
        let k = by_id(&c, "kernel");
        assert_eq!(
            k.status,
            Status::Skip,
            "a kernel without SMC passes nothing: {k:?}"
        );
        assert!(k.detail.ends_with("but it has no SMC (see smc)"), "{k:?}");
        assert!(
            k.detail.contains("IPPROTO_SMC (--mode inet, 6.11+): yes"),
            "{k:?}"
        );
        for x in &c {
            assert!(
                !x.detail.contains("modprobe") && !x.advice.contains("modprobe"),
                "{x:?}"
            );
        }
        assert_eq!(by_id(&c, "rdma").status, Status::Fail);
        assert_eq!(by_id(&c, "smc-rv2").status, Status::Skip);
        assert_eq!(verdict(&c), Verdict::Failed);
        assert!(by_id(&c, "memlock")
            .detail
            .contains("8 MiB (hard unlimited)"));
        // A kernel whose smc can be loaded is told how.
        let h = Host {
            smc: Availability::Loadable {
                file: "kernel/net/smc/smc.ko".into(),
            },
            ..h
        };
        assert!(by_id(&checks(&h), "smc").advice.starts_with("modprobe smc"));
    }

    /// Every row the checks give is one of [`ROWS`] (the manual's table).
    #[test]
    fn every_row_is_in_the_list_of_rows() {
        let mut hosts: Vec<Host> = ["smcr", "smcd", "fallback", "smcd-fallback"]
            .into_iter()
            .map(vm_host)
            .collect();
        let mut bare = vm_host("smcr");
        bare.counters = Part::Absent("x".into());
        hosts.push(bare);
        let mut seen = std::collections::BTreeSet::new();
        for h in &hosts {
            for c in checks(h) {
                let id = c.id.replace(":smcr", ":TECH").replace(":smcd", ":TECH");
                assert!(
                    ROWS.iter().any(|r| r.0 == id),
                    "{} is not in doctor::ROWS",
                    c.id
                );
                seen.insert(id);
            }
        }
        assert!(seen.len() >= 13, "the hosts gave too few rows: {seen:?}");
    }

    #[test]
    fn versions() {
        assert_eq!(version("6.12.117+deb12-amd64"), Some((6, 12)));
        assert_eq!(version("5.10.0"), Some((5, 10)));
        assert_eq!(version("garbage"), None);
        assert_eq!(verdict(&[]), Verdict::Passed);
    }
}
