//! `smcrun agent`'s kernel side: the kprobes of `agent.bpf.c` on smc.ko's functions, which record
//! every SMC socket (process, cgroup, network namespace, role, mode, device or fallback reason,
//! bytes, start and end) in bounded maps, and the reading of those maps.
//!
//! The maps are read without a bpf() system call (each map command holds the kernel's tracing
//! programs off its CPU, and on a preemptible kernel smc's functions then ran unprobed on it):
//! the open sockets' slots and the counters are mmapable arrays, the ended records come through
//! a ring buffer, all read in their mmapped pages.
//!
//! The object is loaded with the same aya-obj based loader as BPF mode's, its CO-RE accesses
//! relocated against the kernel's BTF with smc.ko's split BTF appended (`/sys/kernel/btf/smc`).
//! kprobes rather than fentry or tp_btf: those hold the module while attached, so `rmmod smc`
//! would fail; a kprobe goes quiet when the module goes, and [`Agent::attach`] is called again
//! when it is back (see [`smc_generation`]).

use crate::error::Error;
use crate::layout::{from_bytes, Pod};
use crate::loader::{self, Instance};
use crate::ringbuf::RingBuf;
use crate::sys;
use aya_obj::btf::Btf;
use smcrun_kernel::features::{BPF_ATOMIC_FETCH, KPROBE_MISSED, MODULE_BTF};
use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The object, as `bash bpf/build.sh` makes it from `agent.bpf.c`.
pub const OBJECT: &[u8] = include_bytes!("agent.bpf.o");

/// Program name length the kernel keeps (`COMM_LEN`).
pub const COMM_LEN: usize = 16;
/// RDMA device name bytes kept (`DEV_LEN`, NUL included).
pub const DEV_LEN: usize = 16;
/// Sockets alive at once the kernel side can record (`MAX_LIVE`).
pub const MAX_LIVE: u32 = 16384;
/// The ring buffer of ended records, bytes (`RING_BYTES`): 16,384 records of 128 bytes (an
/// [`Ended`] and the ring's 8-byte header).
pub const RING_BYTES: u32 = 2 * 1024 * 1024;

/// `ROLE_*`: a client socket (connect).
pub const ROLE_CLIENT: u8 = 1;
/// A server socket (accepted).
pub const ROLE_SERVER: u8 = 2;
/// A listening socket.
pub const ROLE_LISTEN: u8 = 3;

/// `MODE_*`: not seen (the handshake did not end, or was not seen).
pub const MODE_UNKNOWN: u8 = 0;
/// SMC-R.
pub const MODE_SMCR: u8 = 1;
/// SMC-D.
pub const MODE_SMCD: u8 = 2;
/// Fallen back to TCP.
pub const MODE_TCP: u8 = 3;

/// `FLAG_*`: the process is still the listening socket's.
pub const FLAG_INHERITED: u8 = 1;
/// The socket's release was seen.
pub const FLAG_ENDED: u8 = 2;
/// Replaced at its address by a new socket without its release being seen.
pub const FLAG_STALE: u8 = 4;

/// `struct record`: one SMC socket.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    /// CLOCK_BOOTTIME nanoseconds at connect/listen/handshake end.
    pub start_ns: u64,
    /// At release (0 while alive).
    pub end_ns: u64,
    /// cgroup v2 id of the process.
    pub cgroup_id: u64,
    /// The network namespace's cookie.
    pub netns_cookie: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// The socket's inode (0 until a process held it).
    pub inode: u64,
    /// The process (thread group id).
    pub tgid: u32,
    /// The fallback reason (`MODE_TCP`).
    pub fallback_rsn: u32,
    /// The peer's decline reason, when it declined.
    pub peer_diagnosis: u32,
    /// `ROLE_*`.
    pub role: u8,
    /// `MODE_*`.
    pub mode: u8,
    /// `FLAG_*`.
    pub flags: u8,
    /// The SMC-R link's RDMA port.
    pub ibport: u8,
    /// The process's command name (NUL-padded).
    pub comm: [u8; COMM_LEN],
    /// The SMC-R link's RDMA device (NUL-padded).
    pub dev: [u8; DEV_LEN],
}

/// `struct slot`: an open socket's place in the mmapable array `slots`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// Odd while a socket holds the slot; each claim and each release adds 1.
    pub seq: u64,
    /// The socket's record.
    pub record: Record,
}

/// `struct ended`: an ended socket's record on the ring buffer `ended`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    /// The slot's `seq` while the socket held it.
    pub seq: u64,
    /// The slot it held.
    pub slot: u32,
    /// Zero.
    pub pad: u32,
    /// The record.
    pub record: Record,
}

