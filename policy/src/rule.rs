//! One rule: an action and the qualifiers that must all hold for it to apply. Matching a rule
//! reads what parsing built and allocates nothing.

use crate::addr::{Cidr, Ip};
use crate::glob::Glob;
use crate::port::PortRange;
use crate::{Action, Family, Role};
use std::fmt;
use std::net::SocketAddr;

/// An action with its qualifiers; an empty list means the qualifier was not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub action: Action,
    /// Any of these matches the program.
    pub programs: Vec<Glob>,
    pub role: Option<Role>,
    /// Any of these contains the peer's address.
    pub remote: Vec<Cidr>,
    /// Any of these contains the socket's own address.
    pub local: Vec<Cidr>,
    /// Any of these contains the service port.
    pub ports: Vec<PortRange>,
}

/// Whether `addr` is known and in one of `nets`; true when there are no `nets` to satisfy.
fn in_any(nets: &[Cidr], addr: Option<&SocketAddr>) -> bool {
    if nets.is_empty() {
        return true;
    }
    match addr {
        Some(a) => {
            let ip = Ip::of(a.ip());
            nets.iter().any(|n| n.contains(ip))
        }
        None => false,
    }
}

impl Rule {
    /// A rule with the action alone: the policy's default.
    pub(crate) fn is_default(&self) -> bool {
        self.programs.is_empty()
            && self.role.is_none()
            && self.remote.is_empty()
            && self.local.is_empty()
            && self.ports.is_empty()
    }

    /// Whether the executable at `exe` is one this rule is about.
    pub(crate) fn applies_to(&self, exe: &[u8]) -> bool {
        self.programs.is_empty() || self.programs.iter().any(|g| g.matches_exe(exe))
    }

    /// Whether the rule matches a socket (its program already known to match). The service port
    /// is the remote port for a client and the local port for a server; a qualifier about an
    /// address that is not known (`remote` at bind, `local` before a client binds) does not hold.
    pub(crate) fn matches(
        &self,
        role: Role,
        local: Option<&SocketAddr>,
        remote: Option<&SocketAddr>,
    ) -> bool {
        if self.role.is_some_and(|r| r != role) {
            return false;
        }
        if !self.ports.is_empty() {
            let service = match role {
                Role::Client => remote,
                Role::Server => local,
            };
            match service {
                Some(a) if self.ports.iter().any(|r| r.contains(a.port())) => {}
                _ => return false,
            }
        }
        in_any(&self.remote, remote) && in_any(&self.local, local)
    }

    /// Whether a socket of `family` could ever match: an AF_INET socket only has IPv4 addresses,
    /// an AF_INET6 socket may have either (v4-mapped ones count as IPv4).
    pub(crate) fn possible_for(&self, family: Family) -> bool {
        let fits = |nets: &[Cidr]| {
            nets.is_empty() || family == Family::V6 || nets.iter().any(|n| n.is_v4())
        };
        fits(&self.remote) && fits(&self.local)
    }
}

/// Writes `name v,v,v` when the list is not empty.
fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, name: &str, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i == 0 {
            write!(f, " {name} {item}")?;
        } else {
            write!(f, ",{item}")?;
        }
    }
    Ok(())
}

/// The canonical form: the action, then program, role, remote, local, port in that order.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.action)?;
        list(f, "program", &self.programs)?;
        if let Some(role) = self.role {
            write!(f, " role {role}")?;
        }
        list(f, "remote", &self.remote)?;
        list(f, "local", &self.local)?;
        list(f, "port", &self.ports)
    }
}
