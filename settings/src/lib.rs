//! The settings that the `smcrun` launcher writes and the preload shim reads: the names of the
//! environment variables and the parsers of their values.
//!
//! Both sides use this one crate so that a value the launcher accepts is exactly a value the shim
//! accepts. The parsers neither allocate nor panic: the shim calls them inside other people's
//! processes, possibly before `main`.

#![no_std]
#![forbid(unsafe_code)]

/// How the shim makes an SMC socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `socket(AF_SMC, type, SMCPROTO_SMC or SMCPROTO_SMC6)`: every kernel with SMC.
    Smc,
    /// `socket(AF_INET or AF_INET6, type, IPPROTO_SMC)`: Linux 6.11 and later; the socket keeps its
    /// IP family, so the program sees one less difference.
    Inet,
    /// Try `Inet`, then `Smc`, once per process; remember what the kernel accepts.
    Auto,
}

/// What the shim does when the kernel refuses an SMC socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Create the TCP socket the program asked for (the default: the program never notices).
    Tcp,
    /// Return the kernel's error to the program (for tests, and operators who must know).
    Strict,
}

/// One setting of the shim: the variable it is read from, smc_run's name for it, its name in the
/// launcher's options and config file, what it accepts and what applies when it is unset or bad.
/// Every part of smcrun (the shim, the launcher's environment writer and option help, the config
/// file reader, the tests) takes these from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable (`SMCRUN_MODE`).
    pub var: &'static str,
    /// smc_run's name for the same thing, read when `var` is unset (`SMC_DEBUG`).
    pub alias: Option<&'static str>,
    /// The long option and the config-file key (`mode` for `--mode` and `mode = "inet"`).
    pub key: &'static str,
    /// What a valid value looks like, for the one-line error or warning about a bad one.
    pub expected: &'static str,
    /// What applies when the setting is unset, or (in the shim) bad.
    pub default: &'static str,
    /// One line of help.
    pub help: &'static str,
}

impl Setting {
    /// The names the shim looks the setting up under, in order (the `SMCRUN_` name wins).
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        core::iter::once(self.var).chain(self.alias)
    }
}

/// `SMCRUN_MODE`: how SMC sockets are made.
pub const MODE: Setting = Setting {
    var: "SMCRUN_MODE",
    alias: None,
    key: "mode",
    expected: "one of smc, inet, auto",
    default: "auto",
    help: "How SMC sockets are made: smc (AF_SMC), inet (IPPROTO_SMC, Linux 6.11+) or auto (inet if the kernel has it, else smc)",
};
/// `SMCRUN_FALLBACK`: what happens when the kernel refuses an SMC socket.
pub const FALLBACK: Setting = Setting {
    var: "SMCRUN_FALLBACK",
    alias: None,
    key: "fallback",
    expected: "one of tcp, strict",
    default: "tcp",
    help: "When the kernel refuses an SMC socket: tcp (make the TCP socket the program asked for) or strict (return the error)",
};
/// `SMCRUN_DEBUG` (smc_run: `SMC_DEBUG`): stderr lines about each socket.
pub const DEBUG: Setting = Setting {
    var: "SMCRUN_DEBUG",
    alias: Some("SMC_DEBUG"),
    key: "debug",
    expected: "0, 1 or 2",
    default: "0",
    help: "1: one stderr line per converted socket and per fallback; 2: also bind, connect, accept and an exit summary",
};
/// `SMCRUN_SNDBUF` (smc_run: `SMC_SNDBUF`): SO_SNDBUF of converted sockets.
pub const SNDBUF: Setting = Setting {
    var: "SMCRUN_SNDBUF",
    alias: Some("SMC_SNDBUF"),
    key: "sndbuf",
    expected:
        "a size in bytes from 1 to 2147483647, optionally with a k or m suffix (e.g. 256k, 1m)",
    default: "the system default",
    help: "Send buffer of converted sockets, e.g. 256k or 1m",
};
/// `SMCRUN_RCVBUF` (smc_run: `SMC_RCVBUF`): SO_RCVBUF of converted sockets.
pub const RCVBUF: Setting = Setting {
    var: "SMCRUN_RCVBUF",
    alias: Some("SMC_RCVBUF"),
    key: "rcvbuf",
    expected: SNDBUF.expected,
    default: "the system default",
    help: "Receive buffer of converted sockets, e.g. 256k or 1m",
};
/// `SMCRUN_REPORT`: a one-line summary of the program's connections when it exits.
pub const REPORT: Setting = Setting {
    var: "SMCRUN_REPORT",
    alias: None,
    key: "report",
    expected: "0 or 1",
    default: "0",
    help: "Print a one-line summary of the program's connections on stderr when it exits",
};
/// `SMCRUN_POLICY`: which sockets get SMC and which stay TCP, in the policy's canonical one-line
/// form (written by the launcher after it validated `--policy` or `--config`).
pub const POLICY: Setting = Setting {
    var: "SMCRUN_POLICY",
    alias: None,
    key: "policy",
    expected: "rules such as 'smc port 6379,3306; tcp' (see smcrun policy check)",
    default: "the default action (smc)",
    help:
        "Which sockets get SMC and which stay TCP, first match wins, e.g. 'smc port 6379,3306; tcp'",
};

