//! The questions about two saved `smcrun stats --json` snapshots (checks.sh's `stats_snap`, one
//! before and one after a check's traffic): what the kernel's counters say the traffic was.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::{Subcommand, ValueEnum};
use smcrun_views::stats::json::{StatsView, TechView};
use std::fmt;

/// A connection's role (in the kernel's counters, and which end of it a socket is).
#[derive(Clone, Copy, ValueEnum)]
pub enum Side {
    /// Connected.
    Client,
    /// Accepted.
    Server,
}

impl Side {
    /// Its name in messages (and on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// The SMC technology the connections must take.
#[derive(Clone, Copy, ValueEnum)]
pub enum Transport {
    /// SMC-R.
    Smcr,
    /// SMC-D.
    Smcd,
}

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// Prints how the kernel's counters grew from BEFORE to AFTER (saved `smcrun stats --json`):
    /// successes of each technology and role, fallbacks, bytes sent. For the log; no only when a
    /// snapshot cannot be read.
    StatsGrowth { before: String, after: String },
    /// The kernel counted at least MIN SMC-R client successes and no fallback of either role
    /// from BEFORE to AFTER.
    StatsSmcOnly {
        before: String,
        after: String,
        min: i64,
    },
    /// The kernel counted exactly N SMC-R successes of SIDE and no fallback of SIDE from BEFORE
    /// to AFTER.
    StatsSide {
        before: String,
        after: String,
        #[arg(value_enum)]
        side: Side,
        n: i64,
    },
    /// N connections from BEFORE to AFTER, every one over TRANSPORT in the kernel's counters:
    /// N successes of each role there, none of the other technology, no fallback.
    StatsTransport {
        before: String,
        after: String,
        /// (`SMCR` as the soak checks write it is `smcr`.)
        #[arg(value_enum, ignore_case = true)]
        transport: Transport,
        n: i64,
    },
    /// N connections from BEFORE to AFTER all fell back: the kernel counted N more fallbacks of
    /// each role, and AFTER lists the client's REASON (`0x03030000`) among its reasons once.
    StatsFellBack {
        before: String,
        after: String,
        n: i64,
        reason: String,
    },
    /// Prints how much one SMC-R COUNTER grew from BEFORE to AFTER (a number, for checks.sh's
    /// `stats_delta`, whose callers compare and log it); no only when a snapshot cannot be read.
    StatsCount {
        before: String,
        after: String,
        #[arg(value_enum)]
        counter: Counter,
    },
    /// The kernel counted SIDE fallbacks with reason CODE (`0x03010000`; named NAME with
    /// --name) N more times from BEFORE to AFTER (N or more with --at-least).
    StatsReason {
        before: String,
        after: String,
        #[arg(value_enum)]
        side: Side,
        code: String,
        n: i64,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        at_least: bool,
    },
    /// From BEFORE to AFTER the SMC-R summary counted exactly CONNECTIONS more SMC connections
    /// and the bytes each way grew by BYTES or more, in the new layout (`summary`, `rx`, `tx`),
    /// which AFTER's old counters (`rx_bytes`, `rx_cnt`) agree with.
    StatsLayout {
        before: String,
        after: String,
        connections: u64,
        bytes: u64,
    },
    /// FILE, a saved `smcrun stats --interval SECONDS --json`, is that interval's delta and
    /// counted SMC-R bytes received in it.
    StatsInterval { file: String, seconds: f64 },
}

/// A counter `stats-count` reports, by the names checks.sh's `stats_delta` has always used.
#[derive(Clone, Copy, ValueEnum)]
pub enum Counter {
    /// SMC-R client successes (v1 and v2).
    #[value(name = "clnt_succ")]
    ClientSuccesses,
    /// SMC-R server successes (v1 and v2).
    #[value(name = "srv_succ")]
    ServerSuccesses,
    /// Client fallbacks (all technologies: the kernel counts them once).
    #[value(name = "clnt_fback")]
    ClientFallbacks,
    /// Server fallbacks.
    #[value(name = "srv_fback")]
    ServerFallbacks,
    /// SMC-R bytes received.
    #[value(name = "rx_bytes")]
    RxBytes,
    /// SMC-R bytes sent.
    #[value(name = "tx_bytes")]
    TxBytes,
}

