//! The shells' completion scripts, run for real: bash with the bash-completion package (the
//! script as the package installs it, `smcrun completions bash`), asked for the candidates of a
//! command line as bash would ask when TAB is pressed. zsh and fish are not installed here: their
//! scripts are checked for what they must never offer.

mod common;
use common::*;
use std::path::{Path, PathBuf};

const BASH_COMPLETION: &str = "/usr/share/bash-completion/bash_completion";

fn script(shell: &str) -> String {
    let mut c = smcrun();
    c.args(["completions", shell]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    out
}

/// A directory of this test's own, with a file in it (so that a completion that offers file
/// names shows it) and the bash script.
fn place(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-compl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a-file-here"), "").unwrap();
    std::fs::write(d.join("smcrun.bash"), script("bash")).unwrap();
    d
}

/// The candidates bash offers for `line` (the cursor at its end), with `env` set.
fn candidates(dir: &Path, line: &str, env: &[(&str, &str)]) -> Vec<String> {
    let probe = format!(
        r#"source {BASH_COMPLETION}
source ./smcrun.bash
COMP_LINE=$LINE
COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$LINE"
[[ $LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
_smcrun_main smcrun "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#
    );
    let mut c = std::process::Command::new("bash");
    c.current_dir(dir)
        .args(["--norc", "--noprofile", "-c", &probe])
        .env("LINE", line);
    for (k, v) in env {
        c.env(k, v);
    }
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{line:?}: {err}");
    out.lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn has(c: &[String], w: &str) -> bool {
    c.iter().any(|x| x == w)
}

#[test]
fn bash_completes_programs_values_units_and_never_hidden_commands() {
    if !Path::new(BASH_COMPLETION).exists() {
        panic!("{BASH_COMPLETION} is missing: tests/deps tests installs bash-completion");
    }
    let d = place("bash");
    // The first word: subcommands and programs, like sudo's first word.
    let c = candidates(&d, "smcrun ", &[]);
    for w in ["demo", "doctor", "ps", "why", "exporter"] {
        assert!(has(&c, w), "smcrun <TAB> lacks {w}");
    }
    assert!(
        !c.iter().any(|w| w.starts_with("__")),
        "hidden commands offered: {c:?}"
    );
    assert!(candidates(&d, "smcrun __", &[]).is_empty());
    // Programs after smcrun, after its options and after `--`.
    for line in [
        "smcrun redis-s",
        "smcrun --mode inet -d redis-s",
        "smcrun -- redis-s",
    ] {
        let c = candidates(&d, line, &[]);
        assert!(has(&c, "redis-server"), "{line:?}: {c:?}");
    }
    // The program's own arguments complete as that program's (bash-completion's ip).
    let c = candidates(&d, "smcrun --policy tcp ip addr sh", &[]);
    assert_eq!(c, ["show"], "ip's own completion");
    let c = candidates(&d, "smcrun -- ip ro", &[]);
    assert!(has(&c, "route"), "{c:?}");
    // Option values: the words, never file names.
    assert_eq!(
        candidates(&d, "smcrun --mode ", &[]),
        ["smc", "inet", "auto"]
    );
    assert_eq!(candidates(&d, "smcrun --fallback ", &[]), ["tcp", "strict"]);
    assert_eq!(candidates(&d, "smcrun --mode i", &[]), ["inet"]);
    for line in ["smcrun --policy ", "smcrun --sysctl ", "smcrun -t "] {
        let c = candidates(&d, line, &[]);
        assert!(!has(&c, "a-file-here"), "{line:?} offers files: {c:?}");
    }
    // --config takes a file.
    assert!(has(
        &candidates(&d, "smcrun --config a-", &[]),
        "a-file-here"
    ));
    // A subcommand's options are clap's.
    let c = candidates(&d, "smcrun doctor --", &[]);
    assert!(has(&c, "--bpf") && has(&c, "--json"), "{c:?}");
    // Issue 24: the exporter's and metrics' collector flags, every collector.
    for sub in ["exporter", "metrics"] {
        let c = candidates(&d, &format!("smcrun {sub} --no-collector."), &[]);
        assert!(
            has(&c, "--no-collector.sockets") && has(&c, "--no-collector.sysctl"),
            "{sub}: {c:?}"
        );
        let c = candidates(&d, &format!("smcrun {sub} --collector."), &[]);
        assert!(
            has(&c, "--collector.disable-defaults") && has(&c, "--collector.rdma"),
            "{sub}: {c:?}"
        );
    }
    // enable: the services of the unit directories; disable: those smcrun enabled.
    let units = d.join("units");
    std::fs::create_dir_all(units.join("smcrun-t-b.service.d")).unwrap();
    std::fs::write(
        units.join("smcrun-t-a.service"),
        "[Service]\nExecStart=/bin/true\n",
    )
    .unwrap();
    std::fs::write(
        units.join("smcrun-t-b.service"),
        "[Service]\nExecStart=/bin/true\n",
    )
    .unwrap();
    std::fs::write(units.join("smcrun-t-b.service.d/smcrun.conf"), "# smcrun\n").unwrap();
    let path = format!("{}:", units.display());
    let env = [("SYSTEMD_UNIT_PATH", path.as_str())];
    assert_eq!(
        candidates(&d, "smcrun enable smcrun-t-", &env),
        ["smcrun-t-a", "smcrun-t-b"]
    );
    assert_eq!(
        candidates(&d, "smcrun enable -j smcrun-t-", &env),
        ["smcrun-t-a", "smcrun-t-b"]
    );
    assert_eq!(
        candidates(&d, "smcrun disable smcrun-t-", &env),
        ["smcrun-t-b"]
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// No shell is offered the hidden commands or options (`__capture`, `__demo-worker`,
/// `metrics --replay`), and fish completes a program in the command's place.
#[test]
fn no_script_offers_hidden_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let s = script(shell);
        // As a word of its own: `smcrun__subcmd__man` is the generators' name for the shown
        // `man`, not the old hidden `__man`.
        for hidden in ["__man", "__capture", "__demo-worker", "replay"] {
            let offered = s.match_indices(hidden).any(|(i, _)| {
                !s[..i]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            assert!(!offered, "{shell} offers {hidden}");
        }
    }
    assert!(script("fish").contains("(__fish_complete_command)"));
    assert!(script("zsh").contains("--mode=[") && script("zsh").contains("(smc inet auto)"));
}
