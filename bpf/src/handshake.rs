//! The handshake policy: `smcrun handshake load` puts a policy's role, address and port rules
//! into the kernel's `smc_hs_ctrl` hook (Linux 6.19, CONFIG_SMC_HS_CTRL_BPF) for one network
//! namespace, so the kernel decides per connection whether an SMC socket's SYN or SYN-ACK carries
//! the SMC option (without it the connection is TCP), for every program there, preloaded or not.
//!
//! The programs of `handshake.bpf.c` are loaded as struct_ops programs; the struct_ops map (the
//! kernel's `bpf_struct_ops_smc_hs_ctrl`, laid out from vmlinux BTF by [`btf_struct`]) is made
//! and registered with BPF_MAP_UPDATE_ELEM (not a struct_ops link: the kernel refuses a link for
//! smc_hs_ctrl with EOPNOTSUPP), and selected by writing its name to `net.smc.hs_ctrl` from
//! within the namespace. While selected the kernel holds it; its maps are pinned under
//! [`PIN_ROOT`]`/net-<netns inode>` so that `status` can read them and `load` can replace the
//! policy in place. `unload` writes a newline to the sysctl (nothing selected) and unpins.

use crate::error::Error;
use crate::hsrules::{HsCounters, HsPolicy, HsTable, HS_MAX_RULES};
use crate::layout::{bytes_of, Pod};
use crate::loader::{self, MapHandle};
use crate::{maps, sys};
use smcrun_kernel::features::{kernel_release, SMC_HS_CTRL};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The object, as `bash bpf/build.sh` makes it from `handshake.bpf.c`.
pub const OBJECT: &[u8] = include_bytes!("handshake.bpf.o");

/// Each program and the `smc_hs_ctrl` member it is.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("smcrun_hs_syn", "syn_option"),
    ("smcrun_hs_synack", "synack_option"),
];

/// The map sizes userspace writes and reads.
pub const SIZES: &[(&str, usize, usize)] = &[
    ("hs_rules", 4, std::mem::size_of::<crate::hsrules::HsRule>()),
    ("hs_policy", 4, std::mem::size_of::<HsPolicy>()),
    ("hs_counters", 4, std::mem::size_of::<HsCounters>()),
];

/// The sysctl that selects a network namespace's `smc_hs_ctrl` by name.
pub const SYSCTL: &str = "/proc/sys/net/smc/hs_ctrl";
/// Where each namespace's handshake maps are pinned.
pub const PIN_ROOT: &str = "/sys/fs/bpf/smcrun-handshake";
/// The kernel struct the programs implement, and its struct_ops value type.
const STRUCT: &str = "smc_hs_ctrl";
const VALUE: &str = "bpf_struct_ops_smc_hs_ctrl";
/// The pinned maps: the rules, the head, the counters, the policy text, the struct_ops.
const PINS: &[&str] = &["hs_rules", "hs_policy", "hs_counters", "info", "ops"];
const TEXT_LEN: usize = 1024;

/// What `status` shows of a loaded policy (userspace only: the `info` map).
#[repr(C)]
#[derive(Clone, Copy)]
struct Info {
    since_unix: u64,
    text: [u8; TEXT_LEN],
}

impl Default for Info {
    fn default() -> Info {
        Info {
            since_unix: 0,
            text: [0; TEXT_LEN],
        }
    }
}

// SAFETY: repr(C), a u64 then bytes: no padding, any bytes are valid.
unsafe impl Pod for Info {}

/// A struct of vmlinux BTF: its type id, size, and members (name, byte offset, type id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfStruct {
    /// Type id.
    pub id: u32,
    /// Bytes.
    pub size: u32,
    /// (name, byte offset, type id), in order.
    pub members: Vec<(String, u32, u32)>,
}

