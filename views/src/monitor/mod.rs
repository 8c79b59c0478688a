//! `smcrun monitor`'s view: smc_monitor_ex's figures (rates, connections, buffer memory) from two
//! samples of the kernel's counters and sockets, as [`json`] (one object a line) and [`text`].

use std::time::Instant;

use smcrun_kernel::reasons::state;
use smcrun_kernel::smc_genl::{Stats, TechStats};
use smcrun_kernel::sock_diag::{self, Mode, SmcSocket};

pub mod json;
pub mod text;

/// What the monitor shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum View {
    /// Transfer rates (bytes and requests per second).
    #[cfg_attr(feature = "clap", value(alias = "s"))]
    Speed,
    /// Connection counts.
    #[cfg_attr(feature = "clap", value(alias = "c"))]
    Connection,
    /// Ring buffer memory in use.
    #[cfg_attr(feature = "clap", value(alias = "m"))]
    Memory,
    /// Rates, connections and memory.
    #[cfg_attr(feature = "clap", value(alias = "b"))]
    Base,
}

/// Which connections count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// Its name in a line: smc, smcr, smcd, fallback, all.
    pub fn name(self) -> &'static str {
        match self {
            MonMode::Smc => "smc",
            MonMode::Smcr => "smcr",
            MonMode::Smcd => "smcd",
            MonMode::Fallback => "fallback",
            MonMode::All => "all",
        }
    }

    /// Whether a socket of mode `m` counts.
    pub fn counts(self, m: Mode) -> bool {
        match self {
            MonMode::Smc => matches!(m, Mode::SmcR | Mode::SmcD),
            MonMode::Smcr => m == Mode::SmcR,
            MonMode::Smcd => m == Mode::SmcD,
            MonMode::Fallback => m == Mode::Fallback,
            MonMode::All => true,
        }
    }
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
    /// What the monitor keeps of a socket sock_diag reported.
    pub fn of(s: &SmcSocket) -> Sock {
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
pub fn connected(s: &Sock) -> bool {
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

/// Counter growth per second (0 for no time).
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

#[cfg(test)]
mod tests {
    use super::json::line_json;
    use super::text::{columns, header, text};
    use super::*;
    use smcrun_kernel::smc_genl::parse_stats;
    use smcrun_kernel::sock_diag;

    fn fixture(phase: &str, name: &str) -> Vec<u8> {
        crate::fixtures::raw(phase, name)
    }

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
}
