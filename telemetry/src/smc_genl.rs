//! The `SMC_GEN_NETLINK` generic netlink family: system info, per-namespace statistics, fallback
//! reason counters, user EIDs, and SMC-R link groups, links and devices.
//!
//! Every GET is a dump that must carry no attributes (the family's policy rejects them). Counters
//! are 64-bit and preceded by pad attributes; the pad type differs per nest (0 in the stats nests,
//! 10 in SMC-R link groups), and the V2 common nest uses attribute 0 for data, so each parser
//! lists exactly the types it reads and ignores the rest.

use serde::Serialize;

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

// Top-level attributes.
const GEN_SYS_INFO: u16 = 1;
const GEN_LGR_SMCR: u16 = 2;
const GEN_LINK_SMCR: u16 = 3;
const GEN_LGR_SMCD: u16 = 4;
const GEN_DEV_SMCD: u16 = 5;
const GEN_DEV_SMCR: u16 = 6;
const GEN_STATS: u16 = 7;
const GEN_FBACK_STATS: u16 = 8;
const EID_TABLE_ENTRY: u16 = 1;

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
        self.act(cmd::ADD_UEID, Writer::new().bytes(EID_TABLE_ENTRY, &wire))
    }

    /// Remove a user EID; ENOENT if it is not in the table.
    pub fn ueid_remove(&self, ueid: &str) -> Result<(), Error> {
        let wire = ueid_to_wire(ueid).map_err(Error::InvalidInput)?;
        self.act(
            cmd::REMOVE_UEID,
            Writer::new().bytes(EID_TABLE_ENTRY, &wire),
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

/// Check a user EID and encode it as the kernel wants it: 32 characters, blank-padded, plus a
/// NUL (33 bytes). Valid: 1..=32 characters of `A-Z 0-9 . -`, starting with a letter or digit.
/// The error names the bad value and what is expected.
pub fn ueid_to_wire(ueid: &str) -> Result<Vec<u8>, String> {
    let expected =
        "expected 1 to 32 characters of A-Z, 0-9, '.' and '-', starting with a letter or digit";
    if ueid.is_empty() || ueid.len() > MAX_EID_LEN {
        return Err(format!(
            "invalid UEID {ueid:?}: {} characters; {expected}",
            ueid.chars().count()
        ));
    }
    let first = ueid.as_bytes()[0];
    if !(first.is_ascii_uppercase() || first.is_ascii_digit()) {
        return Err(format!("invalid UEID {ueid:?}: {expected}"));
    }
    if let Some(bad) = ueid
        .chars()
        .find(|c| !(c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '.' || *c == '-'))
    {
        return Err(format!(
            "invalid UEID {ueid:?}: character {bad:?} not allowed; {expected}"
        ));
    }
    let mut wire = ueid.as_bytes().to_vec();
    wire.resize(MAX_EID_LEN, b' ');
    wire.push(0);
    Ok(wire)
}

/// Generic walk: every message's attributes, with the nest of type `top` unpacked.
fn nests<'a>(raw: &'a [u8], top: u16, what: &str) -> Result<Vec<(u8, Vec<Attr<'a>>)>, Error> {
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

/// `GET_SYS_INFO` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SysInfo {
    /// SMC protocol version.
    pub version: u8,
    /// SMC release.
    pub release: u8,
    /// ISMv2 capable.
    pub ism_v2: bool,
    /// SMC-Rv2 capable (absent on old kernels: false).
    pub smcr_v2: bool,
    /// Host name sent in CLC messages.
    pub local_host: String,
    /// System EID.
    pub seid: String,
}

/// Parse a raw `GET_SYS_INFO` reply.
pub fn parse_sys_info(raw: &[u8]) -> Result<SysInfo, Error> {
    let what = "SMC GET_SYS_INFO reply";
    let mut info = None;
    for (_, attrs) in nests(raw, GEN_SYS_INFO, what)? {
        let mut s = SysInfo::default();
        for a in attrs {
            match a.kind {
                1 => s.version = a.u8(what)?,
                2 => s.release = a.u8(what)?,
                3 => s.ism_v2 = a.u8(what)? != 0,
                4 => s.local_host = a.string().trim_end().to_string(),
                5 => s.seid = a.string().trim_end().to_string(),
                6 => s.smcr_v2 = a.u8(what)? != 0,
                _ => {}
            }
        }
        info = Some(s);
    }
    info.ok_or_else(|| Error::malformed(what, "no SMC_GEN_SYS_INFO attribute"))
}

/// Histogram over sizes: ≤8K, ≤16K, ... ≤1024K, >1024K.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SizeHistogram {
    /// ≤ 8 KiB.
    pub le_8k: u64,
    /// ≤ 16 KiB.
    pub le_16k: u64,
    /// ≤ 32 KiB.
    pub le_32k: u64,
    /// ≤ 64 KiB.
    pub le_64k: u64,
    /// ≤ 128 KiB.
    pub le_128k: u64,
    /// ≤ 256 KiB.
    pub le_256k: u64,
    /// ≤ 512 KiB.
    pub le_512k: u64,
    /// ≤ 1 MiB.
    pub le_1024k: u64,
    /// > 1 MiB.
    pub gt_1024k: u64,
}

