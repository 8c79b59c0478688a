//! The programs running under smcrun, from the reports their sidecars write in the run directory.
//!
//! Written against the current report format (`smcrun_telemetry::report::ProcessReport`), in this
//! one file, because that format is being replaced: only [`running`] reads it.

use std::path::Path;

use smcrun_telemetry::report::ProcessReport;
use smcrun_telemetry::{rundir, sidecar};

/// The reports in `dir` of processes that still run (the pid exists and started when the report
/// says: a pid reused by another program does not count). Reports that cannot be read or parsed
/// are counted in the second value, never guessed at. Nothing is removed (that is `smcrun ps`'s).
pub fn running(dir: &Path) -> (Vec<ProcessReport>, u64) {
    let mut out = Vec::new();
    let mut unreadable = 0;
    for pid in rundir::list(dir) {
        let parsed = rundir::read_report(dir, pid)
            .ok()
            .and_then(|b| serde_json::from_slice::<ProcessReport>(&b).ok());
        match parsed {
            Some(r) => {
                if sidecar::start_ticks(&format!("/proc/{}/stat", r.pid)) == Some(r.start_ticks) {
                    out.push(r);
                }
            }
            None => unreadable += 1,
        }
    }
    (out, unreadable)
}
