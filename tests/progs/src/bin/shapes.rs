//! `shapes WHAT [ARGS]`: the server (and client) shapes the per-process report must get right,
//! as small real programs: a pre-fork server, a server that drops root, a counted load of short
//! connections, accept with short address buffers, and sockets made from a signal handler; and the
//! stress shapes (many threads, forks, an exec chain, spawns, exit while threads make sockets,
//! epoll with nonblocking connects). Each calls the C library, so the shim's hooks apply, and
//! prints `key=value` lines that are the same with and without the shim.

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
    answer_on(&mut s);
}

/// [`answer`] on a stream the caller keeps.
fn answer_on(s: &mut TcpStream) {
    let mut b = [0u8; 1];
    if s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {
        let _ = s.read(&mut b);
    }
}

/// With `SHAPES_FAMILY=smc`, `serve-n` and `hammer` make their sockets AF_SMC themselves (a
/// native SMC program, no shim needed); otherwise the C library's TCP sockets.
fn native_smc() -> bool {
    std::env::var("SHAPES_FAMILY").is_ok_and(|v| v == "smc")
}

/// An AF_SMC (43) stream socket, or the error.
fn smc_socket() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket() has no memory arguments; a new fd is owned here.
    let fd = unsafe { libc::socket(43, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is new and owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

fn sockaddr_v4(a: std::net::SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A listener on 127.0.0.1:PORT (AF_SMC with `SHAPES_FAMILY=smc`).
fn listen_on(port: u16) -> TcpListener {
    if !native_smc() {
        return TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
    use std::os::fd::AsRawFd;
    let s = smc_socket().unwrap();
    let sa = sockaddr_v4(std::net::SocketAddrV4::new([127, 0, 0, 1].into(), port));
    let one: c_int = 1;
    // SAFETY: the pointers are to live locals of the sizes given.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            std::mem::size_of::<c_int>() as socklen_t,
        );
        let len = std::mem::size_of::<libc::sockaddr_in>() as socklen_t;
        assert_eq!(
            libc::bind(s.as_raw_fd(), (&sa as *const libc::sockaddr_in).cast(), len),
            0,
            "bind: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::listen(s.as_raw_fd(), 128), 0);
    }
    TcpListener::from(s)
}

/// A connection to `addr` (AF_SMC with `SHAPES_FAMILY=smc`).
fn connect_to(addr: SocketAddr) -> std::io::Result<TcpStream> {
    if !native_smc() {
        return TcpStream::connect(addr);
    }
    use std::os::fd::AsRawFd;
    let SocketAddr::V4(a) = addr else {
        return Err(std::io::Error::other(
            "SHAPES_FAMILY=smc takes an IPv4 address",
        ));
    };
    let s = smc_socket()?;
    let sa = sockaddr_v4(a);
    let len = std::mem::size_of::<libc::sockaddr_in>() as socklen_t;
    // SAFETY: sa is a live sockaddr_in of the length given.
    if unsafe { libc::connect(s.as_raw_fd(), (&sa as *const libc::sockaddr_in).cast(), len) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TcpStream::from(s))
}

/// `serve-n PORT N`: accepts N connections on 127.0.0.1:PORT one after the other, answers each,
/// then exits (with `SHAPES_HOLD=1`, waits for stdin to end first: its process stays to be
/// looked at).
fn serve_n(args: &[String]) {
    let port: u16 = arg(args, 0, "a port");
    let n: u64 = arg(args, 1, "a count");
    let l = listen_on(port);
    say(format!("listening={}", l.local_addr().unwrap()));
    for _ in 0..n {
        answer(l.accept().unwrap().0);
    }
    say(format!("served={n}"));
    hold_stdin();
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
                    let ok = connect_to(addr).and_then(|mut s| {
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
    hold_stdin();
}

/// With `SHAPES_HOLD=1`: print `holding` and wait until stdin ends.
fn hold_stdin() {
    if std::env::var("SHAPES_HOLD").is_ok_and(|v| v == "1") {
        say("holding".into());
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
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
        // SAFETY: waitpid writes only `status`, an int of ours alive for the call.
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
    // SAFETY: setgid and setresuid take integers only and touch no memory of ours.
    let r = unsafe { libc::setgid(uid) + libc::setresuid(uid, uid, uid) };
    // SAFETY: geteuid takes nothing and cannot fail.
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
            // SAFETY: `a` is the connection just accepted, a number nothing else holds.
            unsafe { libc::close(a) };
            drop(c);
            say(format!(
                "case family={family} buffer={short} accept4={use_accept4} returned_len={len} ok=1"
            ));
        }
    }
}

/// An anonymous page the process may not touch (PROT_NONE), for arguments the kernel ignores or
/// refuses with EFAULT.
fn untouchable_page() -> *mut u8 {
    // SAFETY: a fresh anonymous mapping owned here, never unmapped.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}

/// `accept-null null|guard`: two connections accepted without an address buffer, by accept4 and
/// by accept: with `addr` and `addrlen` both null (libuv's way), or with a null `addr` and an
/// `addrlen` pointing into a page that may not be touched (the kernel ignores `addrlen` when `addr`
/// is null). Prints each client's own address (the server's remote) and whether accept worked.
fn accept_null(args: &[String]) {
    let len = match args.first().map(String::as_str) {
        Some("null") => std::ptr::null_mut(),
        Some("guard") => untouchable_page().cast::<socklen_t>(),
        _ => {
            eprintln!("shapes: accept-null needs null or guard");
            std::process::exit(2)
        }
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
    for use_accept4 in [true, false] {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // SAFETY: accept with no address buffer; `len` is never read by the kernel.
        let a = unsafe {
            if use_accept4 {
                libc::accept4(fd, std::ptr::null_mut(), len, libc::SOCK_CLOEXEC)
            } else {
                libc::accept(fd, std::ptr::null_mut(), len)
            }
        };
        let e = errno();
        // SAFETY: `a` is the connection just accepted (or -1, EBADF), a number nothing else holds.
        unsafe { libc::close(a) };
        say(format!(
            "accept4={use_accept4} addrlen_null={} accepted={} errno={} client={}",
            len.is_null(),
            a >= 0,
            if a >= 0 { 0 } else { e },
            c.local_addr().unwrap()
        ));
    }
}

/// `connect-fault`: connect calls the kernel refuses without a connection: an address in a page
/// that may not be touched (EFAULT), and a length beyond `sockaddr_storage` (EINVAL). Prints the
/// errno of each.
fn connect_fault() {
    let bad = untouchable_page().cast::<libc::sockaddr>();
    let (ss, _) = c_addr("127.0.0.1:9".parse().unwrap());
    for (what, addr, len) in [
        ("fault", bad.cast_const(), 16 as socklen_t),
        (
            "too_long",
            (&ss as *const libc::sockaddr_storage).cast(),
            std::mem::size_of::<libc::sockaddr_storage>() as socklen_t + 1,
        ),
    ] {
        // SAFETY: a socket owned here; connect reads at most `len` bytes at `addr`, and fails.
        let (r, e) = unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            let r = libc::connect(s, addr, len);
            let e = errno();
            libc::close(s);
            (r, e)
        };
        say(format!("connect {what}: ret={r} errno={e}"));
    }
}

/// `half-close`: shutdown(2) as a program sees it: a client writes 1 MiB, half-closes with
/// shutdown(SHUT_WR) and still reads the server's reply, which the server sends after it read the
/// client's end of stream; then the calls the kernel refuses (a closed fd, a socket never
/// connected, a bad `how`). Prints what each returned, with errno.
fn half_close() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        s.write_all(format!("read {}", got.len()).as_bytes())
            .unwrap();
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(&vec![7u8; 1 << 20]).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&c);
    // SAFETY: shutdown(2) takes integers only; `fd` is the client's socket, open for the call.
    let (r, e) = unsafe { (libc::shutdown(fd, libc::SHUT_WR), errno()) };
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    server.join().unwrap();
    say(format!(
        "shutdown SHUT_WR: ret={r} errno={} reply={reply}",
        if r == 0 { 0 } else { e }
    ));
    // SAFETY: the calls below are refused by the kernel; the socket is owned here.
    unsafe {
        let never = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        for (what, fd, how) in [
            ("closed-fd", 1_000_000, libc::SHUT_WR),
            ("not-connected", never, libc::SHUT_WR),
            ("bad-how", never, 7),
        ] {
            *libc::__errno_location() = 0;
            let r = libc::shutdown(fd, how);
            say(format!("shutdown {what}: ret={r} errno={}", errno()));
        }
        libc::close(never);
    }
}

extern "C" {
    /// closefrom(3), glibc 2.34+ (the libc crate does not declare it).
    fn closefrom(first: c_int);
}

/// One more descriptor-closing call of [`dup_over`]: what it was, and the call made on `fd`
/// (dup2/dup3 put `with` there; close_range and closefrom close it).
fn close_by(how: &str, fd: c_int, with: c_int) -> (c_int, c_int) {
    // SAFETY: integer arguments only; the numbers are this program's (or, under smcrun, the
    // runtime's, which the program is entitled to replace: they are not the program's files).
    unsafe {
        *libc::__errno_location() = 0;
        let r = match how {
            "dup2" => libc::dup2(with, fd),
            "dup3" => libc::dup3(with, fd, libc::O_CLOEXEC),
            "close_range" => libc::close_range(fd as libc::c_uint, fd as libc::c_uint, 0),
            _ => unreachable!("{how}"),
        };
        (r, errno())
    }
}

/// `dup-over`: the calls that close a descriptor for the program (dup2, dup3, close_range,
/// closefrom). First dup2, then dup3, then close_range over every descriptor the program did not
/// open (under smcrun, the runtime's run directory and report, wherever they are by then; their
/// first count goes to stderr as `runtime_fds=N`): each number must then carry the program's pipe,
/// or be closed. Then three connections, each closed by one of
/// dup2, dup3 and close_range, with the calls' results, and, with `closefrom`, a closefrom(3) of
/// every descriptor from the first connection's up. Prints the same with and without smcrun.
fn dup_over(args: &[String]) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let closefrom_too = args.first().is_some_and(|a| a == "closefrom");
    // One thread per connection: `first` stays open while the others come and go. Before a
    // closefrom the server's ends are given up, not closed: the closefrom closes them (their
    // numbers are above the first connection's), and a Rust owner's own close would then abort.
    let server = std::thread::spawn(move || {
        let answers: Vec<_> = l
            .incoming()
            .take(4)
            .map(|s| {
                let mut s = std::mem::ManuallyDrop::new(s.unwrap());
                std::thread::spawn(move || {
                    answer_on(&mut s);
                    if !closefrom_too {
                        // SAFETY: the stream is dropped once, here, and not used after.
                        unsafe { std::mem::ManuallyDrop::drop(&mut s) };
                    }
                })
            })
            .collect();
        for a in answers {
            a.join().unwrap();
        }
    });
    let exchange = || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        c
    };
    // a connection first, so that the runtime has its files by now
    let first = exchange();
    let run_dir = std::env::var("XDG_RUNTIME_DIR").unwrap_or_default();
    // the descriptors under the run directory: the runtime's (none without smcrun)
    let foreign = || -> Vec<c_int> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let fd: c_int = e.file_name().to_str()?.parse().ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                (!run_dir.is_empty() && target.starts_with(&run_dir)).then_some(fd)
            })
            .collect()
    };
    eprintln!("runtime_fds={}", foreign().len());
    let mut pipe = [0 as c_int; 2];
    // SAFETY: `pipe` has room for the two descriptors.
    let made = unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(made, 0);
    let mut intact = true;
    // each call in turn over wherever the runtime's files are by then
    for how in ["dup2", "dup3", "close_range"] {
        for fd in foreign() {
            let (r, e) = close_by(how, fd, pipe[1]);
            let mut b = [0u8; 1];
            // SAFETY: one byte from a live local into `fd`, which holds the pipe's writing end
            // now (dup2, dup3); F_GETFD reads flags only.
            let ok = unsafe {
                if how == "close_range" {
                    r == 0 && libc::fcntl(fd, libc::F_GETFD) == -1
                } else {
                    r == fd
                        && libc::write(fd, b"p".as_ptr().cast(), 1) == 1
                        && libc::read(pipe[0], b.as_mut_ptr().cast(), 1) == 1
                        && b == *b"p"
                }
            };
            if !ok {
                intact = false;
                eprintln!("{how} over fd {fd}: ret={r} errno={e}, as without smcrun: {ok}");
            }
            if how != "close_range" {
                // SAFETY: the number is the program's now.
                unsafe { libc::close(fd) };
            }
        }
    }
    say(format!(
        "replaced numbers carry the program's pipe: {intact}"
    ));
    for how in ["dup2", "dup3", "close_range"] {
        let c = exchange();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(c);
        let (r, e) = close_by(how, fd, pipe[1]);
        say(format!(
            "{how} over a connection: ret={} errno={e}",
            if r == fd {
                "fd".to_string()
            } else {
                r.to_string()
            }
        ));
        if how != "close_range" {
            // SAFETY: `fd` holds the pipe's duplicate now, the program's to close.
            unsafe { libc::close(fd) };
        }
    }
    if closefrom_too {
        let fd = std::os::fd::IntoRawFd::into_raw_fd(first);
        // SAFETY: closes this program's descriptors from the first connection's up, none of
        // which is used after it (the server thread's listener was taken before `first`).
        unsafe { closefrom(fd) };
        // SAFETY: F_GETFD reads a descriptor's flags only.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1;
        say(format!(
            "closefrom: the first connection's fd is closed: {closed}"
        ));
    } else {
        drop(first);
    }
    server.join().unwrap();
}

