//! Where per-process reports live, and how they are written and read safely.
//!
//! The directory is `$XDG_RUNTIME_DIR/smcrun/`, else `/run/smcrun/` for root, else
//! `/tmp/smcrun-<uid>/`. It must be a real directory (not a symlink) owned by the user with no
//! access for others (0700); a report file must be a regular file owned by the user (0600). Anything
//! else planted there is refused, never followed: a shared directory like /tmp must not let another
//! user redirect our writes.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The run directory for the current user (not created).
pub fn run_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        let x = PathBuf::from(x);
        if x.is_absolute() {
            return x.join("smcrun");
        }
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        PathBuf::from("/run/smcrun")
    } else {
        PathBuf::from(format!("/tmp/smcrun-{uid}"))
    }
}

/// Creates the run directory if needed and checks that it is safe to use.
pub fn ensure(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    check_dir(dir)
}

/// Checks, without following links, that `dir` is ours and private.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !m.file_type().is_dir() {
        return Err(format!(
            "{} is not a directory (a symlink?); refusing it",
            dir.display()
        ));
    }
    if m.uid() != uid {
        return Err(format!(
            "{} belongs to uid {}, not {uid}; refusing it",
            dir.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(format!(
            "{} has mode {:o}, open to other users; expected 700",
            dir.display(),
            m.mode() & 0o777
        ));
    }
    Ok(())
}

/// The report file of process `pid`.
pub fn report_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.json"))
}

/// Replaces process `pid`'s report with `bytes`: written to a private temporary file, then renamed
/// over the report. A report path that is anything but a regular file of ours is refused.
pub fn write_report(dir: &Path, pid: u32, bytes: &[u8]) -> Result<(), String> {
    let path = report_path(dir, pid);
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if !m.file_type().is_file() || m.uid() != uid => {
            return Err(format!(
                "{} is not a regular file of ours (a planted symlink?); refusing to write it",
                path.display()
            ))
        }
        _ => {}
    }
    let tmp = dir.join(format!(".{pid}.json.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot rename to {}: {e}", path.display()))
}

/// The pids that have a report in `dir`.
pub fn list(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Reads a report, refusing anything that is not a regular file of ours.
pub fn read_report(dir: &Path, pid: u32) -> Result<Vec<u8>, String> {
    let path = report_path(dir, pid);
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: opening a NUL-terminated path read-only without following a final symlink.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "{}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd was just opened and is owned by the File from here on.
    let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let m = f.metadata().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    if !m.is_file() || m.uid() != unsafe { libc::geteuid() } {
        return Err(format!("{} is not a regular file of ours", path.display()));
    }
    std::io::Read::bytes(f)
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|e| e.to_string())
}

/// Removes a report (of a process that is gone).
pub fn remove(dir: &Path, pid: u32) {
    let _ = std::fs::remove_file(report_path(dir, pid));
}
