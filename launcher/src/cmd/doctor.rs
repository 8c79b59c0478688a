//! `smcrun doctor [--json] [-- PROGRAM [ARGS]]`: a table of checks (kernel, SMC, RDMA, SMC-Rv2,
//! PNET, sysctls, IPv6/Java, memlock, the live counters; with a program, whether LD_PRELOAD
//! reaches it), each pass / warn / fail / skip with one line of advice. The checks are
//! `smcrun_views::doctor`'s; this file adds the program's and prints.
//!
//! BPF mode is optional: its prerequisites are checked (and decide the exit status) with `--bpf`
//! only; without it one `bpf` row says how to check them.
//!
//! Exit status: 0 all passed, 1 warnings, 3 failures (2 is bad usage, as for every command).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::Args;
use smcrun_views::doctor::{self, Check, Host, Status};
use smcrun_views::doctor::json::DoctorView;

use crate::cmd::format;
use crate::run::preload;
use crate::status::{self, Outcome};

/// `smcrun doctor` arguments.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print JSON: {"checks": [{id, status, detail, advice}], "exit_code", counts}.
    #[arg(short = 'j', long)]
    json: bool,
    /// Check BPF mode's prerequisites too (`smcrun --bpf`, `smcrun attach`): one `bpf:ID` row
    /// each, a missing one a failure. Without it BPF mode, which the preload does not need, is
    /// not checked and cannot decide the exit status.
    #[arg(long)]
    bpf: bool,
    /// A program to check: can LD_PRELOAD reach it (static, Go, setuid/setgid, file
    /// capabilities, a script that runs one of those)?
    #[arg(last = true, value_name = "PROGRAM [ARGS]")]
    program: Vec<OsString>,
}

/// How much of a script is read to find the programs it runs.
const SCRIPT_READ_LIMIT: u64 = 64 * 1024;

/// The first [`SCRIPT_READ_LIMIT`] bytes of `path` as text (lossy), when it is a readable regular
/// file (opened without blocking: a FIFO named as the program cannot hang doctor).
fn script_text(path: &Path) -> Option<String> {
    use std::io::Read;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let (f, _) = smcrun_sys::file::open_regular_at(None, &c, true).ok()?;
    let mut bytes = Vec::new();
    f.take(SCRIPT_READ_LIMIT).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The programs a script runs that LD_PRELOAD cannot reach, with the reason for each: its `#!`
/// interpreter (which the kernel runs, and which must be a program the preload reaches), the words
/// after `exec`, and absolute paths of executables.
fn script_problems(text: &str) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let interpreter = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .and_then(|l| l.split_whitespace().next());
    if let Some(i) = interpreter {
        let p = PathBuf::from(i);
        match preload::reach_problem(&p) {
            Some(why) => out.push((p, why)),
            None if !p.exists() => out.push((p, "does not exist".into())),
            None => {}
        }
    }
    for line in text.lines().skip(1) {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || ";|&()`'\"".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        let mut candidates: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| w.starts_with('/'))
            .collect();
        if let Some(i) = words.iter().position(|w| *w == "exec") {
            if let Some(w) = words[i + 1..].iter().find(|w| !w.starts_with('-')) {
                candidates.push(w);
            }
        }
        for c in candidates {
            let Ok(p) = preload::find_program(std::ffi::OsStr::new(c)) else {
                continue;
            };
            if out.iter().any(|(q, _)| *q == p) {
                continue;
            }
            if let Some(why) = preload::reach_problem(&p) {
                out.push((p, why));
            }
        }
    }
    out
}

