//! `main-exits N [early] [drain]`: a program whose main thread leaves first. The main thread starts a
//! worker and leaves with pthread_exit; the worker makes N loopback connections (both ends its
//! own), prints `made N pid=PID` through C's stdio without flushing it, and returns. glibc ends a
//! process when its last thread ends, by calling `exit(0)` there: the exit handlers run and the
//! line reaches stdout. With `early`, the main thread first makes a TCP socket and waits a moment,
//! so that under smcrun the runtime's sidecar runs before the main thread leaves. With `drain`,
//! the worker first fills a connection's send buffer, shuts it down with bytes unsent and reads
//! it to the end (`drained READ of WRITTEN`, see `smcrun_testprogs::drain`): over SMC the
//! runtime's drainer, a thread of its own, takes that shutdown.
//!
//! It first prints `main SigBlk MASK` and registers an exit handler that needs 1 MiB of stack
//! and prints `exit handler: 1048576 SigBlk MASK`: it runs in the process's last thread, whose
//! stack and signal mask should be a program thread's.
//!
//! Its own entry point (`#![no_main]`): the main thread must leave through C frames only, since
//! glibc unwinds its stack on the way, and std's start-up would catch that unwinding and abort.

#![no_main]

use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

extern "C-unwind" {
    /// pthread_exit(3), declared as what it is: a call that unwinds its caller's stack.
    fn pthread_exit(retval: *mut c_void) -> !;
}

/// `n` connections to a listener of this process, each end held until the last is made.
fn connect_n(n: usize) -> usize {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let a = l.local_addr().expect("local address");
    let mut ends = Vec::new();
    for _ in 0..n {
        let c = std::net::TcpStream::connect(a).expect("connect");
        let (s, _) = l.accept().expect("accept");
        ends.push((c, s));
    }
    ends.len()
}

/// The calling thread's blocked signals, as /proc/thread-self/status says them.
fn blocked() -> String {
    smcrun_sys::status::field("/proc/thread-self/status", "SigBlk:", |v| {
        Some(v.trim().to_owned())
    })
    .unwrap_or_default()
}

/// An exit handler that needs 1 MiB of stack, as a program's may: it runs in the thread that
/// ends last. Prints `exit handler: 1048576 SigBlk MASK` (the sum of its buffer, its thread's
/// blocked signals).
extern "C" fn exit_handler() {
    let buf = [1u8; 1 << 20];
    let sum: u32 = std::hint::black_box(&buf)
        .iter()
        .map(|&b| u32::from(b))
        .sum();
    let line = format!("exit handler: {sum} SigBlk {}\n\0", blocked());
    // SAFETY: a NUL-terminated format whose %s takes the NUL-terminated line.
    unsafe { libc::printf(c"%s".as_ptr(), line.as_ptr()) };
}

/// The C entry point.
///
/// # Safety
/// Called by the C library's start-up with the program's arguments.
#[no_mangle]
pub unsafe extern "C-unwind" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let args: Vec<String> = (1..argc as usize)
        .map(|i| {
            // SAFETY: argv holds argc pointers to NUL-terminated strings (the C start-up's).
            unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(2);
    println!("main SigBlk {}", blocked());
    // SAFETY: registers a C function that takes nothing, for exit(3) to call.
    unsafe { libc::atexit(exit_handler) };
    let drain = args.iter().any(|a| a == "drain");
    if args.iter().skip(1).any(|a| a == "early") {
        drop(std::net::TcpListener::bind("127.0.0.1:0").expect("socket"));
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::spawn(move || {
        // after the main thread has left
        std::thread::sleep(Duration::from_millis(300));
        if drain {
            smcrun_testprogs::drain();
        }
        let made = connect_n(n) as c_int;
        // SAFETY: a NUL-terminated format whose %d and %u take the two integers given.
        unsafe { libc::printf(c"made %d pid=%u\n".as_ptr(), made, std::process::id()) };
    });
    // SAFETY: ends the main thread; nothing of this frame is used after it.
    unsafe { pthread_exit(std::ptr::null_mut()) }
}
