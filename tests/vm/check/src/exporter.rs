//! The exporter's questions: does a saved scrape (`GET /metrics`) say what the views say, read
//! from their saved `--json` (stats, ps, linkgroup, rdma) at the same moment.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_report::ConnectionCounts;
use smcrun_views::linkgroup::json::LinkGroupsView;
use smcrun_views::ps::json::PsEntry;
use smcrun_views::rdma::json::RdmaView;
use smcrun_views::stats::json::StatsView;

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// Every counter of SCRAPE equals STATS' (a `smcrun stats --json` taken before and after the
    /// scrape, unchanged), the server fallback reasons' included.
    ExporterStats { stats: String, scrape: String },
    /// SCRAPE's per-process series equal the reports of PS (`smcrun ps --json` saved after it):
    /// each running program's connections by mode, and how many run.
    ExporterPs { ps: String, scrape: String },
    /// SCRAPE's link groups and links equal LINKGROUP's (`smcrun linkgroup --json`): the
    /// connections in SMC-R link groups (MIN or more) and the active links.
    ExporterLinkgroup {
        linkgroup: String,
        scrape: String,
        min: u64,
    },
    /// SCRAPE's RDMA resources of DEVICE (QPs, MRs, PDs, CQs; used and maximum) equal RDMA's
    /// (`smcrun rdma --json`).
    ExporterRdma {
        rdma: String,
        scrape: String,
        device: String,
    },
}

/// A saved scrape: its sample lines (`name{labels} value`), comments left out.
struct Scrape(Vec<(String, f64)>);

impl Scrape {
    fn read(path: &str) -> Result<Scrape, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                Some((series.to_string(), v.parse().ok()?))
            })
            .collect();
        Ok(Scrape(samples))
    }

    /// The value of exactly `series` (`name{labels}` as the exporter writes it).
    fn value(&self, series: &str) -> Option<f64> {
        self.0.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
    }

    /// The sum of family `name`'s samples whose labels contain `labels`; none without one.
    fn sum(&self, name: &str, labels: &str) -> Option<f64> {
        let found: Vec<f64> = self
            .0
            .iter()
            .filter(|(s, _)| {
                s.strip_prefix(name)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
                    && s.contains(labels)
            })
            .map(|(_, v)| *v)
            .collect();
        (!found.is_empty()).then(|| found.iter().sum())
    }
}

/// A scrape's number as a message shows it.
fn shown(v: Option<f64>) -> String {
    v.map_or("missing".into(), |v| v.to_string())
}

/// The series of a scrape and the `smcrun stats --json` counter that must hold the same number
/// (`None`: the exporter must not serve it).
type Pair = (&'static str, &'static str, fn(&StatsView) -> Option<u64>);

