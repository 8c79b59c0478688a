//! `bench-run [--quick] [--only NAME...]` (started by `bench/run`, which builds it first): every
//! measurement of smcrun's costs and of what SMC gives, each as interleaved A/B pairs with the
//! ratio taken pair by pair, written to `bench/results/latest.{json,md,svg}` (`quick.*` with
//! `--quick`) and, after a full run, into bench/README.md's table. Benchmarks report; they never
//! assert speed: the exit status is 1 only when a measurement could not be taken because
//! something failed (a missing tool is a skipped row, said in the report).
//!
//! Names: hooks, preload, launcher, redis, runtime, vm (the views, the echo test and the redis
//! A/B inside the VM test bed: one boot), vm-smcd (the echo test and the redis A/B with SMC-D: one
//! boot of the project's SMC-D kernel), vm-agent (what `smcrun agent` costs 20,000 short SMC-R
//! connections, and its memory: one boot).

mod agent;
mod exec;
mod hooks;
mod proc;
mod redis;
mod report;
mod runtime;
mod stats;
mod vm;

use report::{Machine, Report, Row};
use std::path::PathBuf;
use std::time::Instant;

/// Where things are, and how much to measure.
pub struct Ctx {
    /// `--quick`: tiny counts, so that CI proves the harness works.
    pub quick: bool,
    /// The repository (bench/results and tests/vm live there).
    pub repo: PathBuf,
    /// `--pairs N`: every measurement's pairs (a shorter run than the full counts' at full size).
    pub pairs_override: Option<usize>,
    /// The folder of the built binaries (target/release).
    pub bin: PathBuf,
    /// The shim measured.
    pub shim: PathBuf,
    /// The smcrun measured.
    pub smcrun: PathBuf,
    /// A scratch folder for this run (removed at the end).
    pub work: PathBuf,
}

impl Ctx {
    /// Pairs for the headline figures.
    pub fn pairs(&self) -> usize {
        if let Some(n) = self.pairs_override {
            n
        } else if self.quick {
            3
        } else {
            9
        }
    }

    /// Pairs inside the VM (TCG is slow, and its figures are not headlines).
    pub fn vm_pairs(&self) -> usize {
        if let Some(n) = self.pairs_override {
            n
        } else if self.quick {
            1
        } else {
            5
        }
    }
}

const NAMES: [&str; 8] = [
    "hooks", "preload", "launcher", "redis", "runtime", "vm", "vm-smcd", "vm-agent",
];

fn usage() -> ! {
    eprintln!(
        "usage: bench/run [--quick] [--pairs N] [--only NAME...] | --replot [FILE]\n  NAME: {}\n  --quick: tiny counts (CI); results in bench/results/quick.*\n  --pairs N: N pairs for every measurement (the counts stay)\n  --replot: the table and the chart again from FILE (default bench/results/latest.json)",
        NAMES.join(", ")
    );
    std::process::exit(2)
}

fn load() -> [f64; 3] {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let v: Vec<f64> = s
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    [0, 1, 2].map(|i| v.get(i).copied().unwrap_or(f64::NAN))
}

fn machine(load_before: [f64; 3]) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|x| x.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_kb: f64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    // SAFETY: socket(2) takes integers only; close is given the fd it returned, which nothing
    // else has seen.
    let smc = unsafe {
        let fd = libc::socket(smcrun_sys::smc::AF_SMC, libc::SOCK_STREAM, 0);
        if fd >= 0 {
            libc::close(fd);
        }
        fd >= 0
    };
    Machine {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        memory_gib: mem_kb / 1024.0 / 1024.0,
        load_before,
        load_after: load(),
        smc,
    }
}

fn source(repo: &std::path::Path) -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".into(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        })
}

