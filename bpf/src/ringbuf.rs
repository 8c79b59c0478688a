//! Reading a BPF ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8+) through its mmapped pages, as
//! libbpf's `ring_buffer__consume` does: no system call, so nothing the reader does holds the
//! kernel's tracing programs off its CPU (every bpf() map command does), and waiting on it with
//! epoll.
//!
//! The kernel's layout: the consumer position (u64) on the first page, which the reader writes;
//! the producer position (u64) on the next page; then the data, `size` bytes (a power of 2)
//! mapped twice in a row, so that a record wrapping past the end reads as one. Each record is an
//! 8-byte header (a u32 length with [`BUSY`] and [`DISCARD`] bits, and the page offset) and its
//! bytes, the whole rounded up to 8.

use crate::sys::{self, Epoll, Mmap};
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A record's header bit: reserved, not yet submitted (the reader stops there).
pub const BUSY: u32 = 1 << 31;
/// A record's header bit: discarded (the reader skips it).
pub const DISCARD: u32 = 1 << 30;
/// A record's header bytes.
pub const HEADER: usize = 8;
/// How many times the reader looks again at a record still reserved before it stops there (a
/// few tens of microseconds at most). A program holds a reservation for the length of a copy
/// (kprobes run with preemption off), and records submitted after it on other CPUs wait behind
/// it: the agent frees a socket's slot right after submitting its record, so stopping at once
/// could hide that socket from one reading, in neither the open slots nor the ended records.
const BUSY_SPINS: u32 = 4096;

/// A ring buffer's consumer side.
#[derive(Debug)]
pub struct RingBuf {
    cons: Mmap,
    prod: Mmap,
    size: usize,
    epoll: Epoll,
}

impl RingBuf {
    /// Maps the ring buffer `map` of `size` data bytes (its max_entries).
    pub fn open(map: BorrowedFd<'_>, size: usize) -> io::Result<RingBuf> {
        let page = sys::page_size();
        if !size.is_power_of_two() || !size.is_multiple_of(page) {
            return Err(io::Error::other(format!(
                "ring buffer size {size} is not a power of 2 and a multiple of {page}"
            )));
        }
        Ok(RingBuf {
            cons: sys::map_mmap(map, page, 0, true)?,
            prod: sys::map_mmap(map, page + 2 * size, page, false)?,
            size,
            epoll: Epoll::new(map)?,
        })
    }

    /// Hands each submitted record's bytes to `f`, in order, and frees their room: the records
    /// up to the first one still reserved. The number of records read.
    pub fn consume(&mut self, f: impl FnMut(&[u8])) -> usize {
        let page = sys::page_size();
        // SAFETY: the mappings are the kernel's layout for a ring buffer of `size` data bytes
        // (see the module's doc): the consumer position at the start of `cons` (writable), the
        // producer position at the start of `prod`, the data twice from its second page; they
        // live as long as `self`.
        unsafe {
            consume_raw(
                self.cons.ptr().cast(),
                self.prod.ptr().cast(),
                self.prod.ptr().add(page),
                self.size,
                f,
                spin_a_little(),
            )
        }
    }

    /// Waits at most `timeout` for the programs to ask for the reader (the ring half full):
    /// whether they did.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        self.epoll.wait(timeout)
    }
}

/// The reader's patience with a reserved record: [`BUSY_SPINS`] looks, with a CPU pause between.
fn spin_a_little() -> impl FnMut() -> bool {
    let mut left = BUSY_SPINS;
    move || {
        std::hint::spin_loop();
        left = left.saturating_sub(1);
        left > 0
    }
}

