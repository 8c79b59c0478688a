//! `smcrun monitor speed|connection|memory|base [-i SEC] [-m MODE] [-r] [--count N] [--json]`:
//! smc_monitor_ex's live lines, one per interval, until interrupted or N lines were printed.
//!
//! - speed: Rx Rate, Rx Rps, Tx Rate, Tx Rps: the growth of the kernel's byte and request counters
//!   (GET_STATS) between two samples, per second of the time really elapsed.
//! - connection: #Conn: SMC sockets with a connection (not listening, not yet connected, not
//!   closed) in sock_diag, of the mode asked for (smc = SMC-R + SMC-D, fallback = TCP).
//! - memory: Rx Bufs, Tx Bufs: the receive and send ring buffers in use, from the kernel's usage
//!   counters where it has them (Linux 6.13+), else summed over the sockets' buffers (sock_diag).
//! - base: all of them.
//!
//! `--json` prints one JSON object per line (its rules in docs/src/guide/tools.md, "JSON of the views").

use crate::status::{Exit, Failure, Outcome};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use smcrun_kernel::reasons::state;
use smcrun_kernel::smc_genl::{SmcGenl, Stats, TechStats};
use smcrun_kernel::sock_diag::{self, Mode, SmcSocket};
use smcrun_views::json::monitor::{Buffers, MonitorLine};

use smcrun_kernel::Error;

use crate::cmd::format::{self, bytes, rate};

/// What the monitor shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum View {
    /// Transfer rates (bytes and requests per second).
    #[value(alias = "s")]
    Speed,
    /// Connection counts.
    #[value(alias = "c")]
    Connection,
    /// Ring buffer memory in use.
    #[value(alias = "m")]
    Memory,
    /// Rates, connections and memory.
    #[value(alias = "b")]
    Base,
}

/// Which connections count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MonMode {
    /// SMC-R and SMC-D.
    Smc,
    /// SMC-R only.
    Smcr,
    /// SMC-D only.
    Smcd,
    /// Fallen back to TCP (connection only).
    Fallback,
    /// Every SMC socket, fallen back or not (connection only).
    All,
}

impl MonMode {
    fn name(self) -> &'static str {
        match self {
            MonMode::Smc => "smc",
            MonMode::Smcr => "smcr",
            MonMode::Smcd => "smcd",
            MonMode::Fallback => "fallback",
            MonMode::All => "all",
        }
    }

    /// Whether a socket of mode `m` counts.
    fn counts(self, m: Mode) -> bool {
        match self {
            MonMode::Smc => matches!(m, Mode::SmcR | Mode::SmcD),
            MonMode::Smcr => m == Mode::SmcR,
            MonMode::Smcd => m == Mode::SmcD,
            MonMode::Fallback => m == Mode::Fallback,
            MonMode::All => true,
        }
    }
}

/// `smcrun monitor` arguments.
#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// speed (s), connection (c), memory (m) or base (b).
    #[arg(value_enum)]
    view: View,
    /// Seconds between lines.
    #[arg(short = 'i', long = "interval", default_value = "1", value_parser = format::seconds)]
    interval: f64,
    /// smc, smcr or smcd (default smc); connection also takes fallback and all (its default).
    #[arg(short = 'm', long = "mode", value_enum)]
    mode: Option<MonMode>,
    /// Plain bytes and counts per second, without unit scaling.
    #[arg(short = 'r', long = "raw")]
    raw: bool,
    /// Stop after N lines (default: until interrupted).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// One JSON object per line.
    #[arg(short = 'j', long)]
    json: bool,
}

/// One sample of what the view needs.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// When it was taken.
    pub at: Option<Instant>,
    /// GET_STATS, for rates and the kernel's buffer usage.
    pub stats: Option<Stats>,
    /// sock_diag, for connections and (on kernels without usage counters) buffers.
    pub sockets: Option<Vec<Sock>>,
}

/// The counters of `mode` (smc: SMC-R and SMC-D added).
fn counters(s: &Stats, mode: MonMode) -> (u64, u64, u64, u64, Option<u64>, Option<u64>) {
    let pick = |t: &TechStats| {
        (
            t.rx_bytes,
            t.rx_count,
            t.tx_bytes,
            t.tx_count,
            t.rx_buffer_usage,
            t.tx_buffer_usage,
        )
    };
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) | (None, x) => x,
    };
    match mode {
        MonMode::Smcr => pick(&s.smcr),
        MonMode::Smcd => pick(&s.smcd),
        _ => {
            let (r, d) = (pick(&s.smcr), pick(&s.smcd));
            (
                r.0 + d.0,
                r.1 + d.1,
                r.2 + d.2,
                r.3 + d.3,
                add(r.4, d.4),
                add(r.5, d.5),
            )
        }
    }
}

