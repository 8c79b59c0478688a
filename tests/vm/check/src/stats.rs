//! The questions about two saved `smcrun stats --json` snapshots (checks.sh's `stats_snap`, one
//! before and one after a check's traffic): what the kernel's counters say the traffic was.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::{Subcommand, ValueEnum};
use smcrun_views::stats::json::{StatsView, TechView};
use std::fmt;

/// A connection's role in the kernel's counters.
#[derive(Clone, Copy, ValueEnum)]
pub enum Side {
    /// Connected.
    Client,
    /// Accepted.
    Server,
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
}

/// How the counters the checks judge grew between two snapshots (signed: a counter that went
/// back shows as such).
struct Growth {
    smcr: [i64; 2],
    smcd: [i64; 2],
    fallback: [i64; 2],
    smcr_tx: i64,
    smcd_tx: i64,
}

/// Each of `a`'s counters' growth to `b`'s.
fn growth(a: [u64; 2], b: [u64; 2]) -> [i64; 2] {
    [0, 1].map(|i| b[i].wrapping_sub(a[i]) as i64)
}

/// A technology's successes: client, server.
pub fn successes(t: &TechView) -> [u64; 2] {
    [
        t.clnt_v1_succ_cnt + t.clnt_v2_succ_cnt,
        t.srv_v1_succ_cnt + t.srv_v2_succ_cnt,
    ]
}

/// The fallbacks: client, server.
fn fallbacks(s: &StatsView) -> [u64; 2] {
    [s.fallback.clnt_cnt, s.fallback.srv_cnt]
}

impl Growth {
    fn of(a: &StatsView, b: &StatsView) -> Growth {
        let [smcr_tx, smcd_tx] = growth(
            [a.smcr.tx_bytes, a.smcd.tx_bytes],
            [b.smcr.tx_bytes, b.smcd.tx_bytes],
        );
        Growth {
            smcr: growth(successes(&a.smcr), successes(&b.smcr)),
            smcd: growth(successes(&a.smcd), successes(&b.smcd)),
            fallback: growth(fallbacks(a), fallbacks(b)),
            smcr_tx,
            smcd_tx,
        }
    }

    /// The SMC-R successes and fallbacks of `side`.
    fn side(&self, side: Side) -> (i64, i64) {
        let i = side as usize;
        (self.smcr[i], self.fallback[i])
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
            self.smcr_tx,
            self.smcd_tx
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
                let role = side.to_possible_value().expect("a value");
                if succ == *n && fb == 0 {
                    Yes(g.to_string())
                } else {
                    No(format!(
                        "the kernel counted {succ} SMC-R {} successes and {fb} {} fallbacks, expected {n} and 0; {g}",
                        role.get_name(),
                        role.get_name()
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
        }
    }
}

/// `f` of the growth from snapshot `before` to `after`; no when one cannot be read.
fn with_growth(before: &str, after: &str, f: impl FnOnce(&Growth) -> Answer) -> Answer {
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