/// `struct agent_stats`: what did not fit.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Sockets not recorded: no free slot.
    pub live_full: u64,
    /// Ended records lost: the ring buffer was full (the agent did not read it in time).
    pub done_full: u64,
    /// Sends/receives whose bytes were not counted.
    pub inflight_full: u64,
    /// Records ended without their release seen.
    pub stale: u64,
    /// Program runs that touched a record.
    pub events: u64,
    /// Slots handed out from the top (those below it are the only ones ever used).
    pub slots_used: u64,
}

// SAFETY: repr(C), integers and byte arrays only, no padding: seven u64s (56 bytes), three u32s
// and four u8s (16 more, so 72), then two 16-byte arrays: 104 bytes, a multiple of 8.
unsafe impl Pod for Record {}
// SAFETY: repr(C): a u64, two u32s (16 bytes) and a Record (Pod, 104 bytes, 8-aligned): no
// padding anywhere.
unsafe impl Pod for Ended {}
// SAFETY: repr(C), u64 fields only: no padding.
unsafe impl Pod for AgentStats {}

/// Bytes up to the first NUL, as text.
pub fn text(b: &[u8]) -> String {
    text_of(b).into_owned()
}

/// [`text`] without a copy when the bytes are UTF-8 already.
pub fn text_of(b: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end])
}

/// The map sizes userspace reads (a ring buffer has none: its records are [`Ended`]).
const SIZES: &[(&str, usize, usize)] = &[
    ("slots", 4, std::mem::size_of::<Slot>()),
    ("agent_stats", 4, std::mem::size_of::<AgentStats>()),
    ("ended", 0, 0),
];

/// Each program and the smc.ko function it probes (`true`: on return).
const PROBES: &[(&str, &str, bool)] = &[
    ("agent_listen", "smc_listen", false),
    ("agent_connect", "smc_connect", false),
    ("agent_listen_out", "smc_listen_out", false),
    ("agent_peer_info", "smc_conn_save_peer_info", false),
    ("agent_fallback", "smc_switch_to_fallback", false),
    ("agent_send", "smc_sendmsg", false),
    ("agent_send_ret", "smc_sendmsg", true),
    ("agent_recv", "smc_recvmsg", false),
    ("agent_recv_ret", "smc_recvmsg", true),
    ("agent_release", "__smc_release", false),
];

/// The kernel's BTF with smc.ko's appended: a split BTF continues its base's type ids and
/// string offsets, so the two type and string sections laid end to end are one BTF. With smc
/// built in, the kernel's BTF alone.
fn smc_btf() -> Result<Btf, Error> {
    let base = std::fs::read("/sys/kernel/btf/vmlinux")
        .map_err(|e| Error::io("reading the kernel's BTF (/sys/kernel/btf/vmlinux)", e))?;
    let module = match std::fs::read("/sys/kernel/btf/smc") {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("reading smc.ko's BTF (/sys/kernel/btf/smc)", e)),
    };
    let data = match module {
        Some(m) => merge_split_btf(&base, &m)?,
        None => base,
    };
    Btf::parse(&data, object::Endianness::default())
        .map_err(|e| Error::new(format!("cannot parse the kernel's BTF: {e}")))
}

/// A BTF blob's header fields: (header length, type offset, type length, string offset,
/// string length).
fn btf_sections(b: &[u8]) -> Option<(usize, usize, usize, usize, usize)> {
    let u32_at = |o: usize| -> Option<usize> {
        Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize)
    };
    if b.get(0..2)? != [0x9f, 0xeb] {
        return None;
    }
    let hdr = u32_at(4)?;
    let (to, tl, so, sl) = (u32_at(8)?, u32_at(12)?, u32_at(16)?, u32_at(20)?);
    let end = |o: usize, l: usize| hdr.checked_add(o)?.checked_add(l);
    (end(to, tl)? <= b.len() && end(so, sl)? <= b.len()).then_some((hdr, to, tl, so, sl))
}

