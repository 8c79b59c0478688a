//! The error object a `--json` command prints on stdout when it fails (`{"error": LINE,
//! "exit_code": N}`), so that a script reading stdout learns why there is no data; the same line
//! goes to stderr. The launcher prints it; a reader (the VM's guest checks) reads it back.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A failed JSON command's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorView<'a> {
    /// The line printed on stderr.
    pub error: Cow<'a, str>,
    /// The status smcrun exits with.
    pub exit_code: u8,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::golden::assert_round_trips;

    #[test]
    fn error_object_reads_back() {
        let v = ErrorView {
            error: Cow::Borrowed("smcrun info: this kernel has no SMC generic netlink family"),
            exit_code: 125,
        };
        assert_round_trips("error object", &v);
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(
            text,
            r#"{"error":"smcrun info: this kernel has no SMC generic netlink family","exit_code":125}"#
        );
    }
}