/// What the monitor needs of one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sock {
    /// sock_diag state.
    pub state: u8,
    /// SMC-R, SMC-D or fallback.
    pub mode: Mode,
    /// (receive buffer, send buffer) bytes, when the buffers were asked for.
    pub bufs: Option<(u32, u32)>,
}

impl Sock {
    fn of(s: &SmcSocket) -> Sock {
        Sock {
            state: s.state,
            mode: s.mode,
            // an SMC-D DMB also holds its CDC header, which the kernel's usage counter counts
            bufs: s.conninfo.as_ref().map(|c| match s.mode {
                Mode::SmcD => (c.rmbe_size + sock_diag::SMCD_DMB_HEADER, c.sndbuf_size),
                _ => (c.rmbe_size, c.sndbuf_size),
            }),
        }
    }
}

/// Sockets with a connection: not listening, not yet connected, not closed.
fn connected(s: &Sock) -> bool {
    !matches!(s.state, state::LISTEN | state::INIT | state::CLOSED)
}

/// One line's figures, from two samples `dt` seconds apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Line {
    /// Bytes received per second.
    pub rx_rate: Option<f64>,
    /// Receive requests per second.
    pub rx_rps: Option<f64>,
    /// Bytes sent per second.
    pub tx_rate: Option<f64>,
    /// Send requests per second.
    pub tx_rps: Option<f64>,
    /// Connections.
    pub conns: Option<u64>,
    /// Receive buffers in use (bytes).
    pub rx_bufs: Option<u64>,
    /// Send buffers in use (bytes).
    pub tx_bufs: Option<u64>,
    /// "kernel" (usage counters) or "sockets" (summed from sock_diag).
    pub bufs_source: Option<&'static str>,
}

fn per_sec(a: u64, b: u64, dt: f64) -> f64 {
    if dt <= 0.0 {
        0.0
    } else {
        b.saturating_sub(a) as f64 / dt
    }
}

/// The figures of `view` for `mode` between samples `a` and `b`.
pub fn line(view: View, mode: MonMode, a: &Sample, b: &Sample, dt: f64) -> Line {
    let mut l = Line::default();
    if matches!(view, View::Speed | View::Base) {
        if let (Some(sa), Some(sb)) = (&a.stats, &b.stats) {
            let (ca, cb) = (counters(sa, mode), counters(sb, mode));
            l.rx_rate = Some(per_sec(ca.0, cb.0, dt));
            l.rx_rps = Some(per_sec(ca.1, cb.1, dt));
            l.tx_rate = Some(per_sec(ca.2, cb.2, dt));
            l.tx_rps = Some(per_sec(ca.3, cb.3, dt));
        }
    }
    if matches!(view, View::Connection | View::Base) {
        if let Some(socks) = &b.sockets {
            l.conns = Some(
                socks
                    .iter()
                    .filter(|s| connected(s) && mode.counts(s.mode))
                    .count() as u64,
            );
        }
    }
    if matches!(view, View::Memory | View::Base) {
        let kernel = b.stats.as_ref().map(|s| counters(s, mode));
        match kernel {
            Some((_, _, _, _, Some(rx), Some(tx))) => {
                l.rx_bufs = Some(rx);
                l.tx_bufs = Some(tx);
                l.bufs_source = Some("kernel");
            }
            _ => {
                if let Some(socks) = &b.sockets {
                    let mut rx = 0u64;
                    let mut tx = 0u64;
                    for s in socks.iter().filter(|s| connected(s) && mode.counts(s.mode)) {
                        if let Some((r, t)) = s.bufs {
                            rx += u64::from(r);
                            tx += u64::from(t);
                        }
                    }
                    l.rx_bufs = Some(rx);
                    l.tx_bufs = Some(tx);
                    l.bufs_source = Some("sockets");
                }
            }
        }
    }
    l
}

/// The column names of `view`.
pub fn columns(view: View) -> Vec<&'static str> {
    let mut c = vec!["Date", "Mode"];
    if matches!(view, View::Speed | View::Base) {
        c.extend(["Rx Rate", "Rx Rps", "Tx Rate", "Tx Rps"]);
    }
    if matches!(view, View::Connection | View::Base) {
        c.push("#Conn");
    }
    if matches!(view, View::Memory | View::Base) {
        c.extend(["Rx Bufs", "Tx Bufs"]);
    }
    c
}