/// `base` followed by the split BTF `split` as one BTF blob.
fn merge_split_btf(base: &[u8], split: &[u8]) -> Result<Vec<u8>, Error> {
    let bad = |what: &str| Error::new(format!("{what} is not a BTF blob smcrun can read"));
    let (bh, bto, btl, bso, bsl) = btf_sections(base).ok_or_else(|| bad("the kernel's BTF"))?;
    let (sh, sto, stl, sso, ssl) = btf_sections(split).ok_or_else(|| bad("smc.ko's BTF"))?;
    let mut out = base[..bh].to_vec();
    let types_len = (btl + stl) as u32;
    let strs_len = (bsl + ssl) as u32;
    out[8..12].copy_from_slice(&0u32.to_le_bytes());
    out[12..16].copy_from_slice(&types_len.to_le_bytes());
    out[16..20].copy_from_slice(&types_len.to_le_bytes());
    out[20..24].copy_from_slice(&strs_len.to_le_bytes());
    out.extend_from_slice(&base[bh + bto..bh + bto + btl]);
    out.extend_from_slice(&split[sh + sto..sh + sto + stl]);
    out.extend_from_slice(&base[bh + bso..bh + bso + bsl]);
    out.extend_from_slice(&split[sh + sso..sh + sso + ssl]);
    Ok(out)
}

/// What the agent needs of any kernel, for messages.
const KERNELS: &str = "the agent runs on x86_64 Linux 5.12 or newer with BTF \
    (CONFIG_DEBUG_INFO_BTF, and CONFIG_DEBUG_INFO_BTF_MODULES for a modular smc) and kprobes \
    (CONFIG_KPROBE_EVENTS), e.g. Debian 12's 6.12";

/// Whether this kernel can run the agent at all, smc aside: `Err` is one line naming what is
/// missing.
pub fn support() -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err(format!("this is not x86_64: {KERNELS}"));
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(format!("no /sys/kernel/btf/vmlinux: {KERNELS}"));
    }
    if !std::path::Path::new("/sys/bus/event_source/devices/kprobe/type").exists() {
        return Err(format!(
            "no kprobe PMU (/sys/bus/event_source/devices/kprobe): {KERNELS}"
        ));
    }
    Ok(())
}

/// How smc is there, as the agent needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Smc {
    /// Built into the kernel: its types are in the kernel's BTF.
    BuiltIn,
    /// smc.ko is loaded, with its BTF (`/sys/kernel/btf/smc`).
    Module,
    /// smc is a module and not loaded now (the agent attaches when it is).
    NotLoaded,
}

/// [`support`] and smc: how smc is there (`Ok`), or one line naming what is missing: smc.ko
/// without BTF (or a kernel older than module BTF), or a function the agent probes that this
/// kernel's smc does not have.
pub fn check() -> Result<Smc, String> {
    support()?;
    let release = smcrun_kernel::features::kernel_release();
    let smc = match smc_generation() {
        Some(_) if smc_builtin() => Smc::BuiltIn,
        Some(_) if std::path::Path::new("/sys/kernel/btf/smc").exists() => Smc::Module,
        Some(_) => {
            return Err(format!(
                "smc is a module and has no BTF (no /sys/kernel/btf/smc: \
                 CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11+): {KERNELS}"
            ))
        }
        None => Smc::NotLoaded,
    };
    if smc != Smc::BuiltIn && MODULE_BTF.missing_in(&release) == Some(true) {
        return Err(format!(
            "smc is a module and {}",
            MODULE_BTF.lacking(&release)
        ));
    }
    if BPF_ATOMIC_FETCH.missing_in(&release) == Some(true) {
        return Err(format!("{}: {KERNELS}", BPF_ATOMIC_FETCH.lacking(&release)));
    }
    if smc != Smc::NotLoaded {
        let missing = missing_functions();
        if !missing.is_empty() {
            return Err(format!(
                "this kernel's smc (Linux {release}) has no {} (the functions the agent probes; \
                 not in /proc/kallsyms): {KERNELS}",
                missing.join(", ")
            ));
        }
    }
    Ok(smc)
}

/// The functions of [`PROBES`] that /proc/kallsyms does not list (all of them when it cannot
/// be read).
fn missing_functions() -> Vec<&'static str> {
    let syms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let mut missing: Vec<&str> = PROBES.iter().map(|p| p.1).collect();
    missing.sort_unstable();
    missing.dedup();
    let mut found = std::collections::HashSet::new();
    for line in syms.lines() {
        if let Some(name) = line.split_whitespace().nth(2) {
            if missing.contains(&name) {
                found.insert(name.to_string());
            }
        }
    }
    missing.retain(|f| !found.contains(*f));
    missing
}

/// Whether smc is built into the kernel: /proc/kallsyms lists `smc_connect` with no module
/// (a module's symbols end in `[smc]`). Decided once: a kernel does not change that.
pub fn smc_builtin() -> bool {
    static BUILTIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BUILTIN.get_or_init(|| {
        std::fs::read_to_string("/proc/kallsyms").is_ok_and(|s| {
            s.lines().any(|l| {
                let mut f = l.split_whitespace().skip(2);
                f.next() == Some("smc_connect") && f.next().is_none()
            })
        })
    })
}