impl BtfStruct {
    /// A member's (index, byte offset, type id).
    pub fn member(&self, name: &str) -> Option<(u32, u32, u32)> {
        self.members
            .iter()
            .enumerate()
            .find(|(_, m)| m.0 == name)
            .map(|(i, m)| (i as u32, m.1, m.2))
    }
}

/// Reads struct `name` from a raw BTF blob (`/sys/kernel/btf/vmlinux`), with an array member's
/// element count available through [`btf_array_len`]. Written out because aya-obj keeps BTF
/// members private; the format is the kernel's (Documentation/bpf/btf.rst).
pub fn btf_struct(blob: &[u8], name: &str) -> Option<BtfStruct> {
    let types = btf_types(blob)?;
    let (_, strs) = btf_strings(blob)?;
    let str_at = |off: u32| -> Option<&[u8]> {
        let s = strs.get(off as usize..)?;
        Some(&s[..s.iter().position(|b| *b == 0)?])
    };
    for (id, (info, size, data, name_off)) in types.iter().enumerate() {
        let kind = (info >> 24) & 0x1f;
        if kind != 4 || str_at(*name_off)? != name.as_bytes() {
            continue;
        }
        let kflag = info >> 31 == 1;
        let mut members = Vec::new();
        for m in data.chunks(12) {
            let w = |i: usize| u32::from_ne_bytes(m[i..i + 4].try_into().expect("4 bytes"));
            let bits = if kflag { w(8) & 0xff_ffff } else { w(8) };
            members.push((
                String::from_utf8_lossy(str_at(w(0))?).into_owned(),
                bits / 8,
                w(4),
            ));
        }
        return Some(BtfStruct {
            id: id as u32 + 1,
            size: *size,
            members,
        });
    }
    None
}

/// The element count of BTF type `id` when it is an array.
pub fn btf_array_len(blob: &[u8], id: u32) -> Option<u32> {
    let types = btf_types(blob)?;
    let (info, _, data, _) = types.get(id.checked_sub(1)? as usize)?;
    ((info >> 24) & 0x1f == 3).then(|| u32::from_ne_bytes(data[8..12].try_into().expect("4")))
}

/// (header length, string section).
fn btf_strings(b: &[u8]) -> Option<(usize, &[u8])> {
    let u = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize);
    let hdr = u(4)?;
    let (so, sl) = (u(16)?, u(20)?);
    Some((hdr, b.get(hdr + so..hdr + so + sl)?))
}

/// One BTF type: (info, size or type, the data after its header, name offset).
type BtfType<'a> = (u32, u32, &'a [u8], u32);

/// Every type of a BTF blob in id order (from 1).
fn btf_types(b: &[u8]) -> Option<Vec<BtfType<'_>>> {
    let u = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
    if b.get(0..2)? != 0xeb9fu16.to_ne_bytes() {
        return None;
    }
    let hdr = u(4)? as usize;
    let (to, tl) = (u(8)? as usize, u(12)? as usize);
    let mut at = hdr + to;
    let end = at + tl;
    let mut out = Vec::new();
    while at + 12 <= end {
        let (name_off, info, size) = (u(at)?, u(at + 4)?, u(at + 8)?);
        let vlen = (info & 0xffff) as usize;
        let extra = match (info >> 24) & 0x1f {
            1 | 14 | 17 => 4,     // INT, VAR, DECL_TAG
            3 => 12,              // ARRAY
            4 | 5 => 12 * vlen,   // STRUCT, UNION
            6 => 8 * vlen,        // ENUM
            13 => 8 * vlen,       // FUNC_PROTO
            15 | 19 => 12 * vlen, // DATASEC, ENUM64
            0 | 2 | 7..=12 | 16 | 18 => 0,
            _ => return None,
        };
        out.push((info, size, b.get(at + 12..at + 12 + extra)?, name_off));
        at += 12 + extra;
    }
    Some(out)
}

