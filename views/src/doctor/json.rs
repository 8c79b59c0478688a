//! `smcrun doctor --json`: every check with its status, detail and advice, how many of each
//! status, and the exit status the command returns.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::doctor::{Check, Status};

/// `smcrun doctor --json`; its text's summary line prints the same counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorView<'a> {
    /// The checks, in order.
    pub checks: Cow<'a, [Check]>,
    /// How many passed.
    pub passed: usize,
    /// How many warn.
    pub warnings: usize,
    /// How many failed.
    pub failed: usize,
    /// How many were skipped.
    pub skipped: usize,
    /// The exit status the command returns (the launcher's `status::doctor` of the checks'
    /// [`crate::doctor::Verdict`]).
    pub exit_code: u8,
}

impl<'a> DoctorView<'a> {
    /// The view of `checks`, which end the command with `exit_code`.
    pub fn new(checks: &'a [Check], exit_code: u8) -> DoctorView<'a> {
        let n = |s: Status| checks.iter().filter(|c| c.status == s).count();
        DoctorView {
            checks: Cow::Borrowed(checks),
            passed: n(Status::Pass),
            warnings: n(Status::Warn),
            failed: n(Status::Fail),
            skipped: n(Status::Skip),
            exit_code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{checks, tests::vm_host, verdict, Verdict};
    use crate::json::golden::{assert_reads_back, assert_same, value};
    use crate::snapshot::Part;

    /// The launcher's status for a verdict (0, 1, 3), as the goldens hold it.
    fn status(checks: &[Check]) -> u8 {
        match verdict(checks) {
            Verdict::Passed => 0,
            Verdict::Warnings => 1,
            Verdict::Failed => 3,
        }
    }

    #[test]
    fn doctor_of_every_capture_as_golden() {
        for p in ["smcr", "smcd", "fallback"] {
            let c = checks(&vm_host(p));
            assert_same(&format!("doctor-{p}"), &DoctorView::new(&c, status(&c)));
        }
    }

    #[test]
    fn doctor_of_every_capture_reads_back_as_printed() {
        for p in ["smcr", "smcd", "fallback"] {
            assert_reads_back::<DoctorView>(&format!("doctor-{p}"));
        }
    }

    #[test]
    fn doctor_counts_add_up_and_unread_counters_are_skipped_not_null() {
        let mut h = vm_host("smcr");
        h.counters = Part::Absent("no smc module".into());
        let c = checks(&h);
        let v = DoctorView::new(&c, status(&c));
        assert_eq!(v.passed + v.warnings + v.failed + v.skipped, c.len());
        assert!(v.skipped > 0, "{c:#?}");
        let j = value(&v);
        assert!(
            j["checks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["advice"].is_string()),
            "{j}"
        );
        assert_eq!(j["exit_code"], status(&c));
    }
}
