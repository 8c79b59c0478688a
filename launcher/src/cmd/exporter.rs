//! `smcrun exporter` and `smcrun metrics`: the kernel's SMC telemetry as Prometheus metrics
//! (collected by `smcrun_views::metrics`), served over HTTP, written as a node_exporter textfile,
//! or printed once.
//!
//! - `smcrun exporter [--listen ADDR:PORT]` serves `/metrics` on 127.0.0.1:9609 unless told
//!   otherwise (9609: in the 9000–9999 span firewalls open for exporters, and none of node_exporter's
//!   9100 or the RDMA exporters' 9879, 9315 and 9101). Each scrape reads the kernel afresh. A
//!   client, or many, can make it hold only so much (it may face the network): one thread for
//!   every connection (HTTP/1 by hyper, one request each) and at most `SCRAPE_THREADS` more
//!   reading the kernel; at most `MAX_HEADER_BYTES` of a request header (431 beyond); at most
//!   `MAX_CONNECTIONS` connections, a new one closing the oldest that has not sent its header
//!   yet; `HEADER_TIMEOUT` from a connection's start to its whole header and `CONNECTION_TIMEOUT`
//!   to its end.
//! - `smcrun exporter --textfile DIR [--interval SEC] [--once]` writes `DIR/smcrun.prom` every SEC
//!   seconds (default 15): a new file created with O_EXCL beside it, then renamed over the old one,
//!   so node_exporter never reads half a file and nothing planted there is followed.
//! - `smcrun metrics` prints one scrape.

use crate::status::{Exit, Failure, Outcome};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{header, Method, Request, Response, StatusCode};
use tokio::sync::{Notify, Semaphore};

use clap::Args;
use smcrun_views::metrics::{self, ScrapeMeta};
use smcrun_views::snapshot::{self, Collector, Collectors, Snapshot};

use crate::cmd::format;
use crate::cmd::web_config::{self, WebConfig};

/// Where `smcrun exporter` listens unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9609";

/// The textfile's name in `--textfile DIR`.
pub const TEXTFILE: &str = "smcrun.prom";

/// Threads reading the kernel for scrapes at once (more scrapes wait their turn).
const SCRAPE_THREADS: usize = 4;

/// The most of a request header the exporter buffers (hyper's smallest buffer); a longer header
/// is answered 431 and the connection closed.
const MAX_HEADER_BYTES: usize = 8192;

/// The most connections open at once (fewer if RLIMIT_NOFILE is low, `RESERVED_FDS` kept).
const MAX_CONNECTIONS: usize = 512;

/// Descriptors kept for scrapes (netlink sockets, /proc files) when RLIMIT_NOFILE bounds the
/// connections.
const RESERVED_FDS: u64 = 64;

/// From a connection's start to its whole request header (a scraper sends it at once).
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// From a connection's start to its end: the header, the scrape and the answer taken.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections the kernel completes before the exporter takes them (up to net.core.somaxconn):
/// a burst of new ones waits there rather than being refused.
const LISTEN_BACKLOG: u32 = 1024;

/// The pause after accept(2) failed (out of descriptors, say) before the next accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// `smcrun exporter` arguments.
#[derive(Args, Debug)]
pub struct ExporterArgs {
    /// Serve /metrics on this address [default: 127.0.0.1:9609]; give 0.0.0.0:9609 (or the node's
    /// address) to let a Prometheus server elsewhere scrape it.
    /// `:PORT` (node_exporter's spelling) is every IPv4 address, 0.0.0.0:PORT.
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "textfile", value_parser = listen_arg)]
    listen: Option<SocketAddr>,
    /// Instead of serving HTTP, write DIR/smcrun.prom for node_exporter's textfile collector.
    #[arg(long, value_name = "DIR")]
    textfile: Option<PathBuf>,
    /// Seconds between textfile writes [default: 15].
    #[arg(long, value_name = "SEC", requires = "textfile", value_parser = format::seconds)]
    interval: Option<f64>,
    /// Write the textfile once and exit (for cron).
    #[arg(long, requires = "textfile")]
    once: bool,
    /// node_exporter's web configuration file (YAML): `tls_server_config` (`cert_file`,
    /// `key_file`, optionally `client_auth_type`, `client_ca_file`, `min_version`,
    /// `max_version`) and `basic_auth_users` (user: bcrypt hash); read once, at start.
    #[arg(
        long = "web.config.file",
        value_name = "PATH",
        conflicts_with = "textfile"
    )]
    web_config: Option<PathBuf>,
    #[command(flatten)]
    collectors: CollectorFlags,
}

