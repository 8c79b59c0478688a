//! `smcrun rdma [DEV] [qp|cq|mr|pd|cm_id|ctx|srq] [--pid N] [--state S] [--json]`: RDMA resources
//! per device, like `rdma res show`: without a type the used count of every type per device,
//! with a type (or a filter) the objects themselves with their owner (a process, or the kernel
//! module that made them: SMC-R's QPs, CQs, MRs and PDs belong to "smc") and state.
//!
//! The kernel's RDMA netlink reports used counts but no maximums: those are device attributes
//! only the verbs interface answers, and they are read there ([`uverbs::limits`]) for QPs, CQs,
//! MRs, PDs and SRQs where the device lets this user open a context; elsewhere (and always for
//! CM ids and contexts, which have no device limit) the maximum is shown as unknown, `?`.
//! Without RDMA devices the view says "no RDMA devices" in one line and exits 1.

use crate::status::{Exit, Failure, Outcome};

use clap::Args;
use smcrun_kernel::rdma::{self, Device, ResourceKind, ResourceSummary};
use smcrun_kernel::uverbs::{self, Limits};
use smcrun_kernel::Error;

use crate::cmd::format::{self, Align, Table};
use smcrun_views::json::rdma::{Object, RdmaView};
use smcrun_views::rdma::{max, used};

/// `smcrun rdma` arguments.
#[derive(Args, Debug)]
pub struct RdmaArgs {
    /// A device name (e.g. rxe_lo) and/or a resource type: qp, cq, mr, pd, cm_id, ctx, srq.
    #[arg(value_name = "DEV|TYPE", num_args = 0..=2)]
    words: Vec<String>,
    /// Only objects created by this process.
    #[arg(long, value_name = "N")]
    pid: Option<u32>,
    /// Only objects in this state (QP: RESET INIT RTR RTS SQD SQE ERR; CM id: LISTEN, CONNECT, ...).
    #[arg(long, value_name = "S")]
    state: Option<String>,
    /// Print JSON: {"max_known": BOOL, "devices": [...], "objects": [...]}.
    #[arg(short = 'j', long)]
    json: bool,
}

/// What the positional words asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Device name.
    pub device: Option<String>,
    /// Resource type.
    pub kind: Option<ResourceKind>,
}

/// Split the words into a device and a type (a word that names a type is the type).
pub fn select(words: &[String]) -> Result<Selection, String> {
    let mut s = Selection::default();
    for w in words {
        match ResourceKind::from_name(w) {
            Some(k) if s.kind.is_none() => s.kind = Some(k),
            Some(_) => {
                return Err(format!(
                    "\"{w}\": a second resource type; give one of qp, cq, mr, pd, cm_id, ctx, srq"
                ))
            }
            None if s.device.is_none() => s.device = Some(w.clone()),
            None => {
                return Err(format!(
                "\"{w}\" is not a resource type; expected one of qp, cq, mr, pd, cm_id, ctx, srq"
            ))
            }
        }
    }
    Ok(s)
}

fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// Whether an object passes `--pid` and `--state` (states compare without case).
pub fn keep(o: &Object, pid: Option<u32>, state: Option<&str>) -> bool {
    let pid_ok = pid.is_none_or(|want| o.pid == Some(want));
    let state_ok = state.is_none_or(|want| o.state.is_some_and(|s| s.eq_ignore_ascii_case(want)));
    pid_ok && state_ok
}

fn owner_text(o: &Object) -> String {
    match (&o.kernel_owner, o.pid) {
        (Some(k), _) => format!("[{k}]"),
        (None, Some(pid)) => format!("pid {pid} {}", o.comm.as_deref().unwrap_or("(gone)")),
        (None, None) => "-".to_string(),
    }
}

/// The objects table.
pub fn objects_table(objects: &[Object]) -> Table {
    let mut t = Table::new(&[
        ("Dev", Align::Left),
        ("Type", Align::Left),
        ("Id", Align::Right),
        ("State", Align::Left),
        ("QP-Type", Align::Left),
        ("Owner", Align::Left),
    ]);
    for o in objects {
        t.row(vec![
            o.device.clone(),
            o.kind.to_string(),
            o.id.map_or_else(|| "-".to_string(), |i| i.to_string()),
            o.state.unwrap_or("-").to_string(),
            o.qp_type.unwrap_or("-").to_string(),
            owner_text(o),
        ]);
    }
    t
}

