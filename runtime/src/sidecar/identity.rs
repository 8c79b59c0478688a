//! Who the process is and what it runs with, as its report says: the name it was started as, and
//! the shim's mode, fallback and policy settings.

use std::sync::atomic::{AtomicU8, Ordering};

/// The name the program was started as, taken when the library is loaded: argv\[0\]'s base name
/// (Debian's redis-server is a symlink to redis-check-rdb, and the operator started
/// redis-server), before the program can rewrite its argv (nginx's workers call themselves
/// "nginx: worker process"). Copied into a fixed buffer by [`take_name`] from the argv the C
/// library hands the constructor: no allocation and no system call while every exec'd program
/// starts. A forked child inherits it; an exec'd program takes its own.
struct StartedAs {
    name: std::cell::UnsafeCell<[u8; 256]>,
    len: std::sync::atomic::AtomicUsize,
}
// SAFETY: `name` is written once by `take_name`, before `len` is published (Release) and before
// any reader (which loads `len` with Acquire first); read-only after.
unsafe impl Sync for StartedAs {}
static PROGRAM: StartedAs = StartedAs {
    name: std::cell::UnsafeCell::new([0; 256]),
    len: std::sync::atomic::AtomicUsize::new(0),
};

/// The base name of `argv0`, cut to the buffer.
fn base_name(argv0: &[u8]) -> &[u8] {
    let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or_default();
    &base[..base.len().min(256)]
}

/// The program's name (see [`PROGRAM`]; without an argv\[0\], `/proc/self/comm`) and the
/// executable's path.
pub(super) fn names() -> (String, String) {
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let len = PROGRAM.len.load(Ordering::Acquire);
    let program = if len > 0 {
        // SAFETY: published by `take_name` before `len` (see StartedAs).
        let name = unsafe { &(&*PROGRAM.name.get())[..len] };
        String::from_utf8_lossy(name).into_owned()
    } else {
        std::fs::read_to_string("/proc/self/comm")
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default()
    };
    (program, exe)
}

static MODE: AtomicU8 = AtomicU8::new(2);

/// Records the shim's mode setting for the report.
pub fn set_mode(m: smcrun_settings::Mode) {
    MODE.store(
        match m {
            smcrun_settings::Mode::Smc => 0,
            smcrun_settings::Mode::Inet => 1,
            smcrun_settings::Mode::Auto => 2,
        },
        Ordering::Relaxed,
    );
}

static FALLBACK: AtomicU8 = AtomicU8::new(0);
/// The policy's canonical text, set once at start-up (it lives as long as the shim's config).
pub(super) static POLICY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Records the shim's fallback setting and policy for the report (at start-up: the report shows
/// what the program runs with, `ps` and `why` and the exporter show it from there).
pub fn set_settings(fallback: smcrun_settings::Fallback, policy: &'static str) {
    FALLBACK.store(
        match fallback {
            smcrun_settings::Fallback::Tcp => 0,
            smcrun_settings::Fallback::Strict => 1,
        },
        Ordering::Relaxed,
    );
    let _ = POLICY.set(policy);
}

/// The fallback setting's name, for the report.
pub(super) fn fallback_name() -> &'static str {
    match FALLBACK.load(Ordering::Relaxed) {
        1 => smcrun_settings::Fallback::Strict.name(),
        _ => smcrun_settings::Fallback::Tcp.name(),
    }
}

/// The mode setting's name, for the report.
pub(super) fn mode_name() -> &'static str {
    match MODE.load(Ordering::Relaxed) {
        0 => smcrun_settings::Mode::Smc.name(),
        1 => smcrun_settings::Mode::Inet.name(),
        _ => smcrun_settings::Mode::Auto.name(),
    }
}

/// Keeps the base name of the program's argv\[0\] (see [`PROGRAM`]); the library constructor's
/// part, once, before the program runs: no allocation, no system call.
pub(super) fn take_name(argv0: Option<&[u8]>) {
    if let Some(a) = argv0.map(base_name).filter(|b| !b.is_empty()) {
        // SAFETY: the constructor is the only writer, before `len` is published and before any
        // reader.
        unsafe { (&mut *PROGRAM.name.get())[..a.len()].copy_from_slice(a) };
        PROGRAM.len.store(a.len(), Ordering::Release);
    }
}
