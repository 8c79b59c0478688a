//! Thin typed wrappers of the bpf(2) commands BPF mode uses, on aya-obj's generated `bpf_attr`.
//!
//! Each wrapper fills the one member of the `bpf_attr` union its command reads, zeroes the rest
//! (the kernel refuses non-zero bytes past what it knows), and turns the result into an owned fd
//! or an `io::Error` carrying errno.

use aya_obj::generated::{
    bpf_attach_type, bpf_attr, bpf_cmd, bpf_insn, bpf_link_info, bpf_map_info, bpf_prog_info,
    bpf_prog_type,
};
use std::ffi::CStr;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// bpf(cmd, attr, sizeof attr).
fn bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, initialised bpf_attr for the whole call; the kernel reads and
    // writes at most `size_of::<bpf_attr>()` bytes of it. Pointers stored in it are set by the
    // callers to buffers that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut bpf_attr,
            mem::size_of::<bpf_attr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn zeroed() -> bpf_attr {
    // SAFETY: bpf_attr is a plain C union of integers; all zero bytes is its "nothing set".
    unsafe { mem::zeroed() }
}

fn fd_of(r: libc::c_long) -> OwnedFd {
    // SAFETY: the commands calling this return a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// Copies `name` into a kernel object name (15 bytes and a NUL at most).
fn object_name(name: &str) -> [libc::c_char; 16] {
    let mut out = [0 as libc::c_char; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b as libc::c_char;
    }
    out
}

/// BPF_MAP_CREATE.
pub fn map_create(
    name: &str,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = zeroed();
    // SAFETY: the map-create member of a zeroed union of integers: any bytes are a valid value
    // of it, and BPF_MAP_CREATE reads this member.
    let a = unsafe { &mut attr.__bindgen_anon_1 };
    a.map_type = map_type;
    a.key_size = key_size;
    a.value_size = value_size;
    a.max_entries = max_entries;
    a.map_flags = flags;
    a.map_name = object_name(name);
    bpf(bpf_cmd::BPF_MAP_CREATE, &mut attr).map(fd_of)
}

/// BPF_MAP_CREATE of a BPF_MAP_TYPE_STRUCT_OPS map (the handshake policy's `smc_hs_ctrl`): its
/// value is the kernel's `bpf_struct_ops_<name>` type, `value_type_id` in vmlinux BTF, and the
/// kernel wants a user BTF object with it (`btf`, see [`btf_load`]) though it reads nothing there.
pub fn map_create_struct_ops(
    name: &str,
    value_size: u32,
    value_type_id: u32,
    btf: BorrowedFd<'_>,
) -> io::Result<OwnedFd> {
    let mut attr = zeroed();
    // SAFETY: as in `map_create`: the zeroed union's map-create member, all integers.
    let a = unsafe { &mut attr.__bindgen_anon_1 };
    a.map_type = aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_STRUCT_OPS as u32;
    a.key_size = 4;
    a.value_size = value_size;
    a.max_entries = 1;
    a.map_name = object_name(name);
    a.btf_fd = btf.as_raw_fd() as u32;
    a.btf_vmlinux_value_type_id = value_type_id;
    bpf(bpf_cmd::BPF_MAP_CREATE, &mut attr).map(fd_of)
}

/// A BTF blob of `types` and `strings` (the kernel's format: a 24-byte header, version 1, then
/// the two sections), in this machine's byte order.
pub(crate) fn btf_blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
    let mut b = 0xeb9fu16.to_ne_bytes().to_vec();
    b.extend_from_slice(&[1, 0]);
    let tl = types.len() as u32;
    for v in [24u32, 0, tl, tl, strings.len() as u32] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(types);
    b.extend_from_slice(strings);
    b
}

