//! smcrun's `--config FILE`: every setting of a run in one TOML file, checked before anything is started.
//!
//! ```toml
//! mode = "auto"            # as --mode
//! fallback = "tcp"         # as --fallback
//! debug = 1                # as -d (0, 1 or 2)
//! sndbuf = "256k"          # as --sndbuf (a number of bytes, or a string with k/m)
//! rcvbuf = 262144          # as --rcvbuf
//! report = true            # as --report (SMCRUN_REPORT)
//! require-preload = false  # as --require-preload
//! sysctl-best-effort = false
//! policy = "smc port 6379; tcp"   # as --policy, or the table form below
//!
//! [sysctl]                 # as --sysctl KEY=VALUE
//! "net.smc.wmem" = 262144
//!
//! [[policy.rule]]          # instead of the one-line policy: rules in order...
//! action = "smc"
//! port = [6379, 3306]
//! [policy]                 # ...and the action when none matches (smc when not given)
//! default = "tcp"
//! ```
//!
//! Values are read with the same parsers as the options and the shim's variables
//! (`smcrun_settings`), and a rule table is turned into the one-line syntax and parsed by
//! `smcrun_policy`, so a value means the same wherever it is written. Every error is one line,
//! `FILE:LINE:COLUMN: what is wrong; expected what`. Options on the command line override the
//! file (the launcher merges them; this crate only reads the file, so that it can be tested and
//! fuzzed on its own).

#![forbid(unsafe_code)]

use smcrun_policy::Policy;
use smcrun_settings::{self as settings, Fallback, Mode, Setting};
use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

pub mod sysctl;
pub use sysctl::{parse_assignment, Assignment};

/// The settings a config file holds; `None` (or empty) where it says nothing.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Config {
    /// `mode`.
    pub mode: Option<Mode>,
    /// `fallback`.
    pub fallback: Option<Fallback>,
    /// `debug`: 0, 1 or 2.
    pub debug: Option<u8>,
    /// `sndbuf`, in bytes.
    pub sndbuf: Option<i32>,
    /// `rcvbuf`, in bytes.
    pub rcvbuf: Option<i32>,
    /// `report`.
    pub report: Option<bool>,
    /// `require-preload`.
    pub require_preload: Option<bool>,
    /// `sysctl-best-effort`.
    pub sysctl_best_effort: Option<bool>,
    /// `[sysctl]`, in the file's order.
    pub sysctl: Vec<Assignment>,
    /// `policy`, either form.
    pub policy: Option<Policy>,
}

/// A refused config file: where, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// The launcher's own keys, beside the shim's settings (`smcrun_settings::SHIM_SETTINGS`).
const LAUNCHER_KEYS: [&str; 3] = ["require-preload", "sysctl-best-effort", "sysctl"];

/// The top-level keys, for the error about any other.
fn known_keys() -> String {
    let keys: Vec<&str> = settings::SHIM_SETTINGS
        .iter()
        .map(|s| s.key)
        .chain(LAUNCHER_KEYS)
        .collect();
    format!("one of {}", keys.join(", "))
}
/// The keys of a `[[policy.rule]]` table.
const RULE_KEYS: &str = "one of action, program, role, remote, local, port";
/// The qualifiers that a rule table may hold, in canonical order.
const QUALIFIERS: [&str; 5] = ["program", "role", "remote", "local", "port"];

/// An error at byte `pos` of the file: a message, with the position to be turned into line and
/// column by [`parse`].
struct At(usize, String);

type Value<'i> = Spanned<DeValue<'i>>;

/// `"text"` for a string, the number for an integer, `true`/`false`, or the TOML type's name:
/// how a value is named in an error.
fn shown(v: &DeValue<'_>) -> String {
    match v {
        DeValue::String(s) => format!("{s:?}"),
        DeValue::Integer(i) => i.to_string(),
        DeValue::Boolean(b) => b.to_string(),
        other => format!("a {}", other.type_str()),
    }
}