/// `smcrun metrics` arguments.
#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// Hidden: show what a capture of `smcrun __capture DIR` held, instead of this kernel.
    #[arg(long, value_name = "DIR", hide = true)]
    replay: Option<PathBuf>,
    #[command(flatten)]
    collectors: CollectorFlags,
}

/// node_exporter's collector flags, on `exporter` and `metrics`: `--collector.NAME` and
/// `--no-collector.NAME` for each [`Collector`], and `--collector.disable-defaults` (every
/// collector is on by default; with it, only those named by `--collector.NAME`).
#[derive(Debug, Clone, Copy)]
pub struct CollectorFlags(pub Collectors);

/// node_exporter's flag that turns every collector off but those named.
const DISABLE_DEFAULTS: &str = "collector.disable-defaults";

fn on_flag(c: Collector) -> String {
    format!("collector.{}", c.name())
}

fn off_flag(c: Collector) -> String {
    format!("no-collector.{}", c.name())
}

impl clap::FromArgMatches for CollectorFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut on = if m.get_flag(DISABLE_DEFAULTS) {
            Collectors::NONE
        } else {
            Collectors::ALL
        };
        for c in Collector::ALL {
            if m.get_flag(&on_flag(c)) {
                on = on.with(c, true);
            }
            if m.get_flag(&off_flag(c)) {
                on = on.with(c, false);
            }
        }
        Ok(CollectorFlags(on))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for CollectorFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        let mut cmd = cmd.arg(
            Arg::new(DISABLE_DEFAULTS)
                .long(DISABLE_DEFAULTS)
                .action(ArgAction::SetTrue)
                .help("Turn every collector off but those named by --collector.NAME"),
        );
        for c in Collector::ALL {
            let off = Arg::new(off_flag(c))
                .long(off_flag(c))
                .action(ArgAction::SetTrue)
                .conflicts_with(on_flag(c))
                .help(format!("Turn the {} collector off", c.name()));
            // `--no-sockets` came before the collector flags, and stays.
            let off = match c {
                Collector::Sockets => off.visible_alias("no-sockets"),
                _ => off,
            };
            cmd = cmd
                .arg(
                    Arg::new(on_flag(c))
                        .long(on_flag(c))
                        .action(ArgAction::SetTrue)
                        .help(format!("Turn the {} collector on: {}", c.name(), c.about())),
                )
                .arg(off);
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The one line for an unknown `--collector.NAME` (clap's own error names no collectors).
pub fn unknown_collector(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split('=').next().unwrap_or(arg);
    let name = flag
        .strip_prefix("--collector.")
        .or_else(|| flag.strip_prefix("--no-collector."))?;
    Some(format!(
        "smcrun: unknown collector {name:?} in {flag}; the collectors are: {}",
        Collector::names()
    ))
}

/// What lasts across scrapes: the error count, which collectors are on, and what the reader
/// keeps between scrapes (the generic netlink socket, sysctl files, device limits: see
/// [`snapshot::Reader`]).
struct Exporter {
    errors: AtomicU64,
    collectors: Collectors,
    reader: Mutex<snapshot::Reader>,
}

impl Exporter {
    fn new(collectors: Collectors) -> Exporter {
        Exporter {
            errors: AtomicU64::new(0),
            collectors,
            reader: Mutex::new(snapshot::Reader::default()),
        }
    }

    /// One scrape of `snap` (read in `read_seconds`) as text; failed parts count as errors.
    fn render(&self, snap: &Snapshot, read_seconds: f64) -> Result<String, String> {
        let errors = self.errors.fetch_add(snap.failures(), Ordering::Relaxed) + snap.failures();
        let meta = ScrapeMeta {
            errors_total: errors,
            duration_seconds: read_seconds,
        };
        Ok(metrics::render(snap, &meta))
    }

    /// Read the kernel and render.
    fn scrape(&self) -> Result<String, String> {
        let t0 = Instant::now();
        // Scrapes at once (up to SCRAPE_THREADS): one uses the kept reader, the others read
        // with a reader of their own, as it would be on the first scrape.
        let snap = match self.reader.try_lock() {
            Ok(mut reader) => reader.read(self.collectors),
            // A scrape that panicked mid-read: start again from nothing kept.
            Err(std::sync::TryLockError::Poisoned(p)) => {
                let mut reader = p.into_inner();
                *reader = snapshot::Reader::default();
                self.reader.clear_poison();
                reader.read(self.collectors)
            }
            Err(std::sync::TryLockError::WouldBlock) => snapshot::read(self.collectors),
        };
        self.render(&snap, t0.elapsed().as_secs_f64())
    }
}

/// Run `smcrun metrics`.
pub fn metrics(a: &MetricsArgs) -> Outcome {
    let e = Exporter::new(a.collectors.0);
    let text = match &a.replay {
        Some(dir) => e.render(&snapshot::replay(dir).only(e.collectors), 0.0),
        None => e.scrape(),
    };
    match text {
        Ok(t) => format::write_stdout(t.as_bytes()),
        Err(err) => Err(Failure::of("smcrun metrics", Exit::Failed, err.to_string())),
    }
}

/// Run `smcrun exporter`.
pub fn exporter(a: &ExporterArgs) -> Outcome {
    let exporter = Exporter::new(a.collectors.0);
    match &a.textfile {
        Some(dir) => textfile_loop(exporter, dir, a.interval.unwrap_or(15.0), a.once),
        None => {
            // A bad web config stops the exporter before it listens.
            let web = match &a.web_config {
                Some(path) => match WebConfig::read(path) {
                    Ok(w) => w,
                    Err(e) => {
                        return Err(Failure::of("smcrun exporter", Exit::Usage, e.to_string()));
                    }
                },
                None => WebConfig::none(),
            };
            let default = DEFAULT_LISTEN
                .parse()
                .expect("DEFAULT_LISTEN is an address");
            serve(exporter, web, a.listen.unwrap_or(default))
        }
    }
}

fn serve(exporter: Exporter, web: WebConfig, addr: SocketAddr) -> Outcome {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(SCRAPE_THREADS)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return Err(Failure::of(
                "smcrun exporter",
                Exit::Failed,
                format!("cannot start the HTTP server: {e}"),
            ));
        }
    };
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let auth = if web.auth.is_some() {
        ", basic auth"
    } else {
        ""
    };
    let server = Arc::new(Server {
        web,
        open: Mutex::new(BTreeMap::new()),
        capacity: connection_capacity(),
        scrapes: Arc::new(Semaphore::new(SCRAPE_THREADS)),
        landing: Bytes::from(landing_page(exporter.collectors)),
        exporter,
    });
    // The server runs until the process is stopped: returning at all is a failure.
    Err(runtime.block_on(async {
        let listener = match listen(addr) {
            Ok(l) => l,
            Err(e) => {
                return Failure::of(
                    "smcrun exporter",
                    Exit::Failed,
                    format!("cannot listen on {addr}: {e}"),
                );
            }
        };
        let scope = if addr.ip().is_loopback() {
            "this host only"
        } else {
            "reachable from other hosts"
        };
        eprintln!("smcrun exporter: serving {scheme}://{addr}/metrics ({scope}{auth})");
        accept_loop(listener, server).await;
        Failure::of("smcrun exporter", Exit::Failed, "stopped serving")
    }))
}