/// [`RingBuf::consume`] on raw memory; `again` is asked, each time a record is still reserved,
/// whether to look at it once more (false: stop there).
///
/// # Safety
/// `cons` and `prod` point at 8-aligned u64 positions (`cons` writable), `data` at `2 * size`
/// readable bytes (the data twice), 8-aligned, valid for the call, written by a producer (the
/// kernel) only as a BPF ring buffer's: headers released after their record's bytes.
unsafe fn consume_raw(
    cons: *mut u64,
    prod: *const u64,
    data: *const u8,
    size: usize,
    mut f: impl FnMut(&[u8]),
    mut again: impl FnMut() -> bool,
) -> usize {
    // SAFETY: as the caller promises; atomics because the kernel writes them concurrently.
    let (cons, prod) = unsafe {
        (
            AtomicU64::from_ptr(cons),
            AtomicU64::from_ptr(prod as *mut u64),
        )
    };
    let mut pos = cons.load(Ordering::Acquire);
    let mut n = 0;
    loop {
        let end = prod.load(Ordering::Acquire);
        if pos >= end {
            return n;
        }
        while pos < end {
            let off = pos as usize & (size - 1);
            // SAFETY: `off` < size and a header is 8-aligned inside the data.
            let hdr = unsafe { AtomicU32::from_ptr(data.add(off) as *mut u32) };
            let mut len = hdr.load(Ordering::Acquire);
            while len & BUSY != 0 {
                if !again() {
                    return n;
                }
                len = hdr.load(Ordering::Acquire);
            }
            let bytes = (len & !(BUSY | DISCARD)) as usize;
            if len & DISCARD == 0 {
                // SAFETY: a record is at most `size` bytes, and the data is there twice.
                f(unsafe { std::slice::from_raw_parts(data.add(off + HEADER), bytes) });
                n += 1;
            }
            pos += ((bytes + HEADER + 7) & !7) as u64;
            cons.store(pos, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: usize = 64;

    /// The producer's side: a record at `pos` (in both copies of the data).
    fn put(data: &mut [u64], pos: usize, flags: u32, bytes: &[u8]) -> usize {
        let mut rec = ((bytes.len() as u32 | flags) as u64).to_le_bytes().to_vec();
        rec.extend_from_slice(bytes);
        rec.resize((rec.len() + 7) & !7, 0);
        let raw = data.as_mut_ptr() as *mut u8;
        for (i, b) in rec.iter().enumerate() {
            let at = (pos + i) % SIZE;
            // SAFETY: `at` and `at + SIZE` are inside the 2 * SIZE bytes of `data`.
            unsafe {
                *raw.add(at) = *b;
                *raw.add(at + SIZE) = *b;
            }
        }
        pos + rec.len()
    }

    fn read(cons: &mut u64, prod: u64, data: &mut [u64]) -> Vec<Vec<u8>> {
        read_waiting(cons, prod, data.as_mut_ptr(), || false)
    }

    /// Reads through a raw pointer, so that `again` may write the data meanwhile, as the kernel
    /// does.
    fn read_waiting(
        cons: &mut u64,
        prod: u64,
        data: *mut u64,
        again: impl FnMut() -> bool,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        // SAFETY: positions and 2 * SIZE bytes of 8-aligned data, as the kernel lays them out.
        unsafe {
            consume_raw(
                cons,
                &prod,
                data as *const u8,
                SIZE,
                |b| out.push(b.to_vec()),
                again,
            );
        }
        out
    }

    /// A record still reserved, with one submitted behind it (another CPU's): the reader looks
    /// again, and when the reservation is submitted meanwhile both are read in the same reading
    /// (the agent frees a slot right after submitting its record, so a reader that stopped at
    /// once would see that socket neither open nor ended); when it is not, the reader stops there
    /// after its looks, the room kept.
    #[test]
    fn a_reserved_record_is_waited_for_a_little_then_left_for_the_next_reading() {
        let mut data = vec![0u64; 2 * SIZE / 8];
        let busy = put(&mut data, 0, BUSY, b"one");
        let p = put(&mut data, busy, 0, b"two");
        let raw = data.as_mut_ptr();
        let mut cons = 0u64;
        let mut looks = 0;
        let got = read_waiting(&mut cons, p as u64, raw, || {
            looks += 1;
            looks < 3
        });
        assert!(got.is_empty());
        assert_eq!((looks, cons), (3, 0), "three looks, then stopped at it");
        let mut looks = 0;
        let got = read_waiting(&mut cons, p as u64, raw, || {
            looks += 1;
            // the producer submits while the reader waits
            // SAFETY: `raw` is `data`'s 2 * SIZE / 8 words, alive and not borrowed meanwhile.
            let data = unsafe { std::slice::from_raw_parts_mut(raw, 2 * SIZE / 8) };
            put(data, 0, 0, b"one");
            true
        });
        assert_eq!(looks, 1);
        assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(cons, p as u64);
    }

    #[test]
    fn records_are_read_in_order_up_to_one_still_reserved_discarded_ones_skipped() {
        let mut data = vec![0u64; 2 * SIZE / 8];
        let mut p = put(&mut data, 0, 0, b"one");
        p = put(&mut data, p, DISCARD, b"gone-gone-ab");
        p = put(&mut data, p, 0, b"three");
        let mut cons = 0u64;
        assert_eq!(
            read(&mut cons, p as u64, &mut data),
            [b"one".to_vec(), b"three".to_vec()]
        );
        assert_eq!(cons, p as u64);
        // reserved, not submitted, and crossing the data's end: the reader stops there
        let busy_at = p;
        assert!(
            busy_at < SIZE && busy_at + 16 > SIZE,
            "the test's record crosses the end"
        );
        p = put(&mut data, p, BUSY, b"4");
        assert!(read(&mut cons, p as u64, &mut data).is_empty());
        assert_eq!(
            cons, busy_at as u64,
            "stops at the reserved record, its room kept"
        );
        // submitted now: it reads whole (the data is mapped twice), and one more past the end
        put(&mut data, busy_at, 0, b"4");
        let q = put(&mut data, p, 0, b"wrapping around");
        assert_eq!(
            read(&mut cons, q as u64, &mut data),
            [b"4".to_vec(), b"wrapping around".to_vec()]
        );
        assert_eq!(cons, q as u64);
        assert!(read(&mut cons, q as u64, &mut data).is_empty());
    }
}