/// A string or an integer as text (`sndbuf = 262144` and `sndbuf = "256k"` alike).
fn scalar_text<'a>(v: &'a Value<'_>, key: &str, what: &str) -> Result<Cow<'a, str>, At> {
    match v.get_ref() {
        DeValue::String(s) => Ok(Cow::Borrowed(s.as_ref())),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Ok(Cow::Owned(n.to_string())),
            Err(_) => Err(At(
                v.span().start,
                format!("{i} is too large for {key}; expected {what}"),
            )),
        },
        other => Err(At(
            v.span().start,
            format!(
                "{key} = {} is of the wrong type; expected {what}",
                shown(other)
            ),
        )),
    }
}

/// A setting read with one of `smcrun_settings`' parsers.
fn setting<T>(v: &Value<'_>, s: &Setting, parse: fn(&str) -> Option<T>) -> Result<T, At> {
    let (key, what) = (s.key, s.expected);
    let text = scalar_text(v, key, what)?;
    parse(&text).ok_or_else(|| {
        At(
            v.span().start,
            format!(
                "{} is not a valid {key}; expected {what}",
                shown(v.get_ref())
            ),
        )
    })
}

fn boolean(v: &Value<'_>, key: &str) -> Result<bool, At> {
    v.get_ref().as_bool().ok_or_else(|| {
        At(
            v.span().start,
            format!(
                "{key} = {} is not a boolean; expected true or false",
                shown(v.get_ref())
            ),
        )
    })
}

/// Collects `[sysctl]`, whose keys may be quoted (`"net.smc.wmem" = 1`) or dotted
/// (`net.smc.wmem = 1`, which TOML nests as tables): either way the dotted name.
fn sysctls(prefix: &str, table: &DeTable<'_>, out: &mut Vec<Assignment>) -> Result<(), At> {
    for (k, v) in sorted(table) {
        let name = if prefix.is_empty() {
            k.get_ref().to_string()
        } else {
            format!("{prefix}.{}", k.get_ref())
        };
        if let DeValue::Table(t) = v.get_ref() {
            sysctls(&name, t, out)?;
            continue;
        }
        let value = scalar_text(v, &name, "a string or an integer")?;
        let a = sysctl::parse_assignment(&format!("{name}={value}"))
            .map_err(|e| At(k.span().start, e))?;
        out.retain(|b| b.key != a.key);
        out.push(a);
    }
    Ok(())
}

/// A table's entries in the order of the file (the map itself is sorted by key).
fn sorted<'t, 'i>(table: &'t DeTable<'i>) -> Vec<(&'t Spanned<Cow<'i, str>>, &'t Value<'i>)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

/// Where in the file byte `offset` of the string value `v` is: exact when the string is
/// written without escapes, else the start of the value.
fn locate(file: &str, v: &Value<'_>, offset: usize) -> usize {
    let span = v.span();
    let Some(decoded) = v.get_ref().as_str() else {
        return span.start;
    };
    let raw = file.get(span.clone()).unwrap_or_default();
    let quote = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        3
    } else {
        1
    };
    let inner = raw
        .get(quote..raw.len().saturating_sub(quote))
        .unwrap_or_default();
    let (skip, inner) = match inner.strip_prefix('\n') {
        Some(rest) if quote == 3 => (1, rest),
        _ => (0, inner),
    };
    if inner == decoded && offset <= decoded.len() {
        span.start + quote + skip + offset
    } else {
        span.start
    }
}

/// One value of a rule table, written into the one-line policy: its place in the line, the value
/// it came from and where in that (string) value it starts, to put a parse error back where it
/// belongs.
struct Piece<'v, 'i> {
    line: Range<usize>,
    value: &'v Value<'i>,
    within: Option<usize>,
}

/// One word of a qualifier's values: its text, the value it came from, and where it starts in
/// that value when the value is a string.
type Word<'v, 'i> = (String, &'v Value<'i>, Option<usize>);

