//! `smcrun ps` and `smcrun why`'s view: the programs under smcrun (their runtimes' reports, read by
//! [`crate::processes`]) and the agent's record of them ([`crate::agent`]), as [`text`]. Their
//! JSON (`PsEntry`, the agent's and `why`'s kernel objects) is still the launcher's.

pub mod text;
