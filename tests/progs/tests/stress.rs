//! Stress and faults, bounded in count and time (every run under a deadline): many threads, many
//! forks, an exec chain, spawns, signal handlers, exit while threads make sockets, a full detail
//! queue, and a run directory that is full, read-only or not writable. Each program runs plain
//! and under smcrun: no crash, no hang, no descriptor left open, the same errnos and output, and
//! the runtime's counts add up.

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// `shapes` plain or under smcrun (with the exit summary), reports in `xdg`.
fn shapes_command(under: bool, xdg: &Path) -> Command {
    let mut c = if under {
        let mut c = smcrun();
        c.env("SMCRUN_REPORT", "1").arg(bin("shapes"));
        c
    } else {
        Command::new(bin("shapes"))
    };
    c.env("XDG_RUNTIME_DIR", xdg);
    c
}

/// `shapes ARGS` plain or under smcrun (with the exit summary), reports in `xdg`: stdout, stderr
/// and the exit code (a signal is a failure).
fn shapes(under: bool, xdg: &Path, args: &[&str]) -> (String, String, i32) {
    let mut c = shapes_command(under, xdg);
    c.args(args);
    let (out, err, o) = run_within(c, LIMIT);
    assert_eq!(
        o.status.signal(),
        None,
        "shapes {args:?} (under smcrun: {under}) died of a signal\n{out}\n{err}"
    );
    (out, err, o.status.code().unwrap())
}

/// `shapes ARGS` plain, then under smcrun: both exit with `code`, and smcrun changes nothing in
/// what the program prints. The plain output and the stderr under smcrun.
fn plain_and_under_alike(xdg: &Path, args: &[&str], code: i32) -> (String, String) {
    let (plain, perr, rc) = shapes(false, xdg, args);
    assert_eq!(rc, code, "shapes {args:?}: {plain}{perr}");
    let (out, err, rc) = shapes(true, xdg, args);
    assert_eq!(
        (out.as_str(), rc),
        (plain.as_str(), code),
        "{args:?}: {err}"
    );
    (plain, err)
}

/// The pid and `N connections` of an exit summary line.
fn summary_of(line: &str) -> (u32, u64) {
    let mut w = line.split(' ');
    let pid = w.nth(2).and_then(|p| p.parse().ok()).expect(line);
    let n = line
        .split(": ")
        .nth(2)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect(line);
    (pid, n)
}

/// The report's counts add up: every connection has exactly one outcome.
fn counts_add_up(r: &serde_json::Value) {
    let c = &r["connections"];
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(
        n("total"),
        n("smc_r") + n("smc_d") + n("smc_unknown") + n("tcp") + n("pending") + n("unclassified"),
        "{c}"
    );
    assert_eq!(n("pending"), 0, "nothing may stay pending after exit: {c}");
}