/// The values of one qualifier: a string or an integer, or an array of them. Each must be one
/// word of the one-line syntax: no whitespace, `,` or `;` (a string may hold a comma-separated
/// list, which is split).
fn qualifier_values<'v, 'i>(key: &str, v: &'v Value<'i>) -> Result<Vec<Word<'v, 'i>>, At> {
    let items: Vec<&Value<'i>> = match v.get_ref() {
        DeValue::Array(a) => a.iter().collect(),
        _ => vec![v],
    };
    if items.is_empty() {
        return Err(At(
            v.span().start,
            format!("{key} is an empty array; expected at least one value"),
        ));
    }
    let what = if key == "port" {
        "a port number, a string such as \"8000-8099\", or an array of them"
    } else {
        "a string or an array of strings"
    };
    let mut out = Vec::new();
    for item in items {
        let (text, is_string) = match item.get_ref() {
            DeValue::Integer(_) if key == "port" => (scalar_text(item, key, what)?, false),
            DeValue::String(s) => (Cow::Borrowed(s.as_ref()), true),
            other => {
                return Err(At(
                    item.span().start,
                    format!(
                        "{key} = {} is of the wrong type; expected {what}",
                        shown(other)
                    ),
                ))
            }
        };
        let mut at = 0;
        for part in text.split(',') {
            let word = part.trim();
            let within = is_string.then(|| at + (part.len() - part.trim_start().len()));
            at += part.len() + 1;
            if word.is_empty() || word.contains(|c: char| c.is_whitespace() || c == ';') {
                return Err(At(
                    item.span().start,
                    format!(
                        "{} is not a value of {key}; expected {what}, each value without spaces or ';'",
                        shown(item.get_ref())
                    ),
                ));
            }
            out.push((word.to_string(), item, within));
        }
    }
    Ok(out)
}

/// Turns the `[[policy.rule]]` tables and `default` into the one-line syntax and parses that, so
/// that both forms go through the one rule parser.
fn policy_table(file: &str, table: &Value<'_>) -> Result<Policy, At> {
    let DeValue::Table(t) = table.get_ref() else {
        return Err(At(
            table.span().start,
            format!(
                "policy = {} is of the wrong type; expected a string such as \"smc port 6379; tcp\" or [[policy.rule]] tables",
                shown(table.get_ref())
            ),
        ));
    };
    let mut line = String::new();
    let mut pieces: Vec<Piece<'_, '_>> = Vec::new();
    let mut default = None;
    for (k, v) in sorted(t) {
        match k.get_ref().as_ref() {
            "rule" => {
                let rules: Vec<&Value<'_>> = match v.get_ref() {
                    DeValue::Array(a) => a.iter().collect(),
                    _ => vec![v],
                };
                for rule in rules {
                    if !line.is_empty() {
                        line.push_str("; ");
                    }
                    rule_line(rule, &mut line, &mut pieces)?;
                }
            }
            "default" => default = Some(v),
            other => {
                return Err(At(
                    k.span().start,
                    format!("{other:?} is not a key of [policy]; expected rule ([[policy.rule]]) or default"),
                ))
            }
        }
    }
    if let Some(v) = default {
        let Some(action @ ("smc" | "tcp")) = v.get_ref().as_str() else {
            return Err(At(
                v.span().start,
                format!(
                    "default = {} is not an action; expected \"smc\" or \"tcp\"",
                    shown(v.get_ref())
                ),
            ));
        };
        if !line.is_empty() {
            line.push_str("; ");
        }
        line.push_str(action);
    }
    Policy::parse(&line).map_err(|e| {
        let at =
            pieces
                .iter()
                .find(|p| p.line.contains(&e.offset))
                .map_or(table.span().start, |p| match p.within {
                    Some(w) => locate(file, p.value, w + (e.offset - p.line.start)),
                    None => p.value.span().start,
                });
        At(at, e.message())
    })
}

