//! `smcrun doctor`'s text: one line per check (its status, id and detail) with its advice on the
//! next, and the counts and the exit status last.

use smcrun_report::text::safe;

use super::json::DoctorView;
use super::Status;

/// The table of `v`.
pub fn lines(v: &DoctorView) -> Vec<String> {
    let mut out = Vec::new();
    let width = v.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in v.checks.iter() {
        let status = match c.status {
            Status::Pass => "pass",
            Status::Skip => "skip",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        // Details name paths and programs the user or another user chose.
        out.push(format!("{status}  {:<width$}  {}", c.id, safe(&c.detail)));
        if !c.advice.is_empty() {
            out.push(format!("      {:<width$}  -> {}", "", safe(&c.advice)));
        }
    }
    out.push(format!(
        "doctor: {} passed, {} warnings, {} failed, {} skipped (exit {})",
        v.passed, v.warnings, v.failed, v.skipped, v.exit_code
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Check;

    #[test]
    fn the_table_has_one_advice_line_per_check() {
        let checks = vec![
            Check::new(
                "smc",
                Status::Fail,
                "this kernel has no SMC",
                "use another kernel",
            ),
            Check::new("kernel", Status::Pass, "Linux 6.12", ""),
        ];
        let t = lines(&DoctorView::new(&checks, 3));
        assert_eq!(t[0], "FAIL  smc     this kernel has no SMC");
        assert_eq!(t[1], "              -> use another kernel");
        assert_eq!(t[2], "pass  kernel  Linux 6.12");
        assert_eq!(
            t[3],
            "doctor: 1 passed, 0 warnings, 1 failed, 0 skipped (exit 3)"
        );
    }
}
