//! BPF mode on this machine's kernel (no SMC here, so every attachment must be refused): the
//! refusals name the missing prerequisite, exit with their documented status and start nothing;
//! `--bpf=auto` falls back to the preload; `policy check --bpf` says which rules BPF mode honours.
//! What BPF mode does on a kernel with SMC is proven in the VM test bed (tests/vm/guest/checks-bpf.sh).

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// Whether socket(AF_INET, SOCK_STREAM, IPPROTO_SMC) works here (raw system call).
fn kernel_has_ipproto_smc() -> bool {
    // SAFETY: socket/close system calls on an fd owned here.
    unsafe {
        let fd = libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 256) as i32;
        if fd >= 0 {
            libc::close(fd);
        }
        fd >= 0
    }
}

/// Whether the kernel is 6.11 or later and has BTF: then SMC is the first prerequisite that can
/// be missing, and the refusal must name it.
fn smc_is_the_first_gap() -> bool {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    let v: (u32, u32) = (
        it.next().and_then(|s| s.parse().ok()).unwrap_or(0),
        it.next().and_then(|s| s.parse().ok()).unwrap_or(0),
    );
    v >= (6, 11)
        && Path::new("/sys/kernel/btf/vmlinux").exists()
        && Path::new("/proc/sys/net/mptcp").exists()
        && !kernel_has_ipproto_smc()
}

fn marker(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("smcrun-bpf-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn touch_cmd(c: &mut std::process::Command, m: &Path) {
    c.args(["--", "sh", "-c", &format!("touch {}", m.display())]);
}

/// `smcrun ARGS` run to its end: most checks here are one command line and its answer.
fn smcrun_with(args: &[&str]) -> (String, String, std::process::Output) {
    let mut c = smcrun();
    c.args(args);
    run(c)
}

#[test]
fn bpf_refuses_without_smc_and_starts_nothing() {
    if kernel_has_ipproto_smc() {
        eprintln!("skipped: this kernel makes IPPROTO_SMC sockets (the VM checks cover it)");
        return;
    }
    let m = marker("refused");
    let mut c = smcrun();
    c.arg("--bpf");
    touch_cmd(&mut c, &m);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.starts_with("smcrun: --bpf: ")
            && err
                .trim_end()
                .ends_with("(nothing was attached or started)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    if smc_is_the_first_gap() {
        assert!(
            err.contains("SMC (the smc module) is missing: socket(AF_INET, SOCK_STREAM, IPPROTO_SMC) failed: ")
                // What this kernel allows: `modprobe smc` only where there is a module to load.
                && (err.contains("modprobe smc") || err.contains("this kernel has no `smc`")),
            "{err}"
        );
    }
    assert!(!m.exists(), "the command ran although --bpf refused");
    assert!(!Path::new("/sys/fs/bpf/smcrun").exists());
}

#[test]
fn bpf_auto_falls_back_to_the_preload() {
    if kernel_has_ipproto_smc() {
        eprintln!("skipped: this kernel makes IPPROTO_SMC sockets");
        return;
    }
    let (out, err, o) = smcrun_with(&[
        "--bpf=auto",
        "-d",
        "--",
        "sh",
        "-c",
        "echo \"preload=$LD_PRELOAD\"",
    ]);
    assert!(o.status.success(), "{err}");
    assert!(
        value(&out, "preload").ends_with("libsmcrun_shim.so"),
        "{out}"
    );
    assert!(
        err.contains("smcrun: --bpf=auto: BPF mode is unavailable: ")
            && err.contains("; using the preload"),
        "{err}"
    );
    // Without -d, the fallback is silent and the program's status is its own.
    let (_, err, o) = smcrun_with(&["--bpf=auto", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(!err.contains("--bpf=auto"), "{err}");
}

#[test]
fn bpf_refuses_what_it_cannot_honour_before_anything_is_attached() {
    let cases: &[(&[&str], &str)] = &[
        (&["--bpf", "--sndbuf", "1m"], "--sndbuf is a setting of the preload, which BPF mode does not use"),
        (&["--bpf", "--report", "--mode", "inet"], "--mode, --report are settings of the preload"),
        (
            &["--bpf", "--policy", "tcp remote 127.0.0.0/8; smc"],
            "the policy's rule 1 \"tcp remote 127.0.0.0/8\" is about remote, which is known at connect()/listen(), after socket()",
        ),
        (
            &["--bpf", "--policy", "smc program /opt/*; tcp"],
            "the policy's rule 1 \"smc program /opt/*\" matches program \"/opt/*\" by path",
        ),
        (
            &["--bpf", "--policy", "tcp program a-very-long-program-name"],
            "longer than the 15 bytes of a program name the kernel keeps",
        ),
    ];
    for (args, want) in cases {
        let m = marker("policy");
        let mut c = smcrun();
        c.args(*args);
        touch_cmd(&mut c, &m);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!m.exists(), "{args:?}: the command ran");
    }
    let (_, err, o) = smcrun_with(&["--bpf=sometimes", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("sometimes"), "{err}");
}

#[test]
fn policy_check_says_which_rules_bpf_mode_honours() {
    let (out, err, o) = smcrun_with(&[
        "policy",
        "check",
        "--bpf",
        "--policy",
        "tcp program redis-benchmark; smc program redis-*; tcp",
    ]);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        out,
        "rule 1 of 3: tcp program redis-benchmark: kernel: decided in the kernel at socket(), by program name\n\
         rule 2 of 3: smc program redis-*: kernel: decided in the kernel at socket(), by program name\n\
         rule 3 of 3: tcp: kernel: decided in the kernel at socket(), by program name\n\
         BPF mode honours this policy (2 program patterns in the kernel)\n"
    );
    let (out, err, o) = smcrun_with(&[
        "policy",
        "check",
        "--bpf",
        "--json",
        "--policy",
        "smc port 6379; tcp program [ab]*; smc",
    ]);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["bpf_honours"], false);
    let honour: Vec<&str> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["honour"].as_str().unwrap())
        .collect();
    assert_eq!(honour, ["preload", "cannot", "kernel"]);
    assert_eq!(v["rules"][0]["text"], "smc port 6379");
}

