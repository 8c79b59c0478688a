//! Shared by the host tests: where the built programs are, and running them.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Once;

/// target/<profile>/, found from this test executable (target/<profile>/deps/NAME-HASH).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf()
}

/// Builds the launcher, the shim and the test programs once per test binary, in the profile the
/// tests run in, so the tests never run stale binaries.
pub fn ensure_built() {
    static BUILD: Once = Once::new();
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "-q",
            "-p",
            "smcrun",
            "-p",
            "smcrun-shim",
            "-p",
            "smcrun-testprogs",
        ]);
        if target_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "cargo build failed");
    });
}

/// Path of a built binary.
pub fn bin(name: &str) -> PathBuf {
    ensure_built();
    target_dir().join(name)
}

/// `smcrun ARGS...` as a Command, with the test environment cleaned of smcrun's variables.
pub fn smcrun() -> Command {
    let mut c = Command::new(bin("smcrun"));
    for s in smcrun_settings::SHIM_SETTINGS {
        for v in s.names() {
            c.env_remove(v);
        }
    }
    for v in ["LD_PRELOAD", "SMCRUN_SHIM"] {
        c.env_remove(v);
    }
    // Reports of the programs the tests run go to a directory of this test binary's own, not to
    // the machine's run directory.
    let run = std::env::temp_dir().join(format!("smcrun-tests-{}", std::process::id()));
    std::fs::create_dir_all(&run).expect("test run directory");
    c.env("XDG_RUNTIME_DIR", run);
    c
}

/// Runs and returns (stdout, stderr, output).
pub fn run(mut c: Command) -> (String, String, Output) {
    let out = c.output().expect("spawn");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out,
    )
}

/// The value of `key=` in sockcheck's output.
pub fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in output:\n{out}"))
}

