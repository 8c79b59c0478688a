//! `smcrun`: runs a program with the smcrun shim preloaded (same PID, same argv, same exit status),
//! and gives the operator's views of SMC on this host.
//!
//! `smcrun [OPTIONS] [--] COMMAND [ARGS...]` execs COMMAND; `smcrun SUBCOMMAND ...` runs one of the
//! built-in tools. A program whose name is also a subcommand is run with `smcrun -- NAME`.

// The few calls with no safe equivalent (fork, _exit, signal handlers, dlsym, localtime_r,
// close_range) allow unsafe code where they are, each with its SAFETY.
#![deny(unsafe_code)]
// The entry point is `start::main`, without std's start-up (see there); the unit tests' is
// libtest's.
#![cfg_attr(not(test), no_main)]

mod admin;
mod cmd;
mod completions;
#[cfg(test)]
mod doc_links;
mod man;
#[cfg(test)]
mod reference;
mod run;
mod start;
mod status;

use crate::status::{Exit, Failure, Outcome};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
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
    run: run::exec::RunOptions,

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
    Demo(run::demo::DemoArgs),
    /// Set up the host for SMC: soft-RoCE devices for hosts without RDMA hardware.
    #[command(subcommand)]
    Setup(admin::host_setup::SetupCommand),
    /// Show or change the SMC user EIDs (needed for SMC-Rv2).
    #[command(subcommand)]
    Ueid(admin::host_setup::UeidCommand),
    /// Show or change the SMC PNET table (which netdev or RDMA device belongs to which PNET ID).
    #[command(subcommand)]
    Pnet(admin::host_setup::PnetCommand),
    /// SMC sockets on this host, like smcss: state, addresses, mode, and why a fallback happened.
    Ss(cmd::ss::SsArgs),
    /// SMC statistics of this network namespace, like `smcr stats`.
    Stats(cmd::stats::StatsArgs),
    /// SMC-R link groups, like `smcr linkgroup`.
    Linkgroup(cmd::linkgroup::LinkGroupArgs),
    /// SMC-R links, like `smcr linkgroup link-show`.
    Link(cmd::linkgroup::JsonArgs),
    /// SMC devices and their ports, like `smcr device`.
    Device(cmd::linkgroup::JsonArgs),
    /// What this kernel's SMC can do: version, v2 support, host name, EIDs.
    Info(cmd::linkgroup::JsonArgs),
    /// RDMA resources per device (used counts) and the objects with owner and state.
    Rdma(cmd::rdma::RdmaArgs),
    /// Live SMC rates, connections and buffer memory, one line per interval (smc_monitor_ex).
    Monitor(cmd::monitor::MonitorArgs),
    /// Programs running under smcrun: their connections over SMC-R, SMC-D and TCP.
    Ps(cmd::ps::PsArgs),
    /// One program's connections under smcrun, each with its mode and why it was not SMC.
    Why(cmd::ps::WhyArgs),
    /// BPF mode: make every new TCP socket of a cgroup v2 subtree (`--cgroup PATH`) or a network
    /// namespace (`--netns PATH|PID`) SMC, or list what is attached (`--list`).
    Attach(run::bpf::AttachArgs),
    /// BPF mode: stop making a cgroup's or a network namespace's sockets SMC.
    Detach(run::bpf::DetachArgs),
    /// The handshake policy (Linux 6.19+): the kernel decides SMC or TCP per connection by
    /// port, address and role for every program of a network namespace (load, unload, status).
    #[command(subcommand)]
    Handshake(run::handshake::HandshakeCommand),
    /// Serve the SMC metrics to Prometheus over HTTP (127.0.0.1:9609), or write them as a
    /// node_exporter textfile (--textfile DIR).
    Exporter(cmd::exporter::ExporterArgs),
    /// Root daemon: record every SMC socket from the kernel (process, cgroup, mode, device or
    /// fallback reason, bytes) for ps, why, ss -p and the exporter.
    Agent(cmd::agent::AgentArgs),
    /// Print one scrape of the SMC metrics (Prometheus text format).
    Metrics(cmd::exporter::MetricsArgs),
    /// Check this host for SMC (kernel, modules, RDMA, UEID, PNET, sysctls, the live counters)
    /// and, with `-- PROGRAM`, whether smcrun can reach the program; one line of advice each.
    Doctor(cmd::doctor::DoctorArgs),
    /// Run a systemd service under smcrun: a drop-in wraps its ExecStart (then run
    /// `systemctl daemon-reload` and restart it).
    Enable(admin::systemd::EnableArgs),
    /// Remove `smcrun enable`'s drop-in from a systemd service.
    Disable(admin::systemd::DisableArgs),
    /// Check a policy: which rule a program's connect or bind matches, and the action.
    #[command(subcommand)]
    Policy(run::policy_check::PolicyCommand),
    /// Print a shell completion script: smcrun completions bash > /etc/bash_completion.d/smcrun
    Completions {
        /// bash, zsh, fish (or elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Write the man pages (smcrun.1 and one smcrun-COMMAND.1 per subcommand) into DIR; the
    /// Debian package installs them (man smcrun, man smcrun-doctor).
    Man {
        /// Directory to write the pages into.
        dir: std::path::PathBuf,
    },
    /// Hidden: save the kernel's raw netlink replies as test fixtures.
    #[command(hide = true, name = "__capture")]
    Capture(admin::capture::CaptureArgs),
    /// Hidden: run the demo's echo pair inside this (preloaded) process.
    #[command(hide = true, name = "__demo-worker")]
    DemoWorker(run::demo::WorkerArgs),
    /// A program to run under the shim.
    #[command(external_subcommand)]
    Run(Vec<OsString>),
}

