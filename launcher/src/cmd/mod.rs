//! The operator's views: SMC sockets (`ss`), the kernel's counters (`stats`, `monitor`), link
//! groups, links and devices, RDMA resources, the programs under smcrun (`ps`, `why`), the
//! Prometheus exporter and `doctor`; and their shared formatting and exit statuses.

pub mod agent;
pub mod doctor;
pub mod exporter;
pub mod format;
pub mod linkgroup;
pub mod monitor;
pub mod owners;
pub mod ps;
pub mod rdma;
pub mod smc_procs;
pub mod ss;
pub mod stats;
pub mod web_config;
