//! The policy's one-line syntax: any text parses or gives an error whose offset lies in the text;
//! a policy that parses prints in its canonical form, which parses back to the same policy and
//! prints the same; deciding for any program and addresses never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smcrun_policy::{Policy, Role};
use std::net::SocketAddr;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Policy::parse(text) {
        Err(e) => {
            assert!(
                e.offset <= text.len(),
                "offset {} past {:?}",
                e.offset,
                text
            );
            let _ = e.to_string();
        }
        Ok(p) => {
            let canonical = p.to_string();
            let again = Policy::parse(&canonical)
                .unwrap_or_else(|e| panic!("canonical {canonical:?} of {text:?} refused: {e}"));
            assert_eq!(again, p, "{text:?} -> {canonical:?}");
            assert_eq!(again.to_string(), canonical);
            for i in 0..=p.len() {
                let _ = p.rule_text(i);
            }
            let addrs: [Option<SocketAddr>; 4] = [
                None,
                Some("10.1.2.3:6379".parse().unwrap()),
                Some("[::ffff:10.1.2.3]:80".parse().unwrap()),
                Some("[fd00::1]:8080".parse().unwrap()),
            ];
            for exe in [&b"redis-server"[..], b"/usr/bin/redis-server", data] {
                let pp = p.for_program(exe);
                for role in [Role::Client, Role::Server] {
                    for l in addrs {
                        for r in addrs {
                            let d = pp.decide(role, l, r);
                            let _ = p.describe_rule(d.rule);
                        }
                    }
                }
            }
        }
    }
});
