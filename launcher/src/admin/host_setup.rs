//! Host set-up through the kernel's netlink: soft-RoCE links, SMC user EIDs and the PNET table.
//!
//! Exit codes: 0 done (or already so), 1 the kernel refused or lacks a module, 125 the kernel's
//! version predates the interface (the SMC EID commands before 5.14), 2 bad usage (an
//! invalid UEID or PNET ID is rejected before anything is sent).
//!
//! Idempotence: adding what already exists (an rxe device of that name on that netdev, a UEID,
//! a PNET entry) and removing what is not there say so on stderr and exit 0, so set-up scripts can
//! run these commands unconditionally.

use crate::status::{Exit, Failure, Outcome};
use std::process::ExitCode;

use clap::{ArgGroup, Args, Subcommand};
use smcrun_kernel::error::{strerror, Error};
use smcrun_kernel::{kmod, pnet, rdma, smc_genl};

/// `smcrun setup ...`
#[derive(Subcommand, Debug)]
pub enum SetupCommand {
    /// Create a soft-RoCE (rxe) RDMA device on a network interface so SMC-R works without RDMA
    /// hardware; with --remove, delete it.
    SoftRoce(SoftRoceArgs),
}

/// `smcrun setup soft-roce` options.
#[derive(Args, Debug)]
pub struct SoftRoceArgs {
    /// Network interface to put the RDMA device on.
    #[arg(long, default_value = "lo")]
    netdev: String,
    /// Name of the RDMA device [default: rxe_NETDEV].
    #[arg(long)]
    name: Option<String>,
    /// Delete the device instead of creating it.
    #[arg(long)]
    remove: bool,
}

/// `smcrun ueid ...`: the user EIDs SMC-Rv2 peers must share.
#[derive(Subcommand, Debug)]
pub enum UeidCommand {
    /// List the user EIDs, one per line (`-j`: {"ueids": [...]}).
    Show(crate::cmd::linkgroup::JsonArgs),
    /// Add a user EID (1-32 characters of A-Z, 0-9, '.', '-').
    Add {
        /// The EID.
        ueid: String,
    },
    /// Remove a user EID.
    Del {
        /// The EID.
        ueid: String,
    },
    /// Remove all user EIDs.
    Flush,
}

/// `smcrun pnet ...`: the PNET table.
#[derive(Subcommand, Debug)]
pub enum PnetCommand {
    /// List the table: PNET ID, netdev, RDMA device, port (`-j`: {"pnet": [{pnetid, netdev,
    /// ibdev, ibport}]}, null where a row names none).
    Show(crate::cmd::linkgroup::JsonArgs),
    /// Put a network interface or an RDMA device port into a PNET ID.
    Add(PnetAddArgs),
    /// Remove every entry of a PNET ID.
    Del {
        /// The PNET ID.
        pnetid: String,
    },
    /// Empty the table.
    Flush,
}

/// `smcrun pnet add` options.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("device").required(true).args(["netdev", "ibdev"])))]
pub struct PnetAddArgs {
    /// PNET ID (1-16 letters or digits).
    pnetid: String,
    /// Network interface.
    #[arg(long)]
    netdev: Option<String>,
    /// RDMA or ISM device.
    #[arg(long)]
    ibdev: Option<String>,
    /// RDMA device port [default: 1].
    #[arg(long, requires = "ibdev", conflicts_with = "netdev", value_parser = clap::value_parser!(u8).range(1..=2))]
    port: Option<u8>,
}

fn usage(message: &str) -> Outcome {
    Err(Failure::new(Exit::Usage, message))
}

/// How to report one kernel errno of a change: its exit status and sentence.
struct Known {
    errno: i32,
    exit: Exit,
    message: String,
}

fn known(errno: i32, exit: Exit, message: String) -> Known {
    Known {
        errno,
        exit,
        message,
    }
}

/// Report a change: `done` on stdout when it worked; an errno listed in `known` with its own
/// sentence and exit status ([`Exit::Ok`] for "already so"); anything else as the kernel's
/// refusal.
fn report(result: Result<(), Error>, done: &str, known: &[Known]) -> Outcome {
    match result {
        Ok(()) => {
            println!("{done}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => match known.iter().find(|k| e.errno() == Some(k.errno)) {
            Some(k) if !e.is_not_permitted() && k.exit == Exit::Ok => {
                eprintln!("smcrun: {}", k.message);
                Ok(ExitCode::SUCCESS)
            }
            Some(k) if !e.is_not_permitted() => Err(Failure::new(k.exit, k.message.clone())),
            _ => Err(Failure::refused(&e)),
        },
    }
}

/// Run `smcrun setup`.
pub fn setup(c: SetupCommand) -> Outcome {
    match c {
        SetupCommand::SoftRoce(a) => soft_roce(&a),
    }
}

fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && !name.contains(['/', ' ', '\t', '\n', ':'])
        && name != "."
        && name != ".."
}