/// BPF_BTF_LOAD of the smallest BTF there is (one `int`): the user BTF object a struct_ops map
/// must name (the kernel refuses one without, and reads the value's layout from vmlinux).
pub fn btf_load() -> io::Result<OwnedFd> {
    // type 1: INT "int", 4 bytes, signed, 32 bits
    let mut int = Vec::new();
    for v in [1u32, 1 << 24, 4, (1 << 24) | 32] {
        int.extend_from_slice(&v.to_ne_bytes());
    }
    let blob = btf_blob(&int, b"\0int\0");
    let mut attr = zeroed();
    // SAFETY: the BTF-load member of a zeroed union of integers (any bytes are a valid value);
    // `blob` outlives the bpf() call that reads through the pointer stored here.
    let a = unsafe { &mut attr.__bindgen_anon_7 };
    a.btf = blob.as_ptr() as u64;
    a.btf_size = blob.len() as u32;
    bpf(bpf_cmd::BPF_BTF_LOAD, &mut attr).map(fd_of)
}

/// A program the kernel refused, with the verifier's log.
#[derive(Debug)]
pub struct LoadError {
    /// errno of BPF_PROG_LOAD.
    pub error: io::Error,
    /// The verifier log (may be empty).
    pub log: String,
}

/// BPF_PROG_LOAD of a tracing program (fmod_ret or tp_btf) attached to vmlinux BTF type
/// `attach_btf_id`.
pub fn prog_load_tracing(
    name: &str,
    attach: bpf_attach_type,
    attach_btf_id: u32,
    insns: &[bpf_insn],
    license: &CStr,
) -> Result<OwnedFd, LoadError> {
    prog_load(
        name,
        bpf_prog_type::BPF_PROG_TYPE_TRACING,
        Some((attach as u32, attach_btf_id)),
        insns,
        license,
    )
}

/// BPF_PROG_LOAD of a struct_ops program: member `member` (its index) of the kernel struct
/// `struct_id` (vmlinux BTF).
pub fn prog_load_struct_ops(
    name: &str,
    struct_id: u32,
    member: u32,
    insns: &[bpf_insn],
    license: &CStr,
) -> Result<OwnedFd, LoadError> {
    prog_load(
        name,
        bpf_prog_type::BPF_PROG_TYPE_STRUCT_OPS,
        Some((member, struct_id)),
        insns,
        license,
    )
}

/// BPF_PROG_LOAD of a kprobe program (attached with [`kprobe_open`]).
pub fn prog_load_kprobe(
    name: &str,
    insns: &[bpf_insn],
    license: &CStr,
) -> Result<OwnedFd, LoadError> {
    prog_load(
        name,
        bpf_prog_type::BPF_PROG_TYPE_KPROBE,
        None,
        insns,
        license,
    )
}

/// BPF_PROG_LOAD; `attach` is (expected_attach_type, attach_btf_id).
fn prog_load(
    name: &str,
    prog_type: bpf_prog_type,
    attach: Option<(u32, u32)>,
    insns: &[bpf_insn],
    license: &CStr,
) -> Result<OwnedFd, LoadError> {
    let mut log = vec![0u8; 256 * 1024];
    let mut attr = zeroed();
    // SAFETY: the prog-load member of a zeroed union of integers (any bytes are a valid value);
    // `insns`, `license` and `log` outlive the bpf() call that uses the pointers stored here,
    // and `log_size` is `log`'s length, so the kernel writes inside it.
    let a = unsafe { &mut attr.__bindgen_anon_3 };
    a.prog_type = prog_type as u32;
    if let Some((attach, id)) = attach {
        a.expected_attach_type = attach;
        a.attach_btf_id = id;
    }
    a.insn_cnt = insns.len() as u32;
    a.insns = insns.as_ptr() as u64;
    a.license = license.as_ptr() as u64;
    a.prog_name = object_name(name);
    a.log_level = 1;
    a.log_size = log.len() as u32;
    a.log_buf = log.as_mut_ptr() as u64;
    match bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
        Ok(r) => Ok(fd_of(r)),
        Err(error) => {
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            Err(LoadError {
                error,
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            })
        }
    }
}

/// Whether the kernel lets this process load the simplest BPF program there is (a socket filter
/// that returns 0): tells a kernel that refuses tracing programs apart from one that refuses
/// bpf(2) altogether, when a load fails with EPERM before the verifier said anything.
pub fn plain_program_loads() -> io::Result<()> {
    // r0 = 0; exit
    // SAFETY: bpf_insn is plain integers (a bitfield byte among them); all zero is `r0 = r0 + 0`.
    let mut insns: [bpf_insn; 2] = unsafe { mem::zeroed() };
    insns[0].code = 0xb7;
    insns[1].code = 0x95;
    prog_load(
        "smcrun_probe",
        bpf_prog_type::BPF_PROG_TYPE_SOCKET_FILTER,
        None,
        &insns,
        c"GPL",
    )
    .map(drop)
    .map_err(|e| e.error)
}

