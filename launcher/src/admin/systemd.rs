//! `smcrun enable UNIT [OPTIONS]` and `smcrun disable UNIT`: run a systemd service under smcrun
//! (as mptcpize does for MPTCP), through a drop-in `UNIT.d/smcrun.conf` in /etc/systemd/system.
//!
//! The drop-in replaces the unit's ExecStart with the same command run by smcrun:
//! `ExecStart=` then `ExecStart=/usr/bin/smcrun OPTIONS -- <the unit's command>`. This rather than
//! `Environment=LD_PRELOAD=...`: smcrun execs the program in place (same PID, so Type=notify,
//! PIDFile=, signals and the exit status are the unit's as before), only the service's own
//! program gets the shim (not ExecStartPre=, ExecReload= or ExecStop= helpers), the options are
//! checked now and smcrun's own steps apply at every start (--sysctl, --require-preload, the
//! policy in canonical form, the config file), and an LD_PRELOAD the unit sets itself is kept.
//!
//! The unit's ExecStart is read from its unit file and drop-ins (the search path systemd uses,
//! `$SYSTEMD_UNIT_PATH` included), so it works without a running systemd (images, containers).
//! Prefixes (`-`, `:`, `+`, `!`, `!!`) are kept; `@` (a different argv[0]) cannot be kept and is
//! refused. Neither command reloads systemd: both say to run `systemctl daemon-reload`.

use crate::status::{Exit, Failure, Outcome};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser};

use crate::cmd::{exporter, format};
use crate::run::config_file;
use crate::run::exec;

/// The drop-in's file name in `UNIT.d/`.
const DROPIN: &str = "smcrun.conf";

/// The first line of every drop-in smcrun writes; `disable` removes only such files.
const MARKER: &str = "# Written by `smcrun enable";

/// Unit directories systemd reads, highest priority first (without $SYSTEMD_UNIT_PATH).
const SYSTEM_UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// `smcrun enable` arguments.
#[derive(Args, Debug)]
pub struct EnableArgs {
    /// Print JSON: {"unit", "dropin", "changed", "exec_start": [...], "next"} (before UNIT: what follows
    /// UNIT is smcrun's options for the program).
    #[arg(short = 'j', long)]
    json: bool,
    /// The service (redis-server or redis-server.service).
    unit: String,
    /// smcrun's options for the program (as for `smcrun [OPTIONS] COMMAND`), e.g. --mode inet
    /// --policy 'smc port 6379; tcp'.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "OPTIONS"
    )]
    options: Vec<OsString>,
}

/// `smcrun disable` arguments.
#[derive(Args, Debug)]
pub struct DisableArgs {
    /// Print JSON: {"unit", "dropin", "changed", "next"}.
    #[arg(short = 'j', long)]
    json: bool,
    /// The service smcrun was enabled for.
    unit: String,
}

/// The run options alone, to check `enable`'s OPTIONS.
#[derive(Parser, Debug)]
#[command(
    name = "smcrun enable UNIT",
    no_binary_name = true,
    disable_help_flag = true
)]
struct Options {
    #[command(flatten)]
    run: exec::RunOptions,
}

/// `redis-server` → `redis-server.service`.
fn unit_name(u: &str) -> Result<String, String> {
    let valid = !u.is_empty()
        && !u.contains('/')
        && u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b));
    if !valid {
        return Err(format!(
            "\"{u}\" is not a unit name; expected a name such as redis-server or redis-server.service"
        ));
    }
    Ok(if u.contains('.') && !u.ends_with('.') {
        u.to_string()
    } else {
        format!("{u}.service")
    })
}

/// The unit directories, highest priority first: `$SYSTEMD_UNIT_PATH` (an empty entry, as a
/// trailing ':', stands for the usual ones), else the usual ones.
fn unit_dirs() -> Vec<PathBuf> {
    let system = || SYSTEM_UNIT_DIRS.iter().map(PathBuf::from);
    match std::env::var_os("SYSTEMD_UNIT_PATH") {
        Some(p) => {
            let mut out = Vec::new();
            for d in std::env::split_paths(&p) {
                if d.as_os_str().is_empty() {
                    out.extend(system());
                } else {
                    out.push(d);
                }
            }
            out
        }
        None => system().collect(),
    }
}

