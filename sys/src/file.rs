//! Reading a file whose path another user may have put in place (a config file, a report, a
//! script's interpreter, the shim): opened without blocking (`O_NONBLOCK`, so a FIFO without a
//! writer cannot hang the reader; `O_NOCTTY`, so a terminal is never taken as the controlling
//! one), then checked on the open descriptor to be a regular file, and read up to a bound, so a
//! huge or sparse file costs nothing. For the tools, not for hooks: it allocates.

extern crate std;

use core::fmt;
use std::ffi::CStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::vec::Vec;

/// Why a file that should be a readable regular file is not read.
#[derive(Debug)]
pub enum NotRead {
    /// A system call failed (open, fstat, read).
    Io(std::io::Error),
    /// Not a regular file: what it is ("a FIFO", "a directory", ...).
    NotRegular(&'static str),
    /// Larger than the caller's bound (its size, the bound), in bytes.
    TooBig(u64, u64),
}

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRead::Io(e) => write!(f, "{e}"),
            NotRead::NotRegular(kind) => write!(f, "it is {kind}, not a regular file"),
            NotRead::TooBig(size, limit) => {
                write!(
                    f,
                    "it is {size} bytes, more than the {limit} bytes expected at most"
                )
            }
        }
    }
}

/// What a file of mode `mode` (`st_mode`) is, for messages: "a regular file", "a FIFO", ...
pub fn kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symlink",
        _ => "of an unknown type",
    }
}

/// Opens `path` (relative to `dir`, or to the current directory when `dir` is None) for reading
/// without blocking, and checks that it is a regular file. `follow` false refuses a symlink as the
/// last component (`O_NOFOLLOW`: ELOOP). Returns the file and its status.
pub fn open_regular_at(
    dir: Option<BorrowedFd<'_>>,
    path: &CStr,
    follow: bool,
) -> Result<(File, libc::stat), NotRead> {
    let mut flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a NUL-terminated path; the result is a new descriptor or -1.
    let fd = unsafe { libc::openat(at, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(NotRead::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: an open descriptor and a stat to fill.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(NotRead::Io(std::io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(NotRead::NotRegular(kind(st.st_mode)));
    }
    Ok((file, st))
}

/// Reads an open regular file to its end, refusing one larger than `limit` bytes without reading
/// it (by its size) or after `limit + 1` bytes (one that grows while read).
pub fn read_bounded(file: File, limit: u64) -> Result<Vec<u8>, NotRead> {
    let size = file.metadata().map_err(NotRead::Io)?.len();
    if size > limit {
        return Err(NotRead::TooBig(size, limit));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(NotRead::Io)?;
    if bytes.len() as u64 > limit {
        return Err(NotRead::TooBig(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// [`open_regular_at`] (following symlinks, from the current directory) and [`read_bounded`].
pub fn read_regular(path: &std::path::Path, limit: u64) -> Result<Vec<u8>, NotRead> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        NotRead::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path contains a NUL byte",
        ))
    })?;
    let (file, _) = open_regular_at(None, &c, true)?;
    read_bounded(file, limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(std::format!(
            "smcrun-sys-file-{}-{name}",
            std::process::id()
        ))
    }

    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once() {
        let p = tmp("fifo");
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&p, 10).unwrap_err();
        assert_eq!(e.to_string(), "it is a FIFO, not a regular file");
        std::fs::remove_file(&p).unwrap();
        let e = read_regular(&std::env::temp_dir(), 10).unwrap_err();
        assert_eq!(e.to_string(), "it is a directory, not a regular file");
        let e = read_regular(std::path::Path::new("/dev/null"), 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
    }

    #[test]
    fn a_file_over_the_bound_is_not_read() {
        let p = tmp("big");
        let f = File::create(&p).unwrap();
        f.set_len(1 << 30).unwrap(); // sparse: nothing to read would be cheap either way
        let e = read_regular(&p, 1 << 20).unwrap_err();
        assert!(
            matches!(e, NotRead::TooBig(s, l) if s == 1 << 30 && l == 1 << 20),
            "{e}"
        );
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_regular(&p, 10).unwrap(), b"0123456789");
        assert!(matches!(read_regular(&p, 9), Err(NotRead::TooBig(10, 9))));
        let link = tmp("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let c = std::ffi::CString::new(link.as_os_str().as_encoded_bytes()).unwrap();
        let e = open_regular_at(None, &c, false).unwrap_err();
        assert!(
            matches!(&e, NotRead::Io(io) if io.raw_os_error() == Some(libc::ELOOP)),
            "{e}"
        );
        assert!(open_regular_at(None, &c, true).is_ok());
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_file(&p).unwrap();
    }
}