/// The names of the subcommands an operator is shown (and clap's `help`): a program's name close
/// to one gets a "did you mean"; a first word equal to one is never a program. The test
/// `subcommand_names_are_the_trees` keeps this the command tree's own list.
const SUBCOMMANDS: &[&str] = &[
    "demo",
    "setup",
    "ueid",
    "pnet",
    "ss",
    "stats",
    "linkgroup",
    "link",
    "device",
    "info",
    "rdma",
    "monitor",
    "ps",
    "why",
    "attach",
    "detach",
    "handshake",
    "exporter",
    "agent",
    "metrics",
    "doctor",
    "enable",
    "disable",
    "policy",
    "completions",
    "man",
    "help",
];

/// `smcrun [OPTIONS] COMMAND [ARGS...]` when COMMAND is a program: the run options and the
/// program, parsed without the subcommands' tree.
#[derive(Parser, Debug)]
#[command(name = "smcrun", disable_help_flag = true)]
struct RunLine {
    #[command(flatten)]
    run: run::exec::RunOptions,

    /// The program and its arguments (empty with `-- COMMAND`, which is split off before).
    #[arg(trailing_var_arg = true, allow_hyphen_values = false)]
    command: Vec<OsString>,
}

impl RunLine {
    /// The run line of `head` (the arguments before a forced `-- COMMAND`, if `forced`), when the
    /// options parse and the program is the forced one or the first word after the options,
    /// which is not a subcommand's name (hidden ones start with `__`); None sends the line through
    /// the whole tree (subcommands, `--help`, `--version`, errors, no command at all).
    fn for_program(head: &[OsString], forced: bool) -> Option<RunLine> {
        let line = RunLine::try_parse_from(head).ok()?;
        if forced {
            return line.command.is_empty().then_some(line);
        }
        let first = line.command.first()?.as_encoded_bytes();
        let subcommand = first.starts_with(b"__")
            || first.starts_with(b"-")
            || SUBCOMMANDS.iter().any(|s| s.as_bytes() == first);
        (!subcommand).then_some(line)
    }
}

/// Everything smcrun does, called by [`start`]'s entry point.
fn smcrun_main(args: Vec<OsString>) -> ExitCode {
    cmd::format::install_stdout_guard();
    let (head, forced) = run::exec::split_forced_command(&args);
    // Running a program is what every program started under smcrun pays for, so it skips the
    // tree of every subcommand (most of what clap costs smcrun's start-up): parsed with the run
    // options alone. Anything else, an error included, goes through the whole tree below.
    if let Some(line) = RunLine::for_program(&head, forced.is_some()) {
        // `smcrun -- NAME` is the way to say NAME is meant: no "did you mean".
        let cmd = match forced {
            Some(cmd) => Ok(cmd),
            None => run::suggest::before_run(&line.command, SUBCOMMANDS).map(|()| line.command),
        };
        return status::finish(cmd.and_then(|cmd| run_program(&line.run, cmd)));
    }
    let asked_json = head.iter().skip(1).any(|a| a == "-j" || a == "--json");
    let parsed = Cli::command().try_get_matches_from(&head).and_then(|m| {
        cmd::format::set_json(json_asked(&m));
        Cli::from_arg_matches(&m)
    });
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            match cmd::exporter::unknown_collector(&e) {
                Some(line) => eprintln!("{line}"),
                None => drop(e.print()),
            }
            if asked_json {
                // The JSON error object carries clap's first line, the one that names the bad
                // value; the usage that follows it is for a person.
                let text = e.to_string();
                let first = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                cmd::format::print_error_object(Exit::Usage, &format!("smcrun: {first}"));
            }
            return ExitCode::from(Exit::Usage);
        }
        // --help, --version: their text is the output, and failing to write it is an error.
        Err(e) => return status::finish(cmd::format::stdout_result(e.print())),
    };
    status::finish(dispatch(cli, forced))
}

