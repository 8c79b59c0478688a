//! `smcrun ss --json`'s questions: in which mode both ends of a connection run, how many sockets
//! of a port run in a mode, and that a port has no SMC socket at all.

use crate::source;
use crate::stats::Side;
use crate::Answer::{self, No, NotYet, Yes};
use clap::Subcommand;
use smcrun_views::ss::json::{SocketFallback, SocketView, SsView};
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
    /// `smcrun ss -a --json` lists at least N fallen-back (TCP) ends of connections to PORT on
    /// each side (waits while fewer): clients (peer port PORT) with reason CLIENT decoded as
    /// NAME, servers (local port PORT, not listening) with reason SERVER and the clients'
    /// CLIENT as the peer's diagnosis (a decline).
    SsDeclined {
        port: u16,
        n: usize,
        client: String,
        name: String,
        server: String,
    },
    /// `smcrun ss -a --json` lists no SMC socket in any state (the check's are all closed).
    SsEmpty,
    /// `smcrun ss --json` (`-a` with --all) lists at least N connected sockets in MODE (`SMCR`,
    /// `SMCD`, `TCP`), of FAMILY (43, 2, 10) with --family, of PORT (local or peer) with --port;
    /// waits while fewer. Its line starts with the count. Connected: local and peer port not 0;
    /// with --active, ACTIVE instead (6.12's smc_diag leaves an IPPROTO_SMC socket's addresses 0).
    SsCount {
        mode: String,
        n: usize,
        #[arg(long)]
        port: Option<u16>,
        #[arg(long)]
        family: Option<u8>,
        #[arg(long)]
        active: bool,
        #[arg(long)]
        all: bool,
    },
    /// `smcrun ss -a --json`'s SIDE of the connection to PORT (the client: peer port PORT; the
    /// server: local port PORT) shows as WANT: `MODE REASON[/PEER'S] NAME[/PEER'S]` (`TCP
    /// 0x05000000/0x03030000 PEERDECL/NOSMCDEV`); waits while that end is not listed.
    SsEnd {
        port: u16,
        #[arg(value_enum)]
        side: Side,
        want: String,
    },
    /// `smcrun ss -p --json` lists at least N ACTIVE sockets of local port PORT owned by SERVER
    /// and N of peer port PORT owned by CLIENT (program names).
    SsOwners {
        port: u16,
        server: String,
        client: String,
        n: usize,
    },
    /// FILE, a saved `smcrun ss --json`: the first active SIDE end of a connection of PORT (the
    /// client's: peer port PORT; the server's: local port PORT) is in MODE; with --not, it is
    /// not (or there is none).
    SsSavedEnd {
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

/// Whether a socket is connected: both its ports are known (a listener's peer port is 0).
fn connected(s: &Socket) -> bool {
    !matches!(port(&s.local), None | Some(0)) && !matches!(port(&s.peer), None | Some(0))
}

/// An end as `ss-end` compares it: `MODE REASON[/PEER'S] NAME[/PEER'S]`, the peer's part only
/// when the peer sent a diagnosis.
fn end_shown(s: &Socket) -> String {
    match &s.fallback {
        None => s.mode.to_string(),
        Some(f) if f.peer_diagnosis != "0x00000000" => format!(
            "{} {}/{} {}/{}",
            s.mode,
            f.reason,
            f.peer_diagnosis,
            f.reason_decoded.name,
            f.peer_diagnosis_decoded.name
        ),
        Some(f) => format!("{} {} {}", s.mode, f.reason, f.reason_decoded.name),
    }
}

/// Whether a socket is owned by a process named `name` (`ss -p`).
fn owned_by(s: &Socket, name: &str) -> bool {
    s.processes.iter().flatten().any(|o| o.name == name)
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

/// `s`'s fallback when it runs over TCP, fallen back with `reason` (`0x03030000`).
fn fell_back<'s>(s: &'s Socket, reason: &str) -> Option<&'s SocketFallback> {
    s.fallback
        .as_ref()
        .filter(|f| s.mode == "TCP" && f.reason == reason)
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
            Question::SsDeclined {
                port: p,
                n,
                client,
                name,
                server,
            } => source::with_smcrun(&["ss", "-a", "--json"], |l: &Listing| {
                let clients = l
                    .sockets
                    .iter()
                    .filter(|s| port(&s.peer) == Some(*p))
                    .filter_map(|s| fell_back(s, client))
                    .filter(|f| f.reason_decoded.name == name.as_str())
                    .count();
                let servers = l
                    .sockets
                    .iter()
                    .filter(|s| port(&s.local) == Some(*p) && port(&s.peer) != Some(0))
                    .filter_map(|s| fell_back(s, server))
                    .filter(|f| f.peer_diagnosis == *client)
                    .count();
                let line = format!(
                    "{servers} server sockets with {server}/{client} and {clients} clients with {client} {name}"
                );
                if servers >= *n && clients >= *n {
                    Yes(line)
                } else {
                    NotYet(format!(
                        "smcrun ss -a --json: {line}, expected {n} each: {}",
                        show_some(l.sockets.iter().filter(|s| of_port(s, *p)))
                    ))
                }
            }),
            Question::SsSavedEnd {
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
                let line = format!(
                    "the {} end of port {p}: {}",
                    side.name(),
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
            Question::SsEmpty => source::with_smcrun(&["ss", "-a", "--json"], |l: &Listing| {
                if l.sockets.is_empty() {
                    Yes(String::new())
                } else {
                    No(format!(
                        "smcrun ss -a --json lists {} sockets: {}",
                        l.sockets.len(),
                        show_some(l.sockets.iter())
                    ))
                }
            }),
            Question::SsCount {
                mode,
                n,
                port: p,
                family,
                active,
                all,
            } => {
                let args: &[&str] = if *all {
                    &["ss", "-a", "--json"]
                } else {
                    &["ss", "--json"]
                };
                source::with_smcrun(args, |l: &Listing| {
                    let counted: Vec<&Socket> = l
                        .sockets
                        .iter()
                        .filter(|s| {
                            (if *active {
                                s.state == "ACTIVE"
                            } else {
                                connected(s)
                            }) && s.mode == mode.as_str()
                                && family.iter().all(|f| s.family == *f)
                                && p.iter().all(|p| of_port(s, *p))
                        })
                        .collect();
                    let what = format!(
                        "{} {} {mode} sockets{}{}",
                        counted.len(),
                        if *active { "ACTIVE" } else { "connected" },
                        family
                            .map(|f| format!(" of family {f}"))
                            .unwrap_or_default(),
                        p.map(|p| format!(" on port {p}")).unwrap_or_default()
                    );
                    if counted.len() >= *n {
                        Yes(format!("{what}: {}", show_some(counted.into_iter())))
                    } else {
                        NotYet(format!(
                            "{what}, expected at least {n}; smcrun {} lists: {}",
                            args.join(" "),
                            show_some(l.sockets.iter())
                        ))
                    }
                })
            }
            Question::SsEnd {
                port: p,
                side,
                want,
            } => source::with_smcrun(&["ss", "-a", "--json"], |l: &Listing| {
                let end = l.sockets.iter().find(|s| {
                    connected(s)
                        && match side {
                            Side::Client => port(&s.peer) == Some(*p),
                            Side::Server => port(&s.local) == Some(*p),
                        }
                });
                match end {
                    None => NotYet(format!(
                        "smcrun ss -a --json shows no {} socket of port {p}: {}",
                        side.name(),
                        show_some(l.sockets.iter())
                    )),
                    Some(s) if end_shown(s) == *want => Yes(show(s)),
                    Some(s) => No(format!(
                        "{} socket is '{}', expected '{want}'",
                        side.name(),
                        end_shown(s)
                    )),
                }
            }),
            Question::SsOwners {
                port: p,
                server,
                client,
                n,
            } => source::with_smcrun(&["ss", "-p", "--json"], |l: &Listing| {
                let active = || l.sockets.iter().filter(|s| s.state == "ACTIVE");
                let srv = active()
                    .filter(|s| port(&s.local) == Some(*p) && owned_by(s, server))
                    .count();
                let cli = active()
                    .filter(|s| port(&s.peer) == Some(*p) && owned_by(s, client))
                    .count();
                let line = format!("{srv} sockets owned by {server}, {cli} by {client}");
                if srv >= *n && cli >= *n {
                    Yes(line)
                } else {
                    No(format!(
                        "smcrun ss -p --json names {server} as owner of {srv} and {client} of {cli} sockets on port {p}, expected {n} each"
                    ))
                }
            }),
        }
    }
}
