//! `smcrun handshake load|unload|status`: the policy's role, address and port rules decided by
//! the kernel at each SMC connection's SYN and SYN-ACK (Linux 6.19's smc_hs_ctrl), for every
//! program of a network namespace, preloaded or not. The kernel side lives in
//! `smcrun_bpf::handshake`; this file reads the policy, refuses, and prints.

use crate::cmd::format::{print_json, print_lines};
use crate::status::{Exit, Failure, Outcome};
use clap::{Args, Subcommand};
use serde::Serialize;
use smcrun_bpf::handshake::{self, Status};
use smcrun_bpf::hsrules;
use smcrun_policy::Policy;
use smcrun_views::handshake::{HandshakePolicyView, HandshakeStatusView};
use std::path::PathBuf;

/// `smcrun handshake ...`.
#[derive(Subcommand, Debug)]
pub enum HandshakeCommand {
    /// Load a policy into the kernel's SMC handshake (net.smc.hs_ctrl) of a network namespace:
    /// its role, address and port rules decide, per connection, SMC or TCP for every program
    /// there (Linux 6.19+); a second load replaces the policy.
    Load(LoadArgs),
    /// Clear the namespace's handshake policy (net.smc.hs_ctrl) and remove its maps.
    Unload(NetnsArgs),
    /// What net.smc.hs_ctrl selects in the namespace, smcrun's policy there and the kernel's
    /// counts of connections it decided.
    Status(NetnsArgs),
}

/// `smcrun handshake load`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The policy (role, remote, local and port rules; no program rules), e.g.
    /// 'smc port 6379; tcp'.
    #[arg(
        long,
        value_name = "POLICY",
        conflicts_with = "config",
        required_unless_present = "config"
    )]
    pub policy: Option<String>,
    /// A config file whose policy to load.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub ns: NetnsArgs,
}

/// The namespace and output of every `handshake` command.
#[derive(Args, Debug)]
pub struct NetnsArgs {
    /// The network namespace: its file (/run/netns/NAME, /proc/PID/ns/net) or a process id in
    /// it, as for `smcrun attach --netns`; default: smcrun's own.
    #[arg(long, value_name = "PATH|PID")]
    pub netns: Option<String>,
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// Runs `smcrun handshake ...`.
pub fn run(cmd: HandshakeCommand) -> Outcome {
    match cmd {
        HandshakeCommand::Load(a) => load(&a),
        HandshakeCommand::Unload(a) => unload(&a),
        HandshakeCommand::Status(a) => status(&a),
    }
}

fn policy_of(args: &LoadArgs) -> Result<Policy, String> {
    if let Some(text) = &args.policy {
        return Policy::parse(text).map_err(|e| format!("--policy: {e}"));
    }
    match &args.config {
        Some(path) => crate::run::config_file::load(path)?
            .policy
            .ok_or_else(|| format!("{}: the config has no policy to load", path.display())),
        None => Err("handshake load needs --policy POLICY or --config FILE".into()),
    }
}

/// The kernel's support, as the one line and status every command refuses with.
fn supported() -> Result<(), Failure> {
    handshake::support().map_err(|why| Failure::new(Exit::Unavailable, format!("handshake: {why}")))
}

#[derive(Serialize)]
struct LoadJson {
    netns: u64,
    name: String,
    policy: String,
    replaced: bool,
}

fn load(args: &LoadArgs) -> Outcome {
    let policy = match policy_of(args) {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::new(
                Exit::Usage,
                format!("{e} (nothing was loaded)"),
            ))
        }
    };
    let a = hsrules::analyse(&policy);
    let Some(table) = a.table else {
        return Err(Failure::new(Exit::Usage, format!("handshake load: the policy's {}; the handshake cannot honour it (nothing was loaded; see smcrun policy check)", a.refusal().unwrap_or_default())),
        );
    };
    supported()?;
    let text = policy.to_string();
    match handshake::load(args.ns.netns.as_deref(), &table, &text) {
        Ok(l) if args.ns.json => print_json(&LoadJson {
            netns: l.netns,
            name: l.name,
            policy: text,
            replaced: l.replaced,
        }),
        Ok(l) => print_lines([format!(
            "handshake policy {} in network namespace {} (net.smc.hs_ctrl = {}): {}",
            if l.replaced { "replaced" } else { "loaded" },
            l.netns,
            l.name,
            if text.is_empty() {
                "none (every connection SMC)"
            } else {
                &text
            }
        )]),
        Err(e) => Err(Failure::new(Exit::Failed, format!("handshake load: {e}"))),
    }
}

fn status_json(s: &Status) -> HandshakeStatusView {
    HandshakeStatusView {
        netns: s.netns,
        selected: s.selected.clone(),
        policy: s.policy.as_ref().map(|p| HandshakePolicyView {
            text: p.text.clone(),
            since_unix: p.since_unix,
            selected: p.selected,
            client_smc: p.counters.client_smc,
            client_tcp: p.counters.client_tcp,
            server_smc: p.counters.server_smc,
            server_tcp: p.counters.server_tcp,
        }),
    }
}

fn status_lines(s: &Status) -> Vec<String> {
    let mut out = vec![format!(
        "network namespace {}: net.smc.hs_ctrl = {}",
        s.netns,
        if s.selected.is_empty() {
            "(nothing)"
        } else {
            &s.selected
        }
    )];
    match &s.policy {
        Some(p) => {
            out.push(format!(
                "policy: {}{}",
                if p.text.is_empty() {
                    "none (every connection SMC)"
                } else {
                    &p.text
                },
                if p.selected {
                    ""
                } else {
                    " (loaded but not selected)"
                }
            ));
            let c = p.counters;
            out.push(format!(
                "decided: client SYNs {} SMC, {} TCP; server SYN-ACKs {} SMC, {} TCP",
                c.client_smc, c.client_tcp, c.server_smc, c.server_tcp
            ));
        }
        None => out.push("no smcrun handshake policy here".into()),
    }
    out
}

fn status(args: &NetnsArgs) -> Outcome {
    supported()?;
    match handshake::status(args.netns.as_deref()) {
        Ok(s) if args.json => print_json(&status_json(&s)),
        Ok(s) => print_lines(status_lines(&s)),
        Err(e) => Err(Failure::new(Exit::Failed, format!("handshake status: {e}"))),
    }
}

fn unload(args: &NetnsArgs) -> Outcome {
    supported()?;
    match handshake::unload(args.netns.as_deref()) {
        Ok(s) if args.json => print_json(&status_json(&s)),
        Ok(s) => {
            let mut lines = status_lines(&s);
            lines.push(
                "unloaded: net.smc.hs_ctrl is clear, every SMC connection negotiates SMC again"
                    .into(),
            );
            print_lines(lines)
        }
        Err(e) => Err(Failure::new(Exit::Failed, format!("handshake unload: {e}"))),
    }
}