/// The kernel's size buckets by name, in order: the exporter's `size` label values and the keys
/// of `stats --json`'s `bufs` and `reqs` (one definition, so the two cannot drift apart).
pub const SIZE_BUCKETS: [&str; 9] = [
    "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1024k", "gt_1024k",
];

impl SizeHistogram {
    /// Each bucket's count under its [`SIZE_BUCKETS`] name.
    pub fn buckets(&self) -> [(&'static str, u64); 9] {
        let counts = [
            self.le_8k,
            self.le_16k,
            self.le_32k,
            self.le_64k,
            self.le_128k,
            self.le_256k,
            self.le_512k,
            self.le_1024k,
            self.gt_1024k,
        ];
        std::array::from_fn(|i| (SIZE_BUCKETS[i], counts[i]))
    }

    fn parse(attrs: &[Attr<'_>], what: &str) -> Result<Self, Error> {
        let mut h = SizeHistogram::default();
        for a in attrs {
            let slot = match a.kind {
                1 => &mut h.le_8k,
                2 => &mut h.le_16k,
                3 => &mut h.le_32k,
                4 => &mut h.le_64k,
                5 => &mut h.le_128k,
                6 => &mut h.le_256k,
                7 => &mut h.le_512k,
                8 => &mut h.le_1024k,
                9 => &mut h.gt_1024k,
                _ => continue,
            };
            *slot = a.u64(what)?;
        }
        Ok(h)
    }
}

/// Buffer events of one direction (`SMC_NLA_STATS_RMB_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BufferStats {
    /// The peer's buffer was too small.
    pub size_small_peer: u64,
    /// The local buffer was too small.
    pub size_small: u64,
    /// The peer's buffer was full.
    pub full_peer: u64,
    /// The local buffer was full.
    pub full: u64,
    /// Buffers reused.
    pub reuse: u64,
    /// Buffers allocated.
    pub alloc: u64,
    /// Buffer size downgrades.
    pub downgrade: u64,
}

impl BufferStats {
    fn parse(attrs: &[Attr<'_>], what: &str) -> Result<Self, Error> {
        let mut b = BufferStats::default();
        for a in attrs {
            let slot = match a.kind {
                1 => &mut b.size_small_peer,
                2 => &mut b.size_small,
                3 => &mut b.full_peer,
                4 => &mut b.full,
                5 => &mut b.reuse,
                6 => &mut b.alloc,
                7 => &mut b.downgrade,
                _ => continue,
            };
            *slot = a.u64(what)?;
        }
        Ok(b)
    }
}

/// Statistics of one technology (SMC-R or SMC-D).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TechStats {
    /// Send buffer sizes allocated.
    pub tx_buffer_sizes: SizeHistogram,
    /// Receive buffer (RMB/DMB) sizes allocated.
    pub rx_buffer_sizes: SizeHistogram,
    /// Payload sizes of send calls.
    pub tx_payload_sizes: SizeHistogram,
    /// Payload sizes of receive calls.
    pub rx_payload_sizes: SizeHistogram,
    /// Send buffer events.
    pub tx_buffers: BufferStats,
    /// Receive buffer events.
    pub rx_buffers: BufferStats,
    /// Client connections established with SMC v1.
    pub client_v1_success: u64,
    /// Client connections established with SMC v2.
    pub client_v2_success: u64,
    /// Server connections established with SMC v1.
    pub server_v1_success: u64,
    /// Server connections established with SMC v2.
    pub server_v2_success: u64,
    /// sendpage calls (always 0 on current kernels).
    pub sendpage: u64,
    /// splice calls.
    pub splice: u64,
    /// TCP_CORK uses.
    pub cork: u64,
    /// TCP_NODELAY uses.
    pub nodelay: u64,
    /// Urgent data calls.
    pub urgent_data: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive calls.
    pub rx_count: u64,
    /// Send calls.
    pub tx_count: u64,
    /// Receive buffer bytes in use (newer kernels only).
    pub rx_buffer_usage: Option<u64>,
    /// Send buffer bytes in use (newer kernels only).
    pub tx_buffer_usage: Option<u64>,
}

impl TechStats {
    /// Connections established over SMC, client and server, v1 and v2.
    pub fn successes(&self) -> u64 {
        self.client_v1_success
            + self.client_v2_success
            + self.server_v1_success
            + self.server_v2_success
    }

