//! The error of a BPF mode operation: what was being done, and the kernel's answer.

use std::fmt;
use std::io;

/// What failed, with errno when the kernel said no, and the verifier's log for a refused program.
#[derive(Debug)]
pub struct Error {
    what: String,
    source: Option<io::Error>,
    log: Option<String>,
}

impl Error {
    /// An error without an errno.
    pub fn new(what: impl Into<String>) -> Error {
        Error {
            what: what.into(),
            source: None,
            log: None,
        }
    }

    /// `what` failed with `e`.
    pub fn io(what: impl Into<String>, e: io::Error) -> Error {
        Error {
            what: what.into(),
            source: Some(e),
            log: None,
        }
    }

    pub(crate) fn with_log(mut self, log: String) -> Error {
        self.log = Some(log);
        self
    }

    /// The verifier's log, when the kernel refused a program.
    pub fn verifier_log(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// errno, when the kernel refused.
    pub fn errno(&self) -> Option<i32> {
        self.source.as_ref().and_then(|e| e.raw_os_error())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(e) => write!(f, "{}: {e}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

impl std::error::Error for Error {}