/// Which load of smc.ko is there: the inode of `/sys/module/smc` (a new one each load), `None`
/// when smc is not loaded. With smc built in (no `/sys/module/smc/initstate`, maybe no
/// `/sys/module/smc` at all), always `Some(0)`.
pub fn smc_generation() -> Option<u64> {
    match std::fs::read_to_string("/sys/module/smc/initstate") {
        Ok(s) if s.trim() == "live" => std::fs::metadata("/sys/module/smc").ok().map(|m| m.ino()),
        // Coming or going.
        Ok(_) => None,
        Err(_) => smc_builtin().then_some(0),
    }
}

/// What one read of the kernel side found.
#[derive(Debug, Default)]
pub struct Reading {
    /// The sockets that ended since the last read, by end time.
    pub ended: Vec<Record>,
    /// The sockets open now (none of them among `ended`).
    pub live: Vec<Record>,
    /// The counters.
    pub stats: AgentStats,
}

/// The loaded, attached agent programs and their maps (detached when dropped).
#[derive(Debug)]
pub struct Agent {
    slots: sys::Mmap,
    stats: sys::Mmap,
    ring: RingBuf,
    inst: Instance,
    probes: Vec<sys::Kprobe>,
}

/// An array map's values mapped (BPF_F_MMAPABLE; `entries` values of `T`, each 8-aligned).
fn map_array<T>(inst: &Instance, name: &str, entries: usize) -> Result<sys::Mmap, Error> {
    let page = sys::page_size();
    let len = (std::mem::size_of::<T>().next_multiple_of(8) * entries).next_multiple_of(page);
    sys::map_mmap(inst.map(name)?.fd(), len, 0, false)
        .map_err(|e| Error::io(format!("mapping the agent's BPF map {name} (mmap)"), e))
}

impl Agent {
    /// Loads the object against the running kernel and smc.ko, maps its slots, counters and
    /// ring buffer, and attaches every probe.
    pub fn attach() -> Result<Agent, Error> {
        check().map_err(Error::new)?;
        let btf = smc_btf()?;
        let names: Vec<&str> = PROBES.iter().map(|p| p.0).collect();
        let inst = loader::load_object(OBJECT, &btf, SIZES, &names, |name, insns, license| {
            sys::prog_load_kprobe(name, insns, license).map_err(|e| loader::refused(name, e))
        })?;
        let slots = map_array::<Slot>(&inst, "slots", MAX_LIVE as usize)?;
        let stats = map_array::<AgentStats>(&inst, "agent_stats", 1)?;
        let ring = RingBuf::open(inst.map("ended")?.fd(), RING_BYTES as usize)
            .map_err(|e| Error::io("mapping the agent's ring buffer (mmap)", e))?;
        let mut probes = Vec::new();
        for (prog, func, ret) in PROBES {
            let f = CString::new(*func).expect("no NUL in a function name");
            let fd = sys::kprobe_open(inst.program(prog)?, &f, *ret).map_err(|e| {
                Error::io(
                    format!(
                        "attaching {} on {func} (is smc loaded?)",
                        if *ret { "a kretprobe" } else { "a kprobe" }
                    ),
                    e,
                )
            })?;
            probes.push(fd);
        }
        Ok(Agent {
            slots,
            stats,
            ring,
            inst,
            probes,
        })
    }

    /// The times a probe did not run its program since it was attached (the kprobe hit while
    /// its CPU was in a kprobe or BPF program already, or a kretprobe found all its return
    /// instances in use: the perf kprobe PMU gives each max(10, 2 × CPUs), no way to ask more),
    /// so that a byte count or a record was lost. `None` where the kernel does not count them
    /// (before 6.7: [`KPROBE_MISSED`]) or the probes have no BPF links (before 5.15). (Asked
    /// with BPF_OBJ_GET_INFO_BY_FD, which does not hold the tracing programs off.)
    pub fn probes_missed(&self) -> Option<u64> {
        Some(self.missed_per_probe()?.iter().map(|m| m.1 + m.2).sum())
    }

    /// [`Agent::probes_missed`] per probe, in [`PROBES`]' order: (program, runs the kprobe
    /// missed, runs the BPF program was not run for recursion).
    pub fn missed_per_probe(&self) -> Option<Vec<(&'static str, u64, u64)>> {
        let release = smcrun_kernel::features::kernel_release();
        if KPROBE_MISSED.missing_in(&release) != Some(false) {
            return None;
        }
        let mut out = Vec::new();
        for (p, (prog, _, _)) in self.probes.iter().zip(PROBES) {
            let link = sys::kprobe_link_missed(p.link.as_ref()?.as_fd()).ok()??;
            let rec = sys::prog_recursion_misses(self.inst.program(prog).ok()?).ok()?;
            out.push((*prog, link, rec));
        }
        Some(out)
    }

