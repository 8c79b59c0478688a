//! The manual's reference pages (`docs/src/reference/`), made from the definitions they describe,
//! so that they cannot drift from the code: the commands and their options (the clap tree), the
//! environment variables (the settings crate, and the man pages' other variables), the exit
//! statuses ([`Exit::ALL`]), doctor's checks (`smcrun_views::doctor::ROWS` and BPF mode's
//! prerequisites), the metric families (what the exporter's code makes of the real
//! kernel's captures), the JSON keys (the views' golden files, which the views' tests hold equal to
//! what the code prints) and the files (the man pages' FILES).
//!
//! The test below fails when a committed page differs from what the code makes now, and names the
//! command that writes them again: `UPDATE_DOCS=1 cargo test -p smcrun reference`. It also checks
//! that the README's list of tools names every subcommand.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use serde_json::Value;

use crate::status::Exit;

/// The command that writes the pages again.
const UPDATE: &str = "UPDATE_DOCS=1 cargo test -p smcrun reference";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn header(title: &str, source: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated from {source} by `{UPDATE}`: edit the code, not this file. -->\n\n"
    )
}

/// Text for a markdown table cell or list item: one line, `|` escaped, and outside code spans
/// `<` and `>` too (`/usr/lib/<multiarch>` is no HTML tag).
fn cell(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.split('`')
        .enumerate()
        .map(|(i, part)| {
            let part = part.replace('|', "\\|");
            if i % 2 == 0 {
                part.replace('<', "&lt;").replace('>', "&gt;")
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// A two-column table: its head, then one row per (name, shown as code; text).
fn table<'a>(out: &mut String, head: [&str; 2], rows: impl IntoIterator<Item = (String, &'a str)>) {
    writeln!(out, "| {} | {} |\n|---|---|", head[0], head[1]).unwrap();
    for (name, text) in rows {
        writeln!(out, "| `{name}` | {} |", cell(text)).unwrap();
    }
}

fn commands() -> String {
    let mut tree = crate::completions::tree(&crate::Cli::command());
    tree.build();
    let mut out = header(
        "Commands",
        "the command line's definition (launcher/src/main.rs and each command's arguments)",
    );
    out.push_str("`smcrun --help`, `smcrun COMMAND --help` and the man pages (`man smcrun`, `man smcrun-COMMAND`) say the same.\n");
    fn walk(c: &clap::Command, words: &str, out: &mut String) {
        let about = c.get_long_about().or(c.get_about()).map(|a| a.to_string());
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        write!(out, "## `{words}`\n\n").unwrap();
        if let Some(a) = about {
            out.push_str(&cell(&a));
            out.push_str("\n\n");
        }
        let args: Vec<&clap::Arg> = c
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            .collect();
        for a in &args {
            let values = a
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
            let takes = a.get_num_args().is_some_and(|n| n.takes_values());
            let name = if a.is_positional() {
                if a.is_last_set() {
                    format!("-- {values}")
                } else {
                    values
                }
            } else {
                let mut n: Vec<String> =
                    a.get_short().map(|s| format!("-{s}")).into_iter().collect();
                n.extend(a.get_long().map(|l| format!("--{l}")));
                let n = n.join(", ");
                match (takes, a.is_require_equals_set()) {
                    (true, true) => format!("{n}[={values}]"),
                    (true, false) => format!("{n} {values}"),
                    _ => n,
                }
            };
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let possible: Vec<String> = a
                .get_possible_values()
                .iter()
                .filter(|p| !p.is_hide_set())
                .map(|p| p.get_name().to_string())
                .collect();
            let mut line = format!("- `{name}`: {}", cell(&help));
            if !possible.is_empty() && takes {
                write!(line, " (one of: {})", possible.join(", ")).unwrap();
            }
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect();
            if !defaults.is_empty() && takes {
                write!(line, " (default: {})", defaults.join(" ")).unwrap();
            }
            out.push_str(&line);
            out.push('\n');
        }
        for s in c
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            walk(s, &format!("{words} {}", s.get_name()), out);
        }
    }
    walk(&tree, "smcrun", &mut out);
    out
}

fn environment() -> String {
    let mut out = header(
        "Environment variables",
        "settings/src/lib.rs (`SHIM_SETTINGS`, `LAUNCHER_VARIABLES`) and launcher/src/man.rs (`OTHER_VARIABLES`)",
    );
    out.push_str("The shim's settings: `smcrun` writes them from its options and config file, and a program started with `LD_PRELOAD` alone reads them too. A bad value gets one warning line naming the variable, the value and what is expected, and the default is used; the program keeps running. smc_run's names are read when the `SMCRUN_` name is unset.\n\n");
    out.push_str("| variable | smc_run's name | option and config key | expects | default | what |\n|---|---|---|---|---|---|\n");
    for s in smcrun_settings::SHIM_SETTINGS {
        writeln!(
            out,
            "| `{}` | {} | `--{}` | {} | {} | {} |",
            s.var,
            s.alias.map_or("".to_string(), |a| format!("`{a}`")),
            s.key,
            cell(s.expected),
            cell(s.default),
            cell(s.help)
        )
        .unwrap();
    }
    out.push_str("\nRead by `smcrun` itself:\n\n");
    let launcher = smcrun_settings::LAUNCHER_VARIABLES
        .iter()
        .map(|v| (v.var.to_string(), v.help));
    let other = crate::man::OTHER_VARIABLES
        .iter()
        .map(|(v, what)| (v.to_string(), *what));
    table(&mut out, ["variable", "what"], launcher.chain(other));
    out
}

fn exit_statuses() -> String {
    let mut out = header("Exit statuses", "launcher/src/exit.rs (`Exit::ALL`)");
    out.push_str("Running a program, smcrun execs it and is gone: the status is the program's own. smcrun's own statuses:\n\n");
    let rows = Exit::ALL
        .iter()
        .map(|e| (e.code().to_string(), e.meaning()));
    table(&mut out, ["status", "meaning"], rows);
    out
}

fn doctor_checks() -> String {
    let mut out = header(
        "Doctor's checks",
        "views/src/doctor/mod.rs (`ROWS`) and bpf/src/prereq.rs",
    );
    out.push_str("One row per check, in the order `smcrun doctor` prints them (see [Doctor](../guide/doctor.md)).\n\n");
    let rows = smcrun_views::doctor::ROWS
        .iter()
        .map(|(id, what)| (id.to_string(), *what));
    table(&mut out, ["check", "looks at"], rows);
    for c in smcrun_bpf::prereq::check().checks {
        let scope = match c.needed {
            smcrun_bpf::prereq::Needed::Always => "",
            smcrun_bpf::prereq::Needed::Attach => " (`smcrun attach` only)",
            smcrun_bpf::prereq::Needed::Cgroup => " (cgroup scopes only: `smcrun attach --cgroup`)",
        };
        writeln!(
            out,
            "| `bpf:{}` | with `--bpf`: {}{scope} |",
            c.id,
            cell(c.what)
        )
        .unwrap();
    }
    out
}

/// A snapshot that gives every metric family: the real kernel's captures (SMC-R, SMC-D, fallbacks) with
/// a program under smcrun, BPF mode's two kinds of scope, the agent and a sysctl added.
/// Each family as (name, type, help, labels in the order first seen with the values seen).
fn metric_families() -> Vec<Family> {
    use smcrun_bpf::pinned::{Attachment, Kind};
    use smcrun_bpf::scopes::{Scopes, TreeInfo};
    let attachment = |kind, path: &str| Attachment {
        kind,
        path: path.into(),
        id: 1,
        key: 1,
        since_unix: 1,
        policy: String::new(),
        counters: Default::default(),
        programs: Vec::new(),
    };
    use smcrun_views::agent_state::{Counts, Group, Live, Modes, Sides, Summary};
    use smcrun_views::snapshot::{replay, Part, Processes, Sockets};
    let mut all = Vec::new();
    for phase in ["smcr", "smcd", "fallback"] {
        let mut s = replay(&repo().join("kernel/tests/fixtures").join(phase));
        let mut r = smcrun_report::ProcessReport {
            pid: 1,
            program: "redis-server".into(),
            ..Default::default()
        };
        r.connections.total = 1;
        r.connections.smc_r = 1;
        s.processes = Part::Read(Processes {
            running: vec![r],
            unreadable: 1,
        });
        s.sysctls = vec![("wmem".into(), "65536".into())];
        // The captured rxe device does not answer for its limits; a real one does.
        if let Part::Read(d) = &mut s.rdma {
            for d in d.iter_mut() {
                d.limits = Some(smcrun_kernel::uverbs::Limits {
                    max_qp: 4,
                    max_cq: 16384,
                    max_mr: 5,
                    max_pd: 32764,
                    max_srq: 0,
                });
            }
        }
        s.bpf = Part::Read(Scopes {
            cgroups: vec![attachment(Kind::Cgroup, "/sys/fs/cgroup/a")],
            netns: vec![attachment(Kind::Netns, "/run/netns/a")],
            trees: vec![TreeInfo {
                program_id: 1,
                loaded_ns_since_boot: 1,
                processes: vec![1],
                counters: Default::default(),
                programs: Vec::new(),
            }],
        });
        let mut client = Counts {
            smcr: 1,
            ..Counts::default()
        };
        client.reasons.insert("0x03010000".into(), 1);
        let sides = Sides {
            client,
            server: Counts::default(),
        };
        s.agent = Part::Read(Summary {
            attached: true,
            cgroups: vec![Group {
                name: "/a".into(),
                sides,
            }],
            ..Summary::default()
        });
        // The sockets collector as it is while the agent is attached: its count, no dump.
        let mut from_agent = s.clone();
        from_agent.sockets = Part::Read(Sockets::Agent(Live {
            listen: Modes {
                undecided: 1,
                ..Modes::default()
            },
            ..Live::default()
        }));
        let fams = smcrun_views::metrics::families(&s, &Default::default())
            .into_iter()
            .chain(smcrun_views::metrics::families(
                &from_agent,
                &Default::default(),
            ));
        for f in fams {
            let mut fam = Family {
                name: f.name().to_string(),
                kind: format!("{:?}", f.get_field_type()).to_lowercase(),
                help: f.help().to_string(),
                labels: Vec::new(),
            };
            for m in f.get_metric() {
                for l in m.get_label() {
                    fam.add(l.name(), l.value());
                }
            }
            all.push(fam);
        }
    }
    all
}

/// The bounds of the agent's series, from the agent's own constants.
fn agent_cardinality() -> String {
    use smcrun_views::agent_state::{MAX_GROUPS, OTHER};
    let names = 2 * (MAX_GROUPS + 1);
    format!(
        "The agent's series (`smcrun_agent_*`, with `smcrun agent` running) are bounded whatever the traffic: \
         `name` is one of at most {MAX_GROUPS} cgroups (`scope=\"cgroup\"`, the cgroup v2 path) and {MAX_GROUPS} \
         program names (`scope=\"program\"`), the rest counted under `{OTHER}`, so at most {names} names; \
         `smcrun_agent_connections_total` has at most {} series (name x 2 roles x 4 modes), \
         `smcrun_agent_bytes_total` {} (name x 2 roles x 2 directions), `smcrun_agent_fallbacks_total` \
         {} per fallback reason code the kernel gave (its codes are a closed set), `smcrun_agent_lost_total` one per kind of loss \
         and `smcrun_agent_sockets` 12 (3 roles x 4 modes). While the agent is attached and its record of \
         this network namespace's open sockets is complete, the sockets collector serves \
         `smcrun_agent_sockets` from it and dumps nothing, so there is no `smc_sockets` (the agent does \
         not know a socket's state); otherwise `smc_sockets` from smc_diag, as without the agent.\n\n",
        names * 2 * 4,
        names * 2 * 2,
        names * 2,
    )
}

fn metrics() -> String {
    let mut out = header(
        "Metrics",
        "views/src/metrics.rs (the families the exporter makes of the real kernel's captures)",
    );
    out.push_str("Every family `smcrun exporter` and `smcrun metrics` serve (see [the exporter](../guide/exporter.md)). Counters end in `_total`. A label with a few words for values lists the values the sample scrape gave. `technology` is `smcr` or `smcd`, `direction` `rx` or `tx`, `role` `client` or `server`; `device` and `port` are the RDMA device and port, as the RDMA exporters (node_exporter's infiniband collector) name them, so their series join. A part the kernel does not have gives no series (never zeros that look like measurements).\n\n");
    out.push_str(&agent_cardinality());
    out.push_str("| metric | type | labels | help |\n|---|---|---|---|\n");
    let mut families: Vec<Family> = Vec::new();
    for f in metric_families() {
        match families.iter_mut().find(|x| x.name == f.name) {
            Some(x) => {
                for (l, values) in f.labels {
                    for v in values {
                        x.add(&l, &v);
                    }
                }
            }
            None => families.push(f),
        }
    }
    for f in &families {
        let labels: Vec<String> = f
            .labels
            .iter()
            .map(|(l, values)| {
                // A closed set of words (a mode, a collector, a scope's kind) is worth listing;
                // numbers, addresses and names of this capture's devices are not.
                let words = values.iter().all(|v| {
                    v.len() <= 16 && v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                });
                if words && values.len() <= 8 && values.len() > 1 {
                    let vs: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
                    format!("`{l}` ({})", vs.join(", "))
                } else {
                    format!("`{l}`")
                }
            })
            .collect();
        writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            f.name,
            f.kind,
            labels.join(", "),
            cell(&f.help)
        )
        .unwrap();
    }
    out
}

