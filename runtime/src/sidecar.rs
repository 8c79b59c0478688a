//! The sidecar: a thread inside the program that classifies the program's SMC connections while
//! they are open (one smc_diag dump answers every waiting connection), settles nonblocking
//! connects, keeps the recent connections and the totals per endpoint, and writes the report.
//!
//! It is started by the first hook that runs with the signal mask the program started with (so
//! never from inside a signal handler, where creating a thread could deadlock on the allocator),
//! with every signal blocked so the program's signals keep going to its own threads. It blocks
//! without waking when there is nothing to do; the first event after that wakes it (one futex
//! wake per idle period). While connections wait, it looks often (every 10 to 100 ms, twenty times
//! what the last look cost), because a connection can only be asked about while it is open; new
//! connections arriving one by one are looked at together after that wait, not one dump each.
//!
//! Layout: `state` keeps the connections (one look, the recent list, the totals per endpoint);
//! `report_writer` builds the report from them and writes it; `identity` is what the report says
//! the process is and runs with; `kernel` what the sidecar asks the kernel; `pace` its timings;
//! `thread` the thread's life (start, wake-ups, fork, exit).

mod identity;
mod kernel;
mod pace;
mod report_writer;
mod state;
mod thread;

pub use identity::{set_mode, set_settings};
pub use kernel::{Kernel, Live};
pub use state::{Look, State};
pub use thread::{
    at_exit, forget_in_child, main_thread_leaving, maybe_start, settle, wake, wake_now,
};
pub(crate) use thread::{go_on, stop_for_call};

/// Called once by the library constructor, before the program runs, with the program's
/// argv\[0\] (None when the C library passed no argv). No allocation, two system calls (the
/// process id, the signal mask): every program started under the shim pays for this, sockets or not.
pub fn init(argv0: Option<&[u8]>) {
    crate::fdtable::own();
    smcrun_rundir::write::snapshot_env();
    identity::take_name(argv0);
    crate::sigmask::take_startup();
}

#[cfg(test)]
mod tests;
