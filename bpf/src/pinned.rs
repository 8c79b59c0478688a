//! The pinned instance behind `smcrun attach`: one copy of `smcrun_attach` serves every attached
//! cgroup ([`crate::cgroup`]) and network namespace ([`crate::netns_scope`]) until it is detached,
//! with no restart of what runs there.
//!
//! The program and its maps are pinned in [`PIN_DIR`] so they outlive the command. Each scope
//! gets a slot (its policy, counters and per-program counts) and an entry in its kind's map
//! (`cgroups`: cgroup id -> slot, `netns`: netns cookie -> slot); a userspace-only `scopes` map
//! remembers each slot's kind, path, since when, and its policy, for `smcrun attach --list`.
//! Detaching the last scope removes the pins, which detaches the program. Changes are made under
//! an flock of [`PIN_DIR`], so two commands cannot take the same slot.

use crate::error::Error;
use crate::layout::{bytes_of, from_bytes, Counters, Pod, MAX_SCOPES};
use crate::loader::{self, MapHandle};
use crate::maps::{self, ProgramCount};
use crate::rules::KernelPolicy;
use crate::{module_hold, sys};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where bpffs is expected.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Where the instance is pinned.
pub const PIN_DIR: &str = "/sys/fs/bpf/smcrun";
/// The program that serves every attached scope.
pub const PROGRAM: &str = "smcrun_attach";
/// The pinned link's file name in [`PIN_DIR`].
const LINK: &str = "link";
/// The maps pinned beside it.
const MAPS: &[&str] = &[
    "cgroups",
    "netns",
    "rules",
    "policies",
    "counters",
    "by_program",
    "scopes",
];

const PATH_LEN: usize = 256;
const POLICY_LEN: usize = 512;

/// What an attached scope is; each kind has its own map from its key to the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A cgroup v2 subtree, keyed by cgroup id.
    Cgroup,
    /// A network namespace, keyed by its cookie.
    Netns,
}

impl Kind {
    fn code(self) -> u64 {
        match self {
            Kind::Cgroup => 1,
            Kind::Netns => 2,
        }
    }

    fn map(self) -> &'static str {
        match self {
            Kind::Cgroup => "cgroups",
            Kind::Netns => "netns",
        }
    }
}

/// A slot's description in the `scopes` map (userspace only); kind 0 is a free slot.
#[repr(C)]
#[derive(Clone, Copy)]
struct ScopeInfo {
    kind: u64,
    key: u64,
    id: u64,
    since_unix: u64,
    path: [u8; PATH_LEN],
    policy: [u8; POLICY_LEN],
}

impl Default for ScopeInfo {
    fn default() -> ScopeInfo {
        ScopeInfo {
            kind: 0,
            key: 0,
            id: 0,
            since_unix: 0,
            path: [0; PATH_LEN],
            policy: [0; POLICY_LEN],
        }
    }
}

// SAFETY: repr(C), four u64 then byte arrays: no padding, any bytes are valid.
unsafe impl Pod for ScopeInfo {}

fn text_of(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn copy_text(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// An attached scope, as `smcrun attach --list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// A cgroup or a network namespace.
    pub kind: Kind,
    /// The cgroup's directory, or the netns path it was attached by (`/proc/PID/ns/net` for a PID).
    pub path: PathBuf,
    /// The cgroup id, or the netns file's inode number (what `ls -l /proc/PID/ns/net` shows).
    pub id: u64,
    /// The key the program looks up: the cgroup id, or the netns cookie.
    pub key: u64,
    /// When it was attached (seconds since the epoch).
    pub since_unix: u64,
    /// The policy in its canonical form ("" for none: every socket SMC).
    pub policy: String,
    /// Sockets converted and kept TCP.
    pub counters: Counters,
    /// Sockets converted per program.
    pub programs: Vec<ProgramCount>,
}

/// A scope to attach: its kind and key, the id and path shown for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Cgroup or netns.
    pub kind: Kind,
    /// The key in the kind's map.
    pub key: u64,
    /// The id shown (cgroup id, netns inode).
    pub id: u64,
    /// The path shown.
    pub path: PathBuf,
}

fn pin_path(name: &str) -> CString {
    CString::new(format!("{PIN_DIR}/{name}")).expect("no NUL in pin names")
}

