//! `smcrun rdma`'s view: RDMA resources as used/max per device and type (the kernel's resource
//! summary, RDMA netlink, counts what is used; the device's verbs interface knows the maximums),
//! and the objects with their owner. [`json`] is its `--json`, [`text`] its table and lines.

pub mod json;
pub mod text;

use smcrun_kernel::rdma::{ResourceKind, ResourceSummary};
use smcrun_kernel::uverbs::Limits;

/// The used count of `kind` in a summary (`None` when the kernel did not list the type).
pub fn used(s: &ResourceSummary, kind: ResourceKind) -> Option<u64> {
    s.counts
        .iter()
        .find(|(name, _)| name == kind.name())
        .map(|(_, n)| *n)
}

/// The device limit of `kind` (CM ids and contexts have none).
pub fn max(l: Option<&Limits>, kind: ResourceKind) -> Option<u32> {
    let l = l?;
    match kind {
        ResourceKind::Qp => Some(l.max_qp),
        ResourceKind::Cq => Some(l.max_cq),
        ResourceKind::Mr => Some(l.max_mr),
        ResourceKind::Pd => Some(l.max_pd),
        ResourceKind::Srq => Some(l.max_srq),
        ResourceKind::CmId | ResourceKind::Ctx => None,
    }
}

/// Whether an object passes `--pid` and `--state` (states compare without case).
pub fn keep(o: &json::Object, pid: Option<u32>, state: Option<&str>) -> bool {
    let pid_ok = pid.is_none_or(|want| o.pid == Some(want));
    let state_ok = state.is_none_or(|want| {
        o.state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(want))
    });
    pid_ok && state_ok
}

/// used / max, when both are known and the maximum is not 0.
pub fn usage_ratio(used: Option<u64>, max: Option<u32>) -> Option<f64> {
    match (used, max) {
        (Some(u), Some(m)) if m > 0 => Some(u as f64 / f64::from(m)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::rdma::parse_resource_summary;

    #[test]
    fn captured_summary_with_and_without_limits() {
        let s = parse_resource_summary(&crate::fixtures::raw("smcr", "rdma_RES_GET")).unwrap();
        assert_eq!(used(&s[0], ResourceKind::Qp), Some(3));
        assert_eq!(used(&s[0], ResourceKind::Mr), Some(4));
        let l = Limits {
            max_qp: 64,
            max_cq: 16384,
            max_mr: 262144,
            max_pd: 32764,
            max_srq: 262144,
        };
        assert_eq!(max(Some(&l), ResourceKind::Qp), Some(64));
        assert_eq!(max(Some(&l), ResourceKind::CmId), None);
        assert_eq!(max(None, ResourceKind::Qp), None);
        assert_eq!(usage_ratio(Some(3), Some(64)), Some(3.0 / 64.0));
        assert_eq!(usage_ratio(Some(3), Some(0)), None);
        assert_eq!(usage_ratio(None, Some(4)), None);
    }
}
