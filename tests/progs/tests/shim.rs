//! The shim inside real programs on this machine: what it converts, what it leaves alone, and
//! that the program cannot tell the difference (errno, flags, SO_DOMAIN, threads, fork, exec).

mod common;
use common::*;

fn sockcheck(args: &[&str]) -> String {
    let mut c = smcrun();
    c.arg(bin("sockcheck")).args(args);
    let (out, err, o) = run(c);
    assert!(
        o.status.success(),
        "sockcheck {args:?} failed: {err}\n{out}"
    );
    out
}

#[test]
fn converted_sockets_report_the_family_and_protocol_asked_for() {
    for (fam, domain) in [("4", "2"), ("6", "10")] {
        let out = sockcheck(&["identity", fam]);
        for side in ["listener", "client", "accepted"] {
            assert_eq!(value(&out, &format!("{side}_domain")), domain, "{out}");
            assert_eq!(value(&out, &format!("{side}_protocol")), "6", "{out}");
        }
        assert_eq!(value(&out, "data_ok"), "true");
        if !kernel_has_af_smc() {
            // Here the kernel has no SMC: the sockets really are TCP.
            assert_eq!(value(&out, "client_raw_domain"), domain);
        }
    }
}

#[test]
fn other_sockets_are_untouched() {
    let out = sockcheck(&["untouched"]);
    for name in [
        "udp",
        "udp6",
        "unix_stream",
        "unix_dgram",
        "netlink",
        "socketpair",
    ] {
        assert_eq!(value(&out, name), "untouched", "{out}");
    }
    // MPTCP may be missing from a kernel; it must never be changed.
    assert_ne!(value(&out, "mptcp"), "CHANGED");
}

#[test]
fn errno_and_socket_flags_are_preserved() {
    let out = sockcheck(&["errno"]);
    assert_eq!(value(&out, "socket_ok"), "true");
    assert_eq!(
        value(&out, "errno_after_socket"),
        "ERANGE",
        "a failed SMC attempt leaked into errno"
    );
    assert_eq!(value(&out, "cloexec_kept"), "true");
    assert_eq!(value(&out, "nonblock_kept"), "true");
    assert_eq!(value(&out, "connect_closed_port"), "-1 errno=ECONNREFUSED");
    assert_eq!(value(&out, "bind_in_use"), "-1 errno=EADDRINUSE");
    assert_eq!(value(&out, "getsockopt_badfd"), "-1 errno=EBADF");
    assert_eq!(value(&out, "domain"), "2 errno_after_getsockopt=ERANGE");
}

#[test]
fn strict_mode_returns_the_kernels_error() {
    let mut c = smcrun();
    c.args(["--fallback", "strict"])
        .arg(bin("sockcheck"))
        .arg("strict");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    if kernel_has_af_smc() {
        assert_eq!(value(&out, "fd_ok"), "true errno=0");
    } else {
        assert_eq!(value(&out, "fd_ok"), "false errno=EAFNOSUPPORT", "{out}");
    }
    assert_eq!(value(&out, "udp_ok"), "true", "strict must not touch UDP");
}

#[test]
fn sixty_four_threads_creating_their_first_sockets_at_once() {
    for _ in 0..5 {
        let out = sockcheck(&["threads", "64"]);
        assert_eq!(value(&out, "threads"), "64 good=64", "{out}");
    }
}

#[test]
fn fork_vfork_and_spawned_children_stay_preloaded() {
    let out = sockcheck(&["fork-exec"]);
    assert_eq!(value(&out, "fork_child_status"), "0");
    assert_eq!(value(&out, "vfork_child_status"), "0");
    let children = out.lines().filter(|l| *l == "shim_loaded=true").count();
    assert_eq!(
        children, 2,
        "the forked and the vforked child must both be preloaded:\n{out}"
    );
    assert_eq!(value(&out, "spawn_shim_loaded"), "true");
}

#[test]
fn bad_environment_values_warn_once_and_the_program_still_works() {
    let mut c = smcrun();
    c.env("SMCRUN_MODE", "bogus")
        .env("SMCRUN_SNDBUF", "12x")
        .env("SMCRUN_DEBUG", "9")
        .env("SMC_RCVBUF", "-5")
        .arg(bin("sockcheck"))
        .arg("identity");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(value(&out, "data_ok"), "true");
    for (var, val) in [
        ("SMCRUN_MODE", "bogus"),
        ("SMCRUN_SNDBUF", "12x"),
        ("SMCRUN_DEBUG", "9"),
        ("SMC_RCVBUF", "-5"),
    ] {
        let needle = format!("warning: {var}=\"{val}\" is not valid: expected");
        assert_eq!(
            err.matches(&needle).count(),
            1,
            "want one warning for {var}:\n{err}"
        );
    }
    assert_eq!(err.lines().count(), 4, "only the four warnings:\n{err}");
}