/// `--listen`'s value: ADDR:PORT, or `:PORT` for every IPv4 address (as node_exporter takes it).
fn listen_arg(s: &str) -> Result<SocketAddr, String> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    full.parse()
        .map_err(|_| format!("expected ADDR:PORT (127.0.0.1:9609, [::1]:9609) or :PORT, not {s:?}"))
}

/// A listening socket on `addr` with a backlog of `LISTEN_BACKLOG`.
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// `MAX_CONNECTIONS`, or fewer where RLIMIT_NOFILE would run out first.
fn connection_capacity() -> usize {
    use rustix::process::{getrlimit, Resource};
    // `None` is RLIM_INFINITY.
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let fds = usize::try_from(limit.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
    MAX_CONNECTIONS.min(fds).max(1)
}

/// What the HTTP server shares among its connections.
struct Server {
    exporter: Exporter,
    /// TLS and basic auth (`--web.config.file`).
    web: WebConfig,
    /// The open connections by number, oldest first.
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
    /// The most connections open at once.
    capacity: usize,
    /// One permit per scrape thread.
    scrapes: Arc<Semaphore>,
    /// The page at `/` ([`landing_page`]).
    landing: Bytes,
}

/// The content type of the landing page.
const HTML: &str = "text/html; charset=utf-8";

/// The content type of the short answers (404, 405, a failed scrape).
const PLAIN: &str = "text/plain; charset=utf-8";

/// The page at `/`, as node_exporter has one: what this is, its version, a link to the metrics
/// and the collectors on (nothing in it comes from a request).
fn landing_page(collectors: Collectors) -> String {
    let items: String = Collector::ALL
        .iter()
        .map(|c| {
            let state = if collectors.has(*c) { "on" } else { "off" };
            format!("<li><code>{}</code>: {state}</li>\n", c.name())
        })
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>smcrun exporter</title></head>\n\
         <body>\n<h1>smcrun exporter</h1>\n<p>Linux SMC metrics, smcrun {}.</p>\n\
         <p><a href=\"/metrics\">Metrics</a></p>\n<h2>Collectors</h2>\n<ul>\n{items}</ul>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// One open connection as the accept loop sees it.
#[derive(Default)]
struct Connection {
    /// Its request header has come: it is being answered, and not closed for a newer one.
    requested: AtomicBool,
    /// Told to close, to make room for a newer connection.
    evict: Notify,
}

impl Server {
    /// Room for connection `id`: none if every open connection is being answered; else the
    /// oldest one still waiting for its header is closed when the server is full.
    fn admit(&self, id: u64) -> Option<Arc<Connection>> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.len() >= self.capacity {
            let (&oldest, _) = open
                .iter()
                .find(|(_, c)| !c.requested.load(Ordering::Relaxed))?;
            if let Some(c) = open.remove(&oldest) {
                c.evict.notify_one();
            }
        }
        let conn = Arc::new(Connection::default());
        open.insert(id, Arc::clone(&conn));
        Some(conn)
    }

    /// Connection `id` has ended.
    fn leave(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// One scrape on a scrape thread, when one is free.
    async fn scrape(self: &Arc<Self>) -> Result<String, String> {
        let permit = Arc::clone(&self.scrapes).acquire_owned().await;
        let server = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            server.exporter.scrape()
        })
        .await
        .unwrap_or_else(|e| Err(format!("the scrape failed: {e}")))
    }

    /// Whether the request may be answered: no basic auth configured, or its user and password
    /// (checked on a scrape thread: a bcrypt is CPU work, not for the connections' thread).
    async fn authorized(self: &Arc<Self>, req: &Request<hyper::body::Incoming>) -> bool {
        if self.web.auth.is_none() {
            return true;
        }
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|h| h.as_bytes().to_vec());
        let permit = Arc::clone(&self.scrapes).acquire_owned().await;
        let server = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let auth = server.web.auth.as_ref();
            auth.is_some_and(|a| a.allows(header.as_deref()))
        })
        .await
        .unwrap_or(false)
    }

    /// Answer one HTTP request: with basic auth configured, 401 without a user's password; then
    /// GET /metrics is a scrape, / the landing page, anything else 404/405.
    async fn answer(
        self: &Arc<Self>,
        req: Request<hyper::body::Incoming>,
    ) -> Response<Full<Bytes>> {
        let get = matches!(*req.method(), Method::GET | Method::HEAD);
        let allowed = self.authorized(&req).await;
        let (status, text) = match (allowed, get, req.uri().path()) {
            (false, _, _) => (
                StatusCode::UNAUTHORIZED,
                "unauthorized: give the user and password of the web config's basic_auth_users\n"
                    .into(),
            ),
            (true, true, "/metrics") => match self.scrape().await {
                Ok(text) => {
                    let mut r = Response::new(Full::new(Bytes::from(text)));
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static(metrics::CONTENT_TYPE),
                    );
                    return r;
                }
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
            },
            (true, true, "/") => {
                let mut r = Response::new(Full::new(self.landing.clone()));
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(HTML));
                return r;
            }
            (true, true, _) => (
                StatusCode::NOT_FOUND,
                "not found; the metrics are at /metrics\n".into(),
            ),
            (true, false, _) => (StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into()),
        };
        let mut r = Response::new(Full::new(Bytes::from(text)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(PLAIN),
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static(web_config::REALM),
            );
        }
        r
    }
}

