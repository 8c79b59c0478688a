//! Measurements 2 and 3: what preloading the shim costs a process that makes no socket
//! (`/bin/true`), and where it goes (page faults, the dynamic loader's relocations and time); then
//! the launcher's start-up (`smcrun true` against `true` and against a bash script that only sets
//! LD_PRELOAD and execs).

use crate::proc::{output, reap, Cost};
use crate::report::{Goal, Row};
use crate::stats::order;
use crate::Ctx;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const TRUE: &str = "/bin/true";

/// The cost of `batch` runs of `argv` with `preload` (None: none), per run.
fn batch(argv: &[&Path], preload: Option<&Path>, batch: u32) -> Result<Cost, String> {
    let mut sum = Cost::default();
    for _ in 0..batch {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..])
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(p) = preload {
            c.env("LD_PRELOAD", p);
        }
        let t0 = Instant::now();
        let child = c
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", argv[0].display()))?;
        let (cost, code) = reap(child, t0)?;
        if code != 0 {
            return Err(format!("{} exited {code}", argv[0].display()));
        }
        sum.wall_ms += cost.wall_ms;
        sum.cpu_ms += cost.cpu_ms;
        sum.minflt += cost.minflt;
    }
    let n = f64::from(batch);
    Ok(Cost {
        wall_ms: sum.wall_ms / n,
        cpu_ms: sum.cpu_ms / n,
        minflt: sum.minflt / n,
    })
}

