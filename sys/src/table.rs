//! The calling thread's descriptor table: giving a thread an empty table of its own, and reaching
//! the process's table from there (a pidfd of the process, `pidfd_getfd`).
//!
//! Why: while a descriptor table has one user the kernel looks descriptors up without taking a
//! reference on the file; once a second thread shares it, every descriptor call of every thread
//! takes the slower, counted path (about 60-90 ns per call, bench/run's hooks). A helper thread
//! that gives itself a table of its own leaves the program's table with the users it had.

use crate::errno::Errno;
use crate::sock::{check, close};
use libc::{c_int, c_long, c_uint};

/// Gives the calling thread an empty descriptor table of its own (`close_range(0, ~0U,
/// CLOSE_RANGE_UNSHARE)`, Linux 5.9): the other threads keep theirs, untouched; this thread's
/// descriptor numbers mean nothing in it from now on.
pub fn unshare_empty() -> Result<(), Errno> {
    crate::errno::keep(|| {
        // SAFETY: close_range takes three integers; with CLOSE_RANGE_UNSHARE it closes only in
        // the calling thread's new copy of the table, which holds none of the range.
        check(unsafe {
            libc::syscall(
                libc::SYS_close_range,
                0 as c_uint,
                c_uint::MAX,
                libc::CLOSE_RANGE_UNSHARE,
            )
        })
    })
    .map(drop)
}

/// A pidfd of the calling process (`pidfd_open`, Linux 5.3; close-on-exec), in the calling
/// thread's table.
pub fn pidfd_of_process() -> Result<c_int, Errno> {
    crate::errno::keep(|| {
        // SAFETY: getpid takes nothing and returns an integer.
        let pid = unsafe { libc::syscall(libc::SYS_getpid) };
        // SAFETY: pidfd_open takes two integers and returns a new descriptor or an error.
        check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as c_long, 0 as c_uint) })
    })
    .map(|fd| fd as c_int)
}

/// A duplicate, in the calling thread's table, of the descriptor `fd` of the process `pidfd`
/// refers to (`pidfd_getfd`, Linux 5.6; close-on-exec). On its own process it is always allowed,
/// unless a seccomp filter forbids it. The process's table is its main thread's.
pub fn fetch(pidfd: c_int, fd: c_int) -> Result<c_int, Errno> {
    crate::errno::keep(|| {
        // SAFETY: pidfd_getfd takes three integers and returns a new descriptor or an error.
        check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0 as c_uint) })
    })
    .map(|fd| fd as c_int)
}

/// [`fetch`], then `f` on the duplicate, which is closed after.
pub fn with_fetched<T>(pidfd: c_int, fd: c_int, f: impl FnOnce(c_int) -> T) -> Result<T, Errno> {
    let copy = fetch(pidfd, fd)?;
    let r = f(copy);
    let _ = close(copy);
    Ok(r)
}
