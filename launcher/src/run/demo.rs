//! `smcrun demo`: the built-in job. It runs a TCP echo server and its clients in one process under
//! the shim on 127.0.0.1, moves data through every connection and checks it byte for byte, and
//! says for each socket whether it really ran over SMC-R, SMC-D or TCP, and why.
//!
//! The truth comes from the kernel, not from the shim: the socket's real family and protocol are
//! read with the raw system call (the shim's getsockopt hook would mask them), SMC sockets are
//! looked up by inode in the kernel's smc_diag dump (mode, fallback reason, peer diagnosis), and a
//! TCP socket's reason is found by asking the kernel for an SMC socket the way the shim does.

use crate::run::exec::{self, RunOptions};
use crate::status::{self, Exit, Failure};
use clap::Args;
use smcrun_classify::{self as classify, Outcome, Verdict};
use smcrun_kernel::sock_diag;
use smcrun_settings::Why;
use smcrun_sys::smc::{SocketKind, AF_SMC};
use smcrun_sys::sock;
use smcrun_views::demo::{DemoReport, DemoSocket};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `smcrun demo` options.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Number of connections.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub connections: u16,
    /// Bytes sent and echoed back per connection, e.g. 4m.
    #[arg(long, default_value = "4m", value_parser = bytes_arg)]
    pub bytes: i32,
    /// Print the result as JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Exit 1 unless every socket ran over SMC-R or SMC-D.
    #[arg(long)]
    pub require_smc: bool,
}

/// The hidden worker takes the same options.
pub type WorkerArgs = DemoArgs;

fn bytes_arg(s: &str) -> Result<i32, String> {
    smcrun_settings::parse_size(s)
        .ok_or_else(|| format!("expected {}", smcrun_settings::SNDBUF.expected))
}

/// Starts the worker under the shim: smcrun itself, exec'd with LD_PRELOAD set.
pub fn run(opts: &RunOptions, args: &DemoArgs) -> status::Outcome {
    exec::prepare(opts)?;
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::new(
                Exit::Failed,
                format!("cannot find my own executable: {e}"),
            ));
        }
    };
    let mut argv: Vec<OsString> = vec!["smcrun".into(), "__demo-worker".into()];
    argv.push(format!("--connections={}", args.connections).into());
    argv.push(format!("--bytes={}", args.bytes).into());
    if args.json {
        argv.push("--json".into());
    }
    if args.require_smc {
        argv.push("--require-smc".into());
    }
    Err(exec::exec(&exe, &argv))
}

/// Byte `i` of connection `conn`'s test data: cheap, position-dependent, and different per
/// connection, so a misrouted or reordered chunk is caught.
fn pattern(conn: u16, i: u64) -> u8 {
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(conn) << 56);
    (x >> 29) as u8 ^ (i as u8)
}

fn echo(mut s: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return s.shutdown(Shutdown::Write);
        }
        s.write_all(&buf[..n])?;
    }
}

/// Sends `len` bytes and checks the echo; true when every byte came back in order.
fn exchange(conn: u16, s: TcpStream, len: u64) -> std::io::Result<bool> {
    let mut writer = s.try_clone()?;
    let send = std::thread::spawn(move || -> std::io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut sent = 0u64;
        while sent < len {
            let n = (len - sent).min(buf.len() as u64) as usize;
            for (k, b) in buf[..n].iter_mut().enumerate() {
                *b = pattern(conn, sent + k as u64);
            }
            writer.write_all(&buf[..n])?;
            sent += n as u64;
        }
        writer.shutdown(Shutdown::Write)
    });
    let mut reader = s;
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    let mut intact = true;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        for (k, b) in buf[..n].iter().enumerate() {
            if *b != pattern(conn, got + k as u64) {
                intact = false;
            }
        }
        got += n as u64;
    }
    send.join()
        .map_err(|_| std::io::Error::other("sender thread panicked"))??;
    Ok(intact && got == len)
}

/// Why the kernel gives this process no SMC socket, found the way the shim finds it: the errno of
/// `socket(AF_SMC, ...)` (raw system call, so the shim does not intercept it).
fn why_tcp() -> String {
    match sock::socket(AF_SMC, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) {
        Ok(fd) => {
            let _ = sock::close(fd);
            "the kernel can make SMC sockets, but this one is TCP (TCP by policy, or made without the shim)".into()
        }
        Err(e) => format!("{} ({e} at socket())", Why::of(e.0).describe()),
    }
}

/// What the kernel says about SMC connections: every SMC socket (with its link group and buffer
/// details) and the SMC-D link groups (which name the SMC-D device).
struct Kernel {
    diag: Result<Vec<sock_diag::SmcSocket>, smcrun_kernel::Error>,
    smcd_groups: Vec<smcrun_kernel::smc_genl::LinkGroupSmcd>,
}

