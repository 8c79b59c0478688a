//! `sockcheck WHAT [ARGS]`: one small, real socket program per question the tests ask about the
//! shim, printing `key=value` lines. It calls the C library (so the shim's hooks apply) and, where
//! the truth is wanted, the raw system call (which the shim cannot intercept).

use libc::{c_int, socklen_t};
use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

fn errno() -> c_int {
    smcrun_sys::Errno::last().0
}

fn set_errno(e: c_int) {
    smcrun_sys::Errno(e).set()
}

fn errno_name(e: c_int) -> String {
    match e {
        0 => "0".into(),
        e => smcrun_sys::errno::name(e).into(),
    }
}

/// SO_DOMAIN / SO_PROTOCOL through the C library (hooked by the shim).
fn hooked_opt(fd: c_int, opt: c_int) -> c_int {
    let mut v: c_int = -1;
    let mut l = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: value and length describe a live c_int.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut c_int).cast(),
            &mut l,
        )
    };
    v
}

/// The same through the raw system call (the kernel's truth).
fn raw_opt(fd: c_int, opt: c_int) -> c_int {
    smcrun_sys::sock::get_int(fd, libc::SOL_SOCKET, opt).unwrap_or(-1)
}

fn report_identity(prefix: &str, fd: c_int) {
    println!("{prefix}_domain={}", hooked_opt(fd, libc::SO_DOMAIN));
    println!("{prefix}_protocol={}", hooked_opt(fd, libc::SO_PROTOCOL));
    println!("{prefix}_raw_domain={}", raw_opt(fd, libc::SO_DOMAIN));
    println!("{prefix}_raw_protocol={}", raw_opt(fd, libc::SO_PROTOCOL));
    println!("{prefix}_sndbuf={}", hooked_opt(fd, libc::SO_SNDBUF));
    println!("{prefix}_rcvbuf={}", hooked_opt(fd, libc::SO_RCVBUF));
}

fn loopback(family: c_int, port: u16) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: zeroed sockaddr_storage is valid; we fill the variant for `family`.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        if family == libc::AF_INET6 {
            let a = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6);
            a.sin6_family = libc::AF_INET6 as u16;
            a.sin6_port = port.to_be();
            a.sin6_addr.s6_addr[15] = 1;
            (ss, std::mem::size_of::<libc::sockaddr_in6>() as socklen_t)
        } else {
            let a = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in);
            a.sin_family = libc::AF_INET as u16;
            a.sin_port = port.to_be();
            a.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            (ss, std::mem::size_of::<libc::sockaddr_in>() as socklen_t)
        }
    }
}

fn port_of(fd: c_int) -> u16 {
    // SAFETY: getsockname into a zeroed storage of the right length.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut l = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut l);
        if ss.ss_family == libc::AF_INET6 as u16 {
            u16::from_be((*(&ss as *const _ as *const libc::sockaddr_in6)).sin6_port)
        } else {
            u16::from_be((*(&ss as *const _ as *const libc::sockaddr_in)).sin_port)
        }
    }
}

/// A listener, a connected client and the accepted socket over loopback, via the C library.
fn tcp_pair(family: c_int) -> (c_int, c_int, c_int) {
    // SAFETY: plain socket calls on fds owned here.
    unsafe {
        let l = libc::socket(family, libc::SOCK_STREAM, 0);
        let (sa, len) = loopback(family, 0);
        assert_eq!(
            libc::bind(l, &sa as *const _ as *const libc::sockaddr, len),
            0,
            "bind"
        );
        assert_eq!(libc::listen(l, 16), 0, "listen");
        let c = libc::socket(family, libc::SOCK_STREAM, 0);
        let (sa, len) = loopback(family, port_of(l));
        assert_eq!(
            libc::connect(c, &sa as *const _ as *const libc::sockaddr, len),
            0,
            "connect"
        );
        let a = libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut());
        assert!(a >= 0, "accept");
        (l, c, a)
    }
}

