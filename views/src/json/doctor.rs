//! `smcrun doctor --json`: every check with its status, detail and advice, how many of each
//! status, and the exit status the command returns.

use serde::Serialize;

use crate::doctor::{exit_code, Check, Status};

/// `smcrun doctor --json`; its text's summary line prints the same counts.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorView<'a> {
    /// The checks, in order.
    pub checks: &'a [Check],
    /// How many passed.
    pub passed: usize,
    /// How many warn.
    pub warnings: usize,
    /// How many failed.
    pub failed: usize,
    /// How many were skipped.
    pub skipped: usize,
    /// The exit status (0 all good, 1 a warning, 3 a failure: see [`crate::doctor::EXIT_FAILURES`]).
    pub exit_code: u8,
}

impl<'a> DoctorView<'a> {
    /// The view of `checks`.
    pub fn new(checks: &'a [Check]) -> DoctorView<'a> {
        let n = |s: Status| checks.iter().filter(|c| c.status == s).count();
        DoctorView {
            checks,
            passed: n(Status::Pass),
            warnings: n(Status::Warn),
            failed: n(Status::Fail),
            skipped: n(Status::Skip),
            exit_code: exit_code(checks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{checks, tests::vm_host};
    use crate::json::golden::{assert_same, value};
    use crate::snapshot::Part;

    #[test]
    fn doctor_of_every_capture_as_golden() {
        for p in ["smcr", "smcd", "fallback"] {
            let c = checks(&vm_host(p));
            assert_same(&format!("doctor-{p}"), &DoctorView::new(&c));
        }
    }

    #[test]
    fn doctor_counts_add_up_and_unread_counters_are_skipped_not_null() {
        let mut h = vm_host("smcr");
        h.counters = Part::Absent("no smc module".into());
        let c = checks(&h);
        let v = DoctorView::new(&c);
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
        assert_eq!(j["exit_code"], exit_code(&c));
    }
}