/// The summary line of one device, used/max per type as in seed 002's `rdma res show`:
/// `rxe_lo: pd 3/32764 cq 3/16384 ... cm_id 0/? ...` (`?`: no known maximum).
pub fn summary_line(s: &ResourceSummary, limits: Option<&Limits>) -> String {
    let mut out = format!("{}:", s.device);
    for k in ResourceKind::ALL {
        if let Some(n) = used(s, k) {
            match max(limits, k) {
                Some(m) => out.push_str(&format!(" {} {n}/{m}", k.name())),
                None => out.push_str(&format!(" {} {n}/?", k.name())),
            }
        }
    }
    out
}

fn port_text(d: &Device) -> String {
    d.ports
        .iter()
        .map(|p| {
            format!(
                "port {} {}{}",
                p.index,
                p.state.map_or("?", rdma::port_state),
                p.netdev
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" on {n}"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_devices(e: Option<&Error>) -> Outcome {
    let line = match e {
        Some(e) => format!("no RDMA devices ({e})"),
        None => "no RDMA devices (without RDMA hardware: smcrun setup soft-roce --netdev IF)"
            .to_string(),
    };
    Err(Failure::new(Exit::Failed, line))
}

/// Run `smcrun rdma`.
pub fn rdma(a: &RdmaArgs) -> Outcome {
    let sel = match select(&a.words) {
        Ok(s) => s,
        Err(e) => {
            return Err(Failure::of("smcrun rdma", Exit::Usage, e.to_string()));
        }
    };
    let devices = match rdma::devices() {
        Ok(d) if d.is_empty() => return no_devices(None),
        Ok(d) => d,
        Err(e) if e.is_module_missing() => return no_devices(Some(&e)),
        Err(e) => return Err(Failure::refused(&e)),
    };
    let devices: Vec<Device> = match &sel.device {
        None => devices,
        Some(name) => {
            let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
            let found: Vec<Device> = devices.into_iter().filter(|d| &d.name == name).collect();
            if found.is_empty() {
                return Err(Failure::of(
                    "smcrun rdma",
                    Exit::Failed,
                    format!(
                        "no RDMA device named \"{name}\"; the devices are: {}",
                        names.join(", ")
                    ),
                ));
            }
            found
        }
    };
    let summaries = match rdma::dump_raw(rdma::op::RES_GET, None)
        .and_then(|raw| rdma::parse_resource_summary(&raw))
    {
        Ok(s) => s,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let limits: Vec<Option<Limits>> = devices
        .iter()
        .map(|d| uverbs::limits(&d.name).ok())
        .collect();
    let list_objects = a.json || sel.kind.is_some() || a.pid.is_some() || a.state.is_some();
    let mut objects = Vec::new();
    if list_objects {
        let kinds: Vec<ResourceKind> = match sel.kind {
            Some(k) => vec![k],
            None => ResourceKind::ALL.to_vec(),
        };
        for d in &devices {
            for &k in &kinds {
                // A kind this kernel cannot dump (older kernels lack ctx and srq) has no objects
                // to show; the summary still counts what the kernel counts.
                let Ok(raw) = rdma::dump_raw(k.op(), Some(d.index)) else {
                    continue;
                };
                match rdma::parse_resources(&raw, k) {
                    Ok(rs) => objects.extend(
                        rs.iter()
                            .map(|r| Object::new(r, comm))
                            .filter(|o| keep(o, a.pid, a.state.as_deref())),
                    ),
                    Err(e) => return Err(Failure::refused(&e)),
                }
            }
        }
    }
    let shown: Vec<&ResourceSummary> = summaries
        .iter()
        .filter(|s| devices.iter().any(|d| d.index == s.device_index))
        .collect();
    if a.json {
        return format::print_json(&RdmaView::new(&devices, &limits, &shown, objects));
    }
    if sel.kind.is_none() && a.pid.is_none() && a.state.is_none() {
        let mut out: Vec<String> = devices
            .iter()
            .zip(&limits)
            .map(|(d, l)| {
                let line = match shown.iter().find(|s| s.device_index == d.index) {
                    Some(s) => format!("{}  ({})", summary_line(s, l.as_ref()), port_text(d)),
                    None => format!("{}: no resource summary  ({})", d.name, port_text(d)),
                };
                // Device and interface names are the kernel's (and whoever renamed them).
                format::safe(&line).into_owned()
            })
            .collect();
        out.push(if limits.iter().any(Option::is_none) {
            "(used/max; max unknown where the device's verbs interface (ib_uverbs) does not answer)"
                .to_string()
        } else {
            "(used/max; cm_id and ctx have no device maximum)".to_string()
        });
        return format::print_lines(out);
    }
    if objects.is_empty() {
        format::print_lines(["no matching RDMA objects"])
    } else {
        objects_table(&objects).print()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::rdma::Resource;

    fn fixture(name: &str) -> Vec<u8> {
        crate::cmd::format::fixture("smcr", name)
    }

    #[test]
    fn words_pick_a_device_and_a_type() {
        let w = |v: &[&str]| select(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            w(&["rxe_lo", "qp"]).unwrap(),
            Selection {
                device: Some("rxe_lo".into()),
                kind: Some(ResourceKind::Qp)
            }
        );
        assert_eq!(w(&["cm_id"]).unwrap().kind, Some(ResourceKind::CmId));
        assert!(w(&["qp", "cq"]).is_err());
        assert!(w(&["rxe_lo", "nonsense"])
            .unwrap_err()
            .contains("\"nonsense\""));
    }

    #[test]
    fn captured_summary_counts_smc_r_resources() {
        let s = rdma::parse_resource_summary(&fixture("rdma_RES_GET")).unwrap();
        assert_eq!(
            summary_line(&s[0], None),
            "rxe_lo: pd 3/? cq 3/? qp 3/? cm_id 0/? mr 4/? ctx 0/? srq 0/?"
        );
        assert_eq!(used(&s[0], ResourceKind::Qp), Some(3));
        let l = Limits {
            max_qp: 65536,
            max_cq: 16384,
            max_mr: 262144,
            max_pd: 32764,
            max_srq: 262144,
        };
        assert_eq!(
            summary_line(&s[0], Some(&l)),
            "rxe_lo: pd 3/32764 cq 3/16384 qp 3/65536 cm_id 0/? mr 4/262144 ctx 0/? srq 0/262144"
        );
    }

    #[test]
    fn captured_qps_show_owner_and_state() {
        let qps = rdma::parse_resources(&fixture("rdma_RES_QP_GET"), ResourceKind::Qp).unwrap();
        let objs: Vec<Object> = qps.iter().map(|r| Object::new(r, |_| None)).collect();
        // Two RC QPs of SMC-R's loopback link (client and server ends), ready to send, and
        // ib_core's GSI QP 1.
        let smc: Vec<&Object> = objs
            .iter()
            .filter(|o| o.kernel_owner.as_deref() == Some("smc"))
            .collect();
        assert_eq!(smc.len(), 2);
        assert!(smc
            .iter()
            .all(|o| o.state == Some("RTS") && o.qp_type == Some("RC")));
        let gsi = objs.iter().find(|o| o.id == Some(1)).unwrap();
        assert_eq!(gsi.qp_type, Some("GSI"));
        assert_eq!(gsi.kernel_owner.as_deref(), Some("ib_core"));
        assert!(objs.iter().all(|o| keep(o, None, Some("rts"))));
        assert!(!keep(&objs[0], Some(1), None));
        assert!(!keep(&objs[0], None, Some("ERR")));
        let lines = objects_table(&objs).render();
        assert!(
            lines[1].contains("RTS") && lines[1].ends_with("[smc]"),
            "{lines:?}"
        );
        let j = serde_json::to_value(&objs[0]).unwrap();
        assert_eq!(j["type"], "qp");
        assert_eq!(j["kernel_owner"], "smc");
    }

    #[test]
    fn user_objects_name_their_process() {
        let r = Resource {
            kind: ResourceKind::Mr,
            device_index: 0,
            device: "rxe_lo".into(),
            number: Some(7),
            pid: Some(42),
            kern_name: None,
            object_type: None,
            state: None,
        };
        let o = Object::new(&r, |p| (p == 42).then(|| "ib_send_bw".to_string()));
        assert_eq!(owner_text(&o), "pid 42 ib_send_bw");
        assert!(keep(&o, Some(42), None));
        assert!(!keep(&o, None, Some("RTS")), "an MR has no state to match");
    }
}
