//! The SMC-D suite's questions (`checks-smcd.sh`, and the SMC-D counters `checks-k73.sh` and
//! `checks-bpf.sh` judge): how the kernel's SMC-D counters grew between two `smcrun stats
//! --json` snapshots, whether a demo ran over loopback-ism, whether `ss -D` and `linkgroup`
//! agree on the DMBs and link groups, what `device`, `info` and `monitor` say of loopback-ism.

use crate::source;
use crate::ss::{Listing, Socket};
use crate::stats::{with_growth, Growth};
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_kernel::smc_genl::LoopbackEvidence;
use smcrun_views::demo::DemoReport;
use smcrun_views::linkgroup::json::{DevicesView, InfoView, LinkGroupsView, LoopbackView};
use smcrun_views::stats::json::StatsView;

// (the prefix names the view in vmcheck's flat list of subcommands)
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
pub enum Question {
    /// The kernel's counters grew from BEFORE to AFTER (saved `smcrun stats --json`) by exactly
    /// what each option given says (SMC-D successes per role, SMC-R successes, fallbacks and
    /// PEERNOSMC fallbacks per role, SMC-D connections), and SMC-D moved at least --min-bytes
    /// each way. Prints the growth.
    StatsSmcd {
        before: String,
        after: String,
        /// SMC-D client successes.
        #[arg(long)]
        client: Option<i64>,
        /// SMC-D server successes.
        #[arg(long)]
        server: Option<i64>,
        /// SMC-R successes (both roles).
        #[arg(long)]
        smcr: Option<i64>,
        #[arg(long)]
        client_fallbacks: Option<i64>,
        #[arg(long)]
        server_fallbacks: Option<i64>,
        /// Client fallbacks with 0x03010000 (PEERNOSMC).
        #[arg(long)]
        client_peernosmc: Option<i64>,
        /// Server fallbacks with 0x03010000 (PEERNOSMC).
        #[arg(long)]
        server_peernosmc: Option<i64>,
        /// SMC-D connections (`.smcd.summary.smc_connections`).
        #[arg(long)]
        connections: Option<i64>,
        /// SMC-D bytes received and sent, each at least this many.
        #[arg(long)]
        min_bytes: Option<i64>,
    },
    /// SNAPSHOT (a saved `smcrun stats --json`) counts N SMC-D connections: what `smcrun stats
    /// -m smcd`'s text showed.
    StatsSmcdConnections { snapshot: String, n: u64 },
    /// FILE, a saved `smcrun demo --json`, ran N connections with intact data, both ends of each
    /// over SMC-D on DEVICE with a link group.
    DemoSmcd {
        file: String,
        n: usize,
        #[arg(long, default_value = "loopback-ism")]
        device: String,
    },
    /// The DMBs of a saved `smcrun ss -D --json` (SS_D) against a saved `smcrun linkgroup --json`
    /// (LINKGROUP) and `smcrun ss --json` (SS): -D lists only SMC-D sockets, at least
    /// --min-active active ones, each with a DMB (non-zero tokens, one GID on both ends, its
    /// token the peer token of exactly one other socket, its link group one of LINKGROUP's); the
    /// SMC-D link groups with connections are on loopback-ism (--chid), SMC-Dv2 with --eid, one
    /// GID and DMB bytes, and count as many connections as SS shows SMC-D sockets. Prints a
    /// DMB token last.
    SmcdDmbs {
        ss_d: String,
        linkgroup: String,
        ss: String,
        #[arg(long)]
        min_active: usize,
        #[arg(long)]
        chid: u32,
        #[arg(long)]
        eid: String,
    },
    /// FILE, a saved `smcrun device --json`, shows loopback-ism in use (seen from its link
    /// groups, at least one) and, as 6.12 does, no SMC-D device in the kernel's dump.
    DeviceLoopback { file: String },
    /// FILE, a saved `smcrun info --json`, shows SMC-Dv2, UEID and loopback-ism.
    InfoSmcd { file: String, ueid: String },
}

