//! `smcrun stats --json`: the kernel's SMC counters of this network namespace, per technology in
//! smc-tools' names and in the seed layout (summary, RX, TX, special calls), with the fallback
//! reasons decoded. Read back too (`Deserialize`): the VM's guest checks (`tests/vm/check`) read
//! it in these types.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smcrun_kernel::smc_genl::{BufferStats, SizeHistogram, TechStats, SIZE_BUCKETS};

use crate::counters::{hist_columns, summary, Sample, Summary};
use crate::json::reason::{most_frequent_first, CountedReason};
use crate::percent;

/// `smcrun stats --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatsView<'a> {
    /// Seconds between the two samples of a delta (`--interval`); `null` for the totals.
    pub interval_seconds: Option<f64>,
    /// SMC-R.
    pub smcr: TechView<'a>,
    /// SMC-D.
    pub smcd: TechView<'a>,
    /// Handshake errors as a client (both technologies).
    pub clnt_hs_err_cnt: u64,
    /// Handshake errors as a server.
    pub srv_hs_err_cnt: u64,
    /// Fallbacks to TCP per role.
    pub fallback: FallbackView,
}

impl<'a> StatsView<'a> {
    /// The view of a sample; `interval` is the seconds between the two samples of a delta.
    pub fn new(s: &'a Sample, interval: Option<f64>) -> StatsView<'a> {
        StatsView {
            interval_seconds: interval,
            smcr: TechView::new(&s.stats.smcr, s),
            smcd: TechView::new(&s.stats.smcd, s),
            clnt_hs_err_cnt: s.stats.client_handshake_errors,
            srv_hs_err_cnt: s.stats.server_handshake_errors,
            fallback: FallbackView {
                clnt_cnt: s.fallback.client_total,
                srv_cnt: s.fallback.server_total,
                clnt_reasons: most_frequent_first(&s.fallback.client),
                srv_reasons: most_frequent_first(&s.fallback.server),
            },
        }
    }
}

/// The fallbacks of both roles, each role's reasons most frequent first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FallbackView {
    /// Client fallbacks in all.
    pub clnt_cnt: u64,
    /// Server fallbacks in all.
    pub srv_cnt: u64,
    /// Client fallback reasons.
    pub clnt_reasons: Vec<CountedReason>,
    /// Server fallback reasons.
    pub srv_reasons: Vec<CountedReason>,
}

/// One technology: the summary counters under smc-tools' names (lower case; stable since the
/// first version), the typed counters under `detail`, and the seed layout's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TechView<'a> {
    /// Client SMCv1 successes.
    pub clnt_v1_succ_cnt: u64,
    /// Client SMCv2 successes.
    pub clnt_v2_succ_cnt: u64,
    /// Server SMCv1 successes.
    pub srv_v1_succ_cnt: u64,
    /// Server SMCv2 successes.
    pub srv_v2_succ_cnt: u64,
    /// All successes.
    pub succ_cnt: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive calls.
    pub rx_cnt: u64,
    /// Send calls.
    pub tx_cnt: u64,
    /// Every counter the kernel gave, typed.
    pub detail: Cow<'a, TechStats>,
    /// The connections summary.
    pub summary: SummaryView,
    /// Receiving.
    pub rx: Direction,
    /// Sending.
    pub tx: Direction,
    /// Special socket calls (cork, nodelay, sendpage, splice, urgent data) in all.
    pub special_socket_calls: u64,
}

impl<'a> TechView<'a> {
    /// The view of one technology's counters `t` of sample `s`.
    pub fn new(t: &'a TechStats, s: &Sample) -> TechView<'a> {
        let sum = summary(t, s);
        TechView {
            clnt_v1_succ_cnt: t.client_v1_success,
            clnt_v2_succ_cnt: t.client_v2_success,
            srv_v1_succ_cnt: t.server_v1_success,
            srv_v2_succ_cnt: t.server_v2_success,
            succ_cnt: t.successes(),
            rx_bytes: t.rx_bytes,
            tx_bytes: t.tx_bytes,
            rx_cnt: t.rx_count,
            tx_cnt: t.tx_count,
            detail: Cow::Borrowed(t),
            summary: SummaryView::from(&sum),
            rx: Direction::rx(t),
            tx: Direction::tx(t),
            special_socket_calls: sum.special_socket_calls,
        }
    }
}

/// The connections summary of the seed layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryView {
    /// Connections handled (SMC, handshake errors, fallbacks).
    pub total_connections: u64,
    /// Connections over SMC.
    pub smc_connections: u64,
    /// Handshake errors.
    pub handshake_errors: u64,
    /// Fallbacks to TCP.
    pub tcp_fallback: u64,
    /// Requests (receive and send calls) per SMC connection.
    pub avg_requests_per_connection: f64,
}

