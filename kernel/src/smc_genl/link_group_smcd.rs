//! `GET_LGR_SMCD`: SMC-D link groups, and loopback-ism, the software SMC-D device, as far as the
//! kernel shows it.

use serde::{Deserialize, Serialize};

use super::link_group::{v2_common, LinkGroupV2};
use super::{nests, Device, SysInfo};
use crate::abi::smc::*;
use crate::error::Error;

/// One SMC-D link group (`GET_LGR_SMCD`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkGroupSmcd {
    /// Link group id.
    pub id: u32,
    /// Local ISM GID.
    pub gid: u64,
    /// Peer ISM GID.
    pub peer_gid: u64,
    /// Extended local GID (kernels with virtual ISM).
    pub ext_gid: Option<u64>,
    /// Extended peer GID.
    pub peer_ext_gid: Option<u64>,
    /// VLAN id.
    pub vlan_id: u8,
    /// Connections in the group.
    pub conns: u32,
    /// PNET ID.
    pub pnetid: String,
    /// Channel id.
    pub chid: u32,
    /// SMC v2 details, when negotiated.
    pub v2: Option<LinkGroupV2>,
    /// Send buffer bytes allocated.
    pub sndbuf_alloc: Option<u64>,
    /// DMB bytes allocated.
    pub dmb_alloc: Option<u64>,
}

/// The name of loopback-ism, the software SMC-D device of kernels built with `CONFIG_SMC_LO`
/// (Linux 6.10+): SMC-D between the processes (and network namespaces) of one kernel.
pub const LOOPBACK_ISM: &str = "loopback-ism";
/// loopback-ism's channel id (`SMC_LO_RESERVED_CHID`): an SMC-D link group with this CHID runs on it.
pub const LOOPBACK_ISM_CHID: u32 = 0xffff;

impl LinkGroupSmcd {
    /// Whether the group runs on loopback-ism (by its CHID).
    pub fn on_loopback_ism(&self) -> bool {
        self.chid == LOOPBACK_ISM_CHID
    }

    /// The SMC-D device the group runs on, as an operator names it: `loopback-ism`, or an ISM
    /// device by its channel id (`ISM CHID 0a00`).
    pub fn device(&self) -> String {
        if self.on_loopback_ism() {
            LOOPBACK_ISM.to_string()
        } else {
            format!("ISM CHID {:04x}", self.chid)
        }
    }
}

/// Where loopback-ism was seen. The kernel's SMC-D device dump (`GET_DEV_SMCD`) leaves it out
/// (6.12 skips it in `smc_nl_prep_smcd_dev`), and it has no sysfs entry, so it is found from
/// what the kernel does report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopbackEvidence {
    /// SMC-D link groups with loopback-ism's CHID exist: it is there and in use.
    LinkGroups,
    /// The kernel says it can do SMC-Dv2 (`SYS_IS_ISM_V2`) and dumps no ISM device: nothing but
    /// loopback-ism makes a kernel SMC-Dv2-capable without an ISM device in that dump.
    SmcdV2WithoutIsm,
}

/// loopback-ism as far as the kernel shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoopbackIsm {
    /// How it was found.
    pub seen_from: LoopbackEvidence,
    /// Its SMC-D link groups (all network namespaces: the kernel does not say whose).
    pub link_groups: usize,
    /// Connections in those groups.
    pub conns: u64,
}

/// Find loopback-ism from the system info, the SMC-D device dump and the SMC-D link groups;
/// `None` when nothing shows it (a kernel without `CONFIG_SMC_LO`, or one with ISM devices and
/// no loopback-ism link group, where the two cannot be told apart).
pub fn loopback_ism(
    sys: &SysInfo,
    devices: &[Device],
    groups: &[LinkGroupSmcd],
) -> Option<LoopbackIsm> {
    let on_lo: Vec<&LinkGroupSmcd> = groups.iter().filter(|g| g.on_loopback_ism()).collect();
    let seen_from = if !on_lo.is_empty() {
        LoopbackEvidence::LinkGroups
    } else if sys.ism_v2 && devices.is_empty() {
        LoopbackEvidence::SmcdV2WithoutIsm
    } else {
        return None;
    };
    Some(LoopbackIsm {
        seen_from,
        link_groups: on_lo.len(),
        conns: on_lo.iter().map(|g| u64::from(g.conns)).sum(),
    })
}

