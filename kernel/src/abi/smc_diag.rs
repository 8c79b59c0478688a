//! `include/uapi/linux/smc_diag.h`: the modes in `struct smc_diag_msg` and the attributes after it
//! in a SOCK_DIAG_BY_FAMILY reply for AF_SMC.

// enum { SMC_DIAG_NONE, ... }: attribute types; a request's `diag_ext` asks for type n with bit
// 1 << (n - 1).
pub const SMC_DIAG_NONE: u16 = 0;
pub const SMC_DIAG_CONNINFO: u16 = 1;
pub const SMC_DIAG_LGRINFO: u16 = 2;
pub const SMC_DIAG_SHUTDOWN: u16 = 3;
pub const SMC_DIAG_DMBINFO: u16 = 4;
pub const SMC_DIAG_FALLBACK: u16 = 5;

// enum { SMC_DIAG_MODE_SMCR, ... }: `diag_mode`, how the connection carries its data.
pub const SMC_DIAG_MODE_SMCR: u8 = 0;
pub const SMC_DIAG_MODE_FALLBACK_TCP: u8 = 1;
pub const SMC_DIAG_MODE_SMCD: u8 = 2;
