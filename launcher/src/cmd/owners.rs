//! Which processes own a socket: `/proc/PID/fd/*` links read `socket:[INODE]`, and the inode is
//! what sock_diag reports for an SMC socket. smcss cannot show this; `smcrun ss -p` can.
//! Processes that vanish or whose fds are not readable (other users' without privilege) are
//! skipped: the answer covers what this user may see.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;

pub use smcrun_views::ss::Owner;

/// Owners of the sockets in `wanted`, by inode, read from the proc file system at `proc_root`.
pub fn owners_in(proc_root: &Path, wanted: &HashSet<u64>) -> HashMap<u64, Vec<Owner>> {
    let mut out: HashMap<u64, Vec<Owner>> = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    let Ok(procs) = fs::read_dir(proc_root) else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut name: Option<String> = None;
        for f in fds.flatten() {
            let Some(fd) = f.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(target) = fs::read_link(f.path()) else {
                continue;
            };
            let Some(inode) = smcrun_sys::sock::link_inode(target.as_os_str().as_encoded_bytes())
            else {
                continue;
            };
            if !wanted.contains(&inode) {
                continue;
            }
            let name = name
                .get_or_insert_with(|| {
                    fs::read_to_string(p.path().join("comm"))
                        .map(|s| s.trim_end_matches('\n').to_string())
                        .unwrap_or_else(|_| "?".to_string())
                })
                .clone();
            out.entry(inode).or_default().push(Owner {
                pid,
                name,
                fd: Some(fd),
            });
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|o| (o.pid, o.fd));
    }
    out
}

/// Owners of the sockets in `wanted`, from `/proc`.
pub fn owners(wanted: &HashSet<u64>) -> HashMap<u64, Vec<Owner>> {
    owners_in(Path::new("/proc"), wanted)
}

/// Owners of the sockets in `wanted`, from `/proc`, and for the sockets /proc shows no owner
/// of (another pid namespace's, a process this user cannot read), the running agent's record
/// of the process that holds them.
pub fn owners_with_agent(
    wanted: &HashSet<u64>,
    agent: Option<&smcrun_views::agent_state::State>,
) -> HashMap<u64, Vec<Owner>> {
    let mut out = owners(wanted);
    if let Some(st) = agent {
        for s in &st.sockets {
            if s.inode != 0 && wanted.contains(&s.inode) && !out.contains_key(&s.inode) {
                out.insert(
                    s.inode,
                    vec![Owner {
                        pid: s.pid,
                        name: s.comm.clone(),
                        fd: None,
                    }],
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_views::ss::text::owners_text;
    use std::os::fd::AsRawFd;

    #[test]
    fn finds_this_process_as_owner_of_its_socket() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let inode = smcrun_classify::socket_inode(s.as_raw_fd()).unwrap();
        let found = owners(&HashSet::from([inode]));
        let me = std::process::id();
        let list = &found[&inode];
        assert!(
            list.iter()
                .any(|o| o.pid == me && o.fd == Some(s.as_raw_fd() as u32)),
            "{list:?}"
        );
        assert!(
            owners_text(list).starts_with("users:((\""),
            "{}",
            owners_text(list)
        );
        // An inode nobody has is not found.
        assert!(owners(&HashSet::from([u64::MAX])).is_empty());
    }
}
