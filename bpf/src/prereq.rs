//! What BPF mode needs from the kernel and the caller, checked one by one, so that `smcrun
//! doctor` can list them and a refusal can name exactly the one that is missing.

use crate::loader::HOOK;
use crate::module_hold;
use std::path::PathBuf;

/// Whether a prerequisite holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// It holds.
    Ok,
    /// It does not: BPF mode cannot work (for the scopes that need it).
    Missing,
    /// It could not be told (e.g. no kernel config to read); loading will tell.
    Unknown,
}

impl State {
    /// `ok`, `missing` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Missing => "missing",
            State::Unknown => "unknown",
        }
    }

    /// `Ok` when it holds, else `Missing`: for the checks that can always tell.
    fn holds(holds: bool) -> State {
        if holds {
            State::Ok
        } else {
            State::Missing
        }
    }
}

/// Which BPF scopes need a prerequisite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// Every scope (`smcrun --bpf` and `smcrun attach`).
    Always,
    /// The scopes of `smcrun attach` (pinned on bpffs).
    Attach,
    /// Only cgroup scopes (found in cgroup2).
    Cgroup,
}

/// The scope a command is about to attach, for [`Report::refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `smcrun --bpf -- COMMAND`.
    Tree,
    /// `smcrun attach --cgroup`.
    Cgroup,
    /// `smcrun attach --netns`.
    Netns,
}

impl Scope {
    fn needs(self, n: Needed) -> bool {
        match n {
            Needed::Always => true,
            Needed::Attach => self != Scope::Tree,
            Needed::Cgroup => self == Scope::Cgroup,
        }
    }
}

/// One checked prerequisite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// A stable key: `kernel`, `btf`, `hook`, `mptcp`, `capabilities`, `smc`, `load`, `bpffs`,
    /// `cgroup2`.
    pub id: &'static str,
    /// What it is, in words.
    pub what: &'static str,
    /// Whether it holds.
    pub state: State,
    /// What was seen.
    pub detail: String,
    /// How to get it, when it is missing.
    pub fix: Option<String>,
    /// Who needs it.
    pub needed: Needed,
}

impl Check {
    /// A check that names `fix` only when it is missing, as most do (`smc` and `load` take
    /// theirs from the error, and build a [`Check`] themselves).
    fn new(
        id: &'static str,
        what: &'static str,
        state: State,
        detail: String,
        fix: impl Into<String>,
        needed: Needed,
    ) -> Check {
        Check {
            id,
            what,
            state,
            detail,
            fix: (state == State::Missing).then(|| fix.into()),
            needed,
        }
    }
}

/// Every prerequisite, in the order they are checked (and reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
}

impl Report {
    /// The first prerequisite a scope needs that is missing.
    pub fn first_missing(&self, scope: Scope) -> Option<&Check> {
        self.checks
            .iter()
            .find(|c| c.state == State::Missing && scope.needs(c.needed))
    }

    /// One line for a refusal: `<what> is missing: <detail>; <fix>`.
    pub fn refusal(&self, scope: Scope) -> Option<String> {
        self.first_missing(scope).map(|c| {
            let mut s = format!("{} is missing: {}", c.what, c.detail);
            if let Some(f) = &c.fix {
                s.push_str("; ");
                s.push_str(f);
            }
            s
        })
    }
}

pub use smcrun_kernel::features::kernel_release;
use smcrun_kernel::features::{IPPROTO_SMC, SOCKET_HOOK};

/// The first mount of a file system type (`bpf`, `cgroup2`) from /proc/self/mountinfo,
/// preferring `preferred` when it is one.
pub fn mount_of(fstype: &str, preferred: &str) -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut found = Vec::new();
    for line in info.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split(' ').next() != Some(fstype) {
            continue;
        }
        if let Some(mp) = left.split(' ').nth(4) {
            found.push(PathBuf::from(mp.replace("\\040", " ")));
        }
    }
    found
        .iter()
        .find(|p| p.as_os_str() == preferred)
        .or(found.first())
        .cloned()
}