/// One metric family of the sample scrape, with each label's values as seen.
struct Family {
    name: String,
    kind: String,
    help: String,
    labels: Vec<(String, Vec<String>)>,
}

impl Family {
    fn add(&mut self, label: &str, value: &str) {
        let i = match self.labels.iter().position(|(l, _)| l == label) {
            Some(i) => i,
            None => {
                self.labels.push((label.to_string(), Vec::new()));
                self.labels.len() - 1
            }
        };
        if !self.labels[i].1.iter().any(|v| v == value) {
            self.labels[i].1.push(value.to_string());
        }
    }
}

/// The family names views/src/metrics.rs makes (a name alone on its line, as every call to
/// `counter` and `gauge` there passes it), for the check that the sample snapshot shows them all.
fn family_names_in_the_source() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("views/src/metrics.rs")).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap();
    code.lines()
        .filter_map(|l| {
            let n = l.trim().strip_prefix('"')?.strip_suffix("\",")?;
            ((n.starts_with("smc_") || n.starts_with("smcrun_"))
                && n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
            .then(|| n.to_string())
        })
        .collect()
}

/// Which views' golden files show which command's JSON.
const JSON_VIEWS: [(&str, &str); 13] = [
    ("ss --json", "ss-"),
    ("stats --json", "stats-"),
    ("linkgroup --json", "linkgroup-"),
    ("link --json", "link-"),
    ("device --json", "device-"),
    ("info --json", "info-"),
    ("rdma --json", "rdma-"),
    ("doctor --json", "doctor-"),
    ("attach --json", "bpf-attach"),
    ("detach --json", "bpf-detach"),
    ("attach --list --json", "bpf-list"),
    ("policy check --bpf --json", "bpf-policy-"),
    ("ps --all --json: bpf_scopes", "ps-bpf-scopes"),
];

