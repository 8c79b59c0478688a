//! Measurement 9, in the VM test bed (Debian's 6.12, SMC-R over soft-RoCE; one boot of its own):
//! what `smcrun agent` costs. A server and a client take N short SMC-R connections (`shapes
//! serve-n` and `shapes hammer`, 20,000), A with no agent, B with `smcrun agent` running and
//! attached (its default interval), interleaved; the figure is the CPU of the whole machine
//! (every CPU's busy time from /proc/stat: the kprobes' cost is charged to the connecting
//! processes and to softirqs, and the agent process's own CPU is in it too) and the wall time.
//! Then the agent's memory: its peak resident size after the runs and what its BPF maps and
//! programs hold in the kernel (`memlock` of their fds in /proc/PID/fdinfo).
//!
//! The programs are native AF_SMC (`SHAPES_FAMILY=smc`), not under smcrun: the agent exists for
//! programs smcrun does not run, and without the preload's sidecar on either side A is the
//! kernel's SMC-R work alone, the smallest denominator, so the ratio is the strictest.
//!
//! A broken agent must not look cheap: every B run must have been counted whole by the agent
//! (N client and N server connections, as many SMC-R as the kernel counted, nothing lost), or
//! the measurement fails.

use crate::proc::{free_port, thread_cpu};
use crate::report::{Goal, Row};
use crate::runtime::status_kb;
use crate::stats::order;
use crate::vm::{self, Tech};
use crate::Ctx;
use smcrun_views::agent_state::{self as published, Counts, Summary};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The report's group of these rows.
const GROUP: &str = "agent";

/// How long the CPU window stays open after the programs end, on both sides: five of the agent's
/// default intervals (200 ms), so that its last drains of the kernel's maps are inside B's.
const SETTLE: Duration = Duration::from_millis(1000);

/// Host side: boots the VM (Debian's kernel, SMC-R) once and collects the guest's rows.
pub fn host(ctx: &Ctx) -> Result<Vec<Row>, String> {
    // 10 runs of 20,000 connections at ~20 ms each under TCG, and a loaded host: 2.5 h at most.
    Ok(
        vm::boot(ctx, Tech::SmcR, GROUP, " --agent", 9000).unwrap_or_else(|e| {
            vec![Row::skipped(
                GROUP,
                "the agent's cost",
                &format!("failed: {e}"),
            )]
        }),
    )
}

/// Connections per run.
fn connections(ctx: &Ctx) -> u32 {
    if ctx.quick {
        1_000
    } else {
        20_000
    }
}

/// Busy milliseconds of every CPU so far (user, nice, system, irq, softirq, steal of the `cpu`
/// line of /proc/stat).
fn machine_cpu_ms() -> Result<f64, String> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or("/proc/stat has no cpu line")?;
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    if f.len() < 8 {
        return Err(format!("/proc/stat's cpu line is short: {line}"));
    }
    // user nice system idle iowait irq softirq steal: everything but idle and iowait.
    Ok(smcrun_bench::cpu::ticks_ms(
        f[0] + f[1] + f[2] + f[5] + f[6] + f[7],
    ))
}

/// CPU milliseconds process `pid` has run, all its threads.
fn process_cpu_ms(pid: u32) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| thread_cpu(&t.path().display().to_string()))
                .sum()
        })
        .unwrap_or(f64::NAN)
}

/// What process `pid`'s BPF objects hold in the kernel, from the `memlock` of its fds in
/// /proc/PID/fdinfo: (maps' bytes, programs' bytes, the maps as "type entries × (key + value B)").
fn kernel_memory(pid: u32) -> Result<(f64, f64, Vec<String>), String> {
    let dir = format!("/proc/{pid}/fdinfo");
    let rd = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    let (mut maps, mut progs, mut shapes) = (0.0, 0.0, Vec::new());
    for e in rd.flatten() {
        let Ok(info) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let field = |k: &str| -> Option<f64> {
            info.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
        };
        let memlock = field("memlock:").unwrap_or(0.0);
        if let Some(t) = field("map_type:") {
            maps += memlock;
            let kind = match t as u32 {
                1 => "hash".to_string(),
                2 => "array".to_string(),
                other => format!("type {other}"),
            };
            shapes.push(format!(
                "{kind} {} × ({} + {} B)",
                field("max_entries:").unwrap_or(0.0),
                field("key_size:").unwrap_or(0.0),
                field("value_size:").unwrap_or(0.0)
            ));
        } else if field("prog_type:").is_some() {
            progs += memlock;
        }
    }
    if shapes.is_empty() {
        return Err(format!("{dir} shows no BPF map: is the agent attached?"));
    }
    shapes.sort();
    Ok((maps, progs, shapes))
}