    fn parse(attrs: &[Attr<'_>], what: &str) -> Result<Self, Error> {
        let mut t = TechStats::default();
        for a in attrs {
            match a.kind {
                1..=4 => {
                    let h = SizeHistogram::parse(&a.nested(what)?, what)?;
                    *match a.kind {
                        1 => &mut t.tx_buffer_sizes,
                        2 => &mut t.rx_buffer_sizes,
                        3 => &mut t.tx_payload_sizes,
                        _ => &mut t.rx_payload_sizes,
                    } = h;
                }
                5 => t.tx_buffers = BufferStats::parse(&a.nested(what)?, what)?,
                6 => t.rx_buffers = BufferStats::parse(&a.nested(what)?, what)?,
                7..=19 => {
                    let v = a.u64(what)?;
                    *match a.kind {
                        7 => &mut t.client_v1_success,
                        8 => &mut t.client_v2_success,
                        9 => &mut t.server_v1_success,
                        10 => &mut t.server_v2_success,
                        11 => &mut t.sendpage,
                        12 => &mut t.splice,
                        13 => &mut t.cork,
                        14 => &mut t.nodelay,
                        15 => &mut t.urgent_data,
                        16 => &mut t.rx_bytes,
                        17 => &mut t.tx_bytes,
                        18 => &mut t.rx_count,
                        _ => &mut t.tx_count,
                    } = v;
                }
                20 => t.rx_buffer_usage = Some(a.uint(what)?),
                21 => t.tx_buffer_usage = Some(a.uint(what)?),
                _ => {}
            }
        }
        Ok(t)
    }
}

/// `GET_STATS` reply: the network namespace's counters since the module was loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// SMC-R.
    pub smcr: TechStats,
    /// SMC-D.
    pub smcd: TechStats,
    /// Handshake errors on the client side.
    pub client_handshake_errors: u64,
    /// Handshake errors on the server side.
    pub server_handshake_errors: u64,
}

/// Parse a raw `GET_STATS` reply.
pub fn parse_stats(raw: &[u8]) -> Result<Stats, Error> {
    let what = "SMC GET_STATS reply";
    let all = nests(raw, GEN_STATS, what)?;
    let (_, attrs) = all
        .last()
        .ok_or_else(|| Error::malformed(what, "no SMC_GEN_STATS attribute"))?;
    let mut s = Stats::default();
    for a in attrs {
        match a.kind {
            1 => s.smcd = TechStats::parse(&a.nested(what)?, &format!("{what}, SMCD_TECH"))?,
            2 => s.smcr = TechStats::parse(&a.nested(what)?, &format!("{what}, SMCR_TECH"))?,
            3 => s.client_handshake_errors = a.u64(what)?,
            4 => s.server_handshake_errors = a.u64(what)?,
            _ => {}
        }
    }
    Ok(s)
}

/// One fallback reason counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// CLC reason code (see [`crate::reasons::describe`]).
    pub code: u32,
    /// How often it happened, modulo 65536 (the kernel keeps a u16).
    pub count: u16,
}

/// `GET_FBACK_STATS` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FallbackStats {
    /// Server-side fallbacks in total (64-bit, does not wrap).
    pub server_total: u64,
    /// Client-side fallbacks in total.
    pub client_total: u64,
    /// Server-side counters per reason, in kernel slot order.
    pub server: Vec<ReasonCount>,
    /// Client-side counters per reason.
    pub client: Vec<ReasonCount>,
}