impl From<&Summary> for SummaryView {
    fn from(s: &Summary) -> SummaryView {
        SummaryView {
            total_connections: s.total_connections,
            smc_connections: s.smc_connections,
            handshake_errors: s.handshake_errors,
            tcp_fallback: s.tcp_fallback,
            avg_requests_per_connection: s.avg_requests_per_connection,
        }
    }
}

/// One direction (RX or TX): bytes, requests, buffer events and their share of the requests,
/// the size histograms. The text of `smcrun stats` prints these same figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Direction {
    /// Bytes moved.
    pub bytes: u64,
    /// Requests (calls).
    pub requests: u64,
    /// Bytes in the buffers now (`null` where the kernel does not report it, before 6.12).
    pub buffer_usage: Option<u64>,
    /// The local buffer was full.
    pub buffer_full: u64,
    /// `buffer_full` as a percentage of the requests.
    pub buffer_full_pct: f64,
    /// Buffer size downgrades.
    pub buffer_downgrades: u64,
    /// Buffers reused.
    pub buffer_reuses: u64,
    /// Buffers allocated.
    pub buffer_allocs: u64,
    /// Buffer sizes.
    pub bufs: Histogram,
    /// Request sizes.
    pub reqs: Histogram,
    /// What only sending has: the peer's buffer and a too small buffer.
    #[serde(flatten)]
    pub tx_only: Option<TxOnly>,
}

impl Direction {
    /// Receiving.
    pub fn rx(t: &TechStats) -> Direction {
        Direction::new(
            t.rx_bytes,
            t.rx_count,
            t.rx_buffer_usage,
            &t.rx_buffers,
            [&t.rx_buffer_sizes, &t.rx_payload_sizes],
            None,
        )
    }

    /// Sending.
    pub fn tx(t: &TechStats) -> Direction {
        let b = &t.tx_buffers;
        let r = t.tx_count;
        let tx_only = TxOnly {
            buffer_full_remote: b.full_peer,
            buffer_full_remote_pct: percent(b.full_peer, r),
            buffer_too_small: b.size_small,
            buffer_too_small_pct: percent(b.size_small, r),
            buffer_too_small_remote: b.size_small_peer,
            buffer_too_small_remote_pct: percent(b.size_small_peer, r),
        };
        Direction::new(
            t.tx_bytes,
            r,
            t.tx_buffer_usage,
            b,
            [&t.tx_buffer_sizes, &t.tx_payload_sizes],
            Some(tx_only),
        )
    }

    fn new(
        bytes: u64,
        requests: u64,
        usage: Option<u64>,
        b: &BufferStats,
        [bufs, reqs]: [&SizeHistogram; 2],
        tx_only: Option<TxOnly>,
    ) -> Direction {
        Direction {
            bytes,
            requests,
            buffer_usage: usage,
            buffer_full: b.full,
            buffer_full_pct: percent(b.full, requests),
            buffer_downgrades: b.downgrade,
            buffer_reuses: b.reuse,
            buffer_allocs: b.alloc,
            bufs: Histogram::new(bufs),
            reqs: Histogram::new(reqs),
            tx_only,
        }
    }
}

/// The sending side's extra buffer events, with their share of the requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TxOnly {
    /// The peer's buffer was full.
    pub buffer_full_remote: u64,
    /// Its percentage of the requests.
    pub buffer_full_remote_pct: f64,
    /// The local buffer was too small.
    pub buffer_too_small: u64,
    /// Its percentage of the requests.
    pub buffer_too_small_pct: f64,
    /// The peer's buffer was too small.
    pub buffer_too_small_remote: u64,
    /// Its percentage of the requests.
    pub buffer_too_small_remote_pct: f64,
}

