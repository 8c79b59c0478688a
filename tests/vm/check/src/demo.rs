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
    /// FILE, a saved `smcrun demo --json`, ran N connections with the data intact, every socket
    /// fell back to TCP, each client's why names WHY (`no SMC device found`) and each server's
    /// says the peer declined with WHY as the peer's diagnosis (`...; peer: WHY`): what a kernel
    /// without an SMC device does on both ends.
    DemoDeclined { file: String, n: u16, why: String },
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
            Question::DemoDeclined { file, n, why } => {
                source::with_file(file, |d: &DemoReport| declined(d, *n, why))
            }
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

/// Whether `d` is `n` intact connections whose every socket fell back: the clients because of
/// `why`, the servers because their peer declined with `why`.
fn declined(d: &DemoReport, n: u16, why: &str) -> Answer {
    if d.connections != n || !d.data_intact {
        return No(format!(
            "smcrun demo: {} connections, data intact {} (expected {n}, true)",
            d.connections, d.data_intact
        ));
    }
    let tcp = d.sockets.iter().filter(|s| s.mode == "TCP").count();
    let all = d.sockets.len();
    if tcp != all || all != 2 * usize::from(n) {
        return No(format!(
            "smcrun demo: {tcp} of {all} sockets TCP, expected all {} to fall back",
            2 * n
        ));
    }
    let peer = format!("peer: {why}");
    let said = |side: &str, right: &dyn Fn(&str) -> bool| {
        d.sockets
            .iter()
            .filter(|s| s.side == side && right(&s.why))
            .count()
    };
    let clients = said("client", &|w| w.contains(why));
    let servers = said("server", &|w| {
        w.find("peer declined")
            .is_some_and(|i| w[i..].contains(&peer))
    });
    if clients == usize::from(n) && servers == usize::from(n) {
        Yes(format!(
            "{n} connections intact, all {all} sockets TCP: clients {why}, servers peer declined; {peer}"
        ))
    } else {
        let whys: Vec<&str> = d.sockets.iter().map(|s| s.why.as_str()).collect();
        No(format!(
            "smcrun demo: reasons decoded for {clients} clients ({why}) and {servers} servers (peer declined; {peer}), expected {n} each: {}",
            whys.join(" | ")
        ))
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