/// Whether the instance is attached (its link is pinned).
pub fn attached() -> bool {
    Path::new(PIN_DIR).join(LINK).exists()
}

/// The pinned maps, opened.
struct Pinned {
    maps: Vec<(&'static str, OwnedFd)>,
}

impl Pinned {
    fn open() -> Result<Pinned, Error> {
        let mut maps = Vec::new();
        for m in MAPS {
            let fd = sys::obj_get(&pin_path(m))
                .map_err(|e| Error::io(format!("opening the pinned map {PIN_DIR}/{m}"), e))?;
            maps.push((*m, fd));
        }
        Ok(Pinned { maps })
    }

    fn map(&self, name: &str) -> BorrowedFd<'_> {
        self.maps
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, fd)| fd.as_fd())
            .expect("every pinned map is opened")
    }

    /// The keys of every scope of `kind`.
    fn keys(&self, kind: Kind) -> Result<Vec<u64>, Error> {
        Ok(sys::map_keys(self.map(kind.map()), 8)
            .map_err(|e| Error::io(format!("listing the {} map", kind.map()), e))?
            .iter()
            .map(|k| from_bytes::<u64>(k))
            .collect())
    }
}

/// Holds the flock of [`PIN_DIR`] while alive.
struct Lock {
    _file: std::fs::File,
}

fn lock() -> Result<Lock, Error> {
    if let Err(e) = std::fs::create_dir(PIN_DIR) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(Error::io(format!("creating {PIN_DIR}"), e));
        }
    }
    let f = std::fs::File::open(PIN_DIR).map_err(|e| Error::io(format!("opening {PIN_DIR}"), e))?;
    // SAFETY: flock(2) takes integers only and dereferences nothing; `f` keeps the fd open for
    // the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(
            format!("locking {PIN_DIR}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(Lock { _file: f })
}

/// Loads and pins the instance (maps first, the link last: a pinned link means it is all
/// there). On failure, whatever was pinned is removed again.
fn load_and_pin() -> Result<(), Error> {
    let inst = loader::load(&[PROGRAM])?;
    let scopes = sys::map_create(
        "scopes",
        2, // BPF_MAP_TYPE_ARRAY
        4,
        std::mem::size_of::<ScopeInfo>() as u32,
        MAX_SCOPES,
        0,
    )
    .map_err(|e| Error::io("creating BPF map scopes", e))?;
    let pin_all = || -> Result<(), Error> {
        for m in MAPS {
            let fd = if *m == "scopes" {
                scopes.as_fd()
            } else {
                inst.map(m).map(MapHandle::fd)?
            };
            sys::obj_pin(fd, &pin_path(m))
                .map_err(|e| Error::io(format!("pinning {PIN_DIR}/{m}"), e))?;
        }
        let link = inst.attach(PROGRAM)?;
        sys::obj_pin(link.as_fd(), &pin_path(LINK))
            .map_err(|e| Error::io(format!("pinning {PIN_DIR}/{LINK}"), e))
    };
    pin_all().inspect_err(|_| unpin_all())
}

