//! Doctor's checks of the live counters. They follow the SMC monitoring guide: a high rx
//! buffer-full ratio means the program reads too slowly or net.smc.rmem is too small; tx
//! buffer-full or too-small means net.smc.wmem; the remote variants the peer's net.smc.rmem;
//! fallbacks by reason with what to do for the most frequent one. Each shows the ratio, the
//! threshold ([`super::advice`]'s) and the sysctl to change.

use smcrun_kernel::reasons;
use smcrun_kernel::smc_genl::TechStats;

use super::advice::{self, BUFFER_RATIO_WARN, FALLBACK_RATIO_WARN};
use super::{skip_or_failed, Check, Host, Status};
use crate::snapshot::Counters;

fn sysctl_value<'a>(h: &'a Host, name: &str) -> Option<&'a str> {
    h.sysctls
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}
fn pct(r: f64) -> String {
    format!("{:.2}%", r * 100.0)
}

/// The buffer checks of one technology that saw traffic: each a warning with its advice above
/// the threshold, else a pass with the same figures.
fn buffers(tech: &str, t: &TechStats, h: &Host) -> Vec<Check> {
    let cur = |k: &str| sysctl_value(h, k).map_or_else(|| "?".to_string(), String::from);
    let ratio = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let th = pct(BUFFER_RATIO_WARN);
    let row = |id: &str, worst: f64, detail: String, advice: String| {
        let warn = worst > BUFFER_RATIO_WARN;
        Check::new(
            format!("{id}:{tech}"),
            if warn { Status::Warn } else { Status::Pass },
            detail,
            if warn { advice } else { String::new() },
        )
    };
    let rx = ratio(t.rx_buffers.full, t.rx_count);
    let full = ratio(t.tx_buffers.full, t.tx_count);
    let small = ratio(t.tx_buffers.size_small, t.tx_count);
    let rfull = ratio(t.tx_buffers.full_peer, t.tx_count);
    let rsmall = ratio(t.tx_buffers.size_small_peer, t.tx_count);
    vec![
        row(
            "rx-buffer-full",
            rx,
            format!(
                "receive buffer full {} times in {} receive requests: {} (threshold {th})",
                t.rx_buffers.full,
                t.rx_count,
                pct(rx)
            ),
            format!("the programs read too slowly, or net.smc.rmem (now {}) is too small: raise it (`smcrun --sysctl net.smc.rmem=N`, for new connections)", cur("rmem")),
        ),
        row(
            "tx-buffer",
            full.max(small),
            format!(
                "send buffer full in {}, too small in {} of {} send requests (threshold {th})",
                pct(full),
                pct(small),
                t.tx_count
            ),
            format!("raise net.smc.wmem (now {}): `smcrun --sysctl net.smc.wmem=N` (new connections)", cur("wmem")),
        ),
        row(
            "peer-buffer",
            rfull.max(rsmall),
            format!(
                "the peer's receive buffer was full in {}, too small in {} of {} send requests (threshold {th})",
                pct(rfull),
                pct(rsmall),
                t.tx_count
            ),
            "raise net.smc.rmem on the peers (or make them read faster)".to_string(),
        ),
    ]
}

