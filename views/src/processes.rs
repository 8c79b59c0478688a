//! The programs running under smcrun, from the reports their runtimes write in the run directory
//! of the user the exporter runs as (root's, for a system exporter: every program root started,
//! whatever uid it switched to).

use smcrun_report::ProcessReport;
use smcrun_rundir::pidns::{Locator, Seen};
use smcrun_rundir::process::start_ticks;
use smcrun_rundir::read::RunDir;

/// The reports of processes that still run (the pid exists and started when the report says: a
/// pid reused by another program does not count). Reports that cannot be read or parsed are
/// counted in the second value, never guessed at. Nothing is removed (that is `smcrun ps`'s).
///
/// A report of a process in another pid namespace (a container's, in a run directory the
/// exporter shares with it) is returned with `pid` set to the exporter's number for it, so that
/// every series names a process of the exporter's own `/proc`; one it cannot find is left out.
pub fn running(dir: &RunDir) -> (Vec<ProcessReport>, u64) {
    let mut out = Vec::new();
    let mut unreadable = 0;
    let mut locator = Locator::new();
    for pid in dir.pids() {
        match dir.report(pid) {
            Ok(Some(mut r)) => {
                let Seen::At(here) = locator.locate(pid, r.pid_ns) else {
                    continue;
                };
                if start_ticks(&format!("/proc/{here}/stat")) == Some(r.start_ticks) {
                    r.pid = here;
                    out.push(r);
                }
            }
            // Registered, no numbers yet: nothing to export.
            Ok(None) => {}
            Err(_) => unreadable += 1,
        }
    }
    (out, unreadable)
}
