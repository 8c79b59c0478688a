//! `smcrun demo --json`'s questions.

use crate::source;
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::demo::DemoReport;

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
        }
    }
}
