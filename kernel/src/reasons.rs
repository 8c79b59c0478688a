//! Decoding tables: SMC CLC decline / fallback reason codes, socket states, link states, link
//! group types, roles, peer operating systems and buffer types. The kernel reports all of these
//! as bare numbers; an operator needs the name to search for and a sentence to act on.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Broad class of a reason code, from its high byte(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// No reason recorded (code 0).
    None,
    /// 0x01: out of memory or other local resources.
    Resources,
    /// 0x02: a timeout during the handshake.
    Timeout,
    /// 0x03: configuration or peer capability mismatch.
    Configuration,
    /// 0x04: the two sides lost synchronization.
    Synchronization,
    /// 0x05: the peer declined.
    PeerDeclined,
    /// 0x0999: an internal error in the kernel's SMC code.
    Internal,
    /// A class this table does not know (e.g. a non-Linux peer's own diagnosis).
    Other,
}

impl Category {
    /// The category of `code`.
    pub fn of(code: u32) -> Category {
        if code == 0 {
            return Category::None;
        }
        if code >> 16 == 0x0999 {
            return Category::Internal;
        }
        match code >> 24 {
            0x01 => Category::Resources,
            0x02 => Category::Timeout,
            0x03 => Category::Configuration,
            0x04 => Category::Synchronization,
            0x05 => Category::PeerDeclined,
            _ => Category::Other,
        }
    }

    /// Short text of the category.
    pub fn text(self) -> &'static str {
        match self {
            Category::None => "no reason",
            Category::Resources => "local resources",
            Category::Timeout => "handshake timeout",
            Category::Configuration => "configuration or peer capability",
            Category::Synchronization => "synchronization",
            Category::PeerDeclined => "peer declined",
            Category::Internal => "internal kernel error",
            Category::Other => "outside the Linux SMC reason classes",
        }
    }
}

/// A decoded reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// The raw code.
    pub code: u32,
    /// The kernel's name without the `SMC_CLC_DECL_` prefix (e.g. `NOSMCDEV`); for codes not in
    /// the table, a name built from the category and code.
    pub name: Cow<'static, str>,
    /// What it means for the operator.
    pub description: Cow<'static, str>,
    /// Broad class.
    pub category: Category,
    /// Whether the code is in this table (false: decoded by category only).
    pub known: bool,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "0x{:08x} {} ({})",
            self.code, self.description, self.name
        )
    }
}

/// (code, kernel name, operator sentence): every `SMC_CLC_DECL_*` code of mainline `smc_clc.h`.
const TABLE: &[(u32, &str, &str)] = &[
    (0x0101_0000, "MEM", "insufficient memory resources"),
    (
        0x0201_0000,
        "TIMEOUT_CL",
        "timeout waiting for the QP confirm link",
    ),
    (
        0x0202_0000,
        "TIMEOUT_AL",
        "timeout waiting for the QP add link",
    ),
    (0x0300_0000, "CNFERR", "configuration error"),
    (
        0x0301_0000,
        "PEERNOSMC",
        "peer did not indicate SMC (no SMC TCP option)",
    ),
    (0x0302_0000, "IPSEC", "IPsec is in use on the connection"),
    (0x0303_0000, "NOSMCDEV", "no SMC device found"),
    (0x0303_0001, "NOSMCDDEV", "no SMC-D device found"),
    (0x0303_0002, "NOSMCRDEV", "no SMC-R device found"),
    (
        0x0303_0003,
        "NOISM2SUPP",
        "the ISM hardware has no ISMv2 support",
    ),
    (0x0303_0004, "NOV2EXT", "peer sent no CLC v2 extension"),
    (
        0x0303_0005,
        "NOV2DEXT",
        "peer sent no CLC SMC-Dv2 extension",
    ),
    (0x0303_0006, "NOSEID", "peer sent no system EID (SEID)"),
    (0x0303_0007, "NOSMCD2DEV", "no SMC-Dv2 device found"),
    (
        0x0303_0008,
        "NOUEID",
        "no matching user EID (UEID) with the peer",
    ),
    (
        0x0303_0009,
        "RELEASEERR",
        "SMC release version negotiation failed",
    ),
    (
        0x0303_000a,
        "MAXCONNERR",
        "maximum connections per link group negotiation failed",
    ),
    (
        0x0303_000b,
        "MAXLINKERR",
        "maximum links per link group negotiation failed",
    ),
    (
        0x0304_0000,
        "MODEUNSUPP",
        "SMC modes do not match between the peers",
    ),
    (0x0305_0000, "RMBE_EC", "peer has an eyecatcher in its RMBE"),
    (
        0x0306_0000,
        "OPTUNSUPP",
        "a socket option (e.g. TCP fastopen) is not supported by SMC",
    ),
    (
        0x0307_0000,
        "DIFFPREFIX",
        "peers are not in the same IP subnet",
    ),
    (
        0x0308_0000,
        "GETVLANERR",
        "could not get the VLAN id of the IP device",
    ),
    (
        0x0309_0000,
        "ISMVLANERR",
        "could not register the VLAN id on the ISM device",
    ),
    (
        0x030a_0000,
        "NOACTLINK",
        "no active SMC-R link in the link group",
    ),
    (
        0x030b_0000,
        "NOSRVLINK",
        "the SMC-R link from the server was not found",
    ),
    (0x030c_0000, "VERSMISMAT", "SMC version mismatch"),
    (
        0x030d_0000,
        "MAX_DMB",
        "SMC-D DMB limit exceeded (connection limit reached)",
    ),
    (0x030e_0000, "NOROUTE", "SMC-Rv2 found no route to the peer"),
    (
        0x030f_0000,
        "NOINDIRECT",
        "SMC-Rv2 direct/indirect route mismatch with the peer",
    ),
    (0x0400_0000, "SYNCERR", "synchronization error"),
    (
        0x0500_0000,
        "PEERDECL",
        "the peer declined during the handshake",
    ),
    (0x0999_0000, "INTERR", "internal error"),
    (0x0999_0001, "ERR_RTOK", "rtoken handling failed"),
    (
        0x0999_0002,
        "ERR_RDYLNK",
        "the RDMA link did not become ready",
    ),
    (0x0999_0003, "ERR_REGBUF", "registering RDMA buffers failed"),
];