/// The SMC-D checks' account of `g`, for their messages.
fn smcd_line(g: &Growth) -> String {
    format!(
        "kernel: SMC-D succ client +{} server +{}, SMC-R succ +{}, fallback client +{} (PEERNOSMC +{}) server +{} (PEERNOSMC +{}), SMC-D connections +{} rx +{} tx +{} bytes",
        g.smcd[0],
        g.smcd[1],
        g.smcr[0] + g.smcr[1],
        g.fallback[0],
        g.peernosmc[0],
        g.fallback[1],
        g.peernosmc[1],
        g.smcd_connections,
        g.smcd_bytes[0],
        g.smcd_bytes[1]
    )
}

/// The socket as a message shows it: `STATE LOCAL->PEER MODE`.
fn brief(s: &Socket) -> String {
    format!("{} {}->{} {}", s.state, s.local, s.peer, s.mode)
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::StatsSmcd {
                before,
                after,
                client,
                server,
                smcr,
                client_fallbacks,
                server_fallbacks,
                client_peernosmc,
                server_peernosmc,
                connections,
                min_bytes,
            } => with_growth(before, after, |g| {
                let exact = [
                    ("SMC-D client successes", client, g.smcd[0]),
                    ("SMC-D server successes", server, g.smcd[1]),
                    ("SMC-R successes", smcr, g.smcr[0] + g.smcr[1]),
                    ("client fallbacks", client_fallbacks, g.fallback[0]),
                    ("server fallbacks", server_fallbacks, g.fallback[1]),
                    (
                        "client PEERNOSMC fallbacks",
                        client_peernosmc,
                        g.peernosmc[0],
                    ),
                    (
                        "server PEERNOSMC fallbacks",
                        server_peernosmc,
                        g.peernosmc[1],
                    ),
                    ("SMC-D connections", connections, g.smcd_connections),
                ];
                let mut why: Vec<String> = exact
                    .iter()
                    .filter_map(|(what, want, got)| match want {
                        Some(w) if w != got => Some(format!("{what} grew by {got}, expected {w}")),
                        _ => None,
                    })
                    .collect();
                if let Some(min) = min_bytes {
                    if g.smcd_bytes[0] < *min || g.smcd_bytes[1] < *min {
                        why.push(format!(
                            "SMC-D rx bytes +{} / tx bytes +{}, expected >= {min} each",
                            g.smcd_bytes[0], g.smcd_bytes[1]
                        ));
                    }
                }
                let line = smcd_line(g);
                if why.is_empty() {
                    Yes(line)
                } else {
                    No(format!("{}; {line}", why.join("; ")))
                }
            }),
            Question::StatsSmcdConnections { snapshot, n } => {
                source::with_file(snapshot, |s: &StatsView| {
                    let got = s.smcd.summary.smc_connections;
                    if got == *n {
                        Yes(format!("{got} SMC-D connections"))
                    } else {
                        No(format!(
                            "{snapshot}: .smcd.summary.smc_connections is {got}, expected {n}"
                        ))
                    }
                })
            }
            Question::DemoSmcd { file, n, device } => {
                source::with_file(file, |d: &DemoReport| demo_smcd(d, *n, device))
            }
            Question::SmcdDmbs {
                ss_d,
                linkgroup,
                ss,
                min_active,
                chid,
                eid,
            } => source::with_file(ss_d, |d: &Listing| {
                source::with_file(linkgroup, |g: &LinkGroupsView| {
                    source::with_file(ss, |all: &Listing| dmbs(d, g, all, *min_active, *chid, eid))
                })
            }),
            Question::DeviceLoopback { file } => source::with_file(file, |d: &DevicesView| {
                let lo = d.smcd_loopback.as_ref();
                let line = format!(
                    "smcd_loopback {}, {} SMC-D devices dumped",
                    lo.map_or("none".into(), shown),
                    d.smcd_devices.len()
                );
                let in_use = lo.is_some_and(|l| {
                    l.name == "loopback-ism"
                        && l.seen_from == LoopbackEvidence::LinkGroups
                        && l.link_groups >= 1
                });
                if !in_use {
                    No(format!(
                        "loopback-ism not seen in use while SMC-D connections are open: {line}"
                    ))
                } else if lo.is_some_and(|l| l.in_device_dump) || !d.smcd_devices.is_empty() {
                    No(format!(
                        "loopback-ism or SMC-D devices in the kernel's dump (6.12 dumps none): {line}"
                    ))
                } else {
                    Yes(line)
                }
            }),
            Question::InfoSmcd { file, ueid } => source::with_file(file, |i: &InfoView| {
                let listed = i.ueids.iter().flatten().any(|u| u == ueid);
                let lo = i.smcd_loopback.as_ref().map_or("none", |l| &l.name);
                let line = format!(
                    "SMC-Dv2 {}, UEID {ueid} listed {listed}, loopback {lo}",
                    i.smcd_v2
                );
                if i.smcd_v2 && listed && lo == "loopback-ism" {
                    Yes(line)
                } else {
                    No(line)
                }
            }),
        }
    }
}

