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
//! [`convert`] decides and makes the SMC socket; [`config`] reads the environment once;
//! [`counters`] and [`log`] record what happened without allocating.

mod config;
mod convert;
mod counters;
mod guard;
mod hooks;
mod log;
mod policy;
mod real;
mod tracked;

/// Runs when the library is loaded, before the program's `main`, while it is normally still
/// single-threaded: resolve every real symbol and read the configuration here so that the hooks
/// only ever do atomic loads later.
#[ctor::ctor]
fn init() {
    real::resolve_all();
    let cfg = config::get();
    counters::register_exit_summary();
    smcrun_telemetry::sidecar::set_mode(match cfg.mode {
        smcrun_settings::Mode::Smc => "smc",
        smcrun_settings::Mode::Inet => "inet",
        smcrun_settings::Mode::Auto => "auto",
    });
    if cfg.report {
        smcrun_telemetry::sidecar::enable_exit_summary();
    }
    // SAFETY: registering extern "C" fns without arguments, as pthread_atfork and atexit require.
    unsafe {
        libc::pthread_atfork(None, None, Some(child_after_fork));
        libc::atexit(smcrun_telemetry::sidecar::exit_summary);
    }
}

/// In a forked child: the sidecar thread did not survive the fork; start afresh, lazily.
extern "C" fn child_after_fork() {
    smcrun_telemetry::sidecar::after_fork_in_child();
}