/// Accept connections for ever, each served by a task of its own on this thread.
async fn accept_loop(listener: tokio::net::TcpListener, server: Arc<Server>) {
    let mut said = false;
    for id in 0u64.. {
        let stream = loop {
            match listener.accept().await {
                Ok((stream, _)) => break stream,
                // Out of descriptors or memory, or a connection reset before it was taken: the
                // pending ones wait in the listen backlog meanwhile.
                Err(e) => {
                    if !said {
                        eprintln!("smcrun exporter: accepting a connection: {e} (retrying)");
                        said = true;
                    }
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            }
        };
        // Dropping the stream closes it: the server is full of connections being answered.
        if let Some(conn) = server.admit(id) {
            tokio::spawn(serve_connection(Arc::clone(&server), id, conn, stream));
        }
    }
}

/// Serve one connection: one request, within the header and connection timeouts, unless a newer
/// connection needs its room first.
async fn serve_connection(
    server: Arc<Server>,
    id: u64,
    conn: Arc<Connection>,
    stream: tokio::net::TcpStream,
) {
    let serving = async {
        let Some(tls) = &server.web.tls else {
            return http(&server, &conn, stream).await;
        };
        if !starts_tls(&stream).await {
            // Plain HTTP to a TLS port: said as Go's servers (node_exporter's) say it.
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut stream = stream;
            if stream.write_all(PLAIN_TO_TLS).await.is_ok() && stream.shutdown().await.is_ok() {
                // The request unread would make the close a reset, which can beat the answer to
                // the client: read it away (a second at most, a little of it).
                let mut sink = [0u8; 4096];
                let drain = async {
                    for _ in 0..16 {
                        if !matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
            }
            return;
        }
        if let Ok(stream) = tls.accept(stream).await {
            http(&server, &conn, stream).await;
        }
    };
    let header_late = async {
        tokio::time::sleep(HEADER_TIMEOUT).await;
        if conn.requested.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
    };
    // Whichever ends first ends the connection; a client that went away is its own business.
    tokio::select! {
        () = serving => {}
        () = header_late => {}
        () = conn.evict.notified() => {}
        () = tokio::time::sleep(CONNECTION_TIMEOUT) => {}
    }
    server.leave(id);
}

/// The answer to plain HTTP on a TLS port.
const PLAIN_TO_TLS: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
    Client sent an HTTP request to an HTTPS server.\n";

/// Whether a connection's first byte is a TLS handshake record's (22), not a letter of a plain
/// HTTP request.
async fn starts_tls(stream: &tokio::net::TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16)
}

/// HTTP/1 on `io` (TCP, or TLS over it): one request.
async fn http<S>(server: &Arc<Server>, conn: &Arc<Connection>, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let (server, conn) = (Arc::clone(server), Arc::clone(conn));
        hyper::service::service_fn(move |req| {
            conn.requested.store(true, Ordering::Relaxed);
            let server = Arc::clone(&server);
            async move { Ok::<_, Infallible>(server.answer(req).await) }
        })
    };
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_HEADER_BYTES)
        .header_read_timeout(None)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

fn textfile_loop(exporter: Exporter, dir: &Path, interval: f64, once: bool) -> Outcome {
    let dirfd = match open_dir(dir) {
        Ok(fd) => fd,
        Err(e) => {
            return Err(Failure::of(
                "smcrun exporter",
                Exit::Failed,
                format!("--textfile {}: {e}", dir.display()),
            ));
        }
    };
    if !once {
        eprintln!(
            "smcrun exporter: writing {} every {interval} s",
            dir.join(TEXTFILE).display()
        );
    }
    loop {
        let written = exporter
            .scrape()
            .and_then(|text| write_atomically(&dirfd, TEXTFILE, text.as_bytes()));
        if let Err(e) = written {
            exporter.errors.fetch_add(1, Ordering::Relaxed);
            let line = format!("cannot write {}: {e}", dir.join(TEXTFILE).display());
            if once {
                return Err(Failure::of("smcrun exporter", Exit::Failed, line));
            }
            eprintln!("smcrun exporter: {line}");
        }
        if once {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_secs_f64(interval));
    }
}

fn errno_text(e: rustix::io::Errno) -> String {
    std::io::Error::from(e).to_string()
}

/// The textfile directory, opened once: walked one component at a time from `/` (or the working
/// directory), each opened with O_NOFOLLOW, so that no spelling of a path through a symlink
/// (`LINK`, `LINK/`, `LINK/.`, `LINK/../x`, `x/LINK/y`) is followed.
pub(crate) fn open_dir(dir: &Path) -> Result<OwnedFd, String> {
    use rustix::fs::{open, openat, Mode, OFlags};
    use rustix::io::Errno;
    use std::path::Component;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let start = if dir.is_absolute() { "/" } else { "." };
    let mut fd = open(start, flags, Mode::empty()).map_err(errno_text)?;
    let mut walked = PathBuf::new();
    for c in dir.components() {
        walked.push(c);
        let name = match c {
            Component::RootDir | Component::CurDir => continue,
            Component::ParentDir => Path::new(".."),
            Component::Normal(name) => Path::new(name),
            Component::Prefix(_) => unreachable!("no prefixes on Unix"),
        };
        fd = match openat(&fd, name, flags, Mode::empty()) {
            Ok(next) => next,
            Err(Errno::NOTDIR | Errno::LOOP) => {
                return Err(format!(
                    "{} is not a directory (or is a symlink); give the collector's directory \
                     itself, by a path without symlinks",
                    walked.display()
                ))
            }
            Err(e) => return Err(format!("{}: {}", walked.display(), errno_text(e))),
        };
    }
    Ok(fd)
}

/// A name for the temporary file beside `name` that another user cannot foresee (and so cannot
/// plant): `.name.PID.RANDOM.tmp`, RANDOM being 64 bits from the kernel's random pool.
fn temporary_name(name: &str) -> String {
    use rustix::rand::{getrandom, GetRandomFlags};
    let mut random = [0u8; 8];
    let got = getrandom(&mut random, GetRandomFlags::empty());
    let random = if got == Ok(random.len()) {
        u64::from_ne_bytes(random)
    } else {
        // No random pool (a kernel before 3.17): the clock's nanoseconds, still hard to foresee.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    format!(".{name}.{}.{random:016x}.tmp", std::process::id())
}

/// Temporary names tried before a write gives up (each new and random, so only a directory
/// filling with other files makes a second one needed).
const TEMPORARY_TRIES: usize = 16;

/// Replace `dir/name` with `bytes` atomically: a new file (O_EXCL, never following anything
/// planted) with a random name (`temporary_name`), written and synced, then renamed over `name`
/// (a rename replaces a planted symlink, it does not follow it). Readers see the old file or the
/// new one, never a part. The file's mode is 0644.
pub fn write_atomically(dir: &OwnedFd, name: &str, bytes: &[u8]) -> Result<(), String> {
    write_atomically_mode(dir, name, bytes, 0o644)
}

/// [`write_atomically`] with the new file's mode.
pub fn write_atomically_mode(
    dir: &OwnedFd,
    name: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<(), String> {
    use rustix::fs::{openat, renameat, unlinkat, AtFlags, Mode, OFlags};
    use rustix::io::Errno;
    let mut tries = 1;
    let (tmp, fd) = loop {
        let tmp = temporary_name(name);
        match openat(
            dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(mode),
        ) {
            Ok(fd) => break (tmp, fd),
            Err(Errno::EXIST) if tries < TEMPORARY_TRIES => tries += 1,
            Err(e) => return Err(format!("creating {tmp}: {}", errno_text(e))),
        }
    };
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("writing {tmp}: {e}"))
        .and_then(|()| {
            renameat(dir, tmp.as_str(), dir, name)
                .map_err(|e| format!("renaming {tmp} to {name}: {}", errno_text(e)))
        });
    if written.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    written
}

#[cfg(test)]
mod tests {

    #[test]
    fn listen_takes_node_exporters_port_alone() {
        assert_eq!(
            listen_arg(":9609").unwrap(),
            "0.0.0.0:9609".parse().unwrap()
        );
        assert_eq!(
            listen_arg("[::1]:9609").unwrap(),
            "[::1]:9609".parse().unwrap()
        );
        assert!(listen_arg(":x").unwrap_err().contains(":PORT, not \":x\""));
        assert!(listen_arg("9609").is_err());
    }
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("smcrun-exp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn textfile_is_replaced_whole_and_leaves_no_temp_file() {
        let d = tmpdir("a");
        let fd = open_dir(&d).unwrap();
        write_atomically(&fd, TEXTFILE, b"smc_up 0\n").unwrap();
        write_atomically(&fd, TEXTFILE, b"smc_up 1\n").unwrap();
        assert_eq!(std::fs::read(d.join(TEXTFILE)).unwrap(), b"smc_up 1\n");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [TEXTFILE]);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Issue 19: names a counter would reach, planted (as symlinks, to be followed), neither stop
    /// the write nor are followed.
    #[test]
    fn planted_temp_names_are_skipped_not_followed() {
        let d = tmpdir("b");
        let target = d.join("victim");
        std::fs::write(&target, b"keep").unwrap();
        for n in 0..=TEMPORARY_TRIES {
            let planted = d.join(format!(".{TEXTFILE}.{}.{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&target, &planted).unwrap();
        }
        let fd = open_dir(&d).unwrap();
        for n in 0..3 {
            write_atomically(&fd, TEXTFILE, format!("smc_up {n}\n").as_bytes()).unwrap();
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read(d.join(TEXTFILE)).unwrap(), b"smc_up 2\n");
        assert_ne!(temporary_name(TEXTFILE), temporary_name(TEXTFILE));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Issue 19: `LINK/` and the like were followed where `LINK` was refused.
    #[test]
    fn the_textfile_directory_must_be_a_directory() {
        let d = tmpdir("c");
        std::fs::create_dir(d.join("sub")).unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        for spelling in [
            "link",
            "link/",
            "link/.",
            "link//",
            "sub/../link",
            "link/sub",
        ] {
            let err = open_dir(&d.join(spelling)).unwrap_err();
            assert!(err.contains("link is not a directory"), "{spelling}: {err}");
        }
        assert!(open_dir(&d.join("missing")).is_err());
        assert!(open_dir(&d.join("sub/../sub/.")).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_default_address_is_loopback() {
        let a: SocketAddr = DEFAULT_LISTEN.parse().unwrap();
        assert!(a.ip().is_loopback());
        assert!(![9879, 9315, 9101, 9100].contains(&a.port()));
    }
}
