//! What is printed when the program exits: the `SMCRUN_REPORT=1` summary line, after the
//! program's own buffered output.

use crate::sidecar;

extern "C" {
    static stdout: *mut libc::FILE;
    fn ftrylockfile(f: *mut libc::FILE) -> libc::c_int;
    fn funlockfile(f: *mut libc::FILE);
    fn fflush_unlocked(f: *mut libc::FILE) -> libc::c_int;
}

/// Flushes the program's stdout before a line of ours goes to stderr (the two are often the same
/// file: `cmd > log 2>&1`), so that ours comes after the program's own output. Only if no other
/// thread holds stdout's lock: an exit handler must not wait for it.
pub fn flush_program_stdout() {
    // SAFETY: `stdout` is the C library's FILE pointer, valid for the life of the process; the lock
    // is only tried, and released after the unlocked flush.
    unsafe {
        let f = stdout;
        if !f.is_null() && ftrylockfile(f) == 0 {
            fflush_unlocked(f);
            funlockfile(f);
        }
    }
}

/// The exit handler (registered by the shim with atexit): the final report, and with `summary`
/// the one-line summary on stderr. Nothing when the program never touched a TCP socket.
pub fn at_exit(summary: bool) {
    let _ = std::panic::catch_unwind(|| {
        let Some(r) = sidecar::at_exit() else { return };
        if summary {
            flush_program_stdout();
            let line = r.summary_line() + "\n";
            // SAFETY: writing a live buffer to stderr.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
    });
}
