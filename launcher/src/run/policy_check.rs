//! `smcrun policy check`: which rule of a policy a given program's connect or bind would match,
//! and whether that socket would get SMC or TCP, without running anything. The same parser and
//! matcher as the shim's, so the answer is the one a run would get.

use crate::run::config_file;
use crate::status::{Exit, Failure, Outcome};
use clap::{Args, Subcommand};
use serde::Serialize;
use smcrun_policy::{Action, Policy, Role};
use smcrun_settings::POLICY;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `smcrun policy ...`.
#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Print the rule that a program's connect or bind matches, and the action (smc or tcp);
    /// with the policy alone, check it, print it in its canonical form, one rule a line, and say
    /// which enforcement points honour it (the preload, BPF mode, the handshake).
    Check(CheckArgs),
}

/// `smcrun policy check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The policy, as given to `smcrun --policy` (default: the one in --config, else
    /// $SMCRUN_POLICY).
    #[arg(long, value_name = "POLICY", conflicts_with = "config")]
    pub policy: Option<String>,
    /// A config file whose policy to check.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The program: a name (matched as a basename) or a path (also matched by path globs).
    #[arg(long, value_name = "NAME")]
    pub program: Option<PathBuf>,
    /// Check a client connecting to ADDR:PORT (e.g. 10.0.0.5:6379 or [fd00::5]:6379).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "bind")]
    pub connect: Option<SocketAddr>,
    /// Check a server binding ADDR:PORT (e.g. 0.0.0.0:6379).
    #[arg(long, value_name = "ADDR:PORT")]
    pub bind: Option<SocketAddr>,
    /// For --connect: the address the client bound first, for rules with `local`.
    #[arg(long, value_name = "ADDR:PORT", requires = "connect")]
    pub local: Option<SocketAddr>,
    /// Say which rules BPF mode (`smcrun --bpf`, `smcrun attach`) honours in the kernel and which
    /// need the preload; exit 1 when it does not honour them all.
    #[arg(long, conflicts_with_all = ["program", "connect", "bind", "local"])]
    pub bpf: bool,
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// The matched rule in `--json`.
#[derive(Serialize)]
struct RuleJson {
    /// 0-based, as in the policy.
    index: usize,
    /// 1-based, as said in the text output.
    position: usize,
    /// Canonical text.
    text: String,
}

/// The answer in `--json`.
#[derive(Serialize)]
struct CheckJson {
    policy: String,
    program: String,
    role: &'static str,
    local: Option<String>,
    remote: Option<String>,
    /// The rule that matched, or null when the default applied.
    rule: Option<RuleJson>,
    /// The rule in words, as in the text output.
    matched: String,
    action: &'static str,
}

/// Where the policy comes from: --policy, --config, $SMCRUN_POLICY. The error is the line to
/// print.
fn policy_of(args: &CheckArgs) -> Result<Policy, String> {
    if let Some(text) = &args.policy {
        return Policy::parse(text).map_err(|e| format!("--policy: {e}"));
    }
    if let Some(path) = &args.config {
        return Ok(config_file::load(path)?.policy.unwrap_or_default());
    }
    match std::env::var(POLICY.var) {
        Ok(text) => Policy::parse(&text).map_err(|e| format!("{}: {e}", POLICY.var)),
        Err(_) => Err(format!(
            "no policy to check: give --policy POLICY or --config FILE (or set {})",
            POLICY.var
        )),
    }
}

/// Runs `smcrun policy ...`.
pub fn run(cmd: PolicyCommand) -> Outcome {
    match cmd {
        PolicyCommand::Check(args) => check(&args),
    }
}

