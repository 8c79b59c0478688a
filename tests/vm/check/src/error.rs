//! The question about a failed `--json` command's stdout: is it the error object of the line it
//! printed on stderr.

use crate::source::{self, compact};
use crate::Answer::{self, No, Yes};
use clap::Subcommand;
use smcrun_views::error::ErrorView;

/// What a check asks of a failed `smcrun ... --json`'s stdout.
#[derive(Subcommand)]
pub enum Question {
    /// FILE, a failed `smcrun ... --json`'s saved stdout, is its error object: `error` is LINE
    /// (what it printed on stderr) and `exit_code` is EXIT.
    ErrorObject {
        file: String,
        line: String,
        exit: u8,
    },
}

impl Question {
    pub fn ask(&self) -> Answer {
        match self {
            Question::ErrorObject { file, line, exit } => {
                source::with_file(file, |e: &ErrorView| {
                    if e.error == line.as_str() && e.exit_code == *exit {
                        Yes(String::new())
                    } else {
                        No(format!(
                            "stdout is not the error object {{error: the line on stderr, exit_code: {exit}}}: {}",
                            compact(e)
                        ))
                    }
                })
            }
        }
    }
}