/// `smcrun agent`, started and attached (its state says so), or why not.
fn start_agent(ctx: &Ctx) -> Result<Child, String> {
    let log = ctx.work.join("agent.log");
    let mut child = Command::new(&ctx.smcrun)
        .arg("agent")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?)
        .spawn()
        .map_err(|e| format!("cannot run smcrun agent: {e}"))?;
    let t = Instant::now();
    loop {
        if let Ok(s) = published::read_summary() {
            if s.agent_pid == child.id() && s.attached {
                return Ok(child);
            }
        }
        let gone = child.try_wait().map_err(|e| e.to_string())?;
        if gone.is_some() || t.elapsed() > Duration::from_secs(300) {
            crate::proc::stop(child);
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "smcrun agent did not attach ({}): {}",
                gone.map_or("300 s".to_string(), |s| s.to_string()),
                said.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The agent's published summary (it must be the agent `pid`'s).
fn agent_state(pid: u32) -> Result<Summary, String> {
    let s = published::read_summary().map_err(|e| e.to_string())?;
    if s.agent_pid != pid {
        return Err(format!("the state is agent {}'s, not {pid}'s", s.agent_pid));
    }
    Ok(s)
}

/// One run's figures.
struct Run {
    /// Busy milliseconds of every CPU, from the server's start to [`SETTLE`] after both ended.
    cpu_ms: f64,
    /// Milliseconds from the server's start until both ended.
    wall_ms: f64,
    /// The kernel's SMC-R client connections in the run.
    kernel_smcr: f64,
}

/// `n` short native SMC-R connections: `shapes serve-n` and `shapes hammer` (2 threads), with
/// the CPU window closed [`SETTLE`] after both end.
fn run(ctx: &Ctx, n: u32) -> Result<Run, String> {
    let shapes = ctx.bin.join("shapes");
    let port = free_port().to_string();
    let count = n.to_string();
    let kernel_before = vm::clients(ctx, Tech::SmcR);
    let cpu0 = machine_cpu_ms()?;
    let t0 = Instant::now();
    let mut server = Command::new(&shapes)
        .args(["serve-n", &port, &count])
        .env("SHAPES_FAMILY", "smc")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run shapes: {e}"))?;
    let mut out = BufReader::new(server.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)
        .map_err(|e| format!("shapes serve-n: {e}"))?;
    if !line.starts_with("listening=") {
        let mut err = String::new();
        let _ = server.stderr.take().map(|mut e| e.read_to_string(&mut err));
        let _ = server.wait();
        return Err(format!("shapes serve-n did not listen: {line}{err}"));
    }
    let client = Command::new(&shapes)
        .args(["hammer", &format!("127.0.0.1:{port}"), &count, "2"])
        .env("SHAPES_FAMILY", "smc")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run shapes hammer: {e}"))?;
    let made = client
        .wait_with_output()
        .map_err(|e| format!("shapes hammer: {e}"))?;
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let served = server.wait().map_err(|e| format!("shapes serve-n: {e}"))?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(SETTLE);
    let cpu_ms = machine_cpu_ms()? - cpu0;
    let said = String::from_utf8_lossy(&made.stdout);
    if !made.status.success() || said.trim() != format!("made={n} failed=0") {
        return Err(format!(
            "shapes hammer: {} {}{}",
            made.status,
            said.trim(),
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    if !served.success() || rest.trim() != format!("served={n}") {
        return Err(format!("shapes serve-n: {served} {}", rest.trim()));
    }
    Ok(Run {
        cpu_ms,
        wall_ms,
        kernel_smcr: vm::clients(ctx, Tech::SmcR) - kernel_before,
    })
}

/// What the agent counted of a side in a run (its counts since `before`).
fn counted(after: &Counts, before: &Counts) -> [u64; 4] {
    [
        after.smcr - before.smcr,
        after.smcd - before.smcd,
        after.tcp - before.tcp,
        after.not_seen - before.not_seen,
    ]
}

/// Waits (outside the measurement) until the agent `pid` has counted `n` more connections of
/// each side than in `before`, and checks them against the kernel's `kernel_smcr`: all of them,
/// as many SMC-R as the kernel counted, none lost. Returns its client and server counts.
fn check_counted(pid: u32, before: &Summary, n: u32, kernel_smcr: f64) -> Result<Summary, String> {
    let n = u64::from(n);
    let t = Instant::now();
    let s = loop {
        let s = agent_state(pid)?;
        let c = counted(&s.total.client, &before.total.client);
        let v = counted(&s.total.server, &before.total.server);
        if (c.iter().sum::<u64>() >= n && v.iter().sum::<u64>() >= n)
            || t.elapsed() > Duration::from_secs(30)
        {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let c = counted(&s.total.client, &before.total.client);
    let v = counted(&s.total.server, &before.total.server);
    let o = &s.overflow;
    if c[0] as f64 != kernel_smcr
        || c.iter().sum::<u64>() != n
        || v.iter().sum::<u64>() != n
        || c[3] + v[3] != 0
        || o.live_full + o.done_full + o.inflight_full != 0
    {
        return Err(format!(
            "the agent did not count the run: {n} connections, the kernel's SMC-R clients \
             {kernel_smcr}; the agent's clients SMC-R/SMC-D/TCP/not seen {c:?}, servers {v:?}, \
             overflow {o:?}"
        ));
    }
    Ok(s)
}

/// The agent's CPU per second while no socket comes or goes (attached, its default interval):
/// the part of its cost that does not depend on connections.
fn idle_cpu_ms_per_s(ctx: &Ctx) -> Result<f64, String> {
    let window = Duration::from_secs(if ctx.quick { 5 } else { 10 });
    let agent = start_agent(ctx)?;
    let pid = agent.id();
    let a0 = process_cpu_ms(pid);
    std::thread::sleep(window);
    let a1 = process_cpu_ms(pid);
    crate::proc::stop(agent);
    Ok((a1 - a0) / window.as_secs_f64())
}

/// The figures of the B runs beyond the pairs.
#[derive(Default)]
struct AgentSide {
    cpu_ms: Vec<f64>,
    /// The agent process's CPU against the rest of the machine's in the same run (%).
    share: Vec<f64>,
    hwm_kb: Vec<f64>,
    client_smcr: u64,
    server_smcr: u64,
    stale: u64,
    kernel: Option<(f64, f64, Vec<String>)>,
}

/// Guest side: the pairs, printed as one `BENCH-ROWS` line.
pub fn guest(ctx: &Ctx) -> Result<(), String> {
    let rows = match measure(ctx) {
        Ok(r) => r,
        Err(e) => vec![Row::skipped(
            GROUP,
            "the agent's cost",
            &format!("failed: {e}"),
        )],
    };
    println!(
        "BENCH-ROWS {}",
        serde_json::to_string(&rows).map_err(|e| e.to_string())?
    );
    Ok(())
}

fn measure(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let check = Command::new(&ctx.smcrun)
        .args(["agent", "--check"])
        .output()
        .map_err(|e| format!("cannot run smcrun agent --check: {e}"))?;
    if !check.status.success() {
        return Ok(vec![Row::skipped(
            GROUP,
            "the agent's cost",
            String::from_utf8_lossy(&check.stderr).trim(),
        )]);
    }
    let n = connections(ctx);
    // The first SMC-R connection makes the link group (an LLC exchange, slow under TCG): a
    // short run first, measured by neither side.
    run(ctx, 50)?;
    let (mut cpu, mut wall) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut kernel_smcr = [0.0; 2];
    let mut b = AgentSide::default();
    for i in 0..ctx.vm_pairs() {
        for s in order(i, 2) {
            let agent = if s == 1 {
                Some(start_agent(ctx)?)
            } else {
                None
            };
            let pid = agent.as_ref().map(Child::id);
            let got = (|| -> Result<(), String> {
                let before = pid.map(agent_state).transpose()?;
                let a0 = pid.map(process_cpu_ms);
                let r = run(ctx, n)?;
                cpu[s].push(r.cpu_ms);
                wall[s].push(r.wall_ms);
                kernel_smcr[s] += r.kernel_smcr;
                if let (Some(pid), Some(before), Some(a0)) = (pid, before, a0) {
                    let own = process_cpu_ms(pid) - a0;
                    b.cpu_ms.push(own);
                    b.share.push(own * 100.0 / (r.cpu_ms - own));
                    let after = check_counted(pid, &before, n, r.kernel_smcr)?;
                    b.client_smcr += after.total.client.smcr - before.total.client.smcr;
                    b.server_smcr += after.total.server.smcr - before.total.server.smcr;
                    b.stale += after.overflow.stale - before.overflow.stale;
                    b.hwm_kb
                        .push(status_kb(pid, "VmHWM:").ok_or("the agent has no VmHWM")?);
                    if b.kernel.is_none() {
                        b.kernel = Some(kernel_memory(pid)?);
                    }
                }
                Ok(())
            })();
            if let Some(a) = agent {
                crate::proc::stop(a);
            }
            got?;
        }
    }
    let idle = idle_cpu_ms_per_s(ctx)?;
    let interval = "smcrun agent, attached (--interval-ms 200, its default)";
    let what = format!(
        "native AF_SMC (SHAPES_FAMILY=smc) shapes serve-n + shapes hammer (2 threads); {}; \
         the kernel counted {} SMC-R client connections in A's runs, {} in B's; the agent \
         counted {} client and {} server SMC-R connections in B's runs (none lost, none \
         unclassified, {} stale)",
        vm::guest_note(Tech::SmcR),
        kernel_smcr[0],
        kernel_smcr[1],
        b.client_smcr,
        b.server_smcr,
        b.stale
    );
    let per_conn: Vec<f64> = b.cpu_ms.iter().map(|c| c * 1e3 / f64::from(n)).collect();
    let mut rows = vec![
        Row::paired(
            GROUP,
            &format!(
                "{n} short SMC-R connections: CPU of the machine (every CPU's user + nice + \
                 system + irq + softirq + steal, /proc/stat: the probes' cost and the agent's \
                 own included)"
            ),
            "ms",
            ("no agent", &cpu[0]),
            (interval, &cpu[1]),
        )
        .goal(Goal::RatioAtMost(1.03))
        .note(&what),
        Row::paired(
            GROUP,
            &format!("{n} short SMC-R connections: wall time"),
            "ms",
            ("no agent", &wall[0]),
            (interval, &wall[1]),
        ),
        Row::single(
            GROUP,
            &format!("{n} short SMC-R connections: CPU of the agent process"),
            "ms",
            interval,
            &b.cpu_ms,
        ),
        Row::single(
            GROUP,
            "the agent process's CPU against the rest of the machine's in the same B run: a \
             lower bound of B/A − 1 that no drift between runs blurs (the probes' cost is not in it)",
            "%",
            interval,
            &b.share,
        )
        .goal(Goal::AtMost(3.0)),
        Row::single(
            GROUP,
            "the agent process's CPU per connection",
            "µs",
            interval,
            &per_conn,
        ),
        Row::single(
            GROUP,
            "the agent process's CPU per second with no connections",
            "ms",
            interval,
            &[idle],
        ),
        Row::single(
            GROUP,
            &format!("the agent's peak resident memory (VmHWM) after {n} connections"),
            "kB",
            interval,
            &b.hwm_kb,
        )
        .note(
            "bounded: 4,096 processes, 256 cgroups and 256 program names counted, the kernel's \
             maps fixed",
        ),
    ];
    if let Some((maps, progs, shapes)) = b.kernel {
        rows.push(
            Row::single(
                GROUP,
                "the agent's BPF maps in the kernel (memlock, /proc/PID/fdinfo)",
                "KiB",
                interval,
                &[maps / 1024.0],
            )
            .note(&format!(
                "fixed at load: {}; its programs {:.0} KiB more",
                shapes.join(", "),
                progs / 1024.0
            )),
        );
    }
    Ok(rows)
}
