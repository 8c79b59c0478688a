//! What smcrun's checks need to know of an ELF file (its class, type and machine; whether it
//! names a program interpreter; whether it is a Go program), read from its program headers and
//! the notes they point to: all of it in the file's first 4 KiB for the programs seen (C, Rust,
//! and Go built every way: static, cgo, external linking, PIE), so one read, whatever the file's
//! size. The section headers, at the end of the file, are not needed: the loader itself goes by
//! the program headers, so they are also the truer answer (a static-pie program has a `.dynamic`
//! section but no interpreter, and LD_PRELOAD never reaches it).

use object::read::elf::{FileHeader, ProgramHeader};
use object::{elf, Endianness, FileKind};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The first read: the ELF header, the program headers and, usually, the notes.
const HEAD: usize = 4096;
/// How far into the file the program headers and notes may lie for the checks to read them
/// (beyond the first read, each is one more read).
const LIMIT: u64 = 64 * 1024;
/// The type of the note in which the Go linker records its build ID (owner "Go").
const NT_GO_BUILD_ID: u32 = 4;

/// The facts the checks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elf {
    /// ELFCLASS64.
    pub is_64: bool,
    /// `e_type` is ET_DYN: a shared object (or a position-independent executable).
    pub shared_object: bool,
    /// `e_machine`.
    pub machine: u16,
    /// A PT_INTERP program header: the dynamic loader runs first, so LD_PRELOAD can apply.
    pub interpreter: bool,
    /// A "Go" build ID note: a Go program, whose net package makes system calls itself.
    pub go: bool,
}

/// The facts of `file`; None when it cannot be read or is not an ELF file (a script, too short).
pub fn inspect(file: &File) -> Option<Elf> {
    let mut buf = Vec::with_capacity(HEAD);
    extend(file, &mut buf, HEAD as u64)?;
    match FileKind::parse(&buf[..]).ok()? {
        FileKind::Elf32 => inspect_as::<elf::FileHeader32<Endianness>>(file, buf),
        FileKind::Elf64 => inspect_as::<elf::FileHeader64<Endianness>>(file, buf),
        _ => None,
    }
}

fn inspect_as<H: FileHeader<Endian = Endianness>>(file: &File, mut buf: Vec<u8>) -> Option<Elf> {
    let (e, headers_end) = {
        let h = H::parse(&*buf).ok()?;
        let e = h.endian().ok()?;
        let size = u64::from(h.e_phentsize(e)) * u64::from(h.e_phnum(e));
        (e, h.e_phoff(e).into().saturating_add(size))
    };
    extend(file, &mut buf, headers_end)?;
    let notes_end = {
        let h = H::parse(&*buf).ok()?;
        let headers = h.program_headers(e, &*buf).ok()?;
        headers
            .iter()
            .filter(|p| p.p_type(e) == elf::PT_NOTE)
            .map(|p| p.p_offset(e).into().saturating_add(p.p_filesz(e).into()))
            .max()
            .unwrap_or(0)
    };
    // Notes past the limit stay unread: such a file is taken for not Go.
    let _ = extend(file, &mut buf, notes_end);
    let h = H::parse(&*buf).ok()?;
    let headers = h.program_headers(e, &*buf).ok()?;
    let go = headers.iter().any(|p| is_go_note(p, e, &buf));
    Some(Elf {
        is_64: h.is_class_64(),
        shared_object: h.e_type(e) == elf::ET_DYN,
        machine: h.e_machine(e),
        interpreter: headers.iter().any(|p| p.p_type(e) == elf::PT_INTERP),
        go,
    })
}

/// Whether program header `p` is a note segment, within `buf`, that holds Go's build ID.
fn is_go_note<P: ProgramHeader<Endian = Endianness>>(p: &P, e: Endianness, buf: &[u8]) -> bool {
    let Ok(Some(mut notes)) = p.notes(e, buf) else {
        return false;
    };
    while let Ok(Some(note)) = notes.next() {
        if note.name() == b"Go" && note.n_type(e) == NT_GO_BUILD_ID {
            return true;
        }
    }
    false
}

