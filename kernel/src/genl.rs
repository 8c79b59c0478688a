//! Generic netlink: resolving a family name to its id through nlctrl (request framed with
//! netlink-packet-generic), and the 4-byte genl header on requests and replies.

use netlink_packet_core::Emitable;
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::GenlMessage;

use crate::attr::{self, Writer};
use crate::error::Error;
use crate::nl::{self, Message, Protocol};

/// Length of `struct genlmsghdr`.
pub const GENL_HEADER_LEN: usize = 4;

const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_VERSION: u16 = 3;

/// A resolved generic netlink family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The family's name, e.g. "SMC_GEN_NETLINK".
    pub name: &'static str,
    /// The id to use as `nlmsg_type`.
    pub id: u16,
    /// The version the kernel registered.
    pub version: u32,
}

/// Ask nlctrl for `name`'s id. A family the kernel does not know (module not loaded) comes back
/// as [`Error::ModuleMissing`] naming `module`.
pub fn resolve(name: &'static str, module: &'static str) -> Result<Family, Error> {
    let what = format!("resolving generic netlink family {name}");
    let mut request = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(name.to_string())],
    });
    request.finalize();
    let mut body = vec![0u8; request.buffer_len()];
    request.emit(&mut body);
    let raw = nl::transact(Protocol::Generic, request.family_id(), &body, &what)
        .map_err(|e| e.missing_on(libc::ENOENT, module))?;
    parse_family(&raw, name, &what)
}

/// Parse nlctrl's NEWFAMILY reply (as returned by [`nl::transact`]).
pub fn parse_family(raw: &[u8], name: &'static str, what: &str) -> Result<Family, Error> {
    for message in nl::data_messages(raw, what)? {
        let (_, attrs) = split(&message, what)?;
        let mut id = None;
        let mut version = 0;
        for a in attr::parse(attrs, what)? {
            match a.kind {
                CTRL_ATTR_FAMILY_ID => id = Some(a.u16(what)?),
                CTRL_ATTR_VERSION => version = a.u32(what)?,
                _ => {}
            }
        }
        if let Some(id) = id {
            return Ok(Family { name, id, version });
        }
    }
    Err(Error::malformed(
        what,
        "no CTRL_ATTR_FAMILY_ID in the reply",
    ))
}

/// The genl header of a reply message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Command the message answers.
    pub cmd: u8,
    /// Family version.
    pub version: u8,
}

/// Split a genl message into its header and attribute bytes.
pub fn split<'a>(message: &Message<'a>, what: &str) -> Result<(Header, &'a [u8]), Error> {
    let p = message.payload;
    if p.len() < GENL_HEADER_LEN {
        return Err(Error::malformed(
            what,
            format!(
                "generic netlink message of {} bytes has no genl header",
                p.len()
            ),
        ));
    }
    Ok((
        Header {
            cmd: p[0],
            version: p[1],
        },
        &p[GENL_HEADER_LEN..],
    ))
}

/// Request body: genl header for `cmd`/`version` followed by `attrs`.
pub fn body(cmd: u8, version: u8, attrs: Writer) -> Vec<u8> {
    let mut out = vec![cmd, version, 0, 0];
    out.extend(attrs.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl::frame;

    #[test]
    fn parses_newfamily_reply() {
        let attrs = Writer::new()
            .u32(CTRL_ATTR_FAMILY_ID, 0x1d) // u16 padded: build by hand below instead
            .finish();
        // FAMILY_ID is a u16: 6-byte attribute padded to 8.
        let mut a = vec![6u8, 0, 1, 0, 0x1d, 0x00, 0, 0];
        a.extend(
            Writer::new()
                .string(2, "SMC_GEN_NETLINK")
                .u32(3, 1)
                .finish(),
        );
        let mut b = vec![1u8, 2, 0, 0];
        b.extend(&a);
        let raw = frame(0x10, 0, 1, &b);
        let f = parse_family(&raw, "SMC_GEN_NETLINK", "t").unwrap();
        assert_eq!(f.id, 0x1d);
        assert_eq!(f.version, 1);
        // a 4-byte FAMILY_ID is not a u16
        let mut b = vec![1u8, 2, 0, 0];
        b.extend(&attrs);
        assert!(parse_family(&frame(0x10, 0, 1, &b), "X", "t").is_err());
    }

    #[test]
    fn split_rejects_short_messages() {
        let raw = frame(0x20, 0, 1, &[1, 1]);
        let msgs = nl::data_messages(&raw, "t").unwrap();
        assert!(split(&msgs[0], "t").is_err());
    }

    #[test]
    fn body_has_header_then_attrs() {
        let b = body(10, 1, Writer::new().u8(1, 7));
        assert_eq!(&b[..4], &[10, 1, 0, 0]);
        assert_eq!(b.len(), 4 + 8);
    }
}
