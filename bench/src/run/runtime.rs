//! Measurement 5, the runtime inside each program: resident memory added, wake-ups of the sidecar while
//! nothing happens, the instructions its event functions add per connection on the hot path, and
//! the sidecar's CPU while a server takes 20,000 short connections (counting them, keeping the
//! details, writing the report).

use crate::hooks::which;
use crate::proc::{free_port, output, thread_cpu, thread_named};
use crate::report::{Goal, Row};
use crate::stats::order;
use crate::Ctx;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `sockcheck conns 2 wait`, plain or under smcrun, once it holds its connections.
fn holder(ctx: &Ctx, shim: bool) -> Result<Child, String> {
    let sockcheck = ctx.bin.join("sockcheck");
    let mut c = if shim {
        let mut c = Command::new(&ctx.smcrun);
        c.arg(&sockcheck);
        c
    } else {
        Command::new(&sockcheck)
    };
    let mut child = c
        .args(["conns", "2", "wait"])
        .env("XDG_RUNTIME_DIR", &ctx.work)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run sockcheck: {e}"))?;
    let mut line = String::new();
    let out = child.stdout.take().ok_or("no stdout")?;
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("sockcheck: {e}"))?;
    Ok(child)
}

/// A `KEY: N kB` field of /proc/PID/status (`VmRSS:`, `VmHWM:`), in kB.
pub(crate) fn status_kb(pid: u32, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn switches(task: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("{task}/status")).ok()?;
    Some(
        s.lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .sum(),
    )
}