/// The unit file and its drop-ins (other than smcrun's), in the order systemd applies them.
fn unit_files(unit: &str, dirs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    // A template instance (foo@bar.service) falls back to its template's file (foo@.service).
    let template = unit
        .split_once('@')
        .and_then(|(a, b)| b.rsplit_once('.').map(|(_, ext)| format!("{a}@.{ext}")));
    let main = dirs
        .iter()
        .map(|d| d.join(unit))
        .chain(
            template
                .iter()
                .flat_map(|t| dirs.iter().map(move |d| d.join(t))),
        )
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no unit file {unit} in {}",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    let mut dropins: Vec<(OsString, PathBuf)> = Vec::new();
    let names = std::iter::once(unit.to_string()).chain(template);
    for name in names.collect::<Vec<_>>().iter().rev() {
        for d in dirs.iter().rev() {
            let Ok(entries) = std::fs::read_dir(d.join(format!("{name}.d"))) else {
                continue;
            };
            for e in entries.flatten() {
                let file = e.file_name();
                if file == DROPIN || !file.to_string_lossy().ends_with(".conf") {
                    continue;
                }
                // The same name in a higher-priority directory replaces a lower one.
                dropins.retain(|(f, _)| *f != file);
                dropins.push((file, e.path()));
            }
        }
    }
    dropins.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(std::iter::once(main)
        .chain(dropins.into_iter().map(|(_, p)| p))
        .collect())
}

/// The ExecStart= values in force after reading `texts` in order (an empty assignment resets
/// the list), from the [Service] sections only, with continuation lines joined.
fn exec_starts(texts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for text in texts {
        let mut section = String::new();
        let mut pending = String::new();
        for raw in text.lines() {
            let line = if pending.is_empty() {
                raw.trim().to_string()
            } else {
                format!("{pending} {}", raw.trim())
            };
            if let Some(cont) = line.strip_suffix('\\') {
                pending = cont.trim_end().to_string();
                continue;
            }
            pending.clear();
            if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
                continue;
            }
            if line.starts_with('[') {
                section = line;
                continue;
            }
            if section != "[Service]" {
                continue;
            }
            if let Some((key, value)) = line.split_once('=') {
                if key.trim() == "ExecStart" {
                    let v = value.trim();
                    if v.is_empty() {
                        out.clear();
                    } else {
                        out.push(v.to_string());
                    }
                }
            }
        }
    }
    out
}

/// One word quoted for a systemd command line (`%` and `$` doubled, quotes and backslashes
/// escaped inside double quotes when needed).
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=,+-@".contains(&b));
    let escaped = word.replace('%', "%%").replace('$', "$$");
    if plain {
        return escaped;
    }
    let mut out = String::from("\"");
    for c in escaped.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The ExecStart value running `value` under `smcrun` with `options` (already quoted).
fn wrapped(value: &str, smcrun: &str, options: &str) -> Result<String, String> {
    let rest = value.trim_start_matches(['-', ':', '+', '!', '@']);
    let prefixes = &value[..value.len() - rest.len()];
    if prefixes.contains('@') {
        return Err(format!(
            "ExecStart={value} sets argv[0] with '@', which smcrun cannot pass on; remove the '@' form first"
        ));
    }
    let first = rest.split_whitespace().next().unwrap_or("");
    if Path::new(first.trim_matches('"'))
        .file_name()
        .is_some_and(|n| n == "smcrun")
    {
        return Err(format!("ExecStart={value} already runs smcrun"));
    }
    let sep = if options.is_empty() { "" } else { " " };
    Ok(format!("{prefixes}{smcrun}{sep}{options} -- {rest}"))
}

/// The drop-in's text.
fn dropin_text(
    unit: &str,
    starts: &[String],
    smcrun: &str,
    options: &str,
) -> Result<String, String> {
    let mut out = format!(
        "{MARKER} {unit}`; `smcrun disable {unit}` removes it.\n\
         # The unit's ExecStart under smcrun: same PID, signals and exit status; SMC for its TCP sockets.\n\
         [Service]\nExecStart=\n"
    );
    for s in starts {
        out.push_str(&format!("ExecStart={}\n", wrapped(s, smcrun, options)?));
    }
    Ok(out)
}

fn fail(msg: impl std::fmt::Display) -> Outcome {
    Err(Failure::new(Exit::Failed, format!("{msg}")))
}

