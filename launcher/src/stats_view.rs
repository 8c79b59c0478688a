//! `smcrun stats [-m smcr|smcd] [-d] [--json] [--interval SEC]`: the kernel's SMC counters of this
//! network namespace in `smcr stats`' layout (connections summary, RX and TX stats with buffer and
//! request size histograms, special socket calls, and with `-d` the top fallback reasons per role).
//!
//! The kernel's counters cannot be reset. smc-tools emulates a reset with a cache file in /tmp;
//! here `--interval SEC` takes two samples SEC apart and shows what happened between them.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use smcrun_telemetry::reasons;
use smcrun_telemetry::smc_genl::{
    BufferStats, FallbackStats, ReasonCount, SizeHistogram, SmcGenl, Stats, TechStats,
};
use smcrun_telemetry::Error;

use crate::viewfmt::{self, percent, short, Align, Table};

/// Which SMC technology a view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Tech {
    /// SMC-R (RDMA).
    Smcr,
    /// SMC-D (shared memory).
    Smcd,
}

/// `smcrun stats` arguments.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Show only this technology (default: both).
    #[arg(short = 'm', long = "mode", value_enum)]
    mode: Option<Tech>,
    /// Details: buffer downgrades and reuses, the special calls one by one, and the top fallback
    /// reasons per role, decoded.
    #[arg(short = 'd', long = "details")]
    details: bool,
    /// Show what happened during SEC seconds (two samples) instead of the totals since the smc
    /// module was loaded.
    #[arg(long = "interval", value_name = "SEC", value_parser = viewfmt::seconds)]
    interval: Option<f64>,
    /// Print JSON (stable snake_case keys, see the README).
    #[arg(long)]
    json: bool,
}

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

const HIST_LABELS: [&str; 8] = [
    "8KB", "16KB", "32KB", "64KB", "128KB", "256KB", "512KB", ">512KB",
];

fn hist_json(h: &SizeHistogram) -> Value {
    let c = hist_columns(h);
    json!({
        "8k": c[0], "16k": c[1], "32k": c[2], "64k": c[3],
        "128k": c[4], "256k": c[5], "512k": c[6], "gt_512k": c[7],
    })
}

fn direction_json(
    bytes: u64,
    requests: u64,
    usage: Option<u64>,
    b: &BufferStats,
    bufs: &SizeHistogram,
    reqs: &SizeHistogram,
    tx: bool,
) -> Value {
    let mut v = json!({
        "bytes": bytes,
        "requests": requests,
        "buffer_usage": usage,
        "buffer_full": b.full,
        "buffer_full_pct": percent(b.full, requests),
        "buffer_downgrades": b.downgrade,
        "buffer_reuses": b.reuse,
        "buffer_allocs": b.alloc,
        "bufs": hist_json(bufs),
        "reqs": hist_json(reqs),
    });
    if tx {
        v["buffer_full_remote"] = json!(b.full_peer);
        v["buffer_full_remote_pct"] = json!(percent(b.full_peer, requests));
        v["buffer_too_small"] = json!(b.size_small);
        v["buffer_too_small_pct"] = json!(percent(b.size_small, requests));
        v["buffer_too_small_remote"] = json!(b.size_small_peer);
        v["buffer_too_small_remote_pct"] = json!(percent(b.size_small_peer, requests));
    }
    v
}

/// One technology's JSON: the summary counters under smc-tools' names (lower case; kept stable
/// since the first version), the typed counters under "detail", and the seed layout's figures
/// under "summary", "rx", "tx" and "special_socket_calls".
fn tech_json(t: &TechStats, s: &Sample) -> Value {
    let sum = summary(t, s);
    json!({
        "clnt_v1_succ_cnt": t.client_v1_success,
        "clnt_v2_succ_cnt": t.client_v2_success,
        "srv_v1_succ_cnt": t.server_v1_success,
        "srv_v2_succ_cnt": t.server_v2_success,
        "succ_cnt": t.successes(),
        "rx_bytes": t.rx_bytes,
        "tx_bytes": t.tx_bytes,
        "rx_cnt": t.rx_count,
        "tx_cnt": t.tx_count,
        "detail": t,
        "summary": {
            "total_connections": sum.total_connections,
            "smc_connections": sum.smc_connections,
            "handshake_errors": sum.handshake_errors,
            "tcp_fallback": sum.tcp_fallback,
            "avg_requests_per_connection": sum.avg_requests_per_connection,
        },
        "rx": direction_json(t.rx_bytes, t.rx_count, t.rx_buffer_usage, &t.rx_buffers,
            &t.rx_buffer_sizes, &t.rx_payload_sizes, false),
        "tx": direction_json(t.tx_bytes, t.tx_count, t.tx_buffer_usage, &t.tx_buffers,
            &t.tx_buffer_sizes, &t.tx_payload_sizes, true),
        "special_socket_calls": sum.special_socket_calls,
    })
}