/// Every setting the shim reads.
pub const SHIM_SETTINGS: [&Setting; 7] =
    [&MODE, &FALLBACK, &DEBUG, &SNDBUF, &RCVBUF, &REPORT, &POLICY];

/// A variable only the `smcrun` command reads (the shim never does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub var: &'static str,
    /// What it does, in one line.
    pub help: &'static str,
}

/// `SMCRUN_SHIM`: the shim library to preload instead of the one found beside smcrun.
pub const SHIM_PATH: Variable = Variable {
    var: "SMCRUN_SHIM",
    help: "The shim library to preload (an absolute path; default: the one next to smcrun, in ../lib/smcrun/ beside it, or in the system library directories)",
};

/// Every variable the `smcrun` command reads besides [`SHIM_SETTINGS`] (which it also writes for
/// the program it runs). With them, every `SMCRUN_` variable there is: the man pages' and the
/// manual's ENVIRONMENT are made from these two lists, and a test checks the sources name no other.
pub const LAUNCHER_VARIABLES: [&Variable; 1] = [&SHIM_PATH];

impl Mode {
    /// Every mode, in the order help and the shells' completions list them.
    pub const ALL: [Mode; 3] = [Mode::Smc, Mode::Inet, Mode::Auto];

    /// The value as the variable and the config file spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Smc => "smc",
            Mode::Inet => "inet",
            Mode::Auto => "auto",
        }
    }
}

impl Fallback {
    /// Every fallback, in the order help and the shells' completions list them.
    pub const ALL: [Fallback; 2] = [Fallback::Tcp, Fallback::Strict];

    /// The value as the variable and the config file spell it.
    pub fn name(self) -> &'static str {
        match self {
            Fallback::Tcp => "tcp",
            Fallback::Strict => "strict",
        }
    }
}

/// Parses a mode name (`smc`, `inet`, `auto`; ASCII case ignored).
pub fn parse_mode(s: &str) -> Option<Mode> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("smc") {
        Some(Mode::Smc)
    } else if s.eq_ignore_ascii_case("inet") {
        Some(Mode::Inet)
    } else if s.eq_ignore_ascii_case("auto") {
        Some(Mode::Auto)
    } else {
        None
    }
}

/// Parses a fallback name (`tcp`, `strict`; ASCII case ignored).
pub fn parse_fallback(s: &str) -> Option<Fallback> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("tcp") {
        Some(Fallback::Tcp)
    } else if s.eq_ignore_ascii_case("strict") {
        Some(Fallback::Strict)
    } else {
        None
    }
}

/// Parses a debug level: `0`, `1` or `2`.
pub fn parse_debug(s: &str) -> Option<u8> {
    match s.trim() {
        "0" => Some(0),
        "1" => Some(1),
        "2" => Some(2),
        _ => None,
    }
}

/// Parses an on/off switch: `0` or `1`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// Parses a buffer size: decimal bytes with an optional `k`/`K` (KiB) or `m`/`M` (MiB) suffix,
/// from 1 byte to `i32::MAX` (what `setsockopt(SO_SNDBUF)` takes).
pub fn parse_size(s: &str) -> Option<i32> {
    let s = s.trim();
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024u64),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let bytes = n.checked_mul(mult)?;
    if bytes == 0 || bytes > i32::MAX as u64 {
        return None;
    }
    Some(bytes as i32)
}

/// Why a socket the shim would have converted stayed TCP.
/// Decided from the errno of the failed SMC `socket()`, by the shim when it falls back and by the
/// demo when it explains a TCP connection, so both say the same thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// EAFNOSUPPORT: no AF_SMC in this kernel.
    NoAfSmc,
    /// EPROTONOSUPPORT and kin: no IPPROTO_SMC (Linux < 6.11) or no SMC for this family.
    NoProtocol,
    /// EPERM / EACCES: a seccomp filter or an LSM refuses SMC sockets.
    Denied,
    /// EINVAL: the kernel refused the arguments.
    Invalid,
    /// EMFILE, ENFILE, ENOBUFS, ENOMEM: out of resources at that moment.
    Resources,
    /// Any other errno.
    Other,
}

