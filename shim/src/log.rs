//! One-line messages on stderr, formatted on the stack and written with a single write(2), so
//! that they never allocate, never take stdio's lock and never interleave with each other.

use std::fmt::{self, Write};

/// A line being built; longer text is cut, never reallocated.
pub struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Line {
    /// A line that starts with `smcrun[PID]: `.
    pub fn new() -> Line {
        let mut l = Line {
            buf: [0; 512],
            len: 0,
        };
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let _ = write!(l, "smcrun[{pid}]: ");
        l
    }

    /// Writes the line and a newline to stderr, keeping errno as it was.
    pub fn emit(mut self) {
        if self.len == self.buf.len() {
            self.len -= 1;
        }
        self.buf[self.len] = b'\n';
        let saved = crate::guard::errno();
        // SAFETY: the buffer holds len + 1 initialised bytes.
        unsafe {
            libc::write(2, self.buf.as_ptr().cast(), self.len + 1);
        }
        crate::guard::set_errno(saved);
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

/// Writes one formatted line to stderr: `line!("socket fd {} ...", fd)`.
macro_rules! line {
    ($($arg:tt)*) => {{
        let mut l = $crate::log::Line::new();
        let _ = ::std::fmt::Write::write_fmt(&mut l, format_args!($($arg)*));
        l.emit();
    }};
}
pub(crate) use line;

pub use smcrun_settings::errno::name as errno_name;
