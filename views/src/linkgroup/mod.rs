//! `smcrun linkgroup`, `link`, `device` and `info`'s view: the link groups, links and devices
//! SMC uses and what this kernel's SMC can do, as [`json`] and as [`text`].

use smcrun_kernel::smc_genl::{Device, LoopbackIsm};

pub mod json;
pub mod text;

/// What `smcrun device` and `smcrun info` read: SMC-R and SMC-D devices, and loopback-ism
/// (which the kernel's device dump leaves out).
#[derive(Debug, Clone)]
pub struct Devices {
    /// SMC-R devices.
    pub smcr: Vec<Device>,
    /// SMC-D (ISM) devices.
    pub smcd: Vec<Device>,
    /// loopback-ism, when the kernel has it.
    pub loopback: Option<LoopbackIsm>,
}
