//! `smcrun man DIR`: the man pages, smcrun(1) and one smcrun-COMMAND(1) per subcommand, with
//! every section an operator looks for: NAME, SYNOPSIS (with the arguments' names), DESCRIPTION,
//! OPTIONS, EXIT STATUS (from [`Exit::ALL`]), ENVIRONMENT (from the settings crate, where every
//! `SMCRUN_` variable is defined), FILES, EXAMPLES and SEE ALSO. clap_mangen renders the title,
//! name, options and subcommands from the command tree; the rest is written here. The Debian
//! package installs them gzipped (packaging/build-deb).

use crate::status::Exit;
use clap::{Arg, ArgAction, Command};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Text for roff: backslashes and hyphens escaped, a leading dot or quote neutralised.
fn roff(text: &str) -> String {
    let t = text.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Help text without markdown: `smcrun ps` becomes 'smcrun ps' (a man page shows backticks as
/// they are).
fn plain(text: &str) -> String {
    text.replace('`', "'")
}

fn plain_arg(a: Arg) -> Arg {
    let help = a.get_help().map(|h| plain(&h.to_string()));
    let long = a.get_long_help().map(|h| plain(&h.to_string()));
    let a = match help {
        Some(h) => a.help(h),
        None => a,
    };
    match long {
        Some(h) => a.long_help(h),
        None => a,
    }
}

/// The tree with its help texts free of markdown.
fn plain_tree(c: Command) -> Command {
    let about = c.get_about().map(|t| plain(&t.to_string()));
    let long_about = c.get_long_about().map(|t| plain(&t.to_string()));
    let after = c.get_after_help().map(|t| plain(&t.to_string()));
    let mut c = c.mut_args(plain_arg).mut_subcommands(plain_tree);
    if let Some(a) = about {
        c = c.about(a);
    }
    if let Some(a) = long_about {
        c = c.long_about(a);
    }
    if let Some(a) = after {
        c = c.after_help(a);
    }
    c
}

/// One argument in a synopsis: `[-j|--json]`, `[--mode MODE]`, `PID`, `[-- PROGRAM [ARGS]...]`.
fn synopsis_arg(a: &Arg) -> Option<String> {
    if a.is_hide_set() {
        return None;
    }
    let value = a
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| format!("\\fI{}\\fR", roff(n)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("\\fI{}\\fR", roff(&a.get_id().as_str().to_uppercase())));
    let many = matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|n| n.max_values() > 1);
    let dots = if many { "..." } else { "" };
    let text = if a.is_positional() {
        if a.is_last_set() {
            format!("\\fB\\-\\-\\fR {value}{dots}")
        } else {
            format!("{value}{dots}")
        }
    } else {
        let names: Vec<String> = a
            .get_short()
            .map(|s| format!("\\fB\\-{s}\\fR"))
            .into_iter()
            .chain(a.get_long().map(|l| format!("\\fB\\-\\-{}\\fR", roff(l))))
            .collect();
        let names = names.join("|");
        match a.get_action() {
            ArgAction::Set | ArgAction::Append if a.is_require_equals_set() => {
                format!("{names}[={value}]")
            }
            ArgAction::Set | ArgAction::Append => format!("{names} {value}{dots}"),
            _ => names,
        }
    };
    Some(if a.is_required_set() {
        text
    } else {
        format!("[{text}]")
    })
}

/// The synopsis lines of `c` (called `words`, e.g. `smcrun ueid`): one per leaf command.
fn synopsis_lines(c: &Command, words: &str, out: &mut Vec<String>) {
    let shown: Vec<&Command> = c
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    let args: Vec<String> = c.get_arguments().filter_map(synopsis_arg).collect();
    if shown.is_empty() || !args.is_empty() {
        let mut line = format!("\\fB{}\\fR", roff(words));
        for a in &args {
            line.push(' ');
            line.push_str(a);
        }
        out.push(line);
    }
    for s in shown {
        synopsis_lines(s, &format!("{words} {}", s.get_name()), out);
    }
}

/// Variables smcrun reads that are not its own (every `SMCRUN_` one is the settings crate's): the
/// man pages' ENVIRONMENT and the manual's list them after those.
pub(crate) const OTHER_VARIABLES: [(&str, &str); 2] = [
    ("XDG_RUNTIME_DIR", "where a user's programs write their reports ($XDG_RUNTIME_DIR/smcrun/; root: /run/smcrun/; else /tmp/smcrun-UID/), followed only to the user's own private directory"),
    ("SYSTEMD_UNIT_PATH", "the unit directories enable and disable use, first one first (as systemd reads it)"),
];

/// The files smcrun reads and writes: the man pages' FILES and the manual's.
pub(crate) const FILES: [(&str, &str); 8] = [
    ("/usr/lib/smcrun/libsmcrun_shim.so", "the shim smcrun preloads (the Debian package's), found in this order: $SMCRUN_SHIM, next to smcrun, ../lib/smcrun/ beside it, /usr/local/lib/smcrun, /usr/lib/smcrun, /usr/lib/<multiarch>/smcrun (x86_64, aarch64, s390x), /usr/lib64/smcrun, /usr/local/lib, /usr/lib"),
    ("/run/smcrun/, $XDG_RUNTIME_DIR/smcrun/, /tmp/smcrun-UID/", "the run directory (0700): one report per program under smcrun (PID.json, 0600), read by ps, why and the exporter"),
    ("/etc/systemd/system/UNIT.service.d/smcrun.conf", "the drop-in smcrun enable writes"),
    ("/sys/fs/bpf/smcrun/", "BPF mode's pinned cgroup attachments (smcrun attach)"),
    ("/sys/fs/bpf/smcrun-handshake/", "the handshake policy's maps, one directory per network namespace (smcrun handshake)"),
    ("/run/smcrun-agent/state.json", "the agent's record of every SMC socket and process (directory 0700, file 0600, root's), read by ps --all, why and ss -p"),
    ("/run/smcrun-agent/summary.json", "the agent's bounded summary (totals, per cgroup and program, open sockets by role and mode; 0600, root's), all the exporter reads"),
    ("DIR/smcrun.prom", "the exporter's node_exporter textfile (exporter --textfile DIR), replaced whole"),
];

/// Examples per page: (command line, what it does). Every page has at least one.
fn examples(page: &str) -> Vec<(&'static str, &'static str)> {
    match page {
        "smcrun" => vec![
            ("smcrun redis-server --port 6379", "run redis-server with its sockets over SMC where the kernel and the peer can, TCP otherwise"),
            ("smcrun --mode inet --policy 'smc port 6379; tcp' redis-benchmark -p 6379", "only connections to port 6379 try SMC (IPPROTO_SMC sockets)"),
            ("smcrun --bpf -- ./static-server", "BPF mode: the kernel's socket() hook reaches a static program too"),
            ("smcrun -- ps", "run a program whose name is also a subcommand"),
        ],
        "smcrun-demo" => vec![("smcrun demo --connections 4 --bytes 1m", "four echo connections, each socket's mode and why")],
        "smcrun-doctor" => vec![
            ("smcrun doctor", "check this host for SMC"),
            ("smcrun doctor --bpf -- redis-server", "also BPF mode, and whether the preload reaches redis-server"),
        ],
        "smcrun-ps" => vec![("smcrun ps --all", "programs under smcrun, and every process with SMC sockets")],
        "smcrun-why" => vec![("smcrun why 4242", "process 4242's recent connections, each with its mode and why")],
        "smcrun-ss" => vec![("smcrun ss -a -p", "every SMC socket with its owning processes")],
        "smcrun-stats" => vec![("smcrun stats -j | jq .smcr.summary", "the SMC-R summary as JSON")],
        "smcrun-exporter" => vec![
            ("smcrun exporter --listen :9609", "serve /metrics on every address, port 9609"),
            ("smcrun exporter --textfile /var/lib/node_exporter/textfile", "write a node_exporter textfile instead"),
            ("smcrun exporter --listen :9609 --web.config.file /etc/smcrun/web.yml", "HTTPS and basic auth, by node_exporter's web config file (tls_server_config, basic_auth_users)"),
            ("smcrun exporter --no-collector.sockets", "without the SMC socket census, most of a scrape's cost on hosts with very many sockets"),
        ],
        "smcrun-metrics" => vec![("smcrun metrics --collector.disable-defaults --collector.counters", "only SMC's counters, once")],
        "smcrun-enable" => vec![("smcrun enable redis-server --policy 'smc port 6379; tcp'", "run the redis-server service under smcrun (then systemctl daemon-reload and restart it)")],
        "smcrun-disable" => vec![("smcrun disable redis-server", "remove smcrun enable's drop-in")],
        "smcrun-policy" => vec![
            ("smcrun policy check --policy 'smc port 6379; tcp'", "check a policy and print it canonical, one rule a line"),
            ("smcrun policy check --policy 'smc port 6379; tcp' --program redis-benchmark --connect 10.0.0.5:6379", "which rule a connect matches"),
        ],
        "smcrun-attach" => vec![
            ("smcrun attach --cgroup /sys/fs/cgroup/system.slice/redis.service", "every new TCP socket of the cgroup is made SMC"),
            ("smcrun attach --netns /run/netns/pod-a", "every new TCP socket made in that network namespace is made SMC"),
        ],
        "smcrun-handshake" => vec![
            ("smcrun handshake load --policy 'smc port 6379; tcp'", "the kernel offers SMC only to connections to port 6379, for every program of this network namespace (Linux 6.19+)"),
            ("smcrun handshake status", "what is selected, the policy and the kernel's decisions"),
        ],
        "smcrun-setup" => vec![("smcrun setup soft-roce --netdev eth0", "a soft-RoCE device on eth0, for SMC-R without RDMA hardware")],
        "smcrun-ueid" => vec![("smcrun ueid add SMCRUN-EXAMPLE", "set a user EID (SMC-Rv2 needs one on both hosts)")],
        "smcrun-pnet" => vec![("smcrun pnet show -j", "the PNET table as JSON")],
        "smcrun-completions" => vec![("smcrun completions bash > /etc/bash_completion.d/smcrun", "install the bash completion")],
        "smcrun-man" => vec![("smcrun man /usr/local/share/man/man1", "write these pages")],
        _ => vec![],
    }
}

fn section(out: &mut String, title: &str) {
    out.push_str(&format!(".SH \"{title}\"\n"));
}

fn tagged(out: &mut String, tag: &str, text: &str) {
    out.push_str(&format!(".TP\n{tag}\n{}\n", roff(text)));
}

/// The sections clap_mangen does not write.
fn own_sections(c: &Command, page: &str, words: &str, siblings: &[String]) -> String {
    let mut s = String::new();
    section(&mut s, "EXIT STATUS");
    if page == "smcrun" {
        tagged(
            &mut s,
            "\\fIN\\fR",
            "running a program: the program's own status (smcrun execs it and is gone)",
        );
    }
    for e in Exit::ALL {
        tagged(&mut s, &format!("\\fB{}\\fR", e.code()), e.meaning());
    }
    section(&mut s, "ENVIRONMENT");
    for v in smcrun_settings::SHIM_SETTINGS {
        let alias = v
            .alias
            .map(|a| format!(" (smc_run's {a})"))
            .unwrap_or_default();
        tagged(
            &mut s,
            &format!("\\fB{}\\fR", roff(v.var)),
            &format!(
                "{}{alias}. Expects {}; default {}. Option: --{}.",
                v.help, v.expected, v.default, v.key
            ),
        );
    }
    for v in smcrun_settings::LAUNCHER_VARIABLES {
        tagged(&mut s, &format!("\\fB{}\\fR", roff(v.var)), v.help);
    }
    for (var, what) in OTHER_VARIABLES {
        tagged(&mut s, &format!("\\fB{}\\fR", roff(var)), what);
    }
    section(&mut s, "FILES");
    for (path, what) in FILES {
        tagged(&mut s, &format!("\\fI{}\\fR", roff(path)), what);
    }
    section(&mut s, "EXAMPLES");
    let ex = examples(page);
    if ex.is_empty() {
        let json = c.get_arguments().any(|a| a.get_id() == "json");
        let line = if json {
            format!("{words} -j")
        } else {
            format!("{words} --help")
        };
        let what = if json {
            "the same as JSON (pretty-printed; an error object on failure)"
        } else {
            "every option, with what it does"
        };
        tagged(&mut s, &format!("\\fB{}\\fR", roff(&line)), what);
    }
    for (line, what) in ex {
        tagged(&mut s, &format!("\\fB{}\\fR", roff(line)), what);
    }
    section(&mut s, "SEE ALSO");
    let mut also: Vec<String> = siblings
        .iter()
        .filter(|p| p.as_str() != page)
        .map(|p| format!("\\fB{}\\fR(1)", roff(p)))
        .collect();
    also.extend(
        [
            "\\fBsmc_run\\fR(8)",
            "\\fBsmcss\\fR(8)",
            "\\fBsmcr\\fR(8)",
            "\\fBsmcd\\fR(8)",
        ]
        .map(String::from),
    );
    s.push_str(&also.join(", "));
    s.push('\n');
    s
}

/// One page: `page` is its name (`smcrun-doctor`), `words` the command line (`smcrun doctor`).
fn page_text(
    c: &Command,
    page: &str,
    words: &str,
    siblings: &[String],
) -> std::io::Result<Vec<u8>> {
    let name: &'static str = Box::leak(page.to_string().into_boxed_str());
    let cmd = c.clone().name(name).bin_name(name);
    let man = clap_mangen::Man::new(cmd.clone())
        .section("1")
        .manual("smcrun");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    let mut lines = Vec::new();
    if page == "smcrun" {
        lines.push(
            "\\fBsmcrun\\fR [\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]"
                .to_string(),
        );
        lines.push("\\fBsmcrun\\fR \\fISUBCOMMAND\\fR [\\fIARGS\\fR...]".to_string());
    } else {
        synopsis_lines(c, words, &mut lines);
    }
    out.extend_from_slice(b".SH SYNOPSIS\n");
    out.extend_from_slice(lines.join("\n.br\n").as_bytes());
    out.push(b'\n');
    out.extend_from_slice(b".SH DESCRIPTION\n");
    let about = c
        .get_long_about()
        .or(c.get_about())
        .map(|t| t.to_string())
        .unwrap_or_default();
    for para in about.split("\n\n") {
        writeln!(out, "{}\n.PP", roff(para.trim()))?;
    }
    man.render_options_section(&mut out)?;
    if c.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    out.extend_from_slice(own_sections(c, page, words, siblings).as_bytes());
    writeln!(out, ".SH VERSION\nsmcrun {}", env!("CARGO_PKG_VERSION"))?;
    Ok(out)
}

/// Writes smcrun.1 and smcrun-COMMAND.1 for every shown subcommand into `dir`; returns the paths.
pub fn write_pages(cli: &Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cli = plain_tree(crate::completions::tree(cli));
    cli.build();
    std::fs::create_dir_all(dir)?;
    let subs: Vec<&Command> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    let mut pages: Vec<String> = vec!["smcrun".into()];
    pages.extend(subs.iter().map(|s| format!("smcrun-{}", s.get_name())));
    let mut written = Vec::new();
    let mut one = |c: &Command, page: &str, words: &str| -> std::io::Result<()> {
        let path = dir.join(format!("{page}.1"));
        std::fs::write(&path, page_text(c, page, words, &pages)?)?;
        written.push(path);
        Ok(())
    };
    one(&cli, "smcrun", "smcrun")?;
    for s in &subs {
        one(
            s,
            &format!("smcrun-{}", s.get_name()),
            &format!("smcrun {}", s.get_name()),
        )?;
    }
    Ok(written)
}