/// `exit-now CODE [_Exit]`: a connection made and answered, then the process leaves with
/// `_exit(CODE)` (or `_Exit`) while it is open, as a server's worker or a snapshot writer does:
/// the status must come through the shim's hook unchanged.
fn exit_now(args: &[String]) {
    let code: c_int = args
        .first()
        .and_then(|c| c.parse().ok())
        .expect("exit-now CODE");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || answer(l.accept().unwrap().0));
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    say(format!("answered: {}", b == *b"x"));
    drop(server);
    extern "C" {
        fn _Exit(status: c_int) -> !;
    }
    // SAFETY: _exit and _Exit take an integer and end the process.
    unsafe {
        if args.get(1).is_some_and(|a| a == "_Exit") {
            _Exit(code)
        } else {
            libc::_exit(code)
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

/// `signal-storm MS [sockets]`: for MS milliseconds, SIGALRM every 50 us makes and closes a TCP
/// socket in its handler (the program's very first TCP socket is made there) while the main thread
/// allocates, frees and formats; with `sockets`, while the main thread loops on socket/close (the
/// handler interrupts the hooks themselves).
fn signal_storm(args: &[String]) {
    let ms: u64 = arg(args, 0, "milliseconds");
    let sockets = args.get(1).map(String::as_str) == Some("sockets");
    let before = own_fds();
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
    let mut main_sockets = 0u64;
    while sockets && std::time::Instant::now() < end {
        // SAFETY: socket/close on an fd owned here.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            if fd >= 0 {
                libc::close(fd);
                main_sockets += 1;
            }
        }
    }
    while std::time::Instant::now() < end {
        // Mostly inside malloc and free, where an allocating handler would corrupt the heap.
        let v: Vec<Box<[u8; 48]>> = (0..256).map(|i| Box::new([i as u8; 48])).collect();
        sink = sink.wrapping_add(v.iter().map(|b| b[0] as usize).sum::<usize>());
        let s = format!("{sink:>12}");
        sink = sink.wrapping_add(s.len());
    }
    // SAFETY: an all-zero itimerval (plain integers) disarms the timer; setitimer reads it and,
    // with a null old value, writes nothing.
    unsafe {
        let t: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
    say(format!(
        "handler_sockets={} main_sockets={main_sockets} sink={sink}",
        HANDLER_SOCKETS.load(Ordering::Relaxed)
    ));
    say(format!("fds_leaked={}", leaked(&before)));
}

/// The program's open descriptors, from /proc/self/fd, without the runtime's own (at fd 100 or
/// above, open on the run directory or a report in it: see the runtime's `rundir`), each as
/// `FD:TARGET`.
fn own_fds() -> Vec<String> {
    let mut fds: Vec<(i32, String)> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n: i32 = e.file_name().to_str()?.parse().ok()?;
                    let t = std::fs::read_link(e.path()).ok()?;
                    Some((n, t.display().to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    fds.retain(|(n, t)| !(*n >= 100 && (t.contains("/smcrun") || t.ends_with(".json"))));
    fds.sort();
    // The read_dir's own descriptor is gone by now; a number that no longer resolves is dropped.
    fds.into_iter()
        .filter(|(n, _)| std::path::Path::new(&format!("/proc/self/fd/{n}")).exists())
        .map(|(n, t)| format!("{n}:{t}"))
        .collect()
}

/// The descriptors open now that were not open at `before`: `none`, or the list.
fn leaked(before: &[String]) -> String {
    let extra: Vec<String> = own_fds()
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if extra.is_empty() {
        "none".into()
    } else {
        extra.join(",")
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A C sockaddr for a std address.
fn c_addr(addr: SocketAddr) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: a zeroed sockaddr_storage is valid; the variant of the address's family is filled.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in);
                sin.sin_family = libc::AF_INET as u16;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6);
                sin6.sin6_family = libc::AF_INET6 as u16;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (ss, len as socklen_t)
    }
}

/// A listener on 127.0.0.1 whose connections are accepted and closed by a thread of their own;
/// the count of accepted ones is returned by the join handle once `stop` is connected to.
fn sink_listener() -> (SocketAddr, std::thread::JoinHandle<u64>) {
    // SAFETY: a listening socket owned here, handed to TcpListener.
    let l = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let one: c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            4,
        );
        let (sa, len) = c_addr("127.0.0.1:0".parse().unwrap());
        assert_eq!(
            libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len),
            0
        );
        assert_eq!(libc::listen(fd, 4096), 0);
        <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd)
    };
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut n = 0u64;
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    let mut b = [0u8; 1];
                    // The last connection says "stop" with a byte; the others close at once.
                    if (&s).read(&mut b).unwrap_or(0) == 1 && b[0] == b'!' {
                        return n;
                    }
                    n += 1;
                }
                Err(_) => return n,
            }
        }
    });
    (addr, h)
}

