//! Where the JSON comes from: the agent's state file (read and checked as the views read it) and
//! the output of a `smcrun ... --json` command.

use crate::Answer;
use serde::de::DeserializeOwned;
use smcrun_views::agent_state::{self, State};
use std::process::Command;

/// The running agent's whole state, or why it cannot be read.
pub fn agent() -> Result<State, String> {
    agent_state::read().map_err(|e| format!("the agent's state: {e}"))
}

/// The JSON that `smcrun ARGS` prints, as a `T`; or the command and what it said.
pub fn smcrun<T: DeserializeOwned>(args: &[&str]) -> Result<T, String> {
    let shown = format!("smcrun {}", args.join(" "));
    let out = Command::new("smcrun")
        .args(args)
        .output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown}: {}: {}",
            out.status,
            first_line(&out.stderr).unwrap_or_else(|| first_line(&out.stdout).unwrap_or_default())
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{shown}: not its JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(300)])
        )
    })
}

/// A file's JSON as a `T`.
pub fn file<T: DeserializeOwned>(path: &str) -> Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{path}: not the expected JSON ({e})"))
}

fn first_line(b: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(b);
    s.lines().find(|l| !l.trim().is_empty()).map(str::to_string)
}

/// `v` as compact JSON, for a message.
pub fn compact<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| format!("({e})"))
}

/// `f` of FILE's JSON as a `T`; no when it cannot be read (a saved answer does not change).
pub fn with_file<T: DeserializeOwned>(path: &str, f: impl FnOnce(&T) -> Answer) -> Answer {
    match file::<T>(path) {
        Ok(v) => f(&v),
        Err(e) => Answer::No(e),
    }
}

/// `f` of the JSON `smcrun ARGS` prints, as a `T`; no when the command fails.
pub fn with_smcrun<T: DeserializeOwned>(args: &[&str], f: impl FnOnce(&T) -> Answer) -> Answer {
    match smcrun::<T>(args) {
        Ok(v) => f(&v),
        Err(e) => Answer::No(e),
    }
}