/// The kprobe PMU's type and its `retprobe` config bit, from sysfs.
fn kprobe_pmu() -> io::Result<(u32, u64)> {
    let dir = "/sys/bus/event_source/devices/kprobe";
    let ty = std::fs::read_to_string(format!("{dir}/type"))?;
    let ty: u32 = ty
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{dir}/type: {ty:?}")))?;
    // "config:0"
    let f = std::fs::read_to_string(format!("{dir}/format/retprobe"))?;
    let bit: u32 = f
        .trim()
        .strip_prefix("config:")
        .and_then(|b| b.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{dir}/format/retprobe: {f:?}"),
            )
        })?;
    Ok((ty, 1u64 << bit))
}

/// An attached kprobe: its perf event, and the BPF link that runs the program on it when the
/// kernel makes one (BPF_LINK_CREATE on a perf event, Linux 5.15+; before, the perf event's
/// PERF_EVENT_IOC_SET_BPF, which has no link).
#[derive(Debug)]
pub struct Kprobe {
    /// The kprobe's perf event.
    pub perf: OwnedFd,
    /// The link, when there is one (its info has the probe's missed count on 6.7+).
    pub link: Option<OwnedFd>,
}

/// A kprobe (or, `ret`, a kretprobe) on kernel function `func` running `prog`, on every CPU;
/// it lasts as long as the returned perf event (and link). A kprobe on a module's function does
/// not hold the module: when the module goes, the probe goes quiet.
pub fn kprobe_open(prog: BorrowedFd<'_>, func: &CStr, ret: bool) -> io::Result<Kprobe> {
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    let (ty, retbit) = kprobe_pmu()?;
    // struct perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes): type, size, config, then at
    // offset 56 the kprobe's function name (config1) and offset (config2).
    let mut attr = [0u64; 14];
    attr[0] = ty as u64 | (112u64 << 32);
    attr[1] = if ret { retbit } else { 0 };
    attr[7] = func.as_ptr() as u64;
    attr[8] = 0;
    // SAFETY: attr is a perf_event_attr of the size it states; func outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = fd_of(fd);
    let link = {
        let mut attr = zeroed();
        // SAFETY: the link-create member of a zeroed union of integers: any bytes are a valid
        // value of it.
        let a = unsafe { &mut attr.link_create };
        a.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
        a.__bindgen_anon_2.target_fd = fd.as_raw_fd() as u32;
        a.attach_type = bpf_attach_type::BPF_PERF_EVENT as u32;
        match bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr) {
            Ok(l) => Some(fd_of(l)),
            // Before 5.15 there are no perf event links: the ioctl attaches without one.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)
                ) =>
            {
                None
            }
            Err(e) => return Err(e),
        }
    };
    // SAFETY: PERF_EVENT_IOC_SET_BPF and PERF_EVENT_IOC_ENABLE take an int by value (a program
    // fd, and an ignored 0), so the kernel dereferences nothing of ours; `fd` is the perf event
    // just opened and `prog` is borrowed for the call.
    unsafe {
        if (link.is_none()
            && libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd()) < 0)
            || libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(Kprobe { perf: fd, link })
}

/// `BPF_LINK_TYPE_PERF_EVENT`.
const LINK_TYPE_PERF_EVENT: u32 = 7;
/// `BPF_PERF_EVENT_KPROBE` and `BPF_PERF_EVENT_KRETPROBE`.
const PERF_EVENT_KPROBES: [u32; 2] = [3, 4];

