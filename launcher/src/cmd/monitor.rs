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

use clap::Args;
use smcrun_kernel::smc_genl::SmcGenl;
use smcrun_kernel::sock_diag;
use smcrun_views::monitor::json::line_json;
use smcrun_views::monitor::text::{header, text};
use smcrun_views::monitor::{line, MonMode, Sample, Sock, View};

use smcrun_kernel::Error;

use crate::cmd::format;

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

/// Local time as "YYYY-MM-DD HH:MM:SS", the C library's (TZ, /etc/localtime): no crate in the
/// tree reads the local time zone safely.
#[allow(unsafe_code)]
fn now_text() -> String {
    // SAFETY: time(NULL) takes no pointer; all-zero `tm` is a valid value (integers and a null
    // tm_zone), and localtime_r writes only into it; strftime writes at most `buf.len()` bytes
    // into `buf` from a NUL-terminated format and returns how many. localtime_r reads the
    // environment (TZ), which no thread changes while the monitor runs.
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
    let view = a.view;
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
        if let Err(e) = format::emit_line(&header(view)) {
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
        let l = line(view, mode, &prev, &next, dt);
        let date = now_text();
        let shown = if a.json {
            serde_json::to_string(&line_json(mode, &date, a.interval, &l)).unwrap_or_default()
        } else {
            text(view, mode, &date, &l, a.raw)
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

    #[test]
    fn the_date_is_local_time_to_the_second() {
        let d = now_text();
        assert_eq!(d.len(), 19, "{d}");
        assert_eq!(&d[4..5], "-");
        assert_eq!(&d[13..14], ":");
    }
}