#[derive(Default)]
struct Key {
    types: Vec<&'static str>,
    examples: Vec<String>,
}

fn walk_json(v: &Value, path: &str, keys: &mut BTreeMap<String, Key>, order: &mut Vec<String>) {
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    if !path.is_empty() {
        let k = keys.entry(path.to_string()).or_insert_with(|| {
            order.push(path.to_string());
            Key::default()
        });
        if !k.types.contains(&kind) {
            k.types.push(kind);
        }
        if matches!(v, Value::String(_) | Value::Bool(_) | Value::Number(_)) {
            let shown = v.to_string();
            if k.examples.len() < 3 && shown.len() <= 40 && !k.examples.contains(&shown) {
                k.examples.push(shown);
            }
        }
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk_json(x, &p, keys, order);
            }
        }
        Value::Array(a) => {
            for x in a {
                walk_json(x, &format!("{path}[]"), keys, order);
            }
        }
        _ => {}
    }
}

fn json_keys() -> String {
    let dir = repo().join("views/src/json/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = header(
        "JSON keys",
        "views/src/json/golden/ (the views' tests hold each equal to what the code prints from the real kernel's captures)",
    );
    out.push_str("The keys each view's `--json` prints, with the values seen in the real kernel's captures (see [JSON of the views](../guide/tools.md#json-of-the-views) for the rules: snake_case, stable, `null` for what the kernel does not report). `a[]` is an element of the array `a`.\n");
    for (view, prefix) in JSON_VIEWS {
        let mut keys = BTreeMap::new();
        let mut order = Vec::new();
        let mut n = 0;
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy();
            if !name.starts_with(prefix) {
                continue;
            }
            n += 1;
            let v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            walk_json(&v, "", &mut keys, &mut order);
        }
        assert!(n > 0, "no golden file for {view} ({prefix}*)");
        write!(
            out,
            "\n## `{view}`\n\n| key | type | e.g. |\n|---|---|---|\n"
        )
        .unwrap();
        for k in &order {
            let key = &keys[k];
            let ex: Vec<String> = key
                .examples
                .iter()
                .map(|e| format!("`{}`", cell(e)))
                .collect();
            writeln!(
                out,
                "| `{k}` | {} | {} |",
                key.types.join(" or "),
                ex.join(", ")
            )
            .unwrap();
        }
    }
    let seen: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| !JSON_VIEWS.iter().any(|(_, p)| n.starts_with(p)))
        .collect();
    assert!(
        seen.is_empty(),
        "golden files no view of JSON_VIEWS claims: {seen:?}"
    );
    out
}