/// The times a kprobe link's probe did not run its program: the kprobe hit while the CPU was
/// already in a kprobe (recursion) or, for a kretprobe, with every return instance in use
/// (`maxactive`). `None` when the kernel's link info has no such count (before 6.6 it has no
/// kprobe info; the `missed` field came with 6.7, so 6.6's zero would be no count at all:
/// callers check the kernel's version: `smcrun_kernel::features::KPROBE_MISSED`).
pub fn kprobe_link_missed(link: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    let mut name = [0u8; 128];
    // SAFETY: bpf_link_info is plain integers and unions of them.
    let mut info: bpf_link_info = unsafe { mem::zeroed() };
    // SAFETY: writing the perf_event member of the zeroed union.
    unsafe {
        let k = &mut info.__bindgen_anon_1.perf_event.__bindgen_anon_1.kprobe;
        k.func_name = name.as_mut_ptr() as u64;
        k.name_len = name.len() as u32;
    }
    let mut attr = zeroed();
    // SAFETY: the info member of a zeroed union of integers (any bytes are a valid value); `info`
    // and `name` outlive the bpf() call, and `info_len` and `name_len` are their sizes.
    let a = unsafe { &mut attr.info };
    a.bpf_fd = link.as_raw_fd() as u32;
    a.info_len = mem::size_of::<bpf_link_info>() as u32;
    a.info = &mut info as *mut bpf_link_info as u64;
    bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    // SAFETY: reading the member the kernel filled for a perf event link.
    let (ty, missed) = unsafe {
        let p = &info.__bindgen_anon_1.perf_event;
        (p.type_, p.__bindgen_anon_1.kprobe.missed)
    };
    Ok((info.type_ == LINK_TYPE_PERF_EVENT && PERF_EVENT_KPROBES.contains(&ty)).then_some(missed))
}

/// The times program `prog` was not run because the CPU was already running a BPF program of
/// its kind (`recursion_misses`; for kprobe programs counted from 6.7 on, 0 before).
pub fn prog_recursion_misses(prog: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(obj_info::<bpf_prog_info>(prog)?.recursion_misses)
}

/// BPF_RAW_TRACEPOINT_OPEN without a name: attaches a tracing program (fmod_ret, tp_btf) where
/// its attach_btf_id says, and returns the link.
pub fn tracing_attach(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut attr = zeroed();
    // SAFETY: the raw-tracepoint member of a zeroed union of integers: any bytes are a valid
    // value of it (a name of 0 is no pointer).
    let a = unsafe { &mut attr.raw_tracepoint };
    a.name = 0;
    a.prog_fd = prog.as_raw_fd() as u32;
    bpf(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr).map(fd_of)
}

/// BPF_OBJ_PIN: `fd` (a map or link) stays alive at `path` on bpffs until the file is removed.
pub fn obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> io::Result<()> {
    let mut attr = zeroed();
    // SAFETY: the pin member of a zeroed union of integers (any bytes are a valid value); `path`
    // is NUL-terminated and outlives the bpf() call.
    let a = unsafe { &mut attr.__bindgen_anon_4 };
    a.bpf_fd = fd.as_raw_fd() as u32;
    a.pathname = path.as_ptr() as u64;
    bpf(bpf_cmd::BPF_OBJ_PIN, &mut attr).map(drop)
}

/// BPF_OBJ_GET: opens what is pinned at `path`.
pub fn obj_get(path: &CStr) -> io::Result<OwnedFd> {
    let mut attr = zeroed();
    // SAFETY: as in `obj_pin`: the zeroed union's pin member, all integers; `path` is
    // NUL-terminated and outlives the call.
    let a = unsafe { &mut attr.__bindgen_anon_4 };
    a.pathname = path.as_ptr() as u64;
    bpf(bpf_cmd::BPF_OBJ_GET, &mut attr).map(fd_of)
}

