//! The shim's settings, read once from the environment.
//!
//! Read with `getenv` (no allocation) by the library constructor, or by the first hook if another
//! library's constructor creates a socket before ours runs. A bad value gets one warning line
//! naming the variable, the value and what is expected, and the default is used: the program
//! keeps running.

use crate::log::line;
use smcrun_policy::{Policy, ProgramPolicy};
use smcrun_settings::{self as settings, expected, var, Fallback, Mode};
use std::ffi::CStr;
use std::sync::OnceLock;

/// Everything the hooks need to know.
#[derive(Debug)]
pub struct Config {
    /// How SMC sockets are made.
    pub mode: Mode,
    /// What happens when they cannot be.
    pub fallback: Fallback,
    /// 0 quiet, 1 a line per converted socket and per fallback, 2 also bind/connect and an exit
    /// summary.
    pub debug: u8,
    /// SO_SNDBUF for converted sockets.
    pub sndbuf: Option<i32>,
    /// SO_RCVBUF for converted sockets.
    pub rcvbuf: Option<i32>,
    /// Print a summary of the program's connections when it exits.
    pub report: bool,
    /// The policy's rules for this program (no policy: every TCP socket is SMC).
    pub policy: ProgramPolicy,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The configuration, loaded on first use.
pub fn get() -> &'static Config {
    CONFIG.get_or_init(load)
}

/// The value of the first of `names` that is set, with the name it was found under. A value that
/// is not UTF-8 is reported as such by the caller's parser (it cannot match).
fn lookup(names: &[&'static str]) -> Option<(&'static str, &'static str)> {
    for &name in names {
        let mut buf = [0u8; 32];
        buf[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: buf is NUL-terminated (names are shorter than 32 bytes); getenv returns null or a
        // pointer into the environment that stays valid unless the program calls setenv on it, which
        // it cannot do before we read it here at start-up.
        let p = unsafe { libc::getenv(buf.as_ptr().cast()) };
        if !p.is_null() {
            // SAFETY: getenv returned a NUL-terminated string.
            let v = unsafe { CStr::from_ptr(p) };
            return Some((name, v.to_str().unwrap_or("\u{fffd}")));
        }
    }
    None
}

/// Parses one setting: `None` when unset, the default (with a warning) when bad.
fn setting<T>(
    names: &[&'static str],
    parse: fn(&str) -> Option<T>,
    expected: &str,
    default: &str,
) -> Option<T> {
    let (name, value) = lookup(names)?;
    let parsed = parse(value);
    if parsed.is_none() {
        line!("warning: {name}={value:?} is not valid: expected {expected}; using {default}");
    }
    parsed
}

fn load() -> Config {
    Config {
        mode: setting(&[var::MODE], settings::parse_mode, expected::MODE, "auto")
            .unwrap_or(Mode::Auto),
        fallback: setting(
            &[var::FALLBACK],
            settings::parse_fallback,
            expected::FALLBACK,
            "tcp",
        )
        .unwrap_or(Fallback::Tcp),
        debug: setting(
            &[var::DEBUG, var::SMC_DEBUG],
            settings::parse_debug,
            expected::DEBUG,
            "0",
        )
        .unwrap_or(0),
        sndbuf: setting(
            &[var::SNDBUF, var::SMC_SNDBUF],
            settings::parse_size,
            expected::SIZE,
            "the system default",
        ),
        rcvbuf: setting(
            &[var::RCVBUF, var::SMC_RCVBUF],
            settings::parse_size,
            expected::SIZE,
            "the system default",
        ),
        report: setting(&[var::REPORT], settings::parse_bool, expected::BOOL, "0").unwrap_or(false),
        policy: program_policy(),
    }
}

/// SMCRUN_POLICY, narrowed to this executable. A bad policy gets one warning and the default
/// (every TCP socket SMC, as without a policy): the launcher refuses bad policies before exec, so
/// this only happens when the variable is set by hand.
fn program_policy() -> ProgramPolicy {
    let Some((name, text)) = lookup(&[var::POLICY]) else {
        return ProgramPolicy::default();
    };
    match Policy::parse(text) {
        Ok(p) => {
            // Both the executable (symlinks resolved) and the name it was started as: Debian's
            // redis-server is a symlink to redis-check-rdb, and a rule naming redis-server must
            // match it.
            let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
            let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
            let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            p.for_program_names(&[exe.as_os_str().as_encoded_bytes(), argv0])
        }
        Err(e) => {
            line!("warning: {name} is not valid: {e}; using the default action (smc)");
            ProgramPolicy::default()
        }
    }
}