/// Whether this kernel has the hook: `Err` is the one line saying what is missing (Linux 6.19
/// named).
pub fn support() -> Result<(), String> {
    let release = kernel_release();
    let blob = std::fs::read("/sys/kernel/btf/vmlinux")
        .map_err(|e| format!("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux: {e}); the handshake policy needs {} with CONFIG_SMC_HS_CTRL_BPF and BTF", SMC_HS_CTRL.since_text()))?;
    if btf_struct(&blob, VALUE).is_some() && Path::new(SYSCTL).exists() {
        return Ok(());
    }
    if SMC_HS_CTRL.missing_in(&release) != Some(false) {
        return Err(SMC_HS_CTRL.lacking(&release));
    }
    if std::fs::read("/sys/kernel/btf/smc").is_ok() {
        return Err(format!(
            "this kernel (Linux {release}) has smc as a module: smcrun handshake needs smc built in (CONFIG_SMC=y with CONFIG_SMC_HS_CTRL_BPF), it does not read module BTF yet"
        ));
    }
    Err(format!(
        "this kernel (Linux {release}) has no {}: it was built without CONFIG_SMC_HS_CTRL_BPF (or without SMC)",
        SMC_HS_CTRL.name
    ))
}

/// A network namespace the commands act in: entered with setns(2) for the sysctl, known by its
/// inode for the pins.
fn enter(netns: Option<&str>) -> Result<u64, Error> {
    if let Some(arg) = netns {
        let (f, ino) = crate::netns_scope::open(arg)?;
        // SAFETY: setns(2) on an fd we own; smcrun is single-threaded here.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(Error::io(
                format!("--netns {arg}: entering the network namespace"),
                std::io::Error::last_os_error(),
            ));
        }
        return Ok(ino);
    }
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .map_err(|e| Error::io("reading /proc/thread-self/ns/net", e))
}

fn pin_dir(ino: u64) -> PathBuf {
    Path::new(PIN_ROOT).join(format!("net-{ino}"))
}

fn pin_path(dir: &Path, name: &str) -> CString {
    CString::new(dir.join(name).into_os_string().into_encoded_bytes()).expect("no NUL in pins")
}

/// The `smc_hs_ctrl` name smcrun registers for a namespace: unique per namespace (the kernel's
/// list of names is global), at most 15 bytes.
pub fn ops_name(ino: u64) -> String {
    format!("smcrun_{:08x}", ino as u32)
}

/// What `net.smc.hs_ctrl` selects now ("" for nothing).
fn selected() -> Result<String, Error> {
    std::fs::read_to_string(SYSCTL)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::io(format!("reading {SYSCTL}"), e))
}

fn select(name: &str) -> Result<(), Error> {
    std::fs::write(SYSCTL, format!("{name}\n"))
        .map_err(|e| Error::io(format!("writing {:?} to {SYSCTL}", name), e))
}

/// What [`load`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The name selected in `net.smc.hs_ctrl`.
    pub name: String,
    /// The network namespace's inode.
    pub netns: u64,
    /// Whether smcrun's policy was there already (it was replaced in place, its counts kept).
    pub replaced: bool,
}

