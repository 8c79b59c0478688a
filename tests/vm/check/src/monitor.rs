//! `smcrun monitor --json`'s question: did its lines see the traffic a check runs meanwhile.

use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::monitor::json::MonitorLine;

/// What a check asks of `smcrun monitor --json`.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun monitor ... --count LINES --json`, has LINES lines, one of them
    /// busy: bytes and requests received per second, bytes sent per second, CONNS connections
    /// or more and receive buffers in use.
    MonitorBusy {
        file: String,
        lines: usize,
        conns: u64,
    },
}

/// Whether a line saw traffic on CONNS connections or more.
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
        let Question::MonitorBusy { file, lines, conns } = self;
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return No(format!("{file}: {e}")),
        };
        let mut read = Vec::new();
        for (i, l) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            match serde_json::from_str::<MonitorLine>(l) {
                Ok(m) => read.push(m),
                Err(e) => {
                    return No(format!(
                        "{file}: line {} is not a monitor line ({e}): {l}",
                        i + 1
                    ))
                }
            }
        }
        let n = read.iter().filter(|l| busy(l, *conns)).count();
        let last = text.lines().last().unwrap_or_default();
        if read.len() != *lines {
            No(format!(
                "smcrun monitor --count {lines} printed {} lines",
                read.len()
            ))
        } else if n == 0 {
            No(format!("smcrun monitor showed no line with non-zero rx/tx rates, {conns} connections and buffers while the traffic ran: {last}"))
        } else {
            Yes(format!("{n} of {lines} lines busy"))
        }
    }
}
