//! Where the shim is, how it joins LD_PRELOAD, and which programs LD_PRELOAD cannot reach.

use smcrun_views::doctor::reach::{script_programs, Reach};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The shim's file name, as cargo builds it and as installed.
pub const SHIM_FILE: &str = "libsmcrun_shim.so";

/// System directories searched after the ones beside the executable.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/lib/smcrun",
    "/usr/lib/smcrun",
    "/usr/lib/x86_64-linux-gnu/smcrun",
    "/usr/lib/aarch64-linux-gnu/smcrun",
    "/usr/lib/s390x-linux-gnu/smcrun",
    "/usr/lib64/smcrun",
    "/usr/local/lib",
    "/usr/lib",
];

/// Finds the shim: `$SMCRUN_SHIM`, next to the smcrun executable, `../lib/smcrun/` beside it,
/// then the system library directories. The result is absolute and usable in LD_PRELOAD.
pub fn find_shim() -> Result<PathBuf, String> {
    if let Some(explicit) = std::env::var_os(smcrun_settings::SHIM_PATH.var) {
        let p = PathBuf::from(&explicit);
        if let Some(why) = not_a_shim(&p) {
            return Err(format!(
                "SMCRUN_SHIM={}: {why}; expected the path of {SHIM_FILE}",
                p.display()
            ));
        }
        return usable(p);
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            tried.push(dir.join(SHIM_FILE));
            tried.push(dir.join("../lib/smcrun").join(SHIM_FILE));
        }
    }
    tried.extend(SYSTEM_DIRS.iter().map(|d| Path::new(d).join(SHIM_FILE)));
    match tried.iter().find(|p| p.is_file()) {
        Some(p) => usable(p.clone()),
        None => Err(format!(
            "cannot find {SHIM_FILE} (looked in {}); set SMCRUN_SHIM to its path",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Why the loader could not preload `path` as smcrun's shim, if it could not: it is not a readable
/// regular file (opened without blocking: a FIFO cannot hang smcrun), not an ELF shared object, or
/// one of another class or machine than smcrun's own (the loader would skip it with a warning in
/// every program, and the programs would run without the shim).
fn not_a_shim(path: &Path) -> Option<String> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let (file, _) = match smcrun_sys::file::open_regular_at(None, &c, true) {
        Ok(f) => f,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    let Some(elf) = super::elf_parts::inspect(&file) else {
        return Some("not an ELF file".into());
    };
    if !elf.shared_object {
        return Some("not an ELF shared object".into());
    }
    let host = HOST_MACHINE.unwrap_or(elf.machine);
    if elf.is_64 != cfg!(target_pointer_width = "64") || elf.machine != host {
        return Some(format!(
            "a shared object for {} ({}-bit), not for this machine's {} programs",
            machine_name(elf.machine),
            if elf.is_64 { 64 } else { 32 },
            machine_name(host)
        ));
    }
    None
}

/// The ELF machine (`e_machine`) of smcrun's own build, so of the programs it runs; None for an
/// architecture not listed (any shim of smcrun's class is then taken).
const HOST_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(object::elf::EM_X86_64)
} else if cfg!(target_arch = "aarch64") {
    Some(object::elf::EM_AARCH64)
} else if cfg!(target_arch = "s390x") {
    Some(object::elf::EM_S390)
} else if cfg!(target_arch = "powerpc64") {
    Some(object::elf::EM_PPC64)
} else if cfg!(target_arch = "riscv64") {
    Some(object::elf::EM_RISCV)
} else {
    None
};

/// An ELF machine's name, for messages.
fn machine_name(machine: u16) -> String {
    use object::elf::*;
    let name = match machine {
        EM_X86_64 => "x86-64",
        EM_AARCH64 => "AArch64",
        EM_S390 => "s390x",
        EM_PPC64 => "ppc64",
        EM_386 => "i386",
        EM_ARM => "ARM",
        EM_RISCV => "RISC-V",
        _ => return format!("ELF machine {machine}"),
    };
    name.to_string()
}

/// Makes the path absolute and checks that LD_PRELOAD can carry it (it splits on ':' and ' ').
fn usable(p: PathBuf) -> Result<PathBuf, String> {
    let p = std::fs::canonicalize(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    if p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| *b == b':' || *b == b' ')
    {
        return Err(format!(
            "the shim's path {} contains ':' or a space, which LD_PRELOAD cannot carry; install it elsewhere",
            p.display()
        ));
    }
    Ok(p)
}

/// LD_PRELOAD with the shim appended, every existing entry kept in its place (their hooks run
/// first and reach ours through RTLD_NEXT). An entry naming the same file is not added twice, so
/// `smcrun smcrun prog` does not load it twice.
pub fn merge_ld_preload(existing: Option<&OsStr>, shim: &Path) -> OsString {
    let shim_bytes = shim.as_os_str().as_bytes();
    let existing = existing.map(|e| e.as_bytes()).unwrap_or_default();
    let present = existing
        .split(|b| *b == b':' || *b == b' ')
        .any(|entry| entry == shim_bytes);
    if present {
        return OsString::from_vec(existing.to_vec());
    }
    let trimmed = existing.trim_ascii();
    let mut out = trimmed.to_vec();
    if !out.is_empty() {
        out.push(b':');
    }
    out.extend_from_slice(shim_bytes);
    OsString::from_vec(out)
}

/// Why a program could not be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotFound {
    /// Nothing of that name (a shell's 127).
    Missing,
    /// A file of that name that is not an executable regular file (a shell's 126).
    NotExecutable(PathBuf),
}

/// Where `program` is, as execvp looks: itself when it holds a '/', else the first executable
/// regular file of that name in `$PATH` (an empty entry is the current directory). An empty name
/// is found nowhere. A directory met in `$PATH` (as `.` and `..` always are) is not the program,
/// as for a shell: such a name is not found, rather than "not executable" with a folder's path.
pub fn find_program(program: &OsStr) -> Result<PathBuf, NotFound> {
    if program.is_empty() {
        return Err(NotFound::Missing);
    }
    let name = Path::new(program);
    let searched = !program.as_bytes().contains(&b'/');
    let candidates: Vec<PathBuf> = if !searched {
        vec![name.to_path_buf()]
    } else {
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|d| {
                if d.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    d
                }
            })
            .map(|d| d.join(name))
            .collect()
    };
    let mut unexecutable = None;
    for c in candidates {
        match std::fs::metadata(&c) {
            Ok(m)
                if m.is_file()
                    && nix::unistd::access(&c, nix::unistd::AccessFlags::X_OK).is_ok() =>
            {
                return Ok(c)
            }
            Ok(m) if searched && m.is_dir() => {}
            Ok(_) => unexecutable = unexecutable.or(Some(c)),
            Err(_) => {}
        }
    }
    Err(unexecutable.map_or(NotFound::Missing, NotFound::NotExecutable))
}

