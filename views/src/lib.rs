//! The operator's views of SMC as data: what the kernel's telemetry (and the runtime's
//! per-process reports) mean for someone running a fleet, without any printing or serving.
//!
//! - [`snapshot`] reads everything a scrape needs from the kernel into one [`snapshot::Snapshot`]
//!   (each part present, absent because the kernel lacks it, or failed);
//! - [`metrics`] turns a snapshot into Prometheus metric families (pure: data in, families out),
//!   and [`metrics::encode`] into the text exposition format;
//! - [`doctor`] turns host facts and live counters into checks with one line of advice each;
//! - [`json`] holds what the views' `--json` output shares (decoded reasons) and its golden files;
//! - [`error`] is a failed `--json` command's error object;
//! - [`text`] holds what every view's text shares (smc-tools' short counters, units, tables);
//! - a view moved next to its data has one folder with its data, `json` and `text` ([`rdma`],
//!   [`stats`], [`linkgroup`], [`ss`], [`monitor`], [`ps`], [`doctor`], [`bpf`]);
//! - [`this_netns`] and [`processes`] are the small pieces the launcher's views share.
//!
//! The launcher (`smcrun exporter`, `smcrun metrics`, `smcrun doctor`) only wires these to the
//! command line, HTTP and files.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent_state;
pub mod bpf;
pub mod counters;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod handshake;
pub mod json;
pub mod linkgroup;
pub mod metrics;
pub mod monitor;
pub mod processes;
pub mod ps;
pub mod rdma;
pub mod snapshot;
pub mod ss;
pub mod stats;
pub mod text;
pub mod this_netns;

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Replies captured from the real kernel in the VM test bed
    //! (`kernel/tests/fixtures/PHASE/NAME.bin`).

    /// The raw bytes of one capture.
    pub fn raw(phase: &str, name: &str) -> Vec<u8> {
        let p = format!(
            "{}/../kernel/tests/fixtures/{phase}/{name}.bin",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// A snapshot of a capture phase, as the kernel gave it (no verbs limits in a capture), with
    /// an empty list of programs.
    pub fn snapshot(phase: &str) -> crate::snapshot::Snapshot {
        let dir = format!(
            "{}/../kernel/tests/fixtures/{phase}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut s = crate::snapshot::replay(std::path::Path::new(&dir));
        s.processes = crate::snapshot::Part::Read(crate::snapshot::Processes::default());
        s
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_of_nothing_is_zero() {
        assert_eq!(super::percent(5, 0), 0.0);
        assert_eq!(super::percent(1, 4), 25.0);
    }
}
