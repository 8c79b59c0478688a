//! Per-process truth for real server shapes on this machine: pre-fork workers, a daemonizing
//! nginx whose workers drop root, memcached -u nobody, exact counts under 20,000 short
//! connections, failed connects, `-dd` summaries per process, the report line after the
//! program's own output; and the runtime's safety: short accept buffers before a guard page,
//! the first socket made in a signal handler, a run directory swapped under a process.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private run directory (XDG_RUNTIME_DIR) per test.
fn xdg(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-pp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    d
}

fn total(e: &Value) -> u64 {
    e["report"]["connections"]["total"].as_u64().unwrap_or(0)
}

/// The summary line of `pid` among the `smcrun: pid ...` lines.
fn summary_of<'a>(err: &'a str, pid: &str) -> &'a str {
    err.lines()
        .find(|l| l.starts_with(&format!("smcrun: pid {pid} ")))
        .unwrap_or_else(|| panic!("no summary line for pid {pid}:\n{err}"))
}

/// Reads a child's stdout until a line with `key=`, returning (value, all lines so far).
/// One byte at a time, so that nothing after the line is swallowed by a buffer.
fn wait_for(child: &mut Child, key: &str) -> (String, Vec<String>) {
    use std::io::Read;
    let out = child.stdout.as_mut().unwrap();
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        assert!(!line.is_empty(), "no {key}= before EOF: {lines:?}");
        let line = String::from_utf8_lossy(&line).into_owned();
        lines.push(line.clone());
        if let Some(v) = line.strip_prefix(&format!("{key}=")) {
            return (v.to_string(), lines);
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The connections a client outside smcrun makes: `shapes hammer` without the shim.
fn hammer(addr: &str, n: u32, threads: u32) {
    let (out, err, o) = run({
        let mut c = Command::new(bin("shapes"));
        c.args(["hammer", addr, &n.to_string(), &threads.to_string()]);
        c
    });
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), format!("made={n} failed=0"));
}

