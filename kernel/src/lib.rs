//! The kernel's view of SMC, read through its own ABI: the SMC generic netlink family, sock_diag for
//! AF_SMC and the RDMA netlink, plus the tables that turn the kernel's numbers (fallback reasons,
//! states, link group types) into words an operator can act on.
//!
//! Layout: [`nl`] frames requests and collects raw replies, [`attr`] and [`genl`] read
//! attributes and generic netlink headers, the private `abi` names the kernel's attribute numbers
//! after its UAPI headers; [`sock_diag`], [`smc_genl`], [`pnet`] and [`rdma`] are the kernel
//! interfaces ([`uverbs`] the RDMA device limits netlink does not give); [`reasons`] holds the
//! decoding tables; [`kmod`] says whether this kernel has a module (and whether `modprobe` can
//! help); [`features`] which Linux version brought each interface; [`error`] the one error type.
//! Every parser takes the raw reply bytes, so captured replies can be replayed in tests.
//!
//! The `genl` feature (on by default) brings the generic netlink readers ([`genl`], [`smc_genl`],
//! [`pnet`]); the preloaded runtime, which reads sock_diag and the reason tables only, leaves it
//! out so the preloaded object's dependency tree holds no generic netlink crate.

#![forbid(unsafe_code)]

mod abi;
pub mod attr;
pub mod error;
pub mod features;
#[cfg(feature = "genl")]
pub mod genl;
pub mod kmod;
pub mod nl;
#[cfg(feature = "genl")]
pub mod pnet;
pub mod rdma;
pub mod reasons;
#[cfg(feature = "genl")]
pub mod smc_genl;
pub mod sock_diag;
pub mod uverbs;

pub use error::Error;
