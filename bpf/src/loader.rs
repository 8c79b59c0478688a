//! Loading the committed BPF object: aya-obj parses it, relocates its CO-RE field offsets
//! against the running kernel's BTF and its map references against the maps made here; the
//! programs asked for are loaded with [`crate::sys`].
//!
//! (aya 0.14, the newest aya that builds with this project's Rust, cannot load fmod_ret
//! programs, so its object crate is used with the few bpf(2) commands written out in `sys`.)

use crate::error::Error;
use crate::layout;
use crate::sys;
use aya_obj::btf::{Btf, BtfKind};
use aya_obj::generated::bpf_attach_type;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// The object, as `bash bpf/build.sh` makes it from `smcrun.bpf.c`.
pub const OBJECT: &[u8] = include_bytes!("smcrun.bpf.o");

/// The socket() hook's function, in vmlinux BTF.
pub const HOOK: &str = "update_socket_protocol";

/// The running kernel's BTF, parsed once per process (it is several MB).
pub fn kernel_btf() -> Result<&'static Btf, String> {
    static BTF: std::sync::OnceLock<Result<Btf, String>> = std::sync::OnceLock::new();
    BTF.get_or_init(|| Btf::from_sys_fs().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// A map made for an instance: its fd and sizes.
#[derive(Debug)]
pub struct MapHandle {
    /// The map.
    pub fd: OwnedFd,
    /// Key bytes.
    pub key_size: u32,
    /// Value bytes.
    pub value_size: u32,
}

impl MapHandle {
    /// The map's fd, borrowed.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One loaded copy of the object: its maps and the programs asked for (not attached yet).
#[derive(Debug)]
pub struct Instance {
    /// Maps by their name in the object.
    pub maps: HashMap<String, MapHandle>,
    progs: HashMap<String, OwnedFd>,
}

/// Where a program of the object attaches: the attach type and the BTF type it names.
fn target(program: &str) -> Option<(bpf_attach_type, &'static str, BtfKind)> {
    match program {
        "smcrun_tree" | "smcrun_attach" => {
            Some((bpf_attach_type::BPF_MODIFY_RETURN, HOOK, BtfKind::Func))
        }
        "smcrun_fork" => Some((
            bpf_attach_type::BPF_TRACE_RAW_TP,
            "btf_trace_sched_process_fork",
            BtfKind::Typedef,
        )),
        "smcrun_exit" => Some((
            bpf_attach_type::BPF_TRACE_RAW_TP,
            "btf_trace_sched_process_exit",
            BtfKind::Typedef,
        )),
        _ => None,
    }
}

/// The value sizes userspace writes, as `layout` defines them, by map name.
const SIZES: &[(&str, usize, usize)] = &[
    ("tree", 4, 4),
    ("cgroups", 8, 4),
    ("netns", 8, 4),
    ("rules", 4, std::mem::size_of::<layout::Rule>()),
    ("policies", 4, std::mem::size_of::<layout::PolicyHead>()),
    ("counters", 4, std::mem::size_of::<layout::Counters>()),
    ("by_program", std::mem::size_of::<layout::ProgramKey>(), 8),
];

/// Loads the object's maps and the named programs.
pub fn load(programs: &[&str]) -> Result<Instance, Error> {
    let btf = kernel_btf().map_err(|e| {
        Error::new(format!(
            "cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): {e}"
        ))
    })?;
    load_object(OBJECT, btf, SIZES, programs, |name, insns, license| {
        let (attach, type_name, kind) =
            target(name).ok_or_else(|| Error::new(format!("no BPF program {name}")))?;
        let btf_id = btf.id_by_type_name_kind(type_name, kind).map_err(|e| {
            Error::new(format!(
                "the kernel's BTF has no {type_name} (needed by {name}): {e}"
            ))
        })?;
        sys::prog_load_tracing(name, attach, btf_id, insns, license).map_err(|e| refused(name, e))
    })
}

/// The error of a program the kernel refused: the verifier's last line and its whole log.
pub(crate) fn refused(name: &str, e: sys::LoadError) -> Error {
    let last = e
        .log
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    let what = if last.is_empty() {
        format!("the kernel refused BPF program {name} before its verifier ran (no verifier log)")
    } else {
        format!("the kernel refused BPF program {name} ({last})")
    };
    Error::io(what, e.error).with_log(e.log)
}

/// Parses `object`, relocates its CO-RE accesses against `btf`, makes its maps (checking the
/// sizes userspace reads and writes, `sizes`: name, key, value) and loads `programs` with
/// `load_one(name, instructions, license)`.
pub(crate) fn load_object(
    object: &[u8],
    btf: &Btf,
    sizes: &[(&str, usize, usize)],
    programs: &[&str],
    load_one: impl Fn(&str, &[aya_obj::generated::bpf_insn], &std::ffi::CStr) -> Result<OwnedFd, Error>,
) -> Result<Instance, Error> {
    // Parsing needs the ELF bytes aligned as the object crate reads them: copy off the binary.
    let data = object.to_vec();
    let mut obj = aya_obj::Object::parse(&data)
        .map_err(|e| Error::new(format!("the committed BPF object does not parse: {e}")))?;
    obj.relocate_btf(btf)
        .map_err(|e| Error::new(format!("CO-RE relocation against this kernel failed: {e}")))?;

    let mut maps = HashMap::new();
    for (name, m) in &obj.maps {
        if let Some((_, k, v)) = sizes.iter().find(|(n, _, _)| n == name) {
            if m.key_size() as usize != *k || m.value_size() as usize != *v {
                return Err(Error::new(format!(
                    "map {name} in the BPF object has key/value sizes {}/{}, smcrun expects {k}/{v}: rebuild with bash bpf/build.sh",
                    m.key_size(),
                    m.value_size()
                )));
            }
        }
        let fd = sys::map_create(
            name,
            m.map_type(),
            m.key_size(),
            m.value_size(),
            m.max_entries(),
            m.map_flags(),
        )
        .map_err(|e| Error::io(format!("creating BPF map {name}"), e))?;
        maps.insert(
            name.clone(),
            MapHandle {
                fd,
                key_size: m.key_size(),
                value_size: m.value_size(),
            },
        );
    }
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
    // relocate_maps borrows the object mutably: give it the map definitions as copies.
    let defs: Vec<(String, i32, aya_obj::Map)> = obj
        .maps
        .iter()
        .map(|(n, m)| (n.clone(), maps[n].fd.as_raw_fd(), m.clone()))
        .collect();
    obj.relocate_maps(
        defs.iter().map(|(n, fd, m)| (n.as_str(), *fd, m)),
        &text_sections,
    )
    .map_err(|e| Error::new(format!("relocating the BPF object's maps: {e}")))?;
    obj.relocate_calls(&text_sections)
        .map_err(|e| Error::new(format!("relocating the BPF object's calls: {e}")))?;

    let mut progs = HashMap::new();
    for name in programs {
        let p = obj
            .programs
            .get(*name)
            .ok_or_else(|| Error::new(format!("the BPF object has no program {name}")))?;
        let f = &obj.functions[&p.function_key()];
        progs.insert(
            name.to_string(),
            load_one(name, &f.instructions, &p.license)?,
        );
    }
    Ok(Instance { maps, progs })
}

impl Instance {
    /// A map of this instance.
    pub fn map(&self, name: &str) -> Result<&MapHandle, Error> {
        self.maps
            .get(name)
            .ok_or_else(|| Error::new(format!("the BPF object has no map {name}")))
    }

    /// A loaded program's fd.
    pub fn program(&self, program: &str) -> Result<BorrowedFd<'_>, Error> {
        self.progs
            .get(program)
            .map(|p| p.as_fd())
            .ok_or_else(|| Error::new(format!("BPF program {program} was not loaded")))
    }

    /// Attaches a loaded program; the attachment lasts as long as the returned link (or its pin).
    pub fn attach(&self, program: &str) -> Result<OwnedFd, Error> {
        sys::tracing_attach(self.program(program)?)
            .map_err(|e| Error::io(format!("attaching BPF program {program}"), e))
    }
}
