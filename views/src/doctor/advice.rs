//! What to do about what the counters show: the thresholds above which a ratio deserves
//! attention, and the operator's next step for the common fallback reasons (following the SMC
//! monitoring guide: a full receive buffer means the program reads too slowly or net.smc.rmem is
//! small; a full or too small send buffer means net.smc.wmem; the remote variants the peer's
//! net.smc.rmem).

/// Buffer-full and too-small events above this share of the requests are worth acting on.
pub const BUFFER_RATIO_WARN: f64 = 0.05;

/// Fallbacks above this share of all connections handled are worth acting on.
pub const FALLBACK_RATIO_WARN: f64 = 0.10;

/// What to do about fallback reason `code`, for the reasons an operator meets most; `None` for
/// the rest (their description is all there is to say).
pub fn fallback(code: u32) -> Option<&'static str> {
    Some(match code {
        0x0301_0000 => "the peer does not speak SMC: run the peer under smcrun too (or leave these connections on TCP with a policy)",
        0x0303_0000 | 0x0303_0002 => "no usable RDMA device for this route: check `smcrun device` (port ACTIVE on the connection's interface), the PNET table, and for SMC-Rv2 a UEID both peers share",
        0x0303_0001 | 0x0303_0007 => "no SMC-D device: SMC-D needs ISM hardware or loopback-ism; use SMC-R elsewhere",
        0x0303_0008 => "no user EID in common with the peer: add the same one on both (`smcrun ueid add NAME`)",
        0x0303_0006 => "the peer sent no system EID: give both peers the same user EID (`smcrun ueid add NAME`)",
        0x0500_0000 => "the peer declined: its own reason is the peer diagnosis (`smcrun ss -a` here, or `smcrun stats -d` on the peer)",
        0x0307_0000 => "the peers are not in one IP subnet: SMC-Rv1 needs that; SMC-Rv2 (a shared UEID) routes across subnets",
        0x0306_0000 => "the program sets a socket option SMC does not support (e.g. TCP_FASTOPEN): leave it off, or keep these connections on TCP with a policy",
        0x0302_0000 => "IPsec is on for this connection: SMC cannot carry it; keep such traffic on TCP",
        0x0101_0000 => "the kernel ran out of memory for SMC buffers: lower net.smc.rmem / net.smc.wmem or add memory",
        0x0201_0000 | 0x0202_0000 => "the RDMA link did not come up in time: check the RoCE path (MTU, PFC/ECN, firewall for UDP 4791 with RoCEv2)",
        0x030e_0000 => "SMC-Rv2 found no route to the peer over the RDMA device's interface: check the routes of the RoCE interface",
        0x030d_0000 => "the SMC-D DMB limit was reached: fewer connections per device, or SMC-R for the rest",
        0x030a_0000 | 0x030b_0000 => "the link group lost its active link: check `smcrun link` and the RDMA port states",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_reasons_have_advice() {
        for code in [0x0301_0000, 0x0303_0000, 0x0500_0000, 0x0303_0008] {
            assert!(fallback(code).is_some(), "{code:#x}");
        }
        assert!(fallback(0x0999_0003).is_none());
    }
}
