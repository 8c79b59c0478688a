//! `smcrun linkgroup --json`, `smcrun link --json`, `smcrun device --json` and `smcrun info
//! --json`: link groups, links, devices and what this kernel's SMC can do. `linkgroup --json` reads
//! back too (`Deserialize`): the VM's guest checks (`tests/vm/check`) read it in these types.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use smcrun_kernel::reasons;
use smcrun_kernel::smc_genl::{
    self, Device, DevicePort, Link, LinkGroup, LinkGroupSmcd, LoopbackEvidence, LoopbackIsm,
    SysInfo,
};

use crate::ss::json::hex16;
use crate::this_netns;

/// A link group's id as the views print it (`00000100`), in `linkgroup`'s LG-ID column and
/// `ss -D`'s Linkid column alike.
pub fn lgr_id(id: u32) -> String {
    format!("{id:08x}")
}

/// An interface's name as the views print it (`-` for none or one not in this namespace).
pub fn ifname(index: u32) -> String {
    this_netns::ifname(index).unwrap_or_else(|| "-".to_string())
}

/// `smcrun linkgroup --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkGroupsView {
    /// SMC-R link groups of this network namespace.
    pub link_groups: Vec<GroupView>,
    /// SMC-D link groups (all namespaces: the kernel does not say whose).
    pub smcd_link_groups: Vec<SmcdGroupView>,
}

impl LinkGroupsView {
    /// The view of SMC-R `groups` and SMC-D `smcd` groups.
    pub fn new(groups: &[LinkGroup], smcd: &[LinkGroupSmcd]) -> LinkGroupsView {
        LinkGroupsView {
            link_groups: groups.iter().map(GroupView::new).collect(),
            smcd_link_groups: smcd.iter().map(SmcdGroupView::new).collect(),
        }
    }
}

/// One SMC-R link group; the peer's SMCv2 facts are `null` for an SMCv1 group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupView {
    /// Its id (8 hex digits).
    pub id: String,
    /// `SERV` or `CLNT`.
    pub role: Cow<'static, str>,
    /// `SINGLE`, `SYM`, ...
    #[serde(rename = "type")]
    pub lgr_type: Cow<'static, str>,
    /// VLAN id.
    pub vlan: u8,
    /// Connections.
    pub conns: u32,
    /// PNET id.
    pub pnet_id: String,
    /// SMC version.
    pub version: Option<u8>,
    /// The peer's SMC release.
    pub peer_release: Option<u8>,
    /// The peer's host name.
    pub peer_host: Option<String>,
    /// The peer's operating system.
    pub peer_os: Option<Cow<'static, str>>,
    /// The negotiated EID.
    pub eid: Option<String>,
    /// Whether the peer is directly reachable.
    pub direct: Option<bool>,
    /// Maximum connections.
    pub max_conns: Option<u8>,
    /// Maximum links.
    pub max_links: Option<u8>,
    /// Buffer type (`physical`, `virtual`).
    pub buf_type: Option<Cow<'static, str>>,
    /// Send buffer memory.
    pub sndbuf_bytes: Option<u64>,
    /// RMB memory.
    pub rmb_bytes: Option<u64>,
    /// The network namespace's cookie.
    pub net_cookie: Option<u64>,
    /// Its links.
    pub links: Vec<LinkView>,
}

impl GroupView {
    /// The view of `g`.
    pub fn new(g: &LinkGroup) -> GroupView {
        let v2 = g.v2.as_ref();
        GroupView {
            id: lgr_id(g.id),
            role: reasons::role(g.role),
            lgr_type: reasons::lgr_type(g.lgr_type),
            vlan: g.vlan_id,
            conns: g.conns,
            pnet_id: g.pnetid.clone(),
            version: v2.map(|v| v.version),
            peer_release: v2.map(|v| v.release),
            peer_host: v2.map(|v| v.peer_host.clone()),
            peer_os: v2.map(|v| reasons::peer_os(v.peer_os)),
            eid: v2.map(|v| v.negotiated_eid.clone()),
            direct: g.direct,
            max_conns: g.max_conns,
            max_links: g.max_links,
            buf_type: g.buf_type.map(reasons::buf_type),
            sndbuf_bytes: g.sndbuf_alloc,
            rmb_bytes: g.rmb_alloc,
            net_cookie: g.net_cookie,
            links: g.links.iter().map(|l| LinkView::new(g, l)).collect(),
        }
    }
}

/// `smcrun link --json`: `{"links": [...]}`.
#[derive(Debug, Clone, Serialize)]
pub struct LinksView {
    /// Every link of every group.
    pub links: Vec<LinkView>,
}