fn fallbacks(c: &Counters) -> Check {
    let smc = c.stats.smcr.successes() + c.stats.smcd.successes();
    let hs = c.stats.client_handshake_errors + c.stats.server_handshake_errors;
    let fb = c.fallback.client_total + c.fallback.server_total;
    let total = smc + hs + fb;
    let ratio = if total == 0 {
        0.0
    } else {
        fb as f64 / total as f64
    };
    let mut by_reason: Vec<(u32, u64)> = Vec::new();
    for r in c.fallback.client.iter().chain(&c.fallback.server) {
        match by_reason.iter_mut().find(|x| x.0 == r.code) {
            Some(x) => x.1 += u64::from(r.count),
            None => by_reason.push((r.code, u64::from(r.count))),
        }
    }
    by_reason.retain(|r| r.1 > 0);
    by_reason.sort_by_key(|r| (std::cmp::Reverse(r.1), r.0));
    let top = by_reason
        .iter()
        .take(3)
        .map(|(code, n)| format!("{n}× 0x{code:08x} {}", reasons::describe(*code).name))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = format!(
        "{fb} of {total} connections fell back to TCP ({}; threshold {}){}{}",
        pct(ratio),
        pct(FALLBACK_RATIO_WARN),
        if top.is_empty() {
            String::new()
        } else {
            format!(": {top}")
        },
        if hs > 0 {
            format!("; {hs} handshake errors")
        } else {
            String::new()
        }
    );
    if ratio <= FALLBACK_RATIO_WARN {
        return Check::new("fallbacks", Status::Pass, detail, "");
    }
    let advice = match by_reason.first() {
        Some((code, _)) => {
            let r = reasons::describe(*code);
            match advice::fallback(*code) {
                Some(a) => format!("{} ({}): {a}", r.name, r.description),
                None => format!(
                    "{} ({}): see `smcrun ss -a` for the connections",
                    r.name, r.description
                ),
            }
        }
        None => "the per-reason counts are empty: see `smcrun ss -a` for the connections".into(),
    };
    Check::new("fallbacks", Status::Warn, detail, advice)
}
/// The counters' checks: the buffer ratios of each technology that saw traffic (or one
/// `traffic` row), then the fallbacks.
pub(super) fn checks(h: &Host) -> Vec<Check> {
    let Some(c) = h.counters.get() else {
        return vec![skip_or_failed("traffic", &h.counters)];
    };
    let mut out = Vec::new();
    for (tech, t) in [("smcr", &c.stats.smcr), ("smcd", &c.stats.smcd)] {
        if t.rx_count + t.tx_count > 0 {
            out.extend(buffers(tech, t, h));
        }
    }
    if out.is_empty() {
        out.push(Check::new(
            "traffic",
            Status::Pass,
            "no SMC traffic since the smc module was loaded: no buffer ratios to judge yet",
            "",
        ));
    }
    out.push(fallbacks(c));
    out
}

#[cfg(test)]
mod tests {
    use super::super::checks;
    use super::super::tests::{by_id, vm_host};
    use super::*;
    use crate::snapshot::Part;

    #[test]
    fn fallbacks_above_the_threshold_name_the_reason_and_what_to_do() {
        let h = vm_host("fallback");
        let c = checks(&h);
        let f = by_id(&c, "fallbacks");
        let counters = h.counters.get().unwrap();
        let fb = counters.fallback.client_total + counters.fallback.server_total;
        assert!(f.detail.starts_with(&format!("{fb} of ")), "{f:?}");
        assert!(f.detail.contains("threshold 10.00%"), "{f:?}");
        assert!(
            f.detail.contains("0x03030000 NOSMCDEV") || f.detail.contains("0x03010000 PEERNOSMC"),
            "{f:?}"
        );
        // The capture: 18 SMC-R connections, then the fallbacks. Warn only above 10%.
        let total = counters.stats.smcr.successes() + fb;
        if fb as f64 / total as f64 > FALLBACK_RATIO_WARN {
            assert_eq!(f.status, Status::Warn);
            assert!(!f.advice.is_empty());
        } else {
            assert_eq!(f.status, Status::Pass);
        }
        let mut many = counters.clone();
        many.fallback.server_total += 1000;
        many.fallback.server[0].count += 1000;
        let f = fallbacks(&many);
        assert_eq!(f.status, Status::Warn);
        let top = many.fallback.server[0].code;
        assert!(f.advice.starts_with(&*reasons::describe(top).name), "{f:?}");
    }

    #[test]
    fn buffer_ratios_show_ratio_threshold_and_sysctl() {
        let mut h = vm_host("smcr");
        let (mut t_rx_full, mut t_rx) = (0, 1);
        if let Part::Read(c) = &mut h.counters {
            let t = &mut c.stats.smcr;
            t.rx_buffers.full = t.rx_count / 5;
            (t_rx_full, t_rx) = (t.rx_buffers.full, t.rx_count);
            t.tx_buffers.size_small = t.tx_count / 4;
            t.tx_buffers.full_peer = t.tx_count / 2;
        }
        let c = checks(&h);
        let rx = by_id(&c, "rx-buffer-full:smcr");
        assert_eq!(rx.status, Status::Warn);
        let want = format!(
            "{:.2}% (threshold 5.00%)",
            (t_rx_full as f64) * 100.0 / t_rx as f64
        );
        assert!(rx.detail.ends_with(&want), "{rx:?}");
        assert!(rx.advice.contains("net.smc.rmem (now 131072)"), "{rx:?}");
        let tx = by_id(&c, "tx-buffer:smcr");
        assert_eq!(tx.status, Status::Warn);
        assert!(tx.advice.contains("net.smc.wmem (now 262144)"), "{tx:?}");
        let peer = by_id(&c, "peer-buffer:smcr");
        assert!(
            peer.status == Status::Warn && peer.advice.contains("on the peers"),
            "{peer:?}"
        );
    }
}
