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

/// The program gets the SIGPIPE disposition smcrun was started with (smcrun itself ignores it,
/// and an ignored signal stays ignored across exec), on the quick path and through the whole
/// command line (`--`).
#[test]
fn sigpipe_is_the_one_smcrun_was_started_with() {
    // SigIgn's bit for SIGPIPE (13), in /proc/PID/status' hex mask.
    let ignored = |status: &str| {
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
            .unwrap_or_else(|| panic!("no SigIgn in {status}"));
        mask & (1 << (libc::SIGPIPE - 1)) != 0
    };
    let base = smcrun();
    for trap in ["", "trap '' PIPE; "] {
        for forced in [&[][..], &["--"]] {
            let mut c = std::process::Command::new("sh");
            for (k, v) in base.get_envs() {
                match v {
                    Some(v) => c.env(k, v),
                    None => c.env_remove(k),
                };
            }
            c.arg("-c")
                .arg(format!("{trap}exec \"$0\" \"$@\" cat /proc/self/status"))
                .arg(base.get_program())
                .args(forced);
            let (out, err, o) = run(c);
            assert!(o.status.success(), "{err}");
            assert_eq!(
                ignored(&out),
                !trap.is_empty(),
                "{trap:?} {forced:?}:\n{out}"
            );
        }
    }
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

#[test]
fn help_and_version_that_cannot_be_written_fail_in_one_line() {
    for args in [
        &["--help"][..],
        &["-v"],
        &["--version"],
        &["help"],
        &["ps", "--help"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut c = smcrun();
        c.args(args).stdout(full);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err.trim(),
            "smcrun: cannot write to stdout: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}

#[test]
fn bad_input_is_refused_in_one_line_naming_the_value() {
    use std::os::unix::ffi::OsStrExt;
    let dir = std::env::temp_dir().join(format!("smcrun-badinput-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one_line = |args: &[&std::ffi::OsStr], code: i32, want: &str| {
        let mut c = smcrun();
        c.args(args);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in: {err}");
        assert!(
            err.len() < 600,
            "{args:?}: a short error, not an echo: {} bytes",
            err.len()
        );
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    // A config file that never ends is not read at all: not a regular file.
    one_line(
        &[&os("--config"), &os("/dev/zero"), &os("true")],
        2,
        "/dev/zero: cannot read the config file: it is a character device, not a regular file",
    );
    // A regular one too big (sparse: its size alone refuses it).
    let huge = dir.join("huge.toml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    one_line(
        &[&os("--config"), huge.as_os_str(), &os("true")],
        2,
        "larger than 4 MiB",
    );
    std::fs::remove_file(&huge).unwrap();
    // A FIFO nobody writes: refused at once, never waited on.
    let fifo = dir.join("fifo.toml");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut c = smcrun();
    c.arg("--config").arg(&fifo).arg("true");
    let (_, err, o) = run_within(c, std::time::Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "smcrun: {}: cannot read the config file: it is a FIFO, not a regular file; \
             expected a TOML file of smcrun's settings (nothing was started)",
            fifo.display()
        )
    );
    std::fs::remove_file(&fifo).unwrap();
    // A valid policy too big for one environment string: refused before exec, with the limit.
    let ports: Vec<String> = (0..200_000).map(|i| (i % 60_000 + 1).to_string()).collect();
    let big = dir.join("big.toml");
    std::fs::write(
        &big,
        format!("policy = \"smc port {}; tcp\"\n", ports.join(",")),
    )
    .unwrap();
    one_line(
        &[&os("--config"), big.as_os_str(), &os("true")],
        2,
        "at most 131072 bytes",
    );
    // A bad 1 MB policy: the token and its place, not the whole policy.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        format!("policy = \"smc port {}; tcp prot 80\"\n", ports.join(",")),
    )
    .unwrap();
    one_line(
        &[&os("--config"), bad.as_os_str(), &os("true")],
        2,
        "\"prot\" is not a qualifier",
    );
    // A negative size is a bad size, not an unknown argument.
    one_line(
        &[&os("-t"), &os("-5"), &os("true")],
        2,
        "invalid value '-5' for '--sndbuf",
    );
    // A value that is not UTF-8 names its option.
    let not_utf8 = std::ffi::OsStr::from_bytes(b"\xff");
    one_line(
        &[&os("--mode"), not_utf8, &os("true")],
        2,
        "--mode <MODE>: the value",
    );
    // An empty command name is not found, as in a shell.
    one_line(&[&os("")], 127, "command not found");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_setuid_program_of_the_callers_own_uid_is_reached_by_the_preload() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    // su is setuid root: root running it keeps its ids, so the loader applies LD_PRELOAD.
    let mut c = smcrun();
    c.args(["--require-preload", "su", "root", "-c", "true"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("setuid"), "no warning: {err}");
}