/// Puts `table` between bench/README.md's markers.
fn update_readme(repo: &std::path::Path, table: &str) -> Result<(), String> {
    let path = repo.join("bench/README.md");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (begin, end) = ("<!-- bench-run:table -->", "<!-- /bench-run:table -->");
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        return Err(format!("{} has no {begin} … {end} markers", path.display()));
    };
    let new = format!("{}{begin}\n{table}{}", &text[..b], &text[e..]);
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() {
    let mut quick = false;
    let mut guest = false;
    let mut smcd = false;
    let mut agent_guest = false;
    let mut pairs_override = None;
    let mut replot: Option<Option<PathBuf>> = None;
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--guest" => guest = true,
            "--smcd" => smcd = true,
            "--agent" => agent_guest = true,
            "--pairs" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<usize>() {
                    Ok(n) if n >= 1 => pairs_override = Some(n),
                    _ => {
                        eprintln!("bench/run: --pairs takes a count of 1 or more, not \"{v}\"");
                        std::process::exit(2);
                    }
                }
            }
            "--replot" => replot = Some(args.next_if(|n| !n.starts_with("--")).map(PathBuf::from)),
            "--only" => {
                while let Some(n) = args.next_if(|n| !n.starts_with("--")) {
                    if !NAMES.contains(&n.as_str()) {
                        eprintln!(
                            "bench/run: \"{n}\" is not a measurement; expected one of {}",
                            NAMES.join(", ")
                        );
                        std::process::exit(2);
                    }
                    only.push(n);
                }
                if only.is_empty() {
                    eprintln!("bench/run: --only needs a name ({})", NAMES.join(", "));
                    std::process::exit(2);
                }
            }
            "-h" | "--help" => usage(),
            other => {
                eprintln!("bench/run: unknown argument \"{other}\"");
                usage()
            }
        }
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let bin = exe.parent().map(PathBuf::from).unwrap_or_default();
    let repo = std::env::var_os("BENCH_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
    let work = std::env::temp_dir().join(format!("smcrun-bench.{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("bench/run: cannot make {}: {e}", work.display());
        std::process::exit(1);
    }
    let ctx = Ctx {
        quick,
        pairs_override,
        repo,
        shim: bin.join("libsmcrun_shim.so"),
        smcrun: bin.join("smcrun"),
        bin,
        work,
    };
    if let Some(file) = replot {
        let file = file.unwrap_or_else(|| ctx.repo.join("bench/results/latest.json"));
        let report: Report = match std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("bench/run: {}: {e}", file.display());
                std::process::exit(1);
            }
        };
        let _ = std::fs::remove_dir_all(&ctx.work);
        std::process::exit(i32::from(!write_outputs(&ctx, &report, true)));
    }
    if guest {
        let r = if agent_guest {
            agent::guest(&ctx)
        } else {
            vm::guest(&ctx, if smcd { vm::Tech::SmcD } else { vm::Tech::SmcR })
        };
        let _ = std::fs::remove_dir_all(&ctx.work);
        if let Err(e) = r {
            eprintln!("bench-run --guest: {e}");
            std::process::exit(1);
        }
        return;
    }
    for (what, p) in [("the shim", &ctx.shim), ("smcrun", &ctx.smcrun)] {
        if !p.exists() {
            eprintln!(
                "bench/run: {what} is missing at {} (bench/run builds it)",
                p.display()
            );
            std::process::exit(1);
        }
    }
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_before = load();
    let mut rows: Vec<Row> = Vec::new();
    let mut failed = false;
    for name in NAMES {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        eprintln!("bench/run: {name}…");
        let t = Instant::now();
        let got = match name {
            "hooks" => hooks::run(&ctx),
            "preload" => exec::preload(&ctx),
            "launcher" => exec::launcher(&ctx),
            "redis" => redis::host(&ctx),
            "runtime" => runtime::run(&ctx),
            "vm" => vm::host(&ctx),
            "vm-agent" => agent::host(&ctx),
            _ => vm::host_smcd(&ctx),
        };
        match got {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("bench/run: {name} failed: {e}");
                failed = true;
                rows.push(Row::skipped(name, name, &format!("failed: {e}")));
            }
        }
        eprintln!("bench/run: {name} took {:.0} s", t.elapsed().as_secs_f64());
    }
    failed |= rows.iter().any(|r| {
        r.skipped
            .as_deref()
            .is_some_and(|s| s.starts_with("failed"))
    });
    let report = Report {
        quick,
        started_unix,
        seconds: started.elapsed().as_secs_f64(),
        source: source(&ctx.repo),
        machine: machine(load_before),
        rows,
    };
    let _ = std::fs::remove_dir_all(&ctx.work);
    failed |= !write_outputs(&ctx, &report, only.is_empty());
    if failed {
        std::process::exit(1);
    }
}

/// Writes `bench/results/STEM.{json,md,svg}` (`latest` for a whole full run, `quick` with
/// `--quick`, `partial` with `--only`, so that neither overwrites the full results), prints the
/// table, and after a whole full run puts it in bench/README.md. False when a file could not be
/// written.
fn write_outputs(ctx: &Ctx, report: &Report, whole: bool) -> bool {
    let dir = ctx.repo.join("bench/results");
    let stem = match (report.quick, whole) {
        (true, _) => "quick",
        (false, true) => "latest",
        (false, false) => "partial",
    };
    let table = report::markdown(report);
    let mut ok = true;
    let mut write = |ext: &str, text: &str| {
        let p = dir.join(format!("{stem}.{ext}"));
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&p, text)) {
            eprintln!("bench/run: cannot write {}: {e}", p.display());
            ok = false;
        } else {
            eprintln!("bench/run: wrote {}", p.display());
        }
    };
    write(
        "json",
        &serde_json::to_string_pretty(report).unwrap_or_default(),
    );
    write("md", &table);
    match report::svg(report) {
        Ok(svg) => write("svg", &svg),
        Err(e) => eprintln!("bench/run: no chart: {e}"),
    }
    if !report.quick && whole {
        if let Err(e) = update_readme(&ctx.repo, &table) {
            eprintln!("bench/run: {e}");
        }
    }
    print!("{table}");
    ok
}