fn stop_sink(addr: SocketAddr, h: std::thread::JoinHandle<u64>) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"!").unwrap();
    h.join().unwrap()
}

/// One socket/connect/close cycle through the C library: `Ok(true)` connected, `Ok(false)`
/// refused, `Err(errno)` anything else. A connected socket is closed with an RST (SO_LINGER 0), so
/// that many cycles leave no TIME_WAIT behind to exhaust the ports.
fn cycle(addr: SocketAddr) -> Result<bool, i32> {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let (sa, len) = c_addr(addr);
    // SAFETY: socket, connect, setsockopt and close on an fd owned here, with live buffers.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return Err(errno());
        }
        let r = libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len);
        let e = errno();
        let out = match (r, e) {
            (0, _) => {
                let lg = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&lg as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as socklen_t,
                );
                Ok(true)
            }
            (_, libc::ECONNREFUSED) => Ok(false),
            (_, e) => Err(e),
        };
        libc::close(fd);
        out
    }
}

/// A port on 127.0.0.1 that refuses: bound (so nobody else takes it) but not listening.
fn refusing_port() -> (c_int, SocketAddr) {
    // SAFETY: a bound, never listening socket owned here.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let (sa, len) = c_addr("127.0.0.1:0".parse().unwrap());
        libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len);
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut l = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        libc::getsockname(fd, (&mut ss as *mut libc::sockaddr_storage).cast(), &mut l);
        let port = u16::from_be((*(&ss as *const _ as *const libc::sockaddr_in)).sin_port);
        (fd, SocketAddr::from(([127, 0, 0, 1], port)))
    }
}