fn kill(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Resident memory, plain and under smcrun, in interleaved pairs.
fn memory(ctx: &Ctx) -> Result<Row, String> {
    let settle = Duration::from_millis(if ctx.quick { 300 } else { 1500 });
    let mut v = [Vec::new(), Vec::new()];
    for i in 0..ctx.pairs() {
        for s in order(i, 2) {
            let c = holder(ctx, s == 1)?;
            std::thread::sleep(settle);
            let rss = status_kb(c.id(), "VmRSS:").ok_or("no VmRSS")?;
            kill(c);
            v[s].push(rss);
        }
    }
    Ok(Row::paired(
        "runtime",
        "resident memory of a program holding 2 connections",
        "kB",
        ("plain", &v[0]),
        ("under smcrun", &v[1]),
    )
    .goal(Goal::AddedAtMost(1024.0))
    .note("sockcheck conns 2 wait; VmRSS"))
}

/// The sidecar's context switches while nothing changes.
fn idle(ctx: &Ctx) -> Result<Row, String> {
    let (settle, window) = if ctx.quick { (2, 2) } else { (3, 10) };
    let mut v = Vec::new();
    for _ in 0..if ctx.quick { 1 } else { 3 } {
        let c = holder(ctx, true)?;
        std::thread::sleep(Duration::from_secs(settle));
        let task = thread_named(c.id(), "smcrun-sidecar").ok_or("no smcrun-sidecar thread")?;
        let a = switches(&task).ok_or("no context switches")?;
        std::thread::sleep(Duration::from_secs(window));
        let b = switches(&task).ok_or("no context switches")?;
        kill(c);
        v.push(b - a);
    }
    Ok(Row::single(
        "runtime",
        &format!("sidecar wake-ups while idle, in {window} s"),
        "wake-ups",
        "under smcrun",
        &v,
    )
    .goal(Goal::AtMost(0.0))
    .note("context switches of the sidecar thread"))
}

/// Instructions inside the runtime's event functions (`smcrun_runtime::track::*`, everything
/// they call included) per connection: socket, connect, close.
fn per_event(ctx: &Ctx) -> Result<Row, String> {
    let count = |n: u32| -> Result<f64, String> {
        let collect = "smcrun_runtime::track::*";
        let mut v = crate::proc::callgrind_command(collect);
        v.arg(ctx.bin.join("hook-loop"))
            .arg(n.to_string())
            .arg("tcp_connect_close")
            .env("LD_PRELOAD", &ctx.shim)
            .env("XDG_RUNTIME_DIR", &ctx.work);
        crate::proc::callgrind(collect, v)
    };
    let (n1, n2) = if ctx.quick {
        (200, 600)
    } else {
        (2_000, 6_000)
    };
    let per = (count(n2)? - count(n1)?) / (f64::from(n2 - n1) * 1.1);
    Ok(Row::single(
        "runtime",
        "hot path: the runtime's event functions per connection (socket, connect, close)",
        "instr",
        "under the shim",
        &[per],
    )
    .note("callgrind, smcrun_runtime::track::* inclusive"))
}

/// A server taking `n` short connections from a plain client: its CPU, and its sidecar's.
fn serve(ctx: &Ctx, shim: bool, n: u32) -> Result<Option<f64>, String> {
    let port = free_port();
    let shapes = ctx.bin.join("shapes");
    let mut c = if shim {
        let mut c = Command::new(&ctx.smcrun);
        c.arg(&shapes);
        c
    } else {
        Command::new(&shapes)
    };
    let t0 = Instant::now();
    let mut server = c
        .args(["serve-n", &port.to_string(), &n.to_string()])
        .env("XDG_RUNTIME_DIR", &ctx.work)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run shapes: {e}"))?;
    let mut line = String::new();
    let out = server.stdout.take().ok_or("no stdout")?;
    let mut out = BufReader::new(out);
    out.read_line(&mut line)
        .map_err(|e| format!("shapes: {e}"))?;
    let pid = server.id();
    let client = Command::new(&shapes)
        .args(["hammer", &format!("127.0.0.1:{port}"), &n.to_string(), "2"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run shapes hammer: {e}"))?;
    // The sidecar's CPU, read until the server exits (its last reading is the figure).
    let mut sidecar = None;
    let mut task = None;
    while server.try_wait().map_err(|e| e.to_string())?.is_none() {
        if task.is_none() && shim {
            task = thread_named(pid, "smcrun-sidecar");
        }
        if let Some(t) = &task {
            if let Some(c) = thread_cpu(t) {
                sidecar = Some(c);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        if t0.elapsed() > Duration::from_secs(600) {
            let _ = server.kill();
            return Err("the server did not finish within 600 s".into());
        }
    }
    let _ = client.wait_with_output();
    Ok(sidecar)
}

/// Children's CPU so far (user + system ms).
fn children_cpu() -> f64 {
    // SAFETY: rusage is plain integers: all zero bytes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `ru`, ours and alive for the call.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    smcrun_bench::cpu::rusage_ms(&ru)
}

fn short_connections(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let n = if ctx.quick { 500 } else { 20_000 };
    let mut cpu = [Vec::new(), Vec::new()];
    let mut side_cpu = Vec::new();
    for i in 0..ctx.pairs() {
        for s in order(i, 2) {
            // Servers and clients are children: the server's CPU is what its run adds to the
            // children's total less the client's, so each is measured alone: client plain, the
            // same on both sides.
            let before = children_cpu();
            let sc = serve(ctx, s == 1, n)?;
            cpu[s].push(children_cpu() - before);
            if let Some(sc) = sc {
                side_cpu.push(sc);
            }
        }
    }
    let per_conn: Vec<f64> = side_cpu.iter().map(|c| c * 1000.0 / f64::from(n)).collect();
    Ok(vec![
        Row::paired(
            "runtime",
            &format!("{n} short connections: CPU of server + plain client"),
            "ms",
            ("plain server", &cpu[0]),
            ("server under smcrun", &cpu[1]),
        )
        .note("shapes serve-n / hammer, 2 client threads"),
        Row::single(
            "runtime",
            &format!("{n} short connections: CPU of the sidecar thread"),
            "ms",
            "under smcrun",
            &side_cpu,
        ),
        Row::single(
            "runtime",
            "sidecar CPU per short connection (details, report writing)",
            "µs",
            "under smcrun",
            &per_conn,
        ),
    ])
}

pub fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let _ = output(Command::new(&ctx.smcrun).arg("--version"))?;
    std::env::set_var("SMCRUN_SHIM", &ctx.shim);
    let mut rows = vec![memory(ctx)?, idle(ctx)?];
    if which("valgrind") {
        rows.push(per_event(ctx)?);
    } else {
        rows.push(Row::skipped(
            "runtime",
            "hot path instructions",
            "valgrind is not installed",
        ));
    }
    rows.extend(short_connections(ctx)?);
    Ok(rows)
}