fn identity(args: &[String]) {
    let family = if args.first().map(String::as_str) == Some("6") {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let (l, c, a) = tcp_pair(family);
    report_identity("listener", l);
    report_identity("client", c);
    report_identity("accepted", a);
    // Data through the pair.
    // SAFETY: write/read on connected sockets with live buffers.
    unsafe {
        let msg = b"ping";
        libc::write(c, msg.as_ptr().cast(), msg.len());
        let mut buf = [0u8; 4];
        let n = libc::read(a, buf.as_mut_ptr().cast(), 4);
        println!("data_ok={}", n == 4 && &buf == msg);
    }
}

fn untouched() {
    let cases: [(&str, c_int, c_int, c_int); 6] = [
        ("udp", libc::AF_INET, libc::SOCK_DGRAM, 0),
        ("udp6", libc::AF_INET6, libc::SOCK_DGRAM, 0),
        ("unix_stream", libc::AF_UNIX, libc::SOCK_STREAM, 0),
        ("unix_dgram", libc::AF_UNIX, libc::SOCK_DGRAM, 0),
        (
            "netlink",
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            libc::NETLINK_ROUTE,
        ),
        ("mptcp", libc::AF_INET, libc::SOCK_STREAM, 262),
    ];
    for (name, d, t, p) in cases {
        // SAFETY: socket(2) takes integers only.
        let fd = unsafe { libc::socket(d, t, p) };
        if fd < 0 {
            println!("{name}=error:{}", errno_name(errno()));
            continue;
        }
        let same = raw_opt(fd, libc::SO_DOMAIN) == d && raw_opt(fd, libc::SO_TYPE) == t;
        println!("{name}={}", if same { "untouched" } else { "CHANGED" });
        // SAFETY: `fd` is the socket made above, used by nothing after this.
        unsafe { libc::close(fd) };
    }
    let mut sv = [0 as c_int; 2];
    // SAFETY: sv has room for two fds.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
    println!(
        "socketpair={}",
        if r == 0 && raw_opt(sv[0], libc::SO_DOMAIN) == libc::AF_UNIX {
            "untouched"
        } else {
            "CHANGED"
        }
    );
}

fn errno_check() {
    // socket() that succeeds must leave errno as it was, even if the shim failed internally first.
    set_errno(libc::ERANGE);
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    println!("socket_ok={}", fd >= 0);
    println!("errno_after_socket={}", errno_name(errno()));
    // SAFETY: F_GETFD takes no argument and dereferences nothing.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    println!("cloexec_kept={}", flags & libc::FD_CLOEXEC != 0);
    // SAFETY: socket(2) takes integers only.
    let fd2 = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
    // SAFETY: F_GETFL takes no argument and dereferences nothing.
    let fl = unsafe { libc::fcntl(fd2, libc::F_GETFL) };
    println!("nonblock_kept={}", fl & libc::O_NONBLOCK != 0);
    // A failing connect must report the kernel's errno.
    let (sa, len) = loopback(libc::AF_INET, 1);
    set_errno(0);
    // SAFETY: `sa` is a sockaddr_storage of ours holding `len` bytes of address, alive for the
    // call.
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
    println!("connect_closed_port={} errno={}", r, errno_name(errno()));
    // A failing bind (port in use) too.
    let (l, _c, _a) = tcp_pair(libc::AF_INET);
    // SAFETY: socket(2) takes integers only.
    let fd3 = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    let (sa, len) = loopback(libc::AF_INET, port_of(l));
    // SAFETY: as for connect: `sa` holds `len` bytes of address and outlives the call.
    let r = unsafe { libc::bind(fd3, &sa as *const _ as *const libc::sockaddr, len) };
    println!("bind_in_use={} errno={}", r, errno_name(errno()));
    // getsockopt on a non-socket.
    let mut v: c_int = 0;
    let mut vl = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: `v` is an int of ours and `vl` says so; a bad fd writes nothing anyway.
    let r = unsafe {
        libc::getsockopt(
            0x7fff,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut v as *mut c_int).cast(),
            &mut vl,
        )
    };
    println!("getsockopt_badfd={} errno={}", r, errno_name(errno()));
    // A successful getsockopt keeps errno.
    set_errno(libc::ERANGE);
    let d = hooked_opt(fd, libc::SO_DOMAIN);
    println!("domain={d} errno_after_getsockopt={}", errno_name(errno()));
}

fn strict() {
    set_errno(0);
    // SAFETY: socket(2) takes integers only.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    println!("fd_ok={} errno={}", fd >= 0, errno_name(errno()));
    // SAFETY: as above.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    println!("udp_ok={}", fd >= 0);
}

fn threads(args: &[String]) {
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(64);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                // SAFETY: socket(2) takes integers only.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
                fd >= 0 && hooked_opt(fd, libc::SO_DOMAIN) == libc::AF_INET
            })
        })
        .collect();
    let good = handles
        .into_iter()
        .filter_map(|h| h.join().ok())
        .filter(|ok| *ok)
        .count();
    println!("threads={n} good={good}");
}