/// Runs what the parsed line asks for; the refusal, if any, is printed by `main`, once.
fn dispatch(cli: Cli, forced: Option<Vec<OsString>>) -> Outcome {
    match (cli.command, forced) {
        (None, Some(cmd)) => run_program(&cli.run, cmd),
        (Some(Command::Run(cmd)), None) => {
            run::suggest::before_run(&cmd, SUBCOMMANDS)?;
            run_program(&cli.run, cmd)
        }
        (Some(_), Some(_)) => Err(Failure::new(
            Exit::Usage,
            "a subcommand and `-- COMMAND` cannot be combined",
        )),
        (None, None) => Err(Failure::new(
            Exit::Usage,
            format!("no command given\n\n{}", Cli::command().render_help()),
        )),
        (Some(Command::Completions { shell }), None) => {
            cmd::format::write_stdout(&completions::script(shell, &Cli::command()))
        }
        (Some(Command::Man { dir }), None) => match man::write_pages(&Cli::command(), &dir) {
            Ok(_) => Ok(ExitCode::SUCCESS),
            Err(e) => Err(Failure::of(
                "smcrun man",
                Exit::Failed,
                format!("{}: {e}", dir.display()),
            )),
        },
        (Some(Command::Demo(a)), None) => run::demo::run(
            &run::config_file::resolve(&cli.run).map_err(not_started)?,
            &a,
        ),
        (Some(Command::DemoWorker(a)), None) => run::demo::worker(&a),
        (Some(Command::Setup(c)), None) => admin::host_setup::setup(c),
        (Some(Command::Ueid(c)), None) => admin::host_setup::ueid(c),
        (Some(Command::Pnet(c)), None) => admin::host_setup::pnet(c),
        (Some(Command::Ss(a)), None) => cmd::ss::ss(&a),
        (Some(Command::Stats(a)), None) => cmd::stats::stats(&a),
        (Some(Command::Linkgroup(a)), None) => cmd::linkgroup::linkgroup(&a),
        (Some(Command::Link(a)), None) => cmd::linkgroup::link(&a),
        (Some(Command::Device(a)), None) => cmd::linkgroup::device(&a),
        (Some(Command::Info(a)), None) => cmd::linkgroup::info(&a),
        (Some(Command::Rdma(a)), None) => cmd::rdma::rdma(&a),
        (Some(Command::Monitor(a)), None) => cmd::monitor::monitor(&a),
        (Some(Command::Capture(a)), None) => admin::capture::run(&a),
        (Some(Command::Policy(c)), None) => run::policy_check::run(c),
        (Some(Command::Ps(a)), None) => cmd::ps::ps(&a),
        (Some(Command::Why(a)), None) => cmd::ps::why(&a),
        (Some(Command::Attach(a)), None) => run::bpf::attach(&a),
        (Some(Command::Detach(a)), None) => run::bpf::detach(&a),
        (Some(Command::Handshake(c)), None) => run::handshake::run(c),
        (Some(Command::Exporter(a)), None) => cmd::exporter::exporter(&a),
        (Some(Command::Agent(a)), None) => cmd::agent::agent(&a),
        (Some(Command::Metrics(a)), None) => cmd::exporter::metrics(&a),
        (Some(Command::Doctor(a)), None) => cmd::doctor::run(&a),
        (Some(Command::Enable(a)), None) => admin::systemd::enable(&a),
        (Some(Command::Disable(a)), None) => admin::systemd::disable(&a),
    }
}

/// Whether the parsed line asked for JSON: a `json` flag set on the command or any subcommand
/// (`smcrun ueid show -j`), for the error object of [`cmd::format::fail`].
fn json_asked(m: &ArgMatches) -> bool {
    let here = matches!(m.try_get_one::<bool>("json"), Ok(Some(true)));
    here || m.subcommand().is_some_and(|(_, s)| json_asked(s))
}

/// Runs a program under smcrun (its options resolved with the config file's): through the
/// kernel's socket() hook with `--bpf`, else preloaded.
fn run_program(line: &run::exec::RunOptions, cmd: Vec<OsString>) -> Outcome {
    let opts = run::config_file::resolve(line).map_err(not_started)?;
    match opts.bpf {
        Some(mode) => run::bpf::run(&opts, mode, cmd),
        None => run::exec::run(&opts, cmd),
    }
}

