//! BPF mode's text: the line `smcrun attach` and `smcrun detach` print, `smcrun attach --list`'s
//! table of scopes, `smcrun policy check --bpf`'s verdicts, and the lines of the scopes `smcrun
//! ps` shows under "BPF mode".

use std::path::Path;

use smcrun_bpf::maps::ProgramCount;
use smcrun_bpf::pinned::{Attached, Detached, Kind};
use smcrun_bpf::rules::Analysis;
use smcrun_bpf::scopes::{Scopes, TreeInfo};
use smcrun_report::count;
use smcrun_report::text::safe;

use super::honour;

/// A policy as the attach lines name it (none: every TCP socket).
fn policy_label(p: &str) -> String {
    if p.is_empty() {
        "none (every TCP socket)".to_string()
    } else {
        p.to_string()
    }
}

/// `smcrun attach`'s line: the `kind` scope at `path`, attached as `a` says, with `policy`'s text.
pub fn attached(kind: Kind, path: &Path, a: &Attached, policy: &str) -> String {
    if a.was_attached {
        return format!(
            "{}: already attached; policy now: {}",
            path.display(),
            policy_label(policy)
        );
    }
    let what = match kind {
        Kind::Cgroup => format!("cgroup id {}", a.id),
        Kind::Netns => format!("network namespace net:[{}]", a.id),
    };
    format!(
        "{}: attached ({what}): its new TCP sockets are SMC sockets; policy: {}",
        path.display(),
        policy_label(policy)
    )
}