fn elem(
    cmd: bpf_cmd,
    map: BorrowedFd<'_>,
    key: *const u8,
    value: u64,
    flags: u64,
) -> io::Result<bool> {
    let mut attr = zeroed();
    // SAFETY: the map-element member of a zeroed union of integers: any bytes are a valid value
    // of it. The public callers pass `key` and `value` from slices that outlive the call (and a
    // value of the map's value size, as their documentation asks).
    let a = unsafe { &mut attr.__bindgen_anon_2 };
    a.map_fd = map.as_raw_fd() as u32;
    a.key = key as u64;
    a.__bindgen_anon_1.value = value;
    a.flags = flags;
    match bpf(cmd, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// BPF_MAP_LOOKUP_ELEM: `false` when the key is not there. `value` must be the map's value size.
pub fn map_lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    elem(
        bpf_cmd::BPF_MAP_LOOKUP_ELEM,
        map,
        key.as_ptr(),
        value.as_mut_ptr() as u64,
        0,
    )
}

/// BPF_MAP_UPDATE_ELEM with BPF_ANY.
pub fn map_update(map: BorrowedFd<'_>, key: &[u8], value: &[u8]) -> io::Result<()> {
    elem(
        bpf_cmd::BPF_MAP_UPDATE_ELEM,
        map,
        key.as_ptr(),
        value.as_ptr() as u64,
        0,
    )
    .map(drop)
}

/// BPF_MAP_DELETE_ELEM: `false` when the key was not there.
pub fn map_delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    elem(bpf_cmd::BPF_MAP_DELETE_ELEM, map, key.as_ptr(), 0, 0)
}

/// BPF_MAP_GET_NEXT_KEY: the key after `key` (the first with `None`) into `next`; `false` at
/// the end.
pub fn map_next_key(map: BorrowedFd<'_>, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let k = key.map_or(std::ptr::null(), |k| k.as_ptr());
    elem(
        bpf_cmd::BPF_MAP_GET_NEXT_KEY,
        map,
        k,
        next.as_mut_ptr() as u64,
        0,
    )
}

/// Every key of a hash map, of `key_size` bytes each.
pub fn map_keys(map: BorrowedFd<'_>, key_size: usize) -> io::Result<Vec<Vec<u8>>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut next = vec![0u8; key_size];
        let more = map_next_key(map, keys.last().map(|k| k.as_slice()), &mut next)?;
        if !more || keys.len() > 1 << 20 {
            return Ok(keys);
        }
        keys.push(next);
    }
}

/// A shared mapping of a BPF map's memory (an mmapable array's values, a ring buffer's pages),
/// unmapped when dropped. Reading it is no system call: the kernel's tracing programs are not
/// held off meanwhile, as they are during every bpf() map command.
#[derive(Debug)]
pub struct Mmap {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it goes through raw pointers
// with volatile or atomic reads and writes.
unsafe impl Send for Mmap {}

impl Mmap {
    /// The mapping's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes (never: mmap refuses a length of 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are those mmap returned and nothing else unmaps them.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

/// mmap of `len` bytes of a BPF map from byte `offset` (a multiple of the page size), shared,
/// read-only or read-write: a BPF_F_MMAPABLE array (its values from offset 0) or a
/// BPF_MAP_TYPE_RINGBUF (its consumer page read-write at 0, its producer page and data, mapped
/// twice, read-only from one page on).
pub fn map_mmap(
    map: BorrowedFd<'_>,
    len: usize,
    offset: usize,
    writable: bool,
) -> io::Result<Mmap> {
    let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
    // SAFETY: a new mapping at an address the kernel picks; nothing existing is replaced. The
    // fd is valid for the call; the mapping holds its own reference to the map.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            map.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let ptr = std::ptr::NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
    Ok(Mmap { ptr, len })
}

/// An epoll instance watching one fd, edge-triggered, for input: [`Epoll::wait`] returns at the
/// fd's next wake-up (a ring buffer's: when its programs ask for one), not merely while it has
/// something to read.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// epoll_create1 and EPOLL_CTL_ADD of `fd` (EPOLLIN | EPOLLET).
    pub fn new(fd: BorrowedFd<'_>) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no preconditions; a non-negative result is a new fd.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a new fd nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0,
        };
        // SAFETY: both fds are valid for the call; `ev` is read during it only.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) }
            < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll(ep))
    }

    /// Waits at most `timeout` for a wake-up of the fd (or a signal): whether there was one.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `ev` has room for the one event asked for and outlives the call.
        unsafe { libc::epoll_wait(self.0.as_raw_fd(), &mut ev, 1, ms) > 0 }
    }
}

/// Kernel objects whose information BPF_OBJ_GET_INFO_BY_FD fills.
pub trait ObjInfo: Copy {}
impl ObjInfo for bpf_prog_info {}
impl ObjInfo for bpf_map_info {}
impl ObjInfo for bpf_link_info {}