/// N connections to a listener on 127.0.0.1 through std (so through the C library), with both
/// ends kept open; from `threads` threads at once when asked.
fn connections(n: usize, threaded: bool) -> Vec<std::net::TcpStream> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor =
        std::thread::spawn(move || (0..n).map(|_| l.accept().unwrap().0).collect::<Vec<_>>());
    let mut all: Vec<std::net::TcpStream> = if threaded {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    b.wait();
                    std::net::TcpStream::connect(addr).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    } else {
        (0..n)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect()
    };
    all.extend(acceptor.join().unwrap());
    all
}

fn wait_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Installs a seccomp filter that allows every call on every thread of the process
/// (`SECCOMP_FILTER_FLAG_TSYNC`): what a program that sandboxes itself late does to its threads.
fn allow_all_on_every_thread() {
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: allow.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl takes integers; seccomp reads `prog` and the one instruction it points at,
    // both alive for the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let r = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        );
        assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
    }
}

fn conns(args: &[String]) {
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(2);
    let then = args.get(1).map(String::as_str).unwrap_or("exit");
    let stdin_gate = then == "stdin";
    if stdin_gate {
        println!("pid={}", std::process::id());
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
    }
    let keep = connections(n, then == "threads");
    match then {
        "wait" | "stdin" => {
            println!("ready pid={}", std::process::id());
            std::io::stdout().flush().unwrap();
            wait_forever();
        }
        "seccomp" => {
            // the sidecar has started (the first TCP socket) and settled in; then a filter that
            // allows every call, on every thread (TSYNC), and more connections for it to see
            std::thread::sleep(std::time::Duration::from_millis(500));
            allow_all_on_every_thread();
            let more = connections(n, false);
            println!("ready pid={} more={}", std::process::id(), more.len());
            std::io::stdout().flush().unwrap();
            // then a normal exit, when told (the exit handlers run)
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            drop(more);
        }
        "fork" => {
            std::io::stdout().flush().unwrap();
            // SAFETY: the child runs ordinary Rust code in a process whose other threads have
            // finished (the acceptor was joined), then exits normally so atexit handlers run.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let more = connections(n, false);
                println!(
                    "child pid={} connections={}",
                    std::process::id(),
                    more.len()
                );
                drop(more);
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waitpid writes only `status`, an int of ours alive for the call.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            println!(
                "parent pid={} child={pid} status={}",
                std::process::id(),
                status
            );
        }
        _ => {}
    }
    drop(keep);
}

/// `serve PORT`: an echo server on 127.0.0.1:PORT (0: any), a thread per connection, forever.
fn serve(args: &[String]) {
    let port: u16 = args.first().and_then(|s| s.parse().ok()).unwrap_or(0);
    let host = args.get(1).map(String::as_str).unwrap_or("127.0.0.1");
    let l = std::net::TcpListener::bind((host, port)).unwrap();
    println!("listening={}", l.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    for s in l.incoming() {
        let Ok(mut s) = s else { continue };
        std::thread::spawn(move || {
            let mut r = s.try_clone().unwrap();
            let _ = std::io::copy(&mut r, &mut s);
        });
    }
}

fn parse_addr(a: Option<&String>) -> std::net::SocketAddr {
    a.and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("expected HOST:PORT, e.g. 127.0.0.1:6379");
        std::process::exit(2)
    })
}

/// Sends `len` bytes through an echo connection and checks what comes back.
fn echo_check(s: &mut std::net::TcpStream, len: usize) -> bool {
    use std::io::Read;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut w = s.try_clone().unwrap();
    let sent = data.clone();
    let h = std::thread::spawn(move || w.write_all(&sent));
    let mut back = vec![0u8; len];
    let ok = s.read_exact(&mut back).is_ok();
    h.join().unwrap().is_ok() && ok && back == data
}

/// `client HOST:PORT [BYTES [HOLD_MS]]`: one connection to an echo server, data checked, held open
/// HOLD_MS before closing.
fn client(args: &[String]) {
    let addr = parse_addr(args.first());
    let len: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(65536);
    let hold_ms: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    println!("echo_ok={}", echo_check(&mut s, len));
    std::thread::sleep(std::time::Duration::from_millis(hold_ms));
    let fd = std::os::fd::AsRawFd::as_raw_fd(&s);
    println!(
        "raw_domain={} raw_protocol={}",
        raw_opt(fd, libc::SO_DOMAIN),
        raw_opt(fd, libc::SO_PROTOCOL)
    );
}

