//! The settings that the `smcrun` launcher writes and the preload shim reads: the names of the
//! environment variables and the parsers of their values.
//!
//! Both sides use this one crate so that a value the launcher accepts is exactly a value the shim
//! accepts. The parsers neither allocate nor panic: the shim calls them inside other people's
//! processes, possibly before `main`.

#![no_std]

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

/// Primary variable names (`SMCRUN_*`) and the smc_run names accepted as aliases.
pub mod var {
    /// `smc`, `inet` or `auto`.
    pub const MODE: &str = "SMCRUN_MODE";
    /// `tcp` or `strict`.
    pub const FALLBACK: &str = "SMCRUN_FALLBACK";
    /// `0`, `1` or `2`.
    pub const DEBUG: &str = "SMCRUN_DEBUG";
    /// Send buffer size in bytes, `k`/`m` suffixes allowed.
    pub const SNDBUF: &str = "SMCRUN_SNDBUF";
    /// Receive buffer size in bytes, `k`/`m` suffixes allowed.
    pub const RCVBUF: &str = "SMCRUN_RCVBUF";
    /// The policy in its canonical one-line form (`smc port 6379; tcp`): which sockets get SMC
    /// and which stay TCP. Written by the launcher after it validated `--policy` or `--config`.
    pub const POLICY: &str = "SMCRUN_POLICY";
    /// `1`: print a one-line summary of the program's connections on stderr when it exits.
    pub const REPORT: &str = "SMCRUN_REPORT";
    /// smc_run's name for [`DEBUG`].
    pub const SMC_DEBUG: &str = "SMC_DEBUG";
    /// smc_run's name for [`SNDBUF`].
    pub const SMC_SNDBUF: &str = "SMC_SNDBUF";
    /// smc_run's name for [`RCVBUF`].
    pub const SMC_RCVBUF: &str = "SMC_RCVBUF";
}

/// What each setting accepts, worded for the one-line error or warning about a bad value.
pub mod expected {
    /// For [`super::parse_mode`].
    pub const MODE: &str = "one of smc, inet, auto";
    /// For [`super::parse_fallback`].
    pub const FALLBACK: &str = "one of tcp, strict";
    /// For [`super::parse_debug`].
    pub const DEBUG: &str = "0, 1 or 2";
    /// For [`super::parse_bool`].
    pub const BOOL: &str = "0 or 1";
    /// For [`super::parse_size`].
    pub const SIZE: &str =
        "a size in bytes from 1 to 2147483647, optionally with a k or m suffix (e.g. 256k, 1m)";
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

/// The Linux errno values that [`Why::of`] distinguishes (asm-generic/errno*.h; the same on every
/// Linux architecture this project builds for).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// Out of memory.
    pub const ENOMEM: i32 = 12;
    /// Permission denied.
    pub const EACCES: i32 = 13;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// Too many open files in the system.
    pub const ENFILE: i32 = 23;
    /// Too many open files in the process.
    pub const EMFILE: i32 = 24;
    /// Protocol wrong type for socket.
    pub const EPROTOTYPE: i32 = 91;
    /// Protocol not available.
    pub const ENOPROTOOPT: i32 = 92;
    /// Protocol not supported.
    pub const EPROTONOSUPPORT: i32 = 93;
    /// Socket type not supported.
    pub const ESOCKTNOSUPPORT: i32 = 94;
    /// Address family not supported by protocol.
    pub const EAFNOSUPPORT: i32 = 97;
    /// No buffer space available.
    pub const ENOBUFS: i32 = 105;

    /// The symbolic name of the values above, for messages; "errno" for any other.
    pub fn name(e: i32) -> &'static str {
        match e {
            EPERM => "EPERM",
            ENOMEM => "ENOMEM",
            EACCES => "EACCES",
            EINVAL => "EINVAL",
            ENFILE => "ENFILE",
            EMFILE => "EMFILE",
            EPROTOTYPE => "EPROTOTYPE",
            ENOPROTOOPT => "ENOPROTOOPT",
            EPROTONOSUPPORT => "EPROTONOSUPPORT",
            ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
            EAFNOSUPPORT => "EAFNOSUPPORT",
            ENOBUFS => "ENOBUFS",
            _ => "errno",
        }
    }
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
            errno::EAFNOSUPPORT => Why::NoAfSmc,
            errno::EPROTONOSUPPORT
            | errno::ESOCKTNOSUPPORT
            | errno::EPROTOTYPE
            | errno::ENOPROTOOPT => Why::NoProtocol,
            errno::EPERM | errno::EACCES => Why::Denied,
            errno::EINVAL => Why::Invalid,
            errno::EMFILE | errno::ENFILE | errno::ENOBUFS | errno::ENOMEM => Why::Resources,
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
    fn errno_values_match_the_c_library() {
        use errno::*;
        let pairs = [
            (EPERM, libc::EPERM),
            (ENOMEM, libc::ENOMEM),
            (EACCES, libc::EACCES),
            (EINVAL, libc::EINVAL),
            (ENFILE, libc::ENFILE),
            (EMFILE, libc::EMFILE),
            (EPROTOTYPE, libc::EPROTOTYPE),
            (ENOPROTOOPT, libc::ENOPROTOOPT),
            (EPROTONOSUPPORT, libc::EPROTONOSUPPORT),
            (ESOCKTNOSUPPORT, libc::ESOCKTNOSUPPORT),
            (EAFNOSUPPORT, libc::EAFNOSUPPORT),
            (ENOBUFS, libc::ENOBUFS),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs);
        }
        assert_eq!(Why::of(libc::EAFNOSUPPORT), Why::NoAfSmc);
        assert!(Why::of(libc::EPERM).is_lasting());
        assert!(!Why::of(libc::EMFILE).is_lasting());
        assert_eq!(Why::of(libc::EIO), Why::Other);
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
