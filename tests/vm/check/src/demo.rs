//! `smcrun demo --json`'s questions.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::demo::DemoReport;

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
