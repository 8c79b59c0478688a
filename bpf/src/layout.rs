//! The BPF object's map values as Rust sees them: the same layout as the structs in
//! `smcrun.bpf.c` (each fact is defined there; the sizes here are checked against the object's
//! map definitions when it is loaded, see [`crate::loader`]).

/// Scopes (slots) one object instance holds: cgroups of the pinned instance; a process tree
/// uses slot 0 of its own instance.
pub const MAX_SCOPES: u32 = 64;
/// Kernel rules (program patterns) per scope.
pub const MAX_RULES: u32 = 16;
/// The kernel's TASK_COMM_LEN: a program name is at most 15 bytes and a NUL.
pub const COMM_LEN: usize = 16;

/// `ACTION_*`: what a rule or a default does.
pub const ACTION_SMC: u32 = 1;
/// Kept on TCP by a rule.
pub const ACTION_TCP: u32 = 2;

/// `MATCH_*`: how a rule's name is compared with the program name.
pub const MATCH_EXACT: u32 = 1;
/// The name is a prefix (the glob ended in `*`).
pub const MATCH_PREFIX: u32 = 2;
/// Every name (the glob was `*`).
pub const MATCH_ANY: u32 = 3;

/// `struct rule`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rule {
    /// `MATCH_*`.
    pub matching: u32,
    /// Bytes of `name` that count.
    pub len: u32,
    /// `ACTION_*`.
    pub action: u32,
    /// Zero.
    pub pad: u32,
    /// The name; `?` matches any one byte.
    pub name: [u8; COMM_LEN],
}

/// `struct policy`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyHead {
    /// How many rules the slot has.
    pub nrules: u32,
    /// `ACTION_*` when no rule matches.
    pub default_action: u32,
}

/// `struct counters`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Sockets made SMC.
    pub converted: u64,
    /// Sockets kept TCP by a rule.
    pub kept_tcp: u64,
}

/// `struct program_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramKey {
    /// The scope's slot.
    pub slot: u32,
    /// The program name (NUL-padded).
    pub comm: [u8; COMM_LEN],
}

/// Plain values that are read from and written to maps as bytes.
///
/// # Safety
/// Implementors are `repr(C)` structs of integers and byte arrays with no padding the kernel
/// could leave undefined, so every byte pattern is a valid value.
pub unsafe trait Pod: Copy + Default {}
// SAFETY: repr(C): four u32s and a 16-byte array (32 bytes, 4-aligned): no padding.
unsafe impl Pod for Rule {}
// SAFETY: repr(C), two u32s: no padding.
unsafe impl Pod for PolicyHead {}
// SAFETY: repr(C), two u64s: no padding.
unsafe impl Pod for Counters {}
// SAFETY: repr(C): a u32 and a 16-byte array (20 bytes, 4-aligned): no padding.
unsafe impl Pod for ProgramKey {}
// SAFETY: an integer: every bit pattern is a value, and it has no padding.
unsafe impl Pod for u32 {}
// SAFETY: an integer: every bit pattern is a value, and it has no padding.
unsafe impl Pod for u64 {}

/// The bytes of a value.
pub fn bytes_of<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: T is Pod (no uninitialised bytes), the slice covers exactly the value.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// A value from bytes (shorter input leaves the rest zero).
pub fn from_bytes<T: Pod>(b: &[u8]) -> T {
    let mut v = T::default();
    let n = b.len().min(std::mem::size_of::<T>());
    // SAFETY: T is Pod, so any bytes make a valid T; at most size_of::<T>() bytes are written.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut v as *mut T as *mut u8, n) };
    v
}
