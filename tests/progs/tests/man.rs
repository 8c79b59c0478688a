//! The man pages as `smcrun man` writes them (and the package installs them): every section an
//! operator looks for, no markdown left in, the synopsis with the arguments' names, every SMCRUN_
//! variable in ENVIRONMENT; and the sources name no SMCRUN_ variable the settings crate does not
//! define (it is where the pages, and the manual's table, take them from).

mod common;
use common::*;
use std::path::{Path, PathBuf};

const SECTIONS: &[&str] = &[
    ".SH NAME",
    ".SH SYNOPSIS",
    ".SH DESCRIPTION",
    ".SH OPTIONS",
    ".SH \"EXIT STATUS\"",
    ".SH \"ENVIRONMENT\"",
    ".SH \"FILES\"",
    ".SH \"EXAMPLES\"",
    ".SH \"SEE ALSO\"",
];

fn pages() -> (PathBuf, Vec<(String, String)>) {
    let d = std::env::temp_dir().join(format!("smcrun-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let mut c = smcrun();
    c.arg("man").arg(&d);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{out}{err}");
    let mut all: Vec<(String, String)> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    all.sort();
    (d, all)
}

#[test]
fn every_page_has_every_section_and_no_markdown() {
    let (d, pages) = pages();
    let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "smcrun.1",
        "smcrun-doctor.1",
        "smcrun-ps.1",
        "smcrun-exporter.1",
        "smcrun-man.1",
    ] {
        assert!(names.contains(&want), "no {want} in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.contains("__")),
        "a page of a hidden command: {names:?}"
    );
    for (name, text) in &pages {
        for s in SECTIONS {
            assert!(text.contains(s), "{name} has no {s}");
        }
        assert!(!text.contains('`'), "{name} has markdown backticks");
        for see in ["\\fBsmc_run\\fR(8)", "\\fBsmcss\\fR(8)", "\\fBsmcr\\fR(8)"] {
            assert!(text.contains(see), "{name}: SEE ALSO lacks {see}");
        }
        for s in smcrun_settings::SHIM_SETTINGS {
            assert!(
                text.contains(&format!("\\fB{}\\fR", s.var.replace('-', "\\-"))),
                "{name}: ENVIRONMENT lacks {}",
                s.var
            );
        }
        for v in smcrun_settings::LAUNCHER_VARIABLES {
            assert!(
                text.contains(&format!("\\fB{}\\fR", v.var)),
                "{name}: ENVIRONMENT lacks {}",
                v.var
            );
        }
    }
    let page = |n: &str| &pages.iter().find(|(p, _)| p == n).unwrap().1;
    // The synopsis names the arguments.
    assert!(
        page("smcrun-why.1")
            .contains("\\fBsmcrun why\\fR \\fIPID\\fR [\\fB\\-j\\fR|\\fB\\-\\-json\\fR]"),
        "{}",
        page("smcrun-why.1")
    );
    assert!(page("smcrun-doctor.1").contains("[\\fB\\-\\-\\fR \\fIPROGRAM [ARGS]\\fR...]"));
    assert!(page("smcrun.1")
        .contains("\\fBsmcrun\\fR [\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR"));
    // doctor's own status, and the program's for the run line.
    assert!(page("smcrun-doctor.1").contains(".TP\n\\fB3\\fR\ndoctor: a check failed"));
    assert!(page("smcrun.1").contains("the program's own status"));
    // man renders every page without a warning.
    if Path::new("/usr/bin/man").exists() {
        for (name, _) in &pages {
            let mut c = std::process::Command::new("man");
            c.env("MANWIDTH", "80")
                .args(["--warnings", "-l"])
                .arg(d.join(name));
            let (out, err, o) = run(c);
            assert!(
                o.status.success() && err.trim().is_empty(),
                "man {name}: {err}"
            );
            assert!(out.contains("EXIT STATUS"), "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Every `SMCRUN_` variable the product's sources name is one of the settings crate's lists.
#[test]
fn the_settings_crate_defines_every_smcrun_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let known: Vec<&str> = smcrun_settings::SHIM_SETTINGS
        .iter()
        .map(|s| s.var)
        .chain(smcrun_settings::LAUNCHER_VARIABLES.iter().map(|v| v.var))
        .collect();
    let mut seen = Vec::new();
    let mut stack: Vec<PathBuf> = [
        "launcher/src",
        "shim/src",
        "runtime/src",
        "classify/src",
        "views/src",
        "report/src",
        "kernel/src",
        "config/src",
        "settings/src",
        "bpf/src",
        "policy/src",
        "sys/src",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, _) in text.match_indices("SMCRUN_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if name.len() > "SMCRUN_".len() {
                seen.push((name, p.clone()));
            }
        }
    }
    assert!(seen.len() > 10, "the scan found too little: {seen:?}");
    for (name, file) in &seen {
        assert!(
            known.contains(&name.as_str()),
            "{name} ({}) is not defined in settings/",
            file.display()
        );
    }
}
