//! Reading and writing the object's maps: a scope's policy, its counters and its per-program
//! counts, the same for a process tree's instance and the pinned cgroup instance.

use crate::error::Error;
use crate::layout::{self, bytes_of, from_bytes, Counters, Pod, PolicyHead, ProgramKey, COMM_LEN};
use crate::rules::KernelPolicy;
use crate::sys;
use std::os::fd::BorrowedFd;

/// A typed lookup: `None` when the key is absent.
pub fn get<K: Pod, V: Pod>(map: BorrowedFd<'_>, key: &K) -> Result<Option<V>, Error> {
    let mut v = vec![0u8; std::mem::size_of::<V>()];
    match sys::map_lookup(map, bytes_of(key), &mut v) {
        Ok(true) => Ok(Some(from_bytes(&v))),
        Ok(false) => Ok(None),
        Err(e) => Err(Error::io("reading a BPF map", e)),
    }
}

/// A typed update (insert or replace).
pub fn put<K: Pod, V: Pod>(map: BorrowedFd<'_>, key: &K, value: &V) -> Result<(), Error> {
    sys::map_update(map, bytes_of(key), bytes_of(value))
        .map_err(|e| Error::io("writing a BPF map", e))
}

/// Writes a scope's rules and default into `rules` and `policies` (rules first, then the head
/// that makes them count).
pub fn write_policy(
    rules: BorrowedFd<'_>,
    policies: BorrowedFd<'_>,
    slot: u32,
    policy: &KernelPolicy,
) -> Result<(), Error> {
    for i in 0..layout::MAX_RULES {
        let r = policy.rules.get(i as usize).copied().unwrap_or_default();
        put(rules, &(slot * layout::MAX_RULES + i), &r)?;
    }
    let head = PolicyHead {
        nrules: policy.rules.len() as u32,
        default_action: policy.default_action,
    };
    put(policies, &slot, &head)
}

/// A scope's counters (zero when never written).
pub fn counters(map: BorrowedFd<'_>, slot: u32) -> Result<Counters, Error> {
    Ok(get(map, &slot)?.unwrap_or_default())
}

/// A program's converted sockets in a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramCount {
    /// The program name the kernel keeps (15 bytes at most).
    pub program: String,
    /// Sockets made SMC.
    pub converted: u64,
}

/// The per-program counts of one slot, most sockets first.
pub fn by_program(map: BorrowedFd<'_>, slot: u32) -> Result<Vec<ProgramCount>, Error> {
    let keys = sys::map_keys(map, std::mem::size_of::<ProgramKey>())
        .map_err(|e| Error::io("listing a BPF map", e))?;
    let mut out = Vec::new();
    for k in keys {
        let key: ProgramKey = from_bytes(&k);
        if key.slot != slot {
            continue;
        }
        if let Some(n) = get::<ProgramKey, u64>(map, &key)? {
            let end = key.comm.iter().position(|b| *b == 0).unwrap_or(COMM_LEN);
            out.push(ProgramCount {
                program: String::from_utf8_lossy(&key.comm[..end]).into_owned(),
                converted: n,
            });
        }
    }
    out.sort_by(|a, b| {
        b.converted
            .cmp(&a.converted)
            .then(a.program.cmp(&b.program))
    });
    Ok(out)
}

/// Removes a slot's per-program counts (when the slot is given back).
pub fn clear_programs(map: BorrowedFd<'_>, slot: u32) -> Result<(), Error> {
    let keys = sys::map_keys(map, std::mem::size_of::<ProgramKey>())
        .map_err(|e| Error::io("listing a BPF map", e))?;
    for k in keys {
        if from_bytes::<ProgramKey>(&k).slot == slot {
            sys::map_delete(map, &k).map_err(|e| Error::io("writing a BPF map", e))?;
        }
    }
    Ok(())
}
