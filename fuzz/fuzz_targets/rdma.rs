//! RDMA netlink replies (devices, ports, resource summaries, resources of every kind) and the
//! verbs interface's QUERY_DEVICE answer: Ok or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smcrun_kernel::rdma::{self, ResourceKind};
use smcrun_kernel::uverbs;

fuzz_target!(|data: &[u8]| {
    let _ = rdma::parse_devices(data);
    let _ = rdma::parse_ports(data);
    let _ = rdma::parse_resource_summary(data);
    for kind in ["qp", "cq", "mr", "pd", "cm_id", "ctx", "srq"] {
        if let Some(k) = ResourceKind::from_name(kind) {
            let _ = rdma::parse_resources(data, k);
        }
    }
    let _ = uverbs::parse_query_device(data);
});
