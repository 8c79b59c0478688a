//! Cgroup scopes: `smcrun attach --cgroup PATH` makes every new TCP socket of that cgroup v2
//! subtree an SMC socket, with no restart, until `smcrun detach --cgroup PATH`. They are slots of
//! the pinned instance ([`crate::pinned`]), keyed by cgroup id (the directory's inode number,
//! never reused), the deepest attached ancestor of the socket's task deciding.

use crate::error::Error;
use crate::pinned::{self, Attached, Detached, Kind, Target};
use crate::rules::KernelPolicy;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The cgroup id of a cgroup v2 directory, refusing anything else.
pub fn cgroup_id(dir: &Path) -> Result<u64, Error> {
    let meta =
        std::fs::metadata(dir).map_err(|e| Error::io(format!("cgroup {}", dir.display()), e))?;
    if !meta.is_dir() {
        return Err(Error::new(format!(
            "cgroup {}: not a directory; expected a cgroup v2 directory such as /sys/fs/cgroup/system.slice/redis.service",
            dir.display()
        )));
    }
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| Error::new(format!("cgroup {}: the path has a NUL byte", dir.display())))?;
    // SAFETY: libc::statfs is plain integers: all zero bytes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is a statfs we own, both alive for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io(
            format!("cgroup {}", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    if st.f_type as i64 != CGROUP2_SUPER_MAGIC {
        return Err(Error::new(format!(
            "cgroup {}: not on a cgroup v2 file system; expected a directory under the cgroup2 mount",
            dir.display()
        )));
    }
    Ok(meta.ino())
}

/// Attaches `dir` (a cgroup v2 directory) with `policy` (`policy_text` its canonical form).
/// Refuses, attaching nothing, when no IPPROTO_SMC socket can be made.
pub fn attach(dir: &Path, policy_text: &str, policy: &KernelPolicy) -> Result<Attached, Error> {
    let id = cgroup_id(dir)?;
    let t = Target {
        kind: Kind::Cgroup,
        key: id,
        id,
        path: dir.to_path_buf(),
    };
    pinned::attach(&t, policy_text, policy)
}

/// Detaches `dir`. A cgroup that is not attached is an error naming what is.
pub fn detach(dir: &Path) -> Result<Detached, Error> {
    let id = cgroup_id(dir)?;
    pinned::detach(Kind::Cgroup, id, &format!("cgroup {}", dir.display()))
}