/// Parse a raw `GET_FBACK_STATS` reply. An empty dump (nothing ever fell back) is all zeros.
pub fn parse_fallback_stats(raw: &[u8]) -> Result<FallbackStats, Error> {
    let what = "SMC GET_FBACK_STATS reply";
    let mut f = FallbackStats::default();
    for (_, attrs) in nests(raw, GEN_FBACK_STATS, what)? {
        let mut server = None;
        let mut code = None;
        let mut count = None;
        for a in &attrs {
            match a.kind {
                1 => server = Some(a.u8(what)? != 0),
                2 => f.server_total = a.u64(what)?,
                3 => f.client_total = a.u64(what)?,
                4 => code = Some(a.u32(what)?),
                5 => count = Some(a.u16(what)?),
                _ => {}
            }
        }
        if let (Some(server), Some(code)) = (server, code) {
            let rc = ReasonCount {
                code,
                count: count.unwrap_or(0),
            };
            if server {
                f.server.push(rc);
            } else {
                f.client.push(rc);
            }
        }
    }
    Ok(f)
}

/// Parse a raw `DUMP_UEID` reply into EIDs with the blank padding trimmed.
pub fn parse_ueids(raw: &[u8]) -> Result<Vec<String>, Error> {
    let what = "SMC DUMP_UEID reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            if a.kind == EID_TABLE_ENTRY {
                out.push(a.string().trim_end().to_string());
            }
        }
    }
    Ok(out)
}

/// The SMC v2 part of a link group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkGroupV2 {
    /// Negotiated SMC version.
    pub version: u8,
    /// Peer release.
    pub release: u8,
    /// Peer OS (see [`crate::reasons::peer_os`]).
    pub peer_os: u8,
    /// Negotiated EID.
    pub negotiated_eid: String,
    /// Peer host name.
    pub peer_host: String,
}

/// One SMC-R link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Link {
    /// Link id.
    pub id: u8,
    /// RDMA device.
    pub ib_dev: String,
    /// RDMA port.
    pub ib_port: u8,
    /// Local GID.
    pub gid: String,
    /// Peer GID.
    pub peer_gid: String,
    /// Connections on the link.
    pub conn_count: u32,
    /// Network device ifindex.
    pub net_dev: u32,
    /// Link UID (4 bytes, hex).
    pub uid: String,
    /// Peer link UID.
    pub peer_uid: String,
    /// Link state (see [`crate::reasons::link_state`]).
    pub state: u32,
}

/// One SMC-R link group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkGroup {
    /// Link group id.
    pub id: u32,
    /// 0 client, 1 server.
    pub role: u8,
    /// Link group type (see [`crate::reasons::lgr_type`]).
    pub lgr_type: u8,
    /// PNET ID.
    pub pnetid: String,
    /// VLAN id.
    pub vlan_id: u8,
    /// Connections in the group.
    pub conns: u32,
    /// SMC v2 details, when negotiated.
    pub v2: Option<LinkGroupV2>,
    /// SMC-Rv2 direct route.
    pub direct: Option<bool>,
    /// Negotiated maximum connections (v2.1).
    pub max_conns: Option<u8>,
    /// Negotiated maximum links (v2.1).
    pub max_links: Option<u8>,
    /// Network namespace cookie (the SMC-R list is global; filter with this).
    pub net_cookie: Option<u64>,
    /// Buffer type (see [`crate::reasons::buf_type`]).
    pub buf_type: Option<u8>,
    /// Send buffer bytes allocated.
    pub sndbuf_alloc: Option<u64>,
    /// Receive buffer bytes allocated.
    pub rmb_alloc: Option<u64>,
    /// The group's links (from GET_LINK_SMCR).
    pub links: Vec<Link>,
}

fn hex4(a: &Attr<'_>, what: &str) -> Result<String, Error> {
    a.u32(what)?;
    Ok(a.value.iter().map(|b| format!("{b:02x}")).collect())
}