/// loopback-ism as a message shows it.
fn shown(l: &LoopbackView) -> String {
    format!(
        "{} seen from {} with {} link groups, in the dump {}",
        l.name,
        source::compact(&l.seen_from),
        l.link_groups,
        l.in_device_dump
    )
}

fn demo_smcd(d: &DemoReport, n: usize, device: &str) -> Answer {
    let total = d.sockets.len();
    let smcd = d.sockets.iter().filter(|s| s.mode == "SMC-D").count();
    let other = d
        .sockets
        .iter()
        .find(|s| s.mode != "SMC-D")
        .map_or("-".into(), |s| {
            format!("{} {} {}: {}", s.side, s.socket, s.mode, s.why)
        });
    let line = format!(
        "{} connections, data intact {}, {smcd} of {total} sockets SMC-D (smc_d {}); first other: {other}",
        d.connections, d.data_intact, d.smc_d
    );
    let on_device = d
        .sockets
        .iter()
        .filter(|s| {
            s.device.as_deref() == Some(device)
                && s.link_group.as_ref().is_some_and(|g| g.len() == 8)
        })
        .count();
    if usize::from(d.connections) != n {
        No(format!(
            "smcrun demo ran {} connections, asked for {n}: {line}",
            d.connections
        ))
    } else if !d.data_intact {
        No(format!("smcrun demo: data NOT intact: {line}"))
    } else if total != 2 * n {
        No(format!(
            "smcrun demo reported {total} sockets, expected {}: {line}",
            2 * n
        ))
    } else if smcd != total || d.smc_d != total {
        No(format!(
            "smcrun demo: only {smcd} of {total} sockets SMC-D: {other}"
        ))
    } else if on_device != total {
        let all: Vec<String> = d
            .sockets
            .iter()
            .map(|s| {
                format!(
                    "{}/{}",
                    s.device.as_deref().unwrap_or("-"),
                    s.link_group.as_deref().unwrap_or("-")
                )
            })
            .collect();
        No(format!(
            "smcrun demo names {device} and a link group for {on_device} of {total} sockets: {}",
            all.join(" ")
        ))
    } else {
        Yes(line)
    }
}

const ZERO_TOKEN: &str = "0000000000000000";

