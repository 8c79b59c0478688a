//! The run directory's layout: its path for a user (and whether `XDG_RUNTIME_DIR` may hold it),
//! and the report file's name in it, built on the stack (usable in a hook).

use crate::refusal::Refusal;
use rustix::fs::{self, Mode, OFlags};
use std::ffi::CStr;

/// Longest run directory path handled.
pub(crate) const PATH_MAX: usize = 512;

/// A path built on the stack, NUL-terminated.
pub struct PathBuf0 {
    buf: [u8; PATH_MAX],
    len: usize,
}

impl PathBuf0 {
    pub(crate) fn new() -> Self {
        PathBuf0 {
            buf: [0; PATH_MAX],
            len: 0,
        }
    }

    pub(crate) fn push(&mut self, s: &[u8]) -> Result<(), Refusal> {
        if self.len + s.len() >= PATH_MAX || s.contains(&0) {
            return Err(Refusal::TooLong);
        }
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
        Ok(())
    }

    fn push_u32(&mut self, mut n: u32) -> Result<(), Refusal> {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }

    /// The path as a C string.
    pub fn as_cstr(&self) -> &CStr {
        // SAFETY: push() never lets a NUL in and always leaves the byte after the end zero.
        unsafe { CStr::from_bytes_with_nul_unchecked(&self.buf[..=self.len]) }
    }

    /// The path's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The run directory of user `euid`, given the `XDG_RUNTIME_DIR` the process has (only an absolute
/// one counts; `use_xdg` false for a process that switched away from the uid it started with).
pub fn dir_path(xdg: Option<&[u8]>, euid: u32, use_xdg: bool) -> Result<PathBuf0, Refusal> {
    let mut p = PathBuf0::new();
    match xdg.filter(|x| use_xdg && x.first() == Some(&b'/')) {
        Some(x) => {
            p.push(x)?;
            p.push(b"/smcrun")?;
        }
        None if euid == 0 => p.push(b"/run/smcrun")?,
        None => {
            p.push(b"/tmp/smcrun-")?;
            p.push_u32(euid)?;
        }
    }
    Ok(p)
}

/// Whether `XDG_RUNTIME_DIR` may hold the run directory of user `euid`: an absolute path reached
/// without a symlink, naming a directory of `euid` that nobody else may write (as pam_systemd makes
/// `/run/user/UID`). A directory of another user (an environment inherited through `sudo -E`, or
/// set by someone else) is not, so no variable makes a process create its run directory or write
/// its reports where another user chose. (Raw system calls on the stack: usable in a hook.)
pub fn xdg_trusted(xdg: &[u8], euid: u32) -> bool {
    let mut p = PathBuf0::new();
    if xdg.first() != Some(&b'/') || p.push(xdg).is_err() {
        return false;
    }
    let Ok(fd) = fs::openat2(
        fs::CWD,
        p.as_cstr(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        fs::ResolveFlags::NO_SYMLINKS,
    ) else {
        return false;
    };
    fs::fstat(&fd).is_ok_and(|st| {
        st.st_mode & libc::S_IFMT == libc::S_IFDIR && st.st_uid == euid && st.st_mode & 0o022 == 0
    })
}

/// The report file's name, `PID.json`.
pub fn report_name(pid: u32) -> PathBuf0 {
    let mut p = PathBuf0::new();
    let _ = p.push_u32(pid);
    let _ = p.push(b".json");
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = |x: Option<&str>, uid, use_xdg| {
            String::from_utf8(
                dir_path(x.map(str::as_bytes), uid, use_xdg)
                    .unwrap()
                    .as_bytes()
                    .to_vec(),
            )
            .unwrap()
        };
        assert_eq!(
            p(Some("/run/user/1000"), 1000, true),
            "/run/user/1000/smcrun"
        );
        assert_eq!(p(Some("relative"), 1000, true), "/tmp/smcrun-1000");
        assert_eq!(p(Some("/run/user/0"), 65534, false), "/tmp/smcrun-65534");
        assert_eq!(p(None, 0, true), "/run/smcrun");
        assert_eq!(report_name(4242).as_bytes(), b"4242.json");
        assert_eq!(
            report_name(4242).as_cstr().to_bytes_with_nul(),
            b"4242.json\0"
        );
        let long = "/x".repeat(300);
        assert!(dir_path(Some(long.as_bytes()), 1, true).is_err());
    }

    #[test]
    fn only_a_private_xdg_directory_of_ones_own_is_used() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("smcrun-xdg-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let own = base.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
        let me = crate::open::euid();
        let t = |p: &std::path::Path, uid| xdg_trusted(p.as_os_str().as_encoded_bytes(), uid);
        assert!(t(&own, me));
        assert!(!t(&own, me + 1), "another user's directory");
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!t(&open, me), "a directory others may write");
        let link = base.join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(!t(&link, me), "a symlink");
        assert!(!t(&link.join("."), me), "a path through a symlink");
        assert!(!xdg_trusted(b"relative/dir", me));
        assert!(!t(&base.join("missing"), me));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
