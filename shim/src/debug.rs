//! The `SMCRUN_DEBUG` lines: one per converted socket and per fallback (level 1), plus bind,
//! connect, accept and an exit summary (level 2). Each is one write(2) of a line built on the
//! stack ([`smcrun_runtime::log`]).

use smcrun_runtime::counters::{load, COUNTS};
pub use smcrun_runtime::line;
pub use smcrun_sys::errno::name as errno_name;

/// The outcome of a call for a debug line: "ok", or the errno's name.
pub fn outcome(ret: i32, errno: i32) -> &'static str {
    if ret >= 0 {
        "ok"
    } else {
        errno_name(errno)
    }
}

/// With SMCRUN_DEBUG=2, when a process that touched a TCP socket exits: its own numbers.
pub fn exit_summary() {
    let c = &COUNTS;
    if !c.touched_tcp() {
        return;
    }
    smcrun_runtime::exit_summary::flush_program_stdout();
    line!(
        "summary: {} sockets converted to SMC, {} stayed TCP at socket(), {} untouched; {} binds, {} connects ({} failed), {} accepts; {} connections; the sidecar's descriptors: {}",
        load(&c.converted),
        load(&c.tcp_at_creation),
        load(&c.untouched),
        load(&c.binds),
        load(&c.connects),
        load(&c.failed_connects),
        load(&c.accepts),
        load(&c.connections),
        smcrun_runtime::own_table::Summary,
    );
}