/// The program's check: whether LD_PRELOAD reaches it.
fn program_check(cmd: &[OsString], release: &str) -> Vec<Check> {
    let name = &cmd[0];
    let shown = name.to_string_lossy();
    let path = match preload::find_program(name) {
        Ok(p) => p,
        Err(preload::NotFound::Missing) => {
            return vec![Check::new(
                "program",
                Status::Fail,
                format!("{shown}: command not found"),
                "give the program's path, or put it on PATH",
            )]
        }
        Err(preload::NotFound::NotExecutable(p)) => {
            return vec![Check::new(
                "program",
                Status::Fail,
                format!("{}: not an executable file", p.display()),
                "give the path of an executable program",
            )]
        }
    };
    let mut out = Vec::new();
    let over_tcp = "smcrun would run it over TCP, never SMC; BPF mode (the kernel's socket() hook) reaches such programs";
    if let Some(why) = preload::reach_problem(&path) {
        out.push(Check::new(
            "program",
            Status::Fail,
            format!("{} {why}", path.display()),
            over_tcp,
        ));
    } else {
        let script = script_text(&path).filter(|t| t.starts_with("#!"));
        let is_script = script.is_some();
        let hidden = script.as_deref().map(script_problems).unwrap_or_default();
        if hidden.is_empty() {
            out.push(Check::new(
                "program",
                Status::Pass,
                format!(
                    "{} {}: LD_PRELOAD reaches its sockets",
                    path.display(),
                    if is_script {
                        "is a script whose interpreter is preloaded"
                    } else {
                        "is dynamically linked"
                    }
                ),
                "",
            ));
        } else {
            let list = hidden
                .iter()
                .map(|(p, why)| format!("{} {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; ");
            out.push(Check::new(
                "program",
                Status::Fail,
                format!("{} is a script that runs {list}", path.display()),
                over_tcp,
            ));
        }
    }
    let base = path
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    if base == b"java" {
        let v4 = cmd
            .iter()
            .any(|a| a.as_bytes() == b"-Djava.net.preferIPv4Stack=true");
        let new_kernel = doctor::version(release).is_some_and(|v| v >= (6, 14));
        out.push(if v4 || new_kernel {
            Check::new("java", Status::Pass, "Java's sockets can use SMC here", "")
        } else {
            Check::new(
                "java",
                Status::Warn,
                "Java makes AF_INET6 sockets, and talks to IPv4 peers through v4-mapped addresses, which fall back to TCP before Linux 6.14",
                "add -Djava.net.preferIPv4Stack=true to the java command line",
            )
        });
    }
    out
}

/// BPF mode's prerequisites (`smcrun_bpf::prereq`), one row each, `bpf:ID`: asked for with
/// `--bpf`, so a missing one fails. `bpf:smc` is the host's smc row again when the kernel has no
/// SMC at all: then it only points there.
fn bpf_checks(host_has_smc: bool) -> Vec<Check> {
    use smcrun_bpf::prereq::{Needed, State};
    smcrun_bpf::prereq::check()
        .checks
        .into_iter()
        .map(|c| {
            let id = format!("bpf:{}", c.id);
            if c.id == "smc" && !host_has_smc {
                return Check::new(id, Status::Skip, "needs smc", "");
            }
            let scope = match c.needed {
                Needed::Always => "",
                Needed::Attach => " (for `smcrun attach`)",
                Needed::Cgroup => " (for `smcrun attach --cgroup`)",
            };
            let (status, advice) = match c.state {
                State::Ok => (Status::Pass, String::new()),
                State::Missing => (
                    Status::Fail,
                    format!(
                        "BPF mode{scope} needs it: {}",
                        c.fix.as_deref().unwrap_or("see the manual, BPF mode")
                    ),
                ),
                State::Unknown => (Status::Skip, String::new()),
            };
            Check::new(id, status, format!("{}: {}", c.what, c.detail), advice)
        })
        .collect()
}

/// The one row that stands for BPF mode's checks without `--bpf`.
fn bpf_not_checked() -> Check {
    Check::new(
        "bpf",
        Status::Skip,
        "BPF mode (optional: the preload does not need it) not checked",
        "`smcrun doctor --bpf` checks its prerequisites",
    )
}

fn text(v: &DoctorView) -> Vec<String> {
    let mut out = Vec::new();
    let width = v.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in v.checks {
        let status = match c.status {
            Status::Pass => "pass",
            Status::Skip => "skip",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        // Details name paths and programs the user or another user chose.
        out.push(format!(
            "{status}  {:<width$}  {}",
            c.id,
            format::safe(&c.detail)
        ));
        if !c.advice.is_empty() {
            out.push(format!(
                "      {:<width$}  -> {}",
                "",
                format::safe(&c.advice)
            ));
        }
    }
    out.push(format!(
        "doctor: {} passed, {} warnings, {} failed, {} skipped (exit {})",
        v.passed, v.warnings, v.failed, v.skipped, v.exit_code
    ));
    out
}

/// Run `smcrun doctor`.
pub fn run(a: &DoctorArgs) -> Outcome {
    let host = Host::read();
    let mut checks = doctor::checks(&host);
    if a.bpf {
        checks.extend(bpf_checks(matches!(host.af_smc, doctor::Probe::Works)));
    } else {
        checks.push(bpf_not_checked());
    }
    if !a.program.is_empty() {
        checks.extend(program_check(&a.program, &host.release));
    }
    let exit = status::doctor(doctor::verdict(&checks));
    let view = DoctorView::new(&checks, exit.code());
    if a.json {
        format::print_json(&view)?;
    } else {
        format::print_lines(text(&view))?;
    }
    Ok(exit.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("smcrun-doctor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The rows this command adds are in the manual's list of rows (`doctor::ROWS`).
    #[test]
    fn the_rows_added_here_are_in_the_list_of_rows() {
        let mut rows = vec![bpf_not_checked()];
        rows.extend(program_check(&["java".into()], "6.12.0"));
        rows.extend(program_check(&["sh".into()], "6.12.0"));
        rows.extend(program_check(&["smcrun-no-such-program".into()], "6.12.0"));
        for c in &rows {
            assert!(
                doctor::ROWS.iter().any(|r| r.0 == c.id),
                "{} is not in smcrun_views::doctor::ROWS",
                c.id
            );
        }
        for c in smcrun_bpf::prereq::check_before_attach().checks {
            assert!(!doctor::ROWS.iter().any(|r| r.0 == format!("bpf:{}", c.id)));
        }
    }

    #[test]
    fn a_dynamic_program_passes_and_a_missing_one_fails() {
        let c = program_check(&["sh".into()], "6.12.0");
        assert_eq!(c[0].status, Status::Pass, "{c:?}");
        let c = program_check(&["smcrun-no-such-program".into()], "6.12.0");
        assert_eq!(c[0].status, Status::Fail);
        assert!(c[0].detail.contains("command not found"));
    }

    #[test]
    fn a_script_that_execs_a_static_program_is_named() {
        let d = tmp("script");
        let s = d.join("start.sh");
        // busybox-static is what the tests install; any static binary would do.
        let static_bin = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists() && preload::reach_problem(Path::new(p)).is_some());
        let Some(bin) = static_bin else {
            eprintln!("no static busybox here; skipped");
            return;
        };
        std::fs::write(
            &s,
            format!("#!/bin/sh\n# start the server\nexport X=1\nexec {bin} httpd -f \"$@\"\n"),
        )
        .unwrap();
        std::fs::set_permissions(&s, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let c = program_check(&[s.clone().into()], "6.12.0");
        assert_eq!(c[0].status, Status::Fail, "{c:?}");
        assert!(
            c[0].detail
                .contains(&format!("is a script that runs {bin}")),
            "{c:?}"
        );
        assert!(c[0].detail.contains("statically linked"), "{c:?}");
        std::fs::write(&s, "#!/bin/sh\nexec sh -c true\n").unwrap();
        assert_eq!(program_check(&[s.into()], "6.12.0")[0].status, Status::Pass);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_script_whose_interpreter_is_a_fifo_or_missing_fails_without_hanging() {
        let d = tmp("fifo-interpreter");
        let fifo = d.join("interp");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let s = d.join("start.sh");
        std::fs::write(&s, format!("#!{} -e\necho hi\n", fifo.display())).unwrap();
        std::fs::set_permissions(&s, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let c = program_check(&[s.clone().into()], "6.12.0");
        assert_eq!(c[0].status, Status::Fail, "{c:?}");
        assert_eq!(
            c[0].detail,
            format!(
                "{} is a script that runs {} cannot be run: it is a FIFO, not a regular file",
                s.display(),
                fifo.display()
            )
        );
        std::fs::write(&s, "#!/no/such/shell\necho hi\n").unwrap();
        let c = program_check(&[s.clone().into()], "6.12.0");
        assert_eq!(c[0].status, Status::Fail, "{c:?}");
        assert!(
            c[0].detail.ends_with("runs /no/such/shell does not exist"),
            "{c:?}"
        );
        // The program itself a FIFO (say swapped in after the PATH search): never opened blocking.
        assert!(preload::reach_problem(&fifo)
            .is_some_and(|w| w.contains("it is a FIFO, not a regular file")));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn java_before_6_14_needs_ipv4_stack() {
        let d = tmp("java");
        let j = d.join("java");
        std::fs::copy("/bin/sh", &j).unwrap();
        let c = program_check(&[j.clone().into(), "-jar".into(), "x.jar".into()], "6.12.0");
        let java = c.iter().find(|c| c.id == "java").unwrap();
        assert_eq!(java.status, Status::Warn);
        assert!(java.advice.contains("-Djava.net.preferIPv4Stack=true"));
        let c = program_check(
            &[j.clone().into(), "-Djava.net.preferIPv4Stack=true".into()],
            "6.12.0",
        );
        assert_eq!(
            c.iter().find(|c| c.id == "java").unwrap().status,
            Status::Pass
        );
        let c = program_check(&[j.into()], "6.14.2");
        assert_eq!(
            c.iter().find(|c| c.id == "java").unwrap().status,
            Status::Pass
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_table_has_one_advice_line_per_check() {
        let checks = vec![
            Check::new(
                "smc",
                Status::Fail,
                "this kernel has no SMC",
                "use another kernel",
            ),
            Check::new("kernel", Status::Pass, "Linux 6.12", ""),
        ];
        let exit = status::doctor(doctor::verdict(&checks));
        let t = text(&DoctorView::new(&checks, exit.code()));
        assert_eq!(t[0], "FAIL  smc     this kernel has no SMC");
        assert_eq!(t[1], "              -> use another kernel");
        assert_eq!(t[2], "pass  kernel  Linux 6.12");
        assert_eq!(
            t[3],
            "doctor: 1 passed, 0 warnings, 1 failed, 0 skipped (exit 3)"
        );
    }
}
