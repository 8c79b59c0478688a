//! One field of a `/proc/.../status` file (`Threads:`, `Uid:`, `Seccomp:`, `NSpid:`): what the
//! runtime and the tools read of a process or thread there. For the runtime's thread and the
//! tools, not for hooks: it allocates.

extern crate std;

use std::string::String;

/// `pick` applied to the value of the first line of the status file `path` that starts with `key`
/// (`"Threads:"`, with its colon); None when the file cannot be read, has no such line, or `pick`
/// says None.
pub fn field<T>(path: &str, key: &str, pick: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    let status: String = std::fs::read_to_string(path).ok()?;
    pick(status.lines().find_map(|l| l.strip_prefix(key))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_read_from_its_line_and_a_missing_one_is_none() {
        let threads = field("/proc/self/status", "Threads:", |v| {
            v.trim().parse::<u32>().ok()
        });
        assert!(threads.is_some_and(|n| n >= 1), "{threads:?}");
        let pid = field("/proc/self/status", "Pid:", |v| {
            v.trim().parse::<u32>().ok()
        });
        assert_eq!(pid, Some(std::process::id()));
        assert_eq!(
            field("/proc/self/status", "NoSuchField:", |v| Some(v.len())),
            None
        );
        assert_eq!(
            field("/nonexistent/status", "Pid:", |v| Some(v.len())),
            None
        );
    }
}