/// Number of reason codes in the table.
pub const KNOWN_REASONS: usize = TABLE.len();

/// Decode a CLC decline / fallback reason code. Never fails: codes missing from the table are
/// described by their category.
pub fn describe(code: u32) -> Reason {
    if code == 0 {
        return Reason {
            code,
            name: Cow::Borrowed("NONE"),
            description: Cow::Borrowed("no reason recorded"),
            category: Category::None,
            known: true,
        };
    }
    let category = Category::of(code);
    if let Some(&(_, name, text)) = TABLE.iter().find(|(c, _, _)| *c == code) {
        return Reason {
            code,
            name: Cow::Borrowed(name),
            description: Cow::Borrowed(text),
            category,
            known: true,
        };
    }
    let (name, description) = match category {
        Category::Other => (
            format!("CODE_{code:08X}"),
            format!(
                "code 0x{code:08x} is outside the Linux SMC reason classes (a non-Linux peer's own diagnosis?)"
            ),
        ),
        c => (
            format!("{}_{code:08X}", category_tag(c)),
            format!(
                "{} problem: code 0x{code:08x} is newer than this table",
                c.text()
            ),
        ),
    };
    Reason {
        code,
        name: Cow::Owned(name),
        description: Cow::Owned(description),
        category,
        known: false,
    }
}

fn category_tag(c: Category) -> &'static str {
    match c {
        Category::None => "NONE",
        Category::Resources => "RESOURCES",
        Category::Timeout => "TIMEOUT",
        Category::Configuration => "CONFIG",
        Category::Synchronization => "SYNC",
        Category::PeerDeclined => "PEERDECL",
        Category::Internal => "INTERNAL",
        Category::Other => "CODE",
    }
}

/// smcss's name of an SMC socket state (`diag_state`).
pub fn socket_state(state: u8) -> Cow<'static, str> {
    Cow::Borrowed(match state {
        1 => "ACTIVE",
        2 => "INIT",
        7 => "CLOSED",
        10 => "LISTEN",
        20 => "PEERCLOSEWAIT1",
        21 => "PEERCLOSEWAIT2",
        22 => "APPCLOSEWAIT1",
        23 => "APPCLOSEWAIT2",
        24 => "APPFINCLOSEWAIT",
        25 => "PEERFINCLOSEWAIT",
        26 => "PEERABORTWAIT",
        27 => "PROCESSABORT",
        other => return Cow::Owned(format!("STATE_{other}")),
    })
}