/// Whether the file has capabilities (`security.capability`): the loader then runs it in secure
/// mode and ignores LD_PRELOAD, unless the user is root.
pub fn has_file_capabilities(path: &Path) -> bool {
    // A size query: an empty buffer, 0 bytes. A path with a NUL byte is an error, so no.
    let empty: &mut [u8] = &mut [];
    rustix::fs::getxattr(path, c"security.capability", empty).is_ok_and(|n| n > 0)
}

/// Why LD_PRELOAD will not reach this program, if it will not: statically linked, setuid or
/// setgid or with file capabilities for this user (the loader ignores LD_PRELOAD in secure mode),
/// or Go (its net package makes system calls itself, not through the C library).
/// A path that is not a regular file (a FIFO, a device) is opened without blocking and named as
/// such; one that cannot be read is given the benefit of the doubt (None).
pub fn reach_problem(path: &Path) -> Option<String> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let (file, st) = match smcrun_sys::file::open_regular_at(None, &c, true) {
        Ok(f) => f,
        Err(e @ smcrun_sys::file::NotRead::NotRegular(_)) => {
            return Some(format!("cannot be run: {e}"))
        }
        Err(_) => return None,
    };
    let mode = st.st_mode;
    // The loader ignores LD_PRELOAD in secure mode: when exec changes the ids (a setuid file of
    // another owner, a setgid file of another group) or grants file capabilities. Root running a
    // setuid-root program keeps its ids: LD_PRELOAD applies.
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    if mode & 0o4000 != 0 && st.st_uid != uid || mode & 0o2000 != 0 && st.st_gid != gid {
        return Some(
            "is setuid/setgid, so the loader ignores LD_PRELOAD; run it without the setuid bit or as its owner"
                .into(),
        );
    }
    if has_file_capabilities(path) && uid != 0 {
        return Some(
            "has file capabilities (security.capability), so the loader runs it in secure mode and ignores LD_PRELOAD; run it as root, or without the capabilities"
                .into(),
        );
    }
    // Only the first 4 KiB is read, not the whole of a large program: a 20 MB Go binary costs
    // smcrun's start-up no more than /bin/true does (see `elf_parts`).
    let Some(elf) = super::elf_parts::inspect(&file) else {
        return None; // a script: its interpreter is what gets preloaded
    };
    if elf.go {
        return Some(
            "is a Go program, whose net package makes system calls without the C library, so LD_PRELOAD cannot convert its sockets"
                .into(),
        );
    }
    if !elf.interpreter {
        return Some(
            "is statically linked, so LD_PRELOAD cannot apply; link it dynamically against the C library"
                .into(),
        );
    }
    None
}

