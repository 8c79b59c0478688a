//! The IPPROTO_SMC socket BPF mode makes before attaching (no attachment without one) and holds
//! while attached: an open SMC socket keeps the smc module loaded, so the sockets the hook makes
//! IPPROTO_SMC cannot start failing with EPROTONOSUPPORT under a running program.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// IPPROTO_SMC (Linux 6.11).
pub const IPPROTO_SMC: i32 = 256;

/// Makes an AF_INET IPPROTO_SMC stream socket (close-on-exec).
pub fn open() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            IPPROTO_SMC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is the socket just made (checked non-negative), which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether an IPPROTO_SMC socket can be made now (it is closed again).
pub fn probe() -> io::Result<()> {
    open().map(drop)
}

/// What to do about a failed [`open`]: for a missing protocol, what this kernel allows (load the
/// module only where there is one to load; see `smcrun_kernel::kmod`).
pub fn fix_for(e: &io::Error) -> String {
    let release = smcrun_kernel::features::kernel_release();
    let ipproto = smcrun_kernel::features::IPPROTO_SMC;
    match e.raw_os_error() {
        // an SMC kernel older than IPPROTO_SMC: no module helps
        Some(libc::EPROTONOSUPPORT) if ipproto.missing_in(&release) == Some(true) => {
            ipproto.lacking(&release)
        }
        Some(libc::EPROTONOSUPPORT) | Some(libc::EAFNOSUPPORT) | Some(libc::ESOCKTNOSUPPORT) => {
            smcrun_kernel::kmod::availability("smc").advice("smc")
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "a seccomp filter or an LSM refuses SMC sockets here".to_string()
        }
        _ => "see the error above".to_string(),
    }
}
