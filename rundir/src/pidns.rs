//! Pid namespaces: a report names its process by its pid in the namespace it runs in (a
//! container's redis-server is pid 1), and a reader in another namespace (root on the host, with
//! the container's run directory mounted where it reads) must not take that number for one of
//! its own processes: `/proc/1` there is the host's init, and judging the report by it would
//! call a running program dead and remove its report. Each report carries its namespace
//! ([`own`] of the writer); [`Locator`] finds the reader's number for the same process.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// The initial pid namespace's inode (the kernel's `PROC_PID_INIT_INO`): a reader there sees
/// every process of the machine, so a process it cannot find is gone.
pub const INIT_PID_NS: u64 = 0xEFFF_FFFC;

/// The calling process's pid namespace: the inode of `/proc/self/ns/pid`.
pub fn own() -> Option<u64> {
    ns_of("self")
}

fn ns_of(pid: &str) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// A process's pid in the innermost namespace it belongs to (the last `NSpid:` field of
/// `/proc/PID/status`).
fn innermost_pid(pid: u32) -> Option<u32> {
    smcrun_sys::status::field(&format!("/proc/{pid}/status"), "NSpid:", |pids| {
        pids.split_whitespace().last()?.parse().ok()
    })
}

/// Where a report's process is, as the reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Under this pid in the reader's `/proc` (the report's own pid when it is the reader's
    /// namespace).
    At(u32),
    /// In another namespace, and no process of the reader's `/proc` is it: gone, when the reader
    /// is in the initial namespace (it sees every process).
    Gone,
    /// In another namespace the reader cannot see into (the reader is itself in a container):
    /// whether it runs cannot be told from here.
    Invisible,
}

/// Finds the reader's pid for processes of other pid namespaces; `/proc` is read once, at the
/// first question about another namespace.
#[derive(Debug, Default)]
pub struct Locator {
    own: Option<u64>,
    others: Option<HashMap<(u64, u32), u32>>,
}

impl Locator {
    /// A locator for the calling process's namespace.
    pub fn new() -> Locator {
        Locator {
            own: own(),
            others: None,
        }
    }

    /// Where the process that reported `pid` in namespace `ns` (0: unknown, taken as the
    /// reader's) is.
    pub fn locate(&mut self, pid: u32, ns: u64) -> Seen {
        if ns == 0 || Some(ns) == self.own || self.own.is_none() {
            return Seen::At(pid);
        }
        let others = self.others.get_or_insert_with(|| scan(self.own));
        match others.get(&(ns, pid)) {
            Some(p) => Seen::At(*p),
            None if self.own == Some(INIT_PID_NS) => Seen::Gone,
            None => Seen::Invisible,
        }
    }

    /// For a pid of the reader's: its namespace and its pid there, when that is another
    /// namespace than the reader's (a container's process, as `smcrun why HOSTPID` is asked).
    pub fn inner(&self, pid: u32) -> Option<(u64, u32)> {
        let ns = ns_of(&pid.to_string())?;
        if Some(ns) == self.own {
            return None;
        }
        Some((ns, innermost_pid(pid)?))
    }
}

/// (namespace, pid there) -> the reader's pid, for every process of the reader's `/proc` in
/// another namespace.
fn scan(own: Option<u64>) -> HashMap<(u64, u32), u32> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some(ns) = ns_of(&pid.to_string()) else {
            continue;
        };
        if Some(ns) == own {
            continue;
        }
        if let Some(inner) = innermost_pid(pid) {
            out.insert((ns, inner), pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_namespace_is_the_report_pid() {
        let mut l = Locator::new();
        let me = std::process::id();
        assert_eq!(l.locate(me, own().unwrap()), Seen::At(me));
        assert_eq!(l.locate(me, 0), Seen::At(me));
        assert_eq!(l.inner(me), None);
    }

    #[test]
    fn an_unknown_namespace_is_not_this_one() {
        let mut l = Locator::new();
        // No namespace has inode 1: nothing there is found, and nothing is taken for pid 1 here.
        let seen = l.locate(1, 1);
        assert_ne!(seen, Seen::At(1));
        if own() == Some(INIT_PID_NS) {
            assert_eq!(seen, Seen::Gone);
        }
    }
}
