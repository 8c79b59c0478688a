//! What the operator views cost with many SMC sockets (a measurement, not a test; run it where
//! the kernel has SMC, e.g. in the VM test bed: `bench/views-vm`).
//!
//! `views-cost [LISTENERS] [FALLBACKS] [RUNS] [TICKS]` holds LISTENERS listening AF_SMC sockets
//! and FALLBACKS AF_SMC connections that fell back to TCP (their peer is a plain TCP listener in
//! this process), then runs `smcrun ss -a` (text and `--json`) RUNS times and reports the median
//! wall time and CPU time of a run, and the CPU time of one `smcrun monitor base` tick: the CPU of
//! `monitor base --count TICKS` less that of `--count 0` (start-up and first sample), per tick.
//! `smcrun --version` is measured too: the cost of starting the program, which every run pays;
//! and one scrape of the Prometheus exporter: the CPU a running `smcrun exporter` spends per
//! `GET /metrics` (its utime + stime over many scrapes), with the sockets the scrape counted, and
//! each collector's share (`smcrun_scrape_collector_duration_seconds`). Last, where `smcrun agent
//! --check` passes: every socket is closed, `smcrun agent` started, and once the exporter serves
//! its count (`smcrun_agent_sockets`) LISTENERS listening sockets are made again and the scrape is
//! measured with the agent (it must count them all, and dump no smc_diag: no `smc_sockets`):
//! with the agent working, and with it stopped (SIGSTOP) for the exporter's own cost (under TCG
//! one host thread runs both vCPUs, so a busy agent inflates the exporter's CPU time), the
//! exporter's floor with no collector on, and each collector's CPU alone (a scrape with only it
//! on, less the floor: the profile of a scrape).
//! `smcrun` is found on PATH (`VIEWS_COST_SMCRUN=NAME` measures another build). Each measure is
//! also printed as one `RESULT {json}` line with every sample, for `bench-run`.

use std::process::{Command, Stdio};
use std::time::Instant;

use smcrun_bench::cpu::{rusage_ms, stat_ticks, ticks_ms};
use smcrun_bench::net::{loopback, SIN_LEN};
use smcrun_sys::smc::AF_SMC;

fn die(what: &str) -> ! {
    eprintln!("views-cost: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(1);
}

fn socket(family: libc::c_int) -> libc::c_int {
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        die("socket");
    }
    fd
}

fn bind_listen(fd: libc::c_int, port: u16) {
    let a = loopback(port);
    // SAFETY: `a` is a sockaddr_in of the length passed.
    unsafe {
        if libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN) != 0 {
            die("bind");
        }
        if libc::listen(fd, 4096) != 0 {
            die("listen");
        }
    }
}

fn local_port(fd: libc::c_int) -> u16 {
    let mut a = loopback(0);
    let mut len = SIN_LEN;
    // SAFETY: `a` is a sockaddr_in of the length passed.
    if unsafe { libc::getsockname(fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut len) } != 0 {
        die("getsockname");
    }
    u16::from_be(a.sin_port)
}

fn raise_fd_limit(need: u64) {
    let want = need + 64;
    let r = libc::rlimit {
        rlim_cur: want,
        rlim_max: want,
    };
    // SAFETY: setrlimit reads one rlimit, `r`, ours and alive for the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        die("setrlimit(RLIMIT_NOFILE) (run as root for many sockets)");
    }
}

/// The smcrun to measure: `$VIEWS_COST_SMCRUN` (e.g. an older build, for an A/B), else `smcrun`.
fn smcrun() -> String {
    std::env::var("VIEWS_COST_SMCRUN").unwrap_or_else(|_| "smcrun".to_string())
}