/// The cgroup2 mount, if this machine has one.
fn cgroup2() -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split(' ').next() == Some("cgroup2")).then(|| left.split(' ').nth(4).unwrap().into())
    })
}

#[test]
fn attach_and_detach_refuse_clearly() {
    let (out, err, o) = smcrun_with(&["attach", "--list"]);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "nothing is attached\n");
    let (_, err, o) = smcrun_with(&["attach", "--cgroup", "/no/such/cgroup/here"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/no/such/cgroup/here: no such cgroup; expected a cgroup v2 directory"),
        "{err}"
    );
    let (_, err, o) = smcrun_with(&["attach", "--cgroup", "/tmp"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not on a cgroup v2 file system"), "{err}");
    let (_, err, o) = smcrun_with(&["attach"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // --netns: a file that is no namespace, another kind of namespace, a process that does not
    // exist, --cgroup with it: one line each, exit 2, nothing attached
    let mnt = format!("/proc/{}/ns/mnt", std::process::id());
    for (arg, want) in [
        ("/tmp", "netns /tmp: not a namespace file (not on nsfs)"),
        (mnt.as_str(), "not a network namespace"),
        ("4194304999", "netns 4194304999: no such process"),
    ] {
        let (_, err, o) = smcrun_with(&["attach", "--netns", arg]);
        assert_eq!(o.status.code(), Some(2), "{arg}: {err}");
        assert_eq!(err.lines().count(), 1, "{arg}: {err}");
        assert!(err.contains(want), "{arg}: {err}");
        assert!(err.trim_end().ends_with("(nothing was attached)"), "{err}");
    }
    let (_, err, o) = smcrun_with(&["attach", "--netns", "1", "--cgroup", "/tmp"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "error: the argument '--netns <PATH|PID>' cannot be used with '--cgroup <PATH>'"
        ),
        "{err}"
    );
    let (_, err, o) = smcrun_with(&["detach", "--netns", "/tmp"]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not a namespace file"), "{err}");
    let Some(root) = cgroup2() else {
        eprintln!("no cgroup2 here: the refusal on a real cgroup is not checked");
        return;
    };
    if !kernel_has_ipproto_smc() {
        let (_, err, o) = smcrun_with(&["attach", "--cgroup", &root]);
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(err.trim_end().ends_with("(nothing was attached)"), "{err}");
        if smc_is_the_first_gap() {
            assert!(err.contains("SMC (the smc module) is missing"), "{err}");
        }
        assert!(!Path::new("/sys/fs/bpf/smcrun/link").exists());
    }
    let (_, err, o) = smcrun_with(&["detach", "--cgroup", &root]);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is not attached"), "{err}");
}
