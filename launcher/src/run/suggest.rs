//! The rule for a program whose name is close to one of smcrun's subcommands (`smcrun stat`,
//! `smcrun doctr`): `smcrun NAME` keeps running the program NAME (smcrun's promise: any program
//! runs unchanged), but says once on stderr which subcommand was probably meant, and how to
//! silence it; a name that is no program at all gets the suggestion with "command not found"
//! (exit 127). `smcrun -- NAME` never warns.
//!
//! Close means: one of the two names starts the other and the shorter has at least 3 characters
//! (`stat` / `stats`, `export` / `exporter`), or the names differ by one edit and have at least
//! 4 characters (`doctr`, `stast`). Short programs such as `sh` or `ls` never match `ss`.

use crate::status::{Exit, Failure};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

fn one_edit(a: &[u8], b: &[u8]) -> bool {
    let (s, l) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if l.len() - s.len() > 1 {
        return false;
    }
    let i = s.iter().zip(l).take_while(|(x, y)| x == y).count();
    if s.len() == l.len() {
        // one substitution, or two neighbours swapped
        s[i + 1..] == l[i + 1..]
            || (i + 1 < s.len() && s[i] == l[i + 1] && s[i + 1] == l[i] && s[i + 2..] == l[i + 2..])
    } else {
        s[i..] == l[i + 1..]
    }
}

/// The subcommand `name` is close to, if any (never `name` itself).
pub fn close_to<'a>(name: &[u8], subcommands: &[&'a str]) -> Option<&'a str> {
    subcommands
        .iter()
        .copied()
        .filter(|sub| {
            let s = sub.as_bytes();
            if s == name {
                return false;
            }
            let prefix =
                (s.starts_with(name) || name.starts_with(s)) && s.len().min(name.len()) >= 3;
            prefix || (s.len().min(name.len()) >= 4 && one_edit(s, name))
        })
        .min_by_key(|sub| sub.len().abs_diff(name.len()))
}

/// Before running `cmd` (not forced with `--`): warn when its name is close to a subcommand, or
/// stop with exit 127 when it is no program at all. `Ok`: go on and run it.
pub fn before_run(cmd: &[OsString], subcommands: &[&str]) -> Result<(), Failure> {
    let Some(name) = cmd.first() else {
        return Ok(());
    };
    if name.as_bytes().contains(&b'/') {
        return Ok(());
    }
    let Some(sub) = close_to(name.as_bytes(), subcommands) else {
        return Ok(());
    };
    let shown = name.to_string_lossy();
    match crate::run::preload::find_program(name) {
        Ok(path) => {
            eprintln!(
                "smcrun: did you mean `smcrun {sub}`? (running {}; `smcrun -- {shown}` to silence)",
                path.display()
            );
            Ok(())
        }
        Err(_) => Err(Failure::new(
            Exit::NotFound,
            format!("{shown}: command not found; did you mean `smcrun {sub}`?"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBS: &[&str] = &[
        "stats",
        "ss",
        "exporter",
        "doctor",
        "link",
        "linkgroup",
        "metrics",
        "ps",
        "why",
    ];

    #[test]
    fn near_names_suggest_a_subcommand() {
        assert_eq!(close_to(b"stat", SUBS), Some("stats"));
        assert_eq!(close_to(b"export", SUBS), Some("exporter"));
        assert_eq!(close_to(b"doctr", SUBS), Some("doctor"));
        assert_eq!(close_to(b"stast", SUBS), Some("stats"));
        assert_eq!(close_to(b"metric", SUBS), Some("metrics"));
        assert_eq!(close_to(b"links", SUBS), Some("link"));
        assert_eq!(close_to(b"linkgroups", SUBS), Some("linkgroup"));
    }

    #[test]
    fn real_programs_with_short_or_far_names_are_left_alone() {
        for p in [
            "sh",
            "ls",
            "bash",
            "redis-server",
            "python3",
            "java",
            "true",
            "sleep",
            "ssh",
            "pss",
            "who",
        ] {
            assert_eq!(close_to(p.as_bytes(), SUBS), None, "{p}");
        }
        assert_eq!(close_to(b"stats", SUBS), None, "the subcommand itself");
    }

    #[test]
    fn no_program_of_that_name_is_127() {
        let c = before_run(&["doctr".into()], SUBS);
        assert_eq!(c.map_err(|f| f.exit), Err(Exit::NotFound));
        assert!(before_run(&["/usr/bin/stat".into()], SUBS).is_ok());
    }
}