impl Why {
    /// Every reason, in the order of [`Why::index`].
    pub const ALL: [Why; 6] = [
        Why::NoAfSmc,
        Why::NoProtocol,
        Why::Denied,
        Why::Invalid,
        Why::Resources,
        Why::Other,
    ];

    /// Classifies the errno of a failed SMC socket().
    pub fn of(errno: i32) -> Why {
        match errno {
            libc::EAFNOSUPPORT => Why::NoAfSmc,
            libc::EPROTONOSUPPORT
            | libc::ESOCKTNOSUPPORT
            | libc::EPROTOTYPE
            | libc::ENOPROTOOPT => Why::NoProtocol,
            libc::EPERM | libc::EACCES => Why::Denied,
            libc::EINVAL => Why::Invalid,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => Why::Resources,
            _ => Why::Other,
        }
    }

    /// Whether the condition lasts for the life of the process, so that the shim can stop asking
    /// the kernel (resource shortages pass; a missing family or a policy does not).
    pub fn is_lasting(self) -> bool {
        !matches!(self, Why::Resources | Why::Other)
    }

    /// The reason in an operator's words.
    pub fn describe(self) -> &'static str {
        match self {
            Why::NoAfSmc => "the kernel has no AF_SMC (smc module not loaded or not built)",
            Why::NoProtocol => {
                "the kernel has no IPPROTO_SMC for this family (needs Linux 6.11+ with smc loaded)"
            }
            Why::Denied => "SMC sockets are denied by a seccomp or LSM policy",
            Why::Invalid => "the kernel refused the SMC socket's arguments",
            Why::Resources => "out of resources for an SMC socket at that moment",
            Why::Other => "the kernel refused the SMC socket",
        }
    }

    /// A short, stable key for summaries and JSON.
    pub fn key(self) -> &'static str {
        match self {
            Why::NoAfSmc => "no-af-smc",
            Why::NoProtocol => "no-ipproto-smc",
            Why::Denied => "denied",
            Why::Invalid => "invalid",
            Why::Resources => "resources",
            Why::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("2m"), Some(2 * 1024 * 1024));
        assert_eq!(parse_size(" 1M "), Some(1024 * 1024));
        assert_eq!(parse_size("2047m"), Some(2047 * 1024 * 1024));
        for bad in [
            "",
            "k",
            "0",
            "0k",
            "-1",
            "1.5m",
            "12x",
            "2048m",
            "99999999999999999999",
            "1 k",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?} must be refused");
        }
    }

    #[test]
    fn why_classifies_errnos() {
        assert_eq!(Why::of(libc::EAFNOSUPPORT), Why::NoAfSmc);
        assert_eq!(Why::of(libc::EPROTONOSUPPORT), Why::NoProtocol);
        assert!(Why::of(libc::EPERM).is_lasting());
        assert!(!Why::of(libc::EMFILE).is_lasting());
        assert_eq!(Why::of(libc::EIO), Why::Other);
    }

    #[test]
    fn every_setting_has_a_distinct_name_and_key() {
        for (i, a) in SHIM_SETTINGS.iter().enumerate() {
            assert!(
                a.var.starts_with("SMCRUN_") && a.var.len() < 32,
                "{}",
                a.var
            );
            for b in &SHIM_SETTINGS[i + 1..] {
                assert_ne!(a.var, b.var);
                assert_ne!(a.key, b.key);
            }
        }
        let mut names = DEBUG.names();
        assert_eq!(names.next(), Some("SMCRUN_DEBUG"));
        assert_eq!(names.next(), Some("SMC_DEBUG"));
        assert_eq!(names.next(), None);
    }

    #[test]
    fn names() {
        assert_eq!(parse_mode("INET"), Some(Mode::Inet));
        assert_eq!(parse_mode("smc"), Some(Mode::Smc));
        assert_eq!(parse_mode("auto"), Some(Mode::Auto));
        assert_eq!(parse_mode("smcr"), None);
        assert_eq!(parse_fallback("strict"), Some(Fallback::Strict));
        assert_eq!(parse_fallback("tcp"), Some(Fallback::Tcp));
        assert_eq!(parse_fallback("none"), None);
        assert_eq!(parse_debug("2"), Some(2));
        assert_eq!(parse_debug("3"), None);
        assert_eq!(parse_debug("yes"), None);
    }
}