/// A reason code with its decoding, as every view prints it in JSON.
pub fn reason_json(code: u32) -> Value {
    let r = reasons::describe(code);
    json!({
        "code": code,
        "hex": format!("0x{code:08x}"),
        "name": r.name,
        "description": r.description,
        "category": r.category,
    })
}

fn reasons_json(list: &[ReasonCount]) -> Vec<Value> {
    sorted_reasons(list)
        .into_iter()
        .map(|rc| {
            let mut v = reason_json(rc.code);
            v["count"] = json!(rc.count);
            v
        })
        .collect()
}

/// Reasons with a count, most frequent first (ties by code).
fn sorted_reasons(list: &[ReasonCount]) -> Vec<&ReasonCount> {
    let mut sorted: Vec<&ReasonCount> = list.iter().filter(|r| r.count > 0).collect();
    sorted.sort_by_key(|r| (std::cmp::Reverse(r.count), r.code));
    sorted
}

/// The JSON of a sample; `interval` is the seconds between the two samples of a delta.
pub fn stats_json(s: &Sample, interval: Option<f64>) -> Value {
    json!({
        "interval_seconds": interval,
        "smcr": tech_json(&s.stats.smcr, s),
        "smcd": tech_json(&s.stats.smcd, s),
        "clnt_hs_err_cnt": s.stats.client_handshake_errors,
        "srv_hs_err_cnt": s.stats.server_handshake_errors,
        "fallback": {
            "clnt_cnt": s.fallback.client_total,
            "srv_cnt": s.fallback.server_total,
            "clnt_reasons": reasons_json(&s.fallback.client),
            "srv_reasons": reasons_json(&s.fallback.server),
        },
    })
}

fn line(label: &str, value: String) -> String {
    format!("  {label:<28} {value}")
}

fn counted(v: u64) -> String {
    format!("{v:>12} ({})", short(v))
}

fn ratio(v: u64, of: u64) -> String {
    format!("{v:>12} ({:.2}%)", percent(v, of))
}

fn hist_table(bufs: &SizeHistogram, reqs: &SizeHistogram) -> Vec<String> {
    let mut cols = vec![("", Align::Left)];
    cols.extend(HIST_LABELS.iter().map(|l| (*l, Align::Right)));
    let mut t = Table::new(&cols);
    for (name, h) in [("Bufs", bufs), ("Reqs", reqs)] {
        let mut row = vec![name.to_string()];
        row.extend(hist_columns(h).iter().map(|v| short(*v)));
        t.row(row);
    }
    t.render().into_iter().map(|l| format!("  {l}")).collect()
}

/// The RX or TX block: bytes, requests, buffer usage and ratios, the histograms.
fn direction_text(title: &str, t: &TechStats, tx: bool, details: bool) -> Vec<String> {
    let (bytes, requests, usage, b, bufs, reqs) = if tx {
        (
            t.tx_bytes,
            t.tx_count,
            t.tx_buffer_usage,
            &t.tx_buffers,
            &t.tx_buffer_sizes,
            &t.tx_payload_sizes,
        )
    } else {
        (
            t.rx_bytes,
            t.rx_count,
            t.rx_buffer_usage,
            &t.rx_buffers,
            &t.rx_buffer_sizes,
            &t.rx_payload_sizes,
        )
    };
    let mut out = vec![
        format!("{title} Stats"),
        line("Data transmitted (Bytes)", counted(bytes)),
        line("Total requests", format!("{requests:>12}")),
        line(
            "Buffer usage (Bytes)",
            match usage {
                Some(v) => counted(v),
                None => format!("{:>12}", "-  (not reported by this kernel)"),
            },
        ),
        line("Buffer full", ratio(b.full, requests)),
    ];
    if tx {
        for (label, v) in [
            ("Buffer full (remote)", b.full_peer),
            ("Buffer too small", b.size_small),
            ("Buffer too small (remote)", b.size_small_peer),
        ] {
            out.push(line(label, ratio(v, requests)));
        }
    }
    if details {
        out.push(line("Buffer downgrades", format!("{:>12}", b.downgrade)));
        out.push(line("Buffer reuses", format!("{:>12}", b.reuse)));
    }
    out.extend(hist_table(bufs, reqs));
    out
}