const DATE_W: usize = 19;
const MODE_W: usize = 8;
const COL_W: usize = 13;

/// The header line.
pub fn header(view: View) -> String {
    let cols = columns(view);
    let mut out = format!("{:<DATE_W$}  {:<MODE_W$}", cols[0], cols[1]);
    for c in &cols[2..] {
        out.push_str(&format!("  {c:>COL_W$}"));
    }
    out
}

/// One text line.
pub fn text(view: View, mode: MonMode, date: &str, l: &Line, raw: bool) -> String {
    let mut cells: Vec<String> = Vec::new();
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    if matches!(view, View::Speed | View::Base) {
        cells.push(or_dash(l.rx_rate.map(|v| bytes(v, raw, "/s"))));
        cells.push(or_dash(l.rx_rps.map(|v| rate(v, raw))));
        cells.push(or_dash(l.tx_rate.map(|v| bytes(v, raw, "/s"))));
        cells.push(or_dash(l.tx_rps.map(|v| rate(v, raw))));
    }
    if matches!(view, View::Connection | View::Base) {
        cells.push(or_dash(l.conns.map(|v| v.to_string())));
    }
    if matches!(view, View::Memory | View::Base) {
        cells.push(or_dash(l.rx_bufs.map(|v| bytes(v as f64, raw, ""))));
        cells.push(or_dash(l.tx_bufs.map(|v| bytes(v as f64, raw, ""))));
    }
    let mut out = format!("{date:<DATE_W$}  {:<MODE_W$}", mode.name());
    for c in cells {
        out.push_str(&format!("  {c:>COL_W$}"));
    }
    out
}

/// One JSON line.
pub fn line_json<'a>(mode: MonMode, date: &'a str, interval: f64, l: &Line) -> MonitorLine<'a> {
    let bufs = match (l.rx_bufs, l.tx_bufs) {
        (Some(rx), Some(tx)) => Some(Buffers {
            rx_bufs_bytes: rx,
            tx_bufs_bytes: tx,
            bufs_source: l.bufs_source,
        }),
        _ => None,
    };
    MonitorLine {
        date,
        mode: mode.name(),
        interval_seconds: interval,
        rx_rate_bytes_per_sec: l.rx_rate,
        rx_requests_per_sec: l.rx_rps,
        tx_rate_bytes_per_sec: l.tx_rate,
        tx_requests_per_sec: l.tx_rps,
        conns: l.conns,
        bufs,
    }
}

/// Local time as "YYYY-MM-DD HH:MM:SS".
fn now_text() -> String {
    // SAFETY: time/localtime_r/strftime with a zeroed tm and a buffer of the size passed.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return t.to_string();
        }
        let mut buf = [0u8; 32];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%Y-%m-%d %H:%M:%S".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// What a view needs from the kernel.
struct Needs {
    stats: bool,
    sockets: bool,
    conninfo: bool,
}

fn take(client: &SmcGenl, needs: &Needs) -> Result<Sample, Error> {
    let stats = if needs.stats {
        Some(client.stats()?)
    } else {
        None
    };
    // Buffers come from the sockets only where the kernel has no usage counters.
    let usage_known = stats
        .as_ref()
        .is_some_and(|s| s.smcr.rx_buffer_usage.is_some());
    let conninfo = needs.conninfo && !usage_known;
    // The raw dump without address filling: the monitor counts, it does not print addresses;
    // and without the buffers, only states and modes (a tick with 10,000 sockets parses them all).
    let sockets = if conninfo {
        let raw = sock_diag::dump_raw(sock_diag::EXT_CONNINFO)?;
        Some(sock_diag::parse(&raw)?.iter().map(Sock::of).collect())
    } else if needs.sockets {
        let raw = sock_diag::dump_raw(0)?;
        let states = sock_diag::parse_states(&raw)?;
        Some(
            states
                .into_iter()
                .map(|(state, mode)| Sock {
                    state,
                    mode,
                    bufs: None,
                })
                .collect(),
        )
    } else {
        None
    };
    Ok(Sample {
        at: Some(Instant::now()),
        stats,
        sockets,
    })
}