/// `churn THREADS CYCLES`: THREADS threads each run CYCLES socket/connect/close cycles, every
/// other one to a listener of this process (accepted and closed by a thread) and the others to a
/// port that refuses. Prints what connected, what was refused, any other errno, and the
/// descriptors left open.
fn churn(args: &[String]) {
    let threads: u64 = arg(args, 0, "a thread count");
    let cycles: u64 = arg(args, 1, "a count");
    let before = own_fds();
    let (sink, acceptor) = sink_listener();
    let (refuser, closed) = refusing_port();
    let connected = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    let other = std::sync::Mutex::new(std::collections::BTreeMap::<i32, u64>::new());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                for i in 0..cycles {
                    match cycle(if i % 2 == 0 { sink } else { closed }) {
                        Ok(true) => connected.fetch_add(1, Ordering::Relaxed),
                        Ok(false) => refused.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            *other.lock().unwrap().entry(e).or_default() += 1;
                            0
                        }
                    };
                }
            });
        }
    });
    let accepted = stop_sink(sink, acceptor);
    // SAFETY: `refuser` is the bound socket `refusing_port` gave us, which no thread uses any
    // more (all were joined).
    unsafe { libc::close(refuser) };
    say(format!(
        "cycles={} connected={} refused={} other_errno={:?}",
        threads * cycles,
        connected.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        other.lock().unwrap()
    ));
    say(format!("accepted={accepted}"));
    say(format!("fds_leaked={}", leaked(&before)));
}

