//! The facts of the running system that doctor's checks look at ([`Host::read`]): the modules,
//! what `socket()` does with SMC, the kernel's SMC and RDMA telemetry, the PNET table, the
//! sysctls, RLIMIT_MEMLOCK and the network devices.

use rustix::process::{getrlimit, Resource};
use smcrun_kernel::kmod::{self, Availability};
use smcrun_kernel::pnet;
use smcrun_sys::smc;

use super::{Host, Probe};
use crate::snapshot::{self, Part};

/// Whether `socket()` makes a stream socket of `family` and `protocol`, and if not its errno.
fn probe(family: i32, protocol: i32) -> Probe {
    use rustix::net::{socket_with, AddressFamily, Protocol, SocketFlags, SocketType};
    let family = AddressFamily::from_raw(family as u16);
    let protocol = std::num::NonZeroU32::new(protocol as u32).map(Protocol::from_raw);
    match socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, protocol) {
        Ok(_closed_on_drop) => Probe::Works,
        Err(e) => Probe::Refused(e.raw_os_error()),
    }
}

impl Host {
    /// The running system's facts. Module states are taken before `socket(AF_SMC)` is tried
    /// (which makes the kernel load smc where it can).
    pub fn read() -> Host {
        let smc = kmod::availability("smc");
        // A kernel without module support and without modules.builtin (the test bed's own builds)
        // shows a built-in smc_diag only by answering: its sock_diag handler is the proof.
        let smc_diag = match kmod::availability("smc_diag") {
            a if !a.present() && smcrun_kernel::sock_diag::dump_raw(0).is_ok() => {
                Availability::BuiltIn
            }
            a => a,
        };
        let ib_core = kmod::availability("ib_core");
        let af_smc = probe(smc::AF_SMC, 0);
        let ipproto_smc = probe(libc::AF_INET, smc::IPPROTO_SMC);
        use snapshot::{Collector, Collectors};
        let snap = snapshot::read(
            [
                Collector::Counters,
                Collector::Info,
                Collector::Topology,
                Collector::Rdma,
            ]
            .into_iter()
            .fold(Collectors::NONE, |s, c| s.with(c, true)),
        );
        let pnet = match pnet::Pnet::open().and_then(|p| p.show()) {
            Ok(r) => Part::Read(r),
            Err(e) => Part::from_error(&e),
        };
        let lim = getrlimit(Resource::Memlock);
        let memlock = (lim.current, lim.maximum);
        let netdevs = std::fs::read_dir("/sys/class/net")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        Host {
            release: kmod::kernel_release(),
            smc,
            smc_diag,
            af_smc,
            ipproto_smc,
            counters: snap.counters,
            info: snap.info,
            topology: snap.topology,
            rdma: snap.rdma,
            ib_core,
            pnet,
            sysctls: snapshot::read_sysctls(),
            memlock,
            netdevs,
        }
    }
}
