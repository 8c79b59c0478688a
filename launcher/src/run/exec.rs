//! `smcrun [OPTIONS] [--] COMMAND [ARGS...]`: prepare the environment for the shim and replace
//! this process with COMMAND, so the program keeps smcrun's PID, receives its argv byte for byte,
//! and its exit status and signals are its own. This is what makes smcrun fit as a container
//! entrypoint.

use crate::run::preload;
use crate::run::sysctl;
use crate::status::{Exit, Failure, Outcome};
use clap::Args;
use smcrun_settings::{self as settings, Fallback, Mode};
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Options for the program smcrun runs (and for `smcrun demo`, which runs one too).
#[derive(Args, Debug, Default, Clone)]
pub struct RunOptions {
    /// One stderr line per converted socket and per fallback (SMCRUN_DEBUG=1); twice for bind,
    /// connect and an exit summary (SMCRUN_DEBUG=2). smc_run's -d.
    #[arg(short = 'd', long = "debug", action = clap::ArgAction::Count)]
    pub debug: u8,
    /// Receive buffer of converted sockets (SMCRUN_RCVBUF), e.g. 256k or 1m; raises
    /// net.core.rmem_max when it is smaller. smc_run's -r.
    #[arg(short = 'r', long = "rcvbuf", value_name = "SIZE", allow_hyphen_values = true,
          value_parser = text(size_arg))]
    pub rcvbuf: Option<i32>,
    /// Send buffer of converted sockets (SMCRUN_SNDBUF), e.g. 256k or 1m; raises
    /// net.core.wmem_max when it is smaller. smc_run's -t.
    #[arg(short = 't', long = "sndbuf", value_name = "SIZE", allow_hyphen_values = true,
          value_parser = text(size_arg))]
    pub sndbuf: Option<i32>,
    /// How SMC sockets are made: smc (AF_SMC), inet (IPPROTO_SMC, Linux 6.11+) or auto
    /// (SMCRUN_MODE; default auto: inet if the kernel has it, else smc).
    #[arg(long, value_name = "MODE", value_parser = Text(mode_arg, Some(mode_words)))]
    pub mode: Option<Mode>,
    /// What to do when the kernel refuses an SMC socket: tcp (make the TCP socket the program
    /// asked for; default) or strict (return the error) (SMCRUN_FALLBACK).
    #[arg(long, value_name = "HOW", value_parser = Text(fallback_arg, Some(fallback_words)))]
    pub fallback: Option<Fallback>,
    /// Set a net.smc.* or net.core.* sysctl before starting the program (repeatable; needs root).
    #[arg(long = "sysctl", value_name = "KEY=VALUE", value_parser = text(sysctl::parse_assignment))]
    pub sysctl: Vec<sysctl::Assignment>,
    /// When a --sysctl cannot be set, warn and go on instead of refusing to start.
    #[arg(long)]
    pub sysctl_best_effort: bool,
    /// Refuse to start a program that LD_PRELOAD cannot reach (static, setuid/setgid, Go).
    #[arg(long)]
    pub require_preload: bool,
    /// Print a one-line summary of the program's connections on stderr when it exits
    /// (SMCRUN_REPORT=1).
    #[arg(long)]
    pub report: bool,
    /// Which sockets get SMC and which stay TCP, first match wins, e.g. 'smc port 6379,3306; tcp'
    /// (SMCRUN_POLICY; try it with `smcrun policy check`). Overrides the policy of --config.
    #[arg(long, value_name = "POLICY", value_parser = text(|s: &str| Ok::<_, String>(s.to_string())))]
    pub policy: Option<String>,
    /// Read the settings from a TOML file (mode, fallback, debug, sndbuf, rcvbuf, report, sysctl,
    /// policy, ...); options on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// BPF mode: the command and all its descendants get SMC sockets through the kernel's
    /// socket() hook, static, Go and setuid programs too (Linux 6.11+, root); `--bpf=auto`: BPF
    /// mode where the kernel allows it, else the preload.
    #[arg(long, value_name = "WHEN", num_args = 0..=1, require_equals = true,
          default_missing_value = "on", value_enum)]
    pub bpf: Option<crate::run::bpf::BpfMode>,
}

/// The value parser of the options whose values are text: one that is not UTF-8 is refused naming
/// its option (clap's own error says only "invalid UTF-8"), and the parser's refusal names the
/// option and the value.
/// With `words`, the values are a fixed set of words (`--mode`'s), which --help and the shells'
/// completions list (the parser still decides, with its own one-line refusal).
#[derive(Clone)]
pub struct Text<T>(
    pub fn(&str) -> Result<T, String>,
    pub Option<fn() -> Vec<&'static str>>,
);

/// A [`Text`] parser of free text (no fixed set of words).
const fn text<T>(parse: fn(&str) -> Result<T, String>) -> Text<T> {
    Text(parse, None)
}

fn mode_words() -> Vec<&'static str> {
    Mode::ALL.iter().map(|m| m.name()).collect()
}

