//! `smcrun stats [-m smcr|smcd] [-d] [--json] [--interval SEC]`: the kernel's SMC counters of this
//! network namespace in `smcr stats`' layout (connections summary, RX and TX stats with buffer and
//! request size histograms, special socket calls, and with `-d` the top fallback reasons per role).
//!
//! The kernel's counters cannot be reset. smc-tools emulates a reset with a cache file in /tmp;
//! here `--interval SEC` takes two samples SEC apart and shows what happened between them.

use std::time::Duration;

use clap::{Args, ValueEnum};
use smcrun_kernel::smc_genl::SmcGenl;

use crate::cmd::format;
use crate::status::{Failure, Outcome};
use smcrun_views::counters::{delta, sample};
use smcrun_views::stats::json::StatsView;
use smcrun_views::stats::text::{reasons_text, tech_text};

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
    #[arg(long = "interval", value_name = "SEC", value_parser = format::seconds)]
    interval: Option<f64>,
    /// Print JSON (stable snake_case keys: the manual's JSON keys page).
    #[arg(short = 'j', long)]
    json: bool,
}

/// Run `smcrun stats`.
pub fn stats(a: &StatsArgs) -> Outcome {
    let client = match SmcGenl::open() {
        Ok(c) => c,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let first = match sample(&client) {
        Ok(s) => s,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let shown = match a.interval {
        None => first,
        Some(sec) => {
            std::thread::sleep(Duration::from_secs_f64(sec));
            match sample(&client) {
                Ok(second) => delta(&first, &second),
                Err(e) => return Err(Failure::refused(&e)),
            }
        }
    };
    if a.json {
        return format::print_json(&StatsView::new(&shown, a.interval));
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
    format::print_lines(lines)
}
