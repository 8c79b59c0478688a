//! The one error a policy string can have: where it is, which token, and what was expected there.

use std::fmt;

/// Why a policy string was refused.
///
/// Displayed as one line, e.g. `at offset 14: "prot" is not a qualifier; expected one of program,
/// role, remote, local, port`, so that the launcher, the shim's warning and `policy check` all say
/// the same thing. [`ParseError::message`] is the same line without the offset, for callers (the
/// config file) that can name a better position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the bad token in the policy string.
    pub offset: usize,
    /// The bad token as written (empty at the end of the string).
    pub token: String,
    /// What is wrong with it, e.g. "is not a qualifier".
    pub problem: String,
    /// What would have been accepted there.
    pub expected: String,
}

impl ParseError {
    pub(crate) fn new(
        offset: usize,
        token: &str,
        problem: impl Into<String>,
        expected: impl Into<String>,
    ) -> ParseError {
        ParseError {
            offset,
            token: token.to_string(),
            problem: problem.into(),
            expected: expected.into(),
        }
    }

    /// The error without its position: `"prot" is not a qualifier; expected one of ...`.
    pub fn message(&self) -> String {
        if self.token.is_empty() {
            format!(
                "the end of the policy {}; expected {}",
                self.problem, self.expected
            )
        } else {
            format!(
                "{:?} {}; expected {}",
                self.token, self.problem, self.expected
            )
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.message())
    }
}

impl std::error::Error for ParseError {}
