//! `smcrun rdma`'s text: the summary line of a device, its ports, and the objects table.

use smcrun_kernel::rdma::{self, Device, ResourceKind, ResourceSummary};
use smcrun_kernel::uverbs::Limits;

use super::json::Object;
use super::{max, used};
use crate::text::{Align, Table};

/// Who owns an object: `[module]` for the kernel's, `pid N COMM` for a process's.
pub fn owner_text(o: &Object) -> String {
    match (&o.kernel_owner, o.pid) {
        (Some(k), _) => format!("[{k}]"),
        (None, Some(pid)) => format!("pid {pid} {}", o.comm.as_deref().unwrap_or("(gone)")),
        (None, None) => "-".to_string(),
    }
}

/// The objects table.
pub fn objects_table(objects: &[Object]) -> Table {
    let mut t = Table::new(&[
        ("Dev", Align::Left),
        ("Type", Align::Left),
        ("Id", Align::Right),
        ("State", Align::Left),
        ("QP-Type", Align::Left),
        ("Owner", Align::Left),
    ]);
    for o in objects {
        t.row(vec![
            o.device.clone(),
            o.kind.to_string(),
            o.id.map_or_else(|| "-".to_string(), |i| i.to_string()),
            o.state.as_deref().unwrap_or("-").to_string(),
            o.qp_type.as_deref().unwrap_or("-").to_string(),
            owner_text(o),
        ]);
    }
    t
}

/// The summary line of one device, used/max per type as in seed 002's `rdma res show`:
/// `rxe_lo: pd 3/32764 cq 3/16384 ... cm_id 0/? ...` (`?`: no known maximum).
pub fn summary_line(s: &ResourceSummary, limits: Option<&Limits>) -> String {
    let mut out = format!("{}:", s.device);
    for k in ResourceKind::ALL {
        if let Some(n) = used(s, k) {
            match max(limits, k) {
                Some(m) => out.push_str(&format!(" {} {n}/{m}", k.name())),
                None => out.push_str(&format!(" {} {n}/?", k.name())),
            }
        }
    }
    out
}

/// A device's ports: `port 1 ACTIVE on lo, ...`.
pub fn port_text(d: &Device) -> String {
    d.ports
        .iter()
        .map(|p| {
            format!(
                "port {} {}{}",
                p.index,
                p.state.map_or("?", rdma::port_state),
                p.netdev
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" on {n}"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::keep;
    use smcrun_kernel::rdma::Resource;

    fn fixture(name: &str) -> Vec<u8> {
        crate::fixtures::raw("smcr", name)
    }

    #[test]
    fn captured_summary_counts_smc_r_resources() {
        let s = rdma::parse_resource_summary(&fixture("rdma_RES_GET")).unwrap();
        assert_eq!(
            summary_line(&s[0], None),
            "rxe_lo: pd 3/? cq 3/? qp 3/? cm_id 0/? mr 4/? ctx 0/? srq 0/?"
        );
        assert_eq!(used(&s[0], ResourceKind::Qp), Some(3));
        let l = Limits {
            max_qp: 65536,
            max_cq: 16384,
            max_mr: 262144,
            max_pd: 32764,
            max_srq: 262144,
        };
        assert_eq!(
            summary_line(&s[0], Some(&l)),
            "rxe_lo: pd 3/32764 cq 3/16384 qp 3/65536 cm_id 0/? mr 4/262144 ctx 0/? srq 0/262144"
        );
    }

    #[test]
    fn captured_qps_show_owner_and_state() {
        let qps = rdma::parse_resources(&fixture("rdma_RES_QP_GET"), ResourceKind::Qp).unwrap();
        let objs: Vec<Object> = qps.iter().map(|r| Object::new(r, |_| None)).collect();
        // Two RC QPs of SMC-R's loopback link (client and server ends), ready to send, and
        // ib_core's GSI QP 1.
        let smc: Vec<&Object> = objs
            .iter()
            .filter(|o| o.kernel_owner.as_deref() == Some("smc"))
            .collect();
        assert_eq!(smc.len(), 2);
        assert!(smc
            .iter()
            .all(|o| o.state.as_deref() == Some("RTS") && o.qp_type.as_deref() == Some("RC")));
        let gsi = objs.iter().find(|o| o.id == Some(1)).unwrap();
        assert_eq!(gsi.qp_type.as_deref(), Some("GSI"));
        assert_eq!(gsi.kernel_owner.as_deref(), Some("ib_core"));
        assert!(objs.iter().all(|o| keep(o, None, Some("rts"))));
        assert!(!keep(&objs[0], Some(1), None));
        assert!(!keep(&objs[0], None, Some("ERR")));
        let lines = objects_table(&objs).render();
        assert!(
            lines[1].contains("RTS") && lines[1].ends_with("[smc]"),
            "{lines:?}"
        );
        let j = serde_json::to_value(&objs[0]).unwrap();
        assert_eq!(j["type"], "qp");
        assert_eq!(j["kernel_owner"], "smc");
    }

    #[test]
    fn user_objects_name_their_process() {
        let r = Resource {
            kind: ResourceKind::Mr,
            device_index: 0,
            device: "rxe_lo".into(),
            number: Some(7),
            pid: Some(42),
            kern_name: None,
            object_type: None,
            state: None,
        };
        let o = Object::new(&r, |p| (p == 42).then(|| "ib_send_bw".to_string()));
        assert_eq!(owner_text(&o), "pid 42 ib_send_bw");
        assert!(keep(&o, Some(42), None));
        assert!(!keep(&o, None, Some("RTS")), "an MR has no state to match");
    }
}
