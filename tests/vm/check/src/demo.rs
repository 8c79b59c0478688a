//! `smcrun demo --json`'s questions.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::demo::{DemoReport, DemoSocket};

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun demo --json`, has a SIDE socket that fell back with REASON
    /// (`0x02010000`).
    DemoFellBack {
        file: String,
        side: String,
        reason: String,
    },
    /// FILE, a saved `smcrun demo --json`, has exactly N sockets in SMC-R mode (both ends of
    /// each connection).
    DemoSmcr { file: String, n: usize },
    /// FILE, a saved `smcrun demo --json`, ran N connections with their data intact, and all 2N
    /// sockets (client and server of each) are SMC-R over the RDMA device DEVICE.
    DemoRan {
        file: String,
        n: u16,
        device: String,
    },
    /// FILE, a saved `smcrun demo --json`: every connection's data came back intact.
    DemoIntact { file: String },
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::DemoFellBack { file, side, reason } => {
                source::with_file(file, |d: &DemoReport| {
                    let hit = d.sockets.iter().any(|s| {
                        s.side == side.as_str()
                            && s.fallback_reason.as_deref() == Some(reason.as_str())
                    });
                    if hit {
                        Yes(String::new())
                    } else {
                        No(format!("no {side} socket fell back with {reason}"))
                    }
                })
            }
            Question::DemoSmcr { file, n } => source::with_file(file, |d: &DemoReport| {
                let smcr = d.sockets.iter().filter(|s| s.mode == "SMC-R").count();
                if smcr == *n {
                    Yes(String::new())
                } else {
                    let all: Vec<String> = d
                        .sockets
                        .iter()
                        .map(|s| format!("{} {}: {}", s.side, s.mode, s.why))
                        .collect();
                    No(format!(
                        "{smcr} sockets over SMC-R, expected {n}: {}",
                        all.join("; ")
                    ))
                }
            }),
            Question::DemoIntact { file } => source::with_file(file, |d: &DemoReport| {
                if d.data_intact {
                    Yes(format!("{} connections, data intact", d.connections))
                } else {
                    No(format!(
                        "smcrun demo: data NOT intact ({} connections corrupted)",
                        d.mismatched_connections
                    ))
                }
            }),
            Question::DemoRan { file, n, device } => {
                source::with_file(file, |d: &DemoReport| ran(d, *n, device))
            }
        }
    }
}

/// What `demo-ran` asks, failing on the first thing that is wrong.
fn ran(d: &DemoReport, n: u16, device: &str) -> Answer {
    let sockets = d.sockets.len();
    let smcr: Vec<&DemoSocket> = d.sockets.iter().filter(|s| s.mode == "SMC-R").collect();
    let on = d
        .sockets
        .iter()
        .filter(|s| s.device.as_deref() == Some(device))
        .count();
    let line = format!(
        "{} connections, data intact {}, {sockets} sockets, {} SMC-R, {on} on {device}",
        d.connections,
        d.data_intact,
        smcr.len()
    );
    if d.connections != n {
        No(format!(
            "smcrun demo ran {} connections, asked for {n}",
            d.connections
        ))
    } else if !d.data_intact {
        No(format!(
            "smcrun demo: data NOT intact ({} connections corrupted)",
            d.mismatched_connections
        ))
    } else if sockets != 2 * usize::from(n) {
        No(format!(
            "smcrun demo reported {sockets} sockets, expected {} (client + server per connection)",
            2 * n
        ))
    } else if smcr.len() != sockets {
        let other = d.sockets.iter().find(|s| s.mode != "SMC-R").expect("one");
        No(format!(
            "smcrun demo: only {} of {sockets} sockets SMC-R: {} {}: {}",
            smcr.len(),
            other.side,
            other.mode,
            other.why
        ))
    } else if on != sockets {
        let devices: Vec<Option<&str>> = d.sockets.iter().map(|s| s.device.as_deref()).collect();
        No(format!(
            "smcrun demo names the RDMA device {device} for {on} of {sockets} sockets: {}",
            source::compact(&devices)
        ))
    } else {
        Yes(line)
    }
}