#[test]
fn debug_names_the_reason_for_each_fallback() {
    let mut c = smcrun();
    c.arg("-d").arg(bin("sockcheck")).arg("identity");
    let (_out, err, o) = run(c);
    assert!(o.status.success());
    if !kernel_has_af_smc() {
        let lines: Vec<_> = err
            .lines()
            .filter(|l| l.contains("stream stays TCP"))
            .collect();
        assert_eq!(
            lines.len(),
            2,
            "listener and client (accept makes no socket() call):\n{err}"
        );
        assert!(
            lines
                .iter()
                .all(|l| l.contains("the kernel has no AF_SMC") && l.contains("EAFNOSUPPORT")),
            "{err}"
        );
    } else {
        assert!(err.contains("-> SMC"), "{err}");
    }
}

#[test]
fn smc_run_variable_names_are_accepted() {
    let mut c = smcrun();
    c.env("SMC_DEBUG", "1")
        .arg(bin("sockcheck"))
        .arg("identity");
    let (_out, err, o) = run(c);
    assert!(o.status.success());
    assert!(
        err.contains("socket fd"),
        "SMC_DEBUG=1 must turn on the debug lines:\n{err}"
    );
}

#[test]
fn buffer_sizes_apply_to_converted_sockets_only_and_never_break_the_program() {
    // 48 KiB, below net.core.[rw]mem_max's default (so the host's limits are never raised); the
    // kernel doubles what it is given, 98304, which is neither TCP's default send nor receive
    // buffer.
    let doubled = (2 * 48 * 1024).to_string();
    let mut c = smcrun();
    c.args(["-r", "48k", "-t", "48k"])
        .arg(bin("sockcheck"))
        .arg("identity");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(value(&out, "data_ok"), "true");
    for opt in ["client_sndbuf", "client_rcvbuf", "listener_rcvbuf"] {
        if kernel_has_af_smc() {
            assert_eq!(
                value(&out, opt),
                doubled,
                "converted sockets get the size: {out}"
            );
        } else {
            // Nothing was converted here: the TCP sockets keep the kernel's own sizes.
            assert_ne!(
                value(&out, opt),
                doubled,
                "{opt} of a TCP socket was changed: {out}"
            );
        }
    }
}

#[test]
fn policy_program_rules_match_the_name_a_program_was_started_as() {
    // Like Debian's redis-server, a symlink to another executable.
    let dir = std::env::temp_dir().join(format!("smcrun-policy-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("renamed-prog");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(bin("sockcheck"), &link).unwrap();
    // `smc program NAME; tcp`: a program the rule names may get SMC sockets; any other gets TCP
    // sockets from the start, "by policy".
    for (name, by_policy) in [
        ("renamed-prog", false),
        ("sockcheck", false),
        ("other", true),
    ] {
        let mut c = smcrun();
        c.args(["-d", "--policy", &format!("smc program {name}; tcp")])
            .arg(&link)
            .arg("identity");
        let (out, err, o) = run(c);
        assert!(o.status.success(), "{err}");
        assert_eq!(value(&out, "data_ok"), "true");
        assert_eq!(
            err.contains("stream stays TCP by policy"),
            by_policy,
            "rule for {name}:\n{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nonblocking_epoll_connect_and_socket_options_behave_the_same_with_a_policy() {
    let port = free_port();
    let mut server = smcrun()
        .arg(bin("sockcheck"))
        .args(["serve", &port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("listening="), "{line}");
    let target = format!("127.0.0.1:{port}");
    let mut outputs = Vec::new();
    for policy in [
        None,
        Some("smc port 6379; tcp"),
        Some("tcp remote 127.0.0.0/8; smc"),
    ] {
        let mut joined = String::new();
        for what in ["epoll-connect", "opts-connect"] {
            let mut c = smcrun();
            if let Some(p) = policy {
                c.args(["--policy", p]);
            }
            c.arg(bin("sockcheck")).args([what, &target]);
            let (out, err, o) = run(c);
            assert!(o.status.success(), "{what} {policy:?}: {err}");
            joined += &out;
        }
        assert_eq!(
            value(&joined, "epoll_n"),
            "1 epollout=true data=7",
            "{joined}"
        );
        assert_eq!(value(&joined, "so_error"), "0");
        for key in ["nodelay", "keepalive", "reuseaddr"] {
            assert_eq!(value(&joined, key), "1", "{key}: {joined}");
        }
        assert_eq!(value(&joined, "rcvbuf_kept"), "true");
        assert_eq!(value(&joined, "tos"), "16");
        assert_eq!(joined.matches("echo_ok=true").count(), 2, "{joined}");
        outputs.push(joined);
    }
    assert!(
        outputs.windows(2).all(|w| w[0] == w[1]),
        "a policy must not change what the program sees: {outputs:#?}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
}