#[rustfmt::skip]
const PAIRS: [Pair; 21] = [
    (r#"smc_connections_total{technology="smcr",role="client",version="v1"}"#, "smcr.clnt_v1_succ_cnt", |s| Some(s.smcr.clnt_v1_succ_cnt)),
    (r#"smc_connections_total{technology="smcr",role="client",version="v2"}"#, "smcr.clnt_v2_succ_cnt", |s| Some(s.smcr.clnt_v2_succ_cnt)),
    (r#"smc_connections_total{technology="smcr",role="server",version="v1"}"#, "smcr.srv_v1_succ_cnt", |s| Some(s.smcr.srv_v1_succ_cnt)),
    (r#"smc_connections_total{technology="smcr",role="server",version="v2"}"#, "smcr.srv_v2_succ_cnt", |s| Some(s.smcr.srv_v2_succ_cnt)),
    (r#"smc_bytes_total{technology="smcr",direction="rx"}"#, "smcr.rx_bytes", |s| Some(s.smcr.rx_bytes)),
    (r#"smc_bytes_total{technology="smcr",direction="tx"}"#, "smcr.tx_bytes", |s| Some(s.smcr.tx_bytes)),
    (r#"smc_requests_total{technology="smcr",direction="rx"}"#, "smcr.rx_cnt", |s| Some(s.smcr.rx_cnt)),
    (r#"smc_requests_total{technology="smcr",direction="tx"}"#, "smcr.tx_cnt", |s| Some(s.smcr.tx_cnt)),
    (r#"smc_buffer_full_total{technology="smcr",direction="rx"}"#, "smcr.rx.buffer_full", |s| Some(s.smcr.rx.buffer_full)),
    (r#"smc_buffer_full_remote_total{technology="smcr",direction="tx"}"#, "smcr.tx.buffer_full_remote", |s| s.smcr.tx.tx_only.map(|t| t.buffer_full_remote)),
    (r#"smc_buffer_too_small_total{technology="smcr",direction="tx"}"#, "smcr.tx.buffer_too_small", |s| s.smcr.tx.tx_only.map(|t| t.buffer_too_small)),
    (r#"smc_buffer_allocations_total{technology="smcr",direction="rx"}"#, "smcr.rx.buffer_allocs", |s| Some(s.smcr.rx.buffer_allocs)),
    (r#"smc_buffer_reuses_total{technology="smcr",direction="tx"}"#, "smcr.tx.buffer_reuses", |s| Some(s.smcr.tx.buffer_reuses)),
    (r#"smc_buffers_by_size_total{technology="smcr",direction="rx",size="64k"}"#, "smcr.rx.bufs[\"64k\"]", |s| s.smcr.rx.bufs.bucket("64k")),
    (r#"smc_requests_by_size_total{technology="smcr",direction="tx",size="8k"}"#, "smcr.tx.reqs[\"8k\"]", |s| s.smcr.tx.reqs.bucket("8k")),
    (r#"smc_buffer_usage_bytes{technology="smcr",direction="rx"}"#, "smcr.rx.buffer_usage", |s| s.smcr.rx.buffer_usage),
    (r#"smc_handshake_errors_total{role="client"}"#, "clnt_hs_err_cnt", |s| Some(s.clnt_hs_err_cnt)),
    (r#"smc_handshake_errors_total{role="server"}"#, "srv_hs_err_cnt", |s| Some(s.srv_hs_err_cnt)),
    (r#"smc_fallbacks_total{role="client"}"#, "fallback.clnt_cnt", |s| Some(s.fallback.clnt_cnt)),
    (r#"smc_fallbacks_total{role="server"}"#, "fallback.srv_cnt", |s| Some(s.fallback.srv_cnt)),
    (r#"smc_connections_total{technology="smcd",role="client",version="v2"}"#, "smcd.clnt_v2_succ_cnt", |s| Some(s.smcd.clnt_v2_succ_cnt)),
];

/// One count of a program's report.
type Count = fn(&ConnectionCounts) -> u64;

/// The modes of `smcrun_process_connections_total` and the report's count of each.
const MODES: [(&str, Count); 4] = [
    ("smcr", |c| c.smc_r),
    ("smcd", |c| c.smc_d),
    ("smc", |c| c.smc_unknown),
    ("tcp", |c| c.tcp),
];

/// Whether the scrape's `got` is the view's `want` (both missing, or the same number).
fn same(got: Option<f64>, want: Option<u64>) -> bool {
    got == want.map(|w| w as f64)
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::ExporterStats { stats, scrape } => with(stats, scrape, |s: StatsView, m| {
                let mut bad = Vec::new();
                for (series, key, want) in PAIRS {
                    let (got, want) = (m.value(series), want(&s));
                    if !same(got, want) {
                        bad.push(format!(
                            "{series} is {}, smcrun stats --json .{key} says {}",
                            shown(got),
                            want.map_or("null".into(), |w| w.to_string())
                        ));
                    }
                }
                for r in &s.fallback.srv_reasons {
                    let labels = format!(r#"role="server",reason="{}""#, r.reason.hex);
                    let got = m.sum("smc_fallback_reasons_total", &labels);
                    if !same(got, Some(r.count.into())) {
                        bad.push(format!(
                            "smc_fallback_reasons_total server {} is {}, stats says {}",
                            r.reason.hex,
                            shown(got),
                            r.count
                        ));
                    }
                }
                verdict(
                    bad,
                    format!(
                        "{} counters and {} server fallback reasons equal smcrun stats --json",
                        PAIRS.len(),
                        s.fallback.srv_reasons.len()
                    ),
                )
            }),
            Question::ExporterPs { ps, scrape } => with(ps, scrape, |ps: Vec<PsEntry>, m| {
                let mut bad = Vec::new();
                let running: Vec<&PsEntry> = ps
                    .iter()
                    .filter(|e| e.state == "running" && e.report.is_some())
                    .collect();
                for e in &running {
                    let c = &e
                        .report
                        .as_ref()
                        .expect("running with a report")
                        .connections;
                    for (mode, want) in MODES {
                        let series = format!(
                            r#"smcrun_process_connections_total{{pid="{}",program="{}",mode="{mode}"}}"#,
                            e.pid, e.program
                        );
                        let got = m.value(&series);
                        if !same(got, Some(want(c))) {
                            bad.push(format!(
                                "smcrun_process_connections_total of {} ({}) mode {mode} is {}, its report says {}",
                                e.program,
                                e.pid,
                                shown(got),
                                want(c)
                            ));
                        }
                    }
                }
                let procs = m.value("smcrun_processes");
                if !same(procs, Some(running.len() as u64)) {
                    bad.push(format!(
                        "smcrun_processes is {}, smcrun ps shows {} running",
                        shown(procs),
                        running.len()
                    ));
                }
                verdict(
                    bad,
                    format!("{} programs match their reports", running.len()),
                )
            }),
            Question::ExporterLinkgroup {
                linkgroup,
                scrape,
                min,
            } => with(linkgroup, scrape, |lg: LinkGroupsView, m| {
                let mut bad = Vec::new();
                let conns: u64 = lg.link_groups.iter().map(|g| u64::from(g.conns)).sum();
                let got = m.sum("smc_link_group_connections", r#"technology="smcr""#);
                if !same(got, Some(conns)) {
                    bad.push(format!(
                        "smc_link_group_connections add up to {}, smcrun linkgroup --json to {conns}",
                        shown(got)
                    ));
                }
                if conns < *min {
                    bad.push(format!(
                        "only {conns} connections in link groups, expected {min} or more"
                    ));
                }
                let links = lg
                    .link_groups
                    .iter()
                    .flat_map(|g| &g.links)
                    .filter(|l| l.state == "ACTIVE")
                    .count();
                let up = m.sum("smc_link_up", "");
                if !same(up, Some(links as u64)) {
                    bad.push(format!(
                        "smc_link_up adds up to {}, linkgroup shows {links} active links",
                        shown(up)
                    ));
                }
                verdict(
                    bad,
                    format!("link groups {conns} connections, {links} links up"),
                )
            }),
            Question::ExporterRdma {
                rdma,
                scrape,
                device,
            } => with(rdma, scrape, |r: RdmaView, m| {
                let Some(d) = r.devices.iter().find(|d| &d.name == device) else {
                    return No(format!("smcrun rdma --json has no device {device}"));
                };
                let series = |what: &str, t: &str| {
                    format!(r#"smc_rdma_resources_{what}{{device="{device}",type="{t}"}}"#)
                };
                let mut bad = Vec::new();
                for t in ["qp", "mr", "pd", "cq"] {
                    let um = d.resources.get(t);
                    let wants = [
                        ("used", um.and_then(|u| u.used)),
                        ("max", um.and_then(|u| u.max).map(u64::from)),
                    ];
                    for (what, want) in wants {
                        let got = m.value(&series(what, t));
                        if want.is_none() || !same(got, want) {
                            bad.push(format!(
                                "smc_rdma_resources_{what} {t} is {}, smcrun rdma --json says {}",
                                shown(got),
                                want.map_or("null".into(), |w| w.to_string())
                            ));
                        }
                    }
                }
                verdict(
                    bad,
                    format!(
                        "{device} qp {}/{}",
                        shown(m.value(&series("used", "qp"))),
                        shown(m.value(&series("max", "qp")))
                    ),
                )
            }),
        }
    }
}

/// `f` of the view saved in `view` (as a `T`) and the scrape saved in `scrape`; no when one
/// cannot be read.
fn with<T: serde::de::DeserializeOwned>(
    view: &str,
    scrape: &str,
    f: impl FnOnce(T, &Scrape) -> Answer,
) -> Answer {
    match (source::file::<T>(view), Scrape::read(scrape)) {
        (Ok(v), Ok(m)) => f(v, &m),
        (Err(e), _) | (_, Err(e)) => No(e),
    }
}

/// Yes with `line` when nothing disagrees, else no with every disagreement.
fn verdict(bad: Vec<String>, line: String) -> Answer {
    if bad.is_empty() {
        Yes(line)
    } else {
        No(bad.join("; "))
    }
}
