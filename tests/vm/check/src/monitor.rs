//! `smcrun monitor --json`'s questions: did its lines see the traffic a check runs meanwhile, and
//! does a mode without traffic stay idle.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::monitor::json::MonitorLine;

/// What a check asks of `smcrun monitor --json`.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun monitor ... --count LINES --json`, has LINES lines, at least one of
    /// them busy: bytes and requests received per second, bytes sent per second, --conns
    /// connections or more and receive buffers in use (in mode --mode, `smcd`, when given).
    MonitorBusy {
        file: String,
        lines: usize,
        #[arg(long, default_value_t = 2)]
        conns: u64,
        #[arg(long)]
        mode: Option<String>,
    },
    /// FILE, a saved `smcrun monitor -m MODE --count 1 --json`, has one idle MODE line: no
    /// connection, no rate.
    MonitorIdle { file: String, mode: String },
}

/// Whether a line saw traffic on `conns` connections or more.
fn busy(l: &MonitorLine, conns: u64) -> bool {
    let above = |v: Option<f64>| v.is_some_and(|v| v > 0.0);
    above(l.rx_rate_bytes_per_sec)
        && above(l.tx_rate_bytes_per_sec)
        && above(l.rx_requests_per_sec)
        && l.conns.is_some_and(|c| c >= conns)
        && l.bufs.as_ref().is_some_and(|b| b.rx_bufs_bytes > 0)
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::MonitorBusy {
                file,
                lines: want,
                conns,
                mode,
            } => with_lines(file, |lines| {
                let n = lines
                    .iter()
                    .filter(|l| mode.iter().all(|m| *m == l.mode) && busy(l, *conns))
                    .count();
                let line = format!("{} lines, {n} busy", lines.len());
                if lines.len() != *want {
                    No(format!("smcrun monitor --count {want}: {line}"))
                } else if n == 0 {
                    No(format!(
                        "{line}: no line with non-zero rx/tx rates, {conns} connections or more and buffers while the traffic ran: {}",
                        lines.last().map_or("none".into(), source::compact)
                    ))
                } else {
                    Yes(line)
                }
            }),
            Question::MonitorIdle { file, mode } => with_lines(file, |lines| {
                let idle = lines
                    .iter()
                    .filter(|l| {
                        l.mode == mode.as_str()
                            && l.conns == Some(0)
                            && l.rx_rate_bytes_per_sec == Some(0.0)
                            && l.tx_rate_bytes_per_sec == Some(0.0)
                    })
                    .count();
                if idle == 1 {
                    Yes(format!("{idle} idle {mode} line"))
                } else {
                    No(format!(
                        "{idle} idle {mode} lines of {}, expected 1: {}",
                        lines.len(),
                        source::compact(&lines)
                    ))
                }
            }),
        }
    }
}

/// `f` of FILE's monitor lines (one JSON object each); no when one does not read.
fn with_lines(path: &str, f: impl FnOnce(&[MonitorLine<'static>]) -> Answer) -> Answer {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) => return No(format!("{path}: {e}")),
    };
    let lines: Result<Vec<MonitorLine<'static>>, _> = serde_json::Deserializer::from_slice(&text)
        .into_iter()
        .collect();
    match lines {
        Ok(l) => f(&l),
        Err(e) => No(format!("{path}: not smcrun monitor's JSON lines ({e})")),
    }
}
