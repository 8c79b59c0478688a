//! The kernel's SMC counters as an operator reads them: one sample of a network namespace's
//! counters, the growth between two samples (the kernel's counters cannot be reset; smc-tools
//! emulates a reset with a cache file, `smcrun stats --interval` takes two samples), and
//! smc-tools' summary figures.

use smcrun_kernel::smc_genl::{
    FallbackStats, ReasonCount, SizeHistogram, SmcGenl, Stats, TechStats,
};
use smcrun_kernel::Error;

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

/// What counter `b` grew by since `a`: 0 if it went down.
fn grew(a: u64, b: u64) -> u64 {
    b.saturating_sub(a)
}

/// What the counters of `b` grew by since `a`; the buffer usage gauges are `b`'s. A counter that
/// went down (the module was reloaded in between) counts 0.
pub fn tech_delta(a: &TechStats, b: &TechStats) -> TechStats {
    TechStats {
        tx_buffer_sizes: a.tx_buffer_sizes.map2(&b.tx_buffer_sizes, grew),
        rx_buffer_sizes: a.rx_buffer_sizes.map2(&b.rx_buffer_sizes, grew),
        tx_payload_sizes: a.tx_payload_sizes.map2(&b.tx_payload_sizes, grew),
        rx_payload_sizes: a.rx_payload_sizes.map2(&b.rx_payload_sizes, grew),
        tx_buffers: a.tx_buffers.map2(&b.tx_buffers, grew),
        rx_buffers: a.rx_buffers.map2(&b.rx_buffers, grew),
        client_v1_success: grew(a.client_v1_success, b.client_v1_success),
        client_v2_success: grew(a.client_v2_success, b.client_v2_success),
        server_v1_success: grew(a.server_v1_success, b.server_v1_success),
        server_v2_success: grew(a.server_v2_success, b.server_v2_success),
        sendpage: grew(a.sendpage, b.sendpage),
        splice: grew(a.splice, b.splice),
        cork: grew(a.cork, b.cork),
        nodelay: grew(a.nodelay, b.nodelay),
        urgent_data: grew(a.urgent_data, b.urgent_data),
        rx_bytes: grew(a.rx_bytes, b.rx_bytes),
        tx_bytes: grew(a.tx_bytes, b.tx_bytes),
        rx_count: grew(a.rx_count, b.rx_count),
        tx_count: grew(a.tx_count, b.tx_count),
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
            client_handshake_errors: grew(
                a.stats.client_handshake_errors,
                b.stats.client_handshake_errors,
            ),
            server_handshake_errors: grew(
                a.stats.server_handshake_errors,
                b.stats.server_handshake_errors,
            ),
        },
        fallback: FallbackStats {
            server_total: grew(a.fallback.server_total, b.fallback.server_total),
            client_total: grew(a.fallback.client_total, b.fallback.client_total),
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
    let [c8, c16, c32, c64, c128, c256, c512, c1024, above] = h.counts();
    [c8, c16, c32, c64, c128, c256, c512, c1024 + above]
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