/// The dynamic loader's own statistics for one run of /bin/true (LD_DEBUG=statistics): total
/// start-up cycles, relocations, relative relocations.
fn loader_stats(preload: Option<&Path>) -> Result<[f64; 3], String> {
    let mut c = Command::new(TRUE);
    c.env_remove("LD_PRELOAD").env("LD_DEBUG", "statistics");
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    let out = c.output().map_err(|e| format!("cannot run {TRUE}: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let field = |key: &str| {
        err.lines()
            .filter_map(|l| l.split_once(key).map(|x| x.1))
            .filter_map(|v| {
                v.split_whitespace()
                    .next()?
                    .replace(',', "")
                    .parse::<f64>()
                    .ok()
            })
            .next_back()
    };
    Ok([
        field("total startup time in dynamic loader:").ok_or("LD_DEBUG=statistics said nothing")?,
        field("final number of relocations:").unwrap_or(0.0),
        field("number of relative relocations:").unwrap_or(0.0),
    ])
}

/// A reference C preload, bench/src/c/`name`.c, built into the work folder; None without cc.
pub fn c_preload(ctx: &Ctx, name: &str) -> Option<PathBuf> {
    let out = ctx.work.join(format!("{name}.so"));
    let src = ctx.repo.join(format!("bench/src/c/{name}.c"));
    let ok = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(out)
}

/// The shim with its debug info stripped (what the README installs), None without objcopy.
fn stripped_shim(ctx: &Ctx) -> Option<PathBuf> {
    let out = ctx.work.join("libsmcrun_shim.stripped.so");
    let ok = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(&ctx.shim)
        .arg(&out)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(out)
}

/// What the shim may cost an exec beyond the C preload (issue 23): CPU time, page faults; and the
/// relative relocations of the whole process with the shim loaded.
const CPU_OVER_C_GOAL_MS: f64 = 0.02;
/// The side of bench/floor: the C preload's hook in Rust with std, built as the shim is.
const FLOOR: &str = "the same hook in Rust with std (bench/floor: a std preload's floor)";
const FAULTS_OVER_C_GOAL: f64 = 5.0;
const RELATIVE_RELOCS_GOAL: f64 = 100.0;

pub fn preload(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let pairs = ctx.pairs();
    let n = if ctx.quick { 10 } else { 200 };
    let mut sides: Vec<(String, Option<PathBuf>)> = vec![
        ("/bin/true".into(), None),
        ("shim".into(), Some(ctx.shim.clone())),
    ];
    if let Some(p) = stripped_shim(ctx) {
        sides.push(("shim, debug info stripped".into(), Some(p)));
    }
    if let Some(p) = c_preload(ctx, "socket_preload") {
        sides.push(("a C preload of socket() alone".into(), Some(p)));
    }
    let floor = ctx.bin.join("libsmcrun_floor_preload.so");
    if floor.exists() {
        sides.push((FLOOR.into(), Some(floor)));
    }
    let mut wall = vec![Vec::new(); sides.len()];
    let mut cpu = vec![Vec::new(); sides.len()];
    let mut flt = vec![Vec::new(); sides.len()];
    let mut ld = vec![Vec::new(); sides.len()];
    for i in 0..pairs {
        for s in order(i, sides.len()) {
            let c = batch(&[Path::new(TRUE)], sides[s].1.as_deref(), n)?;
            wall[s].push(c.wall_ms);
            cpu[s].push(c.cpu_ms);
            flt[s].push(c.minflt);
            ld[s].push(loader_stats(sides[s].1.as_deref())?);
        }
    }
    let mut rows = Vec::new();
    let a = |v: &[Vec<f64>]| (sides[0].0.clone(), v[0].clone());
    for s in 1..sides.len() {
        let b = |v: &[Vec<f64>]| (sides[s].0.clone(), v[s].clone());
        let ((al, av), (bl, bv)) = (a(&wall), b(&wall));
        rows.push(
            Row::paired(
                "preload",
                "wall time per exec",
                "ms",
                (&al, &av),
                (&bl, &bv),
            )
            .note(&format!("{n} execs per side and pair")),
        );
        let ((al, av), (bl, bv)) = (a(&cpu), b(&cpu));
        rows.push(Row::paired(
            "preload",
            "CPU time per exec",
            "ms",
            (&al, &av),
            (&bl, &bv),
        ));
        let ((al, av), (bl, bv)) = (a(&flt), b(&flt));
        rows.push(Row::paired(
            "preload",
            "page faults per exec",
            "faults",
            (&al, &av),
            (&bl, &bv),
        ));
        for (k, what, unit) in [
            (
                0,
                "dynamic loader's start-up time (LD_DEBUG=statistics)",
                "cycles",
            ),
            (1, "relocations (LD_DEBUG=statistics)", "relocs"),
            (2, "relative relocations (LD_DEBUG=statistics)", "relocs"),
        ] {
            let col = |s: usize| ld[s].iter().map(|x| x[k]).collect::<Vec<f64>>();
            let mut r = Row::paired(
                "preload",
                what,
                unit,
                (sides[0].0.as_str(), &col(0)),
                (sides[s].0.as_str(), &col(s)),
            );
            if k > 0 {
                r = r.deterministic();
            }
            if k == 2 && s == 1 {
                r = r.goal(Goal::AtMost(RELATIVE_RELOCS_GOAL));
            }
            rows.push(r);
        }
    }
    // issue 23's goals: the shim against the C preload of socket() alone, in the same run
    // and std's own share: the floor against the C preload, the shim against the floor
    let c = sides.iter().position(|s| s.0.starts_with("a C preload"));
    let f = sides.iter().position(|s| s.0 == FLOOR);
    for (what, unit, v, goal) in [
        ("CPU time per exec", "ms", &cpu, CPU_OVER_C_GOAL_MS),
        ("page faults per exec", "faults", &flt, FAULTS_OVER_C_GOAL),
    ] {
        let pair = |a: usize, b: usize| {
            Row::paired(
                "preload",
                what,
                unit,
                (sides[a].0.as_str(), &v[a]),
                (sides[b].0.as_str(), &v[b]),
            )
        };
        if let Some(c) = c {
            rows.push(pair(c, 1).goal(Goal::AddedAtMost(goal)));
        }
        if let (Some(c), Some(f)) = (c, f) {
            rows.push(pair(c, f));
        }
        if let Some(f) = f {
            rows.push(pair(f, 1));
        }
    }
    Ok(rows)
}

/// What `smcrun true` may take beyond exec-floor's wall time (issue 23).
const LAUNCHER_OVER_FLOOR_GOAL_MS: f64 = 0.2;

pub fn launcher(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let pairs = ctx.pairs();
    let n = if ctx.quick { 10 } else { 200 };
    let script = ctx.work.join("smc_run-like");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n# What smc_run does: set LD_PRELOAD, exec the program.\nexport LD_PRELOAD={}\nexec \"$@\"\n",
            ctx.shim.display()
        ),
    )
    .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let smcrun = ctx.smcrun.clone();
    let t = PathBuf::from(TRUE);
    let floor = ctx.bin.join("exec-floor");
    let sides: [(&str, Vec<&Path>); 4] = [
        ("true", vec![t.as_path()]),
        (
            "bash script: LD_PRELOAD=shim exec",
            vec![script.as_path(), t.as_path()],
        ),
        ("smcrun true", vec![smcrun.as_path(), t.as_path()]),
        (
            "a Rust program that only sets LD_PRELOAD and execs (exec-floor)",
            vec![floor.as_path(), ctx.shim.as_path(), t.as_path()],
        ),
    ];
    // smcrun must find the shim it is built with.
    std::env::set_var("SMCRUN_SHIM", &ctx.shim);
    let mut wall = vec![Vec::new(); sides.len()];
    let mut cpu = vec![Vec::new(); sides.len()];
    for i in 0..pairs {
        for s in order(i, sides.len()) {
            let c = batch(&sides[s].1, None, n)?;
            wall[s].push(c.wall_ms);
            cpu[s].push(c.cpu_ms);
        }
    }
    let _ = output(Command::new(&ctx.smcrun).arg("--version"))?;
    let p = |s: usize, v: &[Vec<f64>]| (sides[s].0, v[s].clone());
    let mut rows = Vec::new();
    for (what, v) in [("wall time per run", &wall), ("CPU time per run", &cpu)] {
        // (A, B) pairs of sides: smcrun against `true` (the goal), then the bash way, the floor
        // of a launcher in Rust, and smcrun against each of those.
        for (k, (a, b)) in [(0, 2), (0, 1), (1, 2), (0, 3), (3, 2)]
            .into_iter()
            .enumerate()
        {
            let (al, av) = p(a, v);
            let (bl, bv) = p(b, v);
            let mut r = Row::paired("launcher", what, "ms", (al, &av), (bl, &bv));
            if k == 0 {
                r = r.note(&format!("{n} runs per side and pair"));
            }
            // issue 23: smcrun within 0.2 ms of a launcher that only sets LD_PRELOAD and execs
            if k == 4 && what.starts_with("wall") {
                r = r.goal(Goal::AddedAtMost(LAUNCHER_OVER_FLOOR_GOAL_MS));
            }
            rows.push(r);
        }
    }
    Ok(rows)
}
