//! `GET_STATS`: the network namespace's SMC-R and SMC-D counters, with their size histograms and
//! buffer events.

use serde::{Deserialize, Serialize};

use super::nests;
use crate::abi::smc::*;
use crate::attr::Attr;
use crate::error::Error;

/// Histogram over sizes: ≤8K, ≤16K, ... ≤1024K, >1024K.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// How many buckets a [`SizeHistogram`] has.
const BUCKETS: usize = SIZE_BUCKETS.len();

impl SizeHistogram {
    /// The counters in bucket order: the one place that lists the fields.
    fn slots(&mut self) -> [&mut u64; BUCKETS] {
        [
            &mut self.le_8k,
            &mut self.le_16k,
            &mut self.le_32k,
            &mut self.le_64k,
            &mut self.le_128k,
            &mut self.le_256k,
            &mut self.le_512k,
            &mut self.le_1024k,
            &mut self.gt_1024k,
        ]
    }

    /// The counts in bucket order (the order of [`SIZE_BUCKETS`]).
    pub fn counts(&self) -> [u64; BUCKETS] {
        let mut h = *self;
        h.slots().map(|c| *c)
    }

    /// The histogram with these counts, in bucket order.
    pub fn from_counts(counts: [u64; BUCKETS]) -> SizeHistogram {
        let mut h = SizeHistogram::default();
        for (slot, c) in h.slots().into_iter().zip(counts) {
            *slot = c;
        }
        h
    }

    /// Bucket by bucket `f(self's count, other's count)`, e.g. the growth between two samples.
    pub fn map2(&self, other: &SizeHistogram, f: impl Fn(u64, u64) -> u64) -> SizeHistogram {
        let (a, b) = (self.counts(), other.counts());
        SizeHistogram::from_counts(std::array::from_fn(|i| f(a[i], b[i])))
    }

    /// All buckets together.
    pub fn total(&self) -> u64 {
        self.counts().iter().sum()
    }

    /// Each bucket's count under its [`SIZE_BUCKETS`] name.
    pub fn buckets(&self) -> [(&'static str, u64); BUCKETS] {
        let counts = self.counts();
        std::array::from_fn(|i| (SIZE_BUCKETS[i], counts[i]))
    }

    /// The kernel sends one attribute per bucket, `SMC_NLA_STATS_PLOAD_8K` onwards in bucket
    /// order.
    fn from_nest(nest: &Attr<'_>, what: &str) -> Result<Self, Error> {
        let mut h = SizeHistogram::default();
        for a in nest.nested(what)? {
            if let SMC_NLA_STATS_PLOAD_8K..=SMC_NLA_STATS_PLOAD_G_1024K = a.kind {
                *h.slots()[usize::from(a.kind - SMC_NLA_STATS_PLOAD_8K)] = a.u64(what)?;
            }
        }
        Ok(h)
    }
}

/// Buffer events of one direction (`SMC_NLA_STATS_RMB_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The counters in declaration order.
    fn slots(&mut self) -> [&mut u64; 7] {
        [
            &mut self.size_small_peer,
            &mut self.size_small,
            &mut self.full_peer,
            &mut self.full,
            &mut self.reuse,
            &mut self.alloc,
            &mut self.downgrade,
        ]
    }

    /// Counter by counter `f(self's count, other's count)`, e.g. the growth between two samples.
    pub fn map2(&self, other: &BufferStats, f: impl Fn(u64, u64) -> u64) -> BufferStats {
        let (mut out, mut b) = (*self, *other);
        for (slot, v) in out.slots().into_iter().zip(b.slots()) {
            *slot = f(*slot, *v);
        }
        out
    }

    fn from_nest(nest: &Attr<'_>, what: &str) -> Result<Self, Error> {
        let mut b = BufferStats::default();
        for a in nest.nested(what)? {
            let slot = match a.kind {
                SMC_NLA_STATS_RMB_SIZE_SM_PEER_CNT => &mut b.size_small_peer,
                SMC_NLA_STATS_RMB_SIZE_SM_CNT => &mut b.size_small,
                SMC_NLA_STATS_RMB_FULL_PEER_CNT => &mut b.full_peer,
                SMC_NLA_STATS_RMB_FULL_CNT => &mut b.full,
                SMC_NLA_STATS_RMB_REUSE_CNT => &mut b.reuse,
                SMC_NLA_STATS_RMB_ALLOC_CNT => &mut b.alloc,
                SMC_NLA_STATS_RMB_DGRADE_CNT => &mut b.downgrade,
                _ => continue,
            };
            *slot = a.u64(what)?;
        }
        Ok(b)
    }
}

