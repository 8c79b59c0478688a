//! smcrun's policy: which of a program's TCP connections get SMC and which stay TCP, decided per
//! program, role (client or server), local and remote address, and service port.
//!
//! A policy is a list of rules, first match wins, written on one line:
//!
//! ```text
//! RULE; RULE; ...            RULE := ACTION QUALIFIER*      ACTION := smc | tcp
//! program GLOB[,GLOB...]     the executable's basename (a GLOB with '/' matches the full path)
//! role client|server         client: connect(); server: bind()/listen()
//! remote CIDR[,CIDR...]      the peer's address (IPv4 or IPv6; a bare address is /32 or /128)
//! local CIDR[,CIDR...]       the socket's own address
//! port P[-Q][,P[-Q]...]      the service port: the remote port of a client, the local of a server
//! ```
//!
//! A rule that is an action alone is the default and must come last; a policy without one
//! defaults to `smc`, as smcrun does without a policy. `smc port 6379,3306; tcp` puts only the
//! Redis and MySQL ports on SMC; `tcp remote 127.0.0.0/8,::1; smc` keeps loopback on TCP.
//!
//! This crate is linked into the preload shim, so it depends on nothing but std and never panics.
//! [`Policy::parse`] allocates (once, at start-up); [`Policy::for_program`] keeps the rules of
//! one program (also once), so that [`ProgramPolicy::decide`], which runs on every connect and
//! bind of someone else's process, neither globs nor allocates.

#![forbid(unsafe_code)]

mod addr;
mod error;
mod glob;
mod lex;
mod parse;
mod port;
mod program;
mod rule;
mod view;

pub use error::ParseError;
pub use program::ProgramPolicy;
pub use view::{Net, RuleView};

use rule::Rule;
use std::fmt;
use std::str::FromStr;

/// What a rule does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Run it over SMC (falling back to TCP as the kernel decides).
    Smc,
    /// Keep it on TCP.
    Tcp,
}

impl Action {
    /// The keyword: `smc` or `tcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Smc => "smc",
            Action::Tcp => "tcp",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which side of a connection the program is on when the decision falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// It calls connect(): the service port is the remote one.
    Client,
    /// It calls bind() or listen(): the service port is its own.
    Server,
}

impl Role {
    /// The keyword: `client` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The address family of a socket, for [`ProgramPolicy::likely`] (decided before any address is
/// known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// AF_INET: IPv4 addresses only.
    V4,
    /// AF_INET6: IPv6 addresses, and IPv4 ones as `::ffff:a.b.c.d`.
    V6,
}

/// What the policy says about one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// SMC or TCP.
    pub action: Action,
    /// The index of the rule that matched in the policy as written (0 for the first rule), or
    /// `None` when no rule did and the default action applies (whether the policy spells the
    /// default rule out or not).
    pub rule: Option<usize>,
}

/// A parsed policy: the rules in order, and the default rule if the policy ends with one.
///
/// [`Default`] is the empty policy, which makes every socket SMC (smcrun without a policy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
    default: Option<Action>,
}

impl Policy {
    /// Parses the one-line syntax. An empty string (or only whitespace and `;`) is the empty
    /// policy. Rule keywords are case-insensitive; whitespace only separates words.
    pub fn parse(s: &str) -> Result<Policy, ParseError> {
        let (rules, default) = parse::policy(s)?;
        Ok(Policy { rules, default })
    }

    /// The rules that apply to the executable at `exe` (the path of `/proc/self/exe`, or a bare
    /// name), ready for [`ProgramPolicy::decide`]. A rule's `program` glob is matched against
    /// the basename, or against the whole of `exe` when the glob holds a `/`. Call it once, at
    /// start-up: this is the only place that globs. From a `Path`, pass
    /// `path.as_os_str().as_bytes()`.
    pub fn for_program(&self, exe: &[u8]) -> ProgramPolicy {
        self.for_program_names(&[exe])
    }

    /// As [`Policy::for_program`], for a program known by several names: a rule's `program`
    /// holds when it matches any of them. The file `/proc/self/exe` names is not always the name
    /// the program was started by (Debian's `/usr/bin/redis-server` is a symlink to
    /// `redis-check-rdb`): a caller that knows both should pass that path and `argv[0]`.
    pub fn for_program_names(&self, names: &[&[u8]]) -> ProgramPolicy {
        ProgramPolicy::new(
            self.rules
                .iter()
                .enumerate()
                .filter(|(_, r)| names.iter().any(|n| r.applies_to(n)))
                .map(|(i, r)| (i, r.clone()))
                .collect(),
            self.default_action(),
        )
    }

    /// The action when no rule matches: the default rule's, or `smc` without one.
    pub fn default_action(&self) -> Action {
        self.default.unwrap_or(Action::Smc)
    }

    /// How many rules the policy has as written, the default rule included.
    pub fn len(&self) -> usize {
        self.rules.len() + usize::from(self.default.is_some())
    }

    /// Whether the policy has no rule at all (every socket gets `smc`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The canonical text of rule `index` (as in [`Decision::rule`]; the default rule is the
    /// last index), or `None` past the end.
    pub fn rule_text(&self, index: usize) -> Option<String> {
        match self.rules.get(index) {
            Some(r) => Some(r.to_string()),
            None if index == self.rules.len() => self.default.map(|a| a.to_string()),
            None => None,
        }
    }

    /// Says in words which rule a [`Decision::rule`] names, for `smcrun policy check`:
    /// `rule 1 of 2: smc port 6379,3306`, or for `None`, `the default: tcp (rule 2 of 2)` or
    /// `the default: smc (the policy has no default rule)`.
    pub fn describe_rule(&self, rule: Option<usize>) -> String {
        let n = self.len();
        match rule {
            Some(i) => match self.rule_text(i) {
                Some(text) => format!("rule {} of {n}: {text}", i + 1),
                None => format!("no rule {} (the policy has {n})", i + 1),
            },
            None => match self.default {
                Some(a) => format!("the default: {a} (rule {n} of {n})"),
                None => format!(
                    "the default: {} (the policy has no default rule)",
                    self.default_action()
                ),
            },
        }
    }
}

/// The canonical one-line form: rules joined by `; `, each as `ACTION [program ...] [role ...]
/// [remote ...] [local ...] [port ...]`. It parses back to an equal policy; the empty policy is
/// the empty string.
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        if let Some(a) = self.default {
            if !self.rules.is_empty() {
                f.write_str("; ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl FromStr for Policy {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Policy, ParseError> {
        Policy::parse(s)
    }
}
