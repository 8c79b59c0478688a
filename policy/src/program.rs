//! The policy of one program, made once at start-up: the hot path of every connect and bind.

use crate::rule::Rule;
use crate::{Action, Decision, Family, Role};
use std::net::SocketAddr;

/// The rules of a [`crate::Policy`] whose `program` matches this program, with their index in
/// the policy, and the default action. Deciding neither allocates nor globs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramPolicy {
    rules: Vec<(usize, Rule)>,
    default: Action,
}

impl Default for ProgramPolicy {
    /// No rules, default `smc`: what a program gets without a policy, or with a bad one.
    fn default() -> ProgramPolicy {
        ProgramPolicy::new(Vec::new(), Action::Smc)
    }
}

impl ProgramPolicy {
    pub(crate) fn new(rules: Vec<(usize, Rule)>, default: Action) -> ProgramPolicy {
        ProgramPolicy { rules, default }
    }

    /// The first rule that matches a socket, or the default. `role` is `Client` at connect()
    /// and `Server` at bind()/listen(); `local` is the socket's own address when it is known
    /// (always for a server; for a client only once bound), `remote` the peer's (a client's
    /// connect address). A qualifier about an address that is `None` does not hold.
    pub fn decide(
        &self,
        role: Role,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Decision {
        for (index, r) in &self.rules {
            if r.matches(role, local.as_ref(), remote.as_ref()) {
                return Decision {
                    action: r.action,
                    rule: Some(*index),
                };
            }
        }
        Decision {
            action: self.default,
            rule: None,
        }
    }

    /// The kind of socket to create at socket() time, before any address is known, so that the
    /// common case needs no change at connect/bind.
    ///
    /// Turning an SMC socket into TCP is cheap (the kernel's TCP_FASTOPEN fallback, same fd);
    /// turning a TCP socket into SMC needs a new socket swapped onto the fd, which is expensive
    /// and sometimes unsafe. So this is `smc` whenever the policy can choose `smc` for a socket
    /// of `family` (the default is `smc`, or some `smc` rule can match such a socket: with
    /// `smc port 6379; tcp`, sockets are created SMC and the ones that connect elsewhere are
    /// turned to TCP), and `tcp` only when it never can (every rule that applies is `tcp` and so
    /// is the default, or the only `smc` rules name addresses of the other family).
    pub fn likely(&self, family: Family) -> Action {
        let smc_possible = self.default == Action::Smc
            || self
                .rules
                .iter()
                .any(|(_, r)| r.action == Action::Smc && r.possible_for(family));
        if smc_possible {
            Action::Smc
        } else {
            Action::Tcp
        }
    }

    /// `Some(action)` when no rule applies to this program, so every socket gets the default
    /// and the shim need not decide per socket.
    pub fn fixed(&self) -> Option<Action> {
        self.rules.is_empty().then_some(self.default)
    }

    /// Whether some rule names a `local` address, so that a client's bound address has to be
    /// looked up before deciding (a server's always is: its port is the service port).
    pub fn uses_local(&self) -> bool {
        self.rules.iter().any(|(_, r)| !r.local.is_empty())
    }

    /// The action when no rule matches.
    pub fn default_action(&self) -> Action {
        self.default
    }
}