/// The fallback reason of a connection whose peer offered no SMC (PEERNOSMC).
pub const PEERNOSMC: &str = "0x03010000";

/// How the counters the checks judge grew between two snapshots (signed: a counter that went
/// back shows as such). Pairs are client, server; bytes are received, sent.
pub struct Growth {
    /// SMC-R successes.
    pub smcr: [i64; 2],
    /// SMC-D successes.
    pub smcd: [i64; 2],
    /// Fallbacks, every reason.
    pub fallback: [i64; 2],
    /// Fallbacks with PEERNOSMC.
    pub peernosmc: [i64; 2],
    /// SMC-D connections.
    pub smcd_connections: i64,
    /// SMC-R bytes.
    pub smcr_bytes: [i64; 2],
    /// SMC-D bytes.
    pub smcd_bytes: [i64; 2],
}

/// How much a counter grew from `a` to `b` (signed: one that went back shows as such).
fn grew(a: u64, b: u64) -> i64 {
    b.wrapping_sub(a) as i64
}

/// Each of `a`'s counters' growth to `b`'s.
fn growth(a: [u64; 2], b: [u64; 2]) -> [i64; 2] {
    [0, 1].map(|i| grew(a[i], b[i]))
}

/// A technology's successes: client, server.
pub fn successes(t: &TechView) -> [u64; 2] {
    [
        t.clnt_v1_succ_cnt + t.clnt_v2_succ_cnt,
        t.srv_v1_succ_cnt + t.srv_v2_succ_cnt,
    ]
}

/// The fallbacks: client, server.
pub fn fallbacks(s: &StatsView) -> [u64; 2] {
    [s.fallback.clnt_cnt, s.fallback.srv_cnt]
}

impl Growth {
    /// The growth from `a` to `b`.
    pub fn of(a: &StatsView, b: &StatsView) -> Growth {
        let bytes = |t: &TechView| [t.rx_bytes, t.tx_bytes];
        let peernosmc = |s: &StatsView| {
            [Side::Client, Side::Server].map(|d| reason_count(s, d, PEERNOSMC, None))
        };
        Growth {
            smcr: growth(successes(&a.smcr), successes(&b.smcr)),
            smcd: growth(successes(&a.smcd), successes(&b.smcd)),
            fallback: growth(fallbacks(a), fallbacks(b)),
            peernosmc: [0, 1].map(|i| peernosmc(b)[i] - peernosmc(a)[i]),
            smcd_connections: grew(
                a.smcd.summary.smc_connections,
                b.smcd.summary.smc_connections,
            ),
            smcr_bytes: growth(bytes(&a.smcr), bytes(&b.smcr)),
            smcd_bytes: growth(bytes(&a.smcd), bytes(&b.smcd)),
        }
    }

    /// The SMC-R successes and fallbacks of `side`.
    fn side(&self, side: Side) -> (i64, i64) {
        let i = side as usize;
        (self.smcr[i], self.fallback[i])
    }

    /// One counter's growth.
    fn count(&self, c: Counter) -> i64 {
        match c {
            Counter::ClientSuccesses => self.smcr[0],
            Counter::ServerSuccesses => self.smcr[1],
            Counter::ClientFallbacks => self.fallback[0],
            Counter::ServerFallbacks => self.fallback[1],
            Counter::RxBytes => self.smcr_bytes[0],
            Counter::TxBytes => self.smcr_bytes[1],
        }
    }
}

