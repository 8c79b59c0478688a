//! `smcrun ps` and `smcrun why`'s view: the programs under smcrun (their runtimes' reports, read by
//! [`crate::processes`]) and the agent's record of them ([`crate::agent_state`]), as [`json`] and
//! [`text`].

pub mod json;
pub mod text;
