//! RDMA netlink (NLDEV): list RDMA devices and their ports, and create or delete soft-RoCE
//! (`rxe`) links, which is how a host without RDMA hardware gets an SMC-R device.

use serde::Serialize;

use crate::abi::rdma::*;
use crate::attr::{self, Writer};
use crate::error::Error;
use crate::nl::{self, Protocol};

/// `RDMA_NLDEV_CMD_*` operations.
pub mod op {
    /// Device list (dump).
    pub const GET: u16 = 1;
    /// Create a link (soft-RoCE / siw).
    pub const NEWLINK: u16 = 3;
    /// Delete a link.
    pub const DELLINK: u16 = 4;
    /// Ports of one device (dump, needs the device index).
    pub const PORT_GET: u16 = 5;
    /// Per-device resource summary (dump).
    pub const RES_GET: u16 = 9;
    /// Queue pairs (dump).
    pub const RES_QP_GET: u16 = 10;
    /// Completion queues (dump).
    pub const RES_CQ_GET: u16 = 12;
    /// Memory regions (dump).
    pub const RES_MR_GET: u16 = 13;
    /// Protection domains (dump).
    pub const RES_PD_GET: u16 = 14;
    /// RDMA CM identifiers (dump).
    pub const RES_CM_ID_GET: u16 = 11;
    /// User contexts (dump).
    pub const RES_CTX_GET: u16 = 22;
    /// Shared receive queues (dump).
    pub const RES_SRQ_GET: u16 = 23;
}

/// `nlmsg_type` for an NLDEV operation.
pub fn message_type(op: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) | op
}

/// One RDMA port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Port {
    /// Port number (from 1).
    pub index: u32,
    /// IB port state (4 = ACTIVE), see [`port_state`].
    pub state: Option<u8>,
    /// Physical state (5 = LINK_UP).
    pub phys_state: Option<u8>,
    /// Network device behind the port (RoCE).
    pub netdev: Option<String>,
    /// Its ifindex.
    pub netdev_index: Option<u32>,
}

/// One RDMA device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    /// Device index (for DELLINK and port queries).
    pub index: u32,
    /// Device name, e.g. `rxe_lo`.
    pub name: String,
    /// Node type (1 CA, 4 RNIC, ...).
    pub node_type: Option<u8>,
    /// Protocol, e.g. "roce".
    pub protocol: Option<String>,
    /// Number of ports the device reports.
    pub port_count: u32,
    /// Port details (filled by [`devices`]).
    pub ports: Vec<Port>,
}

/// Name of an IB port state.
pub fn port_state(state: u8) -> &'static str {
    match state {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "UNKNOWN_STATE",
    }
}

fn rdma_missing(e: Error) -> Error {
    // A kernel without ib_core has no NETLINK_RDMA protocol.
    e.missing_on(libc::EPROTONOSUPPORT, "ib_core")
}

/// Raw reply of an NLDEV dump (`op`), optionally scoped to one device index.
pub fn dump_raw(op: u16, device: Option<u32>) -> Result<Vec<u8>, Error> {
    let what = format!("RDMA netlink {} dump", op_name(op));
    let attrs = match device {
        Some(i) => Writer::new().u32(RDMA_NLDEV_ATTR_DEV_INDEX, i),
        None => Writer::new(),
    };
    nl::dump_raw(Protocol::Rdma, message_type(op), &attrs.finish(), &what).map_err(rdma_missing)
}

/// Name of an NLDEV operation for messages and capture files.
pub fn op_name(op: u16) -> &'static str {
    match op {
        op::GET => "GET",
        op::NEWLINK => "NEWLINK",
        op::DELLINK => "DELLINK",
        op::PORT_GET => "PORT_GET",
        op::RES_GET => "RES_GET",
        op::RES_QP_GET => "RES_QP_GET",
        op::RES_CQ_GET => "RES_CQ_GET",
        op::RES_MR_GET => "RES_MR_GET",
        op::RES_PD_GET => "RES_PD_GET",
        op::RES_CM_ID_GET => "RES_CM_ID_GET",
        op::RES_CTX_GET => "RES_CTX_GET",
        op::RES_SRQ_GET => "RES_SRQ_GET",
        _ => "NLDEV",
    }
}