/// Wall and CPU milliseconds of one run of `smcrun ARGS` (output discarded).
// The child is reaped by wait4, which also gives its CPU time (std's wait would not).
#[allow(clippy::zombie_processes)]
fn measure(args: &[&str]) -> (f64, f64, f64) {
    let t0 = Instant::now();
    let child = Command::new(smcrun())
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("views-cost: cannot run smcrun: {e}");
            std::process::exit(1)
        });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain integers: all zero bytes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only `status` and `ru`, both ours and alive for the call; `pid` is
    // our own child, not yet waited for (Child::wait is never called on it).
    if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } != pid {
        die("wait4");
    }
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        eprintln!("views-cost: smcrun {args:?} failed (status {status})");
        std::process::exit(1);
    }
    let sys = ru.ru_stime.tv_sec as f64 * 1e3 + ru.ru_stime.tv_usec as f64 / 1e3;
    (wall, rusage_ms(&ru), sys)
}

/// CPU milliseconds (user, system) process `pid` has used.
fn cpu_ms(pid: u32) -> (f64, f64) {
    stat_ticks(&format!("/proc/{pid}/stat")).map_or((0.0, 0.0), |(u, s)| (ticks_ms(u), ticks_ms(s)))
}

fn http_get(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| {
        eprintln!("views-cost: cannot reach the exporter: {e}");
        std::process::exit(1)
    });
    let _ = write!(s, "GET /metrics HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// A running `smcrun exporter` with arguments `extra`, once it listens: the child and its port.
fn start_exporter(extra: &[&str]) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(19609);
    let child = Command::new(smcrun())
        .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("views-cost: cannot run smcrun exporter: {e}");
            std::process::exit(1)
        });
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t.elapsed().as_secs() > 30 {
            eprintln!("views-cost: the exporter did not listen");
            std::process::exit(1);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (child, port)
}

/// The sum of the samples of family `name` in a scrape's text, and whether there were any.
fn family_sum(text: &str, name: &str) -> (f64, bool) {
    let prefix = format!("{name}{{");
    let v: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    (v.iter().sum(), !v.is_empty())
}

/// One scrape's cost inside a running `smcrun exporter`: its CPU time (user, system) over `n`
/// scrapes, per scrape, the mean wall time of a request, and the last scrape's text. The
/// exporter is stopped.
fn exporter_scrape_cost(
    (mut child, port): (std::process::Child, u16),
    n: u64,
) -> ((f64, f64), f64, String) {
    let warm = http_get(port);
    let before = cpu_ms(child.id());
    let t0 = Instant::now();
    let mut last = warm;
    for _ in 0..n {
        last = http_get(port);
    }
    let wall = t0.elapsed().as_secs_f64() * 1e3 / n as f64;
    let after = cpu_ms(child.id());
    let cpu = (
        (after.0 - before.0) / n as f64,
        (after.1 - before.1) / n as f64,
    );
    let _ = child.kill();
    let _ = child.wait();
    (cpu, wall, last)
}