/// Reads the file on from `buf`'s end until `buf` holds its first `end` bytes (or all of a
/// shorter file). None when a read fails or `end` is past [`LIMIT`].
fn extend(file: &File, buf: &mut Vec<u8>, end: u64) -> Option<()> {
    if end > LIMIT {
        return None;
    }
    let end = end as usize; // at most LIMIT
    while buf.len() < end {
        let at = buf.len();
        buf.resize(end, 0);
        match file.read_at(&mut buf[at..], at as u64) {
            Ok(0) => {
                buf.truncate(at); // the end of the file
                break;
            }
            Ok(n) => buf.truncate(at + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(at),
            Err(_) => return None,
        }
    }
    Some(())
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    /// The machine's C library: a shared object of this machine's kind.
    pub fn c_library() -> &'static Path {
        [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("the C library")
    }

    fn facts(path: &Path) -> Option<Elf> {
        inspect(&File::open(path).unwrap())
    }

    /// A C program built by the machine's compiler (`cc`), with FLAGS.
    fn c_program(name: &str, flags: &[&str]) -> Option<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("smcrun-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("p.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let out = dir.join(name);
        let ok = Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(out)
    }

    #[test]
    fn the_loader_the_class_and_the_machine_are_read_from_the_program_headers() {
        let me = facts(&std::env::current_exe().unwrap()).unwrap();
        assert!(me.interpreter && !me.go, "{me:?}");
        assert_eq!(me.is_64, cfg!(target_pointer_width = "64"));
        let sh = facts(Path::new("/bin/sh")).unwrap();
        assert!(sh.interpreter && !sh.go, "{sh:?}");
        assert_eq!(sh.machine, me.machine);
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the C library");
        assert!(facts(Path::new(libc)).unwrap().shared_object);
        assert_eq!(facts(Path::new("/etc/passwd")), None);
    }

    /// Static and static-pie programs have no interpreter (a static-pie one has a `.dynamic`
    /// section, which the check used to take for dynamic linking); needs `cc` and the static C
    /// library (libc6-dev), which the tests' packages install.
    #[test]
    fn static_and_static_pie_programs_have_no_interpreter() {
        for (name, flag) in [("static", "-static"), ("static-pie", "-static-pie")] {
            let p = c_program(name, &[flag]).expect("cc builds a static C program");
            let f = facts(&p).unwrap();
            assert!(!f.interpreter && !f.go, "{name}: {f:?}");
        }
        let p = c_program("dynamic", &[]).unwrap();
        assert!(facts(&p).unwrap().interpreter);
    }

    /// Go programs built each way have the build ID note where the check looks: a static one
    /// (CGO_ENABLED=0), one linked by Go against the C library (cgo: the net package's resolver
    /// makes it dynamic), one linked by the system's linker, and a PIE. Needs `go` (golang-go, which the tests' packages install).
    #[test]
    fn go_programs_are_known_by_their_build_id_note_however_linked() {
        let dir = std::env::temp_dir().join(format!("smcrun-elf-go-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("go.mod"), "module x\n\ngo 1.19\n").unwrap();
        std::fs::write(
            dir.join("main.go"),
            "package main\n\nimport \"net\"\n\nfunc main() { _, _ = net.Dial(\"tcp\", \"\") }\n",
        )
        .unwrap();
        let ways: [(&str, &str, &[&str]); 4] = [
            ("static", "0", &[]),
            ("cgo", "1", &[]),
            ("external", "1", &["-ldflags=-linkmode=external"]),
            ("pie", "1", &["-buildmode=pie"]),
        ];
        for (name, cgo, flags) in ways {
            let out = dir.join(name);
            let status = Command::new("go")
                .arg("build")
                .args(flags)
                .arg("-o")
                .arg(&out)
                .current_dir(&dir)
                .env("CGO_ENABLED", cgo)
                .status()
                .expect("go (golang-go, from tests/packages) builds the test program");
            assert!(status.success(), "go build ({name}): {status}");
            let f = facts(&out).unwrap();
            assert!(f.go, "{name}: {f:?}");
            assert_eq!(f.interpreter, cgo == "1", "{name}: {f:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_shorter_than_the_first_read_is_read_whole() {
        let path = std::env::temp_dir().join(format!("smcrun-elf-short-{}", std::process::id()));
        std::fs::write(&path, b"#!/bin/sh\nexit 0\n").unwrap();
        let mut buf = Vec::new();
        extend(&File::open(&path).unwrap(), &mut buf, HEAD as u64).unwrap();
        assert_eq!(buf, b"#!/bin/sh\nexit 0\n");
        assert_eq!(facts(&path), None);
        std::fs::remove_file(&path).unwrap();
    }
}
