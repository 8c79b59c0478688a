//! Doctor's checks of the host's setup: the kernel and the modes it allows, the smc and smc_diag
//! modules and `socket(AF_SMC)`, the RDMA devices and the ports SMC can use, SMC-Rv2 and its UEID,
//! the PNET table, the `net.smc.*` sysctls, IPv6 for Java, and RLIMIT_MEMLOCK.

use smcrun_kernel::features::{self, version};
use smcrun_kernel::kmod::Availability;

use super::{at_least, skip_or_failed, Check, Host, Probe, Status};
use crate::snapshot::{Part, RdmaDevice};

/// The setup's checks, in the table's order.
pub(super) fn checks(h: &Host) -> Vec<Check> {
    vec![
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
    ]
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

#[cfg(test)]
mod tests {
    use super::super::tests::by_id;
    use super::super::{checks, verdict, Verdict};
    use super::*;

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
}