/// Whether this kernel makes AF_SMC sockets (raw system call: the truth the tests compare to).
pub fn kernel_has_af_smc() -> bool {
    use smcrun_sys::{smc::AF_SMC, sock};
    sock::socket(AF_SMC, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
        .map(|fd| sock::close(fd).is_ok())
        .unwrap_or(false)
}

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `c` to the end with its output captured, killing it (and failing the test with what it
/// printed so far) if it takes longer than `within`: no test waits forever on a hung program.
pub fn run_within(mut c: Command, within: std::time::Duration) -> (String, String, Output) {
    use std::io::Read;
    let what = format!("{c:?}");
    let mut child = c
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (stdout, stderr) = (to.join().unwrap(), te.join().unwrap());
    let (o, e) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    let Some(status) = status else {
        panic!("{what} did not finish within {within:?} (killed)\nstdout: {o}\nstderr: {e}");
    };
    (
        o,
        e,
        Output {
            status,
            stdout,
            stderr,
        },
    )
}

/// An empty folder `smcrun-TAG-PID` in the temporary directory: this test binary's own, with
/// nothing left from an earlier run.
pub fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A private run directory (XDG_RUNTIME_DIR) for one test.
pub fn private_xdg(name: &str) -> PathBuf {
    fresh_dir(&format!("xdg-{name}"))
}

/// `c` with the run directory (XDG_RUNTIME_DIR) `dir`.
pub fn in_xdg(mut c: Command, dir: &std::path::Path) -> Command {
    c.env("XDG_RUNTIME_DIR", dir);
    c
}

/// Polls `smcrun ps --json` of `xdg` until `pred` holds for the list, and returns that list; the
/// test fails after 15 s (a runtime writes its report about once a second), naming `what` and
/// showing the last list.
pub fn ps_until(
    xdg: &std::path::Path,
    what: &str,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let start = std::time::Instant::now();
    loop {
        let list = ps_json(xdg);
        if pred(&list) {
            return list;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(15),
            "{what}: never seen; last ps: {}",
            serde_json::to_string_pretty(&list).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `smcrun ps --json` of the run directory `xdg`.
pub fn ps_json(xdg: &std::path::Path) -> Vec<serde_json::Value> {
    let mut c = smcrun();
    c.env("XDG_RUNTIME_DIR", xdg).args(["ps", "--json"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "smcrun ps: {err}");
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The `smcrun: pid N PROGRAM: ...` exit summaries in a program's stderr.
pub fn summaries(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("smcrun: pid "))
        .collect()
}

/// The report a process left behind (it exited, so `smcrun ps` shows it once).
pub fn final_report(xdg: &std::path::Path, pid: u32) -> serde_json::Value {
    let list = ps_json(xdg);
    let e = list
        .into_iter()
        .find(|e| e["pid"] == pid)
        .unwrap_or_else(|| panic!("no report for {pid}"));
    assert_eq!(e["state"], "exited", "{e}");
    e["report"].clone()
}

/// Path of a built binary in a copy that any user can run: the tests that run programs as another
/// user (`setpriv`) use these, since the target directory may sit under a folder only its owner can
/// enter. smcrun and the shim are copied side by side, so smcrun finds its shim. (One folder for
/// every run, each file replaced by a rename, so that nothing piles up in /tmp.)
pub fn bin_for_anyone(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static COPY: Once = Once::new();
    let dir = std::env::temp_dir().join("smcrun-test-bins");
    COPY.call_once(|| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for b in ["smcrun", "libsmcrun_shim.so", "sockcheck", "shapes"] {
            let tmp = dir.join(format!(".{b}.{}", std::process::id()));
            std::fs::copy(bin(b), &tmp).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, dir.join(b)).unwrap();
        }
    });
    dir.join(name)
}

/// A child process that is killed and reaped when dropped, so that a test failing half-way
/// leaves no server running behind it.
pub struct Reaped(Option<std::process::Child>);

/// Wraps `child` (see [`Reaped`]).
pub fn reaped(child: std::process::Child) -> Reaped {
    Reaped(Some(child))
}

impl Reaped {
    /// Waits for the child's end and its output, as `Child::wait_with_output`.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        self.0.take().expect("a child").wait_with_output()
    }
}

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        self.0.as_ref().expect("a child")
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("a child")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Fails the test at once, naming the Debian package to install, when `program` (a command on
/// PATH, or an absolute path) is not on this machine: a missing program is a missing install step
/// (tests/packages is the one list, and tests/deps installs it), never a "command not found" from
/// deep inside a test.
pub fn need(program: &str) {
    let found = if program.starts_with('/') {
        std::path::Path::new(program).exists()
    } else {
        std::env::var_os("PATH").is_some_and(|p| {
            std::env::split_paths(&p).any(|d| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(d.join(program))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
        })
    };
    if found {
        return;
    }
    let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| {
        panic!(
            "{program} is missing, and {} cannot be read: {e}",
            list.display()
        )
    });
    match package_of(&text, program) {
        Some(pkg) => panic!(
            "{program} is missing: install the Debian package {pkg} (apt-get install -y {pkg}; \
             `bash tests/deps` installs everything the tests need)"
        ),
        None => panic!(
            "{program} is missing, and tests/packages does not list it: add its Debian package \
             there (the one list of what the tests need)"
        ),
    }
}

/// `name` (a program on PATH) as a Command, once [`need`] has made sure it is installed.
pub fn tool(name: &str) -> Command {
    need(name);
    Command::new(name)
}

/// Runs `c` to the end and fails the test, with all it printed, unless it succeeds: for the
/// outside tools (openssl, promtool, systemd-analyze) a test relies on. Its output.
pub fn ok(mut c: Command) -> Output {
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The package of tests/packages' `text` whose checks name `program`.
pub fn package_of<'a>(text: &'a str, program: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let mut words = l.split('#').next().unwrap_or("").split_whitespace();
        let pkg = words.next()?;
        words.any(|w| w == program).then_some(pkg)
    })
}

/// The next line of a child's piped stdout (without its newline), read one byte at a time so that
/// nothing after the line is swallowed by a buffer.
pub fn read_line(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    let out = child.stdout.as_mut().unwrap();
    let mut byte = [0u8; 1];
    while std::io::Read::read(out, &mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    line
}

/// Starts `c` (sockcheck's `conns N wait`, under smcrun) with its stdout piped and waits for its
/// `ready pid=PID` line, so its connections are made: the child (killed when dropped) and its pid.
pub fn start_ready(mut c: Command) -> (Reaped, u32) {
    let mut child = reaped(c.stdout(std::process::Stdio::piped()).spawn().unwrap());
    let pid = child.id();
    assert_eq!(read_line(&mut child), format!("ready pid={pid}"));
    (child, pid)
}

/// redis-benchmark's arguments for the short load the tests put on a redis-server at
/// 127.0.0.1:`port` (SET and GET, 2,000 requests from 10 clients, one line a test).
pub fn redis_benchmark_args(port: &str) -> [&str; 11] {
    [
        "-h",
        "127.0.0.1",
        "-p",
        port,
        "-t",
        "set,get",
        "-n",
        "2000",
        "-c",
        "10",
        "-q",
    ]
}
