//! Cgroup scopes: `smcrun attach --cgroup PATH` makes every new TCP socket of that cgroup v2
//! subtree an SMC socket, with no restart, until `smcrun detach --cgroup PATH`.
//!
//! One copy of `smcrun_cgroup` serves every attached cgroup; it and its maps are pinned in
//! [`PIN_DIR`] so they outlive the command. Each cgroup gets a slot (its policy, counters and
//! per-program counts) and an entry in the `cgroups` map (cgroup id -> slot); a userspace-only
//! `scopes` map remembers its path, since when, and its policy, for `smcrun attach --list`.
//! Detaching the last cgroup removes the pins, which detaches the program. Changes are made
//! under an flock of [`PIN_DIR`], so two commands cannot take the same slot.

use crate::error::Error;
use crate::layout::{bytes_of, from_bytes, Counters, Pod, MAX_SCOPES};
use crate::loader::{self, MapHandle};
use crate::maps::{self, ProgramCount};
use crate::rules::KernelPolicy;
use crate::{smc, sys};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where bpffs is expected.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Where the cgroup instance is pinned.
pub const PIN_DIR: &str = "/sys/fs/bpf/smcrun";
/// The program cgroup scopes are served by.
pub const PROGRAM: &str = "smcrun_cgroup";
/// The pinned link's file name in [`PIN_DIR`].
const LINK: &str = "link";
/// The maps pinned beside it.
const MAPS: &[&str] = &[
    "cgroups",
    "rules",
    "policies",
    "counters",
    "by_program",
    "scopes",
];

const PATH_LEN: usize = 256;
const POLICY_LEN: usize = 512;

/// A slot's description in the `scopes` map (userspace only).
#[repr(C)]
#[derive(Clone, Copy)]
struct ScopeInfo {
    cgroup_id: u64,
    since_unix: u64,
    path: [u8; PATH_LEN],
    policy: [u8; POLICY_LEN],
}

impl Default for ScopeInfo {
    fn default() -> ScopeInfo {
        ScopeInfo {
            cgroup_id: 0,
            since_unix: 0,
            path: [0; PATH_LEN],
            policy: [0; POLICY_LEN],
        }
    }
}

// SAFETY: repr(C), two u64 then byte arrays: no padding, any bytes are valid.
unsafe impl Pod for ScopeInfo {}

fn text_of(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn copy_text(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// An attached cgroup, as `smcrun attach --list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupScope {
    /// The cgroup's directory.
    pub path: PathBuf,
    /// Its cgroup id (the directory's inode number).
    pub cgroup_id: u64,
    /// When it was attached (seconds since the epoch).
    pub since_unix: u64,
    /// The policy in its canonical form ("" for none: every socket SMC).
    pub policy: String,
    /// Sockets converted and kept TCP.
    pub counters: Counters,
    /// Sockets converted per program.
    pub programs: Vec<ProgramCount>,
}

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
    // SAFETY: statfs(2) into a zeroed struct we own, with a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
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

fn pin_path(name: &str) -> CString {
    CString::new(format!("{PIN_DIR}/{name}")).expect("no NUL in pin names")
}

/// Whether the cgroup instance is attached (its link is pinned).
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
    // SAFETY: flock(2) on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(
            format!("locking {PIN_DIR}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(Lock { _file: f })
}

/// Loads and pins the cgroup instance (maps first, the link last: a pinned link means it is all
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
    /// The cgroup id.
    pub cgroup_id: u64,
    /// The slot it got.
    pub slot: u32,
    /// Whether it was attached already (its policy was replaced, its counts kept).
    pub was_attached: bool,
    /// Whether the program had to be loaded (the first attached cgroup).
    pub loaded: bool,
}

