//! `GET_LGR_SMCR` and `GET_LINK_SMCR`: SMC-R link groups and the links in each, plus the SMC v2
//! nest both kinds of link group carry.

use serde::Serialize;

use crate::abi::smc::*;
use crate::attr::{self, Attr};
use crate::error::Error;
use crate::genl;
use crate::nl;

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
            SMC_NLA_LGR_R_ID => g.id = a.u32(what)?,
            SMC_NLA_LGR_R_ROLE => g.role = a.u8(what)?,
            SMC_NLA_LGR_R_TYPE => g.lgr_type = a.u8(what)?,
            SMC_NLA_LGR_R_PNETID => g.pnetid = a.string().trim_end().to_string(),
            SMC_NLA_LGR_R_VLAN_ID => g.vlan_id = a.u8(what)?,
            SMC_NLA_LGR_R_CONNS_NUM => g.conns = a.u32(what)?,
            SMC_NLA_LGR_R_V2_COMMON => g.v2 = Some(v2_common(a, what)?),
            SMC_NLA_LGR_R_V2 => {
                for b in a.nested(what)? {
                    match b.kind {
                        SMC_NLA_LGR_R_V2_DIRECT => g.direct = Some(b.u8(what)? != 0),
                        SMC_NLA_LGR_R_V2_MAX_CONNS => g.max_conns = Some(b.u8(what)?),
                        SMC_NLA_LGR_R_V2_MAX_LINKS => g.max_links = Some(b.u8(what)?),
                        _ => {}
                    }
                }
            }
            SMC_NLA_LGR_R_NET_COOKIE => g.net_cookie = Some(a.u64(what)?),
            SMC_NLA_LGR_R_BUF_TYPE => g.buf_type = Some(a.u8(what)?),
            SMC_NLA_LGR_R_SNDBUF_ALLOC => g.sndbuf_alloc = Some(a.uint(what)?),
            SMC_NLA_LGR_R_RMB_ALLOC => g.rmb_alloc = Some(a.uint(what)?),
            _ => {}
        }
    }
    Ok(g)
}

fn link(attrs: &[Attr<'_>], what: &str) -> Result<Link, Error> {
    let mut l = Link::default();
    for a in attrs {
        match a.kind {
            SMC_NLA_LINK_ID => l.id = a.u8(what)?,
            SMC_NLA_LINK_IB_DEV => l.ib_dev = a.string(),
            SMC_NLA_LINK_IB_PORT => l.ib_port = a.u8(what)?,
            SMC_NLA_LINK_GID => l.gid = a.string(),
            SMC_NLA_LINK_PEER_GID => l.peer_gid = a.string(),
            SMC_NLA_LINK_CONN_CNT => l.conn_count = a.u32(what)?,
            SMC_NLA_LINK_NET_DEV => l.net_dev = a.u32(what)?,
            SMC_NLA_LINK_UID => l.uid = hex4(a, what)?,
            SMC_NLA_LINK_PEER_UID => l.peer_uid = hex4(a, what)?,
            SMC_NLA_LINK_STATE => l.state = a.u32(what)?,
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
                SMC_GEN_LGR_SMCR => out.push(link_group(&a.nested(what)?, what)?),
                SMC_GEN_LINK_SMCR => {
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

/// The `V2_COMMON` nest of an SMC-R or SMC-D link group.
pub(super) fn v2_common(a: &Attr<'_>, what: &str) -> Result<LinkGroupV2, Error> {
    let mut v = LinkGroupV2::default();
    for b in a.nested(what)? {
        match b.kind {
            SMC_NLA_LGR_V2_VER => v.version = b.u8(what)?,
            SMC_NLA_LGR_V2_REL => v.release = b.u8(what)?,
            SMC_NLA_LGR_V2_OS => v.peer_os = b.u8(what)?,
            SMC_NLA_LGR_V2_NEG_EID => v.negotiated_eid = b.string().trim_end().to_string(),
            SMC_NLA_LGR_V2_PEER_HOST => v.peer_host = b.string().trim_end().to_string(),
            _ => {}
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::{nest, reply};

    #[test]
    fn link_groups_collect_following_links() {
        let v2 = Writer::new()
            .u8(SMC_NLA_LGR_V2_VER, 2)
            .u8(SMC_NLA_LGR_V2_REL, 1)
            .u8(SMC_NLA_LGR_V2_OS, 2)
            .string(SMC_NLA_LGR_V2_NEG_EID, "EID")
            .string(SMC_NLA_LGR_V2_PEER_HOST, "peer");
        let lgr = Writer::new()
            .u32(SMC_NLA_LGR_R_ID, 0x0a0b0c0d)
            .u8(SMC_NLA_LGR_R_ROLE, 1)
            .u8(SMC_NLA_LGR_R_TYPE, 1)
            .string(SMC_NLA_LGR_R_PNETID, "NET1  ")
            .u8(SMC_NLA_LGR_R_VLAN_ID, 0)
            .u32(SMC_NLA_LGR_R_CONNS_NUM, 3)
            .bytes(SMC_NLA_LGR_R_V2_COMMON | 0x8000, &v2.finish())
            .bytes(
                SMC_NLA_LGR_R_V2 | 0x8000,
                &Writer::new().u8(SMC_NLA_LGR_R_V2_DIRECT, 1).finish(),
            )
            .bytes(SMC_NLA_LGR_R_PAD, &[])
            .bytes(SMC_NLA_LGR_R_NET_COOKIE, &42u64.to_ne_bytes())
            .u32(SMC_NLA_LGR_R_SNDBUF_ALLOC, 65536);
        let link = Writer::new()
            .u8(SMC_NLA_LINK_ID, 1)
            .string(SMC_NLA_LINK_IB_DEV, "rxe_lo")
            .u8(SMC_NLA_LINK_IB_PORT, 1)
            .string(SMC_NLA_LINK_GID, "fe80::1")
            .u32(SMC_NLA_LINK_CONN_CNT, 3)
            .u32(SMC_NLA_LINK_NET_DEV, 1)
            .bytes(SMC_NLA_LINK_UID, &[0xde, 0xad, 0xbe, 0xef])
            .u32(SMC_NLA_LINK_STATE, 3);
        let raw = reply(
            cmd::GET_LINK_SMCR,
            &[
                nest(SMC_GEN_LGR_SMCR, lgr).finish(),
                nest(SMC_GEN_LINK_SMCR, link).finish(),
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
            &[nest(SMC_GEN_LINK_SMCR, Writer::new()).finish()],
        );
        assert!(parse_link_groups(&orphan).is_err());
    }
}
