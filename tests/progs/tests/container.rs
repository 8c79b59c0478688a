//! smcrun as a container's entrypoint (`ENTRYPOINT ["smcrun", "--"]`), without a container engine:
//! fresh PID, network and mount namespaces (`unshare --pid --net --mount --fork --mount-proc`), in
//! which smcrun is PID 1 and execs the program in place, SIGTERM to PID 1 reaches the program, the
//! program's exit status is the "container's", and a read-only /proc/sys (as in an unprivileged
//! container) refuses `--sysctl` clearly unless `--sysctl-best-effort`.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// `unshare` into fresh namespaces running `script` (sh), with lo up first, as containers have.
fn container(script: &str) -> Command {
    need("unshare");
    let mut c = Command::new("unshare");
    c.args([
        "--pid",
        "--net",
        "--mount",
        "--fork",
        "--mount-proc",
        "sh",
        "-c",
        &format!("ip link set lo up && {script}"),
    ])
    .env_remove("LD_PRELOAD")
    .env("SMCRUN", bin("smcrun"))
    .env("SOCKCHECK", bin("sockcheck"));
    c
}

/// The host pid of the namespace's PID 1: unshare's only child.
fn init_of(unshare_pid: u32) -> i32 {
    let start = Instant::now();
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))
                .unwrap_or_default();
        if let Some(p) = children.split_whitespace().next() {
            return p.parse().unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "unshare started no child"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running container: killed (its PID 1 first) when the test ends, also when it fails, and
/// after two minutes by a watchdog, so a test that waits for a line that never comes fails (its
/// read sees end of file) instead of hanging the suite.
struct Ns {
    child: std::process::Child,
    /// Dropping it tells the watchdog the test is over (before the pids can be reused).
    _done: std::sync::mpsc::Sender<()>,
}

impl Ns {
    fn spawn(mut c: Command) -> Ns {
        let child = c.spawn().unwrap();
        let pid = child.id();
        let (done, over) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if over.recv_timeout(Duration::from_secs(120))
                == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            {
                eprintln!("container (unshare pid {pid}) still running after 120 s: killed");
                dump_tasks(pid, 0);
                kill_tree(pid);
            }
        });
        Ns { child, _done: done }
    }
}

/// Prints what each task under `pid` is doing (state, kernel wait channel and stack, signal masks),
/// so that a hang says where it hung.
fn dump_tasks(pid: u32, depth: usize) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let status = read("status");
        let pick = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .unwrap_or("")
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        eprintln!(
            "{:depth$}pid {pid} task {}: {} state {} wchan {} SigPnd {} ShdPnd {} SigBlk {} SigCgt {}\n{}",
            "",
            t.file_name().to_string_lossy(),
            read("comm").trim(),
            pick("State:"),
            read("wchan"),
            pick("SigPnd:"),
            pick("ShdPnd:"),
            pick("SigBlk:"),
            pick("SigCgt:"),
            read("stack"),
        );
        for c in read("children")
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
        {
            dump_tasks(c, depth + 2);
        }
    }
}

/// Kills unshare's children (the namespace's init), then unshare.
fn kill_tree(unshare_pid: u32) {
    if let Ok(children) =
        std::fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))
    {
        for p in children.split_whitespace().filter_map(|p| p.parse().ok()) {
            // SAFETY: killing the namespace's init this test started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    // SAFETY: as above, unshare itself (still our unreaped child: the pid is not reused).
    unsafe { libc::kill(unshare_pid as i32, libc::SIGKILL) };
}

impl Drop for Ns {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            kill_tree(self.child.id());
        }
        let _ = self.child.wait();
    }
}

/// Starts the container `c` with its stdout piped and reads the program's first line, which must
/// be `ready` (it is up, and says its pid): the container, the rest of its stdout, and the host pid
/// of its PID 1 (the one to signal).
fn started(mut c: Command, ready: &str) -> (Ns, BufReader<ChildStdout>, i32) {
    c.stdout(Stdio::piped());
    let mut child = Ns::spawn(c);
    let mut out = BufReader::new(child.child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), ready);
    let init = init_of(child.child.id());
    (child, out, init)
}

/// A server that handles SIGTERM (as redis-server and nginx do): prints its pid and whether the
/// shim is in it, listens, and on SIGTERM says so and exits 3.
///
/// The handler writes with `os.write` and leaves with `os._exit`, not `print` and `sys.exit`: the
/// test reads the ready line as soon as it is in the pipe and signals at once, so the handler can
/// run while the ready line's `print(..., flush=True)` is still inside stdout's BufferedWriter
/// (CPython runs pending handlers after each raw write, with the writer's lock held), where a
/// `print` raises "RuntimeError: reentrant call inside <_io.BufferedWriter name='<stdout>'>" and
/// python exits 1 without the line (seen in about 4 runs of 10 in tests/fresh's podman container).
///
/// It waits in `time.sleep`, not `signal.pause()`: CPython runs a Python handler only between
/// bytecodes, so a SIGTERM that lands after the last check and before `pause()` is taken by the C
/// handler and pause() then waits for a second signal that never comes. A sleep ends, and the
/// loop's next turn runs the handler. (CI hung in this test on 3046d3a for the rest of its 90
/// minutes; that race is the one cause found in reading, but 3,600 tries here with pause() did not
/// hang, so it is not proven: if it hangs again, the watchdog prints what every task was doing.)
const SERVER: &str = r#"
import os, signal, socket, time
def term(*_):
    os.write(1, b"got SIGTERM\n")
    os._exit(3)