/// `locked-shutdown HOST:PORT`: the JDK's locking around a half-close, against an echo server. The
/// writer holds a lock that the reader takes before each read (as `NioSocketImpl.shutdownOutput()`
/// holds the socket's state lock, which every read takes) while it fills the connection until a
/// nonblocking write would block (the echo server blocked writing back, its receive buffer and
/// this send buffer full) and then shuts its side down. TCP's shutdown returns at once and the
/// reader then drains everything; a shutdown that waits for the send buffer to empty deadlocks,
/// since only the reader can make room. Prints `echoed=N of TOTAL intact=BOOL shutdown_ms=MS
/// unsent_at_shutdown=BYTES`.
fn locked_shutdown(args: &[String]) {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::sync::{Arc, Mutex};
    let addr = parse_addr(args.first());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let state = Arc::new(Mutex::new(()));
    let held = state.lock().unwrap();
    let reader = {
        let (mut r, state) = (s.try_clone().unwrap(), state.clone());
        std::thread::spawn(move || {
            let (mut back, mut buf) = (Vec::new(), vec![0u8; 65536]);
            loop {
                drop(state.lock().unwrap());
                match r.read(&mut buf) {
                    Ok(0) => break back,
                    Ok(n) => back.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("read: {e}"),
                }
            }
        })
    };
    let pattern = |i: usize| (i * 7 + i / 251) as u8;
    s.set_nonblocking(true).unwrap();
    let (mut total, mut blocked) = (0usize, 0);
    while blocked < 5 {
        let chunk: Vec<u8> = (total..total + 16384).map(pattern).collect();
        match s.write(&chunk) {
            Ok(n) => (total, blocked) = (total + n, 0),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                blocked += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => panic!("write: {e}"),
        }
    }
    s.set_nonblocking(false).unwrap();
    let mut unsent: libc::c_int = 0;
    // SAFETY: SIOCOUTQNSD writes one int through the pointer given.
    unsafe { libc::ioctl(s.as_raw_fd(), 0x894B, &mut unsent as *mut libc::c_int) };
    let t = std::time::Instant::now();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let shutdown_ms = t.elapsed().as_millis();
    drop(held);
    let back = reader.join().unwrap();
    println!(
        "echoed={} of {total} intact={} shutdown_ms={shutdown_ms} unsent_at_shutdown={unsent}",
        back.len(),
        back.len() == total && back.iter().enumerate().all(|(i, &b)| b == pattern(i))
    );
}

/// A std address as a C sockaddr.
fn to_sockaddr(addr: std::net::SocketAddr) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: a zeroed sockaddr_storage is valid; we fill the variant of the address's family.
    unsafe {
        match addr {
            std::net::SocketAddr::V4(a) => {
                let mut ss: libc::sockaddr_storage = std::mem::zeroed();
                let sin = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in);
                sin.sin_family = libc::AF_INET as u16;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                (ss, std::mem::size_of::<libc::sockaddr_in>() as socklen_t)
            }
            std::net::SocketAddr::V6(a) => {
                let mut ss: libc::sockaddr_storage = std::mem::zeroed();
                let sin6 = &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6);
                sin6.sin6_family = libc::AF_INET6 as u16;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                (ss, std::mem::size_of::<libc::sockaddr_in6>() as socklen_t)
            }
        }
    }
}

/// `epoll-connect HOST:PORT`: a nonblocking socket registered in epoll before connect(); the
/// connection must still report EPOLLOUT and carry data.
fn epoll_connect(args: &[String]) {
    let addr = parse_addr(args.first());
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: socket, epoll and connect calls on fds owned here, with live buffers.
    unsafe {
        let fd = libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLOUT as u32,
            u64: 7,
        };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev), 0);
        let (sa, len) = to_sockaddr(addr);
        let r = libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len);
        println!(
            "connect={} errno={}",
            r,
            errno_name(if r == 0 { 0 } else { errno() })
        );
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 1];
        let n = libc::epoll_wait(ep, out.as_mut_ptr(), 1, 20_000);
        let events = out[0].events;
        println!(
            "epoll_n={n} epollout={} data={}",
            events & libc::EPOLLOUT as u32 != 0,
            { out[0].u64 }
        );
        let mut err: c_int = -1;
        let mut l = std::mem::size_of::<c_int>() as socklen_t;
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut c_int).cast(),
            &mut l,
        );
        println!("so_error={err}");
        // Back to blocking for the data check.
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) & !libc::O_NONBLOCK,
        );
        let mut s = <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd);
        println!("echo_ok={}", echo_check(&mut s, 65536));
    }
}