/// `masked-burst N`: with SIGUSR1 blocked in every thread by a raw system call, N connections to
/// a listener of this process, each exchanging a byte. The runtime's sidecar only starts in a
/// thread whose signal mask it knows for the thread's normal one, so here the details of the
/// connections pile up until exit: more than its queue holds is the "detail queue full" case.
fn masked_burst(args: &[String]) {
    let n: u64 = arg(args, 0, "a count");
    // Blocked with the raw system call, behind the C library's back (so the shim cannot know that
    // this is the thread's normal mask): a signal mask the runtime cannot tell from a handler's.
    let usr1 = 1u64 << (libc::SIGUSR1 - 1);
    // SAFETY: rt_sigprocmask reads 8 bytes from a valid u64 and writes nothing back.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &usr1 as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        );
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..n {
            answer(l.accept().unwrap().0);
        }
    });
    let mut ok = 0;
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        if s.read_exact(&mut b).is_ok() {
            ok += 1;
        }
    }
    server.join().unwrap();
    say(format!("connections={n} answered={ok}"));
}

/// `signal-thread`: a daemon's shape (MariaDB's): the main thread blocks SIGHUP, SIGTERM and
/// SIGALRM with pthread_sigmask before anything else, leaves them to a thread that waits for them
/// (sigwait; SIGTERM ends the program), and serves on 127.0.0.1 (any port) in threads that
/// inherit that mask.
fn signal_thread() {
    // SAFETY: sigset operations on a local set; pthread_sigmask and sigwait with valid pointers.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGHUP, libc::SIGTERM, libc::SIGALRM] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || loop {
        let mut sig: c_int = 0;
        // SAFETY: as above.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 && sig == libc::SIGTERM {
            say("terminated".into());
            std::process::exit(0);
        }
    });
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    say(format!("listening={}", l.local_addr().unwrap()));
    for s in l.incoming().flatten() {
        std::thread::spawn(move || answer(s));
    }
}

