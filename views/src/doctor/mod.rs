//! `smcrun doctor`'s view: a table of checks, each pass, warn, fail (or skip, when what it needs
//! is not there) with what was found and one line of advice. Here is its data: a [`Check`], the
//! [`Host`] facts the checks look at ([`Host::read`] reads them from the running system, in
//! `host.rs`), the list of every [`ROWS`] and the run of the host's [`checks`] (pure: facts in,
//! checks out). The checks are by what they look at:
//!
//! - `setup.rs`: the kernel, its modules, the devices, the PNET table, the sysctls, the limits;
//! - `traffic.rs`: the live counters (buffer ratios, fallbacks), judged by [`advice`]'s
//!   thresholds, with what to do per fallback reason;
//! - [`bpf_prereq`]: BPF mode's prerequisites (with `--bpf`), or the one row that says how to
//!   check them;
//! - [`reach`]: a program given on the command line (whether LD_PRELOAD reaches it; Java).
//!
//! [`json`] is its `--json`, [`text`] its table.

pub mod advice;
pub mod bpf_prereq;
mod host;
pub mod json;
pub mod reach;
mod setup;
pub mod text;
mod traffic;

use serde::{Deserialize, Serialize};
use smcrun_kernel::features::Feature;
use smcrun_kernel::kmod::Availability;
use smcrun_kernel::pnet;

use crate::snapshot::{Counters, Info, Part, RdmaDevice, Topology};

/// How a check came out. The order is the severity: the worst decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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

/// One row of the doctor's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// Every row `smcrun doctor` can give, in the table's order, with what it looks at: those of
/// [`checks`], then BPF mode's ([`bpf_prereq`]: `bpf`; with `--bpf`, `bpf` gives way to one
/// `bpf:ID` row per `smcrun_bpf::prereq` check) and the program's ([`reach`]: `program`, `java`).
/// The manual's table of checks (docs/src/reference/doctor-checks.md) is made from this list,
/// and the tests check that no check gives another. A `:TECH` row comes once per technology that
/// saw traffic (`smcr`, `smcd`); `traffic` stands in for them when none did.
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
    let mut out = setup::checks(h);
    out.extend(traffic::checks(h));
    out
}

/// Whether a kernel of `release` has `feature` (`None` when the release cannot be read).
fn at_least(release: &str, feature: Feature) -> Option<bool> {
    feature.missing_in(release).map(|m| !m)
}

/// The check `id` when what it needs could not be read: a warning when SMC refused, else skipped.
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

    /// The check `id` of `c`.
    pub(crate) fn by_id<'a>(c: &'a [Check], id: &str) -> &'a Check {
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
    fn no_checks_pass() {
        assert_eq!(verdict(&[]), Verdict::Passed);
    }
}