impl fmt::Display for Growth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel: SMC-R successes client +{} server +{}, SMC-D +{}/+{}, fallbacks client +{} server +{}, tx bytes SMC-R +{} SMC-D +{}",
            self.smcr[0],
            self.smcr[1],
            self.smcd[0],
            self.smcd[1],
            self.fallback[0],
            self.fallback[1],
            self.smcr_bytes[1],
            self.smcd_bytes[1]
        )
    }
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::StatsGrowth { before, after } => {
                with_growth(before, after, |g| Yes(g.to_string()))
            }
            Question::StatsSmcOnly { before, after, min } => with_growth(before, after, |g| {
                if g.fallback != [0, 0] {
                    No(format!("the kernel counted fallbacks; {g}"))
                } else if g.smcr[0] < *min {
                    No(format!(
                        "the kernel counted {} SMC-R client successes, expected >= {min}; {g}",
                        g.smcr[0]
                    ))
                } else {
                    Yes(g.to_string())
                }
            }),
            Question::StatsSide {
                before,
                after,
                side,
                n,
            } => with_growth(before, after, |g| {
                let (succ, fb) = g.side(*side);
                if succ == *n && fb == 0 {
                    Yes(g.to_string())
                } else {
                    No(format!(
                        "the kernel counted {succ} SMC-R {} successes and {fb} {} fallbacks, expected {n} and 0; {g}",
                        side.name(),
                        side.name()
                    ))
                }
            }),
            Question::StatsTransport {
                before,
                after,
                transport,
                n,
            } => with_growth(before, after, |g| {
                let (want, other, names) = match transport {
                    Transport::Smcr => (g.smcr, g.smcd, ["SMC-R", "SMC-D"]),
                    Transport::Smcd => (g.smcd, g.smcr, ["SMC-D", "SMC-R"]),
                };
                let mut why = Vec::new();
                if want != [*n, *n] || other != [0, 0] {
                    why.push(format!(
                        "the kernel counted {} +{}/+{} and {} +{}/+{} successes (client/server), expected {} +{n}/+{n}",
                        names[0], want[0], want[1], names[1], other[0], other[1], names[0]
                    ));
                }
                if g.fallback != [0, 0] {
                    why.push("the kernel counted fallbacks".into());
                }
                if why.is_empty() {
                    Yes(g.to_string())
                } else {
                    No(format!("{}; {g}", why.join("; ")))
                }
            }),
            Question::StatsFellBack {
                before,
                after,
                n,
                reason,
            } => match source::file::<StatsView>(after) {
                Ok(b) => with_growth(before, after, |g| {
                    let listed = client_reasons(&b, reason);
                    if g.fallback == [*n, *n] && listed == 1 {
                        Yes(g.to_string())
                    } else {
                        No(format!(
                            "stats: fallbacks grew by client {}, server {} (expected {n}, {n}) and {reason} listed {listed} times (expected 1); {g}",
                            g.fallback[0], g.fallback[1]
                        ))
                    }
                }),
                Err(e) => No(format!("smcrun stats --json: {e}")),
            },
            Question::StatsLayout {
                before,
                after,
                connections,
                bytes,
            } => with_snapshots(before, after, |a, b| layout(a, b, *connections, *bytes)),
            Question::StatsInterval { file, seconds } => {
                source::with_file(file, |s: &StatsView| {
                    let line = format!(
                        "interval_seconds {}, .smcr.rx.bytes {}",
                        s.interval_seconds.map_or("null".into(), |i| i.to_string()),
                        s.smcr.rx.bytes
                    );
                    if s.interval_seconds == Some(*seconds) && s.smcr.rx.bytes > 0 {
                        Yes(line)
                    } else {
                        No(format!(
                            "smcrun stats --interval {seconds} --json during traffic: {line}"
                        ))
                    }
                })
            }
            Question::StatsCount {
                before,
                after,
                counter,
            } => with_growth(before, after, |g| Yes(g.count(*counter).to_string())),
            Question::StatsReason {
                before,
                after,
                side,
                code,
                n,
                name,
                at_least,
            } => with_snapshots(before, after, |a, b| {
                let [was, is] = [a, b].map(|s| reason_count(s, *side, code, name.as_deref()));
                let grew = is - was;
                let named = name.as_ref().map(|n| format!(" {n}")).unwrap_or_default();
                let line = format!(
                    "the kernel counted {} fallback reason {code}{named} {was} then {is} times (+{grew})",
                    side.name()
                );
                if grew == *n || (*at_least && grew > *n) {
                    Yes(line)
                } else {
                    let more = if *at_least { " or more" } else { "" };
                    let listed = match side {
                        Side::Client => &b.fallback.clnt_reasons,
                        Side::Server => &b.fallback.srv_reasons,
                    };
                    let all: Vec<String> = listed
                        .iter()
                        .map(|r| format!("{} {} {}", r.reason.hex, r.reason.name, r.count))
                        .collect();
                    No(format!(
                        "{line}, expected +{n}{more}; after, its reasons: [{}]",
                        all.join(", ")
                    ))
                }
            }),
        }
    }
}