    /// The kernel side's counters, from their mapping.
    pub fn stats(&self) -> AgentStats {
        // SAFETY: the mapping holds one `struct agent_stats` at its start (page-aligned); the
        // programs change it meanwhile, so it is read volatile (a counter read mid-update is its
        // value before or after: each is one aligned u64).
        unsafe { std::ptr::read_volatile(self.stats.ptr() as *const AgentStats) }
    }

    /// Waits at most `timeout`, or until the programs find the ring buffer half full.
    pub fn wait(&self, timeout: std::time::Duration) {
        self.ring.wait(timeout);
    }

    /// The open sockets (from the slots' mapping), then the ended ones (from the ring buffer)
    /// and the counters: a socket that ended between the two is among the ended ones only.
    pub fn read(&mut self) -> Reading {
        let used = self.stats().slots_used.min(MAX_LIVE as u64) as usize;
        let mut live: Vec<(u32, u64, Record)> = Vec::new();
        let base = self.slots.ptr() as *const Slot;
        for i in 0..used {
            // SAFETY: slot `i` < MAX_LIVE lies in the mapping (MAX_LIVE values of
            // size_of::<Slot>(), a multiple of 8, as the array lays them out). The programs write
            // it meanwhile: its `seq` is read atomically, the record volatile, and it is kept
            // only when `seq` was odd (held) and the same after the copy (the same socket
            // throughout; a field read mid-update is its old or its new value).
            let (before, rec, after) = unsafe {
                let slot = base.add(i);
                let seq = AtomicU64::from_ptr(std::ptr::addr_of!((*slot).seq) as *mut u64);
                let before = seq.load(Ordering::Acquire);
                if before.is_multiple_of(2) {
                    continue;
                }
                let rec = std::ptr::read_volatile(std::ptr::addr_of!((*slot).record));
                fence(Ordering::Acquire);
                (before, rec, seq.load(Ordering::Relaxed))
            };
            if before == after {
                live.push((i as u32, before, rec));
            }
        }
        let mut ended = Vec::new();
        let mut gone = std::collections::HashSet::new();
        self.ring.consume(|b| {
            if let Some(e) = b.get(..std::mem::size_of::<Ended>()) {
                let e: Ended = from_bytes(e);
                gone.insert((e.slot, e.seq));
                ended.push(e.record);
            }
        });
        ended.sort_by_key(|r| r.end_ns);
        live.retain(|(slot, seq, _)| !gone.contains(&(*slot, *seq)));
        Reading {
            ended,
            live: live.into_iter().map(|l| l.2).collect(),
            stats: self.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(types: &[u8], strs: &[u8]) -> Vec<u8> {
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for v in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strs.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(types);
        b.extend_from_slice(strs);
        b
    }

    #[test]
    fn a_split_btf_is_appended_section_by_section() {
        let base = blob(b"AAAA", b"\0base\0");
        let split = blob(b"BBBBBBBB", b"mod\0");
        let m = merge_split_btf(&base, &split).unwrap();
        assert_eq!(btf_sections(&m), Some((24, 0, 12, 12, 10)));
        assert_eq!(&m[24..], b"AAAABBBBBBBB\0base\0mod\0");
        // A truncated blob is refused, not read past its end.
        assert!(merge_split_btf(&base, &split[..30]).is_err());
        assert!(merge_split_btf(b"\x9f", &split).is_err());
    }

    #[test]
    fn the_maps_of_the_object_have_the_sizes_rust_reads() {
        let data = OBJECT.to_vec();
        let obj = aya_obj::Object::parse(&data).unwrap();
        for (name, k, v) in SIZES {
            let m = &obj.maps[*name];
            assert_eq!(
                (m.key_size() as usize, m.value_size() as usize),
                (*k, *v),
                "{name}"
            );
        }
        assert_eq!(obj.maps["slots"].max_entries(), MAX_LIVE);
        assert_eq!(obj.maps["ended"].max_entries(), RING_BYTES);
        // The ring holds as many ended records as there are slots (8-byte header each).
        let record = (std::mem::size_of::<Ended>() + crate::ringbuf::HEADER).next_multiple_of(8);
        assert_eq!(RING_BYTES as usize / record, MAX_LIVE as usize);
        for (prog, _, _) in PROBES {
            assert!(obj.programs.contains_key(*prog), "{prog}");
        }
    }
}
