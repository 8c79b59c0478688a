//! The facts of the running system that doctor's checks look at ([`Host::read`]): the modules,
//! what `socket()` does with SMC, the kernel's SMC and RDMA telemetry, the PNET table, the
//! sysctls, RLIMIT_MEMLOCK and the network devices.

use smcrun_kernel::kmod::{self, Availability};
use smcrun_kernel::pnet;

use super::{Host, Probe};
use crate::snapshot::{self, Part};

fn probe(family: libc::c_int, protocol: libc::c_int) -> Probe {
    // SAFETY: socket/close on a descriptor owned here.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, protocol);
        if fd >= 0 {
            libc::close(fd);
            Probe::Works
        } else {
            Probe::Refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
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
        let af_smc = probe(43, 0);
        let ipproto_smc = probe(libc::AF_INET, 256);
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
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct it is given.
        let memlock = if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0 {
            let f = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
            (f(lim.rlim_cur), f(lim.rlim_max))
        } else {
            (None, None)
        };
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