/// How many of `s`'s client fallback reasons are `reason` (one, when it is listed).
fn client_reasons(s: &StatsView, reason: &str) -> usize {
    s.fallback
        .clnt_reasons
        .iter()
        .filter(|r| r.reason.hex == reason)
        .count()
}

/// What `stats-layout` asks of snapshots `a` and `b`.
fn layout(a: &StatsView, b: &StatsView, connections: u64, bytes: u64) -> Answer {
    let (x, y) = (&a.smcr, &b.smcr);
    let conns = y
        .summary
        .smc_connections
        .wrapping_sub(x.summary.smc_connections);
    let rx = y.rx.bytes.wrapping_sub(x.rx.bytes);
    let tx = y.tx.bytes.wrapping_sub(x.tx.bytes);
    let line = format!("stats smc_connections +{conns} rx +{rx} tx +{tx}");
    if y.rx.bytes != y.rx_bytes || y.rx.requests != y.rx_cnt {
        No(format!(
            "stats --json: .smcr.rx.bytes/.requests ({}/{}) differ from .smcr.rx_bytes/.rx_cnt ({}/{})",
            y.rx.bytes, y.rx.requests, y.rx_bytes, y.rx_cnt
        ))
    } else if conns != connections {
        No(format!(
            "stats .smcr.summary.smc_connections grew by {conns}, expected {connections}; {line}"
        ))
    } else if rx < bytes || tx < bytes {
        No(format!(
            "stats .smcr.rx.bytes +{rx} / .tx.bytes +{tx}, expected >= {bytes} each"
        ))
    } else {
        Yes(line)
    }
}

/// How often a snapshot counts SIDE's fallback reason CODE (named NAME, when given).
fn reason_count(s: &StatsView, side: Side, code: &str, name: Option<&str>) -> i64 {
    let listed = match side {
        Side::Client => &s.fallback.clnt_reasons,
        Side::Server => &s.fallback.srv_reasons,
    };
    listed
        .iter()
        .filter(|r| r.reason.hex == code && name.iter().all(|n| r.reason.name == *n))
        .map(|r| i64::from(r.count))
        .sum()
}

/// `f` of the growth from snapshot `before` to `after`; no when one cannot be read.
pub fn with_growth(before: &str, after: &str, f: impl FnOnce(&Growth) -> Answer) -> Answer {
    with_snapshots(before, after, |a, b| f(&Growth::of(a, b)))
}

/// `f` of snapshots `before` and `after`; no when one cannot be read.
pub fn with_snapshots(
    before: &str,
    after: &str,
    f: impl FnOnce(&StatsView, &StatsView) -> Answer,
) -> Answer {
    match (
        source::file::<StatsView>(before),
        source::file::<StatsView>(after),
    ) {
        (Ok(a), Ok(b)) => f(&a, &b),
        (Err(e), _) | (_, Err(e)) => No(format!("smcrun stats --json: {e}")),
    }
}
