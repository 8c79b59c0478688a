//! Measurement 1, hook cost per call: `hook-loop` without the shim, under the shim, under the shim
//! with a 10-rule policy, under the cheapest C preload that passes the calls through, and without a
//! preload in a process with one more (idle) thread (the two floors), the thread sharing the
//! program's descriptor table or not, interleaved; ns per call and the ratio to no preload; then
//! instructions per call from callgrind (deterministic, whatever the machine's load).

use crate::proc::output;
use crate::report::{Goal, Row};
use crate::stats::order;
use crate::Ctx;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// A policy of 10 rules none of which matches a connection to 127.0.0.1 before the default: the
/// longest walk a connect() can take through it.
pub const POLICY_10: &str = "tcp remote 10.0.0.0/8; tcp remote 172.16.0.0/12; \
    tcp remote 192.168.0.0/16; tcp remote fd00::/8; tcp port 22; tcp port 53; \
    tcp program ssh*; smc port 6379; smc port 3306; smc";

/// The operations, their names in the report, and the goal issue 23 sets for the shim against no
/// preload (a 10-rule policy may add at most [`POLICY_GOAL_NS`] to the shim's).
const OPS: [(&str, &str, Option<Goal>); 5] = [
    (
        "tcp_socket_close",
        "socket()+close(), TCP",
        Some(Goal::AddedAtMost(100.0)),
    ),
    (
        "udp_socket_close",
        "socket()+close(), UDP (pass-through)",
        Some(Goal::AddedAtMost(30.0)),
    ),
    (
        "tcp_connect_close",
        "socket()+connect()+close() to a local listener",
        Some(Goal::RatioAtMost(1.03)),
    ),
    (
        "getsockopt_domain",
        "getsockopt(SO_DOMAIN) (pass-through)",
        Some(Goal::AddedAtMost(30.0)),
    ),
    (
        "bind",
        "bind() failing with EBADF (pass-through)",
        Some(Goal::AddedAtMost(30.0)),
    ),
];

/// The sides measured, by index: 0 no preload, 1 the shim, 2 the shim with [`POLICY_10`], 3
/// (when a C compiler is there) the cheapest hook a preload can have,
/// [bench/src/c/passthrough_preload.c](../../src/c/passthrough_preload.c): what any preload adds
/// to a call on this machine, the floor of the shim's pass-through hooks; and 4, no preload in a
/// process with one more thread that only sleeps: the shim's runtime starts its sidecar thread at
/// the first socket, and what a second thread costs each call of a single-threaded program is
/// the kernel's, not a hook's; 5, the same with a thread that first gave itself a descriptor table
/// of its own: the kernel's cost is that of a shared descriptor table (bench/README.md, "Where the
/// pass-through hooks' time goes").
const SIDES: [&str; 6] = [
    "no preload",
    "shim",
    "shim + 10-rule policy",
    "C pass-through preload",
    "no preload, one idle thread",
    "no preload, one idle thread with its own descriptor table",
];
const C_SIDE: usize = 3;
const THREAD_SIDE: usize = 4;
const PRIVATE_SIDE: usize = 5;

/// What the 10-rule policy may add to a call, against the shim without one (issue 23).
const POLICY_GOAL_NS: f64 = 30.0;

/// `hook-loop` on `side` (an index of [`SIDES`]); `c` is the C pass-through preload.
fn command(ctx: &Ctx, side: usize, c: Option<&Path>) -> Command {
    let mut cmd = Command::new(ctx.bin.join("hook-loop"));
    cmd.env_remove("LD_PRELOAD").env_remove("SMCRUN_POLICY");
    match (side, c) {
        (0, _) => {}
        (THREAD_SIDE, _) => {
            cmd.arg("--idle-thread");
        }
        (PRIVATE_SIDE, _) => {
            cmd.arg("--idle-thread-private");
        }
        (C_SIDE, Some(c)) => {
            cmd.env("LD_PRELOAD", c);
        }
        _ => {
            cmd.env("LD_PRELOAD", &ctx.shim);
        }
    }
    if side == 2 {
        cmd.env("SMCRUN_POLICY", POLICY_10);
    }
    cmd
}

/// Runs `hook-loop CALLS OPS` on `side`; ns per call by operation.
fn one(
    ctx: &Ctx,
    side: usize,
    c: Option<&Path>,
    calls: u32,
    ops: &[&str],
) -> Result<HashMap<String, f64>, String> {
    let out = output(command(ctx, side, c).arg(calls.to_string()).args(ops))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (op, ns) = l.split_once(' ')?;
            Some((op.to_string(), ns.parse().ok()?))
        })
        .collect())
}

