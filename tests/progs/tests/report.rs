//! The per-process report on this machine: the sidecar inside a program under smcrun, `smcrun ps`
//! and `smcrun why`, fork, exec, threads, SIGKILL, and a run directory that refuses planted files.

mod common;
use common::*;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Whether the status file `status` (/proc/PID/status) says a seccomp filter is installed: then
/// the sidecar shares the program's descriptor table (podman's filter in tests/fresh).
fn seccomp_filtered(status: &str) -> bool {
    std::fs::read_to_string(status)
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Seccomp:") && l.split_whitespace().nth(1) != Some("0"))
}

/// The reason every connection is TCP on a kernel without SMC (on an SMC kernel the reasons
/// depend on the set-up: the VM checks them).
fn expected_reason() -> &'static str {
    "EAFNOSUPPORT the kernel has no AF_SMC"
}

#[test]
fn exit_summary_counts_each_connection_and_names_the_reason() {
    let mut c = smcrun();
    c.env("SMCRUN_REPORT", "1")
        .arg(bin("sockcheck"))
        .args(["conns", "2"]);
    let dir = private_xdg("summary");
    let (_, err, o) = run(in_xdg(c, &dir));
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("smcrun: pid "))
        .expect(&err);
    assert!(line.contains(" sockcheck: 4 connections, "), "{line}");
    if !kernel_has_af_smc() {
        assert!(line.contains("0 SMC-R, 4 TCP"), "{line}");
        assert!(line.contains(&format!("({}", expected_reason())), "{line}");
    } else {
        // On an SMC kernel the split depends on the set-up (the VM checks it); it must add up.
        assert!(!line.contains("not classified"), "{line}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ps_and_why_show_a_running_program_then_mark_it_dead_after_sigkill() {
    let dir = private_xdg("ps");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg(bin("sockcheck")).args(["conns", "2", "wait"]);
    let (mut child, pid) = start_ready(c);
    // The report appears within about a second of the connections.
    let is_it = |e: &serde_json::Value| e["pid"] == pid && e["report"]["connections"]["total"] == 4;
    let entry = ps_until(&dir, "the report of 4 connections", |l| l.iter().any(is_it))
        .into_iter()
        .find(is_it)
        .unwrap();
    assert_eq!(entry["state"], "running");
    assert_eq!(entry["program"], "sockcheck");
    let c = &entry["report"]["connections"];
    let sum: u64 = [
        "smc_r",
        "smc_d",
        "smc_unknown",
        "tcp",
        "pending",
        "unclassified",
    ]
    .iter()
    .map(|k| c[k].as_u64().unwrap())
    .sum();
    assert_eq!(sum, 4, "the counts add up to the connections: {c}");
    if !kernel_has_af_smc() {
        assert_eq!(c["tcp"], 4);
        assert_eq!(entry["report"]["reasons"][0]["errno"], "EAFNOSUPPORT");
    }
    // why: each connection with its mode and reason.
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["why", &pid.to_string()]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let rows: Vec<_> = out
        .lines()
        .filter(|l| l.starts_with("client ") || l.starts_with("server "))
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    if !kernel_has_af_smc() {
        assert!(
            rows.iter()
                .all(|r| r.contains(" TCP ") && r.contains("EAFNOSUPPORT")),
            "{out}"
        );
    }
    // SIGKILL: no exit handler runs; ps says dead once and cleans up.
    child.kill().unwrap();
    child.wait().unwrap();
    let list = ps_json(&dir);
    let e = list
        .iter()
        .find(|e| e["pid"] == pid)
        .expect("the dead process is still listed once");
    assert_eq!(e["state"], "dead");
    assert!(
        !ps_json(&dir).iter().any(|e| e["pid"] == pid),
        "ps must remove a dead process's report"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The descriptors of thread `tid` of process `pid`, with what each one is.
fn task_fds(pid: u32, tid: &str) -> Vec<(i32, String)> {
    let dir = format!("/proc/{pid}/task/{tid}/fd");
    let mut fds: Vec<(i32, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let n: i32 = e.file_name().to_str()?.parse().ok()?;
            let what = std::fs::read_link(e.path()).ok()?;
            Some((n, what.display().to_string()))
        })
        .collect();
    fds.sort();
    fds
}

/// Issue 23: a single-threaded program under the shim keeps its descriptor table to itself. The
/// sidecar thread gives itself an empty table (0 to 2 are a pidfd of the process, none of the
/// program's files), and still classifies and writes the report through duplicates it takes with
/// pidfd_getfd. Under a seccomp filter (a container engine's) it stays in the program's table.
#[test]
fn the_sidecar_keeps_a_descriptor_table_of_its_own() {
    let dir = private_xdg("own-table");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg(bin("sockcheck")).args(["conns", "2", "wait"]);
    let (mut child, pid) = start_ready(c);
    // the report, written by the sidecar, counts every connection
    ps_until(&dir, "the report of 4 connections", |l| {
        l.iter()
            .any(|e| e["pid"] == pid && e["report"]["connections"]["total"] == 4)
    });
    let tasks = tasks(pid);
    let sidecar = &tasks
        .iter()
        .find(|(_, c)| c == "smcrun-sidecar")
        .unwrap_or_else(|| panic!("no sidecar thread: {tasks:?}"))
        .0;
    let main = task_fds(pid, &pid.to_string());
    let own = task_fds(pid, sidecar);
    let filtered = seccomp_filtered(&format!("/proc/{pid}/status"));
    if filtered {
        // the same table (read twice, a moment apart: the program's sockets are in both)
        let sockets = |fds: &[(i32, String)]| -> Vec<(i32, String)> {
            fds.iter()
                .filter(|(n, w)| *n < 100 && w.starts_with("socket:"))
                .cloned()
                .collect()
        };
        assert!(
            !sockets(&main).is_empty() && sockets(&own) == sockets(&main),
            "under a seccomp filter the sidecar shares the table: {own:?} / {main:?}"
        );
    } else {
        let ids: Vec<i32> = own.iter().map(|(n, _)| *n).collect();
        assert_eq!(ids, [0, 1, 2], "the sidecar's table: {own:?}");
        assert!(
            own.iter().all(|(_, w)| w == "anon_inode:[pidfd]"),
            "the sidecar's table: {own:?}"
        );
        assert!(
            main.iter().any(|(_, w)| w.starts_with("socket:")),
            "the program's table: {main:?}"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// The threads of process `pid`: (tid, name).
fn tasks(pid: u32) -> Vec<(String, String)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let t = e.ok()?.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/comm")).ok()?;
            Some((t, comm.trim().to_string()))
        })
        .collect()
}

/// A program that installs a seccomp filter on every thread (TSYNC) after its sidecar gave
/// itself a table of its own: the sidecar stops before its next call (a filter may kill the
/// process on a call it does not list) and the program runs on. A sidecar that started under a
/// filter shares the program's table and goes on.
#[test]
fn the_sidecar_stops_when_a_seccomp_filter_reaches_it() {
    let dir = private_xdg("seccomp-late");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg("-dd")
        .arg(bin("sockcheck"))
        .args(["conns", "2", "seccomp"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = reaped(c.stdout(Stdio::piped()).spawn().unwrap());
    let pid = child.id();
    assert_eq!(read_line(&mut child), format!("ready pid={pid} more=4"));
    let started_filtered = seccomp_filtered("/proc/self/status");
    let start = Instant::now();
    let sidecar = || tasks(pid).iter().any(|(_, c)| c == "smcrun-sidecar");
    if started_filtered {
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            sidecar(),
            "a sidecar that shares the table goes on: {:?}",
            tasks(pid)
        );
    } else {
        while sidecar() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the sidecar still runs under the filter: {:?}",
                tasks(pid)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // the program lives on, and ends normally; its exit summary (SMCRUN_DEBUG=2) says which
    // descriptors its sidecar had
    assert!(child.try_wait().unwrap().is_none(), "the program ended");
    child.stdin.as_mut().unwrap().write_all(b"end\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let said = if started_filtered {
        "the sidecar's descriptors: the program's descriptor table (a seccomp filter is installed)"
    } else {
        "the sidecar's descriptors: none: it stopped (a seccomp filter reached it)"
    };
    let summary = err
        .lines()
        .find(|l| l.contains("]: summary: "))
        .expect(&err);
    assert!(summary.ends_with(said), "{summary}");
    // the exit handler wrote the final report, every connection in it
    let r = final_report(&dir, pid);
    assert_eq!(r["connections"]["total"], 8, "{r}");
    if !started_filtered {
        assert!(
            r["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("a seccomp filter was installed")),
            "{r}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_forked_child_gets_its_own_report() {
    let dir = private_xdg("fork");
    let mut c = in_xdg(smcrun(), &dir);
    c.env("SMCRUN_REPORT", "1")
        .arg(bin("sockcheck"))
        .args(["conns", "3", "fork"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let child = value(&out, "child pid")
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let parent = value(&out, "parent pid")
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let summaries: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("smcrun: pid "))
        .collect();
    assert_eq!(summaries.len(), 2, "{err}");
    for pid in [child, parent] {
        let l = summaries
            .iter()
            .find(|l| l.starts_with(&format!("smcrun: pid {pid} ")))
            .unwrap_or_else(|| panic!("no summary for {pid}: {err}"));
        assert!(
            l.contains(": 6 connections"),
            "each process counts only its own: {l}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn exec_keeps_the_pid_and_the_new_program_reports() {
    let dir = private_xdg("exec");
    let mut c = in_xdg(smcrun(), &dir);
    let script = format!("exec {} conns 2", bin("sockcheck").display());
    c.env("SMCRUN_REPORT", "1").args(["sh", "-c", &script]);
    let child = c.stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("smcrun: pid {pid} sockcheck: 4 connections")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sixty_four_threads_connecting_at_once_are_all_counted() {
    let dir = private_xdg("threads");
    let mut c = in_xdg(smcrun(), &dir);
    c.env("SMCRUN_REPORT", "1")
        .arg(bin("sockcheck"))
        .args(["conns", "64", "threads"]);
    let (_, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("smcrun: pid "))
        .expect(&err);
    assert!(line.contains(": 128 connections"), "{line}");
    assert!(
        !line.contains("dropped") && !line.contains("not classified"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_run_directory_refuses_a_planted_symlink() {
    let dir = private_xdg("symlink");
    let run_dir = dir.join("smcrun");
    std::fs::create_dir(&run_dir).unwrap();
    std::fs::set_permissions(
        &run_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let victim = dir.join("victim");
    let mut child = in_xdg(smcrun(), &dir)
        .arg(bin("sockcheck"))
        .args(["conns", "1", "stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert_eq!(read_line(&mut child), format!("pid={pid}"));
    std::os::unix::fs::symlink(&victim, run_dir.join(format!("{pid}.json"))).unwrap();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(read_line(&mut child), format!("ready pid={pid}"));
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!victim.exists(), "the symlink was followed");
    assert!(
        err.contains("refusing"),
        "one warning naming the refusal: {err}"
    );
    assert_eq!(
        err.matches("warning: no per-process report").count(),
        1,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_run_directory_open_to_others_is_refused() {
    let dir = private_xdg("perm");
    let run_dir = dir.join("smcrun");
    std::fs::create_dir(&run_dir).unwrap();
    std::fs::set_permissions(
        &run_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mut c = in_xdg(smcrun(), &dir);
    c.arg(bin("sockcheck")).args(["conns", "1"]);
    let (_, err, o) = run(c);
    assert!(o.status.success());
    assert!(err.contains("expected 700"), "{err}");
    assert_eq!(
        std::fs::read_dir(&run_dir).unwrap().count(),
        0,
        "nothing may be written there"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// What a program runs with is in its report and everywhere it is read: `ps` and `why` (text and
/// JSON) and the exporter's `smcrun_process_settings_info`; the policy as its canonical text.
#[test]
fn the_mode_fallback_and_policy_in_effect_are_shown() {
    let dir = private_xdg("settings");
    let mut c = in_xdg(smcrun(), &dir);
    c.args([
        "--mode",
        "smc",
        "--fallback",
        "tcp",
        "--policy",
        "tcp  port 22 ; smc",
    ])
    .arg(bin("sockcheck"))
    .args(["conns", "1", "wait"]);
    let (mut child, pid) = start_ready(c);
    let is_it = |e: &serde_json::Value| e["pid"] == pid && e["report"].is_object();
    let entry = ps_until(&dir, "a report", |l| l.iter().any(is_it))
        .into_iter()
        .find(is_it)
        .unwrap();
    let r = &entry["report"];
    assert_eq!(r["mode"], "smc", "{r}");
    assert_eq!(r["fallback"], "tcp", "{r}");
    assert_eq!(r["policy"], "tcp port 22; smc", "{r}");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg("ps");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let header = out.lines().next().unwrap();
    assert!(
        header.contains(" MODE ") && header.contains(" POLICY "),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{pid} ")))
        .expect(&out);
    assert!(
        row.contains(" smc/tcp ") && row.contains(" tcp port 22; smc "),
        "{row}"
    );
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["why", &pid.to_string()]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("\nruns with: mode smc, fallback tcp, policy \"tcp port 22; smc\"\n"),
        "{out}"
    );
    let mut c = in_xdg(smcrun(), &dir);
    c.args(["why", "-j", &pid.to_string()]);
    let (out, _, _) = run(c);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let report = if v["report"].is_object() {
        &v["report"]
    } else {
        &v
    };
    assert_eq!(report["policy"], "tcp port 22; smc", "{v}");
    let mut c = in_xdg(smcrun(), &dir);
    c.arg("metrics");
    let (out, err, _) = run(c);
    let want = format!(
        "smcrun_process_settings_info{{pid=\"{pid}\",program=\"sockcheck\",mode=\"smc\",fallback=\"tcp\",policy=\"tcp port 22; smc\"}} 1"
    );
    assert!(out.lines().any(|l| l == want), "no {want} in:\n{out}{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// glibc ends a process when its last thread ends. A program whose main thread leaves with
/// pthread_exit while a worker goes on must end when the worker does, with the worker's exit
/// (status 0, the exit handlers run, C's stdio flushed): the sidecar is a thread too and must not
/// keep the process alive. Both orders: the sidecar starting after the main thread left, and
/// running before (`early`: on this host in a descriptor table of its own, which goes with the
/// main thread, so the sidecar is replaced by one in the program's table).
#[test]
fn a_program_whose_main_thread_leaves_first_ends_with_its_last_thread() {
    let filtered = seccomp_filtered("/proc/self/status");
    for early in [false, true] {
        let dir = private_xdg(if early {
            "main-exits-early"
        } else {
            "main-exits"
        });
        let mut c = in_xdg(smcrun(), &dir);
        c.env("SMCRUN_REPORT", "1").env("SMCRUN_DEBUG", "2");
        c.arg(bin("main-exits")).arg("3");
        if early {
            c.arg("early");
        }
        // Without the fix the process never ends: its main thread a zombie, the sidecar asleep.
        let (out, err, o) = run_within(c, Duration::from_secs(20));
        assert!(o.status.success(), "early={early}: {:?}\n{err}", o.status);
        // the exit handler ran with room for its 1 MiB and the main thread's signal mask
        let main_mask = out.lines().find_map(|l| l.strip_prefix("main SigBlk "));
        let handler_mask = out
            .lines()
            .find_map(|l| l.strip_prefix("exit handler: 1048576 SigBlk "));
        assert!(
            main_mask.is_some() && main_mask == handler_mask,
            "early={early}: the exit handler did not run in a thread like the program's: {out:?}\n{err}"
        );
        let pid = out
            .lines()
            .find_map(|l| l.strip_prefix("made 3 pid="))
            .and_then(|l| l.trim().parse::<u32>().ok())
            .unwrap_or_else(|| {
                panic!("early={early}: the worker's unflushed line is not out: {out:?}\n{err}")
            });
        let line = summaries(&err)
            .into_iter()
            .find(|l| l.starts_with(&format!("smcrun: pid {pid} ")))
            .unwrap_or_else(|| panic!("early={early}: no exit summary for {pid}:\n{err}"));
        assert!(line.contains(": 6 connections,"), "early={early}: {line}");
        // (under a seccomp filter, podman's in tests/fresh, the sidecar never leaves the table)
        let why = if filtered {
            "(a seccomp filter is installed)"
        } else {
            "(the main thread left)"
        };
        assert!(
            err.contains(&format!(
                "the sidecar's descriptors: the program's descriptor table {why}"
            )),
            "early={early}: {err}"
        );
        let r = final_report(&dir, pid);
        assert_eq!(r["connections"]["total"], 6, "early={early}: {r}");
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The kernel enters a user or mount namespace only for a process with one thread, and the
/// runtime's sidecar is a thread: without the runtime stopping it around those calls, `ns-enter`'s
/// setns and unshare fail under smcrun with EINVAL (22) where they succeed without it. A vfork
/// child's unshare before them must leave its parent's sidecar running.
#[test]
fn entering_namespaces_gets_the_kernels_answer_it_would_without_smcrun() {
    ensure_built();
    let lines = |out: &str, key: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
            .collect()
    };
    // the answers without smcrun (in a container without CAP_SYS_ADMIN both are refused)
    let (plain, err, o) = run_within(
        std::process::Command::new(bin("ns-enter")),
        Duration::from_secs(20),
    );
    assert!(o.status.success(), "{:?}\n{err}", o.status);
    assert_eq!(lines(&plain, "threads "), ["1", "1"], "{plain}");
    assert_eq!(lines(&plain, "after-vfork threads "), ["1"], "{plain}");

    let dir = private_xdg("ns-enter");
    let mut c = in_xdg(smcrun(), &dir);
    c.env("SMCRUN_REPORT", "1").arg(bin("ns-enter"));
    let (out, err, o) = run_within(c, Duration::from_secs(20));
    assert!(o.status.success(), "{:?}\n{err}", o.status);
    // the sidecar ran before the calls, and runs again after them
    assert_eq!(lines(&out, "threads "), ["2", "2"], "{out}\n{err}");
    assert_eq!(lines(&out, "after-vfork threads "), ["2"], "{out}\n{err}");
    for call in ["setns-mnt ", "unshare-user ", "vfork-unshare-user "] {
        assert_eq!(
            lines(&out, call),
            lines(&plain, call),
            "{call}: {out}\n{err}"
        );
    }
    // its connections before and after the calls, all counted
    let pid: u32 = lines(&out, "done pid=")[0].parse().expect("pid");
    let line = summaries(&err)
        .into_iter()
        .find(|l| l.starts_with(&format!("smcrun: pid {pid} ")))
        .unwrap_or_else(|| panic!("no exit summary for {pid}:\n{err}"));
    assert!(line.contains(": 8 connections,"), "{line}");
    assert_eq!(final_report(&dir, pid)["connections"]["total"], 8);
    let _ = std::fs::remove_dir_all(dir);
}
