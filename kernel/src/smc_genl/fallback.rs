//! `GET_FBACK_STATS`: how often connections fell back to TCP, by CLC reason code.

use serde::Serialize;

use super::nests;
use crate::abi::smc::*;
use crate::error::Error;

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
    for (_, attrs) in nests(raw, SMC_GEN_FBACK_STATS, what)? {
        let mut server = None;
        let mut code = None;
        let mut count = None;
        for a in &attrs {
            match a.kind {
                SMC_NLA_FBACK_STATS_TYPE => server = Some(a.u8(what)? != 0),
                SMC_NLA_FBACK_STATS_SRV_CNT => f.server_total = a.u64(what)?,
                SMC_NLA_FBACK_STATS_CLNT_CNT => f.client_total = a.u64(what)?,
                SMC_NLA_FBACK_STATS_RSN_CODE => code = Some(a.u32(what)?),
                SMC_NLA_FBACK_STATS_RSN_CNT => count = Some(a.u16(what)?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::{nest, reply, u64a};

    #[test]
    fn fallback_totals_only_in_first_message() {
        let first = u64a(
            u64a(
                Writer::new().u8(SMC_NLA_FBACK_STATS_TYPE, 1),
                SMC_NLA_FBACK_STATS_SRV_CNT,
                70000,
            ),
            SMC_NLA_FBACK_STATS_CLNT_CNT,
            5,
        )
        .u32(SMC_NLA_FBACK_STATS_RSN_CODE, 0x0303_0000)
        .bytes(SMC_NLA_FBACK_STATS_RSN_CNT, &4464u16.to_ne_bytes());
        let second = Writer::new()
            .u8(SMC_NLA_FBACK_STATS_TYPE, 0)
            .u32(SMC_NLA_FBACK_STATS_RSN_CODE, 0x0301_0000)
            .bytes(SMC_NLA_FBACK_STATS_RSN_CNT, &5u16.to_ne_bytes());
        let raw = reply(
            cmd::GET_FBACK_STATS,
            &[
                nest(SMC_GEN_FBACK_STATS, first).finish(),
                nest(SMC_GEN_FBACK_STATS, second).finish(),
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
}