fn fallback_words() -> Vec<&'static str> {
    Fallback::ALL.iter().map(|f| f.name()).collect()
}

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Text<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let name = arg.map_or_else(|| "the value".to_string(), |a| a.to_string());
        let refuse = |kind, msg: String| clap::Error::raw(kind, msg + "\n").with_cmd(cmd);
        let Some(text) = value.to_str() else {
            return Err(refuse(
                clap::error::ErrorKind::InvalidUtf8,
                format!("{name}: the value {value:?} is not UTF-8 text"),
            ));
        };
        (self.0)(text).map_err(|e| {
            refuse(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{text}' for '{name}': {e}"),
            )
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let words = (self.1?)();
        Some(Box::new(
            words.into_iter().map(clap::builder::PossibleValue::new),
        ))
    }
}

fn size_arg(s: &str) -> Result<i32, String> {
    settings::parse_size(s).ok_or_else(|| format!("expected {}", settings::SNDBUF.expected))
}

fn mode_arg(s: &str) -> Result<Mode, String> {
    settings::parse_mode(s).ok_or_else(|| format!("expected {}", settings::MODE.expected))
}

fn fallback_arg(s: &str) -> Result<Fallback, String> {
    settings::parse_fallback(s).ok_or_else(|| format!("expected {}", settings::FALLBACK.expected))
}

/// Options that take a value in the next word, so that `--` after them is still found.
const VALUE_OPTIONS: &[&str] = &[
    "-r",
    "-t",
    "--rcvbuf",
    "--sndbuf",
    "--mode",
    "--fallback",
    "--sysctl",
    "--policy",
    "--config",
];

/// Splits `smcrun [OPTIONS] -- COMMAND...` into the part clap parses and the forced command.
/// Only a `--` among the leading options counts: one after the command belongs to the command.
pub fn split_forced_command(args: &[OsString]) -> (Vec<OsString>, Option<Vec<OsString>>) {
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"--" {
            let rest = args[i + 1..].to_vec();
            return (args[..i].to_vec(), (!rest.is_empty()).then_some(rest));
        }
        if !a.starts_with(b"-") {
            break;
        }
        if VALUE_OPTIONS.iter().any(|o| o.as_bytes() == a) {
            i += 1;
        }
        i += 1;
    }
    (args.to_vec(), None)
}

/// The variables the shim reads, as the options set them (unset options leave the environment
/// as the caller had it, so `SMCRUN_*` exported by hand still apply).
pub fn shim_env(opts: &RunOptions) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    if opts.debug > 0 {
        env.push((settings::DEBUG.var, opts.debug.min(2).to_string()));
    }
    if let Some(n) = opts.rcvbuf {
        env.push((settings::RCVBUF.var, n.to_string()));
    }
    if let Some(n) = opts.sndbuf {
        env.push((settings::SNDBUF.var, n.to_string()));
    }
    if let Some(m) = opts.mode {
        env.push((settings::MODE.var, m.name().to_string()));
    }
    if let Some(f) = opts.fallback {
        env.push((settings::FALLBACK.var, f.name().to_string()));
    }
    if opts.report {
        env.push((settings::REPORT.var, "1".to_string()));
    }
    if let Some(p) = &opts.policy {
        env.push((settings::POLICY.var, p.clone()));
    }
    env
}

/// The run's `--sysctl`s, before anything starts: one that cannot be set refuses the run, or with
/// `--sysctl-best-effort` warns.
pub fn apply_sysctls(opts: &RunOptions) -> Result<(), Failure> {
    for a in &opts.sysctl {
        if let Err(e) = sysctl::apply(a) {
            if opts.sysctl_best_effort {
                eprintln!("smcrun: warning: {e}; going on (--sysctl-best-effort)");
            } else {
                return Err(Failure::new(
                    Exit::Failed,
                    format!("{e}; nothing was started (use --sysctl-best-effort to go on)"),
                ));
            }
        }
    }
    Ok(())
}

/// Everything before the exec: sysctls, buffer limits, LD_PRELOAD and the shim's variables.
/// Returns the refusal when the program must not be started.
pub fn prepare(opts: &RunOptions) -> Result<(), Failure> {
    let shim = preload::find_shim().map_err(|e| Failure::new(Exit::Failed, e.to_string()))?;
    apply_sysctls(opts)?;
    for (size, key) in [
        (opts.rcvbuf, "net.core.rmem_max"),
        (opts.sndbuf, "net.core.wmem_max"),
    ] {
        if let Some(size) = size {
            if let Err(e) = sysctl::raise_to(key, size as u64) {
                eprintln!("smcrun: warning: {e}; the buffer size may be capped");
            }
        }
    }
    let merged = preload::merge_ld_preload(std::env::var_os("LD_PRELOAD").as_deref(), &shim);
    std::env::set_var("LD_PRELOAD", merged);
    for (k, v) in shim_env(opts) {
        std::env::set_var(k, v);
    }
    Ok(())
}