fn soft_roce(a: &SoftRoceArgs) -> Outcome {
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("rxe_{}", a.netdev));
    if !valid_ifname(&a.netdev) {
        return usage(&format!(
            "invalid network interface name {:?}: expected 1-15 characters without '/', ':' or blanks",
            a.netdev
        ));
    }
    if name.is_empty() || name.len() >= 64 || name.contains(['/', ' ']) {
        return usage(&format!(
            "invalid RDMA device name {name:?}: expected 1-63 characters without '/' or blanks"
        ));
    }
    let devices = match rdma::devices() {
        Ok(d) => d,
        // No ib_core yet: nothing to remove; creating will load it through the rxe link type.
        Err(e) if e.is_module_missing() => Vec::new(),
        Err(e) => return Err(Failure::refused(&e)),
    };
    let on_netdev = |d: &rdma::Device| {
        d.ports
            .iter()
            .any(|p| p.netdev.as_deref() == Some(a.netdev.as_str()))
    };
    if a.remove {
        let Some(dev) = devices.iter().find(|d| d.name == name) else {
            eprintln!("smcrun: no RDMA device named {name}; nothing to remove");
            return Ok(ExitCode::SUCCESS);
        };
        return report(
            rdma::del_link(dev.index, &name),
            &format!("removed RDMA device {name}"),
            &[],
        );
    }
    if let Some(dev) = devices.iter().find(|d| d.name == name) {
        if on_netdev(dev) || dev.ports.is_empty() {
            eprintln!(
                "smcrun: RDMA device {name} already exists on {}; nothing to do",
                a.netdev
            );
            return Ok(ExitCode::SUCCESS);
        }
        let other: Vec<_> = dev.ports.iter().filter_map(|p| p.netdev.clone()).collect();
        return Err(Failure::new(Exit::Failed, format!("an RDMA device named {name} already exists on {}, not on {}; pick another --name or remove it first", other.join(","),
            a.netdev)));
    }
    if let Some(dev) = devices.iter().find(|d| on_netdev(d)) {
        eprintln!(
            "smcrun: {} already has RDMA device {}; SMC-R can use it, nothing to do",
            a.netdev, dev.name
        );
        return Ok(ExitCode::SUCCESS);
    }
    let result = rdma::add_link(&name, "rxe", &a.netdev);
    if let Err(Error::ModuleMissing { availability, .. }) = &result {
        return Err(Failure::new(
            Exit::Failed,
            format!(
                "the kernel has no RDMA support (ib_core): {}",
                availability.advice("ib_core")
            ),
        ));
    }
    let rxe = kmod::availability("rdma_rxe");
    let refused_rxe = |errno| {
        format!(
            "the kernel refused to create rxe device {name} on {} ({}): {}; check the interface is up",
            a.netdev,
            strerror(errno),
            if rxe.present() {
                "soft-RoCE (rdma_rxe) is there".to_string()
            } else {
                rxe.advice("rdma_rxe")
            }
        )
    };
    report(
        result,
        &format!("created soft-RoCE RDMA device {name} on {}", a.netdev),
        &[
            known(
                libc::EEXIST,
                Exit::Ok,
                format!(
                    "an RDMA device named {name} or on {} already exists; nothing to do",
                    a.netdev
                ),
            ),
            known(
                libc::ENODEV,
                Exit::Failed,
                format!("no network interface named {}", a.netdev),
            ),
            known(libc::EINVAL, Exit::Failed, refused_rxe(libc::EINVAL)),
            known(
                libc::EOPNOTSUPP,
                Exit::Failed,
                refused_rxe(libc::EOPNOTSUPP),
            ),
        ],
    )
}

