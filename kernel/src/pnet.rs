//! The SMC PNET table (generic netlink family `SMC_PNETID`): which network device and which
//! RDMA/ISM device port share a physical network. SMC only pairs a TCP connection's netdev with an
//! RDMA device of the same PNET ID (or, without any PNET IDs, the RoCE device behind that netdev).

use serde::Serialize;

use crate::abi::smc::{SMC_PNETID_ETHNAME, SMC_PNETID_IBNAME, SMC_PNETID_IBPORT, SMC_PNETID_NAME};
use crate::attr::{self, Writer};
use crate::error::Error;
use crate::genl::{self, Family};
use crate::nl::{self, Protocol};

/// Family name.
pub const FAMILY: &str = "SMC_PNETID";
/// Family version.
pub const VERSION: u8 = 1;
/// Longest PNET ID.
pub const MAX_PNETID_LEN: usize = 16;

const CMD_GET: u8 = 1;
const CMD_ADD: u8 = 2;
const CMD_DEL: u8 = 3;
const CMD_FLUSH: u8 = 4;

/// One row of the PNET table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// PNET ID.
    pub pnetid: String,
    /// Network device, if the row names one.
    pub netdev: Option<String>,
    /// RDMA or ISM device, if the row names one.
    pub ibdev: Option<String>,
    /// RDMA port, if the row names one.
    pub ibport: Option<u8>,
}

/// A client bound to the resolved family.
#[derive(Debug, Clone)]
pub struct Pnet {
    family: Family,
}

/// Check a PNET ID and return it the way the kernel stores it (upper case): 1 to 16 ASCII letters
/// or digits.
pub fn normalize_pnetid(pnetid: &str) -> Result<String, String> {
    let ok = !pnetid.is_empty()
        && pnetid.len() <= MAX_PNETID_LEN
        && pnetid.bytes().all(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(pnetid.to_ascii_uppercase())
    } else {
        Err(format!(
            "invalid PNET ID {pnetid:?}: expected 1 to {MAX_PNETID_LEN} letters or digits"
        ))
    }
}

impl Pnet {
    /// Resolve the family. Without the `smc` module this is [`Error::ModuleMissing`].
    pub fn open() -> Result<Pnet, Error> {
        Ok(Pnet {
            family: genl::resolve(FAMILY, "smc")?,
        })
    }

    fn request(&self, cmd: u8, attrs: Writer, what: &str) -> Result<Vec<u8>, Error> {
        let body = genl::body(cmd, VERSION, attrs);
        nl::transact(Protocol::Generic, self.family.id, &body, what)
    }

    /// Raw dump of the table.
    pub fn dump_raw(&self) -> Result<Vec<u8>, Error> {
        let body = genl::body(CMD_GET, VERSION, Writer::new());
        nl::dump_raw(Protocol::Generic, self.family.id, &body, "SMC_PNETID dump")
    }

    /// All rows of the table.
    pub fn show(&self) -> Result<Vec<Entry>, Error> {
        parse(&self.dump_raw()?)
    }

    /// Put network device `netdev` into PNET `pnetid`.
    pub fn add_netdev(&self, pnetid: &str, netdev: &str) -> Result<(), Error> {
        let id = normalize_pnetid(pnetid).map_err(Error::InvalidInput)?;
        let what = format!("adding {netdev} to PNET ID {id}");
        let attrs = Writer::new()
            .string(SMC_PNETID_NAME, &id)
            .string(SMC_PNETID_ETHNAME, netdev);
        self.request(CMD_ADD, attrs, &what).map(drop)
    }

    /// Put port `port` of RDMA/ISM device `ibdev` into PNET `pnetid`.
    pub fn add_ibdev(&self, pnetid: &str, ibdev: &str, port: u8) -> Result<(), Error> {
        let id = normalize_pnetid(pnetid).map_err(Error::InvalidInput)?;
        let what = format!("adding {ibdev} port {port} to PNET ID {id}");
        let attrs = Writer::new()
            .string(SMC_PNETID_NAME, &id)
            .string(SMC_PNETID_IBNAME, ibdev)
            .u8(SMC_PNETID_IBPORT, port);
        self.request(CMD_ADD, attrs, &what).map(drop)
    }

    /// Remove every row of PNET `pnetid`.
    pub fn del(&self, pnetid: &str) -> Result<(), Error> {
        let id = normalize_pnetid(pnetid).map_err(Error::InvalidInput)?;
        let what = format!("deleting PNET ID {id}");
        self.request(CMD_DEL, Writer::new().string(SMC_PNETID_NAME, &id), &what)
            .map(drop)
    }

    /// Empty the table.
    pub fn flush(&self) -> Result<(), Error> {
        self.request(CMD_FLUSH, Writer::new(), "flushing the PNET table")
            .map(drop)
    }
}

fn not_na(s: String) -> Option<String> {
    (s != "n/a" && !s.is_empty()).then_some(s)
}

/// Parse a raw table dump. The kernel writes "n/a" and port 255 for absent parts.
pub fn parse(raw: &[u8]) -> Result<Vec<Entry>, Error> {
    let what = "SMC_PNETID dump reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        let mut e = Entry::default();
        for a in attr::parse(body, what)? {
            match a.kind {
                SMC_PNETID_NAME => e.pnetid = a.string().trim().to_string(),
                SMC_PNETID_ETHNAME => e.netdev = not_na(a.string()),
                SMC_PNETID_IBNAME => e.ibdev = not_na(a.string()),
                SMC_PNETID_IBPORT => e.ibport = Some(a.u8(what)?).filter(|&p| p != 0xff),
                _ => {}
            }
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl::frame;
    use netlink_packet_core::NLMSG_DONE;

    #[test]
    fn pnetid_rules() {
        assert_eq!(normalize_pnetid("net1").unwrap(), "NET1");
        assert!(normalize_pnetid("").is_err());
        assert!(normalize_pnetid("has-dash").is_err());
        assert!(normalize_pnetid(&"A".repeat(17)).is_err());
        assert!(normalize_pnetid(&"A".repeat(16)).is_ok());
    }

    #[test]
    fn parses_rows_and_na() {
        let row = |w: Writer| {
            let mut g = vec![CMD_GET, 1, 0, 0];
            g.extend(w.finish());
            frame(0x1c, 2, 1, &g)
        };
        let mut raw = row(Writer::new()
            .string(SMC_PNETID_NAME, "NET1")
            .string(SMC_PNETID_ETHNAME, "eth0")
            .string(SMC_PNETID_IBNAME, "n/a")
            .u8(SMC_PNETID_IBPORT, 0xff));
        raw.extend(row(Writer::new()
            .string(SMC_PNETID_NAME, "NET1")
            .string(SMC_PNETID_ETHNAME, "n/a")
            .string(SMC_PNETID_IBNAME, "rxe0")
            .u8(SMC_PNETID_IBPORT, 1)));
        raw.extend(frame(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes()));
        let rows = parse(&raw).unwrap();
        assert_eq!(rows[0].netdev.as_deref(), Some("eth0"));
        assert_eq!((rows[0].ibdev.as_deref(), rows[0].ibport), (None, None));
        assert_eq!(
            (rows[1].ibdev.as_deref(), rows[1].ibport),
            (Some("rxe0"), Some(1))
        );
        assert_eq!(rows[1].netdev, None);
    }
}
