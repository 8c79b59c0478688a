//! Measurement 4, redis-benchmark A/B: a fresh redis-server and redis-benchmark, both plain (A) or both
//! under the same smcrun command (B), interleaved; requests per second and p50/p99 latency from
//! redis-benchmark's CSV, ratio pair by pair. The host runs it on the fallback path (the shim,
//! and the shim with a policy that accelerates only the Redis port); the VM over SMC-R (the
//! preload, and BPF mode).

use crate::hooks::which;
use crate::proc::{free_port, output, stop, wait_listening};
use crate::report::{Goal, Row};
use crate::stats::order;
use std::collections::HashMap;
use std::process::{Command, Stdio};

/// One side: its label and the command line put in front of redis-server and redis-benchmark
/// (empty: plain).
pub struct Side {
    /// How the report names it.
    pub label: String,
    /// The wrapper, e.g. `smcrun --`.
    pub wrap: Vec<String>,
}

fn cmd(wrap: &[String], prog: &str) -> Command {
    match wrap.split_first() {
        None => Command::new(prog),
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(prog);
            c
        }
    }
}

/// rps, p50 and p99 (ms) by test from redis-benchmark's CSV.
fn parse_csv(csv: &str) -> HashMap<String, [f64; 3]> {
    let mut lines = csv.lines();
    let unq = |s: &str| s.trim().trim_matches('"').to_string();
    let header: Vec<String> = lines.next().unwrap_or("").split(',').map(unq).collect();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (rps, p50, p99) = (col("rps"), col("p50_latency_ms"), col("p99_latency_ms"));
    lines
        .filter_map(|l| {
            let f: Vec<String> = l.split(',').map(unq).collect();
            let get = |c: Option<usize>| c.and_then(|c| f.get(c)?.parse().ok()).unwrap_or(f64::NAN);
            Some((f.first()?.clone(), [get(rps), get(p50), get(p99)]))
        })
        .collect()
}

/// One run on `side`: a fresh server, one benchmark.
fn one(
    side: &Side,
    port: u16,
    n: u32,
    clients: u32,
    pipeline: u32,
) -> Result<HashMap<String, [f64; 3]>, String> {
    let server = cmd(&side.wrap, "redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    let result = wait_listening(port, 60).and_then(|()| {
        output(cmd(&side.wrap, "redis-benchmark").args([
            "-p",
            &port.to_string(),
            "-t",
            "set,get",
            "-n",
            &n.to_string(),
            "-c",
            &clients.to_string(),
            "-P",
            &pipeline.to_string(),
            "--csv",
        ]))
    });
    stop(server);
    let got = parse_csv(&result?);
    if got.is_empty() {
        return Err("redis-benchmark printed no CSV results".into());
    }
    Ok(got)
}

/// How an A/B runs.
pub struct Plan<'a> {
    /// The report's group for its rows.
    pub group: &'a str,
    /// The port redis-server listens on.
    pub port: u16,
    /// Interleaved pairs.
    pub pairs: usize,
    /// Requests per test (`-n`).
    pub requests: u32,
    /// Pipeline depths (`-P`), each its own A/B.
    pub pipelines: &'a [u32],
    /// The goal for requests per second, if any.
    pub goal: Option<Goal>,
    /// The note on the requests-per-second rows.
    pub note: &'a str,
}

/// The A/B over `sides` (the first is A), as `plan` says.
pub fn ab(sides: &[Side], plan: &Plan) -> Result<Vec<Row>, String> {
    let Plan {
        group,
        port,
        pairs,
        requests: n,
        pipelines,
        goal,
        note,
    } = *plan;
    if !which("redis-server") || !which("redis-benchmark") {
        return Ok(vec![Row::skipped(
            group,
            "redis-benchmark",
            "redis-server / redis-benchmark are not installed",
        )]);
    }
    let mut rows = Vec::new();
    for &p in pipelines {
        // values[side][test] = [rps, p50, p99] per pair
        let mut values: Vec<HashMap<String, Vec<[f64; 3]>>> = vec![HashMap::new(); sides.len()];
        for i in 0..pairs {
            for s in order(i, sides.len()) {
                for (test, v) in one(&sides[s], port, n, 50, p)? {
                    values[s].entry(test).or_default().push(v);
                }
            }
        }
        for test in ["SET", "GET"] {
            for (k, metric, unit) in [
                (0, "requests/s", "rps"),
                (1, "p50 latency", "ms"),
                (2, "p99 latency", "ms"),
            ] {
                let col = |s: usize| -> Vec<f64> {
                    values[s]
                        .get(test)
                        .map_or(Vec::new(), |v| v.iter().map(|x| x[k]).collect())
                };
                for s in 1..sides.len() {
                    let mut r = Row::paired(
                        group,
                        &format!("{test} -P {p} {metric}"),
                        unit,
                        (&sides[0].label, &col(0)),
                        (&sides[s].label, &col(s)),
                    );
                    if k == 0 {
                        if let Some(g) = goal {
                            r = r.goal(g);
                        }
                        r = r.note(note);
                    }
                    rows.push(r);
                }
            }
        }
    }
    Ok(rows)
}

/// The host's A/B: plain, under smcrun, under smcrun with a policy that accelerates only Redis.
pub fn host(ctx: &crate::Ctx) -> Result<Vec<Row>, String> {
    let smcrun = ctx.smcrun.display().to_string();
    let port = free_port();
    let sides = [
        Side {
            label: "plain".into(),
            wrap: vec![],
        },
        Side {
            label: "smcrun".into(),
            wrap: vec![smcrun.clone(), "--".into()],
        },
        Side {
            label: "smcrun, policy: Redis port only".into(),
            wrap: vec![
                smcrun,
                "--policy".into(),
                format!("smc port {port}; tcp"),
                "--".into(),
            ],
        },
    ];
    let n = if ctx.quick { 2_000 } else { 200_000 };
    std::env::set_var("SMCRUN_SHIM", &ctx.shim);
    ab(
        &sides,
        &Plan {
            group: "redis",
            port,
            pairs: ctx.pairs(),
            requests: n,
            pipelines: &[1, 16],
            goal: Some(Goal::RatioAtLeast(0.99)),
            note: &format!("-t set,get -n {n} -c 50"),
        },
    )
}
