//! `--sysctl KEY=VALUE` (checked by `smcrun_config::parse_assignment`) and the buffer limits that
//! -r/-t raise, written through /proc/sys.

use std::io::ErrorKind;
use std::path::PathBuf;

pub use smcrun_config::{parse_assignment, Assignment};

fn path_of(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

fn explain(key: &str, e: std::io::Error) -> String {
    let why = match e.kind() {
        ErrorKind::PermissionDenied => "not permitted (needs root / CAP_NET_ADMIN)".to_string(),
        ErrorKind::NotFound if key.starts_with("net.smc.") => format!(
            "no such sysctl: {}",
            smcrun_kernel::kmod::availability("smc").advice("smc")
        ),
        ErrorKind::NotFound => "no such sysctl on this kernel".to_string(),
        _ if e.raw_os_error() == Some(libc::EROFS) => {
            "/proc/sys is read-only here (a container without the privilege to change it?)"
                .to_string()
        }
        _ => e.to_string(),
    };
    format!("cannot set {key}: {why}")
}

/// Writes one sysctl.
pub fn apply(a: &Assignment) -> Result<(), String> {
    std::fs::write(path_of(&a.key), format!("{}\n", a.value)).map_err(|e| explain(&a.key, e))
}

/// Raises a numeric sysctl to at least `min` (as smc_run does for net.core.[rw]mem_max).
pub fn raise_to(key: &str, min: u64) -> Result<(), String> {
    let path = path_of(key);
    let cur = std::fs::read_to_string(&path).map_err(|e| explain(key, e))?;
    let cur: u64 = cur
        .trim()
        .parse()
        .map_err(|_| format!("{key} holds {:?}, not a number", cur.trim()))?;
    if cur >= min {
        return Ok(());
    }
    std::fs::write(&path, format!("{min}\n")).map_err(|e| explain(key, e))
}
