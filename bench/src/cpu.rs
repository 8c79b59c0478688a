//! CPU time as the kernel counts it: /proc's stat files in clock ticks, a child's rusage in
//! timevals; the measurements report milliseconds.

/// Milliseconds of `ticks` clock ticks (`_SC_CLK_TCK`, the unit of /proc's CPU times).
pub fn ticks_ms(ticks: f64) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1e3 / hz
}

/// The (user, system) clock ticks of a `/proc/PID[/task/TID]/stat` file (its utime and stime);
/// None when it cannot be read or lacks them.
pub fn stat_ticks(stat_path: &str) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    // The command name may hold spaces and parentheses: the numbered fields follow its last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    (f.len() == 2).then(|| (f[0], f[1]))
}

/// User + system CPU milliseconds of a rusage (a reaped child's, or the children's).
pub fn rusage_ms(ru: &libc::rusage) -> f64 {
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}
