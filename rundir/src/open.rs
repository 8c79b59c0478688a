//! Opening the run directory and checking the open directory itself: a real directory of its
//! user, closed to others. The writer and the reader both open it here.

use crate::refusal::{Refusal, Stage};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{self, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CStr;

/// The calling process's effective uid.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks an open directory: a directory of user `owner`, closed to others.
pub(crate) fn check_dir_of(fd: BorrowedFd<'_>, owner: u32) -> Result<fs::Stat, Refusal> {
    let st = fs::fstat(fd).map_err(|e| Refusal::Io(Stage::StatDir, e.raw_os_error()))?;
    let mode = st.st_mode as u32;
    if mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(Refusal::NotDirectory);
    }
    if st.st_uid != owner {
        return Err(Refusal::Owner(st.st_uid));
    }
    if mode & 0o077 != 0 {
        return Err(Refusal::Mode(mode & 0o777));
    }
    Ok(st)
}

/// Opens (creating it if needed) and checks the run directory at `path`.
pub fn open_dir(path: &CStr, create: bool) -> Result<OwnedFd, Refusal> {
    if create {
        match fs::mkdir(path, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Refusal::Io(Stage::CreateDir, e.raw_os_error())),
        }
    }
    open_dir_of(path, euid())
}

/// Opens and checks the run directory of user `owner` at `path`. One that cannot be opened
/// (EACCES: another user's, closed to us) is named by its owner when `lstat` can tell it.
pub(crate) fn open_dir_of(path: &CStr, owner: u32) -> Result<OwnedFd, Refusal> {
    let fd = fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        // O_NOFOLLOW on a symlink, O_DIRECTORY on something else.
        Errno::LOOP | Errno::NOTDIR => Refusal::NotDirectory,
        Errno::ACCESS => match fs::lstat(path) {
            Ok(st) if st.st_uid != owner => Refusal::Owner(st.st_uid),
            _ => Refusal::Io(Stage::OpenDir, e.raw_os_error()),
        },
        e => Refusal::Io(Stage::OpenDir, e.raw_os_error()),
    })?;
    check_dir_of(fd.as_fd(), owner)?;
    Ok(fd)
}
