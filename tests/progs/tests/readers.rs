//! What `smcrun ps`, `why` and `metrics` make of what they read: a run directory holds files that
//! programs (some now running as other users) wrote, and a report's strings are the program's
//! choice. A FIFO or a huge file under a report's name is refused at once, a name with control
//! characters cannot paint the terminal or fake a row, and a server started through a uid switch
//! and an exec (`setpriv`, `runuser`) is seen whole by root.

mod common;
use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// A private XDG_RUNTIME_DIR with its smcrun/ made (0700), both emptied first.
fn run_dir(name: &str) -> (PathBuf, PathBuf) {
    let xdg = private_xdg(name);
    let d = xdg.join("smcrun");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    (xdg, d)
}

fn view(xdg: &Path, args: &[&str]) -> (String, String, std::process::Output) {
    let mut c = smcrun();
    c.env("XDG_RUNTIME_DIR", xdg).args(args);
    run_within(c, LIMIT)
}

#[test]
fn a_fifo_or_a_huge_file_named_like_a_report_is_refused_without_hanging() {
    let (xdg, d) = run_dir("fifo");
    // Named after a live process (this test), so that ps shows why it skips it.
    let me = std::process::id();
    let report = d.join(format!("{me}.json"));
    let c = std::ffi::CString::new(report.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (out, err, o) = view(&xdg, &["ps"]);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{me}.json: it is a FIFO, not a regular file")),
        "{err}"
    );
    assert!(out.contains("no programs under smcrun"), "{out}");
    let (_, err, o) = view(&xdg, &["why", &me.to_string()]);
    assert!(!o.status.success());
    assert!(err.contains("it is a FIFO, not a regular file"), "{err}");
    // The exporter's one-shot scrape: counted as unreadable, never waited on.
    let (out, err, _) = view(&xdg, &["metrics"]);
    assert!(
        out.lines().any(|l| l == "smcrun_processes_not_exported 1"),
        "{err}\n{out}"
    );
    assert!(report.exists(), "a live pid's file is left alone");
    std::fs::remove_file(&report).unwrap();

    // 300 MB (sparse): refused by its size, not read.
    std::fs::File::create(&report)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let t = Instant::now();
    let (_, err, o) = view(&xdg, &["ps"]);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{me}.json: it is {} bytes, more than the {} bytes expected at most: not a report of smcrun's",
            300u64 << 20,
            4u64 << 20
        )),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let (out, _, _) = view(&xdg, &["metrics"]);
    assert!(out.lines().any(|l| l == "smcrun_processes_not_exported 1"));
    let _ = std::fs::remove_dir_all(&xdg);
}

#[test]
fn a_program_name_with_control_characters_is_shown_escaped() {
    let (xdg, _) = run_dir("escape");
    let links = xdg.join("bin");
    std::fs::create_dir(&links).unwrap();
    let evil = links.join("ev\u{1b}[31mil\nFAKE");
    std::os::unix::fs::symlink(bin("sockcheck"), &evil).unwrap();
    let mut c = smcrun();
    c.env("XDG_RUNTIME_DIR", &xdg)
        .arg(&evil)
        .args(["conns", "1", "wait"]);
    let (child, pid) = start_ready(c);
    let start = Instant::now();
    let rows = loop {
        let (out, err, o) = view(&xdg, &["ps"]);
        assert!(o.status.success(), "{err}");
        if out.contains(" 1 ") || start.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!rows.contains('\u{1b}'), "{rows:?}");
    assert_eq!(rows.lines().count(), 2, "a header and one row: {rows:?}");
    assert!(rows.contains("ev\\e[31mil\\nFAKE"), "{rows:?}");
    let (out, err, o) = view(&xdg, &["why", &pid.to_string()]);
    assert!(o.status.success(), "{err}");
    assert!(
        !out.contains('\u{1b}') && !out.contains("\nFAKE"),
        "{out:?}"
    );
    assert!(out.contains("ev\\e[31mil\\nFAKE"), "{out:?}");
    // JSON keeps the name as it is (escaped the JSON way).
    let list = ps_json(&xdg);
    let e = list.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(e["program"], "ev\u{1b}[31mil\nFAKE");
    drop(child);
    let _ = std::fs::remove_dir_all(&xdg);
}

/// Root runs a server through `setpriv` to another uid: the uid switch registers the process in
/// root's run directory, then the exec'd server (whose runtime starts afresh, as that uid) writes
/// its numbers into its own uid's directory. Root's `ps` and `why` show those numbers.
#[test]
fn roots_view_shows_a_server_that_switched_uid_and_exec_d() {
    if !nix_is_root() {
        eprintln!("needs root (setpriv to another uid); skipped");
        return;
    }
    let uid = 54321u32;
    let theirs = PathBuf::from(format!("/tmp/smcrun-{uid}"));
    let _ = std::fs::remove_dir_all(&theirs);
    let xdg = private_xdg("switched");
    let mut c = Command::new(bin_for_anyone("smcrun"));
    for v in ["LD_PRELOAD", "SMCRUN_SHIM", "SMCRUN_REPORT"] {
        c.env_remove(v);
    }
    let id = uid.to_string();
    c.env("XDG_RUNTIME_DIR", &xdg)
        .args(["setpriv", "--reuid", &id, "--regid", &id, "--clear-groups"])
        .arg(bin_for_anyone("sockcheck"))
        .args(["conns", "2", "wait"])
        .stdin(Stdio::null());
    let (child, pid) = start_ready(c);
    let start = Instant::now();
    let entry = loop {
        let list = ps_json(&xdg);
        let e = list.iter().find(|e| e["pid"] == pid).cloned();
        if let Some(e) = e
            .as_ref()
            .filter(|e| e["report"]["connections"]["total"] == 4)
        {
            break e.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "root's view has no numbers for {pid}: {e:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(entry["uid"], uid);
    assert_eq!(entry["state"], "running");
    let (out, err, o) = view(&xdg, &["why", &pid.to_string()]);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("sockcheck: 4 connections"), "{out}");
    assert!(!out.contains("no connections yet"), "{out}");
    drop(child);
    let _ = std::fs::remove_dir_all(&theirs);
    let _ = std::fs::remove_dir_all(&xdg);
    let _ = std::io::stdout().flush();
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