/// Each collector's seconds in a scrape's text (`smcrun_scrape_collector_duration_seconds`), in
/// milliseconds, for the profile line.
fn collector_ms(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.strip_prefix("smcrun_scrape_collector_duration_seconds{collector=\""))
        .filter_map(|l| {
            let (name, v) = l.split_once("\"} ")?;
            Some(format!("{name} {:.2}", v.parse::<f64>().ok()? * 1e3))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Batches of scrapes measured with the agent.
const BATCHES: usize = 5;

/// Holds `n` listening AF_SMC sockets (their descriptors).
fn listeners(n: u64) -> Vec<libc::c_int> {
    (0..n)
        .map(|_| {
            let fd = socket(AF_SMC);
            bind_listen(fd, 0);
            fd
        })
        .collect()
}

fn close_all(fds: &mut Vec<libc::c_int>) {
    for fd in fds.drain(..) {
        // SAFETY: `drain` hands each descriptor out once and forgets it, so no number is closed
        // twice or while something else still uses it.
        unsafe { libc::close(fd) };
    }
}

/// Scrapes `port` until `ready` holds for the text (every 200 ms, at most `secs` seconds).
fn scrape_until(port: u16, secs: u64, ready: impl Fn(&str) -> bool) -> Result<String, String> {
    let t = Instant::now();
    loop {
        let text = http_get(port);
        if ready(&text) {
            return Ok(text);
        }
        if t.elapsed().as_secs() > secs {
            return Err(text);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The exporter's scrape with `smcrun agent` attached, at `n` listening sockets made after its
/// probes were attached (the agent records the sockets it sees made): `keep`'s sockets are
/// closed first. Prints the `exporter scrape with the agent` measure, or why there is none.
fn with_agent(keep: &mut Vec<libc::c_int>, n: u64, scrapes: u64) {
    let check = Command::new(smcrun())
        .args(["agent", "--check"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !check.is_ok_and(|s| s.success()) {
        println!("views-cost: no exporter scrape with the agent: `smcrun agent --check` says this kernel cannot run it");
        return;
    }
    close_all(keep);
    let mut agent = Command::new(smcrun())
        .args(["agent", "--interval-ms", "200"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("views-cost: cannot run smcrun agent: {e}");
            std::process::exit(1)
        });
    let stop = |agent: &mut std::process::Child| {
        // SAFETY: kill(2) takes integers only; the pid is our child's, not yet reaped (SIGTERM lets
        // it take its state away).
        unsafe { libc::kill(agent.id() as libc::pid_t, libc::SIGTERM) };
        let _ = agent.wait();
    };
    let exporter = start_exporter(&[]);
    // Attached, and its record of this namespace's open sockets known complete: it serves
    // smcrun_agent_sockets.
    if let Err(last) = scrape_until(exporter.1, 120, |t| family_sum(t, "smcrun_agent_sockets").1) {
        eprintln!(
            "views-cost: the exporter did not serve smcrun_agent_sockets with the agent running: {}",
            last.lines()
                .filter(|l| l.starts_with("smcrun_agent_attached") || l.starts_with("smc_sockets"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        stop(&mut agent);
        std::process::exit(1);
    }
    *keep = listeners(n);
    let want = n as f64;
    if let Err(last) = scrape_until(exporter.1, 120, |t| {
        family_sum(t, "smcrun_agent_sockets").0 >= want
    }) {
        eprintln!(
            "views-cost: the agent's record did not reach {n} sockets: smcrun_agent_sockets adds up to {}",
            family_sum(&last, "smcrun_agent_sockets").0
        );
        stop(&mut agent);
        std::process::exit(1);
    }
    // Under TCG one host thread runs both vCPUs: while the agent works (every 200 ms it reads
    // its 10,000 records) the exporter's vCPU is paused but its clock ticks on, so its CPU time
    // is inflated by the agent's. Measured both ways: the agent running, and the agent stopped
    // (SIGSTOP: its summary stays trusted, its pid alive) for the exporter's own cost.
    let ((ru, rs), rwall, _) = exporter_scrape_cost(start_exporter(&[]), scrapes);
    let signal = |sig: libc::c_int| {
        // SAFETY: kill(2) takes integers only; the pid is our child's, not yet reaped.
        unsafe { libc::kill(agent.id() as libc::pid_t, sig) };
    };
    signal(libc::SIGSTOP);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Batches of `scrapes` on one exporter: the host's load (the emulator descheduled while the
    // guest's clock runs) inflates a batch, never deflates it, so the least is the best figure.
    let (mut batches, mut walls) = (Vec::new(), Vec::new());
    let mut last = String::new();
    let mut exporter = Some(exporter);
    let (mut user, mut sys) = (f64::MAX, 0.0);
    for i in 0..BATCHES {
        let e = exporter.take().unwrap_or_else(|| start_exporter(&[]));
        let ((u, s), w, text) = exporter_scrape_cost(e, scrapes);
        if u + s < user + sys {
            (user, sys) = (u, s);
        }
        batches.push(u + s);
        walls.push(w);
        if i == 0 {
            last = text;
        }
    }
    // The exporter's own floor: HTTP and the render, with no collector on.
    let ((fu, fs), _, _) =
        exporter_scrape_cost(start_exporter(&["--collector.disable-defaults"]), scrapes);
    profile(scrapes);
    signal(libc::SIGCONT);
    let agent_cpu = cpu_ms(agent.id());
    stop(&mut agent);
    let (counted, _) = family_sum(&last, "smcrun_agent_sockets");
    let (diag, dumped) = family_sum(&last, "smc_sockets");
    if dumped {
        eprintln!("views-cost: the scrape with the agent still dumped smc_diag (smc_sockets adds up to {diag})");
        std::process::exit(1);
    }
    result(
        "exporter scrape with the agent",
        &[
            ("wall_ms", &walls),
            ("cpu_ms", &batches),
            ("sockets", &[counted]),
        ],
    );
    result(
        "exporter scrape with the agent working",
        &[("wall_ms", &[rwall]), ("cpu_ms", &[ru + rs])],
    );
    println!(
        "smcrun exporter with smcrun agent (stopped while measured): one scrape {:.1} ms CPU in the exporter ({user:.1} user + {sys:.1} system; the least of {BATCHES} batches of {scrapes} scrapes, each a new exporter: {}), {:.1} ms wall (median); smcrun_agent_sockets adds up to {counted}, no smc_sockets; collectors (ms wall): {}; with no collector on {:.1} ms ({fu:.1} user + {fs:.1} system)",
        user + sys,
        batches
            .iter()
            .map(|b| format!("{b:.1}"))
            .collect::<Vec<_>>()
            .join(" "),
        median(walls.clone()),
        collector_ms(&last),
        fu + fs,
    );
    println!(
        "smcrun exporter with smcrun agent working (every 200 ms): one scrape {:.1} ms CPU ({ru:.1} user + {rs:.1} system; TCG charges it the agent's time on the other vCPU), {rwall:.1} ms wall; the agent used {:.0} ms CPU in all",
        ru + rs,
        agent_cpu.0 + agent_cpu.1
    );
}

/// The collectors, as `--collector.NAME` names them.
const COLLECTORS: [&str; 9] = [
    "counters",
    "info",
    "topology",
    "sockets",
    "rdma",
    "processes",
    "bpf",
    "agent",
    "sysctl",
];

/// Each collector's CPU alone: a scrape with only that collector on, less one with none on (the
/// floor: HTTP and the render), the least of 2 batches of `scrapes` each, user and system (the
/// kernel's share: its netlink dumps, file reads and system calls). Printed as one line per
/// collector and a `RESULT` line, `exporter scrape, collector NAME alone`.
fn profile(scrapes: u64) {
    let least = |extra: &[&str]| {
        (0..2)
            .map(|_| exporter_scrape_cost(start_exporter(extra), scrapes).0)
            .min_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)))
            .unwrap_or_default()
    };
    let (fu, fs) = least(&["--collector.disable-defaults"]);
    let mut line = Vec::new();
    for name in COLLECTORS {
        let flag = format!("--collector.{name}");
        let (u, s) = least(&["--collector.disable-defaults", &flag]);
        result(
            &format!("exporter scrape, collector {name} alone"),
            &[("cpu_ms", &[u + s]), ("user_ms", &[u]), ("system_ms", &[s])],
        );
        line.push(format!(
            "{name} {:.2} ({:.2} user + {:.2} system)",
            u + s - fu - fs,
            u - fu,
            s - fs
        ));
    }
    println!(
        "smcrun exporter profile (the agent stopped; each collector alone less the floor of {:.2} ms, {fu:.2} user + {fs:.2} system; least of 2 batches of {scrapes}): {}",
        fu + fs,
        line.join(", ")
    );
}

/// One `RESULT` line: the measure's name and its samples (milliseconds).
fn result(measure: &str, fields: &[(&str, &[f64])]) {
    let f: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{k:?}:{}", serde_json::to_string(v).unwrap_or_default()))
        .collect();
    println!("RESULT {{\"measure\":{measure:?},{}}}", f.join(","));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("views-cost: \"{s}\" is not a count");
                std::process::exit(2)
            })
        })
        .unwrap_or(default)
}

fn main() {
    let n_listeners = arg(1, 10_000);
    let fallbacks = arg(2, 0);
    let runs = arg(3, 5).max(1);
    let ticks = arg(4, 50).max(1);
    raise_fd_limit(n_listeners + 2 * fallbacks);

    let t0 = Instant::now();
    let mut keep = listeners(n_listeners);
    if fallbacks > 0 {
        let plain = socket(libc::AF_INET);
        bind_listen(plain, 0);
        let a = loopback(local_port(plain));
        for _ in 0..fallbacks {
            let fd = socket(AF_SMC);
            // SAFETY: `a` is a sockaddr_in of the length passed; accept takes no address.
            unsafe {
                if libc::connect(fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN) != 0 {
                    die("connect");
                }
                let s = libc::accept(plain, std::ptr::null_mut(), std::ptr::null_mut());
                if s < 0 {
                    die("accept");
                }
                keep.push(s);
            }
            keep.push(fd);
        }
    }
    println!(
        "views-cost: {n_listeners} listening AF_SMC sockets, {fallbacks} fallen-back AF_SMC connections made in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );

    for args in [&["--version"][..], &["ss", "-a"], &["ss", "-a", "--json"]] {
        let (mut wall, mut cpu, mut sys) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let (w, c, s) = measure(args);
            wall.push(w);
            cpu.push(c);
            sys.push(s);
        }
        result(
            &format!("smcrun {}", args.join(" ")),
            &[("wall_ms", &wall), ("cpu_ms", &cpu), ("sys_ms", &sys)],
        );
        println!(
            "smcrun {}: median of {runs}: {:.1} ms wall, {:.1} ms CPU ({:.1} ms of it in the kernel)",
            args.join(" "),
            median(wall),
            median(cpu),
            median(sys)
        );
    }

    for extra in [&[][..], &["--no-sockets"]] {
        let ((user, sys), wall, last) =
            exporter_scrape_cost(start_exporter(extra), runs.max(5) * 4);
        let (counted, _) = family_sum(&last, "smc_sockets");
        result(
            &format!(
                "exporter scrape{}",
                extra.iter().map(|a| format!(" {a}")).collect::<String>()
            ),
            &[
                ("wall_ms", &[wall]),
                ("cpu_ms", &[user + sys]),
                ("sockets", &[counted]),
            ],
        );
        println!(
            "smcrun exporter{}: one scrape {:.1} ms CPU in the exporter ({user:.1} user + {sys:.1} system), {wall:.1} ms wall (mean of {} scrapes); smc_sockets adds up to {counted}; collectors (ms wall): {}",
            extra.iter().map(|a| format!(" {a}")).collect::<String>(),
            user + sys,
            runs.max(5) * 4,
            collector_ms(&last)
        );
    }

    let count = ticks.to_string();
    let (mut base, mut full) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        base.push(measure(&["monitor", "base", "-i", "0.01", "--count", "0"]));
        full.push(measure(&[
            "monitor", "base", "-i", "0.01", "--count", &count,
        ]));
    }
    // per tick: the CPU (and system CPU) of TICKS ticks less that of none
    let per_tick = |k: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
        base.iter()
            .zip(&full)
            .map(|(b, f)| (k(f) - k(b)).max(0.0) / ticks as f64)
            .collect()
    };
    let ticks_ms = per_tick(|m| m.1);
    result(
        "monitor tick",
        &[("cpu_ms", &ticks_ms), ("sys_ms", &per_tick(|m| m.2))],
    );
    let (base, full): (Vec<f64>, Vec<f64>) = (
        base.iter().map(|m| m.1).collect(),
        full.iter().map(|m| m.1).collect(),
    );
    let (b, f) = (median(base), median(full));
    println!(
        "smcrun monitor base: start-up and first sample {b:.2} ms CPU; one tick {:.3} ms CPU (median of {runs}: {f:.1} ms for {ticks} ticks)",
        (f - b).max(0.0) / ticks as f64
    );
    with_agent(&mut keep, n_listeners, runs.max(5) * 4);
    close_all(&mut keep);
}