/// The pinned maps of a namespace, opened.
struct Pinned(Vec<(&'static str, OwnedFd)>);

impl Pinned {
    fn open(dir: &Path) -> Result<Pinned, Error> {
        let mut v = Vec::new();
        for m in PINS {
            let fd = sys::obj_get(&pin_path(dir, m)).map_err(|e| {
                Error::io(
                    format!("opening the pinned map {}", dir.join(m).display()),
                    e,
                )
            })?;
            v.push((*m, fd));
        }
        Ok(Pinned(v))
    }

    fn map(&self, name: &str) -> BorrowedFd<'_> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f.as_fd())
            .expect("every pin is opened")
    }
}

/// Writes the table (rules first, then the head that makes them count) and the text.
fn write_maps(
    rules: BorrowedFd<'_>,
    head: BorrowedFd<'_>,
    info: BorrowedFd<'_>,
    table: &HsTable,
    text: &str,
) -> Result<(), Error> {
    for i in 0..HS_MAX_RULES as u32 {
        let r = table.rules.get(i as usize).copied().unwrap_or_default();
        maps::put(rules, &i, &r)?;
    }
    maps::put(
        head,
        &0u32,
        &HsPolicy {
            nrules: table.rules.len() as u32,
            default_action: table.default_action,
        },
    )?;
    let mut i: Info = maps::get(info, &0u32)?.unwrap_or_default();
    if i.since_unix == 0 {
        i.since_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
    }
    i.text = [0; TEXT_LEN];
    let n = text.len().min(TEXT_LEN - 1);
    i.text[..n].copy_from_slice(&text.as_bytes()[..n]);
    maps::put(info, &0u32, &i)
}

/// Loads `table` (the policy `text`) into the handshake of the network namespace `netns` (this
/// one when `None`), or replaces the policy smcrun loaded there before.
pub fn load(netns: Option<&str>, table: &HsTable, text: &str) -> Result<Loaded, Error> {
    support().map_err(Error::new)?;
    let ino = enter(netns)?;
    let name = ops_name(ino);
    let dir = pin_dir(ino);
    let now = selected()?;
    if !now.is_empty() && now != name {
        return Err(Error::new(format!(
            "net.smc.hs_ctrl already selects {now:?}, which smcrun did not load; clear it first (echo > {SYSCTL})"
        )));
    }
    if now == name && dir.join("ops").exists() {
        let p = Pinned::open(&dir)?;
        write_maps(
            p.map("hs_rules"),
            p.map("hs_policy"),
            p.map("info"),
            table,
            text,
        )?;
        return Ok(Loaded {
            name,
            netns: ino,
            replaced: true,
        });
    }
    unpin(&dir); // leftovers of an interrupted load
    let blob = std::fs::read("/sys/kernel/btf/vmlinux")
        .map_err(|e| Error::io("reading /sys/kernel/btf/vmlinux", e))?;
    let missing = |what: &str| Error::new(format!("the kernel's BTF has no {what}"));
    let st = btf_struct(&blob, STRUCT).ok_or_else(|| missing(STRUCT))?;
    let vt = btf_struct(&blob, VALUE).ok_or_else(|| missing(VALUE))?;
    let (_, data_off, _) = vt
        .member("data")
        .ok_or_else(|| missing("bpf_struct_ops_smc_hs_ctrl.data"))?;
    let (_, name_off, name_ty) = st
        .member("name")
        .ok_or_else(|| missing("smc_hs_ctrl.name"))?;
    let name_len = btf_array_len(&blob, name_ty).unwrap_or(16) as usize;
    if name.len() >= name_len {
        return Err(Error::new(format!(
            "the name {name} does not fit smc_hs_ctrl.name ({name_len} bytes)"
        )));
    }
    let btf = loader::kernel_btf()
        .map_err(|e| Error::new(format!("cannot read the kernel's BTF: {e}")))?;
    let names: Vec<&str> = PROGRAMS.iter().map(|p| p.0).collect();
    let inst = loader::load_object(OBJECT, btf, SIZES, &names, |prog, insns, license| {
        let member = PROGRAMS
            .iter()
            .find(|p| p.0 == prog)
            .map(|p| p.1)
            .unwrap_or("");
        let (index, _, _) = st
            .member(member)
            .ok_or_else(|| missing(&format!("smc_hs_ctrl.{member}")))?;
        sys::prog_load_struct_ops(prog, st.id, index, insns, license)
            .map_err(|e| loader::refused(prog, e))
    })?;
    let info = sys::map_create("info", 2, 4, std::mem::size_of::<Info>() as u32, 1, 0)
        .map_err(|e| Error::io("creating BPF map info", e))?;
    write_maps(
        inst.map("hs_rules")?.fd(),
        inst.map("hs_policy")?.fd(),
        info.as_fd(),
        table,
        text,
    )?;
    let user_btf =
        sys::btf_load().map_err(|e| Error::io("loading a BTF object (BPF_BTF_LOAD)", e))?;
    let ops = sys::map_create_struct_ops("smcrun_hs", vt.size, vt.id, user_btf.as_fd())
        .map_err(|e| Error::io("creating the smc_hs_ctrl struct_ops map", e))?;
    let mut value = vec![0u8; vt.size as usize];
    let at = (data_off + name_off) as usize;
    value[at..at + name.len()].copy_from_slice(name.as_bytes());
    for (prog, member) in PROGRAMS {
        let (_, off, _) = st.member(member).ok_or_else(|| missing(member))?;
        let at = (data_off + off) as usize;
        let fd = inst.program(prog)?.as_raw_fd() as u64;
        value[at..at + 8].copy_from_slice(&fd.to_ne_bytes());
    }
    sys::map_update(ops.as_fd(), bytes_of(&0u32), &value).map_err(|e| {
        Error::io(
            "registering the smc_hs_ctrl struct_ops (BPF_MAP_UPDATE_ELEM)",
            e,
        )
    })?;
    let pin_all = || -> Result<(), Error> {
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::io(
                format!(
                    "creating {} (is bpffs mounted on /sys/fs/bpf?)",
                    dir.display()
                ),
                e,
            )
        })?;
        for m in PINS {
            let fd = match *m {
                "info" => info.as_fd(),
                "ops" => ops.as_fd(),
                _ => inst.map(m).map(MapHandle::fd)?,
            };
            sys::obj_pin(fd, &pin_path(&dir, m))
                .map_err(|e| Error::io(format!("pinning {}", dir.join(m).display()), e))?;
        }
        select(&name)
    };
    pin_all().inspect_err(|_| {
        deregister(ops.as_fd());
        unpin(&dir)
    })?;
    Ok(Loaded {
        name,
        netns: ino,
        replaced: false,
    })
}