/// Run `smcrun monitor`.
pub fn monitor(a: &MonitorArgs) -> Outcome {
    let mode = match (a.view, a.mode) {
        (View::Connection, m) => m.unwrap_or(MonMode::All),
        (_, None) => MonMode::Smc,
        (_, Some(m @ (MonMode::Fallback | MonMode::All))) => {
            return Err(Failure::of(
                "smcrun monitor",
                Exit::Usage,
                format!(
                    "-m {} counts connections only; speed, memory and base take smc, smcr or smcd",
                    m.name()
                ),
            ));
        }
        (_, Some(m)) => m,
    };
    let needs = Needs {
        stats: matches!(a.view, View::Speed | View::Memory | View::Base),
        sockets: matches!(a.view, View::Connection | View::Base),
        conninfo: matches!(a.view, View::Memory | View::Base),
    };
    let client = match SmcGenl::open() {
        Ok(c) => c,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let mut prev = match take(&client, &needs) {
        Ok(s) => s,
        Err(e) => return Err(Failure::refused(&e)),
    };
    if !a.json {
        if let Err(e) = format::emit_line(&header(a.view)) {
            return format::stdout_result(Err(e));
        }
    }
    let mut printed = 0u64;
    while a.count.is_none_or(|n| printed < n) {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let next = match take(&client, &needs) {
            Ok(s) => s,
            Err(e) => return Err(Failure::refused(&e)),
        };
        let dt = match (prev.at, next.at) {
            (Some(p), Some(n)) => n.duration_since(p).as_secs_f64(),
            _ => a.interval,
        };
        let l = line(a.view, mode, &prev, &next, dt);
        let date = now_text();
        let shown = if a.json {
            serde_json::to_string(&line_json(mode, &date, a.interval, &l)).unwrap_or_default()
        } else {
            text(a.view, mode, &date, &l, a.raw)
        };
        if let Err(e) = format::emit_line(&shown) {
            return format::stdout_result(Err(e));
        }
        prev = next;
        printed += 1;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::smc_genl::parse_stats;

    use crate::cmd::format::fixture;

    fn sample(phase: &str) -> Sample {
        Sample {
            at: None,
            stats: Some(parse_stats(&fixture(phase, "smc_GET_STATS")).unwrap()),
            sockets: Some(
                sock_diag::parse(&fixture(phase, "sock_diag_ext1"))
                    .unwrap()
                    .iter()
                    .map(Sock::of)
                    .collect(),
            ),
        }
    }

    #[test]
    fn rates_are_counter_growth_per_second() {
        let a = sample("smcr");
        let mut b = a.clone();
        if let Some(s) = b.stats.as_mut() {
            s.smcr.rx_bytes += 2 * 1_900_000_000;
            s.smcr.rx_count += 2 * 21_660;
        }
        let l = line(View::Speed, MonMode::Smcr, &a, &b, 2.0);
        assert_eq!(l.rx_rate, Some(1_900_000_000.0));
        assert_eq!(l.rx_rps, Some(21_660.0));
        assert_eq!(l.tx_rate, Some(0.0));
        let t = text(View::Speed, MonMode::Smcr, "2025-02-21 14:01:48", &l, false);
        assert!(t.contains("1.77 GB/s") && t.contains("21.66 K/s"), "{t}");
        assert!(t.contains("0 B/s") && t.contains("0 /s"), "{t}");
        let raw = text(View::Speed, MonMode::Smcr, "d", &l, true);
        assert!(
            raw.contains("1900000000 B/s") && raw.contains("21660 /s"),
            "{raw}"
        );
        // smc = SMC-R + SMC-D.
        assert_eq!(
            line(View::Speed, MonMode::Smc, &a, &b, 2.0).rx_rate,
            l.rx_rate
        );
        // SMC-D saw nothing.
        assert_eq!(
            line(View::Speed, MonMode::Smcd, &a, &b, 2.0).rx_rate,
            Some(0.0)
        );
    }

    #[test]
    fn captured_connections_and_buffers() {
        // smcr/: 2 idle redis-benchmark connections, both ends under smcrun: 4 SMC-R sockets.
        let s = sample("smcr");
        let l = line(View::Base, MonMode::Smcr, &s, &s, 1.0);
        assert_eq!(l.conns, Some(4));
        assert_eq!(
            line(View::Connection, MonMode::Fallback, &s, &s, 1.0).conns,
            Some(0)
        );
        // Debian's 6.12 has the kernel's usage counters.
        assert_eq!(l.bufs_source, Some("kernel"));
        let usage = s.stats.as_ref().unwrap().smcr.rx_buffer_usage;
        assert_eq!(l.rx_bufs, usage);
        // A kernel without them: the open sockets' buffers are summed, and come to the same.
        let socks = s.sockets.as_ref().unwrap();
        let want: u64 = socks
            .iter()
            .filter(|x| connected(x) && x.mode == Mode::SmcR)
            .map(|x| u64::from(x.bufs.unwrap().0))
            .sum();
        assert_eq!(Some(want), usage);
        let mut old = s.clone();
        if let Some(st) = old.stats.as_mut() {
            st.smcr.rx_buffer_usage = None;
            st.smcr.tx_buffer_usage = None;
        }
        let lo = line(View::Memory, MonMode::Smcr, &old, &old, 1.0);
        assert_eq!(lo.bufs_source, Some("sockets"));
        assert_eq!(lo.rx_bufs, Some(want));
        let j = serde_json::to_value(line_json(MonMode::Smcr, "d", 1.0, &l)).unwrap();
        assert_eq!(j["conns"], 4);
        assert_eq!(j["rx_bufs_bytes"], want);
        assert_eq!(j["bufs_source"], "kernel");
        assert_eq!(j["rx_rate_bytes_per_sec"], 0.0);
        // fallback/: the open connections fell back.
        let f = sample("fallback");
        let lf = line(View::Connection, MonMode::Fallback, &f, &f, 1.0);
        assert!(lf.conns.unwrap() >= 3, "{lf:?}");
        assert_eq!(
            line(View::Connection, MonMode::Smc, &f, &f, 1.0).conns,
            Some(0)
        );
    }

    #[test]
    fn captured_smcd_connections_and_buffers() {
        // smcd/: the same scenario on the SMC-D kernel: 4 SMC-D sockets over loopback-ism.
        let s = sample("smcd");
        let l = line(View::Base, MonMode::Smcd, &s, &s, 1.0);
        assert_eq!(l.conns, Some(4));
        assert_eq!(line(View::Base, MonMode::Smcr, &s, &s, 1.0).conns, Some(0));
        assert_eq!(line(View::Base, MonMode::Smc, &s, &s, 1.0).conns, Some(4));
        let usage = s.stats.as_ref().unwrap().smcd.rx_buffer_usage;
        assert_eq!((l.bufs_source, l.rx_bufs), (Some("kernel"), usage));
        assert!(usage.unwrap() > 0);
        // the DMBs of the open sockets add up to the kernel's usage counter
        let want: u64 = s
            .sockets
            .as_ref()
            .unwrap()
            .iter()
            .filter(|x| connected(x) && x.mode == Mode::SmcD)
            .map(|x| u64::from(x.bufs.unwrap().0))
            .sum();
        assert_eq!(Some(want), usage);
    }

    #[test]
    fn states_alone_match_the_full_parse() {
        for phase in ["smcr", "fallback", "smcd", "smcd-fallback"] {
            for ext in ["sock_diag_ext0", "sock_diag_ext15"] {
                let raw = fixture(phase, ext);
                let full: Vec<(u8, Mode)> = sock_diag::parse(&raw)
                    .unwrap()
                    .iter()
                    .map(|s| (s.state, s.mode))
                    .collect();
                assert!(!full.is_empty());
                assert_eq!(
                    sock_diag::parse_states(&raw).unwrap(),
                    full,
                    "{phase}/{ext}"
                );
            }
        }
        // A message too short for struct smc_diag_msg is an error, not a panic.
        let mut short = smcrun_kernel::nl::frame(sock_diag::SOCK_DIAG_BY_FAMILY, 2, 1, &[0; 10]);
        short.extend(smcrun_kernel::nl::frame(3, 2, 1, &0i32.to_ne_bytes()));
        assert!(sock_diag::parse_states(&short).is_err());
    }

    #[test]
    fn header_and_line_have_the_same_columns() {
        let h = header(View::Base);
        assert!(h.starts_with("Date") && h.ends_with("Tx Bufs"), "{h}");
        for c in ["Rx Rate", "Rx Rps", "Tx Rate", "Tx Rps", "#Conn", "Rx Bufs"] {
            assert!(h.contains(c), "{h}");
        }
        let l = text(
            View::Base,
            MonMode::Smc,
            "2025-01-06 15:17:23",
            &Line::default(),
            false,
        );
        assert_eq!(l.chars().count(), h.chars().count(), "{h}\n{l}");
        assert_eq!(columns(View::Connection), vec!["Date", "Mode", "#Conn"]);
    }

    #[test]
    fn the_date_is_local_time_to_the_second() {
        let d = now_text();
        assert_eq!(d.len(), 19, "{d}");
        assert_eq!(&d[4..5], "-");
        assert_eq!(&d[13..14], ":");
    }
}