fn files() -> String {
    let mut out = header(
        "Files",
        "launcher/src/man.rs (`FILES`, the man pages' FILES)",
    );
    let rows = crate::man::FILES
        .iter()
        .map(|(p, what)| (p.to_string(), *what));
    table(&mut out, ["path", "what"], rows);
    out
}

/// Every page: (file under docs/src/reference/, its text).
fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("commands.md", commands()),
        ("environment.md", environment()),
        ("exit-status.md", exit_statuses()),
        ("doctor-checks.md", doctor_checks()),
        ("metrics.md", metrics()),
        ("json.md", json_keys()),
        ("files.md", files()),
    ]
}

#[test]
fn reference_pages_are_what_the_code_makes() {
    let dir = repo().join("docs/src/reference");
    let update = std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, text) in pages() {
        let path = dir.join(name);
        if update {
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/src/reference/{{{}}} differ from what the code makes: write them again with `{UPDATE}` and commit them",
        stale.join(",")
    );
}

#[test]
fn the_sample_scrape_has_every_family_of_the_source() {
    let made: Vec<String> = metric_families().into_iter().map(|f| f.name).collect();
    let named = family_names_in_the_source();
    assert!(named.len() > 40, "the scan found too few names: {named:?}");
    for n in &named {
        assert!(
            made.contains(n),
            "{n} (views/src/metrics.rs) is not in the sample snapshot of launcher/src/reference.rs: add what makes it there, so that docs/src/reference/metrics.md lists it"
        );
    }
}

/// The README's first screen lists every tool: each subcommand appears in its Tools section as
/// `smcrun NAME`.
#[test]
fn the_readme_lists_every_tool() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let tools = readme
        .split("\n## Tools")
        .nth(1)
        .expect("README.md has a ## Tools section");
    let tools = tools.split("\n## ").next().unwrap();
    for name in crate::SUBCOMMANDS {
        assert!(
            tools.contains(&format!("`smcrun {name}")),
            "README.md's Tools section does not name `smcrun {name}`"
        );
    }
}