/// Takes a struct_ops map's registration back (BPF_MAP_DELETE_ELEM on key 0, the kernel's `unreg`).
/// Registered without a link, the map holds a reference to itself: unpinning alone would leave
/// its programs in force for nobody and its name taken, so the next `load` would get EEXIST.
/// Call it only once the sysctl no longer selects the map.
fn deregister(ops: BorrowedFd<'_>) {
    let _ = sys::map_delete(ops, bytes_of(&0u32));
}

/// Removes what `load` pinned in `dir`, the registration of its struct_ops map first.
fn unpin(dir: &Path) {
    if let Ok(ops) = sys::obj_get(&pin_path(dir, "ops")) {
        deregister(ops.as_fd());
    }
    for m in PINS {
        let _ = std::fs::remove_file(dir.join(m));
    }
    let _ = std::fs::remove_dir(dir);
}

/// The handshake policy of a namespace, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The network namespace's inode.
    pub netns: u64,
    /// What `net.smc.hs_ctrl` selects ("" for nothing).
    pub selected: String,
    /// smcrun's policy there, when it is smcrun's.
    pub policy: Option<LoadedPolicy>,
}

/// smcrun's loaded policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedPolicy {
    /// The policy's canonical text.
    pub text: String,
    /// When it was first loaded (seconds since the epoch).
    pub since_unix: u64,
    /// The kernel's decisions so far.
    pub counters: HsCounters,
    /// Whether the sysctl selects it (it may have been cleared by hand).
    pub selected: bool,
}