/// BPF_OBJ_GET_INFO_BY_FD into a zeroed `T`.
pub fn obj_info<T: ObjInfo>(fd: BorrowedFd<'_>) -> io::Result<T> {
    // SAFETY: T is one of the kernel's plain info structs (integers and arrays only).
    let mut info: T = unsafe { mem::zeroed() };
    let mut attr = zeroed();
    // SAFETY: the info member of a zeroed union of integers (any bytes are a valid value);
    // `info` outlives the bpf() call and `info_len` is its size, so the kernel writes inside it.
    let a = unsafe { &mut attr.info };
    a.bpf_fd = fd.as_raw_fd() as u32;
    a.info_len = mem::size_of::<T>() as u32;
    a.info = &mut info as *mut T as u64;
    bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info)
}

/// The map ids a program uses.
pub fn prog_map_ids(prog: BorrowedFd<'_>) -> io::Result<Vec<u32>> {
    let n = obj_info::<bpf_prog_info>(prog)?.nr_map_ids;
    let mut ids = vec![0u32; n as usize];
    // SAFETY: bpf_prog_info is plain integers and arrays of them: all zero bytes is a valid value.
    let mut info: bpf_prog_info = unsafe { mem::zeroed() };
    info.nr_map_ids = n;
    info.map_ids = ids.as_mut_ptr() as u64;
    let mut attr = zeroed();
    // SAFETY: the info member of a zeroed union of integers (any bytes are a valid value);
    // `info` and `ids` outlive the bpf() call, `info_len` is `info`'s size and `nr_map_ids` is
    // `ids`'s length, so the kernel writes inside both.
    let a = unsafe { &mut attr.info };
    a.bpf_fd = prog.as_raw_fd() as u32;
    a.info_len = mem::size_of::<bpf_prog_info>() as u32;
    a.info = &mut info as *mut bpf_prog_info as u64;
    bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    ids.truncate(info.nr_map_ids.min(n) as usize);
    Ok(ids)
}

/// Which kind of kernel object an id names.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A loaded program.
    Prog,
    /// A map.
    Map,
    /// A link (an attachment).
    Link,
}

/// BPF_*_GET_NEXT_ID: the id after `start` (0 for the first), or `None` at the end.
pub fn next_id(kind: Kind, start: u32) -> io::Result<Option<u32>> {
    let cmd = match kind {
        Kind::Prog => bpf_cmd::BPF_PROG_GET_NEXT_ID,
        Kind::Map => bpf_cmd::BPF_MAP_GET_NEXT_ID,
        Kind::Link => bpf_cmd::BPF_LINK_GET_NEXT_ID,
    };
    let mut attr = zeroed();
    // SAFETY: the get-id member of a zeroed union of integers: any bytes are a valid value of it.
    let a = unsafe { &mut attr.__bindgen_anon_6 };
    a.__bindgen_anon_1.start_id = start;
    match bpf(cmd, &mut attr) {
        // SAFETY: the same member, an integer the kernel wrote (any bytes are a valid u32).
        Ok(_) => Ok(Some(unsafe { attr.__bindgen_anon_6.next_id })),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// BPF_*_GET_FD_BY_ID (needs CAP_SYS_ADMIN).
pub fn fd_by_id(kind: Kind, id: u32) -> io::Result<OwnedFd> {
    let cmd = match kind {
        Kind::Prog => bpf_cmd::BPF_PROG_GET_FD_BY_ID,
        Kind::Map => bpf_cmd::BPF_MAP_GET_FD_BY_ID,
        Kind::Link => bpf_cmd::BPF_LINK_GET_FD_BY_ID,
    };
    let mut attr = zeroed();
    // SAFETY: the get-id member of a zeroed union of integers: any bytes are a valid value of it.
    let a = unsafe { &mut attr.__bindgen_anon_6 };
    a.__bindgen_anon_1.start_id = id;
    bpf(cmd, &mut attr).map(fd_of)
}

/// A kernel object name as text (the bytes before the first NUL).
pub fn name_of(name: &[libc::c_char; 16]) -> String {
    let bytes: Vec<u8> = name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
