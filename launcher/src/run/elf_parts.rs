//! The parts of an ELF file that smcrun's checks parse (the header, the section headers, the
//! section names), read with at most three reads, for `object` to parse from memory.
//!
//! `object::ReadCache` makes a seek and a read for every piece the parser asks for, each section
//! name on its own: about 100 system calls for /bin/true, a fifth of what smcrun does before it
//! execs the program. A file of at most [`WHOLE`] bytes is read whole, in one read; a larger one
//! (a 20 MB Go binary) gets a buffer of its length that holds only those parts at their offsets:
//! the rest reads as zeros, and costs no memory (the allocator maps a large zeroed buffer and the
//! pages never touched are never backed).

use object::read::elf::{FileHeader, SectionHeader};
use object::{elf, Endianness, FileKind};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Files up to this size are read whole.
const WHOLE: u64 = 1 << 20;
/// The first read of a larger file: the ELF header and, usually, the program headers.
const HEAD: u64 = 4096;

/// The file's bytes as far as the checks need them, at their offsets; None when it cannot be read
/// or is not a file `object` knows (a script, too short).
pub fn read(file: &File, len: u64) -> Option<Vec<u8>> {
    if len <= WHOLE {
        let mut buf = vec![0; usize::try_from(len).ok()?];
        file.read_exact_at(&mut buf, 0).ok()?;
        return Some(buf);
    }
    let mut buf = vec![0; usize::try_from(len).ok()?];
    fill(file, &mut buf, 0, HEAD)?;
    match FileKind::parse(&buf[..]).ok()? {
        FileKind::Elf32 => sections::<elf::FileHeader32<Endianness>>(file, &mut buf)?,
        FileKind::Elf64 => sections::<elf::FileHeader64<Endianness>>(file, &mut buf)?,
        _ => return None,
    }
    Some(buf)
}

/// Reads the section headers, then the section names' string table, into `buf`.
fn sections<H: FileHeader<Endian = Endianness>>(file: &File, buf: &mut [u8]) -> Option<()> {
    let (offset, size) = {
        let h = H::parse(&*buf).ok()?;
        let e = h.endian().ok()?;
        let size = u64::from(h.e_shentsize(e)) * u64::from(h.e_shnum(e));
        (h.e_shoff(e).into(), size)
    };
    fill(file, buf, offset, size)?;
    let (offset, size) = {
        let h = H::parse(&*buf).ok()?;
        let e = h.endian().ok()?;
        let headers = h.section_headers(e, &*buf).ok()?;
        let names = headers.get(h.shstrndx(e, &*buf).ok()? as usize)?;
        names.file_range(e)?
    };
    fill(file, buf, offset, size)
}

/// Reads `size` bytes at `offset` into the same place of `buf` (clipped to the file's length).
fn fill(file: &File, buf: &mut [u8], offset: u64, size: u64) -> Option<()> {
    let start = usize::try_from(offset).ok()?.min(buf.len());
    let end = start
        .saturating_add(usize::try_from(size).ok()?)
        .min(buf.len());
    file.read_exact_at(&mut buf[start..end], offset).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the checks see is the same through the parts as through the whole file, for a program
    /// read whole and for one made to look large (the parts only).
    #[test]
    fn the_parts_parse_like_the_whole_file() {
        use object::{Object, ObjectSection};
        let path = std::env::current_exe().unwrap();
        let whole = std::fs::read(&path).unwrap();
        let file = File::open(&path).unwrap();
        let mut parts = vec![0; whole.len()];
        fill(&file, &mut parts, 0, HEAD).unwrap();
        sections::<elf::FileHeader64<Endianness>>(&file, &mut parts).unwrap();
        let (a, b) = (
            object::File::parse(&whole[..]).unwrap(),
            object::File::parse(&parts[..]).unwrap(),
        );
        let names = |f: &object::File| -> Vec<String> {
            f.sections()
                .map(|s| s.name().unwrap_or("?").to_string())
                .collect()
        };
        assert!(names(&a).contains(&".text".to_string()));
        assert_eq!(names(&a), names(&b));
        assert_eq!((a.kind(), a.architecture()), (b.kind(), b.architecture()));
        // and through `read`, which takes the parts for a file this large (a test binary)
        let r = read(&file, whole.len() as u64).unwrap();
        assert_eq!(names(&object::File::parse(&r[..]).unwrap()), names(&a));
    }
}
