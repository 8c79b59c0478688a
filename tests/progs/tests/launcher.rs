//! The launcher as a process manager: exec in place, argv byte for byte, exit status and signals,
//! LD_PRELOAD kept, and clear refusals.

mod common;
use common::*;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

#[test]
fn argv_is_passed_verbatim() {
    let args: Vec<OsString> = vec![
        "a b".into(),
        "'single'".into(),
        "\"double\"".into(),
        "".into(),
        OsString::from_vec(vec![0xff, 0xfe, b'x']),
        "--".into(),
        "-d".into(),
        "$HOME".into(),
        "*".into(),
    ];
    let mut c = smcrun();
    c.arg(bin("sockcheck")).arg("argv").args(&args);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    for (i, a) in args.iter().enumerate() {
        let hex: String = a.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            value(&out, &format!("argv{}", i + 2)),
            hex,
            "argument {i} changed:\n{out}"
        );
    }
    // argv[0] is the command as given.
    let argv0: String = bin("sockcheck")
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(value(&out, "argv0"), argv0);
}

#[test]
fn exit_status_is_the_programs() {
    let mut c = smcrun();
    c.arg(bin("sockcheck")).args(["exit", "42"]);
    assert_eq!(run(c).2.status.code(), Some(42));
    let mut c = smcrun();
    c.args(["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(run(c).2.status.signal(), Some(libc::SIGTERM));
}

#[test]
fn same_pid_and_sigterm_reaches_the_program() {
    let mut child = smcrun()
        .arg(bin("sockcheck"))
        .arg("wait")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("pid={}", child.id()),
        "smcrun must exec in place"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn existing_ld_preload_entries_are_kept() {
    // Any real library works as the "other" preload; the C library itself is harmless to preload.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc_path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .find(|p| p.contains("/libc.so"))
        .expect("libc in maps")
        .to_string();
    let mut c = smcrun();
    c.env("LD_PRELOAD", &libc_path)
        .args(["sh", "-c", "echo \"$LD_PRELOAD\""]);
    let (out, _, o) = run(c);
    assert!(o.status.success());
    let shim = bin("libsmcrun_shim.so").canonicalize().unwrap();
    assert_eq!(out.trim(), format!("{libc_path}:{}", shim.display()));
    let mut c = smcrun();
    c.env("LD_PRELOAD", &libc_path)
        .arg(bin("sockcheck"))
        .arg("maps");
    assert_eq!(value(&run(c).0, "shim_loaded"), "true");
}

#[test]
fn refusals_have_the_documented_exit_codes() {
    let (_, err, o) = run(smcrun());
    assert_eq!(o.status.code(), Some(2), "no command: {err}");
    assert!(err.contains("no command"), "{err}");

    let mut c = smcrun();
    c.arg("smcrun-no-such-program");
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        err.contains("smcrun-no-such-program: command not found"),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("smcrun-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let mut c = smcrun();
    c.arg(&plain);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(126), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    for (args, bad) in [
        (vec!["-r", "12x", "true"], "12x"),
        (vec!["--mode", "smcr", "true"], "smcr"),
        (vec!["--fallback", "never", "true"], "never"),
        (vec!["--sysctl", "kernel.panic=1", "true"], "kernel.panic"),
    ] {
        let mut c = smcrun();
        c.args(&args);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(bad), "{args:?} must name {bad}: {err}");
    }
}

#[test]
fn double_dash_runs_a_program_named_like_a_subcommand() {
    let mut c = smcrun();
    c.args(["--", "demo"]);
    let (_, err, o) = run(c);
    assert_eq!(
        o.status.code(),
        Some(127),
        "`-- demo` must look for a program called demo: {err}"
    );
    let mut c = smcrun();
    c.args(["-d", "--mode", "smc", "--"])
        .arg(bin("sockcheck"))
        .args(["exit", "3"]);
    assert_eq!(run(c).2.status.code(), Some(3));
}

#[test]
fn sysctl_failures_refuse_to_start_unless_best_effort() {
    // Here the kernel has no net.smc sysctls to write (the VM sets them for real).
    assert!(
        !std::path::Path::new("/proc/sys/net/smc").exists(),
        "this host test expects a kernel without SMC; on an SMC kernel run the VM suite"
    );
    let mut c = smcrun();
    c.args(["--sysctl", "net.smc.wmem=262144", "true"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("net.smc.wmem"), "{err}");
    // `modprobe smc` only where the kernel can load modules (this machine's cannot).
    if std::path::Path::new("/proc/modules").exists() {
        assert!(
            err.contains("modprobe smc") || err.contains("has no `smc`"),
            "{err}"
        );
    } else {
        assert!(!err.contains("modprobe"), "{err}");
        assert!(err.contains("no module support"), "{err}");
    }
    let mut c = smcrun();
    c.args(["--sysctl", "net.smc.wmem=262144", "--sysctl-best-effort"])
        .arg(bin("sockcheck"))
        .args(["exit", "5"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("warning: cannot set net.smc.wmem"), "{err}");
}

#[test]
fn static_programs_are_named_and_can_be_refused() {
    let busybox = std::path::Path::new("/bin/busybox");
    assert!(
        busybox.exists(),
        "busybox-static is needed for this test (.ci/run installs it)"
    );
    let mut c = smcrun();
    c.args(["--require-preload", "/bin/busybox", "true"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(126), "{err}");
    assert!(err.contains("statically linked"), "{err}");
    let mut c = smcrun();
    c.args(["/bin/busybox", "true"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(err.lines().count(), 1, "one warning line: {err}");
}