/// Parse a raw `GET` dump into devices (without ports).
pub fn parse_devices(raw: &[u8]) -> Result<Vec<Device>, Error> {
    let what = "RDMA GET reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let mut d = Device::default();
        for a in attr::parse(m.payload, what)? {
            match a.kind {
                RDMA_NLDEV_ATTR_DEV_INDEX => d.index = a.u32(what)?,
                RDMA_NLDEV_ATTR_DEV_NAME => d.name = a.string(),
                RDMA_NLDEV_ATTR_PORT_INDEX => d.port_count = a.u32(what)?,
                RDMA_NLDEV_ATTR_DEV_NODE_TYPE => d.node_type = Some(a.u8(what)?),
                RDMA_NLDEV_ATTR_DEV_PROTOCOL => d.protocol = Some(a.string()),
                _ => {}
            }
        }
        out.push(d);
    }
    Ok(out)
}

/// Parse a raw `PORT_GET` dump.
pub fn parse_ports(raw: &[u8]) -> Result<Vec<Port>, Error> {
    let what = "RDMA PORT_GET reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let mut p = Port::default();
        for a in attr::parse(m.payload, what)? {
            match a.kind {
                RDMA_NLDEV_ATTR_PORT_INDEX => p.index = a.u32(what)?,
                RDMA_NLDEV_ATTR_PORT_STATE => p.state = Some(a.u8(what)?),
                RDMA_NLDEV_ATTR_PORT_PHYS_STATE => p.phys_state = Some(a.u8(what)?),
                RDMA_NLDEV_ATTR_NDEV_INDEX => p.netdev_index = Some(a.u32(what)?),
                RDMA_NLDEV_ATTR_NDEV_NAME => p.netdev = Some(a.string()),
                _ => {}
            }
        }
        out.push(p);
    }
    Ok(out)
}

/// Kind of RDMA resource in a `RES_*_GET` dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// Queue pair.
    Qp,
    /// Completion queue.
    Cq,
    /// Memory region.
    Mr,
    /// Protection domain.
    Pd,
    /// RDMA connection manager identifier.
    CmId,
    /// User verbs context.
    Ctx,
    /// Shared receive queue.
    Srq,
}

impl ResourceKind {
    /// (table attribute, entry attribute, object-number attribute) of this kind.
    fn attrs(self) -> (u16, u16, u16) {
        match self {
            ResourceKind::Qp => (
                RDMA_NLDEV_ATTR_RES_QP,
                RDMA_NLDEV_ATTR_RES_QP_ENTRY,
                RDMA_NLDEV_ATTR_RES_LQPN,
            ),
            ResourceKind::Cq => (
                RDMA_NLDEV_ATTR_RES_CQ,
                RDMA_NLDEV_ATTR_RES_CQ_ENTRY,
                RDMA_NLDEV_ATTR_RES_CQN,
            ),
            ResourceKind::Mr => (
                RDMA_NLDEV_ATTR_RES_MR,
                RDMA_NLDEV_ATTR_RES_MR_ENTRY,
                RDMA_NLDEV_ATTR_RES_MRN,
            ),
            ResourceKind::Pd => (
                RDMA_NLDEV_ATTR_RES_PD,
                RDMA_NLDEV_ATTR_RES_PD_ENTRY,
                RDMA_NLDEV_ATTR_RES_PDN,
            ),
            ResourceKind::CmId => (
                RDMA_NLDEV_ATTR_RES_CM_ID,
                RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY,
                RDMA_NLDEV_ATTR_RES_CM_IDN,
            ),
            ResourceKind::Ctx => (
                RDMA_NLDEV_ATTR_RES_CTX,
                RDMA_NLDEV_ATTR_RES_CTX_ENTRY,
                RDMA_NLDEV_ATTR_RES_CTXN,
            ),
            ResourceKind::Srq => (
                RDMA_NLDEV_ATTR_RES_SRQ,
                RDMA_NLDEV_ATTR_RES_SRQ_ENTRY,
                RDMA_NLDEV_ATTR_RES_SRQN,
            ),
        }
    }

    /// Every kind, in `rdma res show`'s order.
    pub const ALL: [ResourceKind; 7] = [
        ResourceKind::Pd,
        ResourceKind::Cq,
        ResourceKind::Qp,
        ResourceKind::CmId,
        ResourceKind::Mr,
        ResourceKind::Ctx,
        ResourceKind::Srq,
    ];