fn dmbs(
    d: &Listing,
    g: &LinkGroupsView,
    all: &Listing,
    min_active: usize,
    chid: u32,
    eid: &str,
) -> Answer {
    let not_smcd: Vec<&Socket> = d.sockets.iter().filter(|s| s.mode != "SMCD").collect();
    let active: Vec<&Socket> = d.sockets.iter().filter(|s| s.state == "ACTIVE").collect();
    let count = |f: &dyn Fn(&Socket) -> bool| active.iter().filter(|s| f(s)).count();
    let no_dmb = count(&|s| s.dmbinfo.is_none());
    let zero = count(&|s| {
        s.dmbinfo
            .as_ref()
            .is_some_and(|m| m.token == ZERO_TOKEN || m.peer_token == ZERO_TOKEN)
    });
    let two_gids = count(&|s| s.dmbinfo.as_ref().is_some_and(|m| m.my_gid != m.peer_gid));
    let uncrossed = count(&|s| {
        let peers = |t: &str| {
            active
                .iter()
                .filter(|o| o.dmbinfo.as_ref().is_some_and(|m| m.peer_token == t))
                .count()
        };
        s.dmbinfo.as_ref().is_some_and(|m| peers(&m.token) != 1)
    });
    let lost = count(&|s| {
        s.dmbinfo.as_ref().is_some_and(|m| {
            g.smcd_link_groups
                .iter()
                .filter(|l| l.id == m.lgr_id)
                .count()
                != 1
        })
    });
    let busy: Vec<_> = g.smcd_link_groups.iter().filter(|l| l.conns > 0).collect();
    let elsewhere = busy
        .iter()
        .filter(|l| l.chid != chid || l.device != "loopback-ism")
        .count();
    let mut versions: Vec<String> = busy
        .iter()
        .map(|l| l.version.map_or("null".into(), |v| v.to_string()))
        .collect();
    versions.sort();
    versions.dedup();
    let mut eids: Vec<&str> = busy
        .iter()
        .map(|l| l.eid.as_deref().unwrap_or("null"))
        .collect();
    eids.sort();
    eids.dedup();
    let odd = busy
        .iter()
        .filter(|l| l.gid != l.peer_gid || l.dmb_bytes.unwrap_or(0) == 0)
        .count();
    let lg_conns: u64 = g.smcd_link_groups.iter().map(|l| u64::from(l.conns)).sum();
    let ss_conns = all
        .sockets
        .iter()
        .filter(|s| s.mode == "SMCD" && !["LISTEN", "INIT", "CLOSED"].contains(&&*s.state))
        .count();
    let token = active
        .first()
        .and_then(|s| s.dmbinfo.as_ref())
        .map_or("none", |m| &m.token);
    let (versions, eids) = (versions.join(","), eids.join(","));
    let line = format!(
        "ss -D: {} non-SMCD, {} active, {no_dmb} without DMB, {zero} zero tokens, {two_gids} two GIDs, {uncrossed} tokens not crossed, {lost} link ids not in linkgroup; linkgroup: {} SMC-D groups with connections, {elsewhere} not loopback-ism, versions {versions}, EIDs {eids}, {odd} with two GIDs or no DMB bytes; {lg_conns} connections (ss: {ss_conns}); token {token}",
        not_smcd.len(),
        active.len(),
        busy.len()
    );
    let mut why = Vec::new();
    if !not_smcd.is_empty() {
        let shown: Vec<String> = not_smcd.iter().take(4).map(|s| brief(s)).collect();
        why.push(format!(
            "smcrun ss -D --json lists {} sockets that are not SMCD: {}",
            not_smcd.len(),
            shown.join("; ")
        ));
    }
    if active.len() < min_active {
        why.push(format!(
            "smcrun ss -D --json shows {} active sockets, expected >= {min_active}",
            active.len()
        ));
    }
    for (n, what) in [
        (no_dmb, "active SMC-D sockets without dmbinfo"),
        (zero, "sockets with a zero DMB token or peer token"),
        (
            two_gids,
            "sockets whose peer GID differs from their own (loopback-ism has one GID)",
        ),
        (
            uncrossed,
            "DMB tokens that are not exactly one other socket's peer token",
        ),
        (
            lost,
            "sockets whose link group (lgr_id) is not one SMC-D group of smcrun linkgroup --json",
        ),
    ] {
        if n != 0 {
            why.push(format!("smcrun ss -D --json: {n} {what}"));
        }
    }
    if busy.is_empty() {
        why.push("smcrun linkgroup --json lists no SMC-D link group with connections".into());
    }
    if elsewhere != 0 {
        why.push(format!(
            "smcrun linkgroup --json: {elsewhere} SMC-D link groups not on loopback-ism (CHID {chid})"
        ));
    }
    if versions != "2" {
        why.push(format!(
            "smcrun linkgroup --json: SMC-D link groups of version '{versions}', expected 2 (SMC-Dv2)"
        ));
    }
    if eids != eid {
        why.push(format!(
            "smcrun linkgroup --json: SMC-D groups negotiated EID '{eids}', expected {eid}"
        ));
    }
    if odd != 0 {
        why.push(format!(
            "smcrun linkgroup --json: {odd} SMC-D groups with a peer GID not their own or no DMB bytes"
        ));
    }
    if lg_conns != ss_conns as u64 {
        why.push(format!(
            "smcrun linkgroup --json counts {lg_conns} SMC-D connections, smcrun ss --json shows {ss_conns} SMCD sockets"
        ));
    }
    if why.is_empty() {
        Yes(line)
    } else {
        No(format!("{}; {line}", why.join("; ")))
    }
}
