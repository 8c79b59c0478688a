//! `smcrun rdma --json`: RDMA devices with the used and maximum count of every resource type,
//! and the objects themselves with their owner (a process, or the kernel module that made them).
//! Read back too (`Deserialize`): the VM's guest checks (`tests/vm/check`) read it in these types.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smcrun_kernel::rdma::{self, Device, Port, Resource, ResourceKind, ResourceSummary};
use smcrun_kernel::uverbs::Limits;

use super::{max, used};

/// `smcrun rdma --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaView {
    /// Whether every device's maximums could be read (verbs).
    pub max_known: bool,
    /// The devices.
    pub devices: Vec<RdmaDeviceView>,
    /// The objects listed (all with `--json`, or those a type or filter selects).
    pub objects: Vec<Object>,
}

impl RdmaView {
    /// The view of `devices`, with each device's `limits` (same order; `None` where verbs did
    /// not answer), the kernel's resource `summaries` and the `objects`.
    pub fn new(
        devices: &[Device],
        limits: &[Option<Limits>],
        summaries: &[&ResourceSummary],
        objects: Vec<Object>,
    ) -> RdmaView {
        RdmaView {
            max_known: limits.iter().all(Option::is_some),
            devices: devices
                .iter()
                .zip(limits)
                .map(|(d, l)| {
                    let s = summaries
                        .iter()
                        .find(|s| s.device_index == d.index)
                        .copied();
                    RdmaDeviceView::new(d, s, l.as_ref())
                })
                .collect(),
            objects,
        }
    }
}

/// One device: its ports and, per resource type, used and maximum.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaDeviceView {
    /// Device name (`rxe_lo`).
    pub name: String,
    /// Device index.
    pub index: u32,
    /// `roce`, `iw`, `ib`, ...
    pub protocol: Option<String>,
    /// Its ports.
    pub ports: Vec<RdmaPortView>,
    /// Per resource type (`qp`, `cq`, ...): used and maximum.
    pub resources: BTreeMap<Cow<'static, str>, UsedMax>,
    /// Whether this device's maximums could be read.
    pub max_known: bool,
}

impl RdmaDeviceView {
    /// The view of `d` with its summary `s` and limits `l`.
    pub fn new(d: &Device, s: Option<&ResourceSummary>, l: Option<&Limits>) -> RdmaDeviceView {
        RdmaDeviceView {
            name: d.name.clone(),
            index: d.index,
            protocol: d.protocol.clone(),
            ports: d.ports.iter().map(RdmaPortView::new).collect(),
            resources: ResourceKind::ALL
                .iter()
                .map(|&k| {
                    let um = UsedMax {
                        used: s.and_then(|s| used(s, k)),
                        max: max(l, k),
                    };
                    (Cow::Borrowed(k.name()), um)
                })
                .collect(),
            max_known: l.is_some(),
        }
    }
}

/// Used and maximum count of one resource type (`null` where unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedMax {
    /// What the kernel counts as used.
    pub used: Option<u64>,
    /// The device's limit (verbs; none for CM ids and contexts).
    pub max: Option<u32>,
}

/// One RDMA port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdmaPortView {
    /// Port number.
    pub port: u32,
    /// State name (`ACTIVE`).
    pub state: Option<Cow<'static, str>>,
    /// Its net device.
    pub net_dev: Option<String>,
}

impl RdmaPortView {
    /// The view of `p`.
    pub fn new(p: &Port) -> RdmaPortView {
        RdmaPortView {
            port: p.index,
            state: p.state.map(|s| Cow::Borrowed(rdma::port_state(s))),
            net_dev: p.netdev.clone(),
        }
    }
}

/// One object as the view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Device name.
    pub device: String,
    /// "qp", "cq", ...
    #[serde(rename = "type")]
    pub kind: Cow<'static, str>,
    /// QP number / CQ, MR, PD, CM id, context, SRQ id.
    pub id: Option<u32>,
    /// State by name (QPs and CM ids).
    pub state: Option<Cow<'static, str>>,
    /// QP type (RC, UD, GSI, ...), for QPs.
    pub qp_type: Option<Cow<'static, str>>,
    /// Creating process.
    pub pid: Option<u32>,
    /// Its command name, when the process still exists.
    pub comm: Option<String>,
    /// Creating kernel module ("smc", "ib_core", "rdma_cm"), for kernel objects.
    pub kernel_owner: Option<String>,
}