impl Kernel {
    fn read() -> Kernel {
        Kernel {
            diag: sock_diag::dump(sock_diag::EXT_LGRINFO | sock_diag::EXT_DMBINFO),
            smcd_groups: smcrun_kernel::smc_genl::SmcGenl::open()
                .and_then(|c| c.link_groups_smcd())
                .unwrap_or_default(),
        }
    }

    /// The device and link group of an SMC connection's smc_diag entry.
    fn device_of(&self, e: &sock_diag::SmcSocket) -> (Option<String>, Option<String>) {
        if let Some(l) = &e.lgrinfo {
            return (Some(l.ibdev.clone()), None);
        }
        match &e.dmbinfo {
            Some(d) => {
                let group = self.smcd_groups.iter().find(|g| g.id == d.link_id);
                (
                    group.map(|g| g.device()),
                    Some(smcrun_views::linkgroup::json::lgr_id(d.link_id)),
                )
            }
            None => (None, None),
        }
    }
}

fn classify(conn: u16, side: &'static str, s: &TcpStream, kernel: &Kernel) -> DemoSocket {
    let diag = &kernel.diag;
    let fd = s.as_raw_fd();
    let kind = sock::kind(fd).unwrap_or(SocketKind::Other);
    let addr = |a: std::io::Result<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    let mut r = DemoSocket {
        connection: conn,
        side: side.into(),
        local: addr(s.local_addr()),
        peer: addr(s.peer_addr()),
        socket: "TCP".into(),
        mode: "TCP".into(),
        device: None,
        link_group: None,
        fallback_reason: None,
        peer_diagnosis: None,
        why: String::new(),
    };
    // A socket that fell back reads as TCP (the kernel moved the file to the internal TCP
    // socket), so it is looked up in smc_diag either way: by inode, then by its ports.
    let entry = diag.as_ref().ok().and_then(|list| {
        classify::find(
            list,
            classify::socket_inode(fd),
            s.local_addr().ok(),
            s.peer_addr().ok(),
        )
    });
    if !kind.is_smc() && entry.is_none() {
        r.why = why_tcp();
        return r;
    }
    r.socket = if kind.is_smc() { kind.label() } else { "SMC" }.into();
    if let Err(e) = diag {
        r.mode = "SMC?".into();
        r.why = format!("an SMC socket, but the kernel's smc_diag cannot be read: {e}");
        return r;
    }
    let Some(e) = entry else {
        r.mode = "SMC?".into();
        r.why = "an SMC socket missing from the smc_diag dump".to_string();
        return r;
    };
    match classify::from_diag(e) {
        Verdict::Decided(o) => {
            r.mode = classify::mode_name(o).into();
            r.why = match o {
                Outcome::SmcR | Outcome::SmcD => {
                    (r.device, r.link_group) = kernel.device_of(e);
                    let on = match (&r.device, &r.link_group) {
                        (Some(d), Some(g)) => format!(" ({d}, link group {g})"),
                        (Some(d), None) => format!(" ({d})"),
                        (None, Some(g)) => format!(" (link group {g})"),
                        (None, None) => String::new(),
                    };
                    format!("{} handshake succeeded{on}", classify::mode_name(o))
                }
                Outcome::Fallback { reason, peer } => {
                    r.fallback_reason = Some(format!("0x{reason:08x}"));
                    r.peer_diagnosis = classify::peer_diagnosis(o);
                    let mut why = format!(
                        "SMC fell back to TCP: {}",
                        classify::reason(o).map(|x| x.text).unwrap_or_default()
                    );
                    if peer != 0 {
                        let p = classify::reason(Outcome::Fallback {
                            reason: peer,
                            peer: 0,
                        });
                        why += &format!("; peer: {}", p.map(|x| x.text).unwrap_or_default());
                    }
                    why
                }
                _ => classify::reason(o).map(|x| x.text).unwrap_or_default(),
            };
        }
        Verdict::Handshaking => {
            r.mode = "SMC?".into();
            r.why = "the SMC handshake is still running".into();
        }
        Verdict::UnknownMode(m) => {
            r.mode = "SMC?".into();
            r.why = format!("smc_diag reports mode {m}, which this smcrun does not know");
        }
    }
    r
}

/// Waits until the shim's runtime classified this process's open connections (its
/// `smcrun_settle`), for at most `limit`. A shim without it (another version) is not waited for.
/// Unsafe as any call found by name: nothing checks the symbol's type.
#[allow(unsafe_code)]
fn settle(limit: Duration) {
    // SAFETY: dlsym with a NUL-terminated name; a non-null result is the shim's
    // `extern "C" fn(c_uint) -> c_int`, which takes no pointer.
    unsafe {
        let f = libc::dlsym(libc::RTLD_DEFAULT, c"smcrun_settle".as_ptr());
        if !f.is_null() {
            let settle: extern "C" fn(libc::c_uint) -> libc::c_int = std::mem::transmute(f);
            let ms = libc::c_uint::try_from(limit.as_millis()).unwrap_or(libc::c_uint::MAX);
            settle(ms);
        }
    }
}

