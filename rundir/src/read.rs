//! Reading reports: what `smcrun ps` and `smcrun why` (and the exporter and the agent) do.

use crate::layout::{dir_path, report_name, xdg_trusted, PathBuf0};
use crate::open::{euid, open_dir, open_dir_of};
use crate::refusal::{Refusal, Stage};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs;
use smcrun_report::{ParseError, ProcessReport};

/// The largest report read. A real one is far smaller: at most [`RECENT_CONNECTIONS`]
/// connections and [`TOP_ENDPOINTS`] endpoints of a few hundred bytes each, and two paths of
/// at most 4 KiB, so under 200 KiB; a file larger than this was not written by smcrun's
/// runtime, and is not read (a 300 MB sparse file would otherwise be read whole).
///
/// [`RECENT_CONNECTIONS`]: smcrun_report::RECENT_CONNECTIONS
/// [`TOP_ENDPOINTS`]: smcrun_report::TOP_ENDPOINTS
pub const MAX_REPORT_BYTES: u64 = 4 << 20;

/// The run directory of the user running the tool.
pub struct RunDir {
    fd: OwnedFd,
    /// Whose it is: its reports must be this user's.
    owner: u32,
    /// Its path, for messages.
    pub path: String,
}

/// The effective uid process `pid` runs as now (from `/proc/PID/status`).
pub fn euid_of(pid: u32) -> Option<u32> {
    smcrun_sys::status::field(&format!("/proc/{pid}/status"), "Uid:", |uids| {
        uids.split_whitespace().nth(1)?.parse().ok()
    })
}

/// The current user's run directory, as the processes of this user write it.
fn own_path() -> Result<PathBuf0, String> {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR");
    let xdg = xdg.as_ref().map(|x| x.as_encoded_bytes());
    let me = euid();
    dir_path(xdg, me, xdg.is_some_and(|x| xdg_trusted(x, me))).map_err(|e| e.to_string())
}

/// Where the current user's reports are (the path).
pub fn path() -> Result<String, String> {
    Ok(String::from_utf8_lossy(own_path()?.as_bytes()).into_owned())
}

impl RunDir {
    /// Opens the current user's run directory; `Ok(None)` when it does not exist.
    pub fn open() -> Result<Option<RunDir>, String> {
        let p = own_path()?;
        let path = String::from_utf8_lossy(p.as_bytes()).into_owned();
        match open_dir(p.as_cstr(), false) {
            Ok(fd) => Ok(Some(RunDir {
                fd,
                owner: euid(),
                path,
            })),
            Err(Refusal::Io(Stage::OpenDir, e)) if e == libc::ENOENT => Ok(None),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    /// The pids that have a report, in order.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(&self.fd, 0) else {
            return pids;
        };
        let Ok(mut dir) = fs::Dir::new(dup) else {
            return pids;
        };
        while let Some(Ok(e)) = dir.read() {
            let name = e.file_name().to_bytes();
            if let Some(pid) = name
                .strip_suffix(b".json")
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse().ok())
            {
                pids.push(pid);
            }
        }
        pids.sort_unstable();
        pids
    }

    /// Reads process `pid`'s report: `Ok(None)` when it registered but wrote no numbers yet.
    /// A report caught while being rewritten is read again (a few times). A process that
    /// registered here, switched uid and then exec'd (`runuser`, `setpriv`, `su -c`) writes its
    /// numbers into its new uid's run directory instead: that report is read when this one is
    /// empty (see `RunDir::switched`).
    pub fn report(&self, pid: u32) -> Result<Option<ProcessReport>, String> {
        match self.own_report(pid)? {
            Some(r) => Ok(Some(r)),
            None => Ok(self.switched(pid)),
        }
    }

    /// The report in this directory alone.
    fn own_report(&self, pid: u32) -> Result<Option<ProcessReport>, String> {
        let name = report_name(pid);
        let shown = format!("{}/{pid}.json", self.path);
        let mut last = ParseError::Torn;
        for attempt in 0..5 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let bytes = self.read_file(&name).map_err(|e| format!("{shown}: {e}"))?;
            match smcrun_report::parse(&bytes) {
                Ok(Some(r)) if r.pid != pid => {
                    return Err(format!("{shown}: it says it is pid {}; ignoring it", r.pid))
                }
                Ok(r) => return Ok(r),
                Err(e @ ParseError::Version(_)) => return Err(format!("{shown}: {e}")),
                Err(e) => last = e,
            }
        }
        Err(format!("{shown}: {last}"))
    }

    /// The bytes of the report file `name`: a regular file of the directory's owner with one
    /// link, opened without following a symlink and without blocking (a FIFO planted under
    /// the name is refused, never waited on), of at most [`MAX_REPORT_BYTES`].
    fn read_file(&self, name: &PathBuf0) -> Result<Vec<u8>, String> {
        use smcrun_sys::file::{kind, open_regular_at, read_bounded, NotRead};
        let (file, st) = match open_regular_at(Some(self.fd.as_fd()), name.as_cstr(), false) {
            Ok(f) => f,
            Err(NotRead::Io(e)) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err("it is a symlink, not a report; not read".into())
            }
            Err(e) => return Err(format!("{e}; not read")),
        };
        if st.st_uid != self.owner || st.st_nlink != 1 {
            return Err(format!(
                "it is {} of uid {} with {} links, not a report of uid {} with one; not read",
                kind(st.st_mode),
                st.st_uid,
                st.st_nlink,
                self.owner
            ));
        }
        read_bounded(file, MAX_REPORT_BYTES).map_err(|e| match e {
            NotRead::TooBig(..) => format!("{e}: not a report of smcrun's; not read"),
            e => e.to_string(),
        })
    }

    /// The report of process `pid`, which registered here but wrote no numbers, when it now
    /// runs as another uid and wrote its numbers there: it switched uid and then exec'd, and
    /// the new program (whose runtime starts afresh, as that uid) opened its own run
    /// directory. That directory is found as the process's runtime found it (its uid and the
    /// `XDG_RUNTIME_DIR` it was started with, if that one is trusted for its uid), checked as
    /// that uid's, and its report is taken only for this very process (its pid and its start
    /// time). Only a reader allowed into another user's directory (root) finds anything.
    fn switched(&self, pid: u32) -> Option<ProcessReport> {
        let uid = euid_of(pid)?;
        if uid == self.owner {
            return None;
        }
        let started = crate::process::start_ticks(&format!("/proc/{pid}/stat"))?;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let xdg = environ
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(b"XDG_RUNTIME_DIR="));
        let p = dir_path(xdg, uid, xdg.is_some_and(|x| xdg_trusted(x, uid))).ok()?;
        let other = RunDir {
            fd: open_dir_of(p.as_cstr(), uid).ok()?,
            owner: uid,
            path: String::from_utf8_lossy(p.as_bytes()).into_owned(),
        };
        other
            .own_report(pid)
            .ok()
            .flatten()
            .filter(|r| r.start_ticks == started)
    }

    /// Removes process `pid`'s report (of a process that is gone).
    pub fn remove(&self, pid: u32) {
        let _ = fs::unlinkat(&self.fd, report_name(pid).as_cstr(), fs::AtFlags::empty());
    }
}