/// The text of one technology in `smcr stats`' layout.
pub fn tech_text(title: &str, t: &TechStats, s: &Sample, details: bool) -> Vec<String> {
    let sum = summary(t, s);
    let mut out = vec![
        format!("{title} Connections Summary"),
        line(
            "Total connections handled",
            format!("{:>12}", sum.total_connections),
        ),
        line("SMC connections", format!("{:>12}", sum.smc_connections)),
        line("Handshake errors", format!("{:>12}", sum.handshake_errors)),
        line(
            "Avg requests per SMC conn",
            format!("{:>12.1}", sum.avg_requests_per_connection),
        ),
        line("TCP fallback", format!("{:>12}", sum.tcp_fallback)),
        String::new(),
    ];
    out.extend(direction_text("RX", t, false, details));
    out.push(String::new());
    out.extend(direction_text("TX", t, true, details));
    out.push(String::new());
    out.push("Extras".to_string());
    out.push(line(
        "Special socket calls",
        format!("{:>12}", sum.special_socket_calls),
    ));
    if details {
        for (name, v) in [
            ("cork", t.cork),
            ("nodelay", t.nodelay),
            ("sendpage", t.sendpage),
            ("splice", t.splice),
            ("urgent data", t.urgent_data),
        ] {
            out.push(line(&format!("  {name}"), format!("{v:>12}")));
        }
    }
    out
}

/// How many reasons `-d` lists per role.
const TOP_REASONS: usize = 5;

/// `-d`'s fallback section: per role the most frequent reasons, decoded.
pub fn reasons_text(f: &FallbackStats) -> Vec<String> {
    let mut out = vec!["TCP Fallback Reasons".to_string()];
    for (role, total, list) in [
        ("Server", f.server_total, &f.server),
        ("Client", f.client_total, &f.client),
    ] {
        out.push(format!("  {role} fallbacks {total}"));
        let sorted = sorted_reasons(list);
        if sorted.is_empty() {
            out.push("    (none recorded)".to_string());
        }
        for rc in sorted.iter().take(TOP_REASONS) {
            let r = reasons::describe(rc.code);
            out.push(format!(
                "    {:>8}  0x{:08x} {}: {}",
                rc.count, rc.code, r.name, r.description
            ));
        }
        if sorted.len() > TOP_REASONS {
            out.push(format!(
                "    ... and {} more reasons",
                sorted.len() - TOP_REASONS
            ));
        }
    }
    out
}