/// `opts-connect HOST:PORT`: options set before connect() must still be set after it.
fn opts_connect(args: &[String]) {
    let addr = parse_addr(args.first());
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let set = |fd: c_int, level: c_int, name: c_int, v: c_int| {
        // SAFETY: setsockopt with a live c_int.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&v as *const c_int).cast(),
                std::mem::size_of::<c_int>() as socklen_t,
            )
        };
        assert_eq!(r, 0, "setsockopt {level}/{name}");
    };
    let get = |fd: c_int, level: c_int, name: c_int| -> c_int {
        let mut v: c_int = -1;
        let mut l = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: getsockopt into a live c_int.
        unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut c_int).cast(), &mut l) };
        v
    };
    // SAFETY: a socket owned here, handed to TcpStream after connect.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
    set(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    set(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 65536);
    set(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    if family == libc::AF_INET {
        set(fd, libc::IPPROTO_IP, libc::IP_TOS, 0x10);
    }
    let before = get(fd, libc::SOL_SOCKET, libc::SO_RCVBUF);
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: connect on our fd with a valid address.
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
    println!("connect={r}");
    println!("nodelay={}", get(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY));
    println!(
        "keepalive={}",
        get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE)
    );
    println!(
        "rcvbuf_kept={}",
        get(fd, libc::SOL_SOCKET, libc::SO_RCVBUF) == before
    );
    println!(
        "reuseaddr={}",
        get(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR)
    );
    if family == libc::AF_INET {
        println!("tos={}", get(fd, libc::IPPROTO_IP, libc::IP_TOS));
    }
    // SAFETY: fd is connected and owned; the stream takes it over.
    let mut st = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    println!("echo_ok={}", echo_check(&mut st, 65536));
}

fn shim_loaded() -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.contains("libsmcrun_shim.so"))
        .unwrap_or(false)
}

fn fork_exec() {
    let me = std::env::current_exe().unwrap();
    let exe = CString::new(me.as_os_str().as_bytes()).unwrap();
    let argv = [exe.clone(), CString::new("maps").unwrap()];
    let argv_p: Vec<*const libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    std::io::stdout().flush().unwrap();
    // fork + socket in the child + exec.
    // SAFETY: the child only makes system calls and execs.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            if fd < 0 {
                libc::_exit(3);
            }
            libc::execv(exe.as_ptr(), argv_p.as_ptr());
            libc::_exit(4);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        println!("fork_child_status={}", libc::WEXITSTATUS(status));
        // vfork + exec (deprecated in libc because Rust code after vfork is easy to get wrong; the
        // child here only calls execv and _exit, which is what vfork allows).
        #[allow(deprecated)]
        let pid = libc::vfork();
        if pid == 0 {
            libc::execv(exe.as_ptr(), argv_p.as_ptr());
            libc::_exit(4);
        }
        libc::waitpid(pid, &mut status, 0);
        println!("vfork_child_status={}", libc::WEXITSTATUS(status));
    }
    // posix_spawn via std::process::Command.
    let out = std::process::Command::new(&me)
        .arg("maps")
        .output()
        .unwrap();
    print!(
        "{}",
        String::from_utf8_lossy(&out.stdout).replace("shim_loaded", "spawn_shim_loaded")
    );
}

fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (what, rest) = args
        .split_first()
        .map(|(w, r)| (w.as_str(), r))
        .unwrap_or(("", &[]));
    match what {
        "identity" => identity(rest),
        "untouched" => untouched(),
        "errno" => errno_check(),
        "strict" => strict(),
        "threads" => threads(rest),
        "maps" => println!("shim_loaded={}", shim_loaded()),
        "fork-exec" => fork_exec(),
        "conns" => conns(rest),
        "serve" => serve(rest),
        "client" => client(rest),
        "locked-shutdown" => locked_shutdown(rest),
        "epoll-connect" => epoll_connect(rest),
        "opts-connect" => opts_connect(rest),
        "argv" => {
            for (i, a) in std::env::args_os().enumerate() {
                let hex: String = a.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                println!("argv{i}={hex}");
            }
        }
        "wait" => {
            println!("pid={}", std::process::id());
            std::io::stdout().flush().unwrap();
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        "exit" => std::process::exit(rest.first().and_then(|s| s.parse().ok()).unwrap_or(0)),
        _ => {
            eprintln!("usage: sockcheck identity [4|6] | untouched | errno | strict | threads N | maps | fork-exec | argv ... | wait | exit N | conns N [exit|wait|stdin|fork|threads] | serve PORT [HOST] | client ADDR [BYTES [HOLD_MS]] | epoll-connect ADDR | opts-connect ADDR");
            std::process::exit(2);
        }
    }
}