/// The cgroup v2 hierarchy's mount point (`/sys/fs/cgroup` on most systems).
pub fn cgroup2_root() -> Option<PathBuf> {
    mount_of("cgroup2", "/sys/fs/cgroup")
}

fn cap_eff() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

fn check_kernel() -> Check {
    let rel = kernel_release();
    let (state, detail) = match IPPROTO_SMC.missing_in(&rel) {
        Some(false) => (State::Ok, format!("Linux {rel}")),
        Some(true) => (State::Missing, IPPROTO_SMC.lacking(&rel)),
        None => (State::Unknown, format!("cannot read the release {rel:?}")),
    };
    Check::new(
        "kernel",
        "a kernel with IPPROTO_SMC",
        state,
        detail,
        format!("boot {} or later", IPPROTO_SMC.since_text()),
        Needed::Always,
    )
}

fn check_btf_and_hook() -> (Check, Check) {
    let btf = crate::loader::kernel_btf();
    let btf_check = Check::new(
        "btf",
        "the kernel's BTF (CONFIG_DEBUG_INFO_BTF)",
        State::holds(btf.is_ok()),
        match &btf {
            Ok(_) => "/sys/kernel/btf/vmlinux".to_string(),
            Err(e) => format!("/sys/kernel/btf/vmlinux: {e}"),
        },
        "use a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        Needed::Always,
    );
    let in_btf = btf.as_ref().ok().map(|b| {
        b.id_by_type_name_kind(HOOK, aya_obj::btf::BtfKind::Func)
            .is_ok()
    });
    let in_kallsyms = std::fs::read_to_string("/proc/kallsyms").ok().map(|s| {
        s.lines()
            .any(|l| l.rsplit(' ').next() == Some(HOOK) || l.ends_with(&format!(" {HOOK}")))
    });
    let (state, detail) = match (in_btf, in_kallsyms) {
        (Some(true), Some(false)) => (
            State::Missing,
            format!("{HOOK} is in BTF but not in /proc/kallsyms"),
        ),
        (Some(true), _) => (State::Ok, format!("{HOOK} in BTF and kallsyms")),
        (Some(false), _) => (
            State::Missing,
            format!(
                "the kernel's BTF has no function {HOOK}{}",
                if SOCKET_HOOK.missing_in(&kernel_release()) == Some(true) {
                    format!(" ({} added it)", SOCKET_HOOK.since_text())
                } else {
                    String::new()
                }
            ),
        ),
        (None, Some(true)) => (
            State::Missing,
            format!("{HOOK} is in /proc/kallsyms, but without BTF it cannot be hooked"),
        ),
        (None, _) => (
            State::Missing,
            format!("{HOOK} cannot be found without the kernel's BTF"),
        ),
    };
    let hook = Check::new(
        "hook",
        "the socket() hook update_socket_protocol",
        state,
        detail,
        format!(
            "use {} or later with CONFIG_MPTCP=y and BTF",
            SOCKET_HOOK.since_text()
        ),
        Needed::Always,
    );
    (btf_check, hook)
}

fn check_mptcp() -> Check {
    let rel = kernel_release();
    let (state, detail) = if std::path::Path::new("/proc/sys/net/mptcp").is_dir() {
        (State::Ok, "/proc/sys/net/mptcp is there".to_string())
    } else {
        match std::fs::read_to_string(format!("/boot/config-{rel}")) {
            Ok(cfg) if cfg.lines().any(|l| l == "CONFIG_MPTCP=y") => {
                (State::Ok, format!("CONFIG_MPTCP=y in /boot/config-{rel}"))
            }
            Ok(_) => (
                State::Missing,
                format!("no CONFIG_MPTCP=y in /boot/config-{rel}"),
            ),
            Err(_) => (
                State::Missing,
                "no /proc/sys/net/mptcp: the kernel has no MPTCP".to_string(),
            ),
        }
    };
    Check::new(
        "mptcp",
        "CONFIG_MPTCP (it registers the socket() hook for BPF)",
        state,
        detail,
        "use a kernel built with CONFIG_MPTCP=y",
        Needed::Always,
    )
}