/// Run `smcrun stats`.
pub fn stats(a: &StatsArgs) -> ExitCode {
    let client = match SmcGenl::open() {
        Ok(c) => c,
        Err(e) => return viewfmt::refused(&e),
    };
    let first = match sample(&client) {
        Ok(s) => s,
        Err(e) => return viewfmt::refused(&e),
    };
    let shown = match a.interval {
        None => first,
        Some(sec) => {
            std::thread::sleep(Duration::from_secs_f64(sec));
            match sample(&client) {
                Ok(second) => delta(&first, &second),
                Err(e) => return viewfmt::refused(&e),
            }
        }
    };
    if a.json {
        return viewfmt::print_json(&stats_json(&shown, a.interval));
    }
    let mut lines = vec![match a.interval {
        Some(sec) => format!("SMC statistics of this network namespace during the last {sec} s"),
        None => "SMC statistics of this network namespace (since the smc module was loaded)".into(),
    }];
    for (tech, title, t) in [
        (Tech::Smcr, "SMC-R", &shown.stats.smcr),
        (Tech::Smcd, "SMC-D", &shown.stats.smcd),
    ] {
        if a.mode.is_none_or(|m| m == tech) {
            lines.push(String::new());
            lines.extend(tech_text(title, t, &shown, a.details));
        }
    }
    if a.details {
        lines.push(String::new());
        lines.extend(reasons_text(&shown.fallback));
    }
    viewfmt::print_lines(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_telemetry::smc_genl::{parse_fallback_stats, parse_stats};

    use crate::viewfmt::fixture;

    fn captured(phase: &str) -> Sample {
        Sample {
            stats: parse_stats(&fixture(phase, "smc_GET_STATS")).unwrap(),
            fallback: parse_fallback_stats(&fixture(phase, "smc_GET_FBACK_STATS")).unwrap(),
        }
    }

    #[test]
    fn captured_smcd_traffic() {
        // the SMC-D kernel after redis traffic over loopback-ism (telemetry/tests/fixtures/smcd)
        let s = captured("smcd");
        let d = &s.stats.smcd;
        assert!(d.client_v2_success >= 2 && d.server_v2_success >= 2 && d.rx_bytes > 0);
        assert_eq!(s.stats.smcr.successes(), 0);
        let text = tech_text("SMC-D", d, &s, false).join("\n");
        assert!(text.starts_with("SMC-D Connections Summary"), "{text}");
        let conns = text
            .lines()
            .find(|l| l.trim_start().starts_with("SMC connections"))
            .and_then(|l| l.split_whitespace().last().map(String::from));
        assert_eq!(conns, Some(d.successes().to_string()), "{text}");
        let j = stats_json(&s, None);
        assert_eq!(j["smcd"]["summary"]["smc_connections"], d.successes());
        assert_eq!(j["smcd"]["rx"]["bytes"], d.rx_bytes);
        assert_eq!(j["smcr"]["succ_cnt"], 0);
    }

    #[test]
    fn captured_smcr_traffic_in_the_seed_layout() {
        let s = captured("smcr");
        let t = &s.stats.smcr;
        assert!(t.successes() > 0 && t.rx_bytes > 0 && t.tx_bytes > 0);
        let sum = summary(t, &s);
        assert_eq!(
            sum.total_connections,
            sum.smc_connections + sum.handshake_errors + sum.tcp_fallback
        );
        let want_avg = (t.rx_count + t.tx_count) as f64 / t.successes() as f64;
        assert!((sum.avg_requests_per_connection - want_avg).abs() < 1e-9);
        let text = tech_text("SMC-R", t, &s, true).join("\n");
        assert!(text.starts_with("SMC-R Connections Summary"), "{text}");
        let value_of = |label: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(label))
                .and_then(|l| l[label.len() + 2..].split_whitespace().next())
                .map(String::from)
        };
        assert_eq!(value_of("SMC connections"), Some(t.successes().to_string()));
        assert_eq!(value_of("Total requests"), Some(t.rx_count.to_string()));
        assert!(
            text.contains(&format!("{} ({})", t.rx_bytes, short(t.rx_bytes))),
            "{text}"
        );
        assert!(text.contains("Buffer too small (remote)"), "{text}");
        // Debian's 6.12 has the buffer usage counters (4 open sockets' 64 KiB buffers).
        let usage = t.rx_buffer_usage.expect("6.12.117 reports RX buffer usage");
        assert!(
            text.contains(&format!("{usage} ({})", short(usage))),
            "{text}"
        );
        assert!(!text.contains("not reported by this kernel"), "{text}");
        let older = TechStats {
            rx_buffer_usage: None,
            ..*t
        };
        let text = tech_text("SMC-R", &older, &s, false).join("\n");
        assert!(text.contains("not reported by this kernel"), "{text}");
        // The histogram rows add up to the kernel's bucket counts.
        let bufs: u64 = hist_columns(&t.rx_buffer_sizes).iter().sum();
        assert!(bufs > 0);
        let j = stats_json(&s, None);
        assert_eq!(j["smcr"]["summary"]["smc_connections"], t.successes());
        assert_eq!(j["smcr"]["rx"]["bytes"], t.rx_bytes);
        assert_eq!(j["smcr"]["rx"]["requests"], t.rx_count);
        let hist_sum: u64 = ["8k", "16k", "32k", "64k", "128k", "256k", "512k", "gt_512k"]
            .iter()
            .map(|k| j["smcr"]["rx"]["bufs"][k].as_u64().unwrap())
            .sum();
        assert_eq!(hist_sum, bufs);
        assert_eq!(j["smcr"]["succ_cnt"], t.successes());
        assert!(j["interval_seconds"].is_null());
        assert!(j["smcr"]["tx"].get("buffer_too_small_remote").is_some());
        assert!(j["smcr"]["rx"].get("buffer_too_small_remote").is_none());
    }

    #[test]
    fn captured_fallbacks_are_decoded_most_frequent_first() {
        let s = captured("fallback");
        assert!(s.fallback.client_total >= 1 && s.fallback.server_total >= 2);
        let text = reasons_text(&s.fallback).join("\n");
        assert!(text.contains("0x03030000 NOSMCDEV"), "{text}");
        assert!(text.contains("0x03010000 PEERNOSMC"), "{text}");
        assert!(text.contains("0x05000000 PEERDECL"), "{text}");
        let j = stats_json(&s, None);
        let srv = j["fallback"]["srv_reasons"].as_array().unwrap();
        let counts: Vec<u64> = srv.iter().map(|r| r["count"].as_u64().unwrap()).collect();
        assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
        assert_eq!(j["fallback"]["clnt_cnt"], s.fallback.client_total);
    }

    #[test]
    fn deltas_between_the_two_captures() {
        // The fallback capture was taken after the smcr one on the same kernel.
        let a = captured("smcr");
        let b = captured("fallback");
        let d = delta(&a, &b);
        assert_eq!(
            d.fallback.client_total,
            b.fallback.client_total - a.fallback.client_total
        );
        assert_eq!(
            d.stats.smcr.rx_bytes,
            b.stats.smcr.rx_bytes - a.stats.smcr.rx_bytes
        );
        // Nothing happened between a sample and itself.
        let z = delta(&b, &b);
        assert_eq!(z.stats.smcr.successes(), 0);
        assert_eq!(z.stats.smcr.rx_bytes, 0);
        assert!(z.fallback.client.is_empty() && z.fallback.server.is_empty());
        let j = stats_json(&z, Some(1.0));
        assert_eq!(j["interval_seconds"], 1.0);
        assert_eq!(j["smcr"]["summary"]["total_connections"], 0);
    }

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