/// `fork-many N PARALLEL`: N children, at most PARALLEL at a time, each forked from this
/// (threaded) process, making a socket and connecting to the parent's listener, a byte each way,
/// then exiting. Prints how many children exited 0 and what the parent accepted.
fn fork_many(args: &[String]) {
    let n: u32 = arg(args, 0, "a count");
    let parallel: u32 = arg(args, 1, "a count");
    let before = own_fds();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..n {
            answer(l.accept().unwrap().0);
        }
        n
    });
    let mut running = 0;
    let mut good = 0;
    let mut bad = Vec::new();
    let reap = |good: &mut u32, bad: &mut Vec<i32>| {
        let mut status = 0;
        // SAFETY: wait writes only `status`, an int of ours alive for the call.
        let pid = unsafe { libc::wait(&mut status) };
        if pid > 0 {
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                *good += 1;
            } else {
                bad.push(status);
            }
        }
    };
    for _ in 0..n {
        if running == parallel {
            reap(&mut good, &mut bad);
            running -= 1;
        }
        // SAFETY: the child makes system calls through the C library and exits; the parent's other
        // thread only accepts (glibc's allocator is fork-safe).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = TcpStream::connect(addr).and_then(|mut s| {
                s.write_all(b"x")?;
                let mut b = [0u8; 1];
                s.read_exact(&mut b)
            });
            std::process::exit(if ok.is_ok() { 0 } else { 3 });
        }
        running += 1;
    }
    while running > 0 {
        reap(&mut good, &mut bad);
        running -= 1;
    }
    let accepted = server.join().unwrap();
    say(format!(
        "children={n} exited_0={good} other={bad:?} accepted={accepted}"
    ));
    say(format!("fds_leaked={}", leaked(&before)));
}

/// `exec-chain N`: opens a TCP socket (kept open across the exec, as a program that forgets
/// CLOEXEC does), says what it has, then execs itself with N-1; the last link says whether the
/// shim is still loaded and still in LD_PRELOAD.
fn exec_chain(args: &[String]) {
    let n: u32 = arg(args, 0, "a count");
    let fds: Vec<String> = own_fds()
        .into_iter()
        .filter(|f| !f.contains("socket:"))
        .collect();
    // SAFETY: a plain socket call; the fd is deliberately left open across exec.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    say(format!(
        "link={n} socket_ok={} shim_loaded={} fds={}",
        fd >= 0,
        maps.contains("libsmcrun_shim.so"),
        fds.join(",")
    ));
    if n == 0 {
        let pre = std::env::var("LD_PRELOAD").unwrap_or_default();
        say(format!(
            "chain_end ld_preload_has_shim={}",
            pre.contains("libsmcrun_shim.so")
        ));
        return;
    }
    let me = std::ffi::CString::new("/proc/self/exe").unwrap();
    let a0 = std::ffi::CString::new("shapes").unwrap();
    let a1 = std::ffi::CString::new("exec-chain").unwrap();
    let a2 = std::ffi::CString::new((n - 1).to_string()).unwrap();
    let argv = [a0.as_ptr(), a1.as_ptr(), a2.as_ptr(), std::ptr::null()];
    // SAFETY: execv with NUL-terminated strings and a NULL-terminated argv; on failure we exit.
    unsafe {
        libc::execv(me.as_ptr(), argv.as_ptr());
    }
    say(format!("exec_failed errno={}", errno()));
    std::process::exit(1);
}

/// `exec-listener`: a server that hands its listener to an exec'd worker (node's cluster with
/// `NODE_CLUSTER_SCHED_POLICY=none`, a server that re-execs itself): makes a listener on
/// 127.0.0.1, connects to it once (the connection waits in the backlog), and execs itself as
/// `exec-listener FD`, keeping both fds. The worker only accepts, on the listener it inherited.
fn exec_listener(args: &[String]) {
    use std::os::fd::IntoRawFd;
    if !args.is_empty() {
        let fd: c_int = arg(args, 0, "a listener's fd");
        // SAFETY: accept on the inherited listener, with no address buffer; the fd is closed.
        let a = unsafe { libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut()) };
        say(format!("worker accepted={}", a >= 0));
        // SAFETY: `a` is the connection just accepted (or -1, EBADF), a number nothing else holds.
        unsafe { libc::close(a) };
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (l, c) = (l.into_raw_fd(), c.into_raw_fd());
    // SAFETY: both fds are ours and stay open across exec on purpose.
    unsafe {
        libc::fcntl(l, libc::F_SETFD, 0);
        libc::fcntl(c, libc::F_SETFD, 0);
    }
    let me = std::ffi::CString::new("/proc/self/exe").unwrap();
    let argv: Vec<std::ffi::CString> = ["shapes", "exec-listener", &l.to_string()]
        .iter()
        .map(|a| std::ffi::CString::new(*a).unwrap())
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: execv with NUL-terminated strings and a NULL-terminated argv; on failure we exit.
    unsafe {
        libc::execv(me.as_ptr(), ptrs.as_ptr());
    }
    say(format!("exec_failed errno={}", errno()));
    std::process::exit(1);
}

/// `fd-limit`: TCP sockets made until the fd limit refuses one (at most 100,000); prints how many
/// and the errno that stopped them.
fn fd_limit(args: &[String]) {
    if args.first().is_some_and(|a| a == "hold") {
        return fd_limit_held();
    }
    let mut fds = Vec::with_capacity(1024);
    let e = loop {
        // SAFETY: a plain socket call; every fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            break errno();
        }
        fds.push(fd);
        if fds.len() == 100_000 {
            break 0;
        }
    };
    say(format!("sockets={} errno={e}", fds.len()));
    for fd in fds {
        // SAFETY: each number is a socket this loop made, held by nothing else.
        unsafe { libc::close(fd) };
    }
}

