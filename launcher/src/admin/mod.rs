//! Administration: setting a host up for SMC (soft-RoCE, UEIDs, the PNET table), running a
//! systemd service under smcrun (`enable`/`disable`), and capturing the kernel's replies as test
//! fixtures.

pub mod capture;
pub mod host_setup;
pub mod systemd;
