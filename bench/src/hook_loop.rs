//! `hook-loop [--idle-thread | --idle-thread-private] CALLS OP...`: times CALLS iterations of each
//! hooked operation and prints one line `OP NS_PER_CALL` per operation. `--idle-thread` first
//! starts a thread that only sleeps, so that the process is multi-threaded as it is under the shim
//! once the runtime's sidecar thread runs; `--idle-thread-private` the same thread, which first
//! gives itself a private, empty descriptor table (`close_range(0, ~0, CLOSE_RANGE_UNSHARE)`), so
//! that the program's table keeps one user: what a second thread costs without sharing it.
//! `bench-run` runs it without the shim, under the shim and under the shim with a policy,
//! interleaved, and under `valgrind --tool=callgrind` for instructions.
//!
//! Operations (each goes through the C library, so the shim's hooks apply when it is preloaded):
//! - `tcp_socket_close`: `socket(AF_INET, SOCK_STREAM, 0)` + `close` (the converted path; on a
//!   kernel without SMC the fallback path, after the first refusal is remembered);
//! - `udp_socket_close`: the same for a UDP socket (the untouched path);
//! - `tcp_connect_close`: `socket` + `connect` to a listener on 127.0.0.1 + `close` (a thread
//!   accepts and closes with raw system calls, so only the client's calls pass through the shim;
//!   `connect` is the hook where the policy decides);
//! - `getsockopt_domain`: `getsockopt(SOL_SOCKET, SO_DOMAIN)` on a TCP socket (the masked path);
//! - `bind`: `bind(-1, ...)`, which the kernel refuses with EBADF at once (bind's pass-through).

use std::time::Instant;

use smcrun_bench::net::{loopback, SIN_LEN};

const OPS: [&str; 5] = [
    "tcp_socket_close",
    "udp_socket_close",
    "tcp_connect_close",
    "getsockopt_domain",
    "bind",
];

fn die(what: &str) -> ! {
    eprintln!("hook-loop: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(1)
}

/// A listener on 127.0.0.1 made, served and closed with raw system calls (never through the
/// shim), with a thread that accepts and closes every connection. Returns its port.
fn raw_listener() -> u16 {
    // SAFETY: raw system calls on a socket owned here; `a` is a sockaddr_in of SIN_LEN bytes.
    unsafe {
        let fd = libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 0) as i32;
        if fd < 0 {
            die("socket");
        }
        let mut a = loopback(0);
        if libc::syscall(libc::SYS_bind, fd, &a as *const libc::sockaddr_in, SIN_LEN) != 0
            || libc::syscall(libc::SYS_listen, fd, 4096) != 0
        {
            die("bind/listen");
        }
        let mut len = SIN_LEN;
        libc::syscall(
            libc::SYS_getsockname,
            fd,
            &mut a as *mut libc::sockaddr_in,
            &mut len as *mut libc::socklen_t,
        );
        std::thread::spawn(move || loop {
            let c = libc::syscall(libc::SYS_accept4, fd, 0usize, 0usize, 0) as i64;
            if c >= 0 {
                libc::syscall(libc::SYS_close, c);
            }
        });
        u16::from_be(a.sin_port)
    }
}

fn time_op(op: &str, calls: u32, port: u16) -> f64 {
    // SAFETY: plain socket calls through the C library on fds owned here; the addresses passed
    // are live locals of the lengths given.
    unsafe {
        let probe = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        let start = Instant::now();
        match op {
            "tcp_socket_close" => {
                for _ in 0..calls {
                    libc::close(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0));
                }
            }
            "udp_socket_close" => {
                for _ in 0..calls {
                    libc::close(libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0));
                }
            }
            "tcp_connect_close" => {
                let a = loopback(port);
                for _ in 0..calls {
                    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                    if libc::connect(fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN) != 0 {
                        die("connect");
                    }
                    libc::close(fd);
                }
            }
            "getsockopt_domain" => {
                for _ in 0..calls {
                    let mut v: libc::c_int = 0;
                    let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                    libc::getsockopt(
                        probe,
                        libc::SOL_SOCKET,
                        libc::SO_DOMAIN,
                        (&mut v as *mut libc::c_int).cast(),
                        &mut l,
                    );
                }
            }
            "bind" => {
                let sa: libc::sockaddr = std::mem::zeroed();
                for _ in 0..calls {
                    libc::bind(-1, &sa, 0);
                }
            }
            _ => unreachable!("checked in main"),
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(calls.max(1));
        libc::close(probe);
        ns
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let idle = args.first().map(String::as_str);
    if matches!(idle, Some("--idle-thread" | "--idle-thread-private")) {
        let private = idle == Some("--idle-thread-private");
        args.remove(0);
        // A thread that never runs after its start: the process is multi-threaded, as under the
        // shim once its sidecar has started (at the first socket).
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if private {
                // SAFETY: close_range with CLOSE_RANGE_UNSHARE gives this thread a copy of the
                // table with every descriptor closed in the copy only: the program's is untouched.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_close_range,
                        0u32,
                        u32::MAX,
                        libc::CLOSE_RANGE_UNSHARE,
                    )
                };
                if r != 0 {
                    die("close_range(CLOSE_RANGE_UNSHARE)");
                }
            }
            let _ = tx.send(());
            loop {
                std::thread::park();
            }
        });
        let _ = rx.recv();
    }
    let calls: u32 = args
        .first()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            eprintln!(
                "usage: hook-loop [--idle-thread | --idle-thread-private] CALLS OP... (ops: {})",
                OPS.join(" ")
            );
            std::process::exit(2)
        });
    let ops: Vec<&str> = if args.len() > 1 {
        args[1..].iter().map(String::as_str).collect()
    } else {
        OPS.to_vec()
    };
    if let Some(bad) = ops.iter().find(|o| !OPS.contains(o)) {
        eprintln!(
            "hook-loop: \"{bad}\" is not an operation; expected one of {}",
            OPS.join(", ")
        );
        std::process::exit(2);
    }
    let port = if ops.contains(&"tcp_connect_close") {
        raw_listener()
    } else {
        0
    };
    for op in ops {
        time_op(op, calls / 10, port); // warm-up
        println!("{op} {:.2}", time_op(op, calls, port));
    }
}
