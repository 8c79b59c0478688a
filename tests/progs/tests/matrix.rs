//! The real-program matrix: each program pair runs once plain and once with smcrun on both ends,
//! and must print the same and exit the same (on this machine's kernel every socket falls back to
//! TCP; the VM's `matrix` check runs the same programs over real SMC-R). Under smcrun the test also
//! checks that the shim really was inside the programs (their maps, their exit summaries) and that
//! the runtime's counts of their connections add up.

mod common;
use common::*;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);

/// A program started in the background, killed when the case ends (also when it fails).
struct Bg(Child);

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One side of a case: the program, plain or under smcrun (with the exit summary on), with its
/// reports in `xdg`.
fn side(under: bool, xdg: &Path, program: &str) -> Command {
    common::need(program);
    let mut c = if under {
        let mut c = smcrun();
        c.env("SMCRUN_REPORT", "1").arg(program);
        c
    } else {
        let mut c = Command::new(program);
        c.env_remove("LD_PRELOAD");
        c
    };
    c.env("XDG_RUNTIME_DIR", xdg);
    c
}

fn start(mut c: Command) -> Bg {
    Bg(c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {c:?}: {e} (tests/deps installs the programs)")))
}

/// Waits until something listens on `addr`: exactly one connection once it does (the reports'
/// counts include it). A refused attempt makes none; the timeout is long so that an attempt is
/// never given up while the kernel completes it (a loaded host once made that two connections).
fn wait_for(addr: SocketAddr) {
    let start = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_secs(10)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn v4(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn v6(port: u16) -> SocketAddr {
    format!("[::1]:{port}").parse().unwrap()
}

/// A port free on both 127.0.0.1 and ::1.
fn free_port_both() -> u16 {
    loop {
        let p = free_port();
        if std::net::TcpListener::bind(v6(p)).is_ok() {
            return p;
        }
    }
}

/// Whether the shim is mapped into process `pid`.
fn preloaded(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|m| m.contains("libsmcrun_shim.so"))
        .unwrap_or(false)
}

/// Runs a client side to its end: what it printed and its exit code; under smcrun, its exit
/// summaries are checked to be there and taken out of stderr.
fn client(under: bool, c: Command) -> (String, Option<i32>, Vec<String>) {
    let (out, err, o) = run_within(c, LIMIT);
    let sums: Vec<String> = summaries(&err).into_iter().map(String::from).collect();
    if under {
        assert!(
            !sums.is_empty(),
            "no exit summary: the shim was not there?\n{err}"
        );
    } else {
        assert!(sums.is_empty(), "{err}");
    }
    (out, o.status.code(), sums)
}

/// The number N of an exit summary's `N connections`.
fn summary_connections(line: &str) -> u64 {
    line.split(": ")
        .nth(2)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

/// The output with `:PORT` for each of the case's ports (each run has ports of its own).
fn without_ports(s: &str, ports: &[u16]) -> String {
    ports
        .iter()
        .fold(s.to_string(), |s, p| s.replace(&format!(":{p}/"), ":PORT/"))
}

/// Both runs of a case printed and exited the same.
fn same(case: &str, plain: &(String, Vec<Option<i32>>), under: &(String, Vec<Option<i32>>)) {
    assert_eq!(
        plain.1, under.1,
        "{case}: exit statuses differ (plain, then under smcrun)"
    );
    assert!(
        plain.1.iter().all(|c| *c == Some(0)),
        "{case}: {:?}\n{}",
        plain.1,
        plain.0
    );
    assert_eq!(
        plain.0, under.0,
        "{case}: output differs (plain, then under smcrun)"
    );
}

/// Files with known contents, for the web servers: a few sizes, random-looking bytes.
fn web_root(name: &str) -> (PathBuf, Vec<(String, Vec<u8>)>) {
    let d = std::env::temp_dir().join(format!("smcrun-matrix-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("www")).unwrap();
    let mut files = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for (i, size) in [0usize, 1, 4096, 100_000, 3 << 20].into_iter().enumerate() {
        let bytes: Vec<u8> = (0..size)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let name = format!("f{i}.bin");
        std::fs::write(d.join("www").join(&name), &bytes).unwrap();
        files.push((name, bytes));
    }
    // Readable by the servers' workers, whoever they run as.
    for p in [d.clone(), d.join("www")] {
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    (d, files)
}

/// Fetches each file with curl (a process per request, as scripts do) from `base`, and says per
/// file whether the bytes are the file's.
fn fetch_all(
    under: bool,
    xdg: &Path,
    base: &str,
    files: &[(String, Vec<u8>)],
    report: &mut Vec<Option<i32>>,
) -> (String, u64) {
    let mut out = String::new();
    let mut connections = 0;
    for (name, bytes) in files {
        let mut c = side(under, xdg, "curl");
        c.args(["-sS", "-g", "--max-time", "60", &format!("{base}/{name}")]);
        let (_, err, o) = run_within(c, LIMIT);
        let sums = summaries(&err);
        if under {
            assert_eq!(sums.len(), 1, "{err}");
            connections += summary_connections(sums[0]);
        }
        out += &format!(
            "{base}/{name} bytes={} intact={}\n",
            o.stdout.len(),
            o.stdout == *bytes
        );
        report.push(o.status.code());
    }
    (out, connections)
}

/// The reports of the running processes of `program` in `xdg` count the `made` connections the
/// clients made and the `probes` of wait_for, once they are written (at most once a second).
fn assert_served(xdg: &Path, program: &str, made: u64, probes: u64) {
    let served = server_connections(xdg, program, made + probes);
    assert_eq!(
        served,
        made + probes,
        "the {program} reports count {served} connections; the clients made {made} (+{probes} probes)"
    );
}

/// The connections counted by the reports of the running processes of `program` in `xdg`,
/// once they reach `want` (or after 10 s).
fn server_connections(xdg: &Path, program: &str, want: u64) -> u64 {
    let start = Instant::now();
    loop {
        let total: u64 = ps_json(xdg)
            .iter()
            .filter(|e| e["program"] == program && e["state"] == "running")
            .map(|e| e["report"]["connections"]["total"].as_u64().unwrap_or(0))
            .sum();
        if total >= want || start.elapsed() > Duration::from_secs(10) {
            return total;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn redis_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("redis-{under}"));
    let port = free_port_both();
    let mut s = side(under, &xdg, "redis-server");
    s.args([
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1 ::1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]);
    let server = start(s);
    wait_for(v4(port));
    wait_for(v6(port));
    if under {
        assert!(preloaded(server.0.id()), "redis-server has no shim");
    }
    let p = port.to_string();
    let mut out = String::new();
    let mut codes = Vec::new();
    let mut made = 0;
    for cmd in [
        vec!["-h", "127.0.0.1", "SET", "greeting", "hello smc"],
        vec!["-h", "::1", "GET", "greeting"],
        vec!["-h", "127.0.0.1", "RPUSH", "list", "a", "b", "c"],
        vec!["-h", "::1", "LRANGE", "list", "0", "-1"],
        vec!["-h", "127.0.0.1", "INCRBY", "n", "41"],
        vec!["-h", "127.0.0.1", "GET", "no-such-key"],
    ] {
        let mut c = side(under, &xdg, "redis-cli");
        c.arg("-p").arg(&p).args(&cmd);
        let (o, code, sums) = client(under, c);
        made += sums.iter().map(|l| summary_connections(l)).sum::<u64>();
        out += &o;
        codes.push(code);
    }
    let mut c = side(under, &xdg, "redis-benchmark");
    c.args(redis_benchmark_args(&p));
    let (o, code, sums) = client(under, c);
    made += sums.iter().map(|l| summary_connections(l)).sum::<u64>();
    codes.push(code);
    // The benchmark's numbers vary; what it ran and that it finished do not.
    for l in o.split(['\r', '\n']) {
        if let Some((test, rest)) = l.split_once(": ") {
            if rest.contains("requests per second") {
                out += &format!("{test}: finished\n");
            }
        }
    }
    let mut c = side(under, &xdg, "redis-cli");
    c.args(["-p", &p, "INFO", "commandstats"]);
    let (o, code, sums) = client(under, c);
    made += sums.iter().map(|l| summary_connections(l)).sum::<u64>();
    codes.push(code);
    // (in the server's own order, which is a hash's)
    let mut stats: Vec<&str> = o
        .lines()
        .filter(|l| l.starts_with("cmdstat_set:") || l.starts_with("cmdstat_get:"))
        .map(|l| l.split(',').next().unwrap())
        .collect();
    stats.sort_unstable();
    for l in stats {
        out += l;
        out.push('\n');
    }
    if under {
        // Every connection the clients made, the server accepted and counted.
        // (and wait_for's two probes)
        assert_served(&xdg, "redis-server", made, 2);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(xdg);
    (out, codes)
}

#[test]
fn redis_server_cli_and_benchmark() {
    let plain = redis_case(false);
    assert!(
        plain.0.contains("hello smc\n") && plain.0.contains("SET: finished"),
        "{}",
        plain.0
    );
    assert!(plain.0.contains("cmdstat_set:calls=2001"), "{}", plain.0);
    same("redis", &plain, &redis_case(true));
}

/// An HTTP server on asyncio (as Python services are written): the path back, a fixed size.
const ASYNCIO_SERVER: &str = r#"
import asyncio, sys
async def handle(r, w):
    line = await r.readline()
    while (await r.readline()) not in (b"\r\n", b""):
        pass
    path = line.split()[1]
    body = path * (20000 // max(len(path), 1))
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    await w.drain()
    w.close()
async def main():
    srv = await asyncio.start_server(handle, host=["127.0.0.1", "::1"], port=int(sys.argv[1]))
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
"#;

fn python_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("python-{under}"));
    let (dir, files) = web_root(&format!("python-{under}"));
    let port = free_port();
    let mut ports = vec![port];
    let mut s = side(under, &xdg, "python3");
    s.args([
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--directory",
    ])
    .arg(dir.join("www"));
    let server = start(s);
    wait_for(v4(port));
    let mut codes = Vec::new();
    let (mut out, made) = fetch_all(
        under,
        &xdg,
        &format!("http://127.0.0.1:{port}"),
        &files,
        &mut codes,
    );
    if under {
        // (wait_for's probe connection is one more)
        assert_served(&xdg, "python3", made, 1);
    }
    drop(server);

    let port = free_port_both();
    ports.push(port);
    let mut s = side(under, &xdg, "python3");
    s.args(["-c", ASYNCIO_SERVER, &port.to_string()]);
    let server = start(s);
    wait_for(v4(port));
    wait_for(v6(port));
    for (url, path) in [
        (format!("http://127.0.0.1:{port}/first"), "/first"),
        (format!("http://[::1]:{port}/second/path"), "/second/path"),
    ] {
        let mut c = side(under, &xdg, "curl");
        c.args([
            "-sS",
            "-g",
            "--max-time",
            "60",
            "-w",
            "\n%{http_code}",
            &url,
        ]);
        let (o, code, _) = client(under, c);
        let (body, status) = o.rsplit_once('\n').unwrap_or((&o, ""));
        let want = path.repeat(20000 / path.len());
        out += &format!(
            "{url}: status={status} bytes={} intact={}\n",
            body.len(),
            body == want
        );
        codes.push(code);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(xdg);
    (without_ports(&out, &ports), codes)
}

#[test]
fn python_http_server_and_asyncio_with_curl() {
    let plain = python_case(false);
    assert_eq!(plain.0.matches("intact=true").count(), 7, "{}", plain.0);
    assert_eq!(plain.0.matches("status=200").count(), 2, "{}", plain.0);
    same("python", &plain, &python_case(true));
}

/// nginx's configuration for a case: several workers, daemon on, both loopback addresses, every
/// path inside the case's directory, workers as nobody.
fn nginx_conf(dir: &Path, port: u16) -> PathBuf {
    let d = dir.display();
    let conf = format!(
        "worker_processes 4;\ndaemon on;\nuser nobody nogroup;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 128; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/t1;\n  proxy_temp_path {d}/t2;\n  fastcgi_temp_path {d}/t3;\n  uwsgi_temp_path {d}/t4;\n  scgi_temp_path {d}/t5;\n\
         \x20 server {{\n    listen 127.0.0.1:{port};\n    listen [::1]:{port};\n    root {d}/www;\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

fn nginx_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("nginx-{under}"));
    let (dir, files) = web_root(&format!("nginx-{under}"));
    let port = free_port_both();
    let conf = nginx_conf(&dir, port);
    let mut s = side(under, &xdg, "nginx");
    s.arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-p")
        .arg(&dir);
    // `daemon on`: the command returns once the master runs in the background.
    let (_, err, o) = run_within(s, LIMIT);
    let mut codes = vec![o.status.code()];
    assert!(
        o.status.success(),
        "nginx did not start: {err}\n{}",
        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
    );
    let master: i32 = std::fs::read_to_string(dir.join("nginx.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    struct Stop(i32);
    impl Drop for Stop {
        fn drop(&mut self) {
            // SAFETY: signalling the nginx master this case started.
            unsafe { libc::kill(self.0, libc::SIGQUIT) };
            let start = Instant::now();
            while Path::new(&format!("/proc/{}", self.0)).exists()
                && start.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let _stop = Stop(master);
    wait_for(v4(port));
    wait_for(v6(port));
    let workers_of = |master: i32| -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rsplit(')')
                            .next()?
                            .split_whitespace()
                            .nth(1)?
                            .parse::<i32>()
                            .ok()
                    })
                    == Some(master)
            })
            .collect()
    };
    // The master starts its workers after it listens: wait for them (10 s).
    let mut workers = workers_of(master);
    let since = Instant::now();
    while workers.len() < 4 && since.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        workers = workers_of(master);
    }
    let mut out = format!("workers={}\n", workers.len());
    if under {
        assert!(preloaded(master as u32), "the nginx master has no shim");
        assert!(
            workers.iter().all(|w| preloaded(*w)),
            "a worker has no shim"
        );
    }
    let mut made = 0;
    for base in [
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ] {
        let (o, n) = fetch_all(under, &xdg, &base, &files, &mut codes);
        out += &o;
        made += n;
    }
    if under {
        // The workers run as nobody and keep reporting through the files opened for them at
        // fork; together they accepted every request (and the two probes of wait_for).
        assert_served(&xdg, "nginx", made, 2);
    }
    drop(_stop);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(xdg);
    (without_ports(&out, &[port]), codes)
}

#[test]
fn nginx_workers_daemon_on_ipv4_and_ipv6() {
    let plain = nginx_case(false);
    assert!(plain.0.starts_with("workers=4\n"), "{}", plain.0);
    assert_eq!(plain.0.matches("intact=true").count(), 10, "{}", plain.0);
    same("nginx", &plain, &nginx_case(true));
}

/// A Java server and client (java.net sockets: AF_INET6, dual-stack).
fn java_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("java/Echo.java")
}

fn java_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("java-{under}"));
    let port = free_port_both();
    let mut s = side(under, &xdg, "java");
    s.arg(java_source()).args(["server", &port.to_string()]);
    let server = start(s);
    let start_at = Instant::now();
    while TcpStream::connect(v4(port)).is_err() {
        assert!(
            start_at.elapsed() < Duration::from_secs(90),
            "the Java server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut c = side(under, &xdg, "java");
    c.arg(java_source())
        .args(["client", &port.to_string(), "8", "200000"]);
    let (out, code, _) = client(under, c);
    drop(server);
    let _ = std::fs::remove_dir_all(xdg);
    (out, vec![code])
}

#[test]
fn java_client_and_server_dual_stack() {
    let plain = java_case(false);
    assert!(
        plain.0.contains("127.0.0.1 connections=8 intact=8"),
        "{}",
        plain.0
    );
    assert!(
        plain.0.contains("::1 connections=8 intact=8"),
        "{}",
        plain.0
    );
    same("java", &plain, &java_case(true));
}

fn tokio_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("tokio-{under}"));
    let port = free_port_both();
    let mut s = side(under, &xdg, bin("tokio-echo").to_str().unwrap());
    s.args(["serve", &format!("[::]:{port}")]);
    let server = start(s);
    wait_for(v4(port));
    let mut out = String::new();
    let mut codes = Vec::new();
    for to in [v4(port), v6(port)] {
        let mut c = side(under, &xdg, bin("tokio-echo").to_str().unwrap());
        c.args(["client", &to.to_string(), "32", "262144"]);
        let (o, code, _) = client(under, c);
        out += &format!("{}: {o}", if to.is_ipv6() { "v6" } else { "v4" });
        codes.push(code);
        // A program with epoll and nonblocking connects of its own, against the same server.
        let mut c = side(under, &xdg, bin("shapes").to_str().unwrap());
        c.args(["epoll-clients", &to.to_string(), "64", "65536"]);
        let (o, code, _) = client(under, c);
        out += &format!("{}: {o}", if to.is_ipv6() { "v6" } else { "v4" });
        codes.push(code);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(xdg);
    (out, codes)
}

#[test]
fn tokio_client_and_server_and_an_epoll_client() {
    let plain = tokio_case(false);
    assert_eq!(plain.0.matches("intact=32").count(), 2, "{}", plain.0);
    assert_eq!(
        plain
            .0
            .matches("in_progress=true intact=64 so_errors=0")
            .count(),
        2,
        "{}",
        plain.0
    );
    same("tokio", &plain, &tokio_case(true));
}

fn socat_case(under: bool) -> (String, Vec<Option<i32>>) {
    let xdg = private_xdg(&format!("socat-{under}"));
    let (back, front) = (free_port_both(), free_port());
    // An echo server on ::1, a relay from 127.0.0.1 to it, and clients through the relay.
    let mut s = side(under, &xdg, bin("sockcheck").to_str().unwrap());
    s.args(["serve", &back.to_string(), "::1"]);
    let server = start(s);
    wait_for(v6(back));
    let mut r = side(under, &xdg, "socat");
    r.args([
        &format!("TCP4-LISTEN:{front},bind=127.0.0.1,reuseaddr,fork"),
        &format!("TCP6:[::1]:{back}"),
    ]);
    let relay = start(r);
    wait_for(v4(front));
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let input = std::env::temp_dir().join(format!(
        "smcrun-matrix-{}-socat-{under}",
        std::process::id()
    ));
    std::fs::write(&input, &data).unwrap();
    let mut out = String::new();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let mut c = side(under, &xdg, "sh");
        c.args([
            "-c",
            &format!("socat -t 10 - TCP4:127.0.0.1:{front} < {}", input.display()),
        ]);
        let (_, err, o) = run_within(c, LIMIT);
        out += &format!(
            "echoed bytes={} intact={}\n",
            o.stdout.len(),
            o.stdout == data
        );
        if under {
            assert_eq!(summaries(&err).len(), 1, "{err}");
        }
        codes.push(o.status.code());
    }
    drop(relay);
    drop(server);
    let _ = std::fs::remove_file(input);
    let _ = std::fs::remove_dir_all(xdg);
    (out, codes)
}

#[test]
fn socat_relays_ipv4_to_ipv6() {
    let plain = socat_case(false);
    assert_eq!(plain.0.matches("intact=true").count(), 3, "{}", plain.0);
    same("socat", &plain, &socat_case(true));
}
