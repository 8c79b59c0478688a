//! `shapes WHAT [ARGS]`: the server (and client) shapes the per-process report must get right,
//! as small real programs: a pre-fork server, a server that drops root, a counted load of short
//! connections, accept with short address buffers, and sockets made from a signal handler. Each
//! calls the C library, so the shim's hooks apply, and prints `key=value` lines.

use libc::{c_int, socklen_t};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("shapes: argument {} must be {what}", i + 1);
        std::process::exit(2)
    })
}

/// One short exchange on an accepted connection: a byte in, a byte out, then closed when the
/// client closes (so the connection lives as long as the client holds it).
fn answer(mut s: TcpStream) {
    let mut b = [0u8; 1];
    if s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {
        let _ = s.read(&mut b);
    }
}

/// `serve-n PORT N`: accepts N connections on 127.0.0.1:PORT one after the other, answers each,
/// then exits.
fn serve_n(args: &[String]) {
    let port: u16 = arg(args, 0, "a port");
    let n: u64 = arg(args, 1, "a count");
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    say(format!("listening={}", l.local_addr().unwrap()));
    for _ in 0..n {
        answer(l.accept().unwrap().0);
    }
    say(format!("served={n}"));
}

/// `hammer ADDR TOTAL THREADS [HOLD_MS]`: TOTAL short connections (connect, a byte each way,
/// held HOLD_MS, close) from THREADS threads.
fn hammer(args: &[String]) {
    let addr: SocketAddr = arg(args, 0, "HOST:PORT");
    let total: u64 = arg(args, 1, "a count");
    let threads: u64 = arg(args, 2, "a thread count");
    let hold = std::time::Duration::from_millis(if args.len() > 3 {
        arg(args, 3, "milliseconds")
    } else {
        0
    });
    let next = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let ok = TcpStream::connect(addr).and_then(|mut s| {
                        s.write_all(b"x")?;
                        let mut b = [0u8; 1];
                        s.read_exact(&mut b)?;
                        std::thread::sleep(hold);
                        Ok(())
                    });
                    if ok.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    say(format!(
        "made={} failed={}",
        total - failed.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    ));
}

/// `prefork PORT CHILDREN PER`: the parent listens, forks CHILDREN workers that each accept PER
/// connections on the inherited listener (the parent never accepts), and waits for them.
fn prefork(args: &[String]) {
    let port: u16 = arg(args, 0, "a port");
    let children: u32 = arg(args, 1, "a count");
    let per: u32 = arg(args, 2, "a count");
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let mut pids = Vec::new();
    for _ in 0..children {
        // SAFETY: the parent is single-threaded here; the child only accepts and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            for _ in 0..per {
                answer(l.accept().unwrap().0);
            }
            std::process::exit(0);
        }
        pids.push(pid);
    }
    say(format!("listening={}", l.local_addr().unwrap()));
    for p in &pids {
        say(format!("child={p}"));
    }
    say("ready=1".into());
    for p in pids {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(p, &mut status, 0) };
    }
    say("done=1".into());
}