impl LinksView {
    /// The links of `groups`.
    pub fn new(groups: &[LinkGroup]) -> LinksView {
        LinksView {
            links: groups
                .iter()
                .flat_map(|g| g.links.iter().map(move |l| LinkView::new(g, l)))
                .collect(),
        }
    }
}

/// One SMC-R link with its group's id, role and type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkView {
    /// The group's id.
    pub lgr_id: String,
    /// The group's role.
    pub lgr_role: Cow<'static, str>,
    /// The group's type.
    pub lgr_type: Cow<'static, str>,
    /// The link's id.
    pub link_id: u8,
    /// State name.
    pub state: Cow<'static, str>,
    /// The kernel's state number.
    pub state_code: u32,
    /// Connections.
    pub conns: u32,
    /// Net device name (`-` when not in this namespace).
    pub net_dev: String,
    /// Net device index.
    pub net_dev_index: u32,
    /// RDMA device.
    pub ib_dev: String,
    /// RDMA port.
    pub ib_port: u8,
    /// Link UID.
    pub uid: String,
    /// The peer's link UID.
    pub peer_uid: String,
    /// Local GID.
    pub gid: String,
    /// Peer GID.
    pub peer_gid: String,
}

impl LinkView {
    /// The view of link `l` of group `g`.
    pub fn new(g: &LinkGroup, l: &Link) -> LinkView {
        LinkView {
            lgr_id: lgr_id(g.id),
            lgr_role: reasons::role(g.role),
            lgr_type: reasons::lgr_type(g.lgr_type),
            link_id: l.id,
            state: reasons::link_state(l.state),
            state_code: l.state,
            conns: l.conn_count,
            net_dev: ifname(l.net_dev),
            net_dev_index: l.net_dev,
            ib_dev: l.ib_dev.clone(),
            ib_port: l.ib_port,
            uid: l.uid.clone(),
            peer_uid: l.peer_uid.clone(),
            gid: l.gid.clone(),
            peer_gid: l.peer_gid.clone(),
        }
    }
}

/// One SMC-D link group; GIDs as 16 hex digits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SmcdGroupView {
    /// Its id.
    pub id: String,
    /// VLAN id.
    pub vlan: u8,
    /// Connections.
    pub conns: u32,
    /// PNET id.
    pub pnet_id: String,
    /// Local GID.
    pub gid: String,
    /// Peer GID.
    pub peer_gid: String,
    /// Channel id (0xffff: loopback-ism).
    pub chid: u32,
    /// The device (`loopback-ism` or `ism`).
    pub device: String,
    /// SMC version (`null` for SMCv1).
    pub version: Option<u8>,
    /// The negotiated EID.
    pub eid: Option<String>,
    /// The peer's operating system.
    pub peer_os: Option<Cow<'static, str>>,
    /// Send buffer memory.
    pub sndbuf_bytes: Option<u64>,
    /// DMB memory.
    pub dmb_bytes: Option<u64>,
}

impl SmcdGroupView {
    /// The view of `g`.
    pub fn new(g: &LinkGroupSmcd) -> SmcdGroupView {
        let v2 = g.v2.as_ref();
        SmcdGroupView {
            id: lgr_id(g.id),
            vlan: g.vlan_id,
            conns: g.conns,
            pnet_id: g.pnetid.clone(),
            gid: hex16(g.gid),
            peer_gid: hex16(g.peer_gid),
            chid: g.chid,
            device: g.device(),
            version: v2.map(|v| v.version),
            eid: v2.map(|v| v.negotiated_eid.clone()),
            peer_os: v2.map(|v| reasons::peer_os(v.peer_os)),
            sndbuf_bytes: g.sndbuf_alloc,
            dmb_bytes: g.dmb_alloc,
        }
    }
}

/// `smcrun device --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevicesView {
    /// SMC-R devices.
    pub smcr_devices: Vec<DeviceView>,
    /// SMC-D devices in the kernel's dump (never loopback-ism).
    pub smcd_devices: Vec<DeviceView>,
    /// loopback-ism as far as the kernel shows it (`null` when nothing does).
    pub smcd_loopback: Option<LoopbackView>,
}

impl DevicesView {
    /// The view of the devices and loopback-ism.
    pub fn new(smcr: &[Device], smcd: &[Device], lo: Option<&LoopbackIsm>) -> DevicesView {
        DevicesView {
            smcr_devices: smcr.iter().map(DeviceView::new).collect(),
            smcd_devices: smcd.iter().map(DeviceView::new).collect(),
            smcd_loopback: lo.map(LoopbackView::new),
        }
    }
}

