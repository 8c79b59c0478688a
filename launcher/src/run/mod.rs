//! Running a program under smcrun: the options and their environment for the shim, finding the
//! program and whether LD_PRELOAD can reach it, exec in place (same PID, argv, exit status,
//! signals), BPF mode, the built-in demo, and `smcrun policy check`.

pub mod bpf;
pub mod config_file;
pub mod demo;
pub mod elf_parts;
pub mod exec;
pub mod handshake;
pub mod policy_check;
pub mod preload;
// Reading and setting a signal disposition: no safe call in std, nix or rustix.
#[allow(unsafe_code)]
pub mod signals;
pub mod suggest;
pub mod sysctl;
