//! What smcrun writes, and who can make it write elsewhere: no setuid bits, sysctls only with the
//! privilege to set them, report directories 0700 and files 0600 of their user, nothing planted or
//! forged by another user shows in someone else's (or root's) view, and no variable sends a
//! process's reports where another user chose. The other users are uids without a passwd entry,
//! through `setpriv`.

mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// `PROGRAM ARGS` as uid (and gid) `uid`, with the test's variables cleaned.
fn as_user(uid: u32, program: &Path) -> Command {
    need("setpriv");
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid",
        &uid.to_string(),
        "--regid",
        &uid.to_string(),
        "--clear-groups",
    ])
    .arg(program)
    .env_remove("LD_PRELOAD")
    .env_remove("XDG_RUNTIME_DIR")
    .env_remove("SMCRUN_REPORT");
    c
}

/// The default run directory of a non-root user without XDG_RUNTIME_DIR, emptied first.
fn tmp_dir_of(uid: u32) -> PathBuf {
    let d = PathBuf::from(format!("/tmp/smcrun-{uid}"));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_file(&d);
    d
}

/// A directory made by (and owned by) `uid`, with `mode`.
fn dir_of(uid: u32, name: &str, mode: u32) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-sec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

fn sockcheck_as(uid: u32) -> Command {
    let mut c = as_user(uid, &bin_for_anyone("smcrun"));
    c.arg(bin_for_anyone("sockcheck")).args(["conns", "2"]);
    c
}

#[test]
fn nothing_is_installed_setuid() {
    for f in ["smcrun", "libsmcrun_shim.so"] {
        let mode = std::fs::metadata(bin(f)).unwrap().mode();
        assert_eq!(mode & 0o6000, 0, "{f} has mode {mode:o}");
    }
    // What a user is told to run: the README and the user guide.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![repo.join("README.md")];
    for e in std::fs::read_dir(repo.join("docs/src/guide")).unwrap() {
        pages.push(e.unwrap().path());
    }
    assert!(pages.len() > 5, "the user guide is missing: {pages:?}");
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for bad in ["chmod u+s", "chmod 4755", "chmod +s", "setcap cap_"] {
            assert!(
                !text.contains(bad),
                "{} installs with {bad}",
                page.display()
            );
        }
    }
}

#[test]
fn sysctls_are_written_only_with_the_privilege_and_otherwise_refused_by_name() {
    let mut c = as_user(54301, &bin_for_anyone("smcrun"));
    c.args(["--sysctl", "net.core.somaxconn=1024"])
        .arg(bin_for_anyone("sockcheck"))
        .args(["exit", "7"]);
    let (_, err, o) = run_within(c, LIMIT);
    assert_eq!(o.status.code(), Some(1), "nothing may start: {err}");
    assert_eq!(
        err.trim(),
        "smcrun: cannot set net.core.somaxconn: not permitted (needs root / CAP_NET_ADMIN); \
         nothing was started (use --sysctl-best-effort to go on)"
    );
}

#[test]
fn a_users_run_directory_is_0700_and_its_reports_0600() {
    let uid = 54302;
    let d = tmp_dir_of(uid);
    let (_, err, o) = run_within(sockcheck_as(uid), LIMIT);
    assert!(o.status.success(), "{err}");
    let m = std::fs::symlink_metadata(&d).unwrap();
    assert!(m.is_dir());
    assert_eq!((m.uid(), m.mode() & 0o7777), (uid, 0o700));
    let files: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(files.len(), 1);
    let m = files[0].metadata().unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777, m.nlink()), (uid, 0o600, 1));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn another_user_cannot_take_a_users_run_directory_first() {
    let (victim, other) = (54303, 54304);
    // The other user makes the victim's directory first, as theirs and open to the victim, with a
    // report in it.
    let d = tmp_dir_of(victim);
    std::fs::create_dir(&d).unwrap();
    std::fs::write(
        d.join("1.json"),
        r#"{"version": 2, "seq": 1, "seq_end": 1, "pid": 1}"#,
    )
    .unwrap();
    for p in [d.clone(), d.join("1.json")] {
        std::os::unix::fs::chown(&p, Some(other), Some(other)).unwrap();
    }
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (out, err, o) = run_within(sockcheck_as(victim), LIMIT);
    assert!(o.status.success(), "the program runs: {err}\n{out}");
    assert!(
        err.contains(&format!("belongs to uid {other}, not to this user")),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        1,
        "nothing written there"
    );
    // The victim's view refuses it, and shows nothing from it.
    let mut c = as_user(victim, &bin_for_anyone("smcrun"));
    c.args(["ps", "--json"]);
    let (out, err, o) = run_within(c, LIMIT);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains(&format!("belongs to uid {other}")), "{err}");
    assert!(!out.contains("\"pid\""), "{out}");

    // A symlink in its place, to a directory of the other user: refused, nothing written through.
    std::fs::remove_dir_all(&d).unwrap();
    let target = dir_of(other, "target", 0o777);
    std::os::unix::fs::symlink(&target, &d).unwrap();
    let (_, err, o) = run_within(sockcheck_as(victim), LIMIT);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("not a directory (a symlink?)"), "{err}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    std::fs::remove_file(&d).unwrap();
    std::fs::remove_dir_all(&target).unwrap();
}

