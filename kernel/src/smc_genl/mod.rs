//! The `SMC_GEN_NETLINK` generic netlink family: system info, per-namespace statistics, fallback
//! reason counters, user EIDs, and SMC-R link groups, links and devices.
//!
//! Every GET is a dump that must carry no attributes (the family's policy rejects them). Counters
//! are 64-bit and preceded by pad attributes; the pad type differs per nest (`SMC_NLA_STATS_*PAD`
//! 0, `SMC_NLA_LGR_R_PAD` 10, `SMC_NLA_LGR_D_PAD` 8), and the V2 common nest uses attribute 0 for
//! data, so each parser lists exactly the types it reads and ignores the rest.
//!
//! One file per reply: [`sys_info`](SysInfo), statistics ([`Stats`]), fallback counters
//! ([`FallbackStats`]), user and system EIDs, SMC-R link groups with their links
//! ([`LinkGroup`]), SMC-D link groups and loopback-ism ([`LinkGroupSmcd`]), devices ([`Device`]);
//! the attribute numbers are in `crate::abi::smc`.

mod device;
mod eid;
mod fallback;
mod link_group;
mod link_group_smcd;
mod stats;
mod sys_info;
#[cfg(test)]
mod test_reply;

pub use device::{parse_devices, parse_devices_smcd, Device, DevicePort};
pub use eid::{parse_seid, parse_ueids, ueid_to_wire, Seid};
pub use fallback::{parse_fallback_stats, FallbackStats, ReasonCount};
pub use link_group::{parse_link_groups, Link, LinkGroup, LinkGroupV2};
pub use link_group_smcd::{
    loopback_ism, parse_link_groups_smcd, LinkGroupSmcd, LoopbackEvidence, LoopbackIsm,
    LOOPBACK_ISM, LOOPBACK_ISM_CHID,
};
pub use stats::{parse_stats, BufferStats, SizeHistogram, Stats, TechStats, SIZE_BUCKETS};
pub use sys_info::{parse_sys_info, SysInfo};

use crate::abi::smc::SMC_NLA_EID_TABLE_ENTRY;
use crate::attr::{self, Attr, Writer};
use crate::error::Error;
use crate::features::{self, Feature};
use crate::genl::{self, Family};
use crate::nl::{self, Protocol};

/// Family name.
pub const FAMILY: &str = "SMC_GEN_NETLINK";
/// Version to put in requests.
pub const VERSION: u8 = 1;
/// Longest user EID.
pub const MAX_EID_LEN: usize = 32;

/// `SMC_NETLINK_*` commands.
pub mod cmd {
    /// System info.
    pub const GET_SYS_INFO: u8 = 1;
    /// SMC-R link groups.
    pub const GET_LGR_SMCR: u8 = 2;
    /// SMC-R link groups, each followed by its links.
    pub const GET_LINK_SMCR: u8 = 3;
    /// SMC-D link groups.
    pub const GET_LGR_SMCD: u8 = 4;
    /// SMC-D devices.
    pub const GET_DEV_SMCD: u8 = 5;
    /// SMC-R devices.
    pub const GET_DEV_SMCR: u8 = 6;
    /// Statistics.
    pub const GET_STATS: u8 = 7;
    /// Fallback reason counters.
    pub const GET_FBACK_STATS: u8 = 8;
    /// List user EIDs.
    pub const DUMP_UEID: u8 = 9;
    /// Add a user EID.
    pub const ADD_UEID: u8 = 10;
    /// Remove a user EID.
    pub const REMOVE_UEID: u8 = 11;
    /// Remove all user EIDs.
    pub const FLUSH_UEID: u8 = 12;
    /// System EID state.
    pub const DUMP_SEID: u8 = 13;
}

/// Name of a command for messages and capture file names.
pub fn command_name(c: u8) -> &'static str {
    match c {
        cmd::GET_SYS_INFO => "GET_SYS_INFO",
        cmd::GET_LGR_SMCR => "GET_LGR_SMCR",
        cmd::GET_LINK_SMCR => "GET_LINK_SMCR",
        cmd::GET_LGR_SMCD => "GET_LGR_SMCD",
        cmd::GET_DEV_SMCD => "GET_DEV_SMCD",
        cmd::GET_DEV_SMCR => "GET_DEV_SMCR",
        cmd::GET_STATS => "GET_STATS",
        cmd::GET_FBACK_STATS => "GET_FBACK_STATS",
        cmd::DUMP_UEID => "DUMP_UEID",
        cmd::ADD_UEID => "ADD_UEID",
        cmd::REMOVE_UEID => "REMOVE_UEID",
        cmd::FLUSH_UEID => "FLUSH_UEID",
        cmd::DUMP_SEID => "DUMP_SEID",
        _ => "SMC_NETLINK_command",
    }
}

/// The interface a command belongs to, with the Linux version that added it.
pub fn feature_of(command: u8) -> Feature {
    match command {
        cmd::GET_STATS | cmd::GET_FBACK_STATS => features::SMC_STATS,
        cmd::DUMP_UEID..=cmd::DUMP_SEID => features::SMC_EID,
        _ => features::SMC_GENL,
    }
}

