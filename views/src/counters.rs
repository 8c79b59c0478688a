//! The kernel's SMC counters as an operator reads them: one sample of a network namespace's
//! counters, the growth between two samples (the kernel's counters cannot be reset; smc-tools
//! emulates a reset with a cache file, `smcrun stats --interval` takes two samples), and
//! smc-tools' summary figures.

use smcrun_telemetry::smc_genl::{
    BufferStats, FallbackStats, ReasonCount, SizeHistogram, SmcGenl, Stats, TechStats,
};
use smcrun_telemetry::Error;

/// One sample of the namespace's counters.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// GET_STATS.
    pub stats: Stats,
    /// GET_FBACK_STATS.
    pub fallback: FallbackStats,
}

/// Read one sample from the kernel.
pub fn sample(client: &SmcGenl) -> Result<Sample, Error> {
    Ok(Sample {
        stats: client.stats()?,
        fallback: client.fallback_stats()?,
    })
}

fn hist_delta(a: &SizeHistogram, b: &SizeHistogram) -> SizeHistogram {
    SizeHistogram {
        le_8k: b.le_8k.saturating_sub(a.le_8k),
        le_16k: b.le_16k.saturating_sub(a.le_16k),
        le_32k: b.le_32k.saturating_sub(a.le_32k),
        le_64k: b.le_64k.saturating_sub(a.le_64k),
        le_128k: b.le_128k.saturating_sub(a.le_128k),
        le_256k: b.le_256k.saturating_sub(a.le_256k),
        le_512k: b.le_512k.saturating_sub(a.le_512k),
        le_1024k: b.le_1024k.saturating_sub(a.le_1024k),
        gt_1024k: b.gt_1024k.saturating_sub(a.gt_1024k),
    }
}

fn buf_delta(a: &BufferStats, b: &BufferStats) -> BufferStats {
    BufferStats {
        size_small_peer: b.size_small_peer.saturating_sub(a.size_small_peer),
        size_small: b.size_small.saturating_sub(a.size_small),
        full_peer: b.full_peer.saturating_sub(a.full_peer),
        full: b.full.saturating_sub(a.full),
        reuse: b.reuse.saturating_sub(a.reuse),
        alloc: b.alloc.saturating_sub(a.alloc),
        downgrade: b.downgrade.saturating_sub(a.downgrade),
    }
}

/// What the counters of `b` grew by since `a`; the buffer usage gauges are `b`'s. A counter that
/// went down (the module was reloaded in between) counts 0.
pub fn tech_delta(a: &TechStats, b: &TechStats) -> TechStats {
    TechStats {
        tx_buffer_sizes: hist_delta(&a.tx_buffer_sizes, &b.tx_buffer_sizes),
        rx_buffer_sizes: hist_delta(&a.rx_buffer_sizes, &b.rx_buffer_sizes),
        tx_payload_sizes: hist_delta(&a.tx_payload_sizes, &b.tx_payload_sizes),
        rx_payload_sizes: hist_delta(&a.rx_payload_sizes, &b.rx_payload_sizes),
        tx_buffers: buf_delta(&a.tx_buffers, &b.tx_buffers),
        rx_buffers: buf_delta(&a.rx_buffers, &b.rx_buffers),
        client_v1_success: b.client_v1_success.saturating_sub(a.client_v1_success),
        client_v2_success: b.client_v2_success.saturating_sub(a.client_v2_success),
        server_v1_success: b.server_v1_success.saturating_sub(a.server_v1_success),
        server_v2_success: b.server_v2_success.saturating_sub(a.server_v2_success),
        sendpage: b.sendpage.saturating_sub(a.sendpage),
        splice: b.splice.saturating_sub(a.splice),
        cork: b.cork.saturating_sub(a.cork),
        nodelay: b.nodelay.saturating_sub(a.nodelay),
        urgent_data: b.urgent_data.saturating_sub(a.urgent_data),
        rx_bytes: b.rx_bytes.saturating_sub(a.rx_bytes),
        tx_bytes: b.tx_bytes.saturating_sub(a.tx_bytes),
        rx_count: b.rx_count.saturating_sub(a.rx_count),
        tx_count: b.tx_count.saturating_sub(a.tx_count),
        rx_buffer_usage: b.rx_buffer_usage,
        tx_buffer_usage: b.tx_buffer_usage,
    }
}

