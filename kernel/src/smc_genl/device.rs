//! `GET_DEV_SMCR` and `GET_DEV_SMCD`: the RDMA and ISM devices SMC can use, with their ports.

use serde::Serialize;

use super::nests;
use crate::abi::smc::*;
use crate::error::Error;

/// One port of an SMC device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DevicePort {
    /// PNET ID set by the user (not by firmware).
    pub pnetid_by_user: bool,
    /// PNET ID.
    pub pnetid: String,
    /// Network device ifindex.
    pub netdev: u32,
    /// Port state (1 active).
    pub state: u8,
    /// Port usable by SMC.
    pub valid: bool,
    /// Links on the port.
    pub link_count: u32,
}

/// One SMC-R device (`GET_DEV_SMCR`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    /// RDMA device name.
    pub ib_name: String,
    /// Users of the device.
    pub use_count: u32,
    /// Device is critical (last link of some link group).
    pub critical: bool,
    /// PCI function id.
    pub pci_fid: u32,
    /// PCI channel id.
    pub pci_chid: u32,
    /// PCI vendor.
    pub pci_vendor: u16,
    /// PCI device.
    pub pci_device: u16,
    /// PCI id text.
    pub pci_id: String,
    /// Port 1 and port 2.
    pub ports: Vec<DevicePort>,
}

/// Parse a raw `GET_DEV_SMCR` reply.
pub fn parse_devices(raw: &[u8]) -> Result<Vec<Device>, Error> {
    devices(raw, SMC_GEN_DEV_SMCR, "SMC GET_DEV_SMCR reply")
}

/// Parse a raw `GET_DEV_SMCD` reply (same layout as SMC-R devices, without an RDMA name).
pub fn parse_devices_smcd(raw: &[u8]) -> Result<Vec<Device>, Error> {
    devices(raw, SMC_GEN_DEV_SMCD, "SMC GET_DEV_SMCD reply")
}

fn devices(raw: &[u8], top: u16, what: &str) -> Result<Vec<Device>, Error> {
    let mut out = Vec::new();
    for (_, attrs) in nests(raw, top, what)? {
        let mut d = Device::default();
        for a in &attrs {
            match a.kind {
                SMC_NLA_DEV_USE_CNT => d.use_count = a.u32(what)?,
                SMC_NLA_DEV_IS_CRIT => d.critical = a.u8(what)? != 0,
                SMC_NLA_DEV_PCI_FID => d.pci_fid = a.u32(what)?,
                SMC_NLA_DEV_PCI_CHID => d.pci_chid = a.u16_or_u32(what)?,
                SMC_NLA_DEV_PCI_VENDOR => d.pci_vendor = a.u16(what)?,
                SMC_NLA_DEV_PCI_DEVICE => d.pci_device = a.u16(what)?,
                SMC_NLA_DEV_PCI_ID => d.pci_id = a.string(),
                SMC_NLA_DEV_PORT | SMC_NLA_DEV_PORT2 => {
                    let mut p = DevicePort::default();
                    for b in a.nested(what)? {
                        match b.kind {
                            SMC_NLA_DEV_PORT_PNET_USR => p.pnetid_by_user = b.u8(what)? != 0,
                            SMC_NLA_DEV_PORT_PNETID => p.pnetid = b.string().trim_end().to_string(),
                            SMC_NLA_DEV_PORT_NETDEV => p.netdev = b.u32(what)?,
                            SMC_NLA_DEV_PORT_STATE => p.state = b.u8(what)?,
                            SMC_NLA_DEV_PORT_VALID => p.valid = b.u8(what)? != 0,
                            SMC_NLA_DEV_PORT_LNK_CNT => p.link_count = b.u32(what)?,
                            _ => {}
                        }
                    }
                    d.ports.push(p);
                }
                SMC_NLA_DEV_IB_NAME => d.ib_name = a.string(),
                _ => {}
            }
        }
        out.push(d);
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
    fn devices_with_ports() {
        let port = Writer::new()
            .u8(SMC_NLA_DEV_PORT_PNET_USR, 0)
            .string(SMC_NLA_DEV_PORT_PNETID, "")
            .u32(SMC_NLA_DEV_PORT_NETDEV, 1)
            .u8(SMC_NLA_DEV_PORT_STATE, 1)
            .u8(SMC_NLA_DEV_PORT_VALID, 1)
            .u32(SMC_NLA_DEV_PORT_LNK_CNT, 2);
        let dev = Writer::new()
            .u32(SMC_NLA_DEV_USE_CNT, 1)
            .u8(SMC_NLA_DEV_IS_CRIT, 0)
            .bytes(SMC_NLA_DEV_PCI_CHID, &7u16.to_ne_bytes())
            .bytes(SMC_NLA_DEV_PORT | 0x8000, &port.finish())
            .string(SMC_NLA_DEV_IB_NAME, "rxe_lo");
        let raw = reply(cmd::GET_DEV_SMCR, &[nest(SMC_GEN_DEV_SMCR, dev).finish()]);
        let d = parse_devices(&raw).unwrap();
        assert_eq!(d[0].ib_name, "rxe_lo");
        assert_eq!(d[0].pci_chid, 7);
        assert_eq!(d[0].ports[0].link_count, 2);
        assert!(d[0].ports[0].valid);
        let raw = reply(
            cmd::GET_DEV_SMCD,
            &[nest(SMC_GEN_DEV_SMCD, Writer::new().u32(SMC_NLA_DEV_USE_CNT, 3)).finish()],
        );
        assert_eq!(parse_devices_smcd(&raw).unwrap()[0].use_count, 3);
    }
}