/// Run `smcrun ueid`.
pub fn ueid(c: UeidCommand) -> Outcome {
    // Check the value before touching the kernel: bad usage is exit 2 even without smc loaded.
    let checked = match &c {
        UeidCommand::Add { ueid } | UeidCommand::Del { ueid } => {
            if let Err(msg) = smc_genl::ueid_to_wire(ueid) {
                let upper = ueid.to_ascii_uppercase();
                let hint = if upper != *ueid && smc_genl::ueid_to_wire(&upper).is_ok() {
                    format!(" (did you mean {upper}?)")
                } else {
                    String::new()
                };
                return usage(&format!("{msg}{hint}"));
            }
            Some(ueid.clone())
        }
        _ => None,
    };
    let client = match smc_genl::SmcGenl::open() {
        Ok(c) => c,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let value = checked.unwrap_or_default();
    match c {
        UeidCommand::Show(j) => match client.ueid_dump() {
            Ok(list) if j.json => crate::cmd::format::print_json(&serde_json::json!({ "ueids": list })),
            Ok(list) => {
                for u in &list {
                    println!("{u}");
                }
                if list.is_empty() {
                    eprintln!("smcrun: no user EIDs set");
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => Err(Failure::refused(&e)),
        },
        UeidCommand::Add { .. } => report(
            client.ueid_add(&value),
            &format!("added UEID {value}"),
            &[
                known(
                    libc::EEXIST,
                    Exit::Ok,
                    format!("UEID {value} is already set; nothing to do"),
                ),
                known(
                    libc::ERANGE,
                    Exit::Failed,
                    format!("cannot add UEID {value}: the kernel's table is full (at most 8); remove one first"),
                ),
            ],
        ),
        UeidCommand::Del { .. } => report(
            client.ueid_remove(&value),
            &format!("removed UEID {value}"),
            &[
                known(
                    libc::ENOENT,
                    Exit::Ok,
                    format!("UEID {value} is not set; nothing to remove"),
                ),
                // s390 kernels report "removed the last UEID, the SEID is offered again" as EAGAIN.
                known(
                    libc::EAGAIN,
                    Exit::Ok,
                    format!("removed UEID {value} (the system EID is enabled again)"),
                ),
            ],
        ),
        UeidCommand::Flush => report(client.ueid_flush(), "removed all user EIDs", &[]),
    }
}

/// Run `smcrun pnet`.
pub fn pnet(c: PnetCommand) -> Outcome {
    let id = match &c {
        PnetCommand::Add(PnetAddArgs { pnetid, .. }) | PnetCommand::Del { pnetid } => {
            match pnet::normalize_pnetid(pnetid) {
                Ok(id) => id,
                Err(msg) => return usage(&msg),
            }
        }
        _ => String::new(),
    };
    let client = match pnet::Pnet::open() {
        Ok(c) => c,
        Err(e) => return Err(Failure::refused(&e)),
    };
    match c {
        PnetCommand::Show(j) => match client.show() {
            Ok(rows) if j.json => {
                crate::cmd::format::print_json(&serde_json::json!({ "pnet": rows }))
            }
            Ok(rows) => {
                println!("{:<16} {:<16} {:<16} Port", "PNET-ID", "Net-Dev", "IB-Dev");
                for r in rows {
                    println!(
                        "{:<16} {:<16} {:<16} {}",
                        r.pnetid,
                        r.netdev.as_deref().unwrap_or("-"),
                        r.ibdev.as_deref().unwrap_or("-"),
                        r.ibport.map_or("-".to_string(), |p| p.to_string())
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => Err(Failure::refused(&e)),
        },
        PnetCommand::Add(a) => {
            let (result, target) = match (&a.netdev, &a.ibdev) {
                (Some(n), _) => (client.add_netdev(&id, n), n.clone()),
                (None, Some(d)) => {
                    let port = a.port.unwrap_or(1);
                    (client.add_ibdev(&id, d, port), format!("{d} port {port}"))
                }
                (None, None) => return usage("pnet add needs --netdev or --ibdev"),
            };
            report(
                result,
                &format!("added {target} to PNET ID {id}"),
                &[
                    known(
                        libc::EEXIST,
                        Exit::Ok,
                        format!("{target} is already in PNET ID {id}; nothing to do"),
                    ),
                    known(
                        libc::EINVAL,
                        Exit::Failed,
                        format!("the kernel refused to add {target} to PNET ID {id}: check that the device exists and has no other PNET ID"),
                    ),
                ],
            )
        }
        PnetCommand::Del { .. } => report(
            client.del(&id),
            &format!("removed PNET ID {id}"),
            &[known(
                libc::ENOENT,
                Exit::Ok,
                format!("PNET ID {id} is not in the table; nothing to remove"),
            )],
        ),
        PnetCommand::Flush => report(client.flush(), "emptied the PNET table", &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_maps_known_errnos_and_keeps_refusals() {
        let exists = || Err(Error::from_errno("ADD_UEID", libc::EEXIST));
        let table = [
            known(libc::EEXIST, Exit::Ok, "already set".into()),
            known(libc::ERANGE, Exit::Failed, "full".into()),
        ];
        let status = |o: Outcome| o.map_err(|f| f.exit);
        assert_eq!(
            status(report(Ok(()), "done", &table)),
            Ok(ExitCode::SUCCESS)
        );
        assert_eq!(
            status(report(exists(), "done", &table)),
            Ok(ExitCode::SUCCESS)
        );
        let full = Err(Error::from_errno("ADD_UEID", libc::ERANGE));
        assert_eq!(status(report(full, "done", &table)), Err(Exit::Failed));
        let other = Err(Error::from_errno("ADD_UEID", libc::EIO));
        assert_eq!(status(report(other, "done", &table)), Err(Exit::Failed));
        // EPERM is never "already so", even if a table lists it.
        let eperm = Err(Error::from_errno("ADD_UEID", libc::EPERM));
        let lenient = [known(libc::EPERM, Exit::Ok, "fine".into())];
        assert_eq!(status(report(eperm, "done", &lenient)), Err(Exit::Failed));
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(valid_ifname("lo") && valid_ifname("eth0.100"));
        for bad in ["", "a/b", "has space", "sixteen-chars-xx", "..", "a:b"] {
            assert!(!valid_ifname(bad), "{bad}");
        }
    }
}
