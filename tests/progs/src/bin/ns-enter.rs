//! `ns-enter [drain]`: a single-threaded program that enters namespaces after it has made
//! connections, as a sandboxing or container tool may. The kernel grants those calls only to a
//! process with one thread (EINVAL otherwise). In order, each step printing one line:
//! - 2 loopback connections (both ends its own); with `drain`, one more whose writer fills its
//!   send buffer, shuts its side down with bytes unsent, and whose reader then reads to the end
//!   (`drained READ of WRITTEN`): over SMC the shim hands that shutdown to the runtime's drainer,
//!   a thread;
//! - `threads N`: the process's threads (under smcrun the runtime's sidecar is one, once it runs:
//!   the program waits up to 2 s for a second);
//! - a vfork child, in this process's memory, unshares a user namespace and ends:
//!   `vfork-unshare-user ERRNO` (0: success), then `after-vfork threads N`;
//! - `setns-mnt 0` or `setns-mnt -1 ERRNO`: it enters its own mount namespace again;
//! - `unshare-user 0` or `unshare-user -1 ERRNO`: a new user namespace;
//! - 2 more connections, `threads N` again, and `done pid=PID`.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The process's threads, from /proc/self/status.
fn threads() -> u32 {
    smcrun_sys::status::field("/proc/self/status", "Threads:", |v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits up to 2 s for a second thread (the sidecar, under smcrun), then says how many there are.
fn say_threads() {
    let start = Instant::now();
    while threads() < 2 && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("threads {}", threads());
}

/// Two connections to a listener of this process, closed again.
fn connect_2() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let a = l.local_addr().expect("local address");
    for _ in 0..2 {
        let _c = std::net::TcpStream::connect(a).expect("connect");
        let _s = l.accept().expect("accept");
    }
}

/// A call's result as the program prints it.
fn said(r: libc::c_int) -> String {
    if r == 0 {
        "0".into()
    } else {
        format!(
            "{r} {}",
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        )
    }
}

fn main() {
    connect_2();
    if std::env::args().nth(1).as_deref() == Some("drain") {
        smcrun_testprogs::drain();
    }
    say_threads();
    // A vfork child (in this process's memory) unshares a user namespace and ends.
    // what a program that vforks does (libc marks vfork deprecated: misused, it corrupts memory)
    #[allow(deprecated)]
    // SAFETY: the child calls only unshare and _exit, then its parent goes on.
    let child = unsafe { libc::vfork() };
    if child == 0 {
        // SAFETY: as above; _exit's status is the call's errno, 0 for success.
        unsafe {
            let r = libc::unshare(libc::CLONE_NEWUSER);
            libc::_exit(if r == 0 { 0 } else { *libc::__errno_location() });
        }
    }
    let mut status = 0;
    // SAFETY: the child just made, and a status word of this frame.
    unsafe { libc::waitpid(child, &mut status, 0) };
    println!("vfork-unshare-user {}", libc::WEXITSTATUS(status));
    print!("after-vfork ");
    say_threads();
    let mnt = std::fs::File::open("/proc/self/ns/mnt").expect("/proc/self/ns/mnt");
    // SAFETY: a namespace descriptor of this process and a namespace type; no memory is passed.
    let r = unsafe { libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS) };
    println!("setns-mnt {}", said(r));
    // SAFETY: a flag word; no memory is passed.
    let r = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
    println!("unshare-user {}", said(r));
    connect_2();
    say_threads();
    println!("done pid={}", std::process::id());
    let _ = std::io::stdout().flush();
}
