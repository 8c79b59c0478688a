//! The shim's settings, read once from the environment.
//!
//! Read with `getenv` (no allocation) by the library constructor, or by the first hook if another
//! library's constructor creates a socket before ours runs. Every setting is one of
//! `smcrun_settings`' declarations (its variable, smc_run alias, parser, expected values and
//! default). A bad value gets one warning line naming the variable, the value and what is
//! expected, and the default is used: the program keeps running.

use crate::debug::line;
use smcrun_policy::{Action, Family, Policy, ProgramPolicy};
use smcrun_settings::{self as settings, Fallback, Mode, Setting};
use std::ffi::CStr;
use std::sync::OnceLock;

/// Everything the hooks need to know.
#[derive(Debug)]
pub struct Config {
    /// How SMC sockets are made.
    pub mode: Mode,
    /// What happens when they cannot be.
    pub fallback: Fallback,
    /// 0 quiet, 1 a line per converted socket and per fallback, 2 also bind/connect/accept and an
    /// exit summary.
    pub debug: u8,
    /// SO_SNDBUF for converted sockets.
    pub sndbuf: Option<i32>,
    /// SO_RCVBUF for converted sockets.
    pub rcvbuf: Option<i32>,
    /// Print a summary of the program's connections when it exits.
    pub report: bool,
    /// The policy's rules for this program (no policy: every TCP socket is SMC).
    pub policy: ProgramPolicy,
    /// The whole policy's canonical text, for the report (empty: none, or a bad one).
    pub policy_text: String,
    /// Whether the policy keeps every socket of the family on TCP from the start
    /// (`ProgramPolicy::likely`, asked once at load): IPv4's, then IPv6's.
    tcp_by_policy: [bool; 2],
}

impl Config {
    /// Whether a TCP socket of `domain` (`AF_INET` or `AF_INET6`) stays TCP by policy, whatever
    /// it will connect to (see `ProgramPolicy::likely`).
    #[inline]
    pub fn tcp_by_policy(&self, domain: libc::c_int) -> bool {
        self.tcp_by_policy[usize::from(domain == libc::AF_INET6)]
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The configuration, loaded on first use (errno kept: the load reads files and may wait for
/// another thread's load). Inlined: once loaded, one load and a compare.
#[inline]
pub fn get() -> &'static Config {
    match CONFIG.get() {
        Some(c) => c,
        None => get_first(),
    }
}

/// [`get`]'s first call, which loads the configuration.
#[cold]
#[inline(never)]
fn get_first() -> &'static Config {
    smcrun_sys::errno::keep(|| CONFIG.get_or_init(load))
}

/// The configuration if it is loaded already (the constructor loads it): a hook's fast path asks
/// without ever loading it, which only the guarded path may do.
#[inline]
pub fn loaded() -> Option<&'static Config> {
    CONFIG.get()
}

/// The value of `s` (its `SMCRUN_` name first, then smc_run's), with the name it was found under.
/// A value that is not UTF-8 reaches the parser as U+FFFD, which it refuses.
fn lookup(s: &Setting) -> Option<(&'static str, &'static str)> {
    for name in s.names() {
        let mut buf = [0u8; 32];
        buf[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: buf is NUL-terminated (names are shorter than 32 bytes, checked by the settings
        // crate's tests); getenv returns null or a pointer into the environment that stays valid
        // unless the program calls setenv on it, which it cannot do before we read it at start-up.
        let p = unsafe { libc::getenv(buf.as_ptr().cast()) };
        if !p.is_null() {
            // SAFETY: getenv returned a NUL-terminated string.
            let v = unsafe { CStr::from_ptr(p) };
            return Some((name, v.to_str().unwrap_or("\u{fffd}")));
        }
    }
    None
}

/// Parses one setting: `None` when unset, and when bad (after one warning; the caller's default
/// is the setting's declared default).
fn read<T>(s: &Setting, parse: fn(&str) -> Option<T>) -> Option<T> {
    let (name, value) = lookup(s)?;
    let parsed = parse(value);
    if parsed.is_none() {
        line!(
            "warning: {name}={value:?} is not valid: expected {}; using {}",
            s.expected,
            s.default
        );
    }
    parsed
}

fn load() -> Config {
    let (policy, policy_text) = program_policy();
    let tcp_by_policy = [Family::V4, Family::V6].map(|f| policy.likely(f) == Action::Tcp);
    Config {
        mode: read(&settings::MODE, settings::parse_mode).unwrap_or(Mode::Auto),
        fallback: read(&settings::FALLBACK, settings::parse_fallback).unwrap_or(Fallback::Tcp),
        debug: read(&settings::DEBUG, settings::parse_debug).unwrap_or(0),
        sndbuf: read(&settings::SNDBUF, settings::parse_size),
        rcvbuf: read(&settings::RCVBUF, settings::parse_size),
        report: read(&settings::REPORT, settings::parse_bool).unwrap_or(false),
        policy,
        policy_text,
        tcp_by_policy,
    }
}

/// SMCRUN_POLICY, narrowed to this executable. A bad policy gets one warning and the default
/// (every TCP socket SMC, as without a policy): the launcher refuses bad policies before exec, so
/// this only happens when the variable is set by hand.
fn program_policy() -> (ProgramPolicy, String) {
    let Some((name, text)) = lookup(&settings::POLICY) else {
        return (ProgramPolicy::default(), String::new());
    };
    match Policy::parse(text) {
        Ok(p) => {
            // Both the executable (symlinks resolved) and the name it was started as: Debian's
            // redis-server is a symlink to redis-check-rdb, and a rule naming redis-server must
            // match it.
            let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
            let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
            let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            (
                p.for_program_names(&[exe.as_os_str().as_encoded_bytes(), argv0]),
                p.to_string(),
            )
        }
        Err(e) => {
            line!(
                "warning: {name} is not valid: {e}; using {}",
                settings::POLICY.default
            );
            (ProgramPolicy::default(), String::new())
        }
    }
}
