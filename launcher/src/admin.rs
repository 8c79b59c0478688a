//! Host set-up through the kernel's netlink: soft-RoCE links, SMC user EIDs and the PNET table.
//! (Interface placeholder: being written in telemetry + here.)

use clap::Subcommand;
use std::process::ExitCode;

/// `smcrun setup ...`
#[derive(Subcommand, Debug)]
pub enum SetupCommand {}

/// `smcrun ueid ...`
#[derive(Subcommand, Debug)]
pub enum UeidCommand {}

/// `smcrun pnet ...`
#[derive(Subcommand, Debug)]
pub enum PnetCommand {}

pub fn setup(c: SetupCommand) -> ExitCode {
    match c {}
}
pub fn ueid(c: UeidCommand) -> ExitCode {
    match c {}
}
pub fn pnet(c: PnetCommand) -> ExitCode {
    match c {}
}
