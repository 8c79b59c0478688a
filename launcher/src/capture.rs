//! Fixture capture (placeholder until written).

use clap::Args;
use std::process::ExitCode;

/// `smcrun __capture` arguments.
#[derive(Args, Debug)]
pub struct CaptureArgs {}

pub fn run(_a: &CaptureArgs) -> ExitCode {
    ExitCode::from(1)
}