/// `drop-root PORT UID N`: listens as root, switches to UID (setresuid, as servers that drop
/// privileges do), then accepts and answers N connections, and waits to be killed (so that it can
/// be asked about while it runs).
fn drop_root(args: &[String]) {
    let port: u16 = arg(args, 0, "a port");
    let uid: libc::uid_t = arg(args, 1, "a uid");
    let n: u32 = arg(args, 2, "a count");
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    // SAFETY: plain credential calls.
    let r = unsafe { libc::setgid(uid) + libc::setresuid(uid, uid, uid) };
    // SAFETY: as above.
    say(format!("setuid={r} uid={}", unsafe { libc::geteuid() }));
    say(format!("listening={}", l.local_addr().unwrap()));
    for _ in 0..n {
        answer(l.accept().unwrap().0);
    }
    say(format!("served={n}"));
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// `accept-short`: accept and accept4 with address buffers shorter than the peer's address,
/// placed right before a page that may not be touched, for IPv4 (4 and 1 bytes) and IPv6
/// (16 bytes). The kernel truncates the address and returns its full length; nobody may read
/// past the buffer.
fn accept_short() {
    // SAFETY: anonymous mappings owned here; the second page is made inaccessible.
    let page = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(
            libc::mprotect(p.cast::<u8>().add(4096).cast(), 4096, libc::PROT_NONE),
            0
        );
        p.cast::<u8>()
    };
    for (family, host, short) in [
        (libc::AF_INET, "127.0.0.1:0", 4u32),
        (libc::AF_INET, "127.0.0.1:0", 1),
        (libc::AF_INET6, "[::1]:0", 16),
    ] {
        for use_accept4 in [false, true] {
            let l = TcpListener::bind(host).unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            // SAFETY: the buffer ends exactly at the guard page: `short` bytes are ours.
            let buf = unsafe { page.add(4096 - short as usize) };
            let mut len: socklen_t = short;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
            // SAFETY: accept into `short` writable bytes with their length.
            let a = unsafe {
                if use_accept4 {
                    libc::accept4(fd, buf.cast(), &mut len, libc::SOCK_CLOEXEC)
                } else {
                    libc::accept(fd, buf.cast(), &mut len)
                }
            };
            assert!(a >= 0, "accept failed");
            // SAFETY: closing the accepted fd.
            unsafe { libc::close(a) };
            drop(c);
            say(format!(
                "case family={family} buffer={short} accept4={use_accept4} returned_len={len} ok=1"
            ));
        }
    }
}

static HANDLER_SOCKETS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_alarm(_: c_int) {
    // SAFETY: socket and close are async-signal-safe; errno is saved and restored as a handler
    // must.
    unsafe {
        let e = *libc::__errno_location();
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd >= 0 {
            libc::close(fd);
            HANDLER_SOCKETS.fetch_add(1, Ordering::Relaxed);
        }
        *libc::__errno_location() = e;
    }
}

/// `signal-storm MS`: for MS milliseconds, SIGALRM every 50 us makes and closes a TCP socket in
/// its handler (the program's very first TCP socket is made there) while the main thread
/// allocates, frees and formats.
fn signal_storm(args: &[String]) {
    let ms: u64 = arg(args, 0, "milliseconds");
    // SAFETY: installing a handler and an interval timer for this process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        let t = libc::itimerval {
            it_interval: libc::timeval {
                tv_sec: 0,
                tv_usec: 50,
            },
            it_value: libc::timeval {
                tv_sec: 0,
                tv_usec: 50,
            },
        };
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut sink = 0usize;
    while std::time::Instant::now() < end {
        // Mostly inside malloc and free, where an allocating handler would corrupt the heap.
        let v: Vec<Box<[u8; 48]>> = (0..256).map(|i| Box::new([i as u8; 48])).collect();
        sink = sink.wrapping_add(v.iter().map(|b| b[0] as usize).sum::<usize>());
        let s = format!("{sink:>12}");
        sink = sink.wrapping_add(s.len());
    }
    // SAFETY: stopping the timer.
    unsafe {
        let t: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
    say(format!(
        "handler_sockets={} sink={sink}",
        HANDLER_SOCKETS.load(Ordering::Relaxed)
    ));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, rest) = args
        .split_first()
        .map(|(w, r)| (w.as_str(), r))
        .unwrap_or(("", &[]));
    match what {
        "serve-n" => serve_n(rest),
        "hammer" => hammer(rest),
        "prefork" => prefork(rest),
        "drop-root" => drop_root(rest),
        "accept-short" => accept_short(),
        "signal-storm" => signal_storm(rest),
        _ => {
            eprintln!("usage: shapes serve-n PORT N | hammer ADDR TOTAL THREADS | prefork PORT CHILDREN PER | drop-root PORT UID N | accept-short | signal-storm MS");
            std::process::exit(2);
        }
    }
}