/// Per-reason growth: the kernel's per-reason counts are u16 and wrap, so they are subtracted
/// modulo 2^16; a reason new in `b` counts fully.
fn reasons_delta(a: &[ReasonCount], b: &[ReasonCount]) -> Vec<ReasonCount> {
    b.iter()
        .map(|rb| {
            let before = a
                .iter()
                .find(|ra| ra.code == rb.code)
                .map_or(0, |ra| ra.count);
            ReasonCount {
                code: rb.code,
                count: rb.count.wrapping_sub(before),
            }
        })
        .filter(|r| r.count > 0)
        .collect()
}

/// What happened between two samples.
pub fn delta(a: &Sample, b: &Sample) -> Sample {
    Sample {
        stats: Stats {
            smcr: tech_delta(&a.stats.smcr, &b.stats.smcr),
            smcd: tech_delta(&a.stats.smcd, &b.stats.smcd),
            client_handshake_errors: b
                .stats
                .client_handshake_errors
                .saturating_sub(a.stats.client_handshake_errors),
            server_handshake_errors: b
                .stats
                .server_handshake_errors
                .saturating_sub(a.stats.server_handshake_errors),
        },
        fallback: FallbackStats {
            server_total: b
                .fallback
                .server_total
                .saturating_sub(a.fallback.server_total),
            client_total: b
                .fallback
                .client_total
                .saturating_sub(a.fallback.client_total),
            server: reasons_delta(&a.fallback.server, &b.fallback.server),
            client: reasons_delta(&a.fallback.client, &b.fallback.client),
        },
    }
}

/// smc-tools' figures of one technology: the connections summary and the ratios.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// SMC connections + handshake errors + TCP fallbacks.
    pub total_connections: u64,
    /// Connections that ran over this technology (client + server, v1 + v2).
    pub smc_connections: u64,
    /// Handshake errors (client + server; the kernel counts them per namespace, not per technology).
    pub handshake_errors: u64,
    /// TCP fallbacks (client + server; per namespace).
    pub tcp_fallback: u64,
    /// (RX + TX requests) / SMC connections.
    pub avg_requests_per_connection: f64,
    /// Cork + nodelay + sendpage + splice + urgent data calls.
    pub special_socket_calls: u64,
}

/// The summary of `t` in sample `s`.
pub fn summary(t: &TechStats, s: &Sample) -> Summary {
    let smc = t.successes();
    let hs = s.stats.client_handshake_errors + s.stats.server_handshake_errors;
    let fb = s.fallback.client_total + s.fallback.server_total;
    Summary {
        total_connections: smc + hs + fb,
        smc_connections: smc,
        handshake_errors: hs,
        tcp_fallback: fb,
        avg_requests_per_connection: if smc == 0 {
            0.0
        } else {
            (t.rx_count + t.tx_count) as f64 / smc as f64
        },
        special_socket_calls: t.cork + t.nodelay + t.sendpage + t.splice + t.urgent_data,
    }
}

/// The histogram in smc-tools' eight columns: 8KB … 512KB and ">512KB" (1024K and above).
pub fn hist_columns(h: &SizeHistogram) -> [u64; 8] {
    [
        h.le_8k,
        h.le_16k,
        h.le_32k,
        h.le_64k,
        h.le_128k,
        h.le_256k,
        h.le_512k,
        h.le_1024k + h.gt_1024k,
    ]
}

/// The labels of [`hist_columns`], as smc-tools heads them.
pub const HIST_LABELS: [&str; 8] = [
    "8KB", "16KB", "32KB", "64KB", "128KB", "256KB", "512KB", ">512KB",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_counts_wrap_at_16_bits() {
        let a = [ReasonCount {
            code: 0x0301_0000,
            count: 65_530,
        }];
        let b = [
            ReasonCount {
                code: 0x0301_0000,
                count: 4,
            },
            ReasonCount {
                code: 0x0303_0000,
                count: 2,
            },
        ];
        let d = reasons_delta(&a, &b);
        assert_eq!(d[0].count, 10);
        assert_eq!(d[1].count, 2);
    }

    #[test]
    fn counters_that_went_down_count_zero() {
        let a = TechStats {
            rx_bytes: 100,
            ..TechStats::default()
        };
        let b = TechStats {
            rx_bytes: 40,
            rx_buffer_usage: Some(7),
            ..TechStats::default()
        };
        let d = tech_delta(&a, &b);
        assert_eq!(d.rx_bytes, 0);
        assert_eq!(d.rx_buffer_usage, Some(7));
    }
}