#[test]
fn a_planted_run_directory_closed_to_the_user_is_named_by_its_owner() {
    let (victim, other) = (54308, 54309);
    // The other user makes the victim's directory first, 0700: the victim cannot even open it.
    let d = tmp_dir_of(victim);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(other), Some(other)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (out, err, o) = run_within(sockcheck_as(victim), LIMIT);
    assert!(o.status.success(), "the program runs: {err}\n{out}");
    assert!(
        err.contains(&format!("belongs to uid {other}, not to this user")),
        "{err}"
    );
    assert!(!err.contains("EACCES"), "{err}");
    let mut c = as_user(victim, &bin_for_anyone("smcrun"));
    c.args(["ps"]);
    let (out, err, o) = run_within(c, LIMIT);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains(&format!("belongs to uid {other}")), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_run_directory_of_another_user_cannot_be_written_into() {
    let (owner, other) = (54305, 54306);
    let d = tmp_dir_of(owner);
    let (_, err, o) = run_within(sockcheck_as(owner), LIMIT);
    assert!(o.status.success(), "{err}");
    // The other user can neither list it nor plant a report in it.
    let mut c = as_user(other, Path::new("/bin/sh"));
    c.args([
        "-c",
        &format!("ls {0} || :; echo x > {0}/1.json", d.display()),
    ]);
    let (out, err, o) = run_within(c, LIMIT);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!d.join("1.json").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn roots_view_never_shows_a_report_another_user_planted() {
    let other = 54307;
    // Another user's private directory with a forged report in its smcrun/ (both theirs, 0700).
    let x = dir_of(other, "forged", 0o700);
    let planted = x.join("smcrun");
    std::fs::create_dir(&planted).unwrap();
    let forged = format!(
        r#"{{"version": 2, "seq": 1, "seq_end": 1, "pid": {0}, "program": "forged-by-{other}", "connections": {{"total": 99}}}}"#,
        std::process::id()
    );
    std::fs::write(planted.join(format!("{}.json", std::process::id())), forged).unwrap();
    for p in [
        planted.clone(),
        planted.join(format!("{}.json", std::process::id())),
    ] {
        std::os::unix::fs::chown(&p, Some(other), Some(other)).unwrap();
    }
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Root with that directory as XDG_RUNTIME_DIR (an environment inherited from the user):
    // root's tools do not read it, and root's programs do not write there.
    let root_xdg = |mut c: Command| {
        c.env("XDG_RUNTIME_DIR", &x);
        c
    };
    let mut c = root_xdg(smcrun());
    c.args(["ps", "--json"]);
    let (out, err, _) = run_within(c, LIMIT);
    assert!(
        !out.contains("forged-by") && !err.contains("forged-by"),
        "{out}{err}"
    );
    let mut c = root_xdg(smcrun());
    c.args(["why", &std::process::id().to_string()]);
    let (out, err, _) = run_within(c, LIMIT);
    assert!(
        !out.contains("forged-by") && !out.contains("99"),
        "{out}{err}"
    );
    let mut c = root_xdg(smcrun());
    c.arg(bin_for_anyone("sockcheck")).args(["conns", "1"]);
    let (_, err, o) = run_within(c, LIMIT);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        std::fs::read_dir(&planted).unwrap().count(),
        1,
        "root wrote into it"
    );
    let _ = std::fs::remove_dir_all(&x);
}

#[test]
fn no_variable_sends_reports_where_another_user_chose() {
    let (user, other) = (54308, 54309);
    let own = tmp_dir_of(user);
    // XDG_RUNTIME_DIR set to a directory of another user that anyone may write into.
    let theirs = dir_of(other, "theirs", 0o777);
    let mut c = sockcheck_as(user);
    c.env("XDG_RUNTIME_DIR", &theirs);
    let (_, err, o) = run_within(c, LIMIT);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        std::fs::read_dir(&theirs).unwrap().count(),
        0,
        "the report went into the other user's directory"
    );
    // It went to the user's own default instead.
    assert_eq!(std::fs::read_dir(&own).unwrap().count(), 1, "{err}");
    std::fs::remove_dir_all(&own).unwrap();
    std::fs::remove_dir_all(&theirs).unwrap();
}