fn shim_loaded() -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.contains(crate::run::preload::SHIM_FILE))
        .unwrap_or(false)
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The worker: runs inside the preloaded process.
pub fn worker(args: &DemoArgs) -> status::Outcome {
    work(args).map_err(|e| Failure::of("smcrun demo", Exit::Failed, e))
}

fn work(args: &DemoArgs) -> Result<ExitCode, String> {
    if !shim_loaded() {
        return Err(format!(
            "the shim is not loaded in this process (LD_PRELOAD={:?}); run `smcrun demo`",
            std::env::var_os("LD_PRELOAD").unwrap_or_default()
        ));
    }
    let n = args.connections;
    let len = args.bytes as u64;
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("listen on 127.0.0.1: {e}"))?;
    let server_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let acceptor = std::thread::spawn(move || -> std::io::Result<Vec<TcpStream>> {
        (0..n).map(|_| listener.accept().map(|(s, _)| s)).collect()
    });
    let clients: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(server_addr))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("connect to {server_addr}: {e}"))?;
    let mut servers = acceptor
        .join()
        .map_err(|_| "accept thread panicked".to_string())?
        .map_err(|e| format!("accept on {server_addr}: {e}"))?;
    // Pair each client with the server socket whose peer is the client's local address.
    let mut pairs = Vec::new();
    for c in clients {
        let local = c.local_addr().map_err(|e| e.to_string())?;
        let at = servers
            .iter()
            .position(|s| s.peer_addr().ok() == Some(local))
            .ok_or_else(|| format!("no accepted connection from {local}"))?;
        pairs.push((c, servers.swap_remove(at)));
    }

    let kernel = Kernel::read();
    let mut sockets = Vec::new();
    for (i, (c, s)) in pairs.iter().enumerate() {
        let id = i as u16 + 1;
        sockets.push(classify(id, "client", c, &kernel));
        sockets.push(classify(id, "server", s, &kernel));
    }

    // The connections are short: hold them until the runtime classified them too, so that the
    // exit report counts each with its mode.
    settle(Duration::from_secs(5));

    let started = Instant::now();
    let mut handles = Vec::new();
    for (i, (c, s)) in pairs.into_iter().enumerate() {
        let id = i as u16 + 1;
        std::thread::spawn(move || echo(s));
        handles.push(std::thread::spawn(move || exchange(id, c, len)));
    }
    let mut mismatched = 0u16;
    for h in handles {
        match h.join() {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => mismatched += 1,
            Ok(Err(e)) => return Err(format!("data transfer failed: {e}")),
            Err(_) => return Err("transfer thread panicked".into()),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let count = |t: &str| sockets.iter().filter(|s| s.mode == t).count();
    let report = DemoReport {
        connections: n,
        bytes_per_connection: len,
        bytes_sent: len * u64::from(n),
        data_intact: mismatched == 0,
        mismatched_connections: mismatched,
        smc_r: count("SMC-R"),
        smc_d: count("SMC-D"),
        tcp: count("TCP"),
        seconds,
        sockets,
    };
    if args.json {
        // A report that cannot be written ends the demo with why (exit 1).
        crate::cmd::format::print_json(&report).map_err(|f| f.message)?;
    } else {
        print_text(&report, server_addr, len);
    }
    let all_smc = report.smc_r + report.smc_d == report.sockets.len();
    Ok(if !report.data_intact || (args.require_smc && !all_smc) {
        ExitCode::from(Exit::Failed)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_text(r: &DemoReport, server: SocketAddr, len: u64) {
    println!(
        "smcrun demo: {} to an echo server on {server}, {} each way per connection",
        smcrun_report::count(u64::from(r.connections), "connection"),
        human(len)
    );
    println!();
    println!(
        "{:<5} {:<7} {:<22} {:<22} {:<12} {:<6} why",
        "conn", "side", "local", "peer", "socket", "mode"
    );
    for s in &r.sockets {
        println!(
            "{:<5} {:<7} {:<22} {:<22} {:<12} {:<6} {}",
            s.connection, s.side, s.local, s.peer, s.socket, s.mode, s.why
        );
    }
    println!();
    let total = r.bytes_sent;
    println!(
        "data: {} sent and {} echoed back in {:.2} s, {}",
        human(total),
        human(total),
        r.seconds,
        if r.data_intact {
            "every byte checked and intact".to_string()
        } else {
            format!(
                "{} CORRUPTED",
                smcrun_report::count(u64::from(r.mismatched_connections), "connection")
            )
        }
    );
    println!(
        "result: {}: {} SMC-R, {} SMC-D, {} TCP",
        smcrun_report::count(r.sockets.len() as u64, "socket"),
        r.smc_r,
        r.smc_d,
        r.tcp
    );
}
