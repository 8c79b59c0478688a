//! The questions about SMC's link groups and what they run on: `smcrun linkgroup`, `link`,
//! `device`, `info` and `rdma --json`, each against the others (the same connections and links
//! seen by each view) and the test bed's set-up (its soft-RoCE device, its UEID).

use crate::source;
use crate::ss::Listing;
use crate::Answer::{self, No, NotYet, Yes};
use clap::Subcommand;
use smcrun_views::linkgroup::json::{DevicesView, InfoView, LinkGroupsView, LinksView};
use smcrun_views::rdma::json::RdmaView;
use std::collections::BTreeSet;

/// What a check asks of the link groups and what they run on.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a saved `smcrun linkgroup --json`, counts no connection in any link group (SMC-R
    /// or SMC-D). Its line starts with the count, for the drain's log.
    LinkgroupIdle { file: String },
    /// FILE, a saved `smcrun linkgroup --json`, counts as many connections as `smcrun ss --json`
    /// shows SMC-R sockets with one (not LISTEN, INIT or CLOSED) now; not yet while they differ.
    LinkgroupSs { file: String },
    /// FILE, a saved `smcrun linkgroup --json`: the groups with connections are a client's and a
    /// server's (CLNT and SERV: both ends in this host) and negotiated EID. Prints their links.
    LinkgroupBothEnds { file: String, eid: String },
    /// `smcrun link --json` lists as many ACTIVE links on DEVICE over NETDEV as FILE, a saved
    /// `smcrun linkgroup --json`, has links.
    LinkActive {
        file: String,
        device: String,
        netdev: String,
    },
    /// `smcrun device --json` shows SMC-R device DEVICE's first port ACTIVE (waits while not);
    /// with --netdev over that net device, with --links carrying at least one link.
    DeviceActive {
        device: String,
        #[arg(long)]
        netdev: Option<String>,
        #[arg(long)]
        links: bool,
    },
    /// `smcrun info --json`: SMC-Rv2 capable, UEID set, at least one SMC-R device.
    InfoSmcrV2 { ueid: String },
    /// `smcrun rdma --json`: one RTS RC QP owned by `smc` per link of FILE (a saved `smcrun
    /// linkgroup --json`), DEVICE's QP used count equal to its QPs listed, an MR owned by `smc`,
    /// and DEVICE's maximums known (QP max above 0, MRs used within their max).
    RdmaLinks { file: String, device: String },
}

/// Connections counted in all link groups, SMC-R and SMC-D.
fn conns(l: &LinkGroupsView) -> u64 {
    let r = l.link_groups.iter().map(|g| u64::from(g.conns));
    let d = l.smcd_link_groups.iter().map(|g| u64::from(g.conns));
    r.chain(d).sum()
}

/// Links of all SMC-R link groups.
fn links(l: &LinkGroupsView) -> usize {
    l.link_groups.iter().map(|g| g.links.len()).sum()
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::LinkgroupIdle { file } => source::with_file(file, |l: &LinkGroupsView| {
                let n = conns(l);
                let line = format!("{n} connections in link groups");
                if n == 0 {
                    Yes(line)
                } else {
                    No(line)
                }
            }),
            Question::LinkgroupSs { file } => source::with_file(file, |l: &LinkGroupsView| {
                let lgc: u64 = l.link_groups.iter().map(|g| u64::from(g.conns)).sum();
                source::with_smcrun(&["ss", "--json"], |ss: &Listing| {
                    let ssc = ss
                        .sockets
                        .iter()
                        .filter(|s| {
                            s.mode == "SMCR" && !["LISTEN", "INIT", "CLOSED"].contains(&&*s.state)
                        })
                        .count() as u64;
                    if lgc == ssc {
                        Yes(format!("{lgc} connections (ss: {ssc} SMC-R sockets)"))
                    } else {
                        NotYet(format!(
                            "smcrun linkgroup --json counts {lgc} connections, smcrun ss --json shows {ssc} SMC-R sockets"
                        ))
                    }
                })
            }),
            Question::LinkgroupBothEnds { file, eid } => {
                source::with_file(file, |l: &LinkGroupsView| {
                    let used = l.link_groups.iter().filter(|g| g.conns > 0);
                    let roles: BTreeSet<&str> = used.clone().map(|g| &*g.role).collect();
                    let eids: BTreeSet<&str> = used.filter_map(|g| g.eid.as_deref()).collect();
                    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
                    let eids = eids.into_iter().collect::<Vec<_>>().join(",");
                    let line = format!("roles {roles}, {} links, eid {eids}", links(l));
                    if roles != "CLNT,SERV" {
                        No(format!("linkgroup --json: groups with connections have roles '{roles}', expected CLNT,SERV ({line})"))
                    } else if eids != *eid {
                        No(format!(
                            "linkgroup --json: negotiated EID '{eids}', expected {eid} ({line})"
                        ))
                    } else {
                        Yes(line)
                    }
                })
            }
            Question::LinkActive {
                file,
                device,
                netdev,
            } => source::with_file(file, |l: &LinkGroupsView| {
                source::with_smcrun(&["link", "--json"], |k: &LinksView| {
                    let nl = k
                        .links
                        .iter()
                        .filter(|k| {
                            k.state == "ACTIVE" && k.ib_dev == *device && k.net_dev == *netdev
                        })
                        .count();
                    if nl == links(l) {
                        Yes(format!("{nl} active links on {device}/{netdev}"))
                    } else {
                        No(format!(
                            "smcrun link --json lists {nl} active links on {device}/{netdev}, linkgroup --json has {} links",
                            links(l)
                        ))
                    }
                })
            }),
            Question::DeviceActive {
                device,
                netdev,
                links: with_links,
            } => match source::smcrun::<DevicesView>(&["device", "--json"]) {
                Err(e) => NotYet(e),
                Ok(d) => {
                    let port = d
                        .smcr_devices
                        .iter()
                        .filter(|d| d.ib_dev == *device)
                        .filter_map(|d| d.ports.first())
                        .find(|p| p.state == "ACTIVE");
                    let shown: Vec<String> = d
                        .smcr_devices
                        .iter()
                        .flat_map(|d| {
                            d.ports.iter().map(move |p| {
                                format!(
                                    "{} port {} {} on {} ({} links)",
                                    d.ib_dev, p.port, p.state, p.net_dev, p.links
                                )
                            })
                        })
                        .collect();
                    match port {
                        Some(p)
                            if netdev.iter().all(|n| p.net_dev == *n)
                                && (!with_links || p.links >= 1) =>
                        {
                            Yes(format!(
                                "{device} port 1 ACTIVE on {}, {} links",
                                p.net_dev, p.links
                            ))
                        }
                        _ => NotYet(format!(
                            "smcrun device --json: {device} port 1 not ACTIVE{}{}: [{}]",
                            netdev
                                .as_ref()
                                .map(|n| format!(" on {n}"))
                                .unwrap_or_default(),
                            if *with_links { " with links" } else { "" },
                            shown.join("; ")
                        )),
                    }
                }
            },
            Question::InfoSmcrV2 { ueid } => {
                source::with_smcrun(&["info", "--json"], |i: &InfoView| {
                    let ueids = i.ueids.as_deref().unwrap_or_default();
                    let line = format!(
                        "smcr_v2 {}, ueids {ueids:?}, smcr_devices {}",
                        i.smcr_v2, i.smcr_devices
                    );
                    if i.smcr_v2 && ueids.contains(ueid) && i.smcr_devices >= 1 {
                        Yes(line)
                    } else {
                        No(format!(
                        "smcrun info --json: {line}; expected SMC-Rv2, UEID {ueid}, an SMC-R device"
                    ))
                    }
                })
            }
            Question::RdmaLinks { file, device } => {
                source::with_file(file, |l: &LinkGroupsView| {
                    source::with_smcrun(&["rdma", "--json"], |r: &RdmaView| {
                        rdma_links(r, links(l), device)
                    })
                })
            }
        }
    }
}