/// Writes one `[[policy.rule]]` table as a rule of the one-line syntax.
fn rule_line<'v, 'i>(
    rule: &'v Value<'i>,
    line: &mut String,
    pieces: &mut Vec<Piece<'v, 'i>>,
) -> Result<(), At> {
    let DeValue::Table(t) = rule.get_ref() else {
        return Err(At(
            rule.span().start,
            format!(
                "policy.rule = {} is of the wrong type; expected [[policy.rule]] tables",
                shown(rule.get_ref())
            ),
        ));
    };
    for (k, _) in sorted(t) {
        let key = k.get_ref().as_ref();
        if key != "action" && !QUALIFIERS.contains(&key) {
            return Err(At(
                k.span().start,
                format!("{key:?} is not a key of a rule; expected {RULE_KEYS}"),
            ));
        }
    }
    let Some(action) = t.get("action") else {
        return Err(At(
            rule.span().start,
            "this [[policy.rule]] has no action; expected action = \"smc\" or \"tcp\"".to_string(),
        ));
    };
    let start = line.len();
    match action.get_ref() {
        DeValue::String(s)
            if !s.is_empty()
                && !s.contains(|c: char| c.is_whitespace() || c == ';' || c == ',') =>
        {
            line.push_str(s)
        }
        other => {
            return Err(At(
                action.span().start,
                format!(
                    "action = {} is not an action; expected \"smc\" or \"tcp\"",
                    shown(other)
                ),
            ))
        }
    }
    pieces.push(Piece {
        line: start..line.len(),
        value: action,
        within: Some(0),
    });
    let mut qualified = false;
    for q in QUALIFIERS {
        let Some(v) = t.get(q) else { continue };
        qualified = true;
        line.push(' ');
        line.push_str(q);
        for (i, (word, value, within)) in qualifier_values(q, v)?.into_iter().enumerate() {
            line.push(if i == 0 { ' ' } else { ',' });
            let start = line.len();
            line.push_str(&word);
            pieces.push(Piece {
                line: start..line.len(),
                value,
                within,
            });
        }
    }
    if !qualified {
        return Err(At(
            rule.span().start,
            "this [[policy.rule]] has no qualifier, so it would match everything; expected at least one of program, role, remote, local, port (for the action when no rule matches, use default = \"smc\" or \"tcp\" in [policy])".to_string(),
        ));
    }
    Ok(())
}

/// Reads the top-level table.
fn settings_of(file: &str, doc: &DeTable<'_>) -> Result<Config, At> {
    let mut c = Config::default();
    for (k, v) in sorted(doc) {
        let key = k.get_ref().as_ref();
        let is = |s: &Setting| s.key == key;
        if is(&settings::MODE) {
            c.mode = Some(setting(v, &settings::MODE, settings::parse_mode)?);
            continue;
        } else if is(&settings::FALLBACK) {
            c.fallback = Some(setting(v, &settings::FALLBACK, settings::parse_fallback)?);
            continue;
        } else if is(&settings::DEBUG) {
            c.debug = Some(setting(v, &settings::DEBUG, settings::parse_debug)?);
            continue;
        } else if is(&settings::SNDBUF) {
            c.sndbuf = Some(setting(v, &settings::SNDBUF, settings::parse_size)?);
            continue;
        } else if is(&settings::RCVBUF) {
            c.rcvbuf = Some(setting(v, &settings::RCVBUF, settings::parse_size)?);
            continue;
        } else if is(&settings::REPORT) {
            c.report = Some(boolean(v, key)?);
            continue;
        }
        match key {
            "require-preload" => c.require_preload = Some(boolean(v, key)?),
            "sysctl-best-effort" => c.sysctl_best_effort = Some(boolean(v, key)?),
            "sysctl" => match v.get_ref() {
                DeValue::Table(t) => sysctls("", t, &mut c.sysctl)?,
                other => {
                    return Err(At(
                        v.span().start,
                        format!("sysctl = {} is of the wrong type; expected a [sysctl] table of \"net.smc.KEY\" = VALUE", shown(other)),
                    ))
                }
            },
            k if k == settings::POLICY.key => {
                c.policy = Some(match v.get_ref().as_str() {
                    Some(text) => Policy::parse(text)
                        .map_err(|e| At(locate(file, v, e.offset), e.message()))?,
                    None => policy_table(file, v)?,
                })
            }
            "rule" => {
                return Err(At(
                    k.span().start,
                    "\"rule\" is not a setting; expected [[policy.rule]] for a rule of the policy".to_string(),
                ))
            }
            other => {
                return Err(At(
                    k.span().start,
                    format!("{other:?} is not a setting; expected {}", known_keys()),
                ))
            }
        }
    }
    Ok(c)
}

/// 1-based line and column (in characters) of byte `pos` of `text`.
fn line_column(text: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(text.len());
    let before = text.get(..pos).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// Parses the text of a config file; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let error = |pos: usize, message: String| {
        let (line, column) = line_column(text, pos);
        ConfigError {
            file: file.to_string(),
            line,
            column,
            message,
        }
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let pos = e.span().map_or(0, |s| s.start);
        error(pos, format!("not valid TOML: {}", e.message().trim_end()))
    })?;
    settings_of(text, doc.get_ref()).map_err(|At(pos, message)| error(pos, message))
}

