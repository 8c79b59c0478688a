//! Running the programs measured: a child's wall time, CPU time and page faults (from wait4), a
//! thread's CPU time, a free port.

use smcrun_bench::cpu::{rusage_ms, stat_ticks, ticks_ms};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// What one finished child cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    /// Wall milliseconds from spawn to reaped.
    pub wall_ms: f64,
    /// User + system CPU milliseconds.
    pub cpu_ms: f64,
    /// Minor page faults.
    pub minflt: f64,
}

/// Reaps `child` with wait4, which also gives its resource usage (std's wait would not).
pub fn reap(child: Child, t0: Instant) -> Result<(Cost, i32), String> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain integers: all zero bytes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only `status` and `ru`, ours and alive for the call.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    // The child is reaped: std must not wait for it again.
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((
        Cost {
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            cpu_ms: rusage_ms(&ru),
            minflt: ru.ru_minflt as f64,
        },
        code,
    ))
}

/// Runs `cmd` to the end and returns its stdout; an exit status other than 0 is an error that
/// quotes the end of its stderr.
pub fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// CPU milliseconds (user + system) of `/proc/PID[/task/TID]/stat`.
pub fn cpu_of(stat_path: &str) -> Option<f64> {
    stat_ticks(stat_path).map(|(user, system)| ticks_ms(user + system))
}

/// CPU milliseconds a thread (`/proc/PID/task/TID`) has run: its schedstat (nanoseconds), else
/// its stat (clock ticks, 10 ms steps).
pub fn thread_cpu(task: &str) -> Option<f64> {
    std::fs::read_to_string(format!("{task}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e6)
        .or_else(|| cpu_of(&format!("{task}/stat")))
}

/// The thread of process `pid` named `name`, as `/proc/PID/task/TID`.
pub fn thread_named(pid: u32, name: &str) -> Option<String> {
    let dir = format!("/proc/{pid}/task");
    std::fs::read_dir(&dir).ok()?.flatten().find_map(|t| {
        let p = t.path();
        let comm = std::fs::read_to_string(p.join("comm")).ok()?;
        (comm.trim_end() == name).then(|| p.display().to_string())
    })
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(17001)
}

/// Waits until something accepts connections on 127.0.0.1:`port` (at most `secs` seconds).
pub fn wait_listening(port: u16, secs: u64) -> Result<(), String> {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t.elapsed().as_secs() >= secs {
            return Err(format!(
                "nothing listened on 127.0.0.1:{port} within {secs} s"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// Stops a server child: SIGTERM, then reaped.
pub fn stop(mut child: Child) {
    // SAFETY: kill(2) takes integers only; the pid is our child's, not yet reaped, so it names
    // no other process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let _ = child.wait();
}

/// Runs `valgrind --tool=callgrind` (`v` holds the program and its arguments after the tool's
/// options, see [`callgrind_command`]) and returns the instructions it collected; `what` names the
/// measurement in an error.
pub fn callgrind(what: &str, mut v: Command) -> Result<f64, String> {
    let out = v
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| {
            l.split_once("Collected :")
                .and_then(|(_, n)| n.trim().parse().ok())
        })
        .ok_or_else(|| {
            format!(
                "callgrind counted nothing for {what}: {}",
                err.lines().last().unwrap_or("")
            )
        })
}

/// `valgrind --tool=callgrind` collecting inside `collect` only, the program still to add.
pub fn callgrind_command(collect: &str) -> Command {
    let mut v = Command::new("valgrind");
    v.args([
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        &format!("--toggle-collect={collect}"),
    ]);
    v
}
