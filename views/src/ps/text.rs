//! `smcrun ps`' and `smcrun why`'s text: the columns of a report (settings, policy, top reason),
//! `why`'s page for one report, and the agent's counts and losses.

use std::fmt::Write as _;

use smcrun_report::text::safe;
use smcrun_report::{count, ProcessReport};

/// What the agent lost, as a clause (empty when nothing).
pub fn overflow_text(o: &crate::agent_state::Overflow) -> String {
    let lost = o.live_full + o.done_full;
    let mut parts = Vec::new();
    if lost > 0 {
        parts.push(format!("{lost} sockets not recorded (maps full)"));
    }
    if o.inflight_full > 0 {
        parts.push(format!("{} sends/receives not counted", o.inflight_full));
    }
    if let Some(n) = o.probes_missed.filter(|n| *n > 0) {
        parts.push(format!("{n} probe runs missed (records or bytes)"));
    }
    if o.processes_dropped > 0 {
        parts.push(format!("{} processes' counts dropped", o.processes_dropped));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; LOST: {}", parts.join(", "))
    }
}

/// One side's counts in a column: `N: R/D/T/?` (SMC-R, SMC-D, TCP, mode not seen).
pub fn kernel_counts(c: &crate::agent_state::Counts) -> String {
    format!(
        "{}: {}/{}/{}/{}",
        c.total(),
        c.smcr,
        c.smcd,
        c.tcp,
        c.not_seen
    )
}

