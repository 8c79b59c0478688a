//! Which Linux version brought each SMC interface smcrun uses: the one table that decides "this
//! kernel lacks X; Linux V added it", for the views' refusals, `doctor` and BPF mode alike.
//!
//! An interface missing on a kernel older than the version that added it is a fact about that
//! kernel, not a module to load: the commands say so in one line and exit with their "not
//! possible here" status instead of passing the kernel's errno on.

use std::fmt;

/// One interface and the first Linux version that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// What it is, as an operator reads it ("SMC statistics over netlink (SMC_NETLINK_GET_STATS)").
    pub name: &'static str,
    /// The first Linux release (major, minor) with it.
    pub since: (u32, u32),
}

impl Feature {
    /// "5.14": the version alone.
    pub fn since_version(&self) -> String {
        format!("{}.{}", self.since.0, self.since.1)
    }

    /// "Linux 5.14" for messages.
    pub fn since_text(&self) -> String {
        format!("Linux {}", self.since_version())
    }

    /// Whether a kernel of `release` is too old for it: `Some(true)` older, `Some(false)` new
    /// enough, `None` when the release cannot be read.
    pub fn missing_in(&self, release: &str) -> Option<bool> {
        version(release).map(|v| v < self.since)
    }

    /// The one sentence for a kernel of `release` that lacks it: "this kernel (Linux 5.10.0-46-amd64)
    /// has no SMC statistics over netlink (...); Linux 5.14 added them".
    pub fn lacking(&self, release: &str) -> String {
        format!(
            "this kernel (Linux {release}) has no {}; {} added it",
            self.name,
            self.since_text()
        )
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}+)", self.name, self.since_text())
    }
}

/// The `SMC_GEN_NETLINK` family itself, with system info, link groups and devices
/// (net/smc/smc_netlink.c).
pub const SMC_GENL: Feature = Feature {
    name: "SMC generic netlink family (SMC_GEN_NETLINK: system info, link groups, devices)",
    since: (5, 11),
};
/// `SMC_NETLINK_GET_STATS` and `SMC_NETLINK_GET_FBACK_STATS` (net/smc/smc_stats.c).
pub const SMC_STATS: Feature = Feature {
    name: "SMC statistics over netlink (SMC_NETLINK_GET_STATS, GET_FBACK_STATS)",
    since: (5, 14),
};
/// The user and system EID commands (`SMC_NETLINK_*_UEID`, `*_SEID`).
pub const SMC_EID: Feature = Feature {
    name: "SMC EID table over netlink (SMC_NETLINK_*_UEID, *_SEID)",
    since: (5, 14),
};
/// SMC-Rv2 (RoCE v2, routable; the UEID is its EID).
pub const SMCR_V2: Feature = Feature {
    name: "SMC-Rv2",
    since: (5, 16),
};
/// `/proc/sys/net/smc` (net/smc/smc_sysctl.c; its first one, autocorking_size).
pub const SMC_SYSCTL: Feature = Feature {
    name: "net.smc sysctls (/proc/sys/net/smc)",
    since: (5, 19),
};
/// The socket() hook BPF mode attaches to (`update_socket_protocol`, registered by MPTCP).
pub const SOCKET_HOOK: Feature = Feature {
    name: "socket() hook for BPF (update_socket_protocol)",
    since: (6, 6),
};
/// `socket(AF_INET/AF_INET6, SOCK_STREAM, IPPROTO_SMC)`.
pub const IPPROTO_SMC: Feature = Feature {
    name: "IPPROTO_SMC sockets (socket(AF_INET, SOCK_STREAM, IPPROTO_SMC))",
    since: (6, 11),
};
/// SMC-Rv2 for an AF_INET6 socket with an IPv4-mapped address (the JDK's dual-stack sockets).
pub const SMCR_V4_MAPPED: Feature = Feature {
    name: "SMC-Rv2 for IPv4-mapped IPv6 sockets",
    since: (6, 14),
};

/// BTF for modules (`/sys/kernel/btf/<module>`, CONFIG_DEBUG_INFO_BTF_MODULES): the agent's
/// CO-RE relocations against smc.ko's types when smc is a module.
pub const MODULE_BTF: Feature = Feature {
    name: "BTF for modules (/sys/kernel/btf/smc, CONFIG_DEBUG_INFO_BTF_MODULES)",
    since: (5, 11),
};
/// BPF atomic operations that return the old value (`atomic_fetch_add`): the agent's programs
/// claim a slot of their table of open sockets with one.
pub const BPF_ATOMIC_FETCH: Feature = Feature {
    name: "BPF atomic fetch operations (BPF_ATOMIC with BPF_FETCH)",
    since: (5, 12),
};
/// A kprobe's missed runs in its BPF link's info (`perf_event.kprobe.missed`) and kprobe
/// programs' `recursion_misses`.
pub const KPROBE_MISSED: Feature = Feature {
    name: "missed counts of kprobes in BPF link info (perf_event.kprobe.missed)",
    since: (6, 7),
};

/// The handshake hook (`struct smc_hs_ctrl`, `net.smc.hs_ctrl`, CONFIG_SMC_HS_CTRL_BPF): a BPF
/// struct_ops that decides per connection whether the SYN carries the SMC option.
pub const SMC_HS_CTRL: Feature = Feature {
    name: "SMC handshake hook for BPF (smc_hs_ctrl, net.smc.hs_ctrl)",
    since: (6, 19),
};

/// The running kernel's release (`uname -r`), "unknown" if it cannot be read.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// (major, minor) of a kernel release ("6.12.117+deb12-amd64" → (6, 12)).
pub fn version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_of_releases() {
        assert_eq!(version("6.12.117+deb12-amd64"), Some((6, 12)));
        assert_eq!(version("5.10.0-46-amd64"), Some((5, 10)));
        assert_eq!(version("7.3.4"), Some((7, 3)));
        assert_eq!(version("x"), None);
    }

    #[test]
    fn older_kernels_lack_what_came_later() {
        assert_eq!(SMC_GENL.missing_in("5.10.0-46-amd64"), Some(true));
        assert_eq!(SMC_GENL.missing_in("6.1.0-57-amd64"), Some(false));
        assert_eq!(IPPROTO_SMC.missing_in("6.1.0-57-amd64"), Some(true));
        assert_eq!(IPPROTO_SMC.missing_in("6.11.0"), Some(false));
        assert_eq!(IPPROTO_SMC.missing_in("unknown"), None);
        assert_eq!(
            SMC_STATS.lacking("5.10.0-46-amd64"),
            "this kernel (Linux 5.10.0-46-amd64) has no SMC statistics over netlink \
             (SMC_NETLINK_GET_STATS, GET_FBACK_STATS); Linux 5.14 added it"
        );
    }
}
