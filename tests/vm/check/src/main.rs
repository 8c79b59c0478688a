//! `vmcheck`: what the VM's guest checks (`tests/vm/guest/checks*.sh`) ask of smcrun's JSON,
//! answered by reading it into the views' own types (`smcrun_views`), so a renamed or retyped
//! field fails to build here instead of making a `jq` filter quietly match nothing.
//!
//! Each subcommand is one question. It prints one line and exits 0 when the answer is yes, and
//! prints why not (the values it read) and exits 1 when it is no; with `--wait TENTHS` it asks
//! again every tenth of a second until yes or the time is up, for numbers that settle (the
//! agent's state, a report the runtime writes on its own beat). The shell keeps what it is good
//! at: starting programs, fifos, signals, `fail`.

mod agent;
mod bpf;
mod demo;
mod doctor;
mod error;
mod exporter;
mod handshake;
mod linkgroup;
mod monitor;
mod ps;
mod smcd;
mod source;
mod ss;
mod stats;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

/// The answer to one question.
pub enum Answer {
    /// Yes: the line to print.
    Yes(String),
    /// Not yet: asked again while `--wait` allows; what was read, for the message.
    NotYet(String),
    /// No, and waiting cannot change it: what was read.
    No(String),
}

#[derive(Parser)]
#[command(
    name = "vmcheck",
    about = "The VM guest checks' questions about smcrun's JSON"
)]
struct Cli {
    /// Ask again every 0.1 s for up to this many tenths of a second while the answer is "not yet".
    #[arg(long, default_value_t = 0, global = true)]
    wait: u32,
    #[command(subcommand)]
    question: Question,
}

#[derive(Subcommand)]
enum Question {
    #[command(flatten)]
    Agent(agent::Question),
    #[command(flatten)]
    Demo(demo::Question),
    #[command(flatten)]
    Handshake(handshake::Question),
    #[command(flatten)]
    Ss(ss::Question),
    #[command(flatten)]
    Doctor(doctor::Question),
    #[command(flatten)]
    Bpf(bpf::Question),
    #[command(flatten)]
    Exporter(exporter::Question),
    #[command(flatten)]
    Ps(ps::Question),
    #[command(flatten)]
    Stats(stats::Question),
    #[command(flatten)]
    Error(error::Question),
    #[command(flatten)]
    Linkgroup(linkgroup::Question),
    #[command(flatten)]
    Monitor(monitor::Question),
    #[command(flatten)]
    Smcd(smcd::Question),
}

fn ask(q: &Question) -> Answer {
    match q {
        Question::Agent(q) => q.ask(),
        Question::Demo(q) => q.ask(),
        Question::Handshake(q) => q.ask(),
        Question::Ss(q) => q.ask(),
        Question::Doctor(q) => q.ask(),
        Question::Bpf(q) => q.ask(),
        Question::Exporter(q) => q.ask(),
        Question::Ps(q) => q.ask(),
        Question::Stats(q) => q.ask(),
        Question::Error(q) => q.ask(),
        Question::Linkgroup(q) => q.ask(),
        Question::Monitor(q) => q.ask(),
        Question::Smcd(q) => q.ask(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut tries = cli.wait;
    loop {
        match ask(&cli.question) {
            Answer::Yes(line) => {
                if !line.is_empty() {
                    println!("{line}");
                }
                return ExitCode::SUCCESS;
            }
            Answer::NotYet(_) if tries > 0 => {
                tries -= 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Answer::NotYet(why) | Answer::No(why) => {
                println!("{why}");
                return ExitCode::FAILURE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every module's questions share one list of subcommands: two with one name, or a bad
    /// argument definition, fail here rather than in the guest.
    #[test]
    fn the_questions_make_one_command_line() {
        Cli::command().debug_assert();
    }
}
