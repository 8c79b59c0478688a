//! Why the run directory or a report file cannot be used: said once by the process that has no
//! report, and kept packed in one word until then, so that a hook can keep it without a lock.

use crate::layout::PATH_MAX;
use crate::write::HIGH_FD;

/// Why the run directory or the report file cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path does not fit smcrun's buffer.
    TooLong,
    /// A system call failed: what was being done, and the errno.
    Io(Stage, i32),
    /// Not a directory (a symlink, a file).
    NotDirectory,
    /// Owned by another user.
    Owner(u32),
    /// Open to other users (the mode).
    Mode(u32),
    /// A report path that is not a regular file of ours with one link.
    NotOurFile,
    /// The fd limit (soft `RLIMIT_NOFILE`) leaves no number at or above [`HIGH_FD`]: the runtime
    /// keeps no descriptor, since any it kept would be one the program could have had.
    FdLimit(u32),
    /// The program reached its fd limit (this one) while the runtime held descriptors: they were
    /// closed so that the program could have them, and the report stopped there.
    GaveUp(u32),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Refusal::TooLong => write!(f, "the run directory's path is longer than {PATH_MAX} bytes"),
            Refusal::Io(what, e) => {
                write!(f, "cannot {}: {}", what.text(), smcrun_sys::errno::Errno(e))
            }
            Refusal::NotDirectory => f.write_str("it is not a directory (a symlink?); refusing it"),
            Refusal::Owner(uid) => write!(
                f,
                "it belongs to uid {uid}, not to this user (made by another user?); refusing it; set XDG_RUNTIME_DIR to a private directory"
            ),
            Refusal::Mode(m) => write!(f, "it has mode {m:o}, open to other users; expected 700"),
            Refusal::NotOurFile => {
                f.write_str("the report path is not a regular file of ours; refusing to write it")
            }
            Refusal::FdLimit(n) => write!(
                f,
                "the fd limit ({n}) leaves no descriptor at or above {HIGH_FD} for the report, and one below would be taken from the program; running without a report"
            ),
            Refusal::GaveUp(n) => write!(
                f,
                "the program reached its fd limit ({n}): the runtime closed the report's descriptors so that the program could have them; the report stops there"
            ),
        }
    }
}

/// What was being done when a system call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// mkdir of the run directory.
    CreateDir,
    /// open of the run directory.
    OpenDir,
    /// fstat of the run directory.
    StatDir,
    /// creating the report file.
    CreateReport,
    /// opening an existing report file.
    OpenReport,
    /// fstat of the report file.
    StatReport,
    /// truncating an existing report file.
    EmptyReport,
    /// moving a descriptor out of the program's way.
    MoveFd,
}

impl Stage {
    const ALL: [Stage; 8] = [
        Stage::CreateDir,
        Stage::OpenDir,
        Stage::StatDir,
        Stage::CreateReport,
        Stage::OpenReport,
        Stage::StatReport,
        Stage::EmptyReport,
        Stage::MoveFd,
    ];

    fn text(self) -> &'static str {
        match self {
            Stage::CreateDir => "create the run directory",
            Stage::OpenDir => "open the run directory",
            Stage::StatDir => "stat the run directory",
            Stage::CreateReport => "create the report",
            Stage::OpenReport => "open the report",
            Stage::StatReport => "stat the report",
            Stage::EmptyReport => "empty the report",
            Stage::MoveFd => "move a descriptor",
        }
    }
}

impl Refusal {
    /// Packed into one word, so that a hook can keep it without a lock.
    pub(crate) fn pack(self) -> u64 {
        let (tag, a, b) = match self {
            Refusal::TooLong => (1u64, 0u64, 0u64),
            Refusal::Io(st, e) => (2, st as u64, e as u32 as u64),
            Refusal::NotDirectory => (3, 0, 0),
            Refusal::Owner(uid) => (4, 0, u64::from(uid)),
            Refusal::Mode(m) => (5, 0, u64::from(m)),
            Refusal::NotOurFile => (6, 0, 0),
            Refusal::FdLimit(n) => (7, 0, u64::from(n)),
            Refusal::GaveUp(n) => (8, 0, u64::from(n)),
        };
        tag << 56 | a << 32 | b
    }

    pub(crate) fn unpack(w: u64) -> Option<Refusal> {
        let b = w as u32;
        Some(match w >> 56 {
            1 => Refusal::TooLong,
            2 => Refusal::Io(*Stage::ALL.get(((w >> 32) & 0xff) as usize)?, b as i32),
            3 => Refusal::NotDirectory,
            4 => Refusal::Owner(b),
            5 => Refusal::Mode(b),
            6 => Refusal::NotOurFile,
            7 => Refusal::FdLimit(b),
            8 => Refusal::GaveUp(b),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_kept_in_one_word() {
        for r in [
            Refusal::TooLong,
            Refusal::Io(Stage::MoveFd, libc::EMFILE),
            Refusal::NotDirectory,
            Refusal::Owner(1001),
            Refusal::Mode(0o755),
            Refusal::NotOurFile,
            Refusal::FdLimit(16),
            Refusal::GaveUp(1024),
        ] {
            assert_eq!(Refusal::unpack(r.pack()), Some(r));
        }
    }
}
