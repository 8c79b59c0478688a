//! BPF mode's views: `smcrun attach` (a cgroup or a network namespace), `smcrun detach`, `smcrun
//! attach --list` (every scope with its counts) and `smcrun policy check --bpf`, as [`json`] and
//! as [`text`] (with the lines of BPF mode's scopes `smcrun ps` shows). The data is the
//! `smcrun-bpf` crate's (scopes, attachments, a policy's analysis); here is what the two forms
//! share.

pub mod json;
pub mod text;

use smcrun_bpf::rules::Honour;
use smcrun_bpf::scopes::TreeInfo;

/// A verdict's kind (`kernel`, `preload`, `cannot`) and why, for the text and the JSON alike.
pub fn honour(h: &Honour) -> (&'static str, String) {
    match h {
        Honour::Kernel => (
            "kernel",
            "decided in the kernel at socket(), by program name".to_string(),
        ),
        Honour::NeedsPreload(w) => ("preload", w.clone()),
        Honour::Cannot(w) => ("cannot", w.clone()),
    }
}

/// When a tree's program was loaded, in seconds since the epoch (from its nanoseconds since boot
/// and this system's uptime; `None` when the uptime cannot be read).
pub fn tree_since(t: &TreeInfo) -> Option<u64> {
    let up: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    Some((now - up + t.loaded_ns_since_boot as f64 / 1e9) as u64)
}
