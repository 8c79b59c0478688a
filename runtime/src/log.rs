//! One-line messages on stderr, formatted on the stack and written with a single write(2), so that
//! they never allocate, never take stdio's lock and never interleave with each other: usable in
//! hooks, signal handlers and forked children.

use smcrun_sys::errno;
use std::fmt::{self, Write};

/// A line being built; longer text is cut, never reallocated.
pub struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line::new()
    }
}

impl Line {
    /// A line that starts with `smcrun[PID]: `.
    pub fn new() -> Line {
        let mut l = Line {
            buf: [0; 512],
            len: 0,
        };
        let _ = write!(
            l,
            "smcrun[{}]: ",
            rustix::process::getpid().as_raw_nonzero()
        );
        l
    }

    /// Writes the line and a newline to stderr, keeping errno as it was.
    pub fn emit(mut self) {
        if self.len == self.buf.len() {
            self.len -= 1;
        }
        self.buf[self.len] = b'\n';
        let bytes = &self.buf[..self.len + 1];
        errno::keep(|| {
            // the program's stderr, also from the sidecar's own descriptor table
            let _ = crate::own_table::with_program_fd(2, |fd| {
                // SAFETY: fd 2 (or its duplicate) is borrowed only for this write; a closed or
                // invalid stderr fails harmlessly.
                let stderr = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
                let _ = rustix::io::write(stderr, bytes);
            });
        });
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Builds and writes one line (the body of [`line!`]). Out of line and cold: a hook that may
/// write a debug line carries only the call, not the line's 512-byte buffer in its own frame (nor
/// the prologue that frame costs on every call, debug or not).
#[cold]
#[inline(never)]
pub fn emit_line(args: fmt::Arguments<'_>) {
    let mut l = Line::new();
    let _ = l.write_fmt(args);
    l.emit();
}

/// Writes one formatted line to stderr: `line!("socket fd {} ...", fd)`.
#[macro_export]
macro_rules! line {
    ($($arg:tt)*) => {
        $crate::log::emit_line(format_args!($($arg)*))
    };
}