/// `smcrun detach`'s line: the scope at `path` as it was, and whether anything is attached still.
pub fn detached(path: &Path, d: &Detached) -> String {
    format!(
        "{}: detached after {} made SMC, {} kept TCP by the policy{}",
        path.display(),
        count(d.scope.counters.converted, "socket"),
        d.scope.counters.kept_tcp,
        if d.unloaded {
            "; nothing is attached any more"
        } else {
            ""
        }
    )
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SSZ`.
fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The first five programs of a scope with how many sockets each made SMC (`-` for none).
fn programs_text(p: &[ProgramCount]) -> String {
    if p.is_empty() {
        return "-".to_string();
    }
    p.iter()
        .take(5)
        .map(|c| format!("{} {}", c.program, c.converted))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `smcrun attach --list`'s table: every scope, since when (a tree's from `tree_since`), its
/// counts, policy and programs; one line when nothing is attached.
pub fn list(all: &Scopes, tree_since: impl Fn(&TreeInfo) -> Option<u64>) -> Vec<String> {
    if all.cgroups.is_empty() && all.netns.is_empty() && all.trees.is_empty() {
        return vec!["nothing is attached".to_string()];
    }
    let mut out = vec![format!(
        "{:<48} {:<21} {:>9} {:>8}  {:<24} PROGRAMS",
        "SCOPE", "SINCE", "CONVERTED", "KEPT-TCP", "POLICY"
    )];
    for s in all.cgroups.iter().chain(&all.netns) {
        let what = match s.kind {
            Kind::Cgroup => "cgroup",
            Kind::Netns => "netns",
        };
        out.push(format!(
            "{:<48} {:<21} {:>9} {:>8}  {:<24} {}",
            format!("{what} {}", s.path.display()),
            utc(s.since_unix),
            s.counters.converted,
            s.counters.kept_tcp,
            if s.policy.is_empty() { "-" } else { &s.policy },
            programs_text(&s.programs)
        ));
    }
    for t in &all.trees {
        let who = match t.processes.first() {
            Some(p) => format!(
                "tree of pid {p} ({})",
                match t.processes.len() {
                    1 => "1 process".to_string(),
                    n => format!("{n} processes"),
                }
            ),
            None => "tree (no process left)".to_string(),
        };
        out.push(format!(
            "{:<48} {:<21} {:>9} {:>8}  {:<24} {}",
            who,
            tree_since(t).map(utc).unwrap_or_else(|| "?".into()),
            t.counters.converted,
            t.counters.kept_tcp,
            "-",
            programs_text(&t.programs)
        ));
    }
    out
}

/// `smcrun policy check --bpf`'s lines: each rule's verdict, then whether BPF mode honours the
/// policy analysed as `a`.
pub fn policy_check(a: &Analysis) -> Vec<String> {
    let n = a.verdicts.len();
    let mut out: Vec<String> = a
        .verdicts
        .iter()
        .map(|v| {
            let (k, why) = honour(&v.honour);
            format!("rule {} of {n}: {}: {k}: {why}", v.position, v.text)
        })
        .collect();
    out.push(if let Some(kernel) = &a.kernel {
        let k = kernel.rules.len();
        format!(
            "BPF mode honours this policy ({k} program pattern{} in the kernel)",
            if k == 1 { "" } else { "s" }
        )
    } else if a.impossible().next().is_some() {
        "BPF mode cannot honour this policy: --bpf and attach refuse it".to_string()
    } else {
        "BPF mode alone cannot honour this policy: its address, port or role rules need the preload (smcrun --policy without --bpf); --bpf and attach refuse it".to_string()
    });
    out
}

/// The scopes as `smcrun ps` shows them under "BPF mode", one line each (none when there are
/// none).
pub fn scope_lines(s: &Scopes) -> Vec<String> {
    let mut out = Vec::new();
    for c in s.cgroups.iter().chain(&s.netns) {
        let (kind, id) = match c.kind {
            Kind::Cgroup => ("cgroup", String::new()),
            Kind::Netns => ("netns", format!(" (net:[{}])", c.id)),
        };
        out.push(format!(
            "{kind} {}{id}: {} made SMC, {} kept TCP{}",
            safe(&c.path.display().to_string()),
            count(c.counters.converted, "socket"),
            c.counters.kept_tcp,
            if c.policy.is_empty() {
                String::new()
            } else {
                format!(" (policy: {})", safe(&c.policy))
            }
        ));
    }
    for t in &s.trees {
        out.push(format!(
            "smcrun --bpf tree (program {}, pids {:?}): {} made SMC, {} kept TCP",
            t.program_id,
            t.processes,
            count(t.counters.converted, "socket"),
            t.counters.kept_tcp
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::json::tests::scopes;
    use smcrun_bpf::rules;
    use smcrun_policy::Policy;

    #[test]
    fn attach_and_detach_lines() {
        let (c, _) = scopes();
        let mut a = Attached {
            id: 4242,
            slot: 3,
            was_attached: false,
            loaded: true,
        };
        assert_eq!(
            attached(Kind::Cgroup, &c[0].path, &a, ""),
            "/sys/fs/cgroup/smcrun-a: attached (cgroup id 4242): its new TCP sockets are SMC sockets; policy: none (every TCP socket)"
        );
        a.was_attached = true;
        assert_eq!(
            attached(Kind::Netns, &c[2].path, &a, &c[0].policy),
            "/run/netns/pod-a: already attached; policy now: tcp program sechod; smc"
        );
        let d = Detached {
            scope: c[0].clone(),
            unloaded: true,
        };
        assert_eq!(
            detached(&c[0].path, &d),
            "/sys/fs/cgroup/smcrun-a: detached after 3 sockets made SMC, 1 kept TCP by the policy; nothing is attached any more"
        );
    }

    #[test]
    fn the_list_has_a_row_per_scope() {
        let (c, t) = scopes();
        assert_eq!(list(&Scopes::default(), |_| None), ["nothing is attached"]);
        let all = Scopes {
            cgroups: c[..2].to_vec(),
            netns: c[2..].to_vec(),
            trees: vec![t],
        };
        let l = list(&all, |_| None);
        assert_eq!(l.len(), 5, "{l:#?}");
        assert!(l[0].starts_with("SCOPE "), "{l:#?}");
        assert!(
            l[1].starts_with("cgroup /sys/fs/cgroup/smcrun-a "),
            "{l:#?}"
        );
        assert!(l[1].contains(" 2026-11-30 00:53:20Z "), "{l:#?}");
        assert!(l[1].ends_with(" redis-server 2, memtier 1"), "{l:#?}");
        assert!(l[3].starts_with("netns /run/netns/pod-a "), "{l:#?}");
        assert!(l[4].starts_with("tree of pid 12 (2 processes) "), "{l:#?}");
        assert!(l[4].contains(" ? "), "{l:#?}");
        let lines = scope_lines(&all);
        assert_eq!(
            lines[0],
            "cgroup /sys/fs/cgroup/smcrun-a: 3 sockets made SMC, 1 kept TCP (policy: tcp program sechod; smc)"
        );
        assert_eq!(
            lines[3],
            "smcrun --bpf tree (program 99, pids [12, 13]): 5 sockets made SMC, 0 kept TCP"
        );
    }

    #[test]
    fn the_policy_check_ends_with_the_verdict() {
        let check = |text: &str| {
            let p: Policy = text.parse().unwrap();
            policy_check(&rules::analyse(&p))
        };
        let l = check("tcp program redis-*; smc");
        assert!(l[0].starts_with("rule 1 of 2: "), "{l:#?}");
        assert!(
            l.last()
                .unwrap()
                .starts_with("BPF mode honours this policy ("),
            "{l:#?}"
        );
        let l = check("tcp port 6379; tcp program /opt/*; smc");
        assert!(
            l.last().unwrap().contains("cannot honour this policy"),
            "{l:#?}"
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_796_000_000), "2026-11-30 00:53:20Z");
    }
}