fn unpin_all() {
    let _ = std::fs::remove_file(Path::new(PIN_DIR).join(LINK));
    for m in MAPS {
        let _ = std::fs::remove_file(Path::new(PIN_DIR).join(m));
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What [`attach`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The id shown for the scope (cgroup id, netns inode).
    pub id: u64,
    /// The slot it got.
    pub slot: u32,
    /// Whether it was attached already (its policy was replaced, its counts kept).
    pub was_attached: bool,
    /// Whether the program had to be loaded (the first attached scope).
    pub loaded: bool,
}

/// Attaches `t` with `policy` (`policy_text` its canonical form). Refuses, attaching nothing,
/// when no IPPROTO_SMC socket can be made.
pub fn attach(t: &Target, policy_text: &str, policy: &KernelPolicy) -> Result<Attached, Error> {
    module_hold::probe().map_err(|e| {
        Error::io(
            "SMC is not usable: socket(AF_INET, SOCK_STREAM, IPPROTO_SMC) failed (nothing was attached)",
            e,
        )
    })?;
    let _lock = lock()?;
    let loaded = !attached();
    if loaded {
        unpin_all(); // leftovers of an interrupted attach
        load_and_pin()?;
    }
    let p = Pinned::open()?;
    let existing: Option<u32> = maps::get(p.map(t.kind.map()), &t.key)?;
    let slot = match existing {
        Some(s) => s,
        None => free_slot(p.map("scopes"))?.ok_or_else(|| {
            Error::new(format!(
                "{MAX_SCOPES} cgroups and network namespaces are attached already; detach one first"
            ))
        })?,
    };
    maps::write_policy(p.map("rules"), p.map("policies"), slot, policy)?;
    let mut info: ScopeInfo = maps::get(p.map("scopes"), &slot)?.unwrap_or_default();
    if existing.is_none() {
        info = ScopeInfo {
            kind: t.kind.code(),
            key: t.key,
            id: t.id,
            since_unix: now_unix(),
            ..ScopeInfo::default()
        };
        copy_text(&mut info.path, &t.path.to_string_lossy());
        maps::put(p.map("counters"), &slot, &Counters::default())?;
        maps::clear_programs(p.map("by_program"), slot)?;
    }
    info.policy = [0; POLICY_LEN];
    copy_text(&mut info.policy, policy_text);
    maps::put(p.map("scopes"), &slot, &info)?;
    // Last: from here on the scope's sockets are converted.
    maps::put(p.map(t.kind.map()), &t.key, &slot)?;
    Ok(Attached {
        id: t.id,
        slot,
        was_attached: existing.is_some(),
        loaded,
    })
}

fn free_slot(scopes: BorrowedFd<'_>) -> Result<Option<u32>, Error> {
    for s in 0..MAX_SCOPES {
        let info: ScopeInfo = maps::get(scopes, &s)?.unwrap_or_default();
        if info.kind == 0 {
            return Ok(Some(s));
        }
    }
    Ok(None)
}

/// What [`detach`] did: the scope's last numbers, and whether the program went with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detached {
    /// The scope as it was.
    pub scope: Attachment,
    /// Whether it was the last scope (the pins were removed and the program detached).
    pub unloaded: bool,
}

/// Detaches the scope of `kind` with `key`; `what` names it in errors ("cgroup /sys/fs/...").
pub fn detach(kind: Kind, key: u64, what: &str) -> Result<Detached, Error> {
    if !attached() {
        return Err(Error::new(format!(
            "{what} is not attached (nothing is: smcrun attach --list)"
        )));
    }
    let _lock = lock()?;
    let p = Pinned::open()?;
    let Some(slot) = maps::get::<u64, u32>(p.map(kind.map()), &key)? else {
        return Err(Error::new(format!(
            "{what} is not attached (see smcrun attach --list)"
        )));
    };
    // First: from here on its sockets stay TCP.
    sys::map_delete(p.map(kind.map()), bytes_of(&key))
        .map_err(|e| Error::io(format!("writing the {} map", kind.map()), e))?;
    let scope = scope_of(&p, kind, slot)?;
    maps::put(p.map("scopes"), &slot, &ScopeInfo::default())?;
    let unloaded = p.keys(Kind::Cgroup)?.is_empty() && p.keys(Kind::Netns)?.is_empty();
    if unloaded {
        unpin_all();
        let _ = std::fs::remove_dir(PIN_DIR);
    }
    Ok(Detached { scope, unloaded })
}

fn scope_of(p: &Pinned, kind: Kind, slot: u32) -> Result<Attachment, Error> {
    let info: ScopeInfo = maps::get(p.map("scopes"), &slot)?.unwrap_or_default();
    Ok(Attachment {
        kind,
        path: PathBuf::from(text_of(&info.path)),
        id: info.id,
        key: info.key,
        since_unix: info.since_unix,
        policy: text_of(&info.policy),
        counters: maps::counters(p.map("counters"), slot)?,
        programs: maps::by_program(p.map("by_program"), slot)?,
    })
}

/// Every attached scope of `kind`, in slot order (empty when nothing is attached).
pub fn list(kind: Kind) -> Result<Vec<Attachment>, Error> {
    if !attached() {
        return Ok(Vec::new());
    }
    let p = Pinned::open()?;
    let mut out = Vec::new();
    for k in p.keys(kind)? {
        if let Some(slot) = maps::get::<u64, u32>(p.map(kind.map()), &k)? {
            out.push((slot, scope_of(&p, kind, slot)?));
        }
    }
    out.sort_by_key(|(s, _)| *s);
    Ok(out.into_iter().map(|(_, s)| s).collect())
}
