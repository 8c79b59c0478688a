//! The shim's runtime: the part of smcrun that lives inside each program under the shim and knows,
//! for that process, which connections ran over SMC-R or SMC-D and why the others ran over TCP.
//!
//! Layout: [`track`] is what the hooks call, one function per event (atomics and raw system calls
//! only: usable in any hook, signal handler or forked child); [`fdtable`] holds what is known of
//! each fd; [`counters`] the exact counts; [`record`] carries the details of classified
//! connections to the [`sidecar`], the thread that classifies SMC connections with the kernel's
//! smc_diag (through the one classifier, `smcrun_classify`, which `smcrun demo` uses too) and
//! writes the report (into the run directory, through `smcrun_rundir::write`); [`exit_summary`]
//! the summaries printed when the program ends; [`log`] one-line messages that never allocate;
//! [`own_table`] gives the sidecar thread a descriptor table of its own;
//! [`sigmask`] tells a hook in a signal handler from the program's normal code (the sidecar is
//! never started from a handler); [`alone`] stops the runtime's threads for the calls the kernel
//! makes only for a process with one thread.
//!
//! How a process is followed: a forked child starts its own counts and its own report file at
//! fork time (while it still has its parent's rights), and keeps the knowledge of inherited
//! listeners, so a pre-fork worker's accepted connections carry its listener's story; a process
//! that switches uid opens its report first, and keeps writing it through that descriptor; an
//! exec'd program starts afresh under the same pid.

pub mod alone;
pub mod counters;
pub mod drain;
pub mod exit_summary;
pub mod fdtable;
pub mod log;
pub mod own_table;
pub mod record;
pub mod sidecar;
pub mod sigmask;
pub mod track;