/// A size histogram: the kernel's buckets under the exporter's names
/// ([`SizeHistogram::buckets`]: `8k` … `1024k`, `gt_1024k`), and `gt_512k` (their sum above
/// 512 KiB, the last of `smcr stats`' columns, kept for those who read it before `1024k` came).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Histogram(SizeHistogram);

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let buckets = self.0.buckets();
        let mut m = s.serialize_map(Some(buckets.len() + 1))?;
        for (name, v) in buckets {
            m.serialize_entry(name, &v)?;
        }
        m.serialize_entry("gt_512k", &self.columns()[7])?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Histogram {
    /// The buckets by name; `gt_512k`, their sum, is left out.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let by_name = BTreeMap::<String, u64>::deserialize(d)?;
        let mut counts = [0; SIZE_BUCKETS.len()];
        for (c, name) in counts.iter_mut().zip(SIZE_BUCKETS) {
            *c = *by_name
                .get(name)
                .ok_or_else(|| serde::de::Error::missing_field(name))?;
        }
        Ok(Histogram(SizeHistogram::from_counts(counts)))
    }
}

impl Histogram {
    /// The histogram of `h`.
    pub fn new(h: &SizeHistogram) -> Histogram {
        Histogram(*h)
    }

    /// The count of bucket `name` (a [`SIZE_BUCKETS`] name: `64k`), as `bufs` and `reqs` print it.
    pub fn bucket(&self, name: &str) -> Option<u64> {
        self.0
            .buckets()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c)
    }

    /// `smcr stats`' eight columns ([`hist_columns`]), as the text's histogram rows print them.
    pub fn columns(&self) -> [u64; 8] {
        hist_columns(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::delta;
    use crate::json::golden::{assert_round_trips, assert_same, value};

    /// The counters of a capture, as `smcrun stats` samples them.
    fn captured(phase: &str) -> Sample {
        let c = crate::fixtures::snapshot(phase).counters;
        let c = c.get().expect("the capture has the counters");
        Sample {
            stats: c.stats,
            fallback: c.fallback.clone(),
        }
    }

    #[test]
    fn stats_of_every_capture_as_golden() {
        for phase in ["smcr", "smcd", "fallback", "smcd-fallback"] {
            assert_same(
                &format!("stats-{phase}"),
                &StatsView::new(&captured(phase), None),
            );
        }
    }

    #[test]
    fn stats_and_deltas_read_back_as_printed() {
        for phase in ["smcr", "smcd", "fallback", "smcd-fallback"] {
            assert_round_trips(phase, &StatsView::new(&captured(phase), None));
        }
        let d = delta(&captured("smcd"), &captured("smcd-fallback"));
        assert_round_trips("delta", &StatsView::new(&d, Some(1.0)));
    }

    #[test]
    fn stats_deltas_as_golden() {
        let d = delta(&captured("smcr"), &captured("fallback"));
        assert_same("stats-delta", &StatsView::new(&d, Some(2.5)));
        let d = delta(&captured("smcd"), &captured("smcd-fallback"));
        assert_same("stats-delta-smcd", &StatsView::new(&d, Some(1.0)));
    }

    #[test]
    fn stats_unreported_buffer_usage_and_totals_interval_are_null() {
        let mut s = captured("smcr");
        s.stats.smcr.rx_buffer_usage = None;
        let j = value(&StatsView::new(&s, None));
        assert!(j["interval_seconds"].is_null(), "{j}");
        assert!(j["smcr"]["rx"]["buffer_usage"].is_null(), "{j}");
        assert!(j["smcr"]["detail"]["rx_buffer_usage"].is_null(), "{j}");
        assert!(j["smcr"]["tx"]["buffer_usage"].is_u64(), "{j}");
        assert!(j["smcr"]["rx"].get("buffer_full_remote").is_none(), "{j}");
        assert!(j["smcr"]["tx"]["buffer_full_remote_pct"].is_f64(), "{j}");
    }
}