/// What is selected in the namespace and smcrun's policy's counters.
pub fn status(netns: Option<&str>) -> Result<Status, Error> {
    support().map_err(Error::new)?;
    let ino = enter(netns)?;
    let sel = selected()?;
    let dir = pin_dir(ino);
    let policy = if dir.join("ops").exists() {
        let p = Pinned::open(&dir)?;
        let info: Info = maps::get(p.map("info"), &0u32)?.unwrap_or_default();
        let end = info.text.iter().position(|b| *b == 0).unwrap_or(TEXT_LEN);
        Some(LoadedPolicy {
            text: String::from_utf8_lossy(&info.text[..end]).into_owned(),
            since_unix: info.since_unix,
            counters: maps::get(p.map("hs_counters"), &0u32)?.unwrap_or_default(),
            selected: sel == ops_name(ino),
        })
    } else {
        None
    };
    Ok(Status {
        netns: ino,
        selected: sel,
        policy,
    })
}

/// Clears smcrun's handshake policy in the namespace (the sysctl, then the pins) and returns
/// its last state; an error naming what is there when smcrun loaded nothing.
pub fn unload(netns: Option<&str>) -> Result<Status, Error> {
    let st = status(netns)?;
    let ours = ops_name(st.netns);
    if st.policy.is_none() && st.selected != ours {
        return Err(Error::new(if st.selected.is_empty() {
            "no handshake policy is loaded in this network namespace (net.smc.hs_ctrl is empty)"
                .to_string()
        } else {
            format!(
                "net.smc.hs_ctrl selects {:?}, which smcrun did not load; smcrun leaves it",
                st.selected
            )
        }));
    }
    if st.selected == ours {
        select("")?;
    }
    unpin(&pin_dir(st.netns));
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with `int`, `char[16]` and a struct of (name: char[16], n: int).
    fn blob() -> Vec<u8> {
        let strs = b"\0int\0char\0s\0name\0n\0";
        let mut types = Vec::new();
        let mut push = |words: &[u32]| {
            for w in words {
                types.extend_from_slice(&w.to_ne_bytes());
            }
        };
        push(&[1, 1 << 24, 4, (1 << 24) | 32]); // 1: int
        push(&[5, 1 << 24, 1, 8]); // 2: char
        push(&[0, 3 << 24, 0, 2, 1, 16]); // 3: char[16]
        push(&[10, (4 << 24) | 2, 20, 12, 3, 0, 17, 1, 128]); // 4: struct s
        sys::btf_blob(&types, strs)
    }

    #[test]
    fn structs_are_read_from_btf() {
        let b = blob();
        let s = btf_struct(&b, "s").expect("struct s");
        assert_eq!((s.id, s.size), (4, 20));
        assert_eq!(s.member("name"), Some((0, 0, 3)));
        assert_eq!(s.member("n"), Some((1, 16, 1)));
        assert_eq!(btf_array_len(&b, 3), Some(16));
        assert_eq!(btf_array_len(&b, 1), None);
        assert!(btf_struct(&b, "int").is_none());
        assert!(btf_struct(&b[..30], "s").is_none(), "a cut blob is refused");
    }

    #[test]
    fn names_fit_the_kernels_field() {
        assert_eq!(ops_name(4026531840), "smcrun_f0000000");
        assert!(ops_name(u64::MAX).len() < 16);
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;

    /// The reader against this machine's own BTF: struct_ops value types have `data` after the
    /// common part (tcp_congestion_ops is there wherever BTF is).
    #[test]
    fn the_running_kernels_struct_ops_are_read() {
        let Ok(b) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux on this machine");
            return;
        };
        let vt = btf_struct(&b, "bpf_struct_ops_tcp_congestion_ops").expect("value type");
        let (i, off, _) = vt.member("data").expect("data");
        assert_eq!(i, 1);
        assert!(off >= 8 && off < vt.size, "{off} {}", vt.size);
        let ops = btf_struct(&b, "tcp_congestion_ops").unwrap();
        let (_, _, name_ty) = ops.member("name").unwrap();
        assert_eq!(btf_array_len(&b, name_ty), Some(16));
        assert_eq!(
            loader::kernel_btf()
                .unwrap()
                .id_by_type_name_kind("tcp_congestion_ops", aya_obj::btf::BtfKind::Struct)
                .unwrap(),
            ops.id
        );
    }
}