/// Instructions callgrind counts for `hook-loop CALLS OP` on `side`, inside its timed loops only
/// (`time_op`): the calling thread's hot path, not start-up, not the sidecar thread, not the
/// exit handler's final report.
fn instructions(
    ctx: &Ctx,
    side: usize,
    c_preload: Option<&Path>,
    calls: u32,
    op: &str,
) -> Result<f64, String> {
    let c = command(ctx, side, c_preload);
    let prog = c.get_program().to_owned();
    let mut v = crate::proc::callgrind_command("*time_op");
    v.arg(prog).arg(calls.to_string()).arg(op);
    for (k, val) in c.get_envs() {
        match val {
            Some(val) => v.env(k, val),
            None => v.env_remove(k),
        };
    }
    crate::proc::callgrind(op, v)
}

pub fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let pairs = ctx.pairs();
    let calls = if ctx.quick { 2_000 } else { 200_000 };
    let connects = if ctx.quick { 500 } else { 20_000 };
    let cheap: Vec<&str> = OPS
        .iter()
        .map(|o| o.0)
        .filter(|o| *o != "tcp_connect_close")
        .collect();
    let c = crate::exec::c_preload(ctx, "passthrough_preload");
    let c = c.as_deref();
    let sides: Vec<usize> = (0..SIDES.len())
        .filter(|&s| s != C_SIDE || c.is_some())
        .collect();
    let mut values: HashMap<&str, [Vec<f64>; SIDES.len()]> = HashMap::new();
    for i in 0..pairs {
        for side in order(i, sides.len()).into_iter().map(|k| sides[k]) {
            let mut got = one(ctx, side, c, calls, &cheap)?;
            got.extend(one(ctx, side, c, connects, &["tcp_connect_close"])?);
            for (op, ..) in OPS {
                let v = got
                    .get(op)
                    .copied()
                    .ok_or(format!("hook-loop printed no {op}"))?;
                values.entry(op).or_default()[side].push(v);
            }
        }
    }
    let mut rows = Vec::new();
    for (op, name, goal) in OPS {
        let v = &values[op];
        // the shim against no preload (the goal), the policy's run against no preload, and the
        // policy's share: the shim with it against the shim without; then the floors (the C
        // pass-through preload, with a C compiler, and a second thread against no preload) and
        // the shim against each; last, a second thread that shares no descriptor table
        let pairs_shown = [
            (0, 1),
            (0, 2),
            (1, 2),
            (0, C_SIDE),
            (C_SIDE, 1),
            (0, THREAD_SIDE),
            (THREAD_SIDE, 1),
            (0, PRIVATE_SIDE),
        ]
        .into_iter()
        .filter(|(a, b)| sides.contains(a) && sides.contains(b));
        for (a, b) in pairs_shown {
            let mut r = Row::paired("hooks", name, "ns", (SIDES[a], &v[a]), (SIDES[b], &v[b]));
            match ((a, b), goal) {
                ((0, 1), Some(g)) => r = r.goal(g),
                ((1, 2), _) if op != "tcp_connect_close" => {
                    r = r.goal(Goal::AddedAtMost(POLICY_GOAL_NS))
                }
                _ => {}
            }
            rows.push(r);
        }
    }
    // Instructions per call: the difference between two call counts, so that start-up and the
    // warm-up's share cancel out (hook-loop runs a tenth of the calls again as warm-up).
    if which("valgrind") {
        let (n1, n2) = if ctx.quick {
            (200u32, 600u32)
        } else {
            (2_000, 6_000)
        };
        for (op, name, _) in OPS {
            // the idle thread's sides run the same instructions as no preload's
            let counted: Vec<usize> = sides
                .iter()
                .copied()
                .filter(|&s| s != THREAD_SIDE && s != PRIVATE_SIDE)
                .collect();
            let mut per = [0.0; SIDES.len()];
            for &side in &counted {
                let a = instructions(ctx, side, c, n1, op)?;
                let b = instructions(ctx, side, c, n2, op)?;
                per[side] = (b - a) / (f64::from(n2 - n1) * 1.1);
            }
            for side in counted.into_iter().filter(|&s| s == 1 || s == C_SIDE) {
                rows.push(
                    Row::paired(
                        "hooks",
                        &format!("{name}, instructions"),
                        "instr",
                        (SIDES[0], &[per[0]]),
                        (SIDES[side], &[per[side]]),
                    )
                    .note("callgrind, the calling thread")
                    .deterministic(),
                );
            }
        }
    } else {
        rows.push(Row::skipped(
            "hooks",
            "instructions per call",
            "valgrind is not installed",
        ));
    }
    Ok(rows)
}

/// Whether `prog` is on PATH.
pub fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}
