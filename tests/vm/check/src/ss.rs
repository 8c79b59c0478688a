//! `smcrun ss --json`'s questions: in which mode both ends of a connection run, how many sockets
//! of a port run in a mode, and that a port has no SMC socket at all.

use crate::source;
use crate::stats::Side;
use crate::Answer::{self, No, NotYet, Yes};
use clap::{Subcommand, ValueEnum};
use smcrun_views::ss::json::{SocketView, SsView};
use smcrun_views::ss::Owner;
use std::net::SocketAddr;

/// `smcrun ss --json` as read back (with `-p`'s owners when it has them).
pub type Listing = SsView<'static, Vec<Owner>>;
/// One socket of a [`Listing`].
pub type Socket = SocketView<'static, Vec<Owner>>;

/// What a check asks of `smcrun ss --json`.
// (the prefix is the command line's: every module's questions share one list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun ss -a --json`, has the connection to PORT in MODE (`SMCR`, `SMCD`,
    /// `TCP`) at both ends: the client (peer port PORT) and the server (local port PORT, not
    /// listening); with --reason, both fell back with that code (`0x03010000`).
    SsConnection {
        file: String,
        port: u16,
        mode: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// `smcrun ss --json` lists at least N sockets of PORT (its local or peer port) in MODE, not
    /// listening (waits while fewer); with --served only those whose local port is PORT, the
    /// server's ends.
    SsPort {
        port: u16,
        mode: String,
        n: usize,
        #[arg(long)]
        served: bool,
    },
    /// `smcrun ss --json` lists no socket of PORT: the connection there is plain TCP.
    SsNone { port: u16 },
    /// FILE, a saved `smcrun ss --json`: the first active SIDE end of a connection of PORT (the
    /// client's: peer port PORT; the server's: local port PORT) is in MODE; with --not, it is
    /// not (or there is none).
    SsEnd {
        file: String,
        #[arg(value_enum)]
        side: Side,
        port: u16,
        mode: String,
        #[arg(long)]
        not: bool,
    },
    /// FILE, a saved `smcrun ss --json`, lists no socket whose peer port is PORT: that
    /// connection, made before SMC was switched on, was left alone.
    SsUntouched { file: String, port: u16 },
}

/// The port of an address as ss prints it (`127.0.0.1:6379`, `[::1]:6379`).
fn port(addr: &str) -> Option<u16> {
    addr.parse::<SocketAddr>().ok().map(|a| a.port())
}

fn of_port(s: &Socket, p: u16) -> bool {
    port(&s.local) == Some(p) || port(&s.peer) == Some(p)
}

fn reason(s: &Socket) -> &str {
    s.fallback.as_ref().map_or("-", |f| f.reason.as_str())
}

/// A socket as a message shows it: `STATE LOCAL->PEER MODE [REASON[/PEER'S]]`.
fn show(s: &Socket) -> String {
    let mut line = format!("{} {}->{} {}", s.state, s.local, s.peer, s.mode);
    if let Some(f) = &s.fallback {
        line += &format!(" {}", f.reason);
        if f.peer_diagnosis != "0x00000000" {
            line += &format!("/{}", f.peer_diagnosis);
        }
    }
    line
}

/// The first four of `sockets` as a message shows them.
fn show_some<'a>(sockets: impl Iterator<Item = &'a Socket>) -> String {
    let shown: Vec<String> = sockets.take(4).map(show).collect();
    if shown.is_empty() {
        "none".into()
    } else {
        shown.join("; ")
    }
}

/// Yes when `sockets` is empty; no with `what` and the first of them.
fn none<'a>(sockets: impl Iterator<Item = &'a Socket>, what: &str) -> Answer {
    let mut on = sockets.peekable();
    if on.peek().is_none() {
        Yes(String::new())
    } else {
        No(format!("{what}: {}", show_some(on)))
    }
}

/// An end of a connection as the check prints it: `MODE REASON`, `none -` when it is missing.
fn end(s: Option<&Socket>) -> String {
    match s {
        Some(s) => format!("{} {}", s.mode, reason(s)),
        None => "none -".into(),
    }
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::SsConnection {
                file,
                port: p,
                mode,
                reason: want,
            } => source::with_file(file, |l: &Listing| {
                let client = l
                    .sockets
                    .iter()
                    .find(|s| port(&s.peer) == Some(*p) && port(&s.local) != Some(0));
                let server = l
                    .sockets
                    .iter()
                    .find(|s| port(&s.local) == Some(*p) && port(&s.peer) != Some(0));
                let line = format!("client {}, server {}", end(client), end(server));
                let right = |s: Option<&Socket>| {
                    s.is_some_and(|s| {
                        s.mode == mode.as_str() && want.iter().all(|r| reason(s) == r)
                    })
                };
                if right(client) && right(server) {
                    Yes(line)
                } else {
                    let with = want
                        .as_ref()
                        .map(|r| format!(" fallen back with {r}"))
                        .unwrap_or_default();
                    No(format!(
                        "the connection to port {p} is {line}, expected {mode}{with} at both ends"
                    ))
                }
            }),
            Question::SsPort {
                port: p,
                mode,
                n,
                served,
            } => source::with_smcrun(&["ss", "--json"], |l: &Listing| {
                let on: Vec<&Socket> = l
                    .sockets
                    .iter()
                    .filter(|s| {
                        if *served {
                            port(&s.local) == Some(*p)
                        } else {
                            of_port(s, *p)
                        }
                    })
                    .collect();
                let count = on
                    .iter()
                    .filter(|s| s.mode == mode.as_str() && s.state != "LISTEN")
                    .count();
                let line = format!(
                    "{count} {mode} sockets on port {p}: {}",
                    show_some(on.iter().copied())
                );
                if count >= *n {
                    Yes(line)
                } else {
                    NotYet(format!(
                        "smcrun ss --json lists {line}; expected at least {n} {mode}"
                    ))
                }
            }),
            Question::SsEnd {
                file,
                side,
                port: p,
                mode,
                not,
            } => source::with_file(file, |l: &Listing| {
                let first = l.sockets.iter().find(|s| {
                    let addr = match side {
                        Side::Client => &s.peer,
                        Side::Server => &s.local,
                    };
                    s.state == "ACTIVE" && port(addr) == Some(*p)
                });
                let role = side.to_possible_value().expect("a value");
                let line = format!(
                    "the {} end of port {p}: {}",
                    role.get_name(),
                    first.map_or("none".into(), show)
                );
                if first.is_some_and(|s| s.mode == mode.as_str()) != *not {
                    Yes(line)
                } else {
                    let not = if *not { "not " } else { "" };
                    No(format!("{file}: {line}, expected {not}{mode}"))
                }
            }),
            Question::SsUntouched { file, port: p } => source::with_file(file, |l: &Listing| {
                none(
                    l.sockets.iter().filter(|s| port(&s.peer) == Some(*p)),
                    &format!("{file} lists sockets with peer port {p}"),
                )
            }),
            Question::SsNone { port: p } => {
                source::with_smcrun(&["ss", "--json"], |l: &Listing| {
                    none(
                        l.sockets.iter().filter(|s| of_port(s, *p)),
                        &format!("smcrun ss --json lists sockets on port {p}"),
                    )
                })
            }
        }
    }
}