/// SMC socket state numbers used by filters.
pub mod state {
    /// Connection established.
    pub const ACTIVE: u8 = 1;
    /// Not yet connected.
    pub const INIT: u8 = 2;
    /// Closed.
    pub const CLOSED: u8 = 7;
    /// Listening.
    pub const LISTEN: u8 = 10;
}

/// Name `value` from `names` (indexed from 0), or `PREFIX_value` when the table has no entry.
fn named(names: &[&'static str], value: u64, prefix: &str) -> Cow<'static, str> {
    match usize::try_from(value).ok().and_then(|i| names.get(i)) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("{prefix}_{value}")),
    }
}

/// SMC-R link state (`SMC_NLA_LINK_STATE`).
pub fn link_state(state: u32) -> Cow<'static, str> {
    named(
        &["UNUSED", "INACTIVE", "ACTIVATING", "ACTIVE"],
        state.into(),
        "LINK_STATE",
    )
}

/// SMC-R link group type (`SMC_NLA_LGR_R_TYPE`).
pub fn lgr_type(t: u8) -> Cow<'static, str> {
    named(
        &["NONE", "SINGLE", "SYM", "ASYMP", "ASYML"],
        t.into(),
        "TYPE",
    )
}

/// Link group role (`SMC_NLA_LGR_R_ROLE`, sock_diag lgrinfo role).
pub fn role(r: u8) -> Cow<'static, str> {
    named(&["CLNT", "SERV"], r.into(), "ROLE")
}

/// Peer operating system (`SMC_NLA_LGR_V2_OS`).
pub fn peer_os(os: u8) -> Cow<'static, str> {
    named(&["unknown", "ZOS", "LINUX", "AIX"], os.into(), "OS")
}

/// SMC-R buffer type (`SMC_NLA_LGR_R_BUF_TYPE`, matches `net.smc.smcr_buf_type`).
pub fn buf_type(t: u8) -> Cow<'static, str> {
    named(
        &["physically-contiguous", "virtually-contiguous", "mixed"],
        t.into(),
        "BUF_TYPE",
    )
}

/// smcss's shutdown column: `R-W` style from the mask (1 = receive, 2 = send).
pub fn shutdown(mask: u8) -> String {
    format!(
        "{}-{}",
        if mask & 1 != 0 { 'R' } else { '<' },
        if mask & 2 != 0 { 'W' } else { '>' }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_all_36_distinct_codes() {
        assert_eq!(KNOWN_REASONS, 36);
        let mut codes: Vec<u32> = TABLE.iter().map(|t| t.0).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), 36);
        for (code, name, _) in TABLE {
            let r = describe(*code);
            assert!(r.known);
            assert_eq!(r.name, *name);
            assert_ne!(r.category, Category::Other, "{name}");
        }
    }

    #[test]
    fn display_matches_the_documented_form() {
        assert_eq!(
            describe(0x0303_0000).to_string(),
            "0x03030000 no SMC device found (NOSMCDEV)"
        );
        assert_eq!(describe(0x0999_0003).name, "ERR_REGBUF");
        assert_eq!(describe(0x0306_0000).category, Category::Configuration);
    }

    #[test]
    fn unknown_codes_are_decoded_by_category() {
        let r = describe(0x0303_000c);
        assert!(!r.known);
        assert_eq!(r.category, Category::Configuration);
        assert_eq!(r.name, "CONFIG_0303000C");
        assert!(r.description.contains("configuration"));
        let r = describe(0x0999_00ff);
        assert_eq!(r.category, Category::Internal);
        let r = describe(0x7700_0001);
        assert_eq!(r.category, Category::Other);
        assert!(!r.to_string().contains("[unknown]"));
        assert!(r.to_string().starts_with("0x77000001 "));
        assert_eq!(describe(0).name, "NONE");
    }

    #[test]
    fn state_tables() {
        assert_eq!(socket_state(1), "ACTIVE");
        assert_eq!(socket_state(24), "APPFINCLOSEWAIT");
        assert_eq!(socket_state(99), "STATE_99");
        assert_eq!(link_state(3), "ACTIVE");
        assert_eq!(lgr_type(2), "SYM");
        assert_eq!(role(1), "SERV");
        assert_eq!(peer_os(2), "LINUX");
        assert_eq!(buf_type(2), "mixed");
        assert_eq!(lgr_type(5), "TYPE_5");
        assert_eq!(link_state(u32::MAX), "LINK_STATE_4294967295");
        assert_eq!(shutdown(0), "<->");
        assert_eq!(shutdown(3), "R-W");
    }
}
