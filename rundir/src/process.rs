//! What a reader learns of a process from `/proc`, to know a report's process from another that
//! got its pid later: its start time (a report carries its writer's).

/// Field 22 of a `/proc/PID/stat` file: the start time in clock ticks since boot.
pub fn start_ticks(stat_path: &str) -> Option<u64> {
    let s = std::fs::read_to_string(stat_path).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
