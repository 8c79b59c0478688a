//! What the bench programs share: the loopback address they connect to and the CPU time the
//! kernel counted (each written once here, not in every program).

pub mod cpu;
pub mod net;
