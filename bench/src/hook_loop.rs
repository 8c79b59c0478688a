//! `shim-cost [ROUNDS] [CALLS]`: what the shim adds to each hooked call.
//!
//! Runs itself as a child, alternately without and with the shim preloaded (ROUNDS pairs,
//! interleaved so that drift of the machine hits both sides alike); each child times CALLS
//! iterations of each operation and prints nanoseconds per call. The result is the median per
//! operation on each side, their ratio, and the difference in nanoseconds per call.
//!
//! Operations: `socket+close` of a TCP socket (the converted path; on a kernel without SMC the
//! fallback path, after the first refusal is remembered), `socket+close` of a UDP socket (the
//! untouched path), `getsockopt(SO_DOMAIN)` (the masked path), and `bind` of a UNIX socket to an
//! invalid address (bind's pass-through, failing fast in the kernel).

use std::process::Command;
use std::time::Instant;

const OPS: [&str; 4] = [
    "tcp_socket_close",
    "udp_socket_close",
    "getsockopt_domain",
    "bind_fail",
];

fn time_op(op: &str, calls: u32) -> f64 {
    // SAFETY: plain socket system calls through the C library on fds owned here.
    unsafe {
        let probe = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        let start = Instant::now();
        match op {
            "tcp_socket_close" => {
                for _ in 0..calls {
                    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                    libc::close(fd);
                }
            }
            "udp_socket_close" => {
                for _ in 0..calls {
                    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
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
            "bind_fail" => {
                let sa: libc::sockaddr = std::mem::zeroed();
                for _ in 0..calls {
                    libc::bind(-1, &sa, 0);
                }
            }
            _ => unreachable!(),
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(calls);
        libc::close(probe);
        ns
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let calls: u32 = args[2].parse().unwrap();
        for op in OPS {
            time_op(op, calls / 10); // warm-up
            println!("{op} {:.1}", time_op(op, calls));
        }
        return;
    }
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(15);
    let calls: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let exe = std::env::current_exe().unwrap();
    let shim = std::env::var("SMCRUN_SHIM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| exe.parent().unwrap().join("libsmcrun_shim.so"));
    assert!(
        shim.is_file(),
        "no shim at {} (build it, or set SMCRUN_SHIM)",
        shim.display()
    );
    let mut results: Vec<[Vec<f64>; 2]> = OPS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for _ in 0..rounds {
        for (side, preload) in [(0, false), (1, true)] {
            let mut c = Command::new(&exe);
            c.arg("--child").arg(calls.to_string());
            c.env_remove("LD_PRELOAD");
            if preload {
                c.env("LD_PRELOAD", &shim);
            }
            let out = c.output().expect("run child");
            assert!(out.status.success());
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let (op, ns) = line.split_once(' ').unwrap();
                let i = OPS.iter().position(|o| *o == op).unwrap();
                results[i][side].push(ns.parse().unwrap());
            }
        }
    }
    println!("shim cost: {rounds} interleaved rounds x {calls} calls; median ns per call");
    println!(
        "{:<20} {:>10} {:>10} {:>8} {:>10}",
        "operation", "plain", "shim", "ratio", "added ns"
    );
    for (i, op) in OPS.iter().enumerate() {
        let plain = median(&mut results[i][0]);
        let shim = median(&mut results[i][1]);
        println!(
            "{op:<20} {plain:>10.1} {shim:>10.1} {:>8.3} {:>10.1}",
            shim / plain,
            shim - plain
        );
    }
}