#[test]
fn pre_fork_workers_report_the_connections_they_accepted_with_their_listeners_story() {
    let dir = xdg("prefork");
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .env("SMCRUN_REPORT", "1")
            .arg(bin("shapes"))
            .args(["prefork", "0", "4", "5"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (addr, _) = wait_for(&mut server, "listening");
    let (_, lines) = wait_for(&mut server, "ready");
    let children: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("child=").map(str::to_string))
        .collect();
    assert_eq!(children.len(), 4);
    hammer(&addr, 20, 4);
    let out = server.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let mut sum = 0;
    for pid in &children {
        let line = summary_of(&err, pid);
        let n: u64 = line
            .split(": ")
            .nth(2)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        sum += n;
        assert!(n > 0, "a worker that served nothing? {line}");
        if !kernel_has_af_smc() {
            // The listener's story, inherited from the parent that made it.
            assert!(
                line.contains("TCP (EAFNOSUPPORT the kernel has no AF_SMC"),
                "{line}"
            );
            assert!(!line.contains("not created under smcrun"), "{line}");
        }
    }
    assert_eq!(
        sum, 20,
        "the workers' reports must add up to every connection:\n{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_server_that_drops_root_stays_in_roots_list_with_its_own_numbers() {
    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let dir = xdg("dropuid");
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .arg(bin("shapes"))
            .args(["drop-root", "0", "65534", "3"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = server.id();
    let (setuid, _) = wait_for(&mut server, "setuid");
    assert_eq!(setuid, "0 uid=65534");
    let (addr, _) = wait_for(&mut server, "listening");
    hammer(&addr, 3, 1);
    let list = ps_until(&dir, "the nobody server with 3 connections", |l| {
        l.iter().any(|e| e["pid"] == pid && total(e) == 3)
    });
    let e = list.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(e["uid"], 65534);
    assert_eq!(e["user"], "nobody");
    assert_eq!(e["program"], "shapes");
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["why", &pid.to_string()]);
    let (out, err, o) = run(c);
    assert!(
        o.status.success(),
        "why failed for the uid-switched server: {err}"
    );
    assert!(out.contains("user nobody"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("server ")).count(),
        3,
        "{out}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// Debian's nginx, as root, with 2 workers that run as nobody and `daemon on` (fork, setsid,
/// fork): every process is in root's `smcrun ps`, and the workers' connections add up.
#[test]
fn nginx_with_workers_and_daemon_on_is_listed_whole() {
    need("nginx");
    need("curl");

    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let dir = xdg("nginx");
    let prefix = dir.join("nginx");
    std::fs::create_dir_all(prefix.join("logs")).unwrap();
    std::fs::create_dir_all(prefix.join("html")).unwrap();
    std::fs::write(prefix.join("html/index.html"), "hello from nginx\n").unwrap();
    let port = free_port();
    let conf = prefix.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "user nobody nogroup;\nworker_processes 2;\ndaemon on;\npid {p}/nginx.pid;\n\
             error_log {p}/logs/error.log;\nevents {{ worker_connections 128; }}\n\
             http {{ access_log off; server {{ listen 127.0.0.1:{port}; root {p}/html; }} }}\n",
            p = prefix.display()
        ),
    )
    .unwrap();
    for d in [&dir, &prefix, &prefix.join("html")] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let mut c = in_xdg(smcrun(), &dir);
    c.arg("nginx").arg("-c").arg(&conf).arg("-p").arg(&prefix);
    let (_, err, o) = run(c);
    assert!(
        o.status.success(),
        "nginx (Debian's nginx-light, installed by tests/deps): {err}"
    );
    let pidfile = prefix.join("nginx.pid");
    let stop = || {
        if let Ok(p) = std::fs::read_to_string(&pidfile) {
            let _ = Command::new("kill").arg(p.trim()).status();
        }
    };
    let url = format!("http://127.0.0.1:{port}/");
    let start = Instant::now();
    let mut served: u64 = 0;
    while served < 200 && start.elapsed() < Duration::from_secs(30) {
        let o = Command::new("curl")
            .args(["-s", "-f", &url])
            .output()
            .unwrap();
        if o.status.success() {
            assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from nginx\n");
            served += 1;
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let master: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let list = ps_until(&dir, "nginx's workers with every connection", |l| {
        let workers: Vec<&Value> = l.iter().filter(|e| e["uid"] == 65534).collect();
        workers.len() == 2 && workers.iter().map(|e| total(e)).sum::<u64>() == served
    });
    stop();
    assert_eq!(served, 200, "curl could not fetch from nginx under smcrun");
    assert!(
        list.iter().any(|e| e["pid"] == master && e["uid"] == 0),
        "the daemon master must be listed: {list:?}"
    );
    for w in list.iter().filter(|e| e["uid"] == 65534) {
        assert_eq!(w["program"], "nginx", "the name the operator started: {w}");
        assert_eq!(w["user"], "nobody");
        if !kernel_has_af_smc() {
            assert_eq!(
                w["report"]["connections"]["tcp"],
                w["report"]["connections"]["total"]
            );
            assert_eq!(w["report"]["reasons"][0]["errno"], "EAFNOSUPPORT");
        }
        let mut c = in_xdg(smcrun(), &dir);
        c.args(["why", &w["pid"].to_string()]);
        let (out, err, o) = run(c);
        assert!(o.status.success(), "why of a worker: {err}");
        assert!(out.contains("user nobody"), "{out}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn memcached_dropping_to_nobody_is_in_roots_list() {
    need("memcached");

    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let dir = xdg("memcached");
    let port = free_port();
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .args([
                "memcached",
                "-u",
                "nobody",
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .spawn()
            .expect("memcached (installed by tests/deps)"),
    );
    let pid = server.id();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "memcached did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The probe above was one connection; two more that speak memcached's protocol.
    for _ in 0..2 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"version\r\n").unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"VERSION "));
    }
    let list = ps_until(&dir, "memcached with its 3 connections", |l| {
        l.iter().any(|e| e["pid"] == server.id() && total(e) == 3)
    });
    let e = list.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(e["user"], "nobody");
    assert_eq!(e["program"], "memcached");
    server.kill().unwrap();
    server.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn twenty_thousand_short_connections_are_counted_exactly_on_both_sides() {
    const N: u32 = 20_000;
    let dir = xdg("count");
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .env("SMCRUN_REPORT", "1")
            .arg(bin("shapes"))
            .args(["serve-n", "0", &N.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (addr, _) = wait_for(&mut server, "listening");
    let mut c = in_xdg(smcrun(), &dir);
    c.env("SMCRUN_REPORT", "1")
        .arg(bin("shapes"))
        .args(["hammer", &addr, &N.to_string(), "8"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), format!("made={N} failed=0"));
    let s = server.wait_with_output().unwrap();
    let server_err = String::from_utf8_lossy(&s.stderr);
    for (side, text) in [("client", err.as_str()), ("server", server_err.as_ref())] {
        let line = text
            .lines()
            .find(|l| l.starts_with("smcrun: pid "))
            .unwrap_or_else(|| panic!("{side}: no summary line:\n{text}"));
        assert!(
            line.contains(&format!(": {N} connections, ")),
            "{side} must count every connection: {line}"
        );
        if !kernel_has_af_smc() {
            assert!(
                line.contains(&format!("0 SMC-R, {N} TCP")),
                "{side}: {line}"
            );
            assert!(!line.contains("not classified"), "{side}: {line}");
        }
        assert!(!line.contains("failed connect"), "{side}: {line}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_refused_nonblocking_connect_is_not_a_connection() {
    need("curl");

    let dir = xdg("refused");
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["--report", "curl", "-s", "http://127.0.0.1:1/"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(7), "curl: connection refused: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("smcrun: pid "))
        .expect(&err);
    assert!(
        line.ends_with(": 0 connections, 0 SMC-R, 0 TCP, 1 failed connect"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn dd_prints_one_summary_per_process_that_touched_tcp_with_its_own_numbers() {
    need("curl");
    need("python3");

    let dir = xdg("dd");
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["-dd", "bash", "-c", "(true); echo $(echo hi)"]);
    let (out, err, o) = run(c);
    assert!(o.status.success());
    assert_eq!(out, "hi\n");
    assert!(
        !err.contains("summary:"),
        "no TCP socket, no summary: {err}"
    );
    let mut c = in_xdg(smcrun(), &dir);
    c.arg("-dd")
        .arg(bin("sockcheck"))
        .args(["conns", "3", "fork"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let summaries: Vec<&str> = err.lines().filter(|l| l.contains("]: summary: ")).collect();
    assert_eq!(summaries.len(), 2, "parent and child: {err}");
    for pid in [value(&out, "child pid"), value(&out, "parent pid")] {
        let pid = pid.split(' ').next().unwrap();
        let s = summaries
            .iter()
            .find(|l| l.starts_with(&format!("smcrun[{pid}]: ")))
            .unwrap_or_else(|| panic!("no summary for {pid}: {err}"));
        // Each made 3 client connections and accepted 3: its own numbers, not its parent's.
        assert!(
            s.contains(
                "3 connects (0 failed), 3 accepts; 6 connections; the sidecar's descriptors: "
            ),
            "{s}"
        );
    }
    // A nonblocking connect's EINPROGRESS (and every other errno) has a name.
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["-dd", "curl", "-s", "http://127.0.0.1:1/"]);
    let (_, err, _) = run(c);
    assert!(err.contains(": EINPROGRESS"), "{err}");
    assert!(
        !err.contains(": errno\n") && !err.ends_with(": errno"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_report_line_comes_after_the_programs_own_output() {
    need("ab");
    need("python3");

    let dir = xdg("order");
    let port = free_port();
    let mut server = reaped(
        Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "http.server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr = format!("127.0.0.1:{port}");
    let out = dir.join("ab.out");
    let f = std::fs::File::create(&out).unwrap();
    let mut c = in_xdg(smcrun(), &dir);
    // ab writes "Benchmarking ... (be patient)..." to a fully buffered stdout.
    c.args(["--report", "ab", "-q", "-n", "5"])
        .arg(format!("http://{addr}/"))
        .stdout(f.try_clone().unwrap())
        .stderr(f);
    let (_, _, o) = run(c);
    let _ = server.kill();
    let _ = server.wait();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(o.status.success(), "ab (apache2-utils): {text}");
    let at = text
        .find("smcrun: pid ")
        .unwrap_or_else(|| panic!("no report line: {text}"));
    assert!(
        text[..at].contains("Benchmarking 127.0.0.1 (be patient).....done")
            && text[..at].contains("Requests per second:")
            && text[..at].ends_with('\n'),
        "the report line must come after all of ab's output, on a line of its own:\n{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn accept_with_short_address_buffers_before_a_guard_page_never_reads_past_them() {
    let dir = xdg("short");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg(bin("shapes")).arg("accept-short");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "killed by {:?}: {err}", o.status);
    let cases: Vec<&str> = out.lines().filter(|l| l.ends_with(" ok=1")).collect();
    assert_eq!(cases.len(), 6, "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_first_tcp_socket_made_in_a_signal_handler_never_corrupts_the_heap() {
    let dir = xdg("signal");
    for run_no in 0..100 {
        let mut c = in_xdg(smcrun(), &dir);
        c.arg(bin("shapes")).args(["signal-storm", "60"]);
        let (out, err, o) = run(c);
        assert!(o.status.success(), "run {run_no}: {:?}\n{err}", o.status);
        assert!(out.starts_with("handler_sockets="), "{out}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Root with XDG_RUNTIME_DIR in a directory another user owns (as after `su` without `-`), while
/// that user keeps swapping `$XDG/smcrun` for a symlink to a directory of root's: nothing is
/// ever written anywhere but in root's own run directory.
#[test]
fn a_run_directory_swapped_for_a_symlink_never_redirects_a_report() {
    need("setpriv");

    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let base = xdg("swap");
    let theirs = base.join("theirs");
    let victim = base.join("victim");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::set_permissions(&victim, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let chown = Command::new("chown")
        .args(["nobody", theirs.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(chown.success());
    // The other user's loop: move the real directory away and put a symlink in its place.
    let script = format!(
        "cd {t}; end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do \
         mv smcrun away 2>/dev/null; ln -s {v} smcrun 2>/dev/null; rm -f smcrun; \
         mv away smcrun 2>/dev/null; done",
        t = theirs.display(),
        v = victim.display()
    );
    let mut attacker = reaped(
        Command::new("setpriv")
            .args([
                "--reuid",
                "nobody",
                "--regid",
                "nogroup",
                "--clear-groups",
                "sh",
                "-c",
                &script,
            ])
            .spawn()
            .unwrap(),
    );
    for _ in 0..20 {
        let mut c = smcrun();
        c.env("XDG_RUNTIME_DIR", &theirs)
            .arg(bin("sockcheck"))
            .args(["conns", "1"]);
        let (_, err, o) = run(c);
        assert!(
            o.status.success(),
            "the program must run whatever happens: {err}"
        );
    }
    let _ = attacker.kill();
    let _ = attacker.wait();
    let planted: Vec<_> = std::fs::read_dir(&victim).unwrap().collect();
    assert!(
        planted.is_empty(),
        "a report was written through the symlink: {planted:?}"
    );
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn a_daemon_whose_threads_block_signals_is_counted_while_it_runs() {
    // MariaDB's shape: the main thread blocks SIGHUP, SIGTERM and SIGALRM before anything else and
    // a signal thread waits for them, so no thread ever has the start-up mask. Seen with mariadbd
    // under smcrun: `smcrun ps` said 0 connections while it served (the sidecar never started).
    let dir = xdg("sigthread");
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .arg(bin("shapes"))
            .arg("signal-thread")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = server.id();
    let (addr, _) = wait_for(&mut server, "listening");
    hammer(&addr, 6, 2);
    let list = ps_until(&dir, "the running daemon with its 6 connections", |l| {
        l.iter()
            .any(|e| e["pid"] == pid && e["state"] == "running" && total(e) == 6)
    });
    let e = list.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(e["report"]["connections"]["pending"], 0, "{e}");
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let out = server.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("terminated"));
    let _ = std::fs::remove_dir_all(dir);
}

/// A Java server (HotSpot blocks SIGQUIT in every Java thread with pthread_sigmask, so no thread
/// of the JVM ever has the start-up signal mask): its runtime still starts and `ps` shows its
/// connections while it runs, not only after it exits.
#[test]
fn a_java_server_is_counted_while_it_runs() {
    need("java");

    let dir = xdg("java");
    let port = free_port();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/Echo.java");
    let mut server = reaped(
        in_xdg(smcrun(), &dir)
            .arg("java")
            .arg(&src)
            .args(["server", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("java (installed by tests/deps)"),
    );
    let pid = server.id();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the Java server did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The probe above was one connection; two more with an echo.
    for _ in 0..2 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"ping").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"ping");
    }
    let list = ps_until(
        &dir,
        "the running Java server with its 3 connections",
        |l| {
            l.iter()
                .any(|e| e["pid"] == pid && e["state"] == "running" && total(e) == 3)
        },
    );
    let e = list.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(e["program"], "java");
    server.kill().unwrap();
    server.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
