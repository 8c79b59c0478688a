//! Shared by the host tests: where the built programs are, and running them.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Once;

/// target/<profile>/, found from this test executable (target/<profile>/deps/NAME-HASH).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf()
}

/// Builds the launcher, the shim and the test programs once per test binary, in the profile the
/// tests run in, so the tests never run stale binaries.
pub fn ensure_built() {
    static BUILD: Once = Once::new();
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "-q",
            "-p",
            "smcrun",
            "-p",
            "smcrun-shim",
            "-p",
            "smcrun-testprogs",
        ]);
        if target_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "cargo build failed");
    });
}

/// Path of a built binary.
pub fn bin(name: &str) -> PathBuf {
    ensure_built();
    target_dir().join(name)
}

/// `smcrun ARGS...` as a Command, with the test environment cleaned of smcrun's variables.
pub fn smcrun() -> Command {
    let mut c = Command::new(bin("smcrun"));
    for s in smcrun_settings::SHIM_SETTINGS {
        for v in s.names() {
            c.env_remove(v);
        }
    }
    for v in ["LD_PRELOAD", "SMCRUN_SHIM"] {
        c.env_remove(v);
    }
    // Reports of the programs the tests run go to a directory of this test binary's own, not to
    // the machine's run directory.
    let run = std::env::temp_dir().join(format!("smcrun-tests-{}", std::process::id()));
    std::fs::create_dir_all(&run).expect("test run directory");
    c.env("XDG_RUNTIME_DIR", run);
    c
}

/// Runs and returns (stdout, stderr, output).
pub fn run(mut c: Command) -> (String, String, Output) {
    let out = c.output().expect("spawn");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out,
    )
}

/// The value of `key=` in sockcheck's output.
pub fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in output:\n{out}"))
}

/// Whether this kernel makes AF_SMC sockets (raw system call: the truth the tests compare to).
pub fn kernel_has_af_smc() -> bool {
    use smcrun_sys::{smc::AF_SMC, sock};
    sock::socket(AF_SMC, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
        .map(|fd| sock::close(fd).is_ok())
        .unwrap_or(false)
}

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
