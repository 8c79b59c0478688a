//! `smcrun`: runs a program with the smcrun shim preloaded (same PID, same argv, same exit status),
//! and gives the operator's views of SMC on this host.
//!
//! `smcrun [OPTIONS] [--] COMMAND [ARGS...]` execs COMMAND; `smcrun SUBCOMMAND ...` runs one of the
//! built-in tools. A program whose name is also a subcommand is run with `smcrun -- NAME`.

mod admin;
mod bpf_cmd;
mod capture;
mod config;
mod demo;
mod doctor_cmd;
mod exec;
mod exporter;
mod lgr_view;
mod monitor;
mod owners;
mod policy_cmd;
mod preload;
mod procs;
mod rdma_view;
mod signals;
mod smc_procs;
mod stats_view;
mod suggest;
mod sysctl;
mod systemd;
mod viewfmt;
mod views;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

/// Top-level command line.
#[derive(Parser, Debug)]
#[command(
    name = "smcrun",
    version,
    about = "Run unmodified TCP programs over Linux SMC (SMC-R / SMC-D), falling back to TCP",
    disable_version_flag = true,
    subcommand_value_name = "COMMAND",
    after_help = "Run a program: smcrun [OPTIONS] [--] COMMAND [ARGS...]\n\
                  Exit status: the program's own; 2 bad usage, 126 not executable, 127 not found."
)]
struct Cli {
    #[command(flatten)]
    run: exec::RunOptions,

    /// Print the version and exit (smc_run's -v).
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,

    #[command(subcommand)]
    command: Option<Command>,
}