/// The agent's text for one process (`why`).
pub fn kernel_text(p: &crate::agent_state::Process) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "kernel (smcrun agent), since it started: pid {} {} ({})",
        p.pid,
        safe(&p.comm),
        safe(p.exe.as_deref().unwrap_or("?"))
    );
    for (role, c) in [("client", &p.sides.client), ("server", &p.sides.server)] {
        if c.total() == 0 {
            continue;
        }
        let reasons: Vec<String> = c
            .reasons
            .iter()
            .map(|(code, n)| {
                let r = code
                    .strip_prefix("0x")
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .map(smcrun_kernel::reasons::describe);
                format!(
                    "{code} {} ({n})",
                    r.map(|r| r.name.into_owned()).unwrap_or_else(|| "?".into())
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  {role}: {}, {} SMC-R, {} SMC-D, {} TCP, {} mode not seen; {} bytes sent, {} received{}",
            count(c.total(), "connection"),
            c.smcr,
            c.smcd,
            c.tcp,
            c.not_seen,
            c.tx_bytes,
            c.rx_bytes,
            if reasons.is_empty() {
                String::new()
            } else {
                format!("; TCP because {}", reasons.join(", "))
            }
        );
    }
    s
}

/// The most frequent reason for TCP, cut to the column's width (`why` has it whole).
pub fn top_reason(r: &ProcessReport) -> String {
    const WIDTH: usize = 40;
    let Some(x) = r.reasons.first() else {
        return "-".into();
    };
    let count = format!(" ({})", x.count);
    let label = safe(&x.label()).into_owned();
    let room = WIDTH.saturating_sub(count.chars().count());
    if label.chars().count() <= room {
        return label + &count;
    }
    let cut: String = label.chars().take(room.saturating_sub(1)).collect();
    format!("{}…{count}", cut.trim_end())
}

/// The mode and fallback a program runs with, `auto/tcp` (`--mode`/`--fallback`); an older
/// smcrun's report has the mode alone.
pub fn settings_text(r: &ProcessReport) -> String {
    match r.fallback.as_str() {
        "" => safe(&r.mode).into_owned(),
        f => format!("{}/{}", safe(&r.mode), safe(f)),
    }
}

/// The policy a program runs with, `-` for none (every TCP socket is made SMC).
pub fn policy_text(r: &ProcessReport) -> String {
    if r.policy.is_empty() {
        "-".into()
    } else {
        safe(&r.policy).into_owned()
    }
}

/// `smcrun why`'s text for one report: the summary, the settings, the recent connections with
/// why each is not SMC, and the endpoints; `state` and `user` as `ps` shows them.
pub fn why_text(r: &ProcessReport, state: &str, user: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({state}, user {}, {})",
        r.summary_line().trim_start_matches("smcrun: "),
        safe(user),
        safe(&r.exe)
    );
    let _ = writeln!(
        s,
        "sockets: {} converted to SMC, {} TCP at socket(), {} untouched",
        r.sockets.converted, r.sockets.tcp_at_creation, r.sockets.untouched,
    );
    let _ = writeln!(
        s,
        "runs with: mode {}, fallback {}, policy {}",
        safe(&r.mode),
        if r.fallback.is_empty() {
            "(not reported)".into()
        } else {
            safe(&r.fallback)
        },
        if r.policy.is_empty() {
            "none (every TCP socket is made SMC)".to_string()
        } else {
            format!("\"{}\"", safe(&r.policy))
        }
    );
    if r.detail_dropped > 0 || r.errors > 0 {
        let _ = writeln!(
            s,
            "missing: {} without details below (counted above), {}{}",
            count(r.detail_dropped, "connection"),
            count(r.errors, "error"),
            r.last_error
                .as_deref()
                .map(|e| format!(" (last: {})", safe(e)))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<7} {:<22} {:<22} {:<6} why",
        "role", "local", "remote", "mode"
    );
    for c in &r.recent {
        let why = match &c.reason {
            Some(x) => {
                let peer = c
                    .peer_diagnosis
                    .as_deref()
                    .map(|p| format!(" (peer: {p})"))
                    .unwrap_or_default();
                safe(&format!("{}{peer}", x.label())).into_owned()
            }
            None => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<7} {:<22} {:<22} {:<6} {}",
            safe(&c.role),
            safe(c.local.as_deref().unwrap_or("-")),
            safe(c.remote.as_deref().unwrap_or("-")),
            safe(&c.mode),
            why
        );
    }
    if r.recent_dropped > 0 {
        let _ = writeln!(
            s,
            "(and {} older, counted above but not listed)",
            count(r.recent_dropped, "connection")
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<40} {:<7} {:>6} {:>6} {:>6} {:>6}",
        "endpoint", "role", "SMC-R", "SMC-D", "SMC-?", "TCP"
    );
    for e in &r.endpoints {
        let _ = writeln!(
            s,
            "{:<40} {:<7} {:>6} {:>6} {:>6} {:>6}",
            safe(&e.remote),
            safe(&e.role),
            e.smc_r,
            e.smc_d,
            e.smc_unknown,
            e.tcp
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_report::ProcessReport;
    use smcrun_report::{Connection, ConnectionCounts, ReasonCount};

    #[test]
    fn why_text_has_no_stray_space_and_names_unknown_addresses() {
        let r = ProcessReport {
            pid: 7,
            program: "redis-server".into(),
            exe: "/usr/bin/redis-check-rdb".into(),
            connections: ConnectionCounts {
                total: 1,
                tcp: 1,
                ..Default::default()
            },
            recent: vec![Connection {
                role: "server".into(),
                local: Some("127.0.0.1:6379".into()),
                remote: None,
                mode: "TCP".into(),
                reason: Some(ReasonCount {
                    code: None,
                    errno: None,
                    text: "TCP by policy".into(),
                    count: 1,
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = why_text(&r, "running", "nobody");
        assert!(
            t.starts_with("pid 7 redis-server: 1 connection, 0 SMC-R, 1 TCP (running, user nobody, /usr/bin/redis-check-rdb)"),
            "{t}"
        );
        let row = t.lines().find(|l| l.starts_with("server ")).unwrap();
        assert!(row.ends_with(" TCP    TCP by policy"), "{row:?}");
        assert!(
            row.contains("127.0.0.1:6379") && row.contains(" - "),
            "{row:?}"
        );
    }
}