/// Runs COMMAND in place of this process. Returns only when that is impossible.
pub fn run(opts: &RunOptions, cmd: Vec<OsString>) -> Outcome {
    let Some(program) = cmd.first() else {
        return Err(Failure::new(Exit::Usage, "no command given"));
    };
    let resolved = resolve_command(program)?;
    if let Some(problem) = preload::reach_problem(&resolved) {
        if opts.require_preload {
            return Err(Failure::new(
                Exit::NotExecutable,
                format!(
                    "{}: {problem}; not started (--require-preload)",
                    resolved.display()
                ),
            ));
        }
        eprintln!(
            "smcrun: warning: {}: {problem}; running it anyway, without SMC (smcrun --bpf reaches it)",
            resolved.display()
        );
    }
    check_mode(opts)?;
    prepare(opts)?;
    Err(exec(&resolved, &cmd))
}

/// Whether `socket(AF_SMC, SOCK_STREAM, 0)` works: the kernel has SMC.
fn af_smc_works() -> bool {
    use smcrun_sys::sock;
    match sock::socket(
        smcrun_sys::smc::AF_SMC,
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
        0,
    ) {
        Ok(fd) => {
            let _ = sock::close(fd);
            true
        }
        Err(_) => false,
    }
}

/// `--mode inet` (or SMCRUN_MODE=inet) on a kernel that refuses IPPROTO_SMC because it predates
/// it: one line naming what the kernel lacks and the version that has it. With `--fallback
/// strict` the program is not started (exit 125: every connection would fail); otherwise it runs
/// and its connections are TCP, as the fallback setting says.
fn check_mode(opts: &RunOptions) -> Result<(), Failure> {
    let env = |s: &settings::Setting| std::env::var(s.var).ok();
    let mode = opts
        .mode
        .or_else(|| env(&settings::MODE).and_then(|v| settings::parse_mode(&v)));
    if mode != Some(Mode::Inet) {
        return Ok(());
    }
    let Err(e) = smcrun_bpf::module_hold::probe() else {
        return Ok(());
    };
    let release = smcrun_kernel::features::kernel_release();
    let ipproto = smcrun_kernel::features::IPPROTO_SMC;
    if e.raw_os_error() != Some(libc::EPROTONOSUPPORT)
        || ipproto.missing_in(&release) != Some(true)
        || !af_smc_works()
    {
        return Ok(()); // no SMC at all, or another refusal: the shim says why, per socket
    }
    let fallback = opts
        .fallback
        .or_else(|| env(&settings::FALLBACK).and_then(|v| settings::parse_fallback(&v)));
    let lacking = ipproto.lacking(&release);
    if fallback == Some(Fallback::Strict) {
        return Err(Failure::new(
            Exit::Unavailable,
            format!("--mode inet: {lacking}; not started (--fallback strict; --mode auto uses AF_SMC here)"),
        ));
    }
    eprintln!("smcrun: warning: --mode inet: {lacking}; its connections run over TCP (--mode auto uses AF_SMC here)");
    Ok(())
}

/// Finds what execvp would run, reporting 127 (not found) or 126 (not executable) as a shell does.
pub(crate) fn resolve_command(program: &OsStr) -> Result<PathBuf, Failure> {
    preload::find_program(program).map_err(|e| match e {
        preload::NotFound::NotExecutable(c) => Failure::new(
            Exit::NotExecutable,
            format!("{}: not an executable file", c.display()),
        ),
        preload::NotFound::Missing => Failure::new(
            Exit::NotFound,
            format!("{}: command not found", program.to_string_lossy()),
        ),
    })
}

/// execv() of the resolved path with the caller's argv[0] and arguments, unchanged; returns
/// only when that is impossible, with why.
pub fn exec(path: &Path, argv: &[OsString]) -> Failure {
    let to_c = |s: &OsStr| CString::new(s.as_bytes().to_vec());
    let c_path = match to_c(path.as_os_str()) {
        Ok(p) => p,
        Err(_) => {
            return Failure::new(
                Exit::Usage,
                format!("{}: the path contains a NUL byte", path.display()),
            );
        }
    };
    let mut c_argv = Vec::with_capacity(argv.len());
    for a in argv {
        match CString::new(a.clone().into_vec()) {
            Ok(c) => c_argv.push(c),
            Err(_) => {
                return Failure::new(
                    Exit::Usage,
                    format!("an argument contains a NUL byte: {a:?}"),
                );
            }
        }
    }
    crate::run::signals::restore_inherited();
    let mut err = nix::unistd::execv(&c_path, &c_argv).unwrap_err();
    if err == nix::errno::Errno::ENOEXEC {
        // A script without a #! line: run it with /bin/sh, as execvp(3) and shells do.
        let mut sh_argv = vec![CString::from(c"sh"), c_path.clone()];
        sh_argv.extend(c_argv.iter().skip(1).cloned());
        err = nix::unistd::execv(c"/bin/sh", &sh_argv).unwrap_err();
    }
    let exit = if err == nix::errno::Errno::ENOENT {
        Exit::NotFound
    } else {
        Exit::NotExecutable
    };
    Failure::new(exit, format!("{}: cannot execute: {err}", path.display()))
}