fn usage(msg: impl std::fmt::Display) -> Outcome {
    Err(Failure::new(Exit::Usage, format!("{msg}")))
}

/// Run `smcrun enable`.
pub fn enable(a: &EnableArgs) -> Outcome {
    let unit = match unit_name(&a.unit) {
        Ok(u) => u,
        Err(e) => return usage(e),
    };
    let opts = match Options::try_parse_from(&a.options) {
        Ok(o) => o.run,
        Err(e) => {
            return usage(format!(
                "enable {unit}: {}",
                e.to_string().lines().next().unwrap_or("")
            ))
        }
    };
    if opts.config.as_ref().is_some_and(|c| c.is_relative()) {
        return usage("--config needs an absolute path here (systemd starts the unit in /)");
    }
    if let Err(f) = config_file::resolve(&opts) {
        return Err(Failure {
            message: f.message + " (nothing was written)",
            ..f
        });
    }
    let words: Vec<String> = match a.options.iter().map(|o| o.to_str().map(quote)).collect() {
        Some(w) => w,
        None => return usage("an option that is not UTF-8 cannot go into a unit file"),
    };
    let smcrun = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(p) => p.display().to_string(),
        Err(e) => return fail(format!("cannot tell where smcrun is: {e}")),
    };
    let dirs = unit_dirs();
    let files = match unit_files(&unit, &dirs) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let texts: Vec<String> = match files.iter().map(std::fs::read_to_string).collect() {
        Ok(t) => t,
        Err(e) => return fail(format!("reading the unit {unit}: {e}")),
    };
    let starts = exec_starts(&texts);
    if starts.is_empty() {
        return fail(format!("{unit} has no ExecStart= to run under smcrun"));
    }
    let text = match dropin_text(&unit, &starts, &quote(&smcrun), &words.join(" ")) {
        Ok(t) => t,
        Err(e) => return fail(format!("{unit}: {e}")),
    };
    let dir = dirs[0].join(format!("{unit}.d"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(format!("cannot create {}: {e}", dir.display()));
    }
    let written = std::fs::File::open(&dir)
        .map(std::os::fd::OwnedFd::from)
        .map_err(|e| e.to_string())
        .and_then(|fd| exporter::write_atomically(&fd, DROPIN, text.as_bytes()));
    if let Err(e) = written {
        return fail(format!("cannot write {}: {e}", dir.join(DROPIN).display()));
    }
    let starts: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ExecStart=") && l.len() > 10)
        .collect();
    let next = format!("systemctl daemon-reload && systemctl restart {unit}");
    if a.json {
        return format::print_json(&UnitChange {
            unit: &unit,
            dropin: dir.join(DROPIN).display().to_string(),
            changed: true,
            exec_start: starts.iter().map(|l| &l["ExecStart=".len()..]).collect(),
            next: Some(&next),
        });
    }
    println!("wrote {}:", dir.join(DROPIN).display());
    for l in starts {
        println!("  {l}");
    }
    println!("now run: {next}");
    Ok(ExitCode::SUCCESS)
}

/// `enable --json` and `disable --json`: what was written or removed, and what to run next.
#[derive(serde::Serialize)]
struct UnitChange<'a> {
    /// The service (`redis-server.service`).
    unit: &'a str,
    /// The drop-in's path.
    dropin: String,
    /// Whether the drop-in was written (enable) or removed (disable); false for "nothing to do".
    changed: bool,
    /// enable: the ExecStart= lines of the drop-in, without `ExecStart=`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    exec_start: Vec<&'a str>,
    /// The command that makes systemd use the change (none when nothing changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<&'a str>,
}

