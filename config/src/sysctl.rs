//! `KEY=VALUE` of a sysctl smcrun may set (`--sysctl`, and the `[sysctl]` table of a config file):
//! only `net.smc.*` and `net.core.*` names, checked before anything is written.

/// One `--sysctl KEY=VALUE`, checked when the command line is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Dotted name, e.g. `net.smc.wmem`.
    pub key: String,
    /// The value written, as given.
    pub value: String,
}

/// Parses `KEY=VALUE` where KEY is a net.smc.* or net.core.* name.
pub fn parse_assignment(s: &str) -> Result<Assignment, String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected KEY=VALUE, e.g. net.smc.wmem=262144"))?;
    let key = key.trim();
    if !(key.starts_with("net.smc.") || key.starts_with("net.core.")) {
        return Err(format!(
            "{key:?}: only net.smc.* and net.core.* sysctls can be set"
        ));
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
        || key.contains("..")
        || key.ends_with('.')
    {
        return Err(format!(
            "{key:?}: expected a sysctl name of lower-case letters, digits, '_' and '.'"
        ));
    }
    if value.is_empty() || value.contains('\n') {
        return Err(format!("{s:?}: expected a non-empty value on one line"));
    }
    Ok(Assignment {
        key: key.to_string(),
        value: value.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments() {
        let a = parse_assignment("net.smc.wmem=262144").unwrap();
        assert_eq!(
            (a.key.as_str(), a.value.as_str()),
            ("net.smc.wmem", "262144")
        );
        assert!(parse_assignment("net.core.rmem_max=1048576").is_ok());
        for bad in [
            "net.smc.wmem",
            "kernel.panic=1",
            "net.smc.=1",
            "net.smc.Wmem=1",
            "net.smc.wmem=",
            "net.smc..x=1",
        ] {
            assert!(parse_assignment(bad).is_err(), "{bad} must be refused");
        }
    }
}
