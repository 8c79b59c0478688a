//! smcrun's entry point, in place of the Rust runtime's (`#![no_main]`).
//!
//! Before a Rust `main`, std's start-up finds the main thread's stack guard (glibc's
//! pthread_getattr_np, which reads and parses /proc/self/maps) and maps an alternate signal stack
//! for its stack-overflow message: about 100k instructions and 20 system calls, which every
//! program started under smcrun paid (bench/README.md, "Levers taken, measured"). What smcrun relies
//! on of that start-up is done here, the same way:
//! - SIGPIPE ignored, so a write to a closed pipe is an error the views handle
//!   ([`crate::cmd::format::install_stdout_guard`]); a program smcrun runs gets the disposition
//!   smcrun inherited back before its exec ([`crate::run::signals`]);
//! - descriptors 0, 1 and 2 opened on /dev/null when they are closed, so that no file or socket
//!   smcrun opens takes their place;
//! - a panic out of `main` ends smcrun with status 101, after std's panic message.
//!
//! Left out: the stack-overflow message (an overflow ends smcrun with SIGSEGV instead of SIGABRT
//! after a line), and the name `main` in the panic message of the main thread.

use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// Status of a panic that reached `main`, as std's start-up gives it.
const PANICKED: i32 = 101;

/// The C entry point: the C library calls it once, after the constructors, with the command line.
/// std's own entry point is left out by `#![no_main]`.
// SAFETY: `#![no_main]` leaves `main` undefined; this is its one definition, with the C
// signature the C library's start calls.
// In the unit tests libtest's `main` is the entry point and this one is not exported.
#[allow(unsafe_code)]
#[cfg_attr(not(test), no_mangle)]
#[cfg_attr(test, allow(dead_code))]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    crate::run::signals::ignore_sigpipe();
    standard_fds_open();
    // SAFETY: the C library passes `argc` pointers in `argv`, each to a NUL-terminated string that
    // lives as long as the process (C11 5.1.2.2.1); a null one is skipped all the same.
    #[allow(unsafe_code)]
    let args = (0..usize::try_from(argc).unwrap_or(0))
        .map(|i| unsafe { *argv.add(i) })
        .take_while(|p| !p.is_null())
        .map(|p| OsStr::from_bytes(unsafe { CStr::from_ptr(p) }.to_bytes()).to_owned())
        .collect();
    let status = std::panic::catch_unwind(|| crate::smcrun_main(args)).map_or(PANICKED, status_of);
    // Flushes stdout (std's `exit` does) and runs the C library's exit handlers.
    std::process::exit(status)
}

/// The number `code` stands for. `ExitCode` has no stable getter; every one smcrun makes is
/// `ExitCode::from(u8)`, and they compare by value.
fn status_of(code: ExitCode) -> i32 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .map_or(1, i32::from)
}

/// Descriptors 0-2 that are closed are opened on /dev/null, read-write, in order (each open takes
/// the lowest free number, which is the closed one).
fn standard_fds_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll reads and writes only the three pollfd of `fds`, ours and alive for the call;
    // a timeout of 0 does not block.
    #[allow(unsafe_code)]
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if ready <= 0 {
        return;
    }
    for f in fds.iter().filter(|f| f.revents & libc::POLLNVAL != 0) {
        // Kept open for the life of the process, as std's start-up keeps it.
        match nix::fcntl::open(
            "/dev/null",
            nix::fcntl::OFlag::O_RDWR,
            nix::sys::stat::Mode::empty(),
        ) {
            Ok(fd) if fd == f.fd => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_comes_back() {
        for n in 0..=u8::MAX {
            assert_eq!(status_of(ExitCode::from(n)), i32::from(n));
        }
        assert_eq!(status_of(ExitCode::SUCCESS), 0);
        assert_eq!(status_of(ExitCode::FAILURE), 1);
    }
}
