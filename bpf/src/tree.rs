//! The process-tree scope of `smcrun --bpf -- COMMAND`: its own copy of the programs, the
//! command's pid in the `tree` map, its descendants added at fork and removed when they exit.
//! Nothing is pinned: the attachment lives exactly as long as the [`TreeScope`] value (the fds
//! it holds), which also holds the SMC socket that keeps the smc module loaded.

use crate::error::Error;
use crate::layout::Counters;
use crate::loader::{self, Instance};
use crate::maps::{self, ProgramCount};
use crate::rules::KernelPolicy;
use crate::{module_hold, sys};
use std::os::fd::OwnedFd;

/// The program (and kernel object) name tree scopes are found by.
pub const PROGRAM: &str = "smcrun_tree";

/// An attached process-tree scope.
#[derive(Debug)]
pub struct TreeScope {
    inst: Instance,
    links: Vec<OwnedFd>,
    _smc: OwnedFd,
}

impl TreeScope {
    /// Attaches a scope holding `root` (a tgid) and its future descendants, with `policy`.
    /// Refuses, attaching nothing, when no IPPROTO_SMC socket can be made.
    pub fn attach(root: u32, policy: &KernelPolicy) -> Result<TreeScope, Error> {
        let smc = module_hold::open().map_err(|e| {
            Error::io(
                "SMC is not usable: socket(AF_INET, SOCK_STREAM, IPPROTO_SMC) failed (nothing was attached)",
                e,
            )
        })?;
        let inst = loader::load(&[PROGRAM, "smcrun_fork", "smcrun_exit"])?;
        maps::write_policy(
            inst.map("rules")?.fd(),
            inst.map("policies")?.fd(),
            0,
            policy,
        )?;
        maps::put(inst.map("tree")?.fd(), &root, &0u32)?;
        // Fork and exit tracking first, so no descendant made in between is missed.
        let mut links = Vec::new();
        for p in ["smcrun_fork", "smcrun_exit", PROGRAM] {
            links.push(inst.attach(p)?);
        }
        Ok(TreeScope {
            inst,
            links,
            _smc: smc,
        })
    }

    /// Takes a process out of the scope (the holder takes itself out).
    pub fn remove(&self, tgid: u32) -> Result<(), Error> {
        sys::map_delete(self.inst.map("tree")?.fd(), &tgid.to_ne_bytes())
            .map(drop)
            .map_err(|e| Error::io("writing the tree map", e))
    }

    /// The processes in the scope now.
    pub fn processes(&self) -> Result<Vec<u32>, Error> {
        tree_pids(self.inst.map("tree")?.fd())
    }

    /// Sockets converted and kept TCP so far.
    pub fn counters(&self) -> Result<Counters, Error> {
        maps::counters(self.inst.map("counters")?.fd(), 0)
    }

    /// Sockets converted per program so far.
    pub fn programs(&self) -> Result<Vec<ProgramCount>, Error> {
        maps::by_program(self.inst.map("by_program")?.fd(), 0)
    }

    /// How many links hold the attachment (3 while attached).
    pub fn links(&self) -> usize {
        self.links.len()
    }
}

/// The tgids in a `tree` map, sorted.
pub fn tree_pids(map: std::os::fd::BorrowedFd<'_>) -> Result<Vec<u32>, Error> {
    let mut pids: Vec<u32> = sys::map_keys(map, 4)
        .map_err(|e| Error::io("listing the tree map", e))?
        .iter()
        .map(|k| u32::from_ne_bytes([k[0], k[1], k[2], k[3]]))
        .collect();
    pids.sort_unstable();
    Ok(pids)
}