#[test]
fn sixty_four_threads_two_thousand_socket_connect_close_cycles_each() {
    let xdg = private_xdg("churn");
    let args = ["churn", "64", "2000"];
    let (plain, _, code) = shapes(false, &xdg, &args);
    assert_eq!(code, 0);
    assert_eq!(
        plain.replace(
            &format!("accepted={}", value(&plain, "accepted")),
            "accepted=N"
        ),
        "cycles=128000 connected=64000 refused=64000 other_errno={}\naccepted=N\nfds_leaked=none\n"
    );
    let (out, err, code) = shapes(true, &xdg, &args);
    // A connect can succeed while the listener's accept queue overflows and drops the connection
    // (the kernel's behaviour under load, more likely when the acceptor is slower): the program
    // counts what it accepted; everything else is exact.
    let without_accepted = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.starts_with("accepted="))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_accepted(&out), without_accepted(&plain), "{err}");
    let accepted: u64 = value(&out, "accepted").parse().unwrap();
    assert!(accepted <= 64_000 && accepted > 60_000, "{out}");
    let sums = summaries(&err);
    assert_eq!(sums.len(), 1, "{err}");
    let (pid, n) = summary_of(sums[0]);
    // The connects, the accepts, and the connection that stops the acceptor (both ends).
    assert_eq!(n, 64_000 + accepted + 2, "{}", sums[0]);
    assert!(sums[0].ends_with(", 64000 failed connects"), "{}", sums[0]);
    let r = final_report(&xdg, pid);
    counts_add_up(&r);
    assert_eq!(r["connections"]["failed_connects"], 64_000);
    assert_eq!(
        r["sockets"]["tcp_at_creation"].as_u64().unwrap()
            + r["sockets"]["converted"].as_u64().unwrap(),
        128_003
    );
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn five_hundred_forks_each_connecting() {
    let xdg = private_xdg("forks");
    let (plain, err) = plain_and_under_alike(&xdg, &["fork-many", "500", "16"], 0);
    assert_eq!(
        plain,
        "children=500 exited_0=500 other=[] accepted=500\nfds_leaked=none\n"
    );
    // One summary per process: each child its own connection, the parent its 500 accepted ones.
    let sums = summaries(&err);
    assert_eq!(sums.len(), 501, "{err}");
    let mut ones = 0;
    let mut parent = None;
    for s in &sums {
        match summary_of(s) {
            (_, 1) => ones += 1,
            (pid, 500) => parent = Some(pid),
            _ => panic!("unexpected summary {s}"),
        }
    }
    assert_eq!(ones, 500);
    let r = final_report(&xdg, parent.expect("the parent's summary"));
    counts_add_up(&r);
    let _ = std::fs::remove_dir_all(xdg);
}

/// exec-chain's lines with what must differ under smcrun (the shim itself) and the pipes of each
/// run taken out.
fn chain_view(out: &str) -> String {
    let mut s = out
        .replace("shim_loaded=true", "shim_loaded=X")
        .replace("shim_loaded=false", "shim_loaded=X")
        .replace("has_shim=true", "has_shim=X")
        .replace("has_shim=false", "has_shim=X");
    while let Some(i) = s.find(":[") {
        let end = s[i..].find(']').map_or(s.len(), |j| i + j + 1);
        s.replace_range(i..end, ":pipe");
    }
    s
}

