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

use crate::cmd::format;
use smcrun_views::rdma::json::{Object, RdmaView};
use smcrun_views::rdma::keep;
use smcrun_views::rdma::text::{objects_table, port_text, summary_line};

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
        format::print_table(&objects_table(&objects))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
