//! Operator views over the telemetry crate (placeholder until written).

use clap::Args;
use std::process::ExitCode;

/// `smcrun ss` arguments.
#[derive(Args, Debug)]
pub struct SsArgs {}

/// `smcrun stats` arguments.
#[derive(Args, Debug)]
pub struct StatsArgs {}

pub fn ss(_a: &SsArgs) -> ExitCode {
    ExitCode::from(1)
}
pub fn stats(_a: &StatsArgs) -> ExitCode {
    ExitCode::from(1)
}
