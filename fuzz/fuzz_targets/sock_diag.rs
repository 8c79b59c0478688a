//! sock_diag replies (AF_SMC sockets, TCP sockets, states): Ok or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smcrun_kernel::sock_diag;

fuzz_target!(|data: &[u8]| {
    let _ = sock_diag::parse(data);
    let _ = sock_diag::parse_tcp(data);
    let _ = sock_diag::parse_states(data);
});
