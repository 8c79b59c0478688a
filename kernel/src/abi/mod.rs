//! The kernel's netlink attribute numbers, named as its UAPI headers name them, one module per
//! header, so a parser's match arms read like the kernel code that fills the reply and each
//! number is written down once.
//!
//! The SMC enums are listed whole (pads and attributes no parser reads included) so their
//! numbering can be checked against the header line by line; the long RDMA enum only as far as
//! this crate uses it. Hence `dead_code` is allowed here.

#![allow(dead_code)]

pub mod rdma;
pub mod smc;
pub mod smc_diag;