/// Attaches `dir` (a cgroup v2 directory) with `policy` (`policy_text` its canonical form).
/// Refuses, attaching nothing, when no IPPROTO_SMC socket can be made.
pub fn attach(dir: &Path, policy_text: &str, policy: &KernelPolicy) -> Result<Attached, Error> {
    let cgid = cgroup_id(dir)?;
    smc::probe().map_err(|e| {
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
    let existing: Option<u32> = maps::get(p.map("cgroups"), &cgid)?;
    let slot = match existing {
        Some(s) => s,
        None => free_slot(p.map("scopes"))?.ok_or_else(|| {
            Error::new(format!(
                "{MAX_SCOPES} cgroups are attached already; detach one first"
            ))
        })?,
    };
    maps::write_policy(p.map("rules"), p.map("policies"), slot, policy)?;
    let mut info: ScopeInfo = maps::get(p.map("scopes"), &slot)?.unwrap_or_default();
    if existing.is_none() {
        info = ScopeInfo {
            cgroup_id: cgid,
            since_unix: now_unix(),
            ..ScopeInfo::default()
        };
        copy_text(&mut info.path, &dir.to_string_lossy());
        maps::put(p.map("counters"), &slot, &Counters::default())?;
        maps::clear_programs(p.map("by_program"), slot)?;
    }
    info.policy = [0; POLICY_LEN];
    copy_text(&mut info.policy, policy_text);
    maps::put(p.map("scopes"), &slot, &info)?;
    // Last: from here on the cgroup's sockets are converted.
    maps::put(p.map("cgroups"), &cgid, &slot)?;
    Ok(Attached {
        cgroup_id: cgid,
        slot,
        was_attached: existing.is_some(),
        loaded,
    })
}

fn free_slot(scopes: BorrowedFd<'_>) -> Result<Option<u32>, Error> {
    for s in 0..MAX_SCOPES {
        let info: ScopeInfo = maps::get(scopes, &s)?.unwrap_or_default();
        if info.cgroup_id == 0 {
            return Ok(Some(s));
        }
    }
    Ok(None)
}

/// What [`detach`] did: the scope's last numbers, and whether the program went with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detached {
    /// The scope as it was.
    pub scope: CgroupScope,
    /// Whether it was the last cgroup (the pins were removed and the program detached).
    pub unloaded: bool,
}

/// Detaches `dir`. A cgroup that is not attached is an error naming what is.
pub fn detach(dir: &Path) -> Result<Detached, Error> {
    let cgid = cgroup_id(dir)?;
    if !attached() {
        return Err(Error::new(format!(
            "cgroup {} is not attached (nothing is: smcrun attach --list)",
            dir.display()
        )));
    }
    let _lock = lock()?;
    let p = Pinned::open()?;
    let Some(slot) = maps::get::<u64, u32>(p.map("cgroups"), &cgid)? else {
        return Err(Error::new(format!(
            "cgroup {} is not attached (see smcrun attach --list)",
            dir.display()
        )));
    };
    // First: from here on its sockets stay TCP.
    sys::map_delete(p.map("cgroups"), bytes_of(&cgid))
        .map_err(|e| Error::io("writing the cgroups map", e))?;
    let scope = scope_of(&p, slot)?;
    maps::put(p.map("scopes"), &slot, &ScopeInfo::default())?;
    let left =
        sys::map_keys(p.map("cgroups"), 8).map_err(|e| Error::io("listing the cgroups map", e))?;
    let unloaded = left.is_empty();
    if unloaded {
        unpin_all();
        let _ = std::fs::remove_dir(PIN_DIR);
    }
    Ok(Detached { scope, unloaded })
}

fn scope_of(p: &Pinned, slot: u32) -> Result<CgroupScope, Error> {
    let info: ScopeInfo = maps::get(p.map("scopes"), &slot)?.unwrap_or_default();
    Ok(CgroupScope {
        path: PathBuf::from(text_of(&info.path)),
        cgroup_id: info.cgroup_id,
        since_unix: info.since_unix,
        policy: text_of(&info.policy),
        counters: maps::counters(p.map("counters"), slot)?,
        programs: maps::by_program(p.map("by_program"), slot)?,
    })
}

/// Every attached cgroup, in slot order (empty when nothing is attached).
pub fn list() -> Result<Vec<CgroupScope>, Error> {
    if !attached() {
        return Ok(Vec::new());
    }
    let p = Pinned::open()?;
    let mut out = Vec::new();
    for (k, _) in sys::map_keys(p.map("cgroups"), 8)
        .map_err(|e| Error::io("listing the cgroups map", e))?
        .iter()
        .map(|k| (from_bytes::<u64>(k), ()))
    {
        if let Some(slot) = maps::get::<u64, u32>(p.map("cgroups"), &k)? {
            out.push((slot, scope_of(&p, slot)?));
        }
    }
    out.sort_by_key(|(s, _)| *s);
    Ok(out.into_iter().map(|(_, s)| s).collect())
}