    /// The name the kernel's resource summary uses ("qp", "cm_id", ...).
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Qp => "qp",
            ResourceKind::Cq => "cq",
            ResourceKind::Mr => "mr",
            ResourceKind::Pd => "pd",
            ResourceKind::CmId => "cm_id",
            ResourceKind::Ctx => "ctx",
            ResourceKind::Srq => "srq",
        }
    }

    /// The kind named `name` (as [`ResourceKind::name`] spells it).
    pub fn from_name(name: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The dump operation listing this kind.
    pub fn op(self) -> u16 {
        match self {
            ResourceKind::Qp => op::RES_QP_GET,
            ResourceKind::Cq => op::RES_CQ_GET,
            ResourceKind::Mr => op::RES_MR_GET,
            ResourceKind::Pd => op::RES_PD_GET,
            ResourceKind::CmId => op::RES_CM_ID_GET,
            ResourceKind::Ctx => op::RES_CTX_GET,
            ResourceKind::Srq => op::RES_SRQ_GET,
        }
    }
}

/// One RDMA object: who owns it. SMC-R's objects are created by the kernel (`kern_name` "smc"),
/// so they carry no pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resource {
    /// QP, CQ, MR or PD.
    pub kind: ResourceKind,
    /// Device index.
    pub device_index: u32,
    /// Device name.
    pub device: String,
    /// QP number / CQ, MR, PD id.
    pub number: Option<u32>,
    /// Creating process, for user-space objects.
    pub pid: Option<u32>,
    /// Creating kernel module, for kernel objects.
    pub kern_name: Option<String>,
    /// Object type (`RES_TYPE`: the QP type for QPs, the SRQ type for SRQs, the port space
    /// is not this).
    pub object_type: Option<u8>,
    /// State (`RES_STATE`): a QP state ([`qp_state`]) or an RDMA CM state ([`cm_state`]).
    pub state: Option<u8>,
}

/// Name of a QP state (`enum ib_qp_state`).
pub fn qp_state(state: u8) -> &'static str {
    match state {
        0 => "RESET",
        1 => "INIT",
        2 => "RTR",
        3 => "RTS",
        4 => "SQD",
        5 => "SQE",
        6 => "ERR",
        _ => "UNKNOWN",
    }
}

/// Name of a QP type (`enum ib_qp_type`).
pub fn qp_type(t: u8) -> &'static str {
    match t {
        0 => "SMI",
        1 => "GSI",
        2 => "RC",
        3 => "UC",
        4 => "UD",
        5 => "RAW_IPV6",
        6 => "RAW_ETHERTYPE",
        8 => "RAW_PACKET",
        9 => "XRC_INI",
        10 => "XRC_TGT",
        _ => "UNKNOWN",
    }
}

/// Name of an RDMA CM identifier state (`enum rdma_cm_state`).
pub fn cm_state(state: u8) -> &'static str {
    match state {
        0 => "IDLE",
        1 => "ADDR_QUERY",
        2 => "ADDR_RESOLVED",
        3 => "ROUTE_QUERY",
        4 => "ROUTE_RESOLVED",
        5 => "CONNECT",
        6 => "DISCONNECT",
        7 => "ADDR_BOUND",
        8 => "LISTEN",
        9 => "DEVICE_REMOVAL",
        10 => "DESTROYING",
        _ => "UNKNOWN",
    }
}

impl Resource {
    /// The object's state by name: QP and CM identifier states; `None` for kinds without one.
    pub fn state_name(&self) -> Option<&'static str> {
        match self.kind {
            ResourceKind::Qp => self.state.map(qp_state),
            ResourceKind::CmId => self.state.map(cm_state),
            _ => None,
        }
    }
}

/// Per-device resource counts (`RES_GET`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceSummary {
    /// Device index.
    pub device_index: u32,
    /// Device name.
    pub device: String,
    /// (resource name such as "qp", current count).
    pub counts: Vec<(String, u64)>,
}

