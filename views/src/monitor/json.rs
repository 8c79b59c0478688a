//! `smcrun monitor --json`: one object per interval, like smc_monitor_ex's line. A figure the
//! view does not show in this mode (`--view speed` has no connections) or the kernel did not
//! give is left out of the line, so that a consumer tells "not measured" from 0.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{Line, MonMode};

/// One monitor line. The VM's guest checks (`tests/vm/check`) read the lines back.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MonitorLine<'a> {
    /// Local time, "YYYY-MM-DD HH:MM:SS".
    pub date: Cow<'a, str>,
    /// What the line counts: smcr, smcd, smc (both) or fallback.
    pub mode: Cow<'a, str>,
    /// The interval asked for, in seconds.
    pub interval_seconds: f64,
    /// Bytes received per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_rate_bytes_per_sec: Option<f64>,
    /// Receive requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_requests_per_sec: Option<f64>,
    /// Bytes sent per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_rate_bytes_per_sec: Option<f64>,
    /// Send requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_requests_per_sec: Option<f64>,
    /// Open connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conns: Option<u64>,
    /// The buffers in use, when both directions are known.
    #[serde(flatten)]
    pub bufs: Option<Buffers>,
}

/// The memory of the connections' buffers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Buffers {
    /// Receive buffers (RMBs / DMBs) in use, bytes.
    pub rx_bufs_bytes: u64,
    /// Send buffers in use, bytes.
    pub tx_bufs_bytes: u64,
    /// Where the figures come from: "kernel" (its usage counters) or "sockets" (summed from
    /// sock_diag on kernels without them); null when neither said.
    pub bufs_source: Option<Cow<'static, str>>,
}

/// One JSON line.
pub fn line_json<'a>(mode: MonMode, date: &'a str, interval: f64, l: &Line) -> MonitorLine<'a> {
    let bufs = match (l.rx_bufs, l.tx_bufs) {
        (Some(rx), Some(tx)) => Some(Buffers {
            rx_bufs_bytes: rx,
            tx_bufs_bytes: tx,
            bufs_source: l.bufs_source.map(Cow::Borrowed),
        }),
        _ => None,
    };
    MonitorLine {
        date: date.into(),
        mode: mode.name().into(),
        interval_seconds: interval,
        rx_rate_bytes_per_sec: l.rx_rate,
        rx_requests_per_sec: l.rx_rps,
        tx_rate_bytes_per_sec: l.tx_rate,
        tx_requests_per_sec: l.tx_rps,
        conns: l.conns,
        bufs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bufs: Option<Buffers>) -> MonitorLine<'static> {
        MonitorLine {
            date: "2026-12-01 12:00:00".into(),
            mode: "smcr".into(),
            interval_seconds: 1.0,
            rx_rate_bytes_per_sec: Some(2048.0),
            rx_requests_per_sec: None,
            tx_rate_bytes_per_sec: Some(0.0),
            tx_requests_per_sec: None,
            conns: Some(4),
            bufs,
        }
    }

    /// Figures not measured are left out; the buffers come as three keys or none.
    #[test]
    fn unmeasured_figures_are_left_out() {
        let v = serde_json::to_value(line(None)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "date": "2026-12-01 12:00:00", "mode": "smcr", "interval_seconds": 1.0,
                "rx_rate_bytes_per_sec": 2048.0, "tx_rate_bytes_per_sec": 0.0, "conns": 4
            })
        );
        let b = Buffers {
            rx_bufs_bytes: 65536,
            tx_bufs_bytes: 16384,
            bufs_source: Some("kernel".into()),
        };
        let v = serde_json::to_value(line(Some(b))).unwrap();
        assert_eq!(v["rx_bufs_bytes"], 65536);
        assert_eq!(v["tx_bufs_bytes"], 16384);
        assert_eq!(v["bufs_source"], "kernel");
        assert_eq!(v.as_object().unwrap().len(), 9);
    }

    /// A line reads back as printed, with and without its buffers.
    #[test]
    fn lines_read_back() {
        let b = Buffers {
            rx_bufs_bytes: 65536,
            tx_bufs_bytes: 16384,
            bufs_source: Some("sockets".into()),
        };
        for l in [line(None), line(Some(b))] {
            crate::json::golden::assert_round_trips("monitor line", &l);
        }
    }
}
