//! The smcrun preload library.
//!
//! Loaded with `LD_PRELOAD` into an unmodified program, it turns the program's TCP sockets
//! (`AF_INET`/`AF_INET6`, `SOCK_STREAM`, protocol 0 or `IPPROTO_TCP`) into SMC sockets, and gives
//! the program the TCP socket it asked for whenever the kernel cannot make an SMC one. Nothing else
//! the program can see changes: other sockets are untouched, errno is kept, and a converted socket
//! still reports the family and protocol the program asked for.
//!
//! Layout: [`hooks`] holds the exported symbols and nothing else; [`guard`] is what every hook
//! runs inside (re-entrancy, panics, errno); [`real`] finds the next definition of each symbol;
//! [`convert`] decides and makes the SMC socket; [`policy`] switches sockets the policy wants on
//! TCP; [`config`] reads the settings once; [`debug`] writes the `SMCRUN_DEBUG` lines. What
//! happened to each connection is the runtime's business (`smcrun_runtime`): the hooks tell it.

mod config;
mod convert;
mod debug;
mod drain;
mod guard;
mod hooks;
mod policy;
mod real;

use smcrun_runtime::{exit_summary, own_table, sidecar, track};

/// The library constructor, as an `.init_array` entry: the C library calls it when the library is
/// loaded, before the program's `main`, with `argc`, `argv` and `envp` (glibc passes them to every
/// initialiser), which lets the runtime take the program's name without reading /proc.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char) =
    init;

/// Runs when the library is loaded, while the program is normally still single-threaded: resolve
/// every real symbol and read the configuration here so that the hooks only ever do atomic loads
/// later. Every program started under smcrun pays for this, sockets or not: no allocation, no
/// file read. A panic here is caught: the program runs, without the shim's set-up (the hooks then
/// resolve what they need on first use).
extern "C" fn init(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    let _ = std::panic::catch_unwind(|| {
        real::resolve_all();
        // SAFETY: with argc > 0 the C library's argv holds argc NUL-terminated strings.
        let argv0 = (argc > 0 && !argv.is_null())
            .then(|| unsafe { *argv })
            .filter(|p| !p.is_null())
            .map(|p| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes());
        sidecar::init(argv0);
        own_table::set_bypass(guard::bypass_thread);
        let cfg = config::get();
        sidecar::set_mode(cfg.mode);
        sidecar::set_settings(cfg.fallback, &cfg.policy_text);
        // SAFETY: registering extern "C" fns without arguments, as pthread_atfork and atexit
        // require.
        unsafe {
            libc::pthread_atfork(None, None, Some(child_after_fork));
            libc::atexit(at_exit);
        }
    });
}

/// In a forked child: a new start for the runtime (see `track::after_fork_in_child`).
extern "C" fn child_after_fork() {
    let _ = std::panic::catch_unwind(track::after_fork_in_child);
}

/// When the program exits: the `SMCRUN_DEBUG=2` summary and the final report (with its summary
/// line under `SMCRUN_REPORT=1`), after the program's own exit handlers.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // unsent bytes first (the kernel drops them at exit), then the report
        drain::before_exit();
        let cfg = config::get();
        if cfg.debug >= 2 {
            debug::exit_summary();
        }
        exit_summary::at_exit(cfg.report);
    });
}