/// What `rdma-links` asks of `r`, with `links` the SMC-R links the link groups have.
fn rdma_links(r: &RdmaView, links: usize, device: &str) -> Answer {
    let Some(dev) = r.devices.iter().find(|d| d.name == device) else {
        return No(format!("smcrun rdma --json has no device {device}"));
    };
    let is = |o: &&smcrun_views::rdma::json::Object, kind: &str| o.kind == kind;
    let smc = |o: &&smcrun_views::rdma::json::Object| o.kernel_owner.as_deref() == Some("smc");
    let qps = r
        .objects
        .iter()
        .filter(|o| {
            is(o, "qp")
                && smc(o)
                && o.state.as_deref() == Some("RTS")
                && o.qp_type.as_deref() == Some("RC")
        })
        .count();
    let listed = r
        .objects
        .iter()
        .filter(|o| is(o, "qp") && o.device == device)
        .count();
    let mrs = r.objects.iter().filter(|o| is(o, "mr") && smc(o)).count();
    let res = |k: &str| dev.resources.get(k);
    let qp_used = res("qp").and_then(|u| u.used);
    let qp_max = res("qp").and_then(|u| u.max);
    let (mr_used, mr_max) = (
        res("mr").and_then(|u| u.used),
        res("mr").and_then(|u| u.max),
    );
    let (qp_used_, qp_max_, mr_used_, mr_max_) = (
        or_null(qp_used),
        or_null(qp_max),
        or_null(mr_used),
        or_null(mr_max),
    );
    let line = format!(
        "{qps} smc RTS QPs for {links} links; {device} qp used {qp_used_}, {listed} listed; {mrs} smc MRs; max known {}, qp max {qp_max_}, mr {mr_used_}/{mr_max_}",
        dev.max_known
    );
    let mut why = Vec::new();
    if qps != links {
        why.push(format!(
            "{qps} RTS RC QPs owned by smc, linkgroup --json has {links} links"
        ));
    }
    if qp_used != Some(listed as u64) {
        why.push(format!(
            "{device} qp used {qp_used_} but {listed} QPs listed"
        ));
    }
    if mrs == 0 {
        why.push("no MR owned by smc".into());
    }
    let within = matches!((mr_used, mr_max), (Some(u), Some(m)) if u64::from(m) >= u);
    if !dev.max_known || !matches!(qp_max, Some(m) if m > 0) || !within {
        why.push(format!(
            "{device} maximums known {}, qp max {qp_max_}, mr used {mr_used_} of max {mr_max_}",
            dev.max_known
        ));
    }
    if why.is_empty() {
        Yes(line)
    } else {
        No(format!("smcrun rdma --json: {} ({line})", why.join("; ")))
    }
}

/// A figure the view may leave out, as its JSON shows it.
fn or_null<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("null".into(), |v| v.to_string())
}
