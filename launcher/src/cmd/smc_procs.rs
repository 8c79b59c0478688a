//! Every process that holds SMC sockets, whether it runs under smcrun or not (`smcrun ps
//! --all`): the SMC sockets from smc_diag, their owners from `/proc/*/fd` (as `ss -p` finds
//! them), per process the sockets by mode, the fallback reasons, and the BPF scope the process
//! is in (a `smcrun --bpf` tree, an attached cgroup or an attached network namespace). The lead's `ps` calls
//! [`smc_processes`] and prints it; [`bpf_scopes`] gives the scopes and their counts for `ps`
//! and the exporter.

use crate::cmd::owners;
use smcrun_bpf::scopes::{self, Scopes};
use smcrun_kernel::reasons;
use smcrun_kernel::sock_diag::{self, Mode, SmcSocket};
use smcrun_views::ps::json::SmcProcess;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// The BPF scopes and their counts (empty when BPF mode was never used, or cannot be read).
pub fn bpf_scopes() -> Scopes {
    scopes::all().unwrap_or_default()
}

/// The cgroup v2 path of a process (`/proc/PID/cgroup`'s `0::` line), below the cgroup2 root.
fn cgroup_of(pid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.to_string())
}

/// The scope a process is in, given every scope: as the kernel decides, its tree, else the
/// deepest attached cgroup it is in, else its attached network namespace.
fn scope_of(pid: u32, all: &Scopes, cg_root: Option<&Path>) -> Option<String> {
    if all.trees.iter().any(|t| t.processes.contains(&pid)) {
        return Some("tree".to_string());
    }
    let cgroup = || {
        let cg = cgroup_of(pid)?;
        let full = cg_root?.join(cg.trim_start_matches('/'));
        all.cgroups
            .iter()
            .filter(|c| full.starts_with(&c.path))
            .max_by_key(|c| c.path.as_os_str().len())
            .map(|c| format!("cgroup {}", c.path.display()))
    };
    cgroup().or_else(|| {
        let ino = smcrun_bpf::netns_scope::inode_of_pid(pid)?;
        all.netns
            .iter()
            .find(|n| n.id == ino)
            .map(|n| format!("netns {}", n.path.display()))
    })
}

/// Groups sockets by owning process.
fn group(
    sockets: &[SmcSocket],
    owned: &HashMap<u64, Vec<owners::Owner>>,
    all: &Scopes,
) -> Vec<SmcProcess> {
    let root = smcrun_bpf::prereq::cgroup2_root();
    let mut by_pid: BTreeMap<u32, SmcProcess> = BTreeMap::new();
    for s in sockets {
        // An SMC socket not connected (INIT) or closed holds no connection: BPF mode's holder
        // keeps one such socket open to pin the module.
        if matches!(s.state, 2 | 7) {
            continue;
        }
        for o in owned.get(&s.inode).map(Vec::as_slice).unwrap_or(&[]) {
            let p = by_pid.entry(o.pid).or_insert_with(|| SmcProcess {
                pid: o.pid,
                name: o.name.clone(),
                smcr: 0,
                smcd: 0,
                fallback: 0,
                listening: 0,
                reasons: Vec::new(),
                bpf_scope: scope_of(o.pid, all, root.as_deref()),
                kernel: None,
            });
            match s.mode {
                _ if s.state == 10 => p.listening += 1,
                Mode::SmcR => p.smcr += 1,
                Mode::SmcD => p.smcd += 1,
                _ => {
                    p.fallback += 1;
                    if let Some((code, _)) = s.fallback {
                        let r = reasons::describe(code);
                        let label = format!("0x{code:08x} {}", r.name);
                        match p.reasons.iter_mut().find(|(l, _)| *l == label) {
                            Some((_, n)) => *n += 1,
                            None => p.reasons.push((label, 1)),
                        }
                    }
                }
            }
        }
    }
    let mut out: Vec<SmcProcess> = by_pid.into_values().collect();
    for p in &mut out {
        p.reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    out
}

/// Adds the agent's counts to the processes, and the processes it counted connections of
/// that hold no SMC socket now (short connections all closed), if they still run.
fn with_agent(list: &mut Vec<SmcProcess>, agent: &smcrun_views::agent_state::State, all: &Scopes) {
    let root = smcrun_bpf::prereq::cgroup2_root();
    for p in list.iter_mut() {
        p.kernel = agent.process(p.pid).map(|k| k.sides.clone());
    }
    for k in &agent.processes {
        if list.iter().any(|p| p.pid == k.pid) || agent.process(k.pid) != Some(k) {
            continue;
        }
        list.push(SmcProcess {
            pid: k.pid,
            name: k.comm.clone(),
            smcr: 0,
            smcd: 0,
            fallback: 0,
            listening: 0,
            reasons: Vec::new(),
            bpf_scope: scope_of(k.pid, all, root.as_deref()),
            kernel: Some(k.sides.clone()),
        });
    }
    list.sort_by_key(|p| p.pid);
}

/// Every process holding SMC sockets this user may see, with the agent's counts when it runs
/// (and the processes it counted). An error is the kernel's (smc_diag missing), to be shown as
/// `ss` shows it.
pub fn smc_processes(
    agent: Option<&smcrun_views::agent_state::State>,
) -> Result<Vec<SmcProcess>, smcrun_kernel::error::Error> {
    let sockets = sock_diag::dump(0)?;
    let inodes: HashSet<u64> = sockets.iter().map(|s| s.inode).collect();
    let owned = owners::owners_with_agent(&inodes, agent);
    let scopes = bpf_scopes();
    let mut list = group(&sockets, &owned, &scopes);
    if let Some(a) = agent {
        with_agent(&mut list, a, &scopes);
    }
    Ok(list)
}