/// How much of a script is read to find the programs it runs.
const SCRIPT_READ_LIMIT: u64 = 64 * 1024;

/// The first [`SCRIPT_READ_LIMIT`] bytes of `path` as text (lossy), when it is a readable regular
/// file (opened without blocking: a FIFO named as the program cannot hang doctor).
fn script_text(path: &Path) -> Option<String> {
    use std::io::Read;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let (f, _) = smcrun_sys::file::open_regular_at(None, &c, true).ok()?;
    let mut bytes = Vec::new();
    f.take(SCRIPT_READ_LIMIT).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The programs script `text` runs that LD_PRELOAD cannot reach, with the reason for each: of
/// those it names (`script_programs`), its interpreter when it is one LD_PRELOAD cannot reach or
/// does not exist, and each other one found as execvp finds it (once) that LD_PRELOAD cannot reach.
fn script_problems(text: &str) -> Vec<(PathBuf, String)> {
    let named = script_programs(text);
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    if let Some(i) = named.interpreter {
        let p = PathBuf::from(i);
        match reach_problem(&p) {
            Some(why) => out.push((p, why)),
            None if !p.exists() => out.push((p, "does not exist".into())),
            None => {}
        }
    }
    for c in named.run {
        let Ok(p) = find_program(OsStr::new(c)) else {
            continue;
        };
        if out.iter().any(|(q, _)| *q == p) {
            continue;
        }
        if let Some(why) = reach_problem(&p) {
            out.push((p, why));
        }
    }
    out
}

/// What LD_PRELOAD makes of `program` (`smcrun doctor -- PROGRAM` shows it): found as execvp
/// finds it, whether LD_PRELOAD reaches it, and for a script the programs it runs that it cannot.
pub fn reach(program: &OsStr) -> Reach {
    let path = match find_program(program) {
        Ok(p) => p,
        Err(NotFound::Missing) => return Reach::Missing,
        Err(NotFound::NotExecutable(p)) => return Reach::NotExecutable(p),
    };
    if let Some(why) = reach_problem(&path) {
        return Reach::Unreachable(path, why);
    }
    match script_text(&path).filter(|t| t.starts_with("#!")) {
        Some(text) => Reach::Script(path, script_problems(&text)),
        None => Reach::Dynamic(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_preload_keeps_existing_entries() {
        let shim = Path::new("/opt/x/libsmcrun_shim.so");
        assert_eq!(merge_ld_preload(None, shim), "/opt/x/libsmcrun_shim.so");
        assert_eq!(
            merge_ld_preload(Some(OsStr::new("")), shim),
            "/opt/x/libsmcrun_shim.so"
        );
        assert_eq!(
            merge_ld_preload(Some(OsStr::new("/a.so /b.so")), shim),
            "/a.so /b.so:/opt/x/libsmcrun_shim.so"
        );
        assert_eq!(
            merge_ld_preload(Some(OsStr::new("/opt/x/libsmcrun_shim.so:/a.so")), shim),
            "/opt/x/libsmcrun_shim.so:/a.so"
        );
    }

    #[test]
    fn only_a_shared_object_of_this_machine_is_taken_for_the_shim() {
        let why = |p: &str| not_a_shim(Path::new(p)).unwrap_or_default();
        assert_eq!(why("/etc/passwd"), "not an ELF file");
        assert_eq!(
            why("/tmp"),
            "cannot read it: it is a directory, not a regular file"
        );
        assert!(why("/no/such/file").starts_with("cannot read it: "));
        let fifo = std::env::temp_dir().join(format!("smcrun-shim-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            not_a_shim(&fifo).unwrap_or_default(),
            "cannot read it: it is a FIFO, not a regular file"
        );
        std::fs::remove_file(&fifo).unwrap();
        // The C library is a shared object of this machine's kind.
        let libc = crate::run::elf_parts::tests::c_library();
        assert_eq!(not_a_shim(libc), None);
        // The same bytes as an executable, and as a shared object of another machine.
        let bytes = std::fs::read(libc).unwrap();
        let patched = std::env::temp_dir().join(format!("smcrun-shim-elf-{}", std::process::id()));
        let mut exec = bytes.clone();
        exec[16] = 2; // e_type ET_EXEC
        std::fs::write(&patched, &exec).unwrap();
        assert_eq!(
            not_a_shim(&patched).unwrap_or_default(),
            "not an ELF shared object"
        );
        let mut other = bytes;
        other[18] = if cfg!(target_arch = "aarch64") {
            62
        } else {
            183
        }; // e_machine
        std::fs::write(&patched, &other).unwrap();
        assert!(
            not_a_shim(&patched)
                .unwrap_or_default()
                .contains("not for this machine's"),
            "{:?}",
            not_a_shim(&patched)
        );
        std::fs::remove_file(&patched).unwrap();
    }

    #[test]
    fn dynamic_programs_are_reachable() {
        assert_eq!(reach_problem(Path::new("/bin/sh")), None);
        assert!(!has_file_capabilities(Path::new("/bin/sh")));
    }

    #[test]
    fn programs_are_found_as_execvp_finds_them() {
        let sh = find_program(OsStr::new("sh")).expect("sh is on PATH");
        assert!(sh.ends_with("sh") && sh.is_absolute() || sh.starts_with("."));
        assert_eq!(
            find_program(OsStr::new("/bin/sh")),
            Ok(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            find_program(OsStr::new("smcrun-no-such-program")),
            Err(NotFound::Missing)
        );
        assert_eq!(find_program(OsStr::new("")), Err(NotFound::Missing));
        // `.` and `..` are folders in every PATH entry, never the program.
        assert_eq!(find_program(OsStr::new(".")), Err(NotFound::Missing));
        assert_eq!(find_program(OsStr::new("..")), Err(NotFound::Missing));
        assert_eq!(
            find_program(OsStr::new("/tmp")),
            Err(NotFound::NotExecutable(PathBuf::from("/tmp")))
        );
        assert_eq!(
            find_program(OsStr::new("/etc/passwd")),
            Err(NotFound::NotExecutable(PathBuf::from("/etc/passwd")))
        );
    }
}
