//! Hidden `smcrun __capture DIR`: save the kernel's raw netlink replies (every datagram of a dump,
//! concatenated exactly as received) as `DIR/<name>.bin`, so the kernel crate's parsers can be tested
//! on what a real SMC kernel sends. A dump the kernel refuses is skipped with a line on stderr;
//! the exit code is 1 only if DIR cannot be written or nothing at all could be captured.

use crate::status::{Exit, Failure, Outcome};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use smcrun_kernel::smc_genl::{self, cmd, SmcGenl};
use smcrun_kernel::{pnet, rdma, sock_diag, Error};

/// `smcrun __capture` arguments.
#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory to write the `.bin` files into (created if missing).
    dir: PathBuf,
}

/// Capture names, in order; each is a file `<name>.bin`.
const SMC_COMMANDS: &[u8] = &[
    cmd::GET_SYS_INFO,
    cmd::GET_STATS,
    cmd::GET_FBACK_STATS,
    cmd::GET_LGR_SMCR,
    cmd::GET_LINK_SMCR,
    cmd::GET_DEV_SMCR,
    cmd::GET_LGR_SMCD,
    cmd::GET_DEV_SMCD,
    cmd::DUMP_UEID,
    cmd::DUMP_SEID,
];

const SOCK_DIAG_EXTS: &[u8] = &[0, 1, 2, 8, 0xf];

/// NLDEV dumps of all devices at once.
const RDMA_OPS: &[u16] = &[rdma::op::GET, rdma::op::RES_GET];

/// NLDEV dumps the kernel answers per device only (it wants the device index): the dumps of all
/// devices are saved one after the other in `rdma_<OP>.bin` (ports: `rdma_PORT_GET_<index>.bin`).
const RDMA_DEVICE_OPS: &[u16] = &[
    rdma::op::RES_QP_GET,
    rdma::op::RES_CQ_GET,
    rdma::op::RES_MR_GET,
    rdma::op::RES_PD_GET,
];

struct Capture<'a> {
    dir: &'a Path,
    written: usize,
    failed_write: bool,
}

impl Capture<'_> {
    fn save(&mut self, name: &str, reply: Result<Vec<u8>, Error>) {
        match reply {
            Ok(bytes) => {
                let path = self.dir.join(format!("{name}.bin"));
                match std::fs::write(&path, &bytes) {
                    Ok(()) => {
                        println!("{} ({} bytes)", path.display(), bytes.len());
                        self.written += 1;
                    }
                    Err(e) => {
                        eprintln!("smcrun __capture: cannot write {}: {e}", path.display());
                        self.failed_write = true;
                    }
                }
            }
            Err(e) => eprintln!("smcrun __capture: skipped {name}: {e}"),
        }
    }
}

/// Run `smcrun __capture DIR`.
pub fn run(a: &CaptureArgs) -> Outcome {
    if let Err(e) = std::fs::create_dir_all(&a.dir) {
        return Err(Failure::of(
            "smcrun __capture",
            Exit::Failed,
            format!("cannot create {}: {e}", a.dir.display()),
        ));
    }
    let mut c = Capture {
        dir: &a.dir,
        written: 0,
        failed_write: false,
    };
    match SmcGenl::open() {
        Ok(client) => {
            for &command in SMC_COMMANDS {
                let name = format!("smc_{}", smc_genl::command_name(command));
                c.save(&name, client.dump_raw(command));
            }
        }
        Err(e) => eprintln!("smcrun __capture: skipped all SMC_GEN_NETLINK dumps: {e}"),
    }
    match pnet::Pnet::open() {
        Ok(p) => c.save("smc_pnetid_GET", p.dump_raw()),
        Err(e) => eprintln!("smcrun __capture: skipped smc_pnetid_GET: {e}"),
    }
    for &ext in SOCK_DIAG_EXTS {
        c.save(&format!("sock_diag_ext{ext}"), sock_diag::dump_raw(ext));
    }
    for &op in RDMA_OPS {
        c.save(
            &format!("rdma_{}", rdma::op_name(op)),
            rdma::dump_raw(op, None),
        );
    }
    match rdma::devices() {
        Ok(devices) if devices.is_empty() => {
            eprintln!("smcrun __capture: skipped per-device RDMA dumps: no RDMA devices")
        }
        Ok(devices) => {
            for d in &devices {
                c.save(
                    &format!("rdma_PORT_GET_{}", d.index),
                    rdma::dump_raw(rdma::op::PORT_GET, Some(d.index)),
                );
            }
            for &op in RDMA_DEVICE_OPS {
                let all: Result<Vec<Vec<u8>>, Error> = devices
                    .iter()
                    .map(|d| rdma::dump_raw(op, Some(d.index)))
                    .collect();
                c.save(
                    &format!("rdma_{}", rdma::op_name(op)),
                    all.map(|v| v.concat()),
                );
            }
        }
        Err(e) => eprintln!("smcrun __capture: skipped per-device RDMA dumps: {e}"),
    }
    if c.failed_write || c.written == 0 {
        return Err(Failure::of(
            "smcrun __capture",
            Exit::Failed,
            format!("{} files written to {}", c.written, a.dir.display()),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
