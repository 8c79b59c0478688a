//! Malformed input: every parser, fed random bytes, random attributes inside valid framing, or
//! truncated valid replies, must return (Ok or a `Malformed`/kernel error) and never panic.

use smcrun_kernel::attr::Writer;
use smcrun_kernel::nl::frame;
use smcrun_kernel::rdma::{self, ResourceKind};
use smcrun_kernel::{pnet, smc_genl, sock_diag, uverbs, Error};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = (self.next() as usize) % (max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// Attributes with random kinds (small, so parsers look at them), widths and nesting.
    fn attrs(&mut self, depth: u32) -> Vec<u8> {
        let mut w = Writer::new();
        for _ in 0..(self.next() % 12) {
            let kind = (self.next() % 24) as u16;
            if depth > 0 && self.next() % 3 == 1 {
                let inner = self.attrs(depth - 1);
                w = w.bytes(kind | 0x8000, &inner);
            } else {
                let v = self.bytes(160);
                w = w.bytes(kind, &v);
            }
        }
        w.finish()
    }
}

fn all_parsers(raw: &[u8]) -> Vec<Result<(), Error>> {
    vec![
        sock_diag::parse(raw).map(drop),
        sock_diag::parse_tcp(raw).map(drop),
        smc_genl::parse_sys_info(raw).map(drop),
        smc_genl::parse_stats(raw).map(drop),
        smc_genl::parse_fallback_stats(raw).map(drop),
        smc_genl::parse_link_groups(raw).map(drop),
        smc_genl::parse_devices(raw).map(drop),
        smc_genl::parse_devices_smcd(raw).map(drop),
        smc_genl::parse_link_groups_smcd(raw).map(drop),
        smc_genl::parse_seid(raw).map(drop),
        smc_genl::parse_ueids(raw).map(drop),
        pnet::parse(raw).map(drop),
        rdma::parse_devices(raw).map(drop),
        rdma::parse_ports(raw).map(drop),
        rdma::parse_resource_summary(raw).map(drop),
        rdma::parse_resources(raw, ResourceKind::Qp).map(drop),
        rdma::parse_resources(raw, ResourceKind::Mr).map(drop),
        rdma::parse_resources(raw, ResourceKind::CmId).map(drop),
        rdma::parse_resources(raw, ResourceKind::Srq).map(drop),
        sock_diag::parse_states(raw).map(drop),
        uverbs::parse_query_device(raw).map(drop),
    ]
}

fn done() -> Vec<u8> {
    frame(3, 2, 1, &0i32.to_ne_bytes())
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut errors = 0;
    for _ in 0..3000 {
        let raw = rng.bytes(300);
        errors += all_parsers(&raw).iter().filter(|r| r.is_err()).count();
    }
    // Random bytes are almost never a valid netlink stream: the parsers must notice.
    assert!(errors > 3000, "only {errors} errors on random input");
}

#[test]
fn random_attributes_in_valid_framing_never_panic() {
    let mut rng = Rng(0xfeed_0000_0000_0042);
    let mut malformed = 0;
    for i in 0..3000 {
        let attrs = rng.attrs(3);
        let mut raw = Vec::new();
        // genl-style body for the SMC parsers, bare attributes for RDMA, a diag header for sock_diag
        let mut genl = vec![(i % 13) as u8, 1, 0, 0];
        genl.extend(
            Writer::new()
                .bytes((i % 9) as u16 | 0x8000, &attrs)
                .finish(),
        );
        raw.extend(frame(0x1e, 2, 1, &genl));
        raw.extend(frame(0x1401, 2, 1, &attrs));
        let mut diag = rng.bytes(70);
        diag.resize(64, 0);
        diag.extend(&attrs);
        raw.extend(frame(20, 2, 1, &diag));
        raw.extend(done());
        for r in all_parsers(&raw) {
            if let Err(Error::Malformed { .. }) = r {
                malformed += 1;
            } else if let Err(e) = r {
                panic!("random attributes gave a non-malformed error: {e}");
            }
        }
    }
    assert!(malformed > 0);
}

#[test]
fn truncations_of_valid_replies_never_panic() {
    let stats = {
        let tech = Writer::new()
            .bytes(0, &[])
            .bytes(8, &3u64.to_ne_bytes())
            .bytes(
                1 | 0x8000,
                &Writer::new().bytes(1, &1u64.to_ne_bytes()).finish(),
            )
            .finish();
        let inner = Writer::new().bytes(2 | 0x8000, &tech).finish();
        let mut g = vec![7u8, 1, 0, 0];
        g.extend(Writer::new().bytes(7 | 0x8000, &inner).finish());
        let mut raw = frame(0x1e, 2, 1, &g);
        raw.extend(done());
        raw
    };
    for cut in 0..stats.len() {
        for r in all_parsers(&stats[..cut]) {
            if let Err(e) = r {
                assert!(
                    matches!(e, Error::Malformed { .. }),
                    "cut {cut}: unexpected error kind {e}"
                );
            }
        }
    }
    assert_eq!(
        smc_genl::parse_stats(&stats)
            .unwrap()
            .smcr
            .client_v2_success,
        3
    );
}
