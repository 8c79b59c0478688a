//! `smcrun doctor [--json] [--bpf] [-- PROGRAM [ARGS]]`: a table of checks (kernel, SMC, RDMA,
//! SMC-Rv2, PNET, sysctls, IPv6/Java, memlock, the live counters; with a program, whether
//! LD_PRELOAD reaches it), each pass / warn / fail / skip with one line of advice. The checks,
//! their JSON and their text are `smcrun_views::doctor`'s; this file reads the facts, adds BPF
//! mode's and the program's rows, and prints.
//!
//! BPF mode is optional: its prerequisites are checked (and decide the exit status) with `--bpf`
//! only; without it one `bpf` row says how to check them.
//!
//! Exit status: 0 all passed, 1 warnings, 3 failures (2 is bad usage, as for every command).

use std::ffi::OsString;

use clap::Args;
use smcrun_views::doctor::json::DoctorView;
use smcrun_views::doctor::{self, bpf_prereq, reach, Check, Host};

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

/// The rows of program `cmd` on a kernel of `release`: what LD_PRELOAD makes of it, judged.
fn program_checks(cmd: &[OsString], release: &str) -> Vec<Check> {
    reach::checks(cmd, &preload::reach(&cmd[0]), release)
}

/// Run `smcrun doctor`.
pub fn run(a: &DoctorArgs) -> Outcome {
    let host = Host::read();
    let mut checks = doctor::checks(&host);
    if a.bpf {
        checks.extend(bpf_prereq::checks(&smcrun_bpf::prereq::check(), &host));
    } else {
        checks.push(bpf_prereq::not_checked());
    }
    if !a.program.is_empty() {
        checks.extend(program_checks(&a.program, &host.release));
    }
    let exit = status::doctor(doctor::verdict(&checks));
    let view = DoctorView::new(&checks, exit.code());
    if a.json {
        format::print_json(&view)?;
    } else {
        format::print_lines(doctor::text::lines(&view))?;
    }
    Ok(exit.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_views::doctor::Status;
    use std::path::{Path, PathBuf};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("smcrun-doctor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_dynamic_program_passes_and_a_missing_one_fails() {
        let c = program_checks(&["sh".into()], "6.12.0");
        assert_eq!(c[0].status, Status::Pass, "{c:?}");
        let c = program_checks(&["smcrun-no-such-program".into()], "6.12.0");
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
        let c = program_checks(&[s.clone().into()], "6.12.0");
        assert_eq!(c[0].status, Status::Fail, "{c:?}");
        assert!(
            c[0].detail
                .contains(&format!("is a script that runs {bin}")),
            "{c:?}"
        );
        assert!(c[0].detail.contains("statically linked"), "{c:?}");
        std::fs::write(&s, "#!/bin/sh\nexec sh -c true\n").unwrap();
        assert_eq!(
            program_checks(&[s.into()], "6.12.0")[0].status,
            Status::Pass
        );
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
        let c = program_checks(&[s.clone().into()], "6.12.0");
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
        let c = program_checks(&[s.clone().into()], "6.12.0");
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
    fn a_copy_named_java_gets_the_java_row() {
        let d = tmp("java");
        let j = d.join("java");
        std::fs::copy("/bin/sh", &j).unwrap();
        let c = program_checks(&[j.into(), "-jar".into(), "x.jar".into()], "6.12.0");
        let java = c.iter().find(|c| c.id == "java").unwrap();
        assert_eq!(java.status, Status::Warn);
        let _ = std::fs::remove_dir_all(&d);
    }
}
