//! The policy from the outside: `smcrun policy check` on the manual's examples (docs/src/guide/policy.md), a bad policy or
//! config file refused with its position before anything starts, and a config file's settings
//! reaching the program.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// smcrun with no policy inherited from the test's own environment.
fn smcrun_clean() -> Command {
    let mut c = smcrun();
    c.env_remove("SMCRUN_POLICY").env_remove("SMCRUN_REPORT");
    c
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-policy-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `smcrun policy check ARGS` → (stdout, stderr, exit code).
fn whole(args: &[&str]) -> (String, String, Option<i32>) {
    let mut c = smcrun_clean();
    c.args(["policy", "check"]).args(args);
    let (out, err, o) = run(c);
    (out, err, o.status.code())
}

/// `smcrun policy check ARGS` → (first line, second line, exit code).
fn check(args: &[&str]) -> (String, String, Option<i32>) {
    let mut c = smcrun_clean();
    c.args(["policy", "check"]).args(args);
    let (out, err, o) = run(c);
    let mut lines = out.lines();
    let first = lines.next().unwrap_or_default().to_string();
    let second = lines.next().unwrap_or_default().to_string();
    assert!(
        o.status.success() || first.is_empty(),
        "a refusal prints nothing on stdout: {out}{err}"
    );
    (first, second, o.status.code())
}

#[test]
fn policy_check_answers_the_manuals_examples() {
    let only = "smc port 6379,3306; tcp";
    let no_loopback = "tcp remote 127.0.0.0/8,::1; smc";
    let never = "tcp remote 10.1.2.3; smc";
    let server = "smc role server port 6379; tcp";
    #[rustfmt::skip]
    let cases = [
        (only, "redis-benchmark", "--connect", "10.0.0.5:6379", "rule 1 of 2: smc port 6379,3306", "smc"),
        (only, "mysql", "--connect", "[fd00::5]:3306", "rule 1 of 2: smc port 6379,3306", "smc"),
        (only, "curl", "--connect", "10.0.0.5:443", "the default: tcp (rule 2 of 2)", "tcp"),
        (only, "redis-server", "--bind", "0.0.0.0:6379", "rule 1 of 2: smc port 6379,3306", "smc"),
        (no_loopback, "redis-cli", "--connect", "127.0.0.1:6379", "rule 1 of 2: tcp remote 127.0.0.0/8,::1", "tcp"),
        (no_loopback, "redis-cli", "--connect", "[::1]:6379", "rule 1 of 2: tcp remote 127.0.0.0/8,::1", "tcp"),
        (no_loopback, "redis-cli", "--connect", "[::ffff:127.0.0.1]:6379", "rule 1 of 2: tcp remote 127.0.0.0/8,::1", "tcp"),
        (no_loopback, "redis-cli", "--connect", "10.0.0.5:6379", "the default: smc (rule 2 of 2)", "smc"),
        (never, "x", "--connect", "10.1.2.3:22", "rule 1 of 2: tcp remote 10.1.2.3", "tcp"),
        (never, "x", "--connect", "10.1.2.4:22", "the default: smc (rule 2 of 2)", "smc"),
        (server, "redis-server", "--bind", "[::]:6379", "rule 1 of 2: smc role server port 6379", "smc"),
        (server, "redis-cli", "--connect", "10.0.0.5:6379", "the default: tcp (rule 2 of 2)", "tcp"),
        (server, "redis-server", "--bind", "0.0.0.0:16379", "the default: tcp (rule 2 of 2)", "tcp"),
    ];
    for (policy, program, how, addr, matched, action) in cases {
        let (first, second, code) = check(&["--policy", policy, "--program", program, how, addr]);
        assert_eq!(code, Some(0), "{policy} {program} {how} {addr}");
        assert_eq!(first, matched, "{policy} {program} {how} {addr}");
        assert!(
            second.starts_with(&format!("action: {action} ")),
            "{policy} {program} {how} {addr}: {second}"
        );
    }
}

#[test]
fn policy_check_json_and_programs() {
    let mut c = smcrun_clean();
    c.args([
        "policy",
        "check",
        "--policy",
        "tcp program curl; smc program /usr/bin/redis-* port 6379; tcp",
        "--program",
        "/usr/bin/redis-server",
        "--connect",
        "10.0.0.5:6379",
        "--json",
    ]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["action"], "smc");
    assert_eq!(v["role"], "client");
    assert_eq!(v["remote"], "10.0.0.5:6379");
    assert_eq!(v["rule"]["index"], 1);
    assert_eq!(v["rule"]["position"], 2);
    assert_eq!(v["rule"]["text"], "smc program /usr/bin/redis-* port 6379");
    // A path glob does not match a bare name; the default applies, and `rule` is null.
    let mut c = smcrun_clean();
    c.args([
        "policy",
        "check",
        "--policy",
        "smc program /usr/bin/redis-*; tcp",
        "--program",
        "redis-server",
        "--bind",
        "0.0.0.0:6379",
        "--json",
    ]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["action"], "tcp");
    assert_eq!(v["role"], "server");
    assert_eq!(v["local"], "0.0.0.0:6379");
    assert!(v["rule"].is_null(), "{v}");
    // A client's bound address, for `local` rules.
    let (first, _, _) = check(&[
        "--policy",
        "smc local 192.168.0.0/16; tcp",
        "--program",
        "x",
        "--connect",
        "10.0.0.1:80",
        "--local",
        "192.168.1.1:5000",
    ]);
    assert_eq!(first, "rule 1 of 2: smc local 192.168.0.0/16");
}

#[test]
fn policy_check_reads_config_files_and_the_environment() {
    let dir = scratch("check-config");
    let file = write(
        &dir,
        "smcrun.toml",
        r#"
[[policy.rule]]
action = "tcp"
remote = ["127.0.0.0/8", "::1"]

[[policy.rule]]
action = "smc"
port = [6379, 3306]

[policy]
default = "tcp"
"#,
    );
    let f = file.to_str().unwrap();
    let (first, second, _) = check(&[
        "--config",
        f,
        "--program",
        "x",
        "--connect",
        "10.0.0.1:3306",
    ]);
    assert_eq!(first, "rule 2 of 3: smc port 6379,3306");
    assert!(second.starts_with("action: smc"), "{second}");
    let (first, _, _) = check(&[
        "--config",
        f,
        "--program",
        "x",
        "--connect",
        "127.0.0.1:3306",
    ]);
    assert_eq!(first, "rule 1 of 3: tcp remote 127.0.0.0/8,::1");
    let (first, _, _) = check(&["--config", f, "--program", "x", "--connect", "10.0.0.1:80"]);
    assert_eq!(first, "the default: tcp (rule 3 of 3)");

    let mut c = smcrun_clean();
    c.env("SMCRUN_POLICY", "tcp port 22").args([
        "policy",
        "check",
        "--program",
        "ssh",
        "--connect",
        "10.0.0.1:22",
    ]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert!(
        out.starts_with("rule 1 of 1: tcp port 22\naction: tcp"),
        "{out}"
    );

    let (_, _, code) = check(&["--program", "x", "--connect", "10.0.0.1:22"]);
    assert_eq!(code, Some(2), "no policy at all is bad usage");
    let (_, _, code) = check(&["--policy", "smc", "--program", "x"]);
    assert_eq!(code, Some(2), "--connect or --bind is required");
    let (_, _, code) = check(&["--policy", "smc", "--connect", "10.0.0.1:22"]);
    assert_eq!(code, Some(2), "--connect needs --program");
    // The policy alone: checked, and printed in its canonical form, one rule a line.
    let (out, err, code) = whole(&["--policy", "smc  port 6379,3306 ;  tcp"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "policy: smc port 6379,3306; tcp\nrule 1 of 2: smc port 6379,3306\nrule 2 of 2: tcp\notherwise: the default: tcp (rule 2 of 2)\n\
         enforced by the preload (smcrun --policy): every rule\n\
         not by BPF mode (smcrun --bpf, smcrun attach): rule 1 \"smc port 6379,3306\" is about port, which is known at connect()/listen(), after socket(): only the preload can honour it (run the program with the preload: smcrun --policy ... without --bpf)\n\
         enforced by the handshake (smcrun handshake load, Linux 6.19+): every rule\n"
    );
    // A program rule: the preload and BPF mode, not the handshake.
    let (out, _, code) = whole(&["--policy", "tcp program redis-benchmark; smc"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("\nenforced by BPF mode (smcrun --bpf, smcrun attach): every rule\n"),
        "{out}"
    );
    assert!(
        out.contains("\nnot by the handshake (smcrun handshake load, Linux 6.19+): rule 1 \"tcp program redis-benchmark\" names programs"),
        "{out}"
    );
    let (out, _, code) = whole(&["-j", "--policy", "smc port 6379"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["policy"], "smc port 6379");
    assert_eq!(v["rules"], serde_json::json!(["smc port 6379"]));
    assert_eq!(v["enforcement"][0]["point"], "preload");
    assert_eq!(v["enforcement"][1]["honours"], false);
    assert_eq!(v["enforcement"][2]["point"], "handshake");
    assert_eq!(v["enforcement"][2]["honours"], true);
    assert!(v["enforcement"][2]["refusal"].is_null());
    assert_eq!(
        v["default"],
        "the default: smc (the policy has no default rule)"
    );
    // A bad one: the one-line error naming the bad value, exit 2.
    let (out, err, code) = whole(&["--policy", "smc port 99999"]);
    assert_eq!(code, Some(2));
    assert!(
        out.is_empty() && err.contains("\"99999\" is not a port"),
        "{out}{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs smcrun with `args` and then a command that would create `marker`; asserts that smcrun
/// refuses with exit 2, one stderr line that holds each of `needles`, and that nothing started.
fn refused(dir: &Path, args: &[&str], env: Option<(&str, &str)>, needles: &[&str]) {
    let marker = dir.join("started");
    let _ = std::fs::remove_file(&marker);
    let mut c = smcrun_clean();
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    c.args(args)
        .args(["sh", "-c", &format!("touch '{}'", marker.display())]);
    let (out, err, o) = run(c);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {out}{err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: want {n:?} in: {err}");
    }
    assert!(
        !marker.exists(),
        "{args:?}: the program must not have started"
    );
}

#[test]
fn a_bad_policy_string_is_refused_with_its_offset_and_nothing_starts() {
    let dir = scratch("bad-string");
    refused(
        &dir,
        &["--policy", "smc prot 1"],
        None,
        &[
            "--policy: at offset 4: \"prot\" is not a qualifier; expected one of program, role, remote, local, port",
        ],
    );
    refused(
        &dir,
        &["--policy", "smc port 6379; tcp remote 10.1.2.3/8", "--"],
        None,
        &["at offset 26: \"10.1.2.3/8\" has bits set after the prefix; expected the network address, 10.0.0.0/8"],
    );
    refused(
        &dir,
        &["--policy", "tcp; smc port 1"],
        None,
        &["at offset 5: \"smc\"", "never reached"],
    );
    // An inherited SMCRUN_POLICY is checked too.
    refused(
        &dir,
        &[],
        Some(("SMCRUN_POLICY", "smc port 99999")),
        &["SMCRUN_POLICY: at offset 9: \"99999\" is not a port"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_config_file_is_refused_with_file_line_column_and_nothing_starts() {
    let dir = scratch("bad-config");
    let cases = [
        (
            "mode = \"smc\"\ndebug = 7\n",
            "2:9: 7 is not a valid debug; expected 0, 1 or 2",
        ),
        ("sndbuf = \"12x\"\n", "1:10: \"12x\" is not a valid sndbuf"),
        (
            "# policy\npolicy = \"smc prot 1\"\n",
            "2:15: \"prot\" is not a qualifier",
        ),
        (
            "[[policy.rule]]\naction = \"smc\"\nport = [6379, \"80-70\"]\n",
            "3:16: \"80-70\" is an empty range",
        ),
        (
            "mdoe = \"smc\"\n",
            "1:1: \"mdoe\" is not a setting; expected one of mode",
        ),
        ("mode = smc\n", "1:8: not valid TOML"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = write(&dir, &format!("c{i}.toml"), text);
        let f = file.to_str().unwrap();
        refused(&dir, &["--config", f], None, &[&format!("{f}:{want}")]);
    }
    let missing = dir.join("missing.toml");
    refused(
        &dir,
        &["--config", missing.to_str().unwrap()],
        None,
        &["missing.toml: cannot read the config file"],
    );
    // The file is checked even when the command line overrides the bad value.
    let file = write(&dir, "override.toml", "mode = \"fast\"\n");
    refused(
        &dir,
        &["--mode", "smc", "--config", file.to_str().unwrap()],
        None,
        &[":1:8: \"fast\" is not a valid mode"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shim's variables as the program sees them.
fn program_env(args: &[&str]) -> String {
    let mut c = smcrun_clean();
    c.args(args).args([
        "sh",
        "-c",
        "echo \"mode=$SMCRUN_MODE fallback=$SMCRUN_FALLBACK debug=$SMCRUN_DEBUG sndbuf=$SMCRUN_SNDBUF rcvbuf=$SMCRUN_RCVBUF report=$SMCRUN_REPORT policy=$SMCRUN_POLICY\"",
    ]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{args:?}: {err}");
    out.trim().to_string()
}

#[test]
fn config_settings_reach_the_program_and_the_command_line_wins() {
    let dir = scratch("settings");
    let file = write(
        &dir,
        "smcrun.toml",
        r#"
mode = "smc"
fallback = "tcp"
debug = 1
sndbuf = "64k"
rcvbuf = 65536
report = true
policy = "smc  PORT 6379 , 3306 ;tcp"
"#,
    );
    let f = file.to_str().unwrap();
    assert_eq!(
        program_env(&["--config", f]),
        "mode=smc fallback=tcp debug=1 sndbuf=65536 rcvbuf=65536 report=1 policy=smc port 6379,3306; tcp"
    );
    assert_eq!(
        program_env(&["--config", f, "--mode", "inet", "-dd", "-t", "32k", "--policy", "tcp"]),
        "mode=inet fallback=tcp debug=2 sndbuf=32768 rcvbuf=65536 report=1 policy=tcp"
    );
    // Without a config or a policy, nothing is set.
    assert_eq!(
        program_env(&[]),
        "mode= fallback= debug= sndbuf= rcvbuf= report= policy="
    );

    // The shim itself reads them: debug = 1 from the file gives the debug lines, and the program
    // works as without a policy.
    let mut c = smcrun_clean();
    c.args(["--config", f])
        .arg(bin("sockcheck"))
        .arg("identity");
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(value(&out, "data_ok"), "true");
    assert!(
        err.contains("socket fd"),
        "debug = 1 in the config must turn on the shim's debug lines:\n{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_sysctls_are_applied_before_the_program_starts() {
    // Here the kernel has no net.smc sysctls to write (the VM sets them for real).
    assert!(
        !Path::new("/proc/sys/net/smc").exists(),
        "this host test expects a kernel without SMC; on an SMC kernel run the VM suite"
    );
    let dir = scratch("sysctl");
    let file = write(&dir, "s.toml", "[sysctl]\n\"net.smc.wmem\" = 262144\n");
    let mut c = smcrun_clean();
    c.args(["--config", file.to_str().unwrap(), "true"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot set net.smc.wmem"), "{err}");
    let file = write(
        &dir,
        "b.toml",
        "sysctl-best-effort = true\n[sysctl]\nnet.smc.wmem = 262144\n",
    );
    let mut c = smcrun_clean();
    c.args(["--config", file.to_str().unwrap()])
        .arg(bin("sockcheck"))
        .args(["exit", "4"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("warning: cannot set net.smc.wmem"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