/// A client bound to the resolved family id.
#[derive(Debug, Clone)]
pub struct SmcGenl {
    family: Family,
}

impl SmcGenl {
    /// Resolve the family. Without the `smc` module this is [`Error::ModuleMissing`]; on a kernel
    /// older than the family ([`features::SMC_GENL`]) [`Error::KernelLacks`].
    pub fn open() -> Result<SmcGenl, Error> {
        Ok(SmcGenl {
            family: genl::resolve(FAMILY, "smc")
                .map_err(|e| e.unless_older_than(features::SMC_GENL))?,
        })
    }

    /// The resolved family.
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// Raw reply of a GET dump (no attributes), for parsing or capture.
    pub fn dump_raw(&self, command: u8) -> Result<Vec<u8>, Error> {
        let what = format!("{FAMILY} {}", command_name(command));
        let body = genl::body(command, VERSION, Writer::new());
        nl::dump_raw(Protocol::Generic, self.family.id, &body, &what)
            .map_err(|e| e.unless_older_than(feature_of(command)))
    }

    fn act(&self, command: u8, attrs: Writer) -> Result<(), Error> {
        let what = format!("{FAMILY} {}", command_name(command));
        let body = genl::body(command, VERSION, attrs);
        nl::transact(Protocol::Generic, self.family.id, &body, &what)
            .map(drop)
            .map_err(|e| e.unless_older_than(feature_of(command)))
    }

    /// SMC version, host name, SEID and v2 capabilities.
    pub fn sys_info(&self) -> Result<SysInfo, Error> {
        parse_sys_info(&self.dump_raw(cmd::GET_SYS_INFO)?)
    }

    /// The namespace's SMC statistics.
    pub fn stats(&self) -> Result<Stats, Error> {
        parse_stats(&self.dump_raw(cmd::GET_STATS)?)
    }

    /// The namespace's fallback reason counters.
    pub fn fallback_stats(&self) -> Result<FallbackStats, Error> {
        parse_fallback_stats(&self.dump_raw(cmd::GET_FBACK_STATS)?)
    }

    /// The user EIDs, without the kernel's blank padding.
    pub fn ueid_dump(&self) -> Result<Vec<String>, Error> {
        parse_ueids(&self.dump_raw(cmd::DUMP_UEID)?)
    }

    /// Add a user EID (validated with [`ueid_to_wire`]; an invalid one is
    /// [`Error::InvalidInput`]). EEXIST comes back as [`Error::Kernel`] with that errno.
    pub fn ueid_add(&self, ueid: &str) -> Result<(), Error> {
        let wire = ueid_to_wire(ueid).map_err(Error::InvalidInput)?;
        self.act(
            cmd::ADD_UEID,
            Writer::new().bytes(SMC_NLA_EID_TABLE_ENTRY, &wire),
        )
    }

    /// Remove a user EID; ENOENT if it is not in the table.
    pub fn ueid_remove(&self, ueid: &str) -> Result<(), Error> {
        let wire = ueid_to_wire(ueid).map_err(Error::InvalidInput)?;
        self.act(
            cmd::REMOVE_UEID,
            Writer::new().bytes(SMC_NLA_EID_TABLE_ENTRY, &wire),
        )
    }

    /// Remove all user EIDs.
    pub fn ueid_flush(&self) -> Result<(), Error> {
        self.act(cmd::FLUSH_UEID, Writer::new())
    }

    /// SMC-R link groups with their links (GET_LINK_SMCR).
    pub fn link_groups(&self) -> Result<Vec<LinkGroup>, Error> {
        parse_link_groups(&self.dump_raw(cmd::GET_LINK_SMCR)?)
    }

    /// SMC-R devices (RoCE / soft-RoCE ports SMC can use).
    pub fn devices_smcr(&self) -> Result<Vec<Device>, Error> {
        parse_devices(&self.dump_raw(cmd::GET_DEV_SMCR)?)
    }

    /// SMC-D devices (ISM; the kernel does not list loopback-ism here: see [`loopback_ism`]).
    pub fn devices_smcd(&self) -> Result<Vec<Device>, Error> {
        parse_devices_smcd(&self.dump_raw(cmd::GET_DEV_SMCD)?)
    }

    /// SMC-D link groups.
    pub fn link_groups_smcd(&self) -> Result<Vec<LinkGroupSmcd>, Error> {
        parse_link_groups_smcd(&self.dump_raw(cmd::GET_LGR_SMCD)?)
    }

    /// The system EID and whether it is offered (it is disabled while UEIDs replace it on s390).
    pub fn seid(&self) -> Result<Seid, Error> {
        parse_seid(&self.dump_raw(cmd::DUMP_SEID)?)
    }
}

/// Generic walk: every message's attributes, with the nest of type `top` unpacked.
pub(super) fn nests<'a>(
    raw: &'a [u8],
    top: u16,
    what: &str,
) -> Result<Vec<(u8, Vec<Attr<'a>>)>, Error> {
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let (h, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            if a.kind == top {
                out.push((h.cmd, a.nested(what)?));
            }
        }
    }
    Ok(out)
}