fn link_group(attrs: &[Attr<'_>], what: &str) -> Result<LinkGroup, Error> {
    let mut g = LinkGroup::default();
    for a in attrs {
        match a.kind {
            1 => g.id = a.u32(what)?,
            2 => g.role = a.u8(what)?,
            3 => g.lgr_type = a.u8(what)?,
            4 => g.pnetid = a.string().trim_end().to_string(),
            5 => g.vlan_id = a.u8(what)?,
            6 => g.conns = a.u32(what)?,
            7 => g.v2 = Some(v2_common(a, what)?),
            8 => {
                for b in a.nested(what)? {
                    match b.kind {
                        1 => g.direct = Some(b.u8(what)? != 0),
                        2 => g.max_conns = Some(b.u8(what)?),
                        3 => g.max_links = Some(b.u8(what)?),
                        _ => {}
                    }
                }
            }
            9 => g.net_cookie = Some(a.u64(what)?),
            11 => g.buf_type = Some(a.u8(what)?),
            12 => g.sndbuf_alloc = Some(a.uint(what)?),
            13 => g.rmb_alloc = Some(a.uint(what)?),
            _ => {}
        }
    }
    Ok(g)
}

fn link(attrs: &[Attr<'_>], what: &str) -> Result<Link, Error> {
    let mut l = Link::default();
    for a in attrs {
        match a.kind {
            1 => l.id = a.u8(what)?,
            2 => l.ib_dev = a.string(),
            3 => l.ib_port = a.u8(what)?,
            4 => l.gid = a.string(),
            5 => l.peer_gid = a.string(),
            6 => l.conn_count = a.u32(what)?,
            7 => l.net_dev = a.u32(what)?,
            8 => l.uid = hex4(a, what)?,
            9 => l.peer_uid = hex4(a, what)?,
            10 => l.state = a.u32(what)?,
            _ => {}
        }
    }
    Ok(l)
}

/// Parse a raw `GET_LGR_SMCR` or `GET_LINK_SMCR` reply: link messages attach to the link group
/// message before them.
pub fn parse_link_groups(raw: &[u8]) -> Result<Vec<LinkGroup>, Error> {
    let what = "SMC link group reply";
    let mut out: Vec<LinkGroup> = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            match a.kind {
                GEN_LGR_SMCR => out.push(link_group(&a.nested(what)?, what)?),
                GEN_LINK_SMCR => {
                    let l = link(&a.nested(what)?, what)?;
                    match out.last_mut() {
                        Some(g) => g.links.push(l),
                        None => {
                            return Err(Error::malformed(what, "a link came before any link group"))
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

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
    devices(raw, GEN_DEV_SMCR, "SMC GET_DEV_SMCR reply")
}

/// Parse a raw `GET_DEV_SMCD` reply (same layout as SMC-R devices, without an RDMA name).
pub fn parse_devices_smcd(raw: &[u8]) -> Result<Vec<Device>, Error> {
    devices(raw, GEN_DEV_SMCD, "SMC GET_DEV_SMCD reply")
}

fn devices(raw: &[u8], top: u16, what: &str) -> Result<Vec<Device>, Error> {
    let mut out = Vec::new();
    for (_, attrs) in nests(raw, top, what)? {
        let mut d = Device::default();
        for a in &attrs {
            match a.kind {
                1 => d.use_count = a.u32(what)?,
                2 => d.critical = a.u8(what)? != 0,
                3 => d.pci_fid = a.u32(what)?,
                4 => d.pci_chid = a.u16_or_u32(what)?,
                5 => d.pci_vendor = a.u16(what)?,
                6 => d.pci_device = a.u16(what)?,
                7 => d.pci_id = a.string(),
                8 | 9 => {
                    let mut p = DevicePort::default();
                    for b in a.nested(what)? {
                        match b.kind {
                            1 => p.pnetid_by_user = b.u8(what)? != 0,
                            2 => p.pnetid = b.string().trim_end().to_string(),
                            3 => p.netdev = b.u32(what)?,
                            4 => p.state = b.u8(what)?,
                            5 => p.valid = b.u8(what)? != 0,
                            6 => p.link_count = b.u32(what)?,
                            _ => {}
                        }
                    }
                    d.ports.push(p);
                }
                10 => d.ib_name = a.string(),
                _ => {}
            }
        }
        out.push(d);
    }
    Ok(out)
}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

fn v2_common(a: &Attr<'_>, what: &str) -> Result<LinkGroupV2, Error> {
    let mut v = LinkGroupV2::default();
    for b in a.nested(what)? {
        match b.kind {
            0 => v.version = b.u8(what)?,
            1 => v.release = b.u8(what)?,
            2 => v.peer_os = b.u8(what)?,
            3 => v.negotiated_eid = b.string().trim_end().to_string(),
            4 => v.peer_host = b.string().trim_end().to_string(),
            _ => {}
        }
    }
    Ok(v)
}

/// Parse a raw `GET_LGR_SMCD` reply (pad attribute type 8 is skipped).
pub fn parse_link_groups_smcd(raw: &[u8]) -> Result<Vec<LinkGroupSmcd>, Error> {
    let what = "SMC GET_LGR_SMCD reply";
    let mut out = Vec::new();
    for (_, attrs) in nests(raw, GEN_LGR_SMCD, what)? {
        let mut g = LinkGroupSmcd::default();
        for a in &attrs {
            match a.kind {
                1 => g.id = a.u32(what)?,
                2 => g.gid = a.u64(what)?,
                3 => g.peer_gid = a.u64(what)?,
                4 => g.vlan_id = a.u8(what)?,
                5 => g.conns = a.u32(what)?,
                6 => g.pnetid = a.string().trim_end().to_string(),
                7 => g.chid = a.u16_or_u32(what)?,
                9 => g.v2 = Some(v2_common(a, what)?),
                10 => g.ext_gid = Some(a.u64(what)?),
                11 => g.peer_ext_gid = Some(a.u64(what)?),
                12 => g.sndbuf_alloc = Some(a.uint(what)?),
                13 => g.dmb_alloc = Some(a.uint(what)?),
                _ => {}
            }
        }
        out.push(g);
    }
    Ok(out)
}

/// The system EID state (`DUMP_SEID`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Seid {
    /// The system EID (empty where the platform has none).
    pub seid: String,
    /// Whether it is offered in handshakes.
    pub enabled: bool,
}

/// Parse a raw `DUMP_SEID` reply (attributes at the top level: 1 entry, 2 enabled).
pub fn parse_seid(raw: &[u8]) -> Result<Seid, Error> {
    let what = "SMC DUMP_SEID reply";
    let mut s = Seid::default();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            match a.kind {
                1 => s.seid = a.string().trim_end().to_string(),
                2 => s.enabled = a.u8(what)? != 0,
                _ => {}
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl::frame;
    use netlink_packet_core::NLMSG_DONE;

    const FAM: u16 = 0x1e;

    fn nest(kind: u16, inner: Writer) -> Writer {
        Writer::new().bytes(kind | 0x8000, &inner.finish())
    }

    fn u64a(w: Writer, kind: u16, v: u64) -> Writer {
        // Emulate nla_put_u64_64bit: a 4-byte pad attribute of type 0 before the value.
        w.bytes(0, &[]).bytes(kind, &v.to_ne_bytes())
    }

    fn reply(command: u8, bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut raw = Vec::new();
        for b in bodies {
            let mut g = vec![command, 1, 0, 0];
            g.extend(b);
            raw.extend(frame(FAM, 2, 1, &g));
        }
        raw.extend(frame(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes()));
        raw
    }

    fn tech(base: u64) -> Vec<u8> {
        let mut t = Writer::new();
        let mut hist = Writer::new();
        for k in 1..=9u16 {
            hist = u64a(hist, k, base + u64::from(k));
        }
        t = t.bytes(1 | 0x8000, &hist.finish());
        let mut rmb = Writer::new();
        for k in 1..=7u16 {
            rmb = u64a(rmb, k, base * 100 + u64::from(k));
        }
        t = t.bytes(6 | 0x8000, &rmb.finish());
        for k in 7..=19u16 {
            t = u64a(t, k, base * 1000 + u64::from(k));
        }
        t = t.u32(20, 4096);
        t = t.bytes(21, &(1u64 << 33).to_ne_bytes());
        t.finish()
    }

    fn stats_reply() -> Vec<u8> {
        let inner = Writer::new()
            .bytes(1 | 0x8000, &tech(1))
            .bytes(2 | 0x8000, &tech(2));
        let inner = u64a(u64a(inner, 3, 11), 4, 12);
        reply(cmd::GET_STATS, &[nest(GEN_STATS, inner).finish()])
    }

    #[test]
    fn stats_full_nests() {
        let s = parse_stats(&stats_reply()).unwrap();
        assert_eq!(s.client_handshake_errors, 11);
        assert_eq!(s.server_handshake_errors, 12);
        assert_eq!(s.smcd.tx_buffer_sizes.le_8k, 2);
        assert_eq!(s.smcd.tx_buffer_sizes.gt_1024k, 10);
        assert_eq!(s.smcr.tx_buffer_sizes.le_16k, 4);
        assert_eq!(s.smcr.rx_buffers.size_small_peer, 201);
        assert_eq!(s.smcr.rx_buffers.downgrade, 207);
        assert_eq!(s.smcr.client_v1_success, 2007);
        assert_eq!(s.smcr.server_v2_success, 2010);
        assert_eq!(s.smcr.rx_bytes, 2016);
        assert_eq!(s.smcr.tx_count, 2019);
        assert_eq!(s.smcr.rx_buffer_usage, Some(4096));
        assert_eq!(s.smcr.tx_buffer_usage, Some(1 << 33));
        assert_eq!(s.smcr.successes(), 2007 + 2008 + 2009 + 2010);
        assert_eq!(s.smcd.tx_payload_sizes, SizeHistogram::default());
    }

    #[test]
    fn stats_prefixes_and_flips_never_panic() {
        let raw = stats_reply();
        for cut in 0..raw.len() {
            let _ = parse_stats(&raw[..cut]);
        }
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] = bad[i].wrapping_add(0x41);
            let _ = parse_stats(&bad);
        }
    }

    #[test]
    fn stats_wrong_width_counter_is_malformed() {
        let inner = Writer::new().bytes(2 | 0x8000, &Writer::new().u32(16, 5).finish());
        let raw = reply(cmd::GET_STATS, &[nest(GEN_STATS, inner).finish()]);
        let e = parse_stats(&raw).unwrap_err();
        assert!(e.to_string().contains("SMCR_TECH"), "{e}");
        assert!(parse_stats(&reply(cmd::GET_STATS, &[])).is_err());
    }

    #[test]
    fn fallback_totals_only_in_first_message() {
        let first = u64a(u64a(Writer::new().u8(1, 1), 2, 70000), 3, 5)
            .u32(4, 0x0303_0000)
            .bytes(5, &4464u16.to_ne_bytes());
        let second = Writer::new()
            .u8(1, 0)
            .u32(4, 0x0301_0000)
            .bytes(5, &5u16.to_ne_bytes());
        let raw = reply(
            cmd::GET_FBACK_STATS,
            &[
                nest(GEN_FBACK_STATS, first).finish(),
                nest(GEN_FBACK_STATS, second).finish(),
            ],
        );
        let f = parse_fallback_stats(&raw).unwrap();
        assert_eq!((f.server_total, f.client_total), (70000, 5));
        assert_eq!(
            f.server,
            vec![ReasonCount {
                code: 0x0303_0000,
                count: 4464
            }]
        );
        assert_eq!(
            f.client,
            vec![ReasonCount {
                code: 0x0301_0000,
                count: 5
            }]
        );
        let empty = parse_fallback_stats(&reply(cmd::GET_FBACK_STATS, &[])).unwrap();
        assert_eq!(empty, FallbackStats::default());
    }

    #[test]
    fn sys_info_and_ueids() {
        let si = Writer::new()
            .u8(1, 2)
            .u8(2, 1)
            .u8(3, 0)
            .string(4, "vm1     ")
            .string(5, "")
            .u8(6, 1);
        let raw = reply(cmd::GET_SYS_INFO, &[nest(GEN_SYS_INFO, si).finish()]);
        let s = parse_sys_info(&raw).unwrap();
        assert_eq!(
            (s.version, s.release, s.ism_v2, s.smcr_v2),
            (2, 1, false, true)
        );
        assert_eq!(s.local_host, "vm1");
        let mut padded = ueid_to_wire("SMCRUN-TEST").unwrap();
        padded.pop();
        let raw = reply(
            cmd::DUMP_UEID,
            &[Writer::new()
                .string(1, std::str::from_utf8(&padded).unwrap())
                .finish()],
        );
        assert_eq!(parse_ueids(&raw).unwrap(), vec!["SMCRUN-TEST"]);
    }

    #[test]
    fn ueid_validation() {
        let w = ueid_to_wire("SMCRUN.1-A").unwrap();
        assert_eq!(w.len(), 33);
        assert_eq!(&w[..10], b"SMCRUN.1-A");
        assert!(w[10..32].iter().all(|&b| b == b' '));
        assert_eq!(w[32], 0);
        assert!(ueid_to_wire(&"A".repeat(32)).is_ok());
        for bad in [
            "",
            "lower",
            "-LEAD",
            ".LEAD",
            "HAS SPACE",
            "UNDER_SCORE",
            &"A".repeat(33),
            "ÄÖ",
        ] {
            let e = ueid_to_wire(bad).unwrap_err();
            assert!(e.contains("invalid UEID"), "{bad}: {e}");
        }
    }

    #[test]
    fn link_groups_collect_following_links() {
        let v2 = Writer::new()
            .u8(0, 2)
            .u8(1, 1)
            .u8(2, 2)
            .string(3, "EID")
            .string(4, "peer");
        let lgr = Writer::new()
            .u32(1, 0x0a0b0c0d)
            .u8(2, 1)
            .u8(3, 1)
            .string(4, "NET1  ")
            .u8(5, 0)
            .u32(6, 3)
            .bytes(7 | 0x8000, &v2.finish())
            .bytes(8 | 0x8000, &Writer::new().u8(1, 1).finish())
            .bytes(10, &[])
            .bytes(9, &42u64.to_ne_bytes())
            .u32(12, 65536);
        let link = Writer::new()
            .u8(1, 1)
            .string(2, "rxe_lo")
            .u8(3, 1)
            .string(4, "fe80::1")
            .u32(6, 3)
            .u32(7, 1)
            .bytes(8, &[0xde, 0xad, 0xbe, 0xef])
            .u32(10, 3);
        let raw = reply(
            cmd::GET_LINK_SMCR,
            &[
                nest(GEN_LGR_SMCR, lgr).finish(),
                nest(GEN_LINK_SMCR, link).finish(),
            ],
        );
        let g = parse_link_groups(&raw).unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].pnetid, "NET1");
        assert_eq!(g[0].v2.as_ref().unwrap().version, 2);
        assert_eq!(g[0].direct, Some(true));
        assert_eq!(g[0].net_cookie, Some(42));
        assert_eq!(g[0].sndbuf_alloc, Some(65536));
        assert_eq!(g[0].links[0].uid, "deadbeef");
        assert_eq!(g[0].links[0].state, 3);
        let orphan = reply(
            cmd::GET_LINK_SMCR,
            &[nest(GEN_LINK_SMCR, Writer::new()).finish()],
        );
        assert!(parse_link_groups(&orphan).is_err());
    }

    #[test]
    fn smcd_link_groups_and_seid() {
        let lgr = Writer::new()
            .u32(1, 9)
            .bytes(8, &[])
            .bytes(2, &0x1111u64.to_ne_bytes())
            .bytes(3, &0x2222u64.to_ne_bytes())
            .u32(5, 2)
            .bytes(7, &0xffffu16.to_ne_bytes())
            .bytes(9 | 0x8000, &Writer::new().u8(0, 2).finish())
            .u32(13, 1 << 20);
        let raw = reply(cmd::GET_LGR_SMCD, &[nest(GEN_LGR_SMCD, lgr).finish()]);
        let g = &parse_link_groups_smcd(&raw).unwrap()[0];
        assert_eq!(
            (g.id, g.gid, g.peer_gid, g.conns, g.chid),
            (9, 0x1111, 0x2222, 2, 0xffff)
        );
        assert_eq!(g.v2.as_ref().unwrap().version, 2);
        assert_eq!(g.dmb_alloc, Some(1 << 20));
        let raw = reply(
            cmd::DUMP_SEID,
            &[Writer::new().string(1, "SEID-1").u8(2, 1).finish()],
        );
        let s = parse_seid(&raw).unwrap();
        assert_eq!((s.seid.as_str(), s.enabled), ("SEID-1", true));
        let raw = reply(
            cmd::GET_DEV_SMCD,
            &[nest(GEN_DEV_SMCD, Writer::new().u32(1, 3)).finish()],
        );
        assert_eq!(parse_devices_smcd(&raw).unwrap()[0].use_count, 3);
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

    #[test]
    fn devices_with_ports() {
        let port = Writer::new()
            .u8(1, 0)
            .string(2, "")
            .u32(3, 1)
            .u8(4, 1)
            .u8(5, 1)
            .u32(6, 2);
        let dev = Writer::new()
            .u32(1, 1)
            .u8(2, 0)
            .bytes(4, &7u16.to_ne_bytes())
            .bytes(8 | 0x8000, &port.finish())
            .string(10, "rxe_lo");
        let raw = reply(cmd::GET_DEV_SMCR, &[nest(GEN_DEV_SMCR, dev).finish()]);
        let d = parse_devices(&raw).unwrap();
        assert_eq!(d[0].ib_name, "rxe_lo");
        assert_eq!(d[0].pci_chid, 7);
        assert_eq!(d[0].ports[0].link_count, 2);
        assert!(d[0].ports[0].valid);
    }
}