fn check(args: &CheckArgs) -> Outcome {
    let policy = match policy_of(args) {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::new(Exit::Usage, e.to_string()));
        }
    };
    if args.bpf {
        return crate::run::bpf::policy_check(&policy, args.json);
    }
    if args.program.is_none() && args.connect.is_none() && args.bind.is_none() {
        return lint(&policy, args.json);
    }
    let Some(program) = &args.program else {
        return Err(Failure::new(
            Exit::Usage,
            "policy check needs --program NAME with --connect or --bind",
        ));
    };
    let (role, local, remote) = match (args.connect, args.bind) {
        (Some(to), _) => (Role::Client, args.local, Some(to)),
        (None, Some(at)) => (Role::Server, Some(at), None),
        (None, None) => {
            return Err(Failure::new(
                Exit::Usage,
                "policy check needs --connect ADDR:PORT or --bind ADDR:PORT",
            ));
        }
    };
    let exe = program.as_os_str().as_bytes();
    let decision = policy.for_program(exe).decide(role, local, remote);
    let matched = policy.describe_rule(decision.rule);
    if args.json {
        let out = CheckJson {
            policy: policy.to_string(),
            program: program.display().to_string(),
            role: role.as_str(),
            local: local.map(|a| a.to_string()),
            remote: remote.map(|a| a.to_string()),
            rule: decision.rule.map(|index| RuleJson {
                index,
                position: index + 1,
                text: policy.rule_text(index).unwrap_or_default(),
            }),
            matched,
            action: decision.action.as_str(),
        };
        crate::cmd::format::print_json(&out)
    } else {
        let why = match decision.action {
            Action::Smc => "the socket is made SMC",
            Action::Tcp => "the socket stays TCP",
        };
        crate::cmd::format::print_lines([matched, format!("action: {} ({why})", decision.action)])
    }
}

/// `smcrun policy check --policy POLICY` alone: the policy parsed (a bad one is the usual one-line
/// error), printed in its canonical form and one rule a line, with what a socket no rule matches
/// gets.
#[derive(Serialize)]
struct LintJson {
    /// The whole policy, canonical (what `ps`, `why` and the reports show).
    policy: String,
    /// Its rules in order; the default rule, when there is one, is the last.
    rules: Vec<String>,
    /// What a socket that matches no rule gets, in words.
    default: String,
    /// Where the policy can be enforced: the preload, BPF mode, the handshake.
    enforcement: Vec<PointJson>,
}

/// One enforcement point and whether it honours the whole policy.
#[derive(Serialize)]
struct PointJson {
    /// `preload`, `bpf` or `handshake`.
    point: &'static str,
    /// The commands that use it.
    via: &'static str,
    /// Whether it honours every rule.
    honours: bool,
    /// The first rule it does not honour and why, or null.
    refusal: Option<String>,
}

/// Each enforcement point's stand on `policy`: the preload decides every rule at connect() and
/// bind(); BPF mode only program rules, at socket(); the handshake only role, address and port
/// rules, at the SYN (one classification each, in `smcrun_bpf::rules` and `smcrun_bpf::hsrules`).
fn enforcement(policy: &Policy) -> Vec<PointJson> {
    let bpf = smcrun_bpf::rules::analyse(policy);
    let hs = smcrun_bpf::hsrules::analyse(policy);
    vec![
        PointJson {
            point: "preload",
            via: "smcrun --policy",
            honours: true,
            refusal: None,
        },
        PointJson {
            point: "bpf",
            via: "smcrun --bpf, smcrun attach",
            honours: bpf.kernel.is_some(),
            refusal: bpf.refusal(),
        },
        PointJson {
            point: "handshake",
            via: "smcrun handshake load, Linux 6.19+",
            honours: hs.table.is_some(),
            refusal: hs.refusal(),
        },
    ]
}

fn lint(policy: &Policy, json: bool) -> Outcome {
    let rules: Vec<String> = (0..policy.len())
        .filter_map(|i| policy.rule_text(i))
        .collect();
    let default = policy.describe_rule(None);
    let points = enforcement(policy);
    if json {
        return crate::cmd::format::print_json(&LintJson {
            policy: policy.to_string(),
            rules,
            default,
            enforcement: points,
        });
    }
    let n = rules.len();
    let mut lines = vec![format!("policy: {policy}")];
    lines.extend(
        rules
            .iter()
            .enumerate()
            .map(|(i, r)| format!("rule {} of {n}: {r}", i + 1)),
    );
    lines.push(format!("otherwise: {default}"));
    for p in &points {
        let name = match p.point {
            "preload" => "the preload",
            "bpf" => "BPF mode",
            _ => "the handshake",
        };
        lines.push(match &p.refusal {
            None => format!("enforced by {name} ({}): every rule", p.via),
            Some(why) => format!("not by {name} ({}): {why}", p.via),
        });
    }
    crate::cmd::format::print_lines(lines)
}