/// Parse a raw `GET_LGR_SMCD` reply (its pad attribute, `SMC_NLA_LGR_D_PAD`, is skipped).
pub fn parse_link_groups_smcd(raw: &[u8]) -> Result<Vec<LinkGroupSmcd>, Error> {
    let what = "SMC GET_LGR_SMCD reply";
    let mut out = Vec::new();
    for (_, attrs) in nests(raw, SMC_GEN_LGR_SMCD, what)? {
        let mut g = LinkGroupSmcd::default();
        for a in &attrs {
            match a.kind {
                SMC_NLA_LGR_D_ID => g.id = a.u32(what)?,
                SMC_NLA_LGR_D_GID => g.gid = a.u64(what)?,
                SMC_NLA_LGR_D_PEER_GID => g.peer_gid = a.u64(what)?,
                SMC_NLA_LGR_D_VLAN_ID => g.vlan_id = a.u8(what)?,
                SMC_NLA_LGR_D_CONNS_NUM => g.conns = a.u32(what)?,
                SMC_NLA_LGR_D_PNETID => g.pnetid = a.string().trim_end().to_string(),
                SMC_NLA_LGR_D_CHID => g.chid = a.u16_or_u32(what)?,
                SMC_NLA_LGR_D_V2_COMMON => g.v2 = Some(v2_common(a, what)?),
                SMC_NLA_LGR_D_EXT_GID => g.ext_gid = Some(a.u64(what)?),
                SMC_NLA_LGR_D_PEER_EXT_GID => g.peer_ext_gid = Some(a.u64(what)?),
                SMC_NLA_LGR_D_SNDBUF_ALLOC => g.sndbuf_alloc = Some(a.uint(what)?),
                SMC_NLA_LGR_D_DMB_ALLOC => g.dmb_alloc = Some(a.uint(what)?),
                _ => {}
            }
        }
        out.push(g);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::{nest, reply};

    #[test]
    fn smcd_link_groups() {
        let lgr = Writer::new()
            .u32(SMC_NLA_LGR_D_ID, 9)
            .bytes(SMC_NLA_LGR_D_PAD, &[])
            .bytes(SMC_NLA_LGR_D_GID, &0x1111u64.to_ne_bytes())
            .bytes(SMC_NLA_LGR_D_PEER_GID, &0x2222u64.to_ne_bytes())
            .u32(SMC_NLA_LGR_D_CONNS_NUM, 2)
            .bytes(SMC_NLA_LGR_D_CHID, &0xffffu16.to_ne_bytes())
            .bytes(
                SMC_NLA_LGR_D_V2_COMMON | 0x8000,
                &Writer::new().u8(SMC_NLA_LGR_V2_VER, 2).finish(),
            )
            .u32(SMC_NLA_LGR_D_DMB_ALLOC, 1 << 20);
        let raw = reply(cmd::GET_LGR_SMCD, &[nest(SMC_GEN_LGR_SMCD, lgr).finish()]);
        let g = &parse_link_groups_smcd(&raw).unwrap()[0];
        assert_eq!(
            (g.id, g.gid, g.peer_gid, g.conns, g.chid),
            (9, 0x1111, 0x2222, 2, 0xffff)
        );
        assert_eq!(g.v2.as_ref().unwrap().version, 2);
        assert_eq!(g.dmb_alloc, Some(1 << 20));
    }

    #[test]
    fn loopback_ism_from_what_the_kernel_reports() {
        let lo = LinkGroupSmcd {
            chid: LOOPBACK_ISM_CHID,
            conns: 3,
            ..Default::default()
        };
        let ism = LinkGroupSmcd {
            chid: 0x0a00,
            conns: 5,
            ..Default::default()
        };
        assert_eq!(
            (lo.device().as_str(), ism.device().as_str()),
            ("loopback-ism", "ISM CHID 0a00")
        );
        let v2 = SysInfo {
            ism_v2: true,
            ..Default::default()
        };
        let l = loopback_ism(&SysInfo::default(), &[], &[lo.clone(), ism.clone(), lo]).unwrap();
        assert_eq!(
            (l.seen_from, l.link_groups, l.conns),
            (LoopbackEvidence::LinkGroups, 2, 6)
        );
        let l = loopback_ism(&v2, &[], &[]).unwrap();
        assert_eq!(
            (l.seen_from, l.link_groups, l.conns),
            (LoopbackEvidence::SmcdV2WithoutIsm, 0, 0)
        );
        // an ISM device may be what makes the kernel SMC-Dv2-capable; no SMC-Dv2 at all: no loopback
        assert_eq!(
            loopback_ism(&v2, &[Device::default()], std::slice::from_ref(&ism)),
            None
        );
        assert_eq!(loopback_ism(&SysInfo::default(), &[], &[ism]), None);
    }
}
