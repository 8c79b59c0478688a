//! smcrun's BPF mode: SMC sockets for the programs LD_PRELOAD cannot reach (Go, static,
//! setuid), for a whole process tree, a whole cgroup v2 subtree (a container, a pod, a systemd
//! service) or a whole network namespace (a pod), through the kernel's socket() hook.
//!
//! `socket(2)` asks `update_socket_protocol()` which protocol to create; a BPF fmod_ret program
//! (`smcrun.bpf.c`, committed with its object, see `bpf/build.sh`) answers IPPROTO_SMC for
//! AF_INET/AF_INET6 stream sockets of protocol 0 or IPPROTO_TCP made in its scope, so they are
//! SMC sockets that fall back to TCP by themselves. This crate:
//! - [`prereq::check`]: what BPF mode needs (kernel 6.11, BTF, the hook, CONFIG_MPTCP,
//!   capabilities, a usable smc module, bpffs, cgroup2), one structured result each;
//! - [`rules::analyse`]: which rules of a policy the kernel can decide (program names) and
//!   which need the preload (addresses, ports, roles), and the kernel's rule table;
//! - [`tree::TreeScope`]: a process tree's attachment, alive as long as the value;
//! - [`pinned`]: the pinned instance behind `smcrun attach` (attach, detach, list), serving
//!   [`cgroup`] and [`netns_scope`] scopes;
//! - [`handshake`]: the handshake policy (Linux 6.19's smc_hs_ctrl): role, address and port
//!   rules decided by the kernel at the SYN for a whole network namespace ([`hsrules`]);
//! - [`scopes::all`]: every scope with its counts, for `attach --list`, `ps` and the exporter.
//!
//! Nothing is attached unless an IPPROTO_SMC socket can be made, and whoever holds an
//! attachment holds such a socket (see [`module_hold`]).

pub mod agent_probes;
pub mod cgroup;
mod error;
pub mod handshake;
pub mod hsrules;
pub mod layout;
pub mod loader;
pub mod maps;
pub mod module_hold;
pub mod netns_scope;
pub mod pinned;
pub mod prereq;
pub mod ringbuf;
pub mod rules;
pub mod scopes;
pub mod sys;
pub mod tree;

pub use error::Error;