#[test]
fn an_exec_chain_of_ten_keeps_the_shim_to_the_end() {
    let xdg = private_xdg("exec");
    let args = ["exec-chain", "10"];
    let (plain, _, code) = shapes(false, &xdg, &args);
    assert_eq!(code, 0);
    assert_eq!(plain.lines().count(), 12, "{plain}");
    assert!(plain
        .lines()
        .all(|l| !l.contains("shim_loaded=true") && !l.contains("has_shim=true")));
    let (out, err, code) = shapes(true, &xdg, &args);
    assert_eq!(code, 0, "{err}");
    // Every link is preloaded, LD_PRELOAD is still there at the end, and each link starts with the
    // same descriptors as without the shim (the runtime's are close-on-exec).
    assert_eq!(out.matches("shim_loaded=true").count(), 11, "{out}");
    assert!(out.contains("chain_end ld_preload_has_shim=true"), "{out}");
    assert_eq!(chain_view(&out), chain_view(&plain));
    // Each link is a program of its own under the same pid: the summary of the last one.
    assert_eq!(summaries(&err).len(), 1, "{err}");
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn posix_spawn_and_vfork_while_threads_make_sockets() {
    let xdg = private_xdg("spawn");
    let (plain, _) = plain_and_under_alike(&xdg, &["spawn-storm", "200", "8"], 0);
    assert_eq!(
        plain,
        "posix_spawn_ok=200 vfork_ok=200 of=200 socket_threads_other_errno=0\nrefused_some=true\nfds_leaked=none\n"
    );
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn sockets_from_a_signal_handler_at_a_high_rate() {
    let xdg = private_xdg("signals");
    for variant in [
        &["signal-storm", "2000"][..],
        &["signal-storm", "2000", "sockets"],
    ] {
        for under in [false, true] {
            let (out, err, code) = shapes(under, &xdg, variant);
            assert_eq!(code, 0, "{variant:?} under={under}: {err}");
            let handler: u64 = value(&out, "handler_sockets")
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(handler > 100, "{out}");
            assert_eq!(value(&out, "fds_leaked"), "none", "{out}");
            if under {
                assert_eq!(summaries(&err).len(), 1, "{err}");
                // Sockets are made, never connected: the summary has no connection and nothing
                // else went to stderr.
                assert_eq!(err.lines().count(), 1, "{err}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn exit_while_threads_are_inside_the_hooks_and_hooks_in_thread_local_destructors() {
    let xdg = private_xdg("exit");
    for i in 0..20 {
        let under = i % 2 == 1;
        let (out, err, code) = shapes(under, &xdg, &["exit-race", "16", "30"]);
        assert_eq!(
            (out.as_str(), code),
            ("tls_dtor_connects=16\nexiting=1\n", 0),
            "run {i}: {err}"
        );
        if under {
            assert!(summaries(&err).len() <= 1, "{err}");
            assert!(
                !err.lines().any(|l| !l.starts_with("smcrun: pid ")),
                "run {i}: {err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn accept_with_short_address_buffers_before_a_guard_page() {
    let xdg = private_xdg("accept");
    let (plain, _) = plain_and_under_alike(&xdg, &["accept-short"], 0);
    assert_eq!(plain.matches(" ok=1").count(), 6, "{plain}");
    let _ = std::fs::remove_dir_all(xdg);
}

/// The lines of `out` with their `client=` address left off (the ports differ from run to run).
fn without_clients(out: &str) -> String {
    out.lines()
        .map(|l| l.split(" client=").next().unwrap_or(l).to_string() + "\n")
        .collect()
}

#[test]
fn accept_with_a_null_address_never_reads_addrlen() {
    let xdg = private_xdg("accept-guard");
    let (plain, _, code) = shapes(false, &xdg, &["accept-null", "guard"]);
    assert_eq!(code, 0);
    assert_eq!(
        plain.matches(" accepted=true errno=0 ").count(),
        2,
        "{plain}"
    );
    // The shim used to read `*addrlen` although `addr` was null: SIGSEGV on the guard page.
    let (out, err, code) = shapes(true, &xdg, &["accept-null", "guard"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_clients(&out), without_clients(&plain), "{err}");
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn a_server_that_accepts_without_an_address_buffer_still_has_its_remotes() {
    let xdg = private_xdg("accept-null");
    let (out, err, code) = shapes(true, &xdg, &["accept-null", "null"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches(" accepted=true errno=0 ").count(), 2, "{out}");
    // With no buffer of the caller's, the runtime reads the peer from the new socket.
    let (pid, n) = summary_of(summaries(&err)[0]);
    assert_eq!(n, 4, "2 accepted, 2 connected: {err}");
    let r = final_report(&xdg, pid);
    let mut clients: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split(" client=").nth(1))
        .collect();
    clients.sort_unstable();
    let mut servers: Vec<&str> = r["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["role"] == "server")
        .map(|c| c["remote"].as_str().unwrap_or("null"))
        .collect();
    servers.sort_unstable();
    assert_eq!(servers, clients, "{r}");
    let server_endpoints: Vec<&serde_json::Value> = r["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "server")
        .collect();
    assert_eq!(server_endpoints.len(), 1, "{r}");
    assert_eq!(server_endpoints[0]["remote"], "127.0.0.1", "{r}");
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn a_worker_exec_d_with_a_listener_made_under_smcrun_gets_the_kernels_reason() {
    let xdg = private_xdg("exec-listener");
    let (out, err, code) = shapes(true, &xdg, &["exec-listener"]);
    assert_eq!((out.as_str(), code), ("worker accepted=true\n", 0), "{err}");
    // The exec'd worker's summary (the same pid; the program before the exec wrote none).
    let sums = summaries(&err);
    assert_eq!(sums.len(), 1, "{err}");
    let r = final_report(&xdg, summary_of(sums[0]).0);
    let rows = r["recent"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{r}");
    let reason = &rows[0]["reason"];
    // It used to say "accepted from a listening socket not created under smcrun", with no code.
    assert!(
        !reason["text"]
            .as_str()
            .unwrap_or("")
            .contains("not created under smcrun"),
        "{r}"
    );
    if !kernel_has_af_smc() {
        // The worker's kernel refuses SMC sockets for good: whoever made the listener, that is why
        // the connection is TCP.
        assert_eq!(rows[0]["mode"], "TCP", "{r}");
        assert_eq!(reason["errno"], "EAFNOSUPPORT", "{r}");
        assert_eq!(r["reasons"][0]["errno"], "EAFNOSUPPORT", "{r}");
    }
    let _ = std::fs::remove_dir_all(xdg);
}

/// `shapes fd-limit ARGS` plain or under smcrun with RLIMIT_NOFILE set to `limit` (soft and hard,
/// as `ulimit -n` does): stdout and stderr.
fn under_fd_limit(under: bool, xdg: &Path, limit: u64, args: &[&str]) -> (String, String) {
    use std::os::unix::process::CommandExt;
    let mut c = shapes_command(under, xdg);
    c.arg("fd-limit").args(args);
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit is async-signal-safe; it only lowers this child's limit.
    unsafe {
        c.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let (out, err, o) = run_within(c, LIMIT);
    assert!(o.status.success(), "{out}\n{err}");
    (out, err)
}

/// What the runtime says when a program under a limit of 256 runs out of descriptors in a hooked
/// call and the runtime gives its own up (two tests wait for it).
const GAVE_UP_AT_256: &str =
    "the program reached its fd limit (256): the runtime closed the report's descriptors";

/// `shapes fd-limit` plain, then under smcrun, with RLIMIT_NOFILE at `limit`: the program runs out
/// of descriptors (EMFILE) both times and prints the same. The stderr under smcrun.
fn out_of_fds_alike(xdg: &Path, limit: u64) -> String {
    let (plain, _) = under_fd_limit(false, xdg, limit, &[]);
    assert!(
        plain.ends_with(&format!(" errno={}\n", libc::EMFILE)),
        "{plain}"
    );
    let (out, err) = under_fd_limit(true, xdg, limit, &[]);
    assert_eq!(out, plain, "{err}");
    err
}

#[test]
fn under_a_low_fd_limit_the_runtime_takes_no_descriptor_and_says_why() {
    let xdg = private_xdg("fd-limit-16");
    // It used to keep its run directory and report below the limit (12 sockets plain, 10 under
    // smcrun), then warn that the program had closed or replaced the report's descriptor.
    let err = out_of_fds_alike(&xdg, 16);
    assert!(!err.contains("closed or replaced"), "{err}");
    assert!(
        err.contains("no per-process report")
            && err.contains("the fd limit (16) leaves no descriptor"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn a_program_that_reaches_its_fd_limit_gets_the_runtimes_descriptors() {
    let xdg = private_xdg("fd-limit-256");
    let err = out_of_fds_alike(&xdg, 256);
    assert!(err.contains(GAVE_UP_AT_256), "{err}");
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn a_connect_the_kernel_refuses_for_its_address_is_not_read_by_the_shim() {
    let xdg = private_xdg("connect-fault");
    // The shim used to read the address after the kernel refused it: SIGSEGV for EFAULT.
    let (plain, _) = plain_and_under_alike(&xdg, &["connect-fault"], 0);
    assert_eq!(
        plain,
        format!(
            "connect fault: ret=-1 errno={}\nconnect too_long: ret=-1 errno={}\n",
            libc::EFAULT,
            libc::EINVAL
        )
    );
    let _ = std::fs::remove_dir_all(xdg);
}

#[test]
fn a_full_detail_queue_drops_details_counts_them_and_the_program_goes_on() {
    let xdg = private_xdg("queue");
    let (plain, err) = plain_and_under_alike(&xdg, &["masked-burst", "2500"], 0);
    assert_eq!(plain, "connections=2500 answered=2500\n");
    let sums = summaries(&err);
    let (pid, n) = summary_of(sums[0]);
    assert_eq!(n, 5000);
    let r = final_report(&xdg, pid);
    counts_add_up(&r);
    // Its sidecar never ran (every thread blocks a signal the program's start did not), so the
    // details of 5,000 connections met a queue of 4,096 at exit: the rest were dropped, and said.
    assert_eq!(r["detail_dropped"], 5000 - 4096, "{r}");
    assert_eq!(r["connections"]["tcp"], 5000);
    let _ = std::fs::remove_dir_all(xdg);
}

/// `sockcheck conns 3` with XDG_RUNTIME_DIR on a fresh tmpfs mounted with `options` in a mount
/// namespace of its own, after `prepare` (a shell command, run with the mount point in $D).
fn on_tmpfs(under: bool, options: &str, prepare: &str) -> (String, String, i32) {
    let d = std::env::temp_dir().join(format!("smcrun-tmpfs-{}-{under}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let prog = format!(
        "{}{}",
        if under {
            format!("{} ", bin("smcrun").display())
        } else {
            String::new()
        },
        bin("sockcheck").display()
    );
    let script = format!(
        "mount -t tmpfs -o {options} tmpfs \"$D\" || exit 99; {prepare}; XDG_RUNTIME_DIR=$D exec {prog} conns 3"
    );
    need("unshare");
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("D", &d)
        .env("SMCRUN_REPORT", "1")
        .env_remove("LD_PRELOAD");
    let (out, err, o) = run_within(c, LIMIT);
    let _ = std::fs::remove_dir(&d);
    (out, err, o.status.code().unwrap_or(-1))
}

#[test]
fn a_full_or_read_only_run_directory_costs_the_report_not_the_program() {
    for (what, options, prepare, warning) in [
        (
            "full",
            "size=16k,mode=700",
            "dd if=/dev/zero of=\"$D/fill\" bs=4k count=8 2>/dev/null",
            "warning: per-process report stopped: cannot write the report",
        ),
        (
            "read-only",
            "ro,size=16k,mode=700",
            ":",
            "warning: no per-process report: ",
        ),
    ] {
        let (plain, perr, code) = on_tmpfs(false, options, prepare);
        assert_eq!(code, 0, "{what}: {perr}");
        let (out, err, code) = on_tmpfs(true, options, prepare);
        assert_eq!((out.as_str(), code), (plain.as_str(), 0), "{what}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{what}: one warning and the summary: {err}");
        assert!(lines.iter().any(|l| l.contains(warning)), "{what}: {err}");
        // The counts are the runtime's own, whatever happened to the file.
        assert!(
            summaries(&err)[0].contains(": 6 connections"),
            "{what}: {err}"
        );
    }
}

#[test]
fn a_run_directory_the_user_cannot_write_costs_the_report_not_the_program() {
    // As an unprivileged user (root would write anyway), XDG_RUNTIME_DIR is theirs but 0500.
    let d = std::env::temp_dir().join(format!("smcrun-ro-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(54321), Some(54321)).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
    let run = |under: bool| {
        need("setpriv");
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "54321", "--regid", "54321", "--clear-groups"]);
        if under {
            c.arg(bin_for_anyone("smcrun"));
        }
        c.arg(bin_for_anyone("sockcheck"))
            .args(["conns", "2"])
            .env("XDG_RUNTIME_DIR", &d)
            .env("SMCRUN_REPORT", "1")
            .env_remove("LD_PRELOAD");
        run_within(c, LIMIT)
    };
    let (plain, perr, po) = run(false);
    assert!(po.status.success(), "{perr}");
    let (out, err, o) = run(true);
    assert_eq!(out, plain);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("warning: no per-process report") && err.contains("EACCES"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// shutdown(2) is hooked (an SMC socket's half-close waits for its send buffer): on TCP a
/// half-close under smcrun still delivers every byte and the reply after it, and the calls the
/// kernel refuses return what they return without smcrun, with the same errno.
#[test]
fn shutdown_under_smcrun_answers_as_without_it() {
    let xdg = private_xdg("half-close");
    let (plain, _) = plain_and_under_alike(&xdg, &["half-close"], 0);
    assert!(
        plain.contains("shutdown SHUT_WR: ret=0 errno=0 reply=read 1048576"),
        "{plain}"
    );
    assert!(
        plain.contains("shutdown closed-fd: ret=-1 errno=9"),
        "{plain}"
    );
}

/// A report write that finds the fd table full (the program filled it with calls the shim does not
/// hook, and holds it past the sidecar's next write) skips that write, not the report: when the
/// program then runs out in a hooked call, the runtime gives up its descriptors and says so. (Found
/// by the clean-container run: there the sidecar's write landed in the full table and the report
/// stopped with "no descriptor free", and the give-up was never said.)
#[test]
fn a_report_write_into_a_full_fd_table_waits_for_a_number() {
    let xdg = private_xdg("fd-limit-held");
    let (out, err) = under_fd_limit(true, &xdg, 256, &["hold"]);
    assert_eq!(out, format!("held: errno={}\n", libc::EMFILE), "{err}");
    assert!(!err.contains("report stopped"), "{err}");
    assert!(err.contains(GAVE_UP_AT_256), "{err}");
    let _ = std::fs::remove_dir_all(xdg);
}

/// dup2, dup3, close_range and closefrom close descriptors for the program: under smcrun they
/// answer as without it, a number the runtime held (its run directory, its report) becomes the
/// program's without a word (the runtime's files move out of the way, or are let go and made
/// again), and every connection closed by them is counted, none left unclassified. (Before these
/// calls were hooked, a dup2 over the report's number stopped the report.)
#[test]
fn descriptors_closed_by_dup2_dup3_close_range_and_closefrom_are_the_programs() {
    let xdg = private_xdg("dup-over");
    let (plain, err) = plain_and_under_alike(&xdg, &["dup-over", "closefrom"], 0);
    assert_eq!(
        plain,
        "replaced numbers carry the program's pipe: true\n\
         dup2 over a connection: ret=fd errno=0\n\
         dup3 over a connection: ret=fd errno=0\n\
         close_range over a connection: ret=0 errno=0\n\
         closefrom: the first connection's fd is closed: true\n"
    );
    let held: u32 = value(&err, "runtime_fds").parse().unwrap();
    assert!(
        held >= 1,
        "the runtime held no descriptor to replace: {err}"
    );
    assert!(!err.contains("report stopped"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let sums = summaries(&err);
    assert_eq!(sums.len(), 1, "{err}");
    // four connections, both ends each
    let (pid, n) = summary_of(sums[0]);
    assert_eq!(n, 8, "{err}");
    let r = final_report(&xdg, pid);
    counts_add_up(&r);
    assert_eq!(r["connections"]["total"], 8, "{r}");
    assert_eq!(r["connections"]["unclassified"], 0, "{r}");
    let _ = std::fs::remove_dir_all(xdg);
}

/// `_exit` and `_Exit` are hooked (the kernel drops an exiting SMC socket's unsent bytes, so the
/// process lets them out first): the exit status comes through unchanged, with a connection
/// still open, and the program's output is the same.
#[test]
fn exit_and_underscore_exit_keep_the_programs_status() {
    let xdg = private_xdg("exit-now");
    for how in ["_exit", "_Exit"] {
        let (plain, _) = plain_and_under_alike(&xdg, &["exit-now", "7", how], 7);
        assert_eq!(plain, "answered: true\n");
    }
    let _ = std::fs::remove_dir_all(xdg);
}