/// Statistics of one technology (SMC-R or SMC-D).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
                SMC_NLA_STATS_T_TX_RMB_SIZE => {
                    t.tx_buffer_sizes = SizeHistogram::from_nest(a, what)?
                }
                SMC_NLA_STATS_T_RX_RMB_SIZE => {
                    t.rx_buffer_sizes = SizeHistogram::from_nest(a, what)?
                }
                SMC_NLA_STATS_T_TXPLOAD_SIZE => {
                    t.tx_payload_sizes = SizeHistogram::from_nest(a, what)?
                }
                SMC_NLA_STATS_T_RXPLOAD_SIZE => {
                    t.rx_payload_sizes = SizeHistogram::from_nest(a, what)?
                }
                SMC_NLA_STATS_T_TX_RMB_STATS => t.tx_buffers = BufferStats::from_nest(a, what)?,
                SMC_NLA_STATS_T_RX_RMB_STATS => t.rx_buffers = BufferStats::from_nest(a, what)?,
                SMC_NLA_STATS_T_CLNT_V1_SUCC => t.client_v1_success = a.u64(what)?,
                SMC_NLA_STATS_T_CLNT_V2_SUCC => t.client_v2_success = a.u64(what)?,
                SMC_NLA_STATS_T_SRV_V1_SUCC => t.server_v1_success = a.u64(what)?,
                SMC_NLA_STATS_T_SRV_V2_SUCC => t.server_v2_success = a.u64(what)?,
                SMC_NLA_STATS_T_SENDPAGE_CNT => t.sendpage = a.u64(what)?,
                SMC_NLA_STATS_T_SPLICE_CNT => t.splice = a.u64(what)?,
                SMC_NLA_STATS_T_CORK_CNT => t.cork = a.u64(what)?,
                SMC_NLA_STATS_T_NDLY_CNT => t.nodelay = a.u64(what)?,
                SMC_NLA_STATS_T_URG_DATA_CNT => t.urgent_data = a.u64(what)?,
                SMC_NLA_STATS_T_RX_BYTES => t.rx_bytes = a.u64(what)?,
                SMC_NLA_STATS_T_TX_BYTES => t.tx_bytes = a.u64(what)?,
                SMC_NLA_STATS_T_RX_CNT => t.rx_count = a.u64(what)?,
                SMC_NLA_STATS_T_TX_CNT => t.tx_count = a.u64(what)?,
                SMC_NLA_STATS_T_RX_RMB_USAGE => t.rx_buffer_usage = Some(a.uint(what)?),
                SMC_NLA_STATS_T_TX_RMB_USAGE => t.tx_buffer_usage = Some(a.uint(what)?),
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
    let all = nests(raw, SMC_GEN_STATS, what)?;
    let (_, attrs) = all
        .last()
        .ok_or_else(|| Error::malformed(what, "no SMC_GEN_STATS attribute"))?;
    let mut s = Stats::default();
    for a in attrs {
        match a.kind {
            SMC_NLA_STATS_SMCD_TECH => {
                s.smcd = TechStats::parse(&a.nested(what)?, &format!("{what}, SMCD_TECH"))?
            }
            SMC_NLA_STATS_SMCR_TECH => {
                s.smcr = TechStats::parse(&a.nested(what)?, &format!("{what}, SMCR_TECH"))?
            }
            SMC_NLA_STATS_CLNT_HS_ERR_CNT => s.client_handshake_errors = a.u64(what)?,
            SMC_NLA_STATS_SRV_HS_ERR_CNT => s.server_handshake_errors = a.u64(what)?,
            _ => {}
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::{nest, reply, u64a};

    fn tech(base: u64) -> Vec<u8> {
        let mut t = Writer::new();
        let mut hist = Writer::new();
        for k in SMC_NLA_STATS_PLOAD_8K..=SMC_NLA_STATS_PLOAD_G_1024K {
            hist = u64a(hist, k, base + u64::from(k));
        }
        t = t.bytes(SMC_NLA_STATS_T_TX_RMB_SIZE | 0x8000, &hist.finish());
        let mut rmb = Writer::new();
        for k in SMC_NLA_STATS_RMB_SIZE_SM_PEER_CNT..=SMC_NLA_STATS_RMB_DGRADE_CNT {
            rmb = u64a(rmb, k, base * 100 + u64::from(k));
        }
        t = t.bytes(SMC_NLA_STATS_T_RX_RMB_STATS | 0x8000, &rmb.finish());
        for k in SMC_NLA_STATS_T_CLNT_V1_SUCC..=SMC_NLA_STATS_T_TX_CNT {
            t = u64a(t, k, base * 1000 + u64::from(k));
        }
        t = t.u32(SMC_NLA_STATS_T_RX_RMB_USAGE, 4096);
        t = t.bytes(SMC_NLA_STATS_T_TX_RMB_USAGE, &(1u64 << 33).to_ne_bytes());
        t.finish()
    }

    fn stats_reply() -> Vec<u8> {
        let inner = Writer::new()
            .bytes(SMC_NLA_STATS_SMCD_TECH | 0x8000, &tech(1))
            .bytes(SMC_NLA_STATS_SMCR_TECH | 0x8000, &tech(2));
        let inner = u64a(inner, SMC_NLA_STATS_CLNT_HS_ERR_CNT, 11);
        let inner = u64a(inner, SMC_NLA_STATS_SRV_HS_ERR_CNT, 12);
        reply(cmd::GET_STATS, &[nest(SMC_GEN_STATS, inner).finish()])
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
    fn histogram_buckets_in_order() {
        let h = SizeHistogram::from_counts([1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!((h.le_8k, h.le_1024k, h.gt_1024k), (1, 8, 9));
        assert_eq!(h.counts(), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(h.total(), 45);
        assert_eq!(h.buckets()[8], ("gt_1024k", 9));
        let d = h.map2(&SizeHistogram::from_counts([2; 9]), |a, b| {
            b.saturating_sub(a)
        });
        assert_eq!(d.counts(), [1, 0, 0, 0, 0, 0, 0, 0, 0]);
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
        let tech = Writer::new().u32(SMC_NLA_STATS_T_RX_BYTES, 5).finish();
        let inner = Writer::new().bytes(SMC_NLA_STATS_SMCR_TECH | 0x8000, &tech);
        let raw = reply(cmd::GET_STATS, &[nest(SMC_GEN_STATS, inner).finish()]);
        let e = parse_stats(&raw).unwrap_err();
        assert!(e.to_string().contains("SMCR_TECH"), "{e}");
        assert!(parse_stats(&reply(cmd::GET_STATS, &[])).is_err());
    }
}
