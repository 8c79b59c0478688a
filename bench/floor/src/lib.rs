//! The floor of a Rust preload, for bench/run's exec measurement: the C preload's one `socket()`
//! hook (bench/src/c/socket_preload.c) written with std the way the shim is built (a panic barrier
//! around the hook, the real symbol resolved by a constructor, the static unwinder, fat LTO). What
//! loading it costs an exec beyond the C preload is what std alone costs: the lowest any std-based
//! shim can reach before doing any work of its own.

use std::sync::atomic::{AtomicPtr, Ordering};

/// The next `socket` definition (the C library's).
static REAL: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The constructor, as an `.init_array` entry, as the shim's.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"socket".as_ptr()) };
    REAL.store(p, Ordering::Relaxed);
}

type SocketFn = extern "C" fn(i32, i32, i32) -> i32;

/// socket(2): TCP requests become AF_SMC ones, TCP when the kernel refuses (the C preload's logic).
#[no_mangle]
pub extern "C" fn socket(domain: i32, ty: i32, protocol: i32) -> i32 {
    std::panic::catch_unwind(|| {
        let p = REAL.load(Ordering::Relaxed);
        if p.is_null() {
            return -1;
        }
        // SAFETY: a non-null pointer from dlsym("socket") has socket's C signature.
        let real: SocketFn = unsafe { std::mem::transmute::<*mut libc::c_void, SocketFn>(p) };
        let tcp = (domain == libc::AF_INET || domain == libc::AF_INET6)
            && ty & 0xf == libc::SOCK_STREAM
            && (protocol == 0 || protocol == libc::IPPROTO_TCP);
        if tcp {
            let fd = real(43, ty, i32::from(domain == libc::AF_INET6));
            if fd >= 0 {
                return fd;
            }
        }
        real(domain, ty, protocol)
    })
    .unwrap_or(-1)
}