/// One SMC device with its ports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceView {
    /// RDMA device name.
    pub ib_dev: String,
    /// PCI id.
    pub pci_id: String,
    /// PCI vendor (`0x1af4`).
    pub pci_vendor: String,
    /// PCI device (`0x1000`).
    pub pci_device: String,
    /// PCI function id.
    pub pci_fid: u32,
    /// Channel id.
    pub pci_chid: u32,
    /// Whether links depend on it alone.
    pub critical: bool,
    /// Users.
    pub use_count: u32,
    /// Its ports.
    pub ports: Vec<PortView>,
}

impl DeviceView {
    /// The view of `d`.
    pub fn new(d: &Device) -> DeviceView {
        DeviceView {
            ib_dev: d.ib_name.clone(),
            pci_id: d.pci_id.clone(),
            pci_vendor: format!("0x{:04x}", d.pci_vendor),
            pci_device: format!("0x{:04x}", d.pci_device),
            pci_fid: d.pci_fid,
            pci_chid: d.pci_chid,
            critical: d.critical,
            use_count: d.use_count,
            ports: d
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| PortView::new(i + 1, p))
                .collect(),
        }
    }
}

/// A device port's state as `smcr device` prints it.
pub fn port_state(p: &DevicePort) -> &'static str {
    if p.state != 0 {
        "ACTIVE"
    } else {
        "INACTIVE"
    }
}

/// One port of a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortView {
    /// Port number (from 1).
    pub port: usize,
    /// Net device name.
    pub net_dev: String,
    /// Net device index.
    pub net_dev_index: u32,
    /// `ACTIVE` or `INACTIVE`.
    pub state: Cow<'static, str>,
    /// Whether SMC may use it.
    pub valid: bool,
    /// Links on it.
    pub links: u32,
    /// PNET id.
    pub pnet_id: String,
    /// Whether the user set the PNET id.
    pub pnet_id_by_user: bool,
}

impl PortView {
    /// Port number `port` of a device, `p`.
    pub fn new(port: usize, p: &DevicePort) -> PortView {
        PortView {
            port,
            net_dev: ifname(p.netdev),
            net_dev_index: p.netdev,
            state: port_state(p).into(),
            valid: p.valid,
            links: p.link_count,
            pnet_id: p.pnetid.clone(),
            pnet_id_by_user: p.pnetid_by_user,
        }
    }
}

/// loopback-ism as far as the kernel shows it: never in the device dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopbackView {
    /// `loopback-ism`.
    pub name: Cow<'static, str>,
    /// Its channel id.
    pub chid: u32,
    /// Always false: Linux leaves it out of the SMC-D device dump.
    pub in_device_dump: bool,
    /// How it was found.
    pub seen_from: LoopbackEvidence,
    /// Its link groups.
    pub link_groups: usize,
    /// Connections in them.
    pub conns: u64,
}

impl LoopbackView {
    /// The view of `l`.
    pub fn new(l: &LoopbackIsm) -> LoopbackView {
        LoopbackView {
            name: smc_genl::LOOPBACK_ISM.into(),
            chid: smc_genl::LOOPBACK_ISM_CHID,
            in_device_dump: false,
            seen_from: l.seen_from,
            link_groups: l.link_groups,
            conns: l.conns,
        }
    }
}

/// `smcrun info --json`; the text of `smcrun info` is made from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InfoView {
    /// `VERSION.RELEASE`.
    pub smc_version: String,
    /// SMC version.
    pub version: u8,
    /// SMC release.
    pub release: u8,
    /// The host name SMC gives peers.
    pub host: String,
    /// The system EID.
    pub seid: String,
    /// Whether the SEID is used (`null` when the kernel would not say).
    pub seid_enabled: Option<bool>,
    /// User EIDs (`null`, not an empty list, when the kernel would not say).
    pub ueids: Option<Vec<String>>,
    /// SMC-Rv2 capable.
    pub smcr_v2: bool,
    /// SMC-Dv2 capable.
    pub smcd_v2: bool,
    /// SMC-R devices.
    pub smcr_devices: usize,
    /// SMC-D devices in the dump.
    pub smcd_devices: usize,
    /// loopback-ism (`null` when nothing shows it).
    pub smcd_loopback: Option<LoopbackView>,
}

