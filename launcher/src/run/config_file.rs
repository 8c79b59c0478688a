//! `--config FILE` merged into a run's options: the file is read and checked by `smcrun_config`
//! (before anything is started), the command line wins, and the policy from `--policy`, the file or
//! an inherited `SMCRUN_POLICY` is checked and put in its canonical form for the shim.

use crate::run::exec::RunOptions;
use crate::run::sysctl::Assignment;
use crate::status::{Exit, Failure};
pub use smcrun_config::load;
use smcrun_config::Config;
use smcrun_policy::Policy;
use smcrun_settings as settings;

/// The kernel's limit for one argument or environment string (MAX_ARG_STRLEN, 32 pages),
/// `NAME=value` and its NUL included.
pub const MAX_ENV_STRING: usize = 32 * 4096;

/// The options of a run with `--config` merged in (the command line wins) and the policy, from
/// `--policy`, the config file or an inherited `SMCRUN_POLICY`, checked and put in its canonical
/// form for the shim. A bad file or policy is one line, with exit code 2.
pub fn resolve(opts: &RunOptions) -> Result<RunOptions, Failure> {
    let refuse = |msg: String| Failure::new(Exit::Usage, msg);
    let mut out = opts.clone();
    let file = match &opts.config {
        Some(path) => load(path).map_err(refuse)?,
        None => Config::default(),
    };
    if out.debug == 0 {
        out.debug = file.debug.unwrap_or(0);
    }
    out.mode = out.mode.or(file.mode);
    out.fallback = out.fallback.or(file.fallback);
    out.sndbuf = out.sndbuf.or(file.sndbuf);
    out.rcvbuf = out.rcvbuf.or(file.rcvbuf);
    out.report = out.report || file.report.unwrap_or(false);
    out.require_preload = out.require_preload || file.require_preload.unwrap_or(false);
    out.sysctl_best_effort = out.sysctl_best_effort || file.sysctl_best_effort.unwrap_or(false);
    let mut sysctls: Vec<Assignment> = file
        .sysctl
        .into_iter()
        .filter(|a| !opts.sysctl.iter().any(|b| b.key == a.key))
        .collect();
    sysctls.extend(opts.sysctl.iter().cloned());
    out.sysctl = sysctls;
    out.policy = match (&opts.policy, file.policy) {
        (Some(text), _) => Some(
            Policy::parse(text)
                .map_err(|e| refuse(format!("--policy: {e}")))?
                .to_string(),
        ),
        (None, Some(p)) => Some(p.to_string()),
        (None, None) => match std::env::var(settings::POLICY.var) {
            Ok(text) => {
                Policy::parse(&text)
                    .map_err(|e| refuse(format!("{}: {e}", settings::POLICY.var)))?;
                None
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(refuse(format!(
                    "{}: the value is not UTF-8",
                    settings::POLICY.var
                )))
            }
            Err(std::env::VarError::NotPresent) => None,
        },
    };
    if let Some(p) = &out.policy {
        let needed = settings::POLICY.var.len() + 1 + p.len() + 1;
        if needed > MAX_ENV_STRING {
            return Err(refuse(format!(
                "the policy is {} bytes in its canonical form; the kernel hands a program at most {MAX_ENV_STRING} bytes in one environment variable ({}=...); shorten it (port ranges such as 8000-8099, CIDRs such as 10.0.0.0/8)",
                p.len(),
                settings::POLICY.var
            )));
        }
    }
    Ok(out)
}