impl Object {
    /// The view of one parsed resource; `comm_of` names a process.
    pub fn new(r: &Resource, comm_of: impl Fn(u32) -> Option<String>) -> Object {
        Object {
            device: r.device.clone(),
            kind: Cow::Borrowed(r.kind.name()),
            id: r.number,
            state: r.state_name().map(Cow::Borrowed),
            qp_type: match r.kind {
                ResourceKind::Qp => r.object_type.map(|t| Cow::Borrowed(rdma::qp_type(t))),
                _ => None,
            },
            pid: r.pid,
            comm: r.pid.and_then(comm_of),
            kernel_owner: r.kern_name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::raw;
    use crate::json::golden::{assert_round_trips, assert_same, value};

    /// The view of a capture, as `smcrun rdma --json` lists it (objects of every type the
    /// capture has), with `limits` for every device.
    fn captured(phase: &str, limits: Option<Limits>) -> RdmaView {
        let mut devices = rdma::parse_devices(&raw(phase, "rdma_GET")).unwrap();
        for d in &mut devices {
            d.ports =
                rdma::parse_ports(&raw(phase, &format!("rdma_PORT_GET_{}", d.index))).unwrap();
        }
        let summaries = rdma::parse_resource_summary(&raw(phase, "rdma_RES_GET")).unwrap();
        let mut objects = Vec::new();
        for k in ResourceKind::ALL {
            let name = format!("rdma_RES_{}_GET", k.name().to_uppercase());
            let path = format!(
                "{}/../kernel/tests/fixtures/{phase}/{name}.bin",
                env!("CARGO_MANIFEST_DIR")
            );
            if std::path::Path::new(&path).exists() {
                let rs = rdma::parse_resources(&raw(phase, &name), k).unwrap();
                objects.extend(rs.iter().map(|r| Object::new(r, |_| None)));
            }
        }
        let limits = vec![limits; devices.len()];
        let shown: Vec<&ResourceSummary> = summaries.iter().collect();
        RdmaView::new(&devices, &limits, &shown, objects)
    }

    const LIMITS: Limits = Limits {
        max_qp: 65536,
        max_cq: 16384,
        max_mr: 262144,
        max_pd: 32764,
        max_srq: 262144,
    };

    #[test]
    fn rdma_of_every_capture_as_golden() {
        for p in ["smcr", "smcd", "fallback", "smcd-fallback"] {
            assert_same(&format!("rdma-{p}"), &captured(p, None));
            assert_same(&format!("rdma-{p}-limits"), &captured(p, Some(LIMITS)));
        }
    }

    #[test]
    fn rdma_reads_back_as_printed() {
        for p in ["smcr", "smcd"] {
            assert_round_trips(p, &captured(p, Some(LIMITS)));
        }
        assert_round_trips("no limits", &captured("smcr", None));
    }

    #[test]
    fn rdma_unknown_limits_and_unowned_objects_are_null() {
        let j = value(&captured("smcr", None));
        assert_eq!(j["max_known"], false);
        let res = &j["devices"][0]["resources"];
        assert!(
            res["qp"]["max"].is_null() && res["qp"]["used"].is_u64(),
            "{res}"
        );
        assert!(res["cm_id"]["max"].is_null(), "{res}");
        let kernel = j["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kernel_owner"] == "smc")
            .expect("SMC-R's objects");
        assert!(
            kernel["pid"].is_null() && kernel["comm"].is_null(),
            "{kernel}"
        );
        let j = value(&captured("smcr", Some(LIMITS)));
        assert_eq!(j["devices"][0]["resources"]["qp"]["max"], 65536);
        assert!(j["devices"][0]["resources"]["ctx"]["max"].is_null());
    }
}