impl InfoView {
    /// The view of system info `s`, the SEID's state, the UEIDs and the device counts.
    pub fn new(
        s: &SysInfo,
        seid_enabled: Option<bool>,
        ueids: Option<Vec<String>>,
        [smcr_devices, smcd_devices]: [usize; 2],
        lo: Option<&LoopbackIsm>,
    ) -> InfoView {
        InfoView {
            smc_version: format!("{}.{}", s.version, s.release),
            version: s.version,
            release: s.release,
            host: s.local_host.clone(),
            seid: s.seid.clone(),
            seid_enabled,
            ueids,
            smcr_v2: s.smcr_v2,
            smcd_v2: s.ism_v2,
            smcr_devices,
            smcd_devices,
            smcd_loopback: lo.map(LoopbackView::new),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_a_name() {
        assert_eq!(ifname(1), "lo");
        assert_eq!(ifname(0), "-");
    }
    use crate::fixtures::raw;
    use crate::json::golden::{assert_reads_back, assert_round_trips, assert_same, value};
    use smcrun_kernel::smc_genl::*;

    const PHASES: [&str; 4] = ["smcr", "smcd", "fallback", "smcd-fallback"];

    fn groups(p: &str) -> (Vec<LinkGroup>, Vec<LinkGroupSmcd>) {
        (
            parse_link_groups(&raw(p, "smc_GET_LINK_SMCR")).unwrap(),
            parse_link_groups_smcd(&raw(p, "smc_GET_LGR_SMCD")).unwrap(),
        )
    }

    struct Devs {
        sys: SysInfo,
        smcr: Vec<Device>,
        smcd: Vec<Device>,
        lo: Option<LoopbackIsm>,
    }

    fn devices(p: &str) -> Devs {
        let sys = parse_sys_info(&raw(p, "smc_GET_SYS_INFO")).unwrap();
        let smcd = parse_devices_smcd(&raw(p, "smc_GET_DEV_SMCD")).unwrap();
        let lo = loopback_ism(&sys, &smcd, &groups(p).1);
        Devs {
            smcr: parse_devices(&raw(p, "smc_GET_DEV_SMCR")).unwrap(),
            sys,
            smcd,
            lo,
        }
    }

    fn info(p: &str) -> InfoView {
        let d = devices(p);
        let seid = parse_seid(&raw(p, "smc_DUMP_SEID")).unwrap();
        let ueids = parse_ueids(&raw(p, "smc_DUMP_UEID")).unwrap();
        InfoView::new(
            &d.sys,
            Some(seid.enabled),
            Some(ueids),
            [d.smcr.len(), d.smcd.len()],
            d.lo.as_ref(),
        )
    }

    #[test]
    fn linkgroup_link_and_device_of_every_capture_as_golden() {
        for p in PHASES {
            let (g, d) = groups(p);
            assert_same(&format!("linkgroup-{p}"), &LinkGroupsView::new(&g, &d));
            assert_same(&format!("link-{p}"), &LinksView::new(&g));
            let d = devices(p);
            let v = DevicesView::new(&d.smcr, &d.smcd, d.lo.as_ref());
            assert_same(&format!("device-{p}"), &v);
        }
    }

    #[test]
    fn linkgroup_reads_back_as_printed() {
        for p in PHASES {
            let (g, d) = groups(p);
            assert_round_trips(p, &LinkGroupsView::new(&g, &d));
        }
    }

    #[test]
    fn device_and_info_read_back_as_printed() {
        for p in PHASES {
            assert_reads_back::<DevicesView>(&format!("device-{p}"));
            assert_reads_back::<InfoView>(&format!("info-{p}"));
        }
        assert_reads_back::<InfoView>("info-unknown");
    }

    #[test]
    fn info_of_every_capture_as_golden() {
        for p in PHASES {
            assert_same(&format!("info-{p}"), &info(p));
        }
        // a kernel that would not say whether the SEID is used, nor its UEIDs
        let d = devices("smcr");
        let v = InfoView::new(&d.sys, None, None, [1, 0], None);
        assert_same("info-unknown", &v);
    }

    #[test]
    fn linkgroup_smcv1_group_has_null_peer_facts() {
        let (mut g, _) = groups("smcr");
        let g = &mut g[0];
        g.v2 = None;
        g.sndbuf_alloc = None;
        let j = value(&GroupView::new(g));
        for k in [
            "version",
            "peer_release",
            "peer_host",
            "peer_os",
            "eid",
            "sndbuf_bytes",
        ] {
            assert!(j[k].is_null(), "{k}: {j}");
        }
        let (_, mut d) = groups("smcd");
        d[0].v2 = None;
        let j = value(&SmcdGroupView::new(&d[0]));
        assert!(j["version"].is_null() && j["eid"].is_null(), "{j}");
    }

    #[test]
    fn device_without_loopback_ism_is_null() {
        let d = devices("smcr");
        let j = value(&DevicesView::new(&d.smcr, &d.smcd, None));
        assert!(j["smcd_loopback"].is_null(), "{j}");
        assert_eq!(j["smcr_devices"][0]["ports"][0]["state"], "ACTIVE");
    }
}
