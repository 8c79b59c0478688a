//! Every BPF scope on the host, for `smcrun attach --list`, `smcrun ps` and the exporter: the
//! pinned cgroup and network-namespace scopes and the process trees of running `smcrun --bpf` commands (found by their
//! program's name among the kernel's loaded programs; reading them needs CAP_SYS_ADMIN).

use crate::error::Error;
use crate::layout::Counters;
use crate::maps::{self, ProgramCount};
use crate::pinned::{self, Attachment};
use crate::sys::{self, Kind};
use crate::tree;
use aya_obj::generated::{bpf_map_info, bpf_prog_info};
use std::os::fd::{AsFd, OwnedFd};

/// A running `smcrun --bpf` command's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeInfo {
    /// The kernel's id of its socket program.
    pub program_id: u32,
    /// When it was loaded, in nanoseconds since boot (the kernel's `load_time`).
    pub loaded_ns_since_boot: u64,
    /// The processes in the tree now.
    pub processes: Vec<u32>,
    /// Sockets converted and kept TCP.
    pub counters: Counters,
    /// Sockets converted per program.
    pub programs: Vec<ProgramCount>,
}

/// All scopes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes {
    /// Attached cgroups.
    pub cgroups: Vec<Attachment>,
    /// Attached network namespaces.
    pub netns: Vec<Attachment>,
    /// Process trees.
    pub trees: Vec<TreeInfo>,
}

/// The process trees of running `smcrun --bpf` commands.
pub fn trees() -> Result<Vec<TreeInfo>, Error> {
    let mut out = Vec::new();
    let mut id = 0;
    while let Some(next) =
        sys::next_id(Kind::Prog, id).map_err(|e| Error::io("listing BPF programs", e))?
    {
        id = next;
        let Ok(fd) = sys::fd_by_id(Kind::Prog, id) else {
            continue; // unloaded meanwhile
        };
        let Ok(info) = sys::obj_info::<bpf_prog_info>(fd.as_fd()) else {
            continue;
        };
        if sys::name_of(&info.name) != tree::PROGRAM {
            continue;
        }
        let mut maps_by_name: Vec<(String, OwnedFd)> = Vec::new();
        for mid in sys::prog_map_ids(fd.as_fd()).unwrap_or_default() {
            if let Ok(m) = sys::fd_by_id(Kind::Map, mid) {
                if let Ok(mi) = sys::obj_info::<bpf_map_info>(m.as_fd()) {
                    maps_by_name.push((sys::name_of(&mi.name), m));
                }
            }
        }
        let map = |n: &str| {
            maps_by_name
                .iter()
                .find(|(m, _)| m == n)
                .map(|(_, fd)| fd.as_fd())
        };
        let (Some(t), Some(c), Some(b)) = (map("tree"), map("counters"), map("by_program")) else {
            continue;
        };
        out.push(TreeInfo {
            program_id: id,
            loaded_ns_since_boot: info.load_time,
            processes: tree::tree_pids(t)?,
            counters: maps::counters(c, 0)?,
            programs: maps::by_program(b, 0)?,
        });
    }
    Ok(out)
}

/// Every scope: the attached cgroups and network namespaces, and the process trees.
pub fn all() -> Result<Scopes, Error> {
    Ok(Scopes {
        cgroups: pinned::list(pinned::Kind::Cgroup)?,
        netns: pinned::list(pinned::Kind::Netns)?,
        trees: trees()?,
    })
}