fn check_caps() -> Check {
    let eff = cap_eff();
    let has = |c: u32| eff.is_some_and(|e| e & (1u64 << c) != 0);
    let (state, detail) = match eff {
        None => (
            State::Unknown,
            "cannot read CapEff in /proc/self/status".to_string(),
        ),
        Some(_) if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) => (
            State::Ok,
            if has(CAP_SYS_ADMIN) {
                "CAP_SYS_ADMIN".to_string()
            } else {
                "CAP_BPF and CAP_PERFMON".to_string()
            },
        ),
        Some(e) => (
            State::Missing,
            format!(
                "CapEff {e:016x} lacks {}",
                [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
                    .iter()
                    .filter(|(c, _)| !has(*c))
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        ),
    };
    Check::new(
        "capabilities",
        "the right to load BPF programs (root, or CAP_BPF and CAP_PERFMON)",
        state,
        detail,
        "run it as root (e.g. with sudo)",
        Needed::Always,
    )
}

fn check_smc() -> Check {
    let r = module_hold::probe();
    Check {
        id: "smc",
        what: "SMC (the smc module)",
        state: if r.is_ok() { State::Ok } else { State::Missing },
        detail: match &r {
            Ok(()) => "an IPPROTO_SMC socket can be made".to_string(),
            Err(e) => format!("socket(AF_INET, SOCK_STREAM, IPPROTO_SMC) failed: {e}"),
        },
        fix: r.as_ref().err().map(module_hold::fix_for),
        needed: Needed::Always,
    }
}

/// Loads (and unloads) the process-tree socket program: the kernel's own answer to whether
/// this process may hook socket(), after everything that can be seen from outside. Not tried
/// when an earlier check already says it cannot load (the answer would repeat that check).
fn check_load(earlier: &[Check]) -> Check {
    let blocked = earlier.iter().find(|c| {
        c.state == State::Missing
            && matches!(c.id, "kernel" | "btf" | "hook" | "mptcp" | "capabilities")
    });
    let (state, detail, fix) = match blocked {
        Some(c) => (
            State::Unknown,
            format!("not tried: {} is missing", c.id),
            None,
        ),
        None => match crate::loader::load(&[crate::tree::PROGRAM]) {
            Ok(_) => (State::Ok, "the socket() program loads".to_string(), None),
            Err(e) => (State::Missing, e.to_string(), Some(refusal_cause(&e))),
        },
    };
    Check {
        id: "load",
        what: "loading the socket() hook program",
        state,
        detail,
        fix,
        needed: Needed::Always,
    }
}

/// Whether this process is in the initial user namespace (its uid map is the identity of every
/// uid), where capabilities are the host's.
fn in_initial_user_namespace() -> Option<bool> {
    let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
    let fields: Vec<&str> = map.split_whitespace().collect();
    Some(fields == ["0", "0", "4294967295"])
}

/// Why the kernel refused the program, as far as this process can tell. An EPERM with no
/// verifier log was decided before the verifier: by the capability checks (the capabilities
/// row passed), a user namespace, an LSM's bpf hook or seccomp; a plain socket filter loading
/// tells a kernel that refuses tracing programs from one that refuses bpf(2) to this process.
fn refusal_cause(e: &crate::Error) -> String {
    let silent = e.verifier_log().is_none_or(|l| l.trim().is_empty());
    if e.errno() != Some(libc::EPERM) || !silent {
        return "the kernel's answer is above (the verifier's last line, when it ran)".to_string();
    }
    if in_initial_user_namespace() == Some(false) {
        return "this process is in a user namespace: BPF tracing programs need CAP_BPF and CAP_PERFMON in the host's (initial) one; run it on the host".to_string();
    }
    match crate::sys::plain_program_loads() {
        Err(p) => format!(
            "the kernel refuses every BPF program to this process ({p}), though it has the capabilities in the host's user namespace: a seccomp filter or an LSM forbids bpf(2); the cause cannot be seen from here"
        ),
        Ok(()) => "cause unknown: a plain BPF program loads and this process has the capabilities in the host's user namespace, but this kernel refuses BPF tracing programs (fentry, fmod_ret) before verifying them; an LSM's bpf hook or how the kernel was built decides this, and neither can be read from here".to_string(),
    }
}

fn check_bpffs() -> Check {
    let m = mount_of("bpf", crate::pinned::BPFFS);
    let ok = m
        .as_ref()
        .is_some_and(|p| p.as_os_str() == crate::pinned::BPFFS);
    Check::new(
        "bpffs",
        "the BPF file system at /sys/fs/bpf (to pin `smcrun attach`'s scopes)",
        State::holds(ok),
        match m {
            Some(p) if ok => format!("bpf mounted at {}", p.display()),
            Some(p) => format!("bpf is mounted at {}, not /sys/fs/bpf", p.display()),
            None => "no bpf file system is mounted".to_string(),
        },
        "mount it: mount -t bpf bpf /sys/fs/bpf",
        Needed::Attach,
    )
}

fn check_cgroup2() -> Check {
    let m = cgroup2_root();
    Check::new(
        "cgroup2",
        "the cgroup v2 hierarchy",
        State::holds(m.is_some()),
        match &m {
            Some(p) => format!("cgroup2 mounted at {}", p.display()),
            None => "no cgroup2 file system is mounted".to_string(),
        },
        "mount it: mount -t cgroup2 none /sys/fs/cgroup",
        Needed::Cgroup,
    )
}

/// The checks up to the load, in order: the ones whose answer [`check_load`] repeats, and SMC.
fn checks_before_load() -> Vec<Check> {
    let (btf, hook) = check_btf_and_hook();
    vec![
        check_kernel(),
        btf,
        hook,
        check_mptcp(),
        check_caps(),
        check_smc(),
    ]
}

/// The prerequisites that can be seen without loading the program, for a command that is about
/// to load it anyway (the load then is the last check; under an emulated CPU each load takes
/// seconds).
pub fn check_before_attach() -> Report {
    let mut checks = checks_before_load();
    checks.push(check_bpffs());
    checks.push(check_cgroup2());
    Report { checks }
}

/// Checks every prerequisite of BPF mode, cheapest reasons first. Reads /proc and /sys, parses
/// the kernel's BTF, makes (and closes) one IPPROTO_SMC socket, and loads (and unloads) the
/// socket() program once.
pub fn check() -> Report {
    let mut checks = checks_before_load();
    checks.push(check_load(&checks));
    checks.push(check_bpffs());
    checks.push(check_cgroup2());
    Report { checks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_first_missing_check_a_scope_needs() {
        let c = |id, state, needed| Check {
            id,
            what: id,
            state,
            detail: "seen".into(),
            fix: Some("fix".into()),
            needed,
        };
        let r = Report {
            checks: vec![
                c("kernel", State::Ok, Needed::Always),
                c("cgroup2", State::Missing, Needed::Cgroup),
                c("bpffs", State::Missing, Needed::Attach),
                c("smc", State::Missing, Needed::Always),
            ],
        };
        assert_eq!(r.first_missing(Scope::Tree).unwrap().id, "smc");
        assert_eq!(r.first_missing(Scope::Cgroup).unwrap().id, "cgroup2");
        assert_eq!(r.first_missing(Scope::Netns).unwrap().id, "bpffs");
        assert_eq!(r.refusal(Scope::Tree).unwrap(), "smc is missing: seen; fix");
    }
}
