//! BPF mode's views: `smcrun attach` (a cgroup or a network namespace), `smcrun detach`, `smcrun
//! attach --list` (every scope with its counts) and `smcrun policy check --bpf`, as [`json`].

pub mod json;
