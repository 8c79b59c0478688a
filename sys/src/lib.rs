//! SMC's constants, and thin typed wrappers over the socket system calls that smcrun makes on
//! sockets it does not own: the shim inside other people's programs, its runtime, and the tools
//! that look at a program's sockets (the demo, the tests, the benchmarks).
//!
//! Every wrapper is the raw system call (`syscall(2)`, never the C library's symbol), so that it
//! never re-enters the shim's own hooks or another preload's, does no heap allocation and takes
//! no lock (usable inside a hook, a signal handler or a forked child), and leaves the calling
//! thread's errno as it found it: a failure comes back as an [`Errno`] in the `Result`.

#![no_std]

pub mod errno;
#[cfg(feature = "std")]
pub mod file;
pub mod smc;
pub mod sock;
#[cfg(feature = "std")]
pub mod status;
pub mod table;

pub use errno::Errno;
