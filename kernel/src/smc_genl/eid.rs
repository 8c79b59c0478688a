//! User EIDs (`DUMP_UEID`, `ADD_UEID`, ...) and the system EID (`DUMP_SEID`): the enterprise IDs
//! SMC-Dv2 and SMC-Rv2 peers must share.

use serde::Serialize;

use super::MAX_EID_LEN;
use crate::abi::smc::*;
use crate::attr;
use crate::error::Error;
use crate::genl;
use crate::nl;

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

/// Parse a raw `DUMP_UEID` reply into EIDs with the blank padding trimmed.
pub fn parse_ueids(raw: &[u8]) -> Result<Vec<String>, Error> {
    let what = "SMC DUMP_UEID reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            if a.kind == SMC_NLA_EID_TABLE_ENTRY {
                out.push(a.string().trim_end().to_string());
            }
        }
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

/// Parse a raw `DUMP_SEID` reply (its attributes are at the top level).
pub fn parse_seid(raw: &[u8]) -> Result<Seid, Error> {
    let what = "SMC DUMP_SEID reply";
    let mut s = Seid::default();
    for m in nl::data_messages(raw, what)? {
        let (_, body) = genl::split(&m, what)?;
        for a in attr::parse(body, what)? {
            match a.kind {
                SMC_NLA_SEID_ENTRY => s.seid = a.string().trim_end().to_string(),
                SMC_NLA_SEID_ENABLED => s.enabled = a.u8(what)? != 0,
                _ => {}
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::reply;

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
    fn ueid_dump_trims_the_padding() {
        let mut padded = ueid_to_wire("SMCRUN-TEST").unwrap();
        padded.pop();
        let raw = reply(
            cmd::DUMP_UEID,
            &[Writer::new()
                .string(
                    SMC_NLA_EID_TABLE_ENTRY,
                    std::str::from_utf8(&padded).unwrap(),
                )
                .finish()],
        );
        assert_eq!(parse_ueids(&raw).unwrap(), vec!["SMCRUN-TEST"]);
    }

    #[test]
    fn seid_at_the_top_level() {
        let raw = reply(
            cmd::DUMP_SEID,
            &[Writer::new()
                .string(SMC_NLA_SEID_ENTRY, "SEID-1")
                .u8(SMC_NLA_SEID_ENABLED, 1)
                .finish()],
        );
        let s = parse_seid(&raw).unwrap();
        assert_eq!((s.seid.as_str(), s.enabled), ("SEID-1", true));
    }
}
