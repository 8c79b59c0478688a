//! `echo-bench`: an echo server and a client that measures throughput and latency through it,
//! with plain std sockets (so the shim, or BPF mode, decides whether they run over SMC). The same
//! commands run on two real hosts with RDMA NICs (see bench/README.md).
//!
//! - `echo-bench serve ADDR PORT`: echoes every connection (a thread each) until the client
//!   closes; runs until killed.
//! - `echo-bench client ADDR PORT BYTES ROUNDS`: one connection streams BYTES through the echo
//!   (a writer thread sends 64 KiB chunks while the reader takes them back, every byte checked),
//!   another makes ROUNDS round trips of 64 bytes; prints one JSON line
//!   `{"mb_per_s":…,"p50_us":…,"p99_us":…,"bytes":…,"rounds":…}`. Exit 1 when a byte differs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn die(what: &str) -> ! {
    eprintln!("echo-bench: {what}");
    std::process::exit(1)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("echo-bench: argument {} must be {what}", i + 1);
        std::process::exit(2)
    })
}

fn serve(addr: &str, port: u16) {
    let l = TcpListener::bind((addr, port)).unwrap_or_else(|e| die(&format!("bind: {e}")));
    println!(
        "listening {}",
        l.local_addr().map_or(String::new(), |a| a.to_string())
    );
    let _ = std::io::stdout().flush();
    for s in l.incoming() {
        let Ok(mut s) = s else { continue };
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let mut buf = vec![0u8; 65536];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
}

/// The byte at offset `i` of the stream (a pattern that a shifted or lost chunk breaks).
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

fn stream(addr: &str, port: u16, bytes: u64) -> f64 {
    let s = TcpStream::connect((addr, port)).unwrap_or_else(|e| die(&format!("connect: {e}")));
    let mut w = s
        .try_clone()
        .unwrap_or_else(|e| die(&format!("clone: {e}")));
    let mut r = s;
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut chunk = vec![0u8; 65536];
        let mut off = 0u64;
        while off < bytes {
            let n = (bytes - off).min(chunk.len() as u64) as usize;
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(off + k as u64);
            }
            w.write_all(&chunk[..n])
                .unwrap_or_else(|e| die(&format!("write: {e}")));
            off += n as u64;
        }
        let _ = w.shutdown(std::net::Shutdown::Write);
    });
    let mut buf = vec![0u8; 65536];
    let mut got = 0u64;
    while got < bytes {
        let n = r
            .read(&mut buf)
            .unwrap_or_else(|e| die(&format!("read: {e}")));
        if n == 0 {
            die(&format!("the echo ended after {got} of {bytes} bytes"));
        }
        for (k, b) in buf[..n].iter().enumerate() {
            if *b != pattern(got + k as u64) {
                die(&format!("byte {} came back changed", got + k as u64));
            }
        }
        got += n as u64;
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = writer.join();
    bytes as f64 / secs / 1e6
}

fn round_trips(addr: &str, port: u16, rounds: u32) -> Vec<f64> {
    let mut s = TcpStream::connect((addr, port)).unwrap_or_else(|e| die(&format!("connect: {e}")));
    let _ = s.set_nodelay(true);
    let msg = [0x5au8; 64];
    let mut back = [0u8; 64];
    let mut lat = Vec::with_capacity(rounds as usize);
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&msg)
            .unwrap_or_else(|e| die(&format!("write: {e}")));
        s.read_exact(&mut back)
            .unwrap_or_else(|e| die(&format!("read: {e}")));
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if back != msg {
            die("a round trip came back changed");
        }
    }
    lat.sort_by(f64::total_cmp);
    lat
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(
            &arg::<String>(&args, 1, "an address"),
            arg(&args, 2, "a port"),
        ),
        Some("client") => {
            let addr: String = arg(&args, 1, "an address");
            let port: u16 = arg(&args, 2, "a port");
            let bytes: u64 = arg(&args, 3, "a byte count");
            let rounds: u32 = arg(&args, 4, "a count of round trips");
            let mbps = stream(&addr, port, bytes);
            let lat = round_trips(&addr, port, rounds.max(1));
            let at = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
            println!(
                "{{\"mb_per_s\":{mbps:.3},\"p50_us\":{:.1},\"p99_us\":{:.1},\"bytes\":{bytes},\"rounds\":{rounds}}}",
                at(0.5),
                at(0.99)
            );
        }
        _ => {
            eprintln!("usage: echo-bench serve ADDR PORT | client ADDR PORT BYTES ROUNDS");
            std::process::exit(2)
        }
    }
}