/// The largest config file read (a policy of every port one by one fits many times over).
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Reads and parses the config file at `path`: a regular file (a FIFO, a device or a directory is
/// refused without being opened for blocking reads: `--config FIFO` must not hang), of at most
/// [`MAX_CONFIG_BYTES`].
pub fn load(path: &Path) -> Result<Config, String> {
    use smcrun_sys::file::{read_regular, NotRead};
    let name = path.display().to_string();
    let bytes = read_regular(path, MAX_CONFIG_BYTES).map_err(|e| match e {
        NotRead::TooBig(..) => format!(
            "{name}: the config file is larger than {} MiB; expected a TOML file of smcrun's settings",
            MAX_CONFIG_BYTES >> 20
        ),
        NotRead::NotRegular(_) => format!(
            "{name}: cannot read the config file: {e}; expected a TOML file of smcrun's settings"
        ),
        NotRead::Io(_) => format!("{name}: cannot read the config file: {e}"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{name}: the config file is not UTF-8 text (at byte {}); expected a TOML file",
            e.utf8_error().valid_up_to()
        )
    })?;
    parse(&name, &text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse("c.toml", text).expect_err(text).to_string()
    }

    #[test]
    fn every_setting() {
        let c = parse(
            "c.toml",
            r#"
mode = "inet"
fallback = "strict"
debug = 2
sndbuf = "256k"
rcvbuf = 131072
report = true
require-preload = true
sysctl-best-effort = false
policy = "smc port 6379,3306; tcp"

[sysctl]
"net.smc.wmem" = 262144
net.core.rmem_max = "1048576"
"#,
        )
        .unwrap();
        assert_eq!(c.mode, Some(Mode::Inet));
        assert_eq!(c.fallback, Some(Fallback::Strict));
        assert_eq!(c.debug, Some(2));
        assert_eq!(c.sndbuf, Some(256 * 1024));
        assert_eq!(c.rcvbuf, Some(131072));
        assert_eq!(c.report, Some(true));
        assert_eq!(c.require_preload, Some(true));
        assert_eq!(c.sysctl_best_effort, Some(false));
        let keys: Vec<(&str, &str)> = c
            .sysctl
            .iter()
            .map(|a| (a.key.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![("net.smc.wmem", "262144"), ("net.core.rmem_max", "1048576")]
        );
        assert_eq!(c.policy.unwrap().to_string(), "smc port 6379,3306; tcp");
        assert_eq!(parse("c.toml", "").unwrap(), Config::default());
    }

    #[test]
    fn rule_tables_become_the_one_line_policy() {
        let c = parse(
            "c.toml",
            r#"
[[policy.rule]]
action = "tcp"
remote = ["127.0.0.0/8", "::1"]

[[policy.rule]]
action = "smc"
role = "server"
port = [6379, "8000-8099"]
program = "redis-*"

[[policy.rule]]
action = "smc"
port = "3306, 5432"
local = "10.0.0.0/8"

[policy]
default = "tcp"
"#,
        )
        .unwrap();
        assert_eq!(
            c.policy.unwrap().to_string(),
            "tcp remote 127.0.0.0/8,::1; smc program redis-* role server port 6379,8000-8099; \
             smc local 10.0.0.0/8 port 3306,5432; tcp"
        );
        let c = parse("c.toml", "[policy]\ndefault = \"tcp\"\n").unwrap();
        assert_eq!(c.policy.unwrap().to_string(), "tcp");
        let c = parse("c.toml", "[[policy.rule]]\naction = \"tcp\"\nport = 22\n").unwrap();
        assert_eq!(c.policy.unwrap().to_string(), "tcp port 22");
    }

    #[test]
    fn errors_name_file_line_column_value_and_expectation() {
        for (text, want) in [
            (
                "mode = \"smcr\"\n",
                "c.toml:1:8: \"smcr\" is not a valid mode; expected one of smc, inet, auto",
            ),
            ("\n\nmdoe = \"smc\"\n", "c.toml:3:1: \"mdoe\" is not a setting; expected one of mode, fallback, debug, sndbuf, rcvbuf, report, policy, require-preload, sysctl-best-effort, sysctl"),
            ("debug = 3\n", "c.toml:1:9: 3 is not a valid debug; expected 0, 1 or 2"),
            ("debug = 1.5\n", "c.toml:1:9: debug = a float is of the wrong type; expected 0, 1 or 2"),
            ("sndbuf = \"12x\"\n", "c.toml:1:10: \"12x\" is not a valid sndbuf; expected a size in bytes from 1 to 2147483647, optionally with a k or m suffix (e.g. 256k, 1m)"),
            ("rcvbuf = 0\n", "c.toml:1:10: 0 is not a valid rcvbuf; expected a size in bytes from 1 to 2147483647, optionally with a k or m suffix (e.g. 256k, 1m)"),
            ("report = \"yes\"\n", "c.toml:1:10: report = \"yes\" is not a boolean; expected true or false"),
            ("[sysctl]\n\"kernel.panic\" = 1\n", "c.toml:2:1: \"kernel.panic\": only net.smc.* and net.core.* sysctls can be set"),
            ("sysctl = 1\n", "c.toml:1:10: sysctl = 1 is of the wrong type; expected a [sysctl] table of \"net.smc.KEY\" = VALUE"),
            // The one-line policy: the column of the bad token inside the string.
            ("policy = \"smc prot 1; tcp\"\n", "c.toml:1:15: \"prot\" is not a qualifier; expected one of program, role, remote, local, port"),
            ("policy = 'smc port 1; tcp port x'\n", "c.toml:1:32: \"x\" is not a port; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
            ("policy = \"\"\"\nsmc port 1;\ntcp roel x\"\"\"\n", "c.toml:3:5: \"roel\" is not a qualifier; expected one of program, role, remote, local, port"),
            // Rule tables: the value that is wrong.
            ("[[policy.rule]]\naction = \"smc\"\nport = [6379, 70000]\n", "c.toml:3:15: \"70000\" is not a port; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
            ("[[policy.rule]]\naction = \"smc\"\nremote = \"10.1.2.3/8\"\n", "c.toml:3:11: \"10.1.2.3/8\" has bits set after the prefix; expected the network address, 10.0.0.0/8"),
            ("[[policy.rule]]\naction = \"smx\"\nport = 1\n", "c.toml:2:11: \"smx\" is not an action; expected smc or tcp"),
            ("[[policy.rule]]\naction = \"smc\"\nprot = 1\n", "c.toml:3:1: \"prot\" is not a key of a rule; expected one of action, program, role, remote, local, port"),
            ("[[policy.rule]]\nport = 1\n", "c.toml:1:1: this [[policy.rule]] has no action; expected action = \"smc\" or \"tcp\""),
            ("[[policy.rule]]\naction = \"smc\"\nrole = \"client server\"\n", "c.toml:3:8: \"client server\" is not a value of role; expected a string or an array of strings, each value without spaces or ';'"),
            ("[[policy.rule]]\naction = \"smc\"\nprogram = \"x; tcp\"\n", "c.toml:3:11: \"x; tcp\" is not a value of program; expected a string or an array of strings, each value without spaces or ';'"),
            ("[[policy.rule]]\naction = \"smc\"\nport = \"3306, 5x\"\n", "c.toml:3:15: \"5x\" is not a port; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
            ("[policy]\ndefault = \"fast\"\n", "c.toml:2:11: default = \"fast\" is not an action; expected \"smc\" or \"tcp\""),
            ("[[rule]]\naction = \"smc\"\n", "c.toml:1:3: \"rule\" is not a setting; expected [[policy.rule]] for a rule of the policy"),
            ("mode = \n", "c.toml:1:8: not valid TOML: string values must be quoted, expected literal string"),
        ] {
            let got = err(text);
            assert_eq!(got, want, "for {text:?}");
            assert!(!got.contains('\n'), "{got}");
        }
    }

    #[test]
    fn a_rule_table_without_qualifiers_is_refused() {
        let e =
            err("[[policy.rule]]\naction = \"tcp\"\n[[policy.rule]]\naction = \"smc\"\nport = 1\n");
        assert!(
            e.starts_with("c.toml:1:1: this [[policy.rule]] has no qualifier"),
            "{e}"
        );
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("ab\ncé d", 7), (2, 4));
        assert_eq!(line_column("", 5), (1, 1));
    }
}