/// The built-in tools; anything else is a program to run.
#[derive(Subcommand, Debug)]
enum Command {
    /// Run a TCP echo server and client under the shim on 127.0.0.1 and say, per connection,
    /// whether it ran over SMC-R, SMC-D or TCP, and why.
    Demo(demo::DemoArgs),
    /// Set up the host for SMC: soft-RoCE devices for hosts without RDMA hardware.
    #[command(subcommand)]
    Setup(admin::SetupCommand),
    /// Show or change the SMC user EIDs (needed for SMC-Rv2).
    #[command(subcommand)]
    Ueid(admin::UeidCommand),
    /// Show or change the SMC PNET table (which netdev or RDMA device belongs to which PNET ID).
    #[command(subcommand)]
    Pnet(admin::PnetCommand),
    /// SMC sockets on this host, like smcss: state, addresses, mode, and why a fallback happened.
    Ss(views::SsArgs),
    /// SMC statistics of this network namespace, like `smcr stats`.
    Stats(stats_view::StatsArgs),
    /// SMC-R link groups, like `smcr linkgroup`.
    Linkgroup(lgr_view::LinkGroupArgs),
    /// SMC-R links, like `smcr linkgroup link-show`.
    Link(lgr_view::JsonArgs),
    /// SMC devices and their ports, like `smcr device`.
    Device(lgr_view::JsonArgs),
    /// What this kernel's SMC can do: version, v2 support, host name, EIDs.
    Info(lgr_view::JsonArgs),
    /// RDMA resources per device (used counts) and the objects with owner and state.
    Rdma(rdma_view::RdmaArgs),
    /// Live SMC rates, connections and buffer memory, one line per interval (smc_monitor_ex).
    Monitor(monitor::MonitorArgs),
    /// Programs running under smcrun: their connections over SMC-R, SMC-D and TCP.
    Ps(procs::PsArgs),
    /// One program's connections under smcrun, each with its mode and why it was not SMC.
    Why(procs::WhyArgs),
    /// BPF mode: make every new TCP socket of a cgroup v2 subtree SMC (`--cgroup PATH`), or list
    /// what is attached (`--list`).
    Attach(bpf_cmd::AttachArgs),
    /// BPF mode: stop making a cgroup's sockets SMC.
    Detach(bpf_cmd::DetachArgs),
    /// Serve the SMC metrics to Prometheus over HTTP (127.0.0.1:9609), or write them as a
    /// node_exporter textfile (--textfile DIR).
    Exporter(exporter::ExporterArgs),
    /// Print one scrape of the SMC metrics (Prometheus text format).
    Metrics(exporter::MetricsArgs),
    /// Check this host for SMC (kernel, modules, RDMA, UEID, PNET, sysctls, the live counters)
    /// and, with `-- PROGRAM`, whether smcrun can reach the program; one line of advice each.
    Doctor(doctor_cmd::DoctorArgs),
    /// Run a systemd service under smcrun: a drop-in wraps its ExecStart (then run
    /// `systemctl daemon-reload` and restart it).
    Enable(systemd::EnableArgs),
    /// Remove `smcrun enable`'s drop-in from a systemd service.
    Disable(systemd::DisableArgs),
    /// Check a policy: which rule a program's connect or bind matches, and the action.
    #[command(subcommand)]
    Policy(policy_cmd::PolicyCommand),
    /// Print a shell completion script: smcrun completions bash > /etc/bash_completion.d/smcrun
    Completions {
        /// bash, zsh, fish (or elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Hidden: write the man pages (smcrun.1 and one per subcommand) into DIR.
    #[command(hide = true, name = "__man")]
    Man {
        /// Directory to write the pages into.
        dir: std::path::PathBuf,
    },
    /// Hidden: save the kernel's raw netlink replies as test fixtures.
    #[command(hide = true, name = "__capture")]
    Capture(capture::CaptureArgs),
    /// Hidden: run the demo's echo pair inside this (preloaded) process.
    #[command(hide = true, name = "__demo-worker")]
    DemoWorker(demo::WorkerArgs),
    /// Hidden: every process holding SMC sockets, with modes, reasons and BPF scope (JSON).
    #[command(hide = true, name = "__smc-procs")]
    SmcProcs,
    /// A program to run under the shim.
    #[command(external_subcommand)]
    Run(Vec<OsString>),
}

fn main() -> ExitCode {
    viewfmt::install_stdout_guard();
    let args: Vec<OsString> = std::env::args_os().collect();
    let (head, forced) = exec::split_forced_command(&args);
    // The command tree is built once (it is most of what clap costs smcrun's start-up, which
    // every program started under smcrun pays): parsed with, and asked for the subcommands'
    // names.
    let mut tree = Cli::command();
    let parsed = match tree.try_get_matches_from_mut(head) {
        Ok(m) => Cli::from_arg_matches(&m).map_err(|e| e.format(&mut tree)),
        Err(e) => Err(e),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match (cli.command, forced) {
        (None, Some(cmd)) => match config::resolve(&cli.run) {
            Ok(opts) => run_program(&opts, cmd),
            Err(code) => code,
        },
        (Some(Command::Run(cmd)), None) => {
            let subs: Vec<&str> = tree
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .collect();
            if let Some(code) = suggest::before_run(&cmd, &subs) {
                return code;
            }
            match config::resolve(&cli.run) {
                Ok(opts) => run_program(&opts, cmd),
                Err(code) => code,
            }
        }
        (Some(_), Some(_)) => {
            eprintln!("smcrun: a subcommand and `-- COMMAND` cannot be combined");
            ExitCode::from(2)
        }
        (None, None) => {
            eprintln!(
                "smcrun: no command given\n\n{}",
                Cli::command().render_help()
            );
            ExitCode::from(2)
        }
        (Some(Command::Completions { shell }), None) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "smcrun", &mut out);
            viewfmt::write_stdout(&out)
        }
        (Some(Command::Man { dir }), None) => {
            match std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir))
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("smcrun __man: {}: {e}", dir.display());
                    ExitCode::from(1)
                }
            }
        }
        (Some(Command::Demo(a)), None) => match config::resolve(&cli.run) {
            Ok(opts) => demo::run(&opts, &a),
            Err(code) => code,
        },
        (Some(Command::DemoWorker(a)), None) => demo::worker(&a),
        (Some(Command::Setup(c)), None) => admin::setup(c),
        (Some(Command::Ueid(c)), None) => admin::ueid(c),
        (Some(Command::Pnet(c)), None) => admin::pnet(c),
        (Some(Command::Ss(a)), None) => views::ss(&a),
        (Some(Command::Stats(a)), None) => stats_view::stats(&a),
        (Some(Command::Linkgroup(a)), None) => lgr_view::linkgroup(&a),
        (Some(Command::Link(a)), None) => lgr_view::link(&a),
        (Some(Command::Device(a)), None) => lgr_view::device(&a),
        (Some(Command::Info(a)), None) => lgr_view::info(&a),
        (Some(Command::Rdma(a)), None) => rdma_view::rdma(&a),
        (Some(Command::Monitor(a)), None) => monitor::monitor(&a),
        (Some(Command::Capture(a)), None) => capture::run(&a),
        (Some(Command::Policy(c)), None) => policy_cmd::run(c),
        (Some(Command::Ps(a)), None) => procs::ps(&a),
        (Some(Command::Why(a)), None) => procs::why(&a),
        (Some(Command::Attach(a)), None) => bpf_cmd::attach(&a),
        (Some(Command::Detach(a)), None) => bpf_cmd::detach(&a),
        (Some(Command::SmcProcs), None) => smc_procs::print_json(),
        (Some(Command::Exporter(a)), None) => exporter::exporter(&a),
        (Some(Command::Metrics(a)), None) => exporter::metrics(&a),
        (Some(Command::Doctor(a)), None) => doctor_cmd::run(&a),
        (Some(Command::Enable(a)), None) => systemd::enable(&a),
        (Some(Command::Disable(a)), None) => systemd::disable(&a),
    }
}

/// Runs a program under smcrun: through the kernel's socket() hook with `--bpf`, else preloaded.
fn run_program(opts: &exec::RunOptions, cmd: Vec<OsString>) -> ExitCode {
    match opts.bpf {
        Some(mode) => bpf_cmd::run(opts, mode, cmd),
        None => exec::run(opts, cmd),
    }
}