/// A refusal before anything ran.
fn not_started(f: Failure) -> Failure {
    Failure {
        message: f.message + " (nothing was started)",
        ..f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> Vec<OsString> {
        std::iter::once("smcrun")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    /// SUBCOMMANDS is the tree's list of shown subcommands, and every hidden one starts with `__`
    /// (so that the run line never takes one for a program).
    #[test]
    fn subcommand_names_are_the_trees() {
        let mut tree = Cli::command();
        tree.build();
        let mut shown: Vec<&str> = tree
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name())
            .collect();
        let mut listed = SUBCOMMANDS.to_vec();
        shown.sort_unstable();
        listed.sort_unstable();
        assert_eq!(shown, listed);
        for s in tree.get_subcommands().filter(|s| s.is_hide_set()) {
            assert!(s.get_name().starts_with("__"), "{}", s.get_name());
        }
        assert!(tree
            .get_subcommands()
            .all(|s| s.get_all_aliases().count() == 0));
    }

    /// Every command that prints data takes `-j`/`--json` (iproute2's habit), the same flag
    /// everywhere; the daemons, the exporter's text format and the completion script do not.
    #[test]
    fn every_data_command_takes_dash_j() {
        fn walk(c: &clap::Command, path: String, out: &mut Vec<(String, bool)>) {
            let json = c.get_arguments().find(|a| a.get_id() == "json");
            if let Some(a) = json {
                assert_eq!(a.get_short(), Some('j'), "{path}: --json without -j");
                assert_eq!(a.get_long(), Some("json"), "{path}");
            }
            if c.get_subcommands().next().is_none() {
                out.push((path.clone(), json.is_some()));
            }
            for s in c
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            {
                walk(s, format!("{path} {}", s.get_name()), out);
            }
        }
        let mut tree = Cli::command();
        tree.build();
        let mut leaves = Vec::new();
        for s in tree.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(s, s.get_name().to_string(), &mut leaves);
        }
        let without: Vec<&str> = leaves
            .iter()
            .filter(|(_, j)| !j)
            .map(|(p, _)| p.as_str())
            .collect();
        // What prints no data to script against: changes that say one line (setup, ueid add,
        // pnet add, ...), daemons, Prometheus text, shell scripts, help.
        let allowed = [
            "setup soft-roce",
            "setup remove-soft-roce",
            "ueid add",
            "ueid del",
            "ueid flush",
            "pnet add",
            "pnet del",
            "pnet flush",
            "exporter",
            "agent",
            "metrics",
            "completions",
            "man",
            "help",
        ];
        for p in &without {
            assert!(
                allowed
                    .iter()
                    .any(|a| p == a || p.starts_with(&format!("{a} ")) || p.starts_with("help")),
                "`smcrun {p}` prints data but has no -j/--json"
            );
        }
    }

    /// Where the run line takes a program, the whole tree takes the same program with the same
    /// options; where it does not, the line is a subcommand, a flag of the tree or an error.
    #[test]
    fn the_run_line_agrees_with_the_tree() {
        let programs: &[&[&str]] = &[
            &["true"],
            &["redis-server", "--port", "7000"],
            &["-d", "-d", "curl", "-v", "http://x/"],
            &["--policy", "tcp", "--report", "nc", "-l", "1"],
            &["-t", "5", "stat", "-c", "%s", "/"],
            &["--config", "/dev/null", "python3", "-c", "print(1)"],
            &["doctr"],
            &["./ps"],
        ];
        for args in programs {
            let head = line(args);
            let fast = RunLine::for_program(&head, false)
                .unwrap_or_else(|| panic!("{args:?}: not a run line"));
            let cli = Cli::try_parse_from(&head).expect("the tree parses it");
            let Some(Command::Run(cmd)) = cli.command else {
                panic!("{args:?}: the tree runs no program")
            };
            assert_eq!(fast.command, cmd, "{args:?}");
            assert_eq!(
                format!("{:?}", fast.run),
                format!("{:?}", cli.run),
                "{args:?}"
            );
        }
        let others: &[&[&str]] = &[
            &[],
            &["ps"],
            &["-d", "stats", "--json"],
            &["help"],
            &["man", "/tmp/x"],
            &["--help"],
            &["-v"],
            &["--version"],
            &["-t", "-5", "true"],
            &["--no-such-option", "true"],
            &["-d"],
        ];
        for args in others {
            assert!(
                RunLine::for_program(&line(args), false).is_none(),
                "{args:?}"
            );
        }
        // `smcrun [OPTIONS] -- COMMAND`: the options before `--` alone.
        let (head, forced) = run::exec::split_forced_command(&line(&["-d", "--", "ps", "ax"]));
        assert!(forced.is_some());
        assert_eq!(
            RunLine::for_program(&head, true).map(|l| l.run.debug),
            Some(1)
        );
        let (head, _) = run::exec::split_forced_command(&line(&["ps", "--", "x"]));
        assert!(RunLine::for_program(&head, true).is_none());
    }
}
