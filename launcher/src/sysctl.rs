//! `--sysctl KEY=VALUE` and the buffer limits that -r/-t raise, written through /proc/sys.

use std::io::ErrorKind;
use std::path::PathBuf;

/// One `--sysctl KEY=VALUE`, checked when the command line is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Dotted name, e.g. `net.smc.wmem`.
    pub key: String,
    /// The value written, as given.
    pub value: String,
}

/// Parses `KEY=VALUE` where KEY is a net.smc.* or net.core.* name.
pub fn parse_assignment(s: &str) -> Result<Assignment, String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected KEY=VALUE, e.g. net.smc.wmem=262144"))?;
    let key = key.trim();
    if !(key.starts_with("net.smc.") || key.starts_with("net.core.")) {
        return Err(format!(
            "{key:?}: only net.smc.* and net.core.* sysctls can be set"
        ));
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
        || key.contains("..")
        || key.ends_with('.')
    {
        return Err(format!(
            "{key:?}: expected a sysctl name of lower-case letters, digits, '_' and '.'"
        ));
    }
    if value.is_empty() || value.contains('\n') {
        return Err(format!("{s:?}: expected a non-empty value on one line"));
    }
    Ok(Assignment {
        key: key.to_string(),
        value: value.to_string(),
    })
}

fn path_of(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

fn explain(key: &str, e: std::io::Error) -> String {
    let why = match e.kind() {
        ErrorKind::PermissionDenied => "not permitted (needs root / CAP_NET_ADMIN)".to_string(),
        ErrorKind::NotFound if key.starts_with("net.smc.") => format!(
            "no such sysctl: {}",
            smcrun_telemetry::kmod::availability("smc").advice("smc")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments() {
        let a = parse_assignment("net.smc.wmem=262144").unwrap();
        assert_eq!(
            (a.key.as_str(), a.value.as_str()),
            ("net.smc.wmem", "262144")
        );
        assert!(parse_assignment("net.core.rmem_max=1048576").is_ok());
        for bad in [
            "net.smc.wmem",
            "kernel.panic=1",
            "net.smc.=1",
            "net.smc.Wmem=1",
            "net.smc.wmem=",
            "net.smc..x=1",
        ] {
            assert!(parse_assignment(bad).is_err(), "{bad} must be refused");
        }
    }
}
