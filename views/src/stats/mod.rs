//! `smcrun stats`' view: the kernel's SMC counters of a network namespace (the data is
//! [`crate::counters`]' sample, shared with the monitor and the metrics), as [`json`] and as
//! [`text`] in `smcr stats`' layout.

pub mod json;
pub mod text;
