//! `smcrun stats`' text, in `smcr stats`' layout: per technology the connections summary, the RX
//! and TX blocks with their histograms and the special calls; with `-d` the top fallback reasons.

use smcrun_kernel::smc_genl::{FallbackStats, TechStats};

use super::json::{Direction, Histogram};
use crate::counters::{summary, Sample, HIST_LABELS};
use crate::json::reason::most_frequent_first;
use crate::text::{short, Align, Table};

/// One labelled value, in `smcr stats`' columns.
fn line(label: &str, value: String) -> String {
    format!("  {label:<28} {value}")
}

/// A counter with its short form: `    200705600 (200.7M)`.
fn counted(v: u64) -> String {
    format!("{v:>12} ({})", short(v))
}

/// The buffer and request size histograms, one row each.
fn hist_table(bufs: &Histogram, reqs: &Histogram) -> Vec<String> {
    let mut cols = vec![("", Align::Left)];
    cols.extend(HIST_LABELS.iter().map(|l| (*l, Align::Right)));
    let mut t = Table::new(&cols);
    for (name, h) in [("Bufs", bufs), ("Reqs", reqs)] {
        let mut row = vec![name.to_string()];
        row.extend(h.columns().iter().map(|v| short(*v)));
        t.row(row);
    }
    t.render().into_iter().map(|l| format!("  {l}")).collect()
}

/// The RX or TX block: bytes, requests, buffer usage and ratios, the histograms.
fn direction_text(title: &str, d: &Direction, details: bool) -> Vec<String> {
    let pct = |v: u64, p: f64| format!("{v:>12} ({p:.2}%)");
    let mut out = vec![
        format!("{title} Stats"),
        line("Data transmitted (Bytes)", counted(d.bytes)),
        line("Total requests", format!("{:>12}", d.requests)),
        line(
            "Buffer usage (Bytes)",
            match d.buffer_usage {
                Some(v) => counted(v),
                None => format!("{:>12}", "-  (not reported by this kernel)"),
            },
        ),
        line("Buffer full", pct(d.buffer_full, d.buffer_full_pct)),
    ];
    if let Some(x) = &d.tx_only {
        for (label, v, p) in [
            (
                "Buffer full (remote)",
                x.buffer_full_remote,
                x.buffer_full_remote_pct,
            ),
            (
                "Buffer too small",
                x.buffer_too_small,
                x.buffer_too_small_pct,
            ),
            (
                "Buffer too small (remote)",
                x.buffer_too_small_remote,
                x.buffer_too_small_remote_pct,
            ),
        ] {
            out.push(line(label, pct(v, p)));
        }
    }
    if details {
        out.push(line(
            "Buffer downgrades",
            format!("{:>12}", d.buffer_downgrades),
        ));
        out.push(line("Buffer reuses", format!("{:>12}", d.buffer_reuses)));
    }
    out.extend(hist_table(&d.bufs, &d.reqs));
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
    out.extend(direction_text("RX", &Direction::rx(t), details));
    out.push(String::new());
    out.extend(direction_text("TX", &Direction::tx(t), details));
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
        let sorted = most_frequent_first(list);
        if sorted.is_empty() {
            out.push("    (none recorded)".to_string());
        }
        for rc in sorted.iter().take(TOP_REASONS) {
            let r = &rc.reason;
            out.push(format!(
                "    {:>8}  {} {}: {}",
                rc.count, r.hex, r.name, r.description
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

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::smc_genl::{parse_fallback_stats, parse_stats};

    use crate::counters::{delta, hist_columns};
    use crate::stats::json::StatsView;

    fn fixture(phase: &str, name: &str) -> Vec<u8> {
        crate::fixtures::raw(phase, name)
    }

    fn json_of(s: &Sample, interval: Option<f64>) -> serde_json::Value {
        serde_json::to_value(StatsView::new(s, interval)).unwrap()
    }

    fn captured(phase: &str) -> Sample {
        Sample {
            stats: parse_stats(&fixture(phase, "smc_GET_STATS")).unwrap(),
            fallback: parse_fallback_stats(&fixture(phase, "smc_GET_FBACK_STATS")).unwrap(),
        }
    }

    #[test]
    fn captured_smcd_traffic() {
        // the SMC-D kernel after redis traffic over loopback-ism (kernel/tests/fixtures/smcd)
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
        let j = json_of(&s, None);
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
        let j = json_of(&s, None);
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
        let j = json_of(&s, None);
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
        let j = json_of(&z, Some(1.0));
        assert_eq!(j["interval_seconds"], 1.0);
        assert_eq!(j["smcr"]["summary"]["total_connections"], 0);
    }
}