signal.signal(signal.SIGTERM, term)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
shim = "libsmcrun_shim.so" in open("/proc/self/maps").read()
print(f"pid={os.getpid()} shim={shim} family={s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)}", flush=True)
while True:
    time.sleep(0.2)
"#;

#[test]
fn smcrun_is_pid_1_execs_the_program_and_sigterm_reaches_it() {
    let mut c = container("exec \"$SMCRUN\" -- python3 -c \"$SERVER\"");
    c.env("SERVER", SERVER);
    // The program itself is PID 1 (smcrun exec'd it, and nothing sits in between), preloaded.
    let (mut child, mut out, init) = started(c, "pid=1 shim=True family=2");
    // SAFETY: signalling the namespace's init, which this test started.
    unsafe { libc::kill(init, libc::SIGTERM) };
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "got SIGTERM");
    let status = child.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "the program's exit status is the container's"
    );
}

#[test]
fn the_programs_exit_status_is_the_containers() {
    for code in [0, 1, 42, 255] {
        let c = container(&format!("exec \"$SMCRUN\" -- \"$SOCKCHECK\" exit {code}"));
        let (_, err, o) = run_within(c, Duration::from_secs(60));
        assert_eq!(o.status.code(), Some(code), "{err}");
    }
}

#[test]
fn a_program_without_a_sigterm_handler_needs_tini_in_front() {
    // As PID 1 the kernel drops signals the program has no handler for: SIGTERM is ignored.
    let c = container("exec \"$SMCRUN\" -- \"$SOCKCHECK\" wait");
    let (mut child, _, init) = started(c, "pid=1");
    // SAFETY: signalling the namespace's init, which this test started.
    unsafe { libc::kill(init, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.child.try_wait().unwrap().is_none(),
        "PID 1 without a handler ignores SIGTERM"
    );
    // SAFETY: as above; SIGKILL always reaches it. (util-linux 2.38's unshare then says
    // "sigprocmask unblock failed: Invalid argument" and exits 1: it tries signal(SIGKILL, SIG_DFL)
    // to die of its child's signal, which the kernel refuses. Expected, not a fault.)
    unsafe { libc::kill(init, libc::SIGKILL) };
    child.child.wait().unwrap();
    drop(child);

    // With tini as PID 1 (ENTRYPOINT ["tini", "--", "smcrun", "--"]) the program is PID 2 and
    // dies of the SIGTERM tini passes on; tini exits 128 + 15.
    let tini = ["/usr/bin/tini", "/sbin/tini", "/usr/local/bin/tini"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or_else(|| {
            need("tini");
            "tini"
        });
    let c = container(&format!(
        "exec {tini} -- \"$SMCRUN\" -- \"$SOCKCHECK\" wait"
    ));
    // tini is PID 1 (the `ip` before it was 2), the program its child.
    let (mut child, _, init) = started(c, "pid=3");
    // SAFETY: signalling the namespace's init (tini), which this test started.
    unsafe { libc::kill(init, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "tini did not pass SIGTERM on"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
}

#[test]
fn a_read_only_proc_sys_refuses_sysctl_clearly_and_best_effort_starts_the_program() {
    let ro = "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec \"$SMCRUN\"";
    let c = container(&format!(
        "{ro} --sysctl net.core.somaxconn=1024 -- \"$SOCKCHECK\" exit 7"
    ));
    let (_, err, o) = run_within(c, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "smcrun: cannot set net.core.somaxconn: /proc/sys is read-only here (a container without \
         the privilege to change it?); nothing was started (use --sysctl-best-effort to go on)"
    );
    let c = container(&format!(
        "{ro} --sysctl net.core.somaxconn=1024 --sysctl-best-effort -- \"$SOCKCHECK\" exit 7"
    ));
    let (_, err, o) = run_within(c, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(7), "the program started: {err}");
    assert!(
        err.starts_with("smcrun: warning: cannot set net.core.somaxconn: /proc/sys is read-only"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A writable /proc/sys in the container's own network namespace: the value is set there, for
    // the program, and the host's stays as it was.
    let host = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap();
    let c = container(
        "exec \"$SMCRUN\" --sysctl net.core.somaxconn=1031 -- cat /proc/sys/net/core/somaxconn",
    );
    let (out, err, o) = run_within(c, Duration::from_secs(60));
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), "1031");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap(),
        host
    );
}