/// Run `smcrun disable`.
pub fn disable(a: &DisableArgs) -> Outcome {
    let unit = match unit_name(&a.unit) {
        Ok(u) => u,
        Err(e) => return usage(e),
    };
    let dir = unit_dirs()[0].join(format!("{unit}.d"));
    let path = dir.join(DROPIN);
    match std::fs::read_to_string(&path) {
        Ok(t) if t.starts_with(MARKER) => {}
        Ok(_) => {
            return fail(format!(
                "{} was not written by `smcrun enable`; leaving it alone",
                path.display()
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if a.json {
                return format::print_json(&UnitChange {
                    unit: &unit,
                    dropin: path.display().to_string(),
                    changed: false,
                    exec_start: Vec::new(),
                    next: None,
                });
            }
            println!(
                "{unit} does not run under smcrun ({} does not exist); nothing to do",
                path.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return fail(format!("{}: {e}", path.display())),
    }
    if let Err(e) = std::fs::remove_file(&path) {
        return fail(format!("cannot remove {}: {e}", path.display()));
    }
    // The directory goes too when it held nothing else.
    let _ = std::fs::remove_dir(&dir);
    let next = format!("systemctl daemon-reload && systemctl restart {unit}");
    if a.json {
        return format::print_json(&UnitChange {
            unit: &unit,
            dropin: path.display().to_string(),
            changed: true,
            exec_start: Vec::new(),
            next: Some(&next),
        });
    }
    println!("removed {}", path.display());
    println!("now run: {next}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names() {
        assert_eq!(unit_name("redis-server").unwrap(), "redis-server.service");
        assert_eq!(
            unit_name("getty@tty1.service").unwrap(),
            "getty@tty1.service"
        );
        assert!(unit_name("../etc/passwd").is_err());
        assert!(unit_name("").is_err());
        assert!(unit_name("a b").unwrap_err().contains("\"a b\""));
    }

    #[test]
    fn the_last_execstart_assignments_win() {
        let main = "[Unit]\nDescription=x\nExecStart=/not/service\n[Service]\nType=notify\nExecStart=/usr/bin/redis-server /etc/redis/redis.conf \\\n  --supervised systemd\n".to_string();
        assert_eq!(
            exec_starts(std::slice::from_ref(&main)),
            ["/usr/bin/redis-server /etc/redis/redis.conf --supervised systemd"]
        );
        let over =
            "[Service]\nExecStart=\nExecStart=-/usr/bin/redis-server --port 7000\n".to_string();
        assert_eq!(
            exec_starts(&[main, over]),
            ["-/usr/bin/redis-server --port 7000"]
        );
    }

    #[test]
    fn wrapping_keeps_prefixes_and_refuses_argv0() {
        assert_eq!(
            wrapped("-/usr/bin/redis-server a", "/usr/bin/smcrun", "--mode inet").unwrap(),
            "-/usr/bin/smcrun --mode inet -- /usr/bin/redis-server a"
        );
        assert_eq!(
            wrapped("/bin/true", "/usr/bin/smcrun", "").unwrap(),
            "/usr/bin/smcrun -- /bin/true"
        );
        assert!(wrapped("@/bin/sleep sleeper 5", "/s", "")
            .unwrap_err()
            .contains("argv[0]"));
        assert!(wrapped("/usr/bin/smcrun x", "/s", "")
            .unwrap_err()
            .contains("already"));
    }

    #[test]
    fn quoting_for_unit_files() {
        assert_eq!(quote("--mode"), "--mode");
        assert_eq!(quote("smc port 6379; tcp"), "\"smc port 6379; tcp\"");
        assert_eq!(quote("100%"), "\"100%%\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("$HOME"), "\"$$HOME\"");
    }

    #[test]
    fn unit_files_follow_systemds_order() {
        let d = std::env::temp_dir().join(format!("smcrun-units-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let (etc, lib) = (d.join("etc"), d.join("lib"));
        std::fs::create_dir_all(lib.join("r.service.d")).unwrap();
        std::fs::create_dir_all(etc.join("r.service.d")).unwrap();
        std::fs::write(lib.join("r.service"), "[Service]\nExecStart=/bin/a\n").unwrap();
        std::fs::write(
            lib.join("r.service.d/10-x.conf"),
            "[Service]\nExecStart=\nExecStart=/bin/b\n",
        )
        .unwrap();
        std::fs::write(
            etc.join("r.service.d/10-x.conf"),
            "[Service]\nExecStart=\nExecStart=/bin/c\n",
        )
        .unwrap();
        std::fs::write(etc.join("r.service.d/smcrun.conf"), "ignored").unwrap();
        let files = unit_files("r.service", &[etc.clone(), lib.clone()]).unwrap();
        assert_eq!(
            files,
            [lib.join("r.service"), etc.join("r.service.d/10-x.conf")]
        );
        let texts: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        assert_eq!(exec_starts(&texts), ["/bin/c"]);
        assert!(unit_files("nope.service", &[etc])
            .unwrap_err()
            .contains("no unit file"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