/// Parse a raw `RES_GET` dump.
pub fn parse_resource_summary(raw: &[u8]) -> Result<Vec<ResourceSummary>, Error> {
    let what = "RDMA RES_GET reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let mut s = ResourceSummary::default();
        for a in attr::parse(m.payload, what)? {
            match a.kind {
                RDMA_NLDEV_ATTR_DEV_INDEX => s.device_index = a.u32(what)?,
                RDMA_NLDEV_ATTR_DEV_NAME => s.device = a.string(),
                RDMA_NLDEV_ATTR_RES_SUMMARY => {
                    for e in a.nested(what)? {
                        if e.kind != RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY {
                            continue;
                        }
                        let (mut name, mut curr) = (String::new(), 0);
                        for f in e.nested(what)? {
                            match f.kind {
                                RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME => name = f.string(),
                                RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR => curr = f.u64(what)?,
                                _ => {}
                            }
                        }
                        s.counts.push((name, curr));
                    }
                }
                _ => {}
            }
        }
        out.push(s);
    }
    Ok(out)
}

/// Parse a raw `RES_QP_GET` / `RES_CQ_GET` / `RES_MR_GET` / `RES_PD_GET` dump of `kind`.
pub fn parse_resources(raw: &[u8], kind: ResourceKind) -> Result<Vec<Resource>, Error> {
    let what = "RDMA resource dump reply";
    let (table, entry, number) = kind.attrs();
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let attrs = attr::parse(m.payload, what)?;
        let mut device_index = 0;
        let mut device = String::new();
        for a in &attrs {
            match a.kind {
                RDMA_NLDEV_ATTR_DEV_INDEX => device_index = a.u32(what)?,
                RDMA_NLDEV_ATTR_DEV_NAME => device = a.string(),
                _ => {}
            }
        }
        for a in attrs.iter().filter(|a| a.kind == table) {
            for e in a.nested(what)?.iter().filter(|e| e.kind == entry) {
                let mut r = Resource {
                    kind,
                    device_index,
                    device: device.clone(),
                    number: None,
                    pid: None,
                    kern_name: None,
                    object_type: None,
                    state: None,
                };
                for f in e.nested(what)? {
                    match f.kind {
                        k if k == number => r.number = Some(f.u32(what)?),
                        RDMA_NLDEV_ATTR_RES_PID => r.pid = Some(f.u32(what)?),
                        RDMA_NLDEV_ATTR_RES_KERN_NAME => r.kern_name = Some(f.string()),
                        RDMA_NLDEV_ATTR_RES_TYPE => r.object_type = Some(f.u8(what)?),
                        RDMA_NLDEV_ATTR_RES_STATE => r.state = Some(f.u8(what)?),
                        _ => {}
                    }
                }
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// RDMA devices with their ports. Without ib_core this is [`Error::ModuleMissing`].
pub fn devices() -> Result<Vec<Device>, Error> {
    let mut devs = parse_devices(&dump_raw(op::GET, None)?)?;
    for d in &mut devs {
        // Port details are a nicety: a device that refuses them is still listed.
        if let Ok(raw) = dump_raw(op::PORT_GET, Some(d.index)) {
            d.ports = parse_ports(&raw).unwrap_or_default();
        }
    }
    Ok(devs)
}

/// Create an RDMA link of `link_type` ("rxe") named `name` on network device `netdev`.
/// The kernel loads `rdma_rxe` on demand; errors keep the kernel's errno (EEXIST: the name or
/// netdev is taken; ENODEV: no such netdev; EINVAL: unknown link type, i.e. module missing).
pub fn add_link(name: &str, link_type: &str, netdev: &str) -> Result<(), Error> {
    let what = format!("creating RDMA link {name} (type {link_type}) on {netdev}");
    let attrs = Writer::new()
        .string(RDMA_NLDEV_ATTR_DEV_NAME, name)
        .string(RDMA_NLDEV_ATTR_LINK_TYPE, link_type)
        .string(RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
        .finish();
    nl::transact(Protocol::Rdma, message_type(op::NEWLINK), &attrs, &what)
        .map(drop)
        .map_err(rdma_missing)
}

/// Delete the RDMA link with device index `index`.
pub fn del_link(index: u32, name: &str) -> Result<(), Error> {
    let what = format!("deleting RDMA link {name}");
    let attrs = Writer::new().u32(RDMA_NLDEV_ATTR_DEV_INDEX, index).finish();
    nl::transact(Protocol::Rdma, message_type(op::DELLINK), &attrs, &what)
        .map(drop)
        .map_err(rdma_missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl::frame;
    use netlink_packet_core::NLMSG_DONE;

    fn reply(op: u16, bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut raw = Vec::new();
        for b in bodies {
            raw.extend(frame(message_type(op), 2, 1, b));
        }
        raw.extend(frame(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes()));
        raw
    }

    #[test]
    fn message_type_encodes_client_and_op() {
        assert_eq!(message_type(op::GET), 0x1401);
        assert_eq!(message_type(op::NEWLINK), 0x1403);
    }

    #[test]
    fn parses_devices_and_ports() {
        let dev = Writer::new()
            .u32(RDMA_NLDEV_ATTR_DEV_INDEX, 3)
            .string(RDMA_NLDEV_ATTR_DEV_NAME, "rxe_lo")
            .u32(RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .bytes(RDMA_NLDEV_ATTR_NODE_GUID, &1u64.to_ne_bytes())
            .u8(RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1)
            .string(RDMA_NLDEV_ATTR_DEV_PROTOCOL, "roce")
            .finish();
        let d = parse_devices(&reply(op::GET, &[dev])).unwrap();
        assert_eq!(d[0].index, 3);
        assert_eq!(d[0].name, "rxe_lo");
        assert_eq!(d[0].node_type, Some(1));
        assert_eq!(d[0].protocol.as_deref(), Some("roce"));
        let port = Writer::new()
            .u32(RDMA_NLDEV_ATTR_DEV_INDEX, 3)
            .u32(RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .u8(RDMA_NLDEV_ATTR_PORT_STATE, 4)
            .u8(RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 5)
            .u32(RDMA_NLDEV_ATTR_NDEV_INDEX, 1)
            .string(RDMA_NLDEV_ATTR_NDEV_NAME, "lo")
            .finish();
        let p = parse_ports(&reply(op::PORT_GET, &[port])).unwrap();
        assert_eq!(p[0].state.map(port_state), Some("ACTIVE"));
        assert_eq!(p[0].netdev.as_deref(), Some("lo"));
    }

    #[test]
    fn parses_resource_summary_and_entries() {
        let entry = |name: &str, n: u64| {
            Writer::new()
                .string(RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, name)
                .bytes(RDMA_NLDEV_ATTR_PAD, &[])
                .bytes(RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, &n.to_ne_bytes())
                .finish()
        };
        let summary = Writer::new()
            .bytes(RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY | 0x8000, &entry("pd", 1))
            .bytes(RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY | 0x8000, &entry("qp", 4))
            .finish();
        let msg = Writer::new()
            .u32(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
            .string(RDMA_NLDEV_ATTR_DEV_NAME, "rxe_lo")
            .bytes(RDMA_NLDEV_ATTR_RES_SUMMARY | 0x8000, &summary)
            .finish();
        let s = parse_resource_summary(&reply(op::RES_GET, &[msg])).unwrap();
        assert_eq!(s[0].device, "rxe_lo");
        assert_eq!(
            s[0].counts,
            vec![("pd".to_string(), 1), ("qp".to_string(), 4)]
        );

        let qp = |n: u32| {
            Writer::new()
                .u32(RDMA_NLDEV_ATTR_RES_LQPN, n)
                .u8(RDMA_NLDEV_ATTR_RES_TYPE, 2)
                .string(RDMA_NLDEV_ATTR_RES_KERN_NAME, "smc")
                .finish()
        };
        let table = Writer::new()
            .bytes(RDMA_NLDEV_ATTR_RES_QP_ENTRY | 0x8000, &qp(17))
            .bytes(RDMA_NLDEV_ATTR_RES_QP_ENTRY | 0x8000, &qp(18))
            .finish();
        let msg = Writer::new()
            .u32(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
            .string(RDMA_NLDEV_ATTR_DEV_NAME, "rxe_lo")
            .bytes(RDMA_NLDEV_ATTR_RES_QP | 0x8000, &table)
            .finish();
        let r = parse_resources(&reply(op::RES_QP_GET, &[msg]), ResourceKind::Qp).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].number, Some(18));
        assert_eq!(r[0].kern_name.as_deref(), Some("smc"));
        assert_eq!(r[0].pid, None);
    }

    #[test]
    fn bad_widths_are_errors() {
        let dev = Writer::new().u8(RDMA_NLDEV_ATTR_DEV_INDEX, 3).finish();
        assert!(parse_devices(&reply(op::GET, &[dev])).is_err());
    }
}