/// `fd-limit hold`: the fd table filled by calls the shim does not hook (open of /dev/null), held
/// full for 1.5 s (the runtime's report write finds no number free in that time), then one freed
/// and sockets made until EMFILE. Prints the last socket call's errno.
fn fd_limit_held() {
    // SAFETY: plain socket/open/close calls on fds owned here; every one is closed below.
    unsafe {
        let first = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let mut files = Vec::with_capacity(1024);
        loop {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                break;
            }
            files.push(fd);
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        if let Some(fd) = files.pop() {
            libc::close(fd);
        }
        let mut socks = Vec::new();
        let e = loop {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                break errno();
            }
            socks.push(fd);
        };
        say(format!("held: errno={e}"));
        for fd in files.into_iter().chain(socks).chain([first]) {
            libc::close(fd);
        }
    }
}

/// `spawn-storm N THREADS`: while THREADS threads loop on socket/connect/close to a port that
/// refuses, the main thread starts `true` N times with posix_spawn and N times with vfork + exec.
/// Prints how many children exited 0 and what the socket threads saw.
fn spawn_storm(args: &[String]) {
    let n: u32 = arg(args, 0, "a count");
    let threads: u32 = arg(args, 1, "a thread count");
    let before = own_fds();
    let (refuser, closed) = refusing_port();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let refused = AtomicU64::new(0);
    let other = AtomicU64::new(0);
    let true_path = std::ffi::CString::new("/bin/true").unwrap();
    let argv = [true_path.as_ptr(), std::ptr::null()];
    extern "C" {
        static environ: *const *mut libc::c_char;
    }
    let (mut spawned_ok, mut vforked_ok) = (0, 0);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    match cycle(closed) {
                        Ok(false) => refused.fetch_add(1, Ordering::Relaxed),
                        _ => other.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
        for _ in 0..n {
            let mut pid = 0;
            // SAFETY: posix_spawn of /bin/true with our environment; waiting for our child.
            unsafe {
                let r = libc::posix_spawn(
                    &mut pid,
                    true_path.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null(),
                    argv.as_ptr() as *const *mut libc::c_char,
                    environ,
                );
                let mut status = 0;
                if r == 0 && libc::waitpid(pid, &mut status, 0) == pid && status == 0 {
                    spawned_ok += 1;
                }
            }
            // SAFETY: the vfork child only calls execv and _exit.
            unsafe {
                #[allow(deprecated)]
                let pid = libc::vfork();
                if pid == 0 {
                    libc::execv(true_path.as_ptr(), argv.as_ptr());
                    libc::_exit(127);
                }
                let mut status = 0;
                if pid > 0 && libc::waitpid(pid, &mut status, 0) == pid && status == 0 {
                    vforked_ok += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // SAFETY: `refuser` is the bound socket `refusing_port` gave us, which no thread uses any
    // more (all were joined).
    unsafe { libc::close(refuser) };
    say(format!(
        "posix_spawn_ok={spawned_ok} vfork_ok={vforked_ok} of={n} socket_threads_other_errno={}",
        other.load(Ordering::Relaxed)
    ));
    say(format!(
        "refused_some={}",
        refused.load(Ordering::Relaxed) > 0
    ));
    say(format!("fds_leaked={}", leaked(&before)));
}

static TLS_DTOR_CONNECTS: AtomicU64 = AtomicU64::new(0);

/// `exit-race THREADS MS`: first THREADS threads that connect from a thread-local destructor as
/// they end; then THREADS threads loop on socket/connect/close (to a listener of this
/// process) while the main thread, after MS milliseconds, calls exit(): the exit handlers (the
/// runtime's final report among them) run while the other threads are still inside the hooks, and
/// keep running into them until the process is gone.
fn exit_race(args: &[String]) {
    let threads: u32 = arg(args, 0, "a thread count");
    let ms: u64 = arg(args, 1, "milliseconds");
    let (sink, _acceptor) = sink_listener();
    // Threads whose thread-local destructor makes a connection: hooks while the thread's own
    // thread-local storage is being torn down.
    struct AtThreadExit(SocketAddr);
    impl Drop for AtThreadExit {
        fn drop(&mut self) {
            if cycle(self.0) == Ok(true) {
                TLS_DTOR_CONNECTS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    thread_local! {
        static AT_EXIT: std::cell::RefCell<Option<AtThreadExit>> = const { std::cell::RefCell::new(None) };
    }
    let short: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || AT_EXIT.with(|a| *a.borrow_mut() = Some(AtThreadExit(sink))))
        })
        .collect();
    for t in short {
        let _ = t.join();
    }
    say(format!(
        "tls_dtor_connects={}",
        TLS_DTOR_CONNECTS.load(Ordering::Relaxed)
    ));
    for _ in 0..threads {
        std::thread::spawn(move || loop {
            let _ = cycle(sink);
        });
    }
    std::thread::sleep(std::time::Duration::from_millis(ms));
    say("exiting=1".into());
    // SAFETY: exit() with other threads running, which is the point.
    unsafe { libc::exit(0) };
}

/// `epoll-clients ADDR N BYTES`: N nonblocking connects to the echo server at ADDR at once, all
/// driven by one epoll: wait for EPOLLOUT, check SO_ERROR, send BYTES, read them back, close.
fn epoll_clients(args: &[String]) {
    let addr: SocketAddr = arg(args, 0, "HOST:PORT");
    let n: usize = arg(args, 1, "a count");
    let bytes: usize = arg(args, 2, "a byte count");
    let data: Vec<u8> = (0..bytes).map(|i| (i * 31 + 7) as u8).collect();
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    struct Conn {
        fd: c_int,
        sent: usize,
        got: Vec<u8>,
        connected: bool,
    }
    let (sa, len) = c_addr(addr);
    let mut in_progress = 0;
    // SAFETY: epoll, socket, connect, read, write and close on fds owned here, with live buffers.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        let mut conns: Vec<Conn> = Vec::new();
        for i in 0..n {
            let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
            assert!(fd >= 0);
            let r = libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len);
            if r != 0 {
                assert_eq!(errno(), libc::EINPROGRESS, "connect");
                in_progress += 1;
            }
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLOUT | libc::EPOLLIN) as u32,
                u64: i as u64,
            };
            assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev), 0);
            conns.push(Conn {
                fd,
                sent: 0,
                got: Vec::new(),
                connected: false,
            });
        }
        let mut done = 0;
        let mut so_errors = 0;
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while done < n && std::time::Instant::now() < deadline {
            let k = libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as c_int, 1000);
            for ev in evs.iter().take(k.max(0) as usize) {
                let c = &mut conns[ev.u64 as usize];
                if c.fd < 0 {
                    continue;
                }
                if !c.connected {
                    let mut err: c_int = -1;
                    let mut l = 4 as socklen_t;
                    libc::getsockopt(
                        c.fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut c_int).cast(),
                        &mut l,
                    );
                    if err != 0 {
                        so_errors += 1;
                        libc::close(c.fd);
                        c.fd = -1;
                        done += 1;
                        continue;
                    }
                    c.connected = true;
                }
                if c.sent < bytes {
                    let w = libc::write(c.fd, data[c.sent..].as_ptr().cast(), bytes - c.sent);
                    if w > 0 {
                        c.sent += w as usize;
                    }
                    if c.sent == bytes {
                        let mut ev = libc::epoll_event {
                            events: libc::EPOLLIN as u32,
                            u64: ev.u64,
                        };
                        libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, c.fd, &mut ev);
                    }
                }
                let mut buf = [0u8; 65536];
                loop {
                    let r = libc::read(c.fd, buf.as_mut_ptr().cast(), buf.len());
                    if r <= 0 {
                        break;
                    }
                    c.got.extend_from_slice(&buf[..r as usize]);
                }
                if c.got.len() >= bytes {
                    libc::close(c.fd);
                    c.fd = -1;
                    done += 1;
                }
            }
        }
        libc::close(ep);
        let intact = conns.iter().filter(|c| c.got == data).count();
        say(format!(
            "connections={n} in_progress={} intact={intact} so_errors={so_errors}",
            in_progress > 0
        ));
    }
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
        "accept-null" => accept_null(rest),
        "connect-fault" => connect_fault(),
        "half-close" => half_close(),
        "exit-now" => exit_now(rest),
        "dup-over" => dup_over(rest),
        "signal-storm" => signal_storm(rest),
        "churn" => churn(rest),
        "masked-burst" => masked_burst(rest),
        "signal-thread" => signal_thread(),
        "fork-many" => fork_many(rest),
        "exec-chain" => exec_chain(rest),
        "exec-listener" => exec_listener(rest),
        "fd-limit" => fd_limit(rest),
        "spawn-storm" => spawn_storm(rest),
        "exit-race" => exit_race(rest),
        "epoll-clients" => epoll_clients(rest),
        _ => {
            eprintln!("usage: shapes serve-n PORT N | hammer ADDR TOTAL THREADS | prefork PORT CHILDREN PER | drop-root PORT UID N | accept-short | accept-null null|guard | connect-fault | signal-storm MS [sockets] | churn THREADS CYCLES | masked-burst N | signal-thread | fork-many N PARALLEL | exec-chain N | exec-listener | fd-limit | spawn-storm N THREADS | exit-race THREADS MS | epoll-clients ADDR N BYTES");
            std::process::exit(2);
        }
    }
}
