//! Doctor's rows for a program it is given (`smcrun doctor -- PROGRAM [ARGS]`): `program`, whether
//! LD_PRELOAD reaches it, and for Java `java`, whether its sockets can use SMC. How the program was
//! found and what LD_PRELOAD makes of it comes in as a [`Reach`] (the launcher finds out, as
//! `smcrun -- PROGRAM` does); which programs a script names is read here ([`script_programs`]).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use smcrun_kernel::features;

use super::{at_least, Check, Status};

/// What LD_PRELOAD makes of the program doctor was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Nothing of that name (a shell's 127).
    Missing,
    /// A file of that name that is not an executable regular file.
    NotExecutable(PathBuf),
    /// The program at this path, which LD_PRELOAD cannot reach, and why.
    Unreachable(PathBuf, String),
    /// The program at this path, which LD_PRELOAD reaches (a dynamically linked program).
    Dynamic(PathBuf),
    /// A script (`#!`) at this path, with the programs it runs that LD_PRELOAD cannot reach and
    /// why each (none: its interpreter is preloaded, and so are the programs it names).
    Script(PathBuf, Vec<(PathBuf, String)>),
}

/// The programs a script names, in order: its `#!` interpreter (which the kernel runs, and which
/// must be a program the preload reaches), and per line (comments aside) the absolute paths and
/// the first word after `exec` that is not an option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPrograms<'a> {
    /// The `#!` line's program.
    pub interpreter: Option<&'a str>,
    /// The programs the lines name (a name more than once, as often as it is named).
    pub run: Vec<&'a str>,
}

/// The programs script `text` names.
pub fn script_programs(text: &str) -> ScriptPrograms<'_> {
    let interpreter = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .and_then(|l| l.split_whitespace().next());
    let mut run = Vec::new();
    for line in text.lines().skip(1) {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || ";|&()`'\"".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        run.extend(words.iter().copied().filter(|w| w.starts_with('/')));
        if let Some(i) = words.iter().position(|w| *w == "exec") {
            if let Some(w) = words[i + 1..].iter().find(|w| !w.starts_with('-')) {
                run.push(w);
            }
        }
    }
    ScriptPrograms { interpreter, run }
}

/// The rows of program `cmd` (its name and arguments), which LD_PRELOAD makes `reach` of, on a
/// kernel of `release`: `program`, and `java` when it is Java.
pub fn checks(cmd: &[OsString], reach: &Reach, release: &str) -> Vec<Check> {
    let over_tcp = "smcrun would run it over TCP, never SMC; BPF mode (the kernel's socket() hook) reaches such programs";
    let reached = ": LD_PRELOAD reaches its sockets";
    let (path, status, detail, advice) = match reach {
        Reach::Missing => {
            return vec![Check::new(
                "program",
                Status::Fail,
                format!("{}: command not found", cmd[0].to_string_lossy()),
                "give the program's path, or put it on PATH",
            )]
        }
        Reach::NotExecutable(p) => {
            return vec![Check::new(
                "program",
                Status::Fail,
                format!("{}: not an executable file", p.display()),
                "give the path of an executable program",
            )]
        }
        Reach::Unreachable(path, why) => (
            path,
            Status::Fail,
            format!("{} {why}", path.display()),
            over_tcp,
        ),
        Reach::Dynamic(path) => (
            path,
            Status::Pass,
            format!("{} is dynamically linked{reached}", path.display()),
            "",
        ),
        Reach::Script(path, hidden) if hidden.is_empty() => (
            path,
            Status::Pass,
            format!(
                "{} is a script whose interpreter is preloaded{reached}",
                path.display()
            ),
            "",
        ),
        Reach::Script(path, hidden) => {
            let list = hidden
                .iter()
                .map(|(p, why)| format!("{} {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; ");
            (
                path,
                Status::Fail,
                format!("{} is a script that runs {list}", path.display()),
                over_tcp,
            )
        }
    };
    let mut out = vec![Check::new("program", status, detail, advice)];
    if path.file_name().is_some_and(|n| n.as_bytes() == b"java") {
        let v4 = cmd
            .iter()
            .any(|a| a.as_bytes() == b"-Djava.net.preferIPv4Stack=true");
        let new_kernel = at_least(release, features::SMCR_V4_MAPPED) == Some(true);
        out.push(if v4 || new_kernel {
            Check::new("java", Status::Pass, "Java's sockets can use SMC here", "")
        } else {
            Check::new(
                "java",
                Status::Warn,
                "Java makes AF_INET6 sockets, and talks to IPv4 peers through v4-mapped addresses, which fall back to TCP before Linux 6.14",
                "add -Djava.net.preferIPv4Stack=true to the java command line",
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::ROWS;

    fn java(cmd: &[&str], release: &str) -> Status {
        let cmd: Vec<OsString> = cmd.iter().map(OsString::from).collect();
        let c = checks(&cmd, &Reach::Dynamic("/usr/bin/java".into()), release);
        c.iter()
            .find(|c| c.id == "java")
            .expect("a java row")
            .status
    }

    /// Every row given here is in the manual's list of rows.
    #[test]
    fn the_rows_given_here_are_in_the_list_of_rows() {
        let cmd = ["java".into()];
        let hidden = vec![("/bin/busybox".into(), "is statically linked".into())];
        for reach in [
            Reach::Missing,
            Reach::NotExecutable("/tmp/x".into()),
            Reach::Unreachable("/usr/bin/java".into(), "is a Go program".into()),
            Reach::Dynamic("/usr/bin/java".into()),
            Reach::Script("/usr/bin/java".into(), Vec::new()),
            Reach::Script("/usr/bin/java".into(), hidden),
        ] {
            for c in checks(&cmd, &reach, "6.12.0") {
                assert!(
                    ROWS.iter().any(|r| r.0 == c.id),
                    "{} is not in doctor::ROWS",
                    c.id
                );
            }
        }
    }

    #[test]
    fn a_script_names_its_interpreter_absolute_paths_and_what_it_execs() {
        let s = script_programs(
            "#!/bin/sh -e\n# exec /not/this\nexport X=1\n/usr/bin/env true; exec busybox -f httpd \"$@\"\n",
        );
        assert_eq!(s.interpreter, Some("/bin/sh"));
        assert_eq!(s.run, ["/usr/bin/env", "busybox"]);
        assert_eq!(script_programs("echo hi\n").interpreter, None);
    }

    #[test]
    fn a_script_that_runs_an_unreachable_program_fails_and_names_it() {
        let hidden = vec![("/bin/busybox".into(), "is statically linked".into())];
        let c = checks(
            &["start.sh".into()],
            &Reach::Script("/srv/start.sh".into(), hidden),
            "6.12.0",
        );
        assert_eq!(c[0].status, Status::Fail);
        assert_eq!(
            c[0].detail,
            "/srv/start.sh is a script that runs /bin/busybox is statically linked"
        );
        let c = checks(&["x".into()], &Reach::Missing, "6.12.0");
        assert_eq!(c[0].detail, "x: command not found");
    }

    #[test]
    fn java_before_6_14_needs_ipv4_stack() {
        assert_eq!(java(&["java", "-jar", "x.jar"], "6.12.0"), Status::Warn);
        assert_eq!(
            java(&["java", "-Djava.net.preferIPv4Stack=true"], "6.12.0"),
            Status::Pass
        );
        assert_eq!(java(&["java"], "6.14.2"), Status::Pass);
    }
}
