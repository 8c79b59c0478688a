//! Doctor's rows for BPF mode, which is optional (the preload does not need it): with `--bpf`, one
//! `bpf:ID` row per prerequisite (`smcrun_bpf::prereq`), a missing one a failure; without it, one
//! skipped `bpf` row that says how to check them.

use smcrun_bpf::prereq::{Needed, Report, State};

use super::{Check, Host, Probe, Status};

/// BPF mode's prerequisites as `r` found them, one row each. `bpf:smc` is the host's smc row
/// again when the kernel has no SMC at all: then it only points there.
pub fn checks(r: &Report, h: &Host) -> Vec<Check> {
    let host_has_smc = matches!(h.af_smc, Probe::Works);
    r.checks
        .iter()
        .map(|c| {
            let id = format!("bpf:{}", c.id);
            if c.id == "smc" && !host_has_smc {
                return Check::new(id, Status::Skip, "needs smc", "");
            }
            let scope = match c.needed {
                Needed::Always => "",
                Needed::Attach => " (for `smcrun attach`)",
                Needed::Cgroup => " (for `smcrun attach --cgroup`)",
            };
            let (status, advice) = match c.state {
                State::Ok => (Status::Pass, String::new()),
                State::Missing => (
                    Status::Fail,
                    format!(
                        "BPF mode{scope} needs it: {}",
                        c.fix.as_deref().unwrap_or("see the manual, BPF mode")
                    ),
                ),
                State::Unknown => (Status::Skip, String::new()),
            };
            Check::new(id, status, format!("{}: {}", c.what, c.detail), advice)
        })
        .collect()
}

/// The one row that stands for BPF mode's checks without `--bpf`.
pub fn not_checked() -> Check {
    Check::new(
        "bpf",
        Status::Skip,
        "BPF mode (optional: the preload does not need it) not checked",
        "`smcrun doctor --bpf` checks its prerequisites",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::tests::vm_host;
    use crate::doctor::ROWS;

    /// `bpf` is in the manual's list of rows; the `bpf:ID` rows are BPF mode's own list's.
    #[test]
    fn the_rows_given_here_are_listed() {
        assert!(ROWS.iter().any(|r| r.0 == not_checked().id));
        let report = smcrun_bpf::prereq::check_before_attach();
        let mut bare = vm_host("smcr");
        bare.af_smc = Probe::Refused(libc::EAFNOSUPPORT);
        for h in [vm_host("smcr"), bare] {
            let rows = checks(&report, &h);
            assert_eq!(rows.len(), report.checks.len());
            for c in rows {
                assert!(c.id.starts_with("bpf:"), "{c:?}");
                assert!(!ROWS.iter().any(|r| r.0 == c.id), "{c:?}");
            }
        }
    }
}
