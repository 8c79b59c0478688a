//! `exec-floor SHIM PROGRAM [ARGS...]`: sets LD_PRELOAD to SHIM and execs PROGRAM, nothing else.
//! `bench/run`'s launcher measurement runs it beside `smcrun PROGRAM`: what any launcher written
//! in Rust costs (a second program started, the Rust runtime's start-up), so that the figure tells
//! smcrun's own part from the floor every separate launcher pays.

use std::os::unix::process::CommandExt;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let [shim, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: exec-floor SHIM PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let e = std::process::Command::new(program)
        .args(rest)
        .env("LD_PRELOAD", shim)
        .exec();
    eprintln!("exec-floor: {}: {e}", program.to_string_lossy());
    std::process::exit(127);
}
