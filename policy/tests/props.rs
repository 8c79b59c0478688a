//! Properties over arbitrary input: parsing never panics, every error is one positioned line
//! pointing into the string, and every accepted policy prints in a form that parses back to it.

use proptest::prelude::*;
use smcrun_policy::{Policy, Role};

/// Words the grammar knows, and near misses, so that random policies get past the first token.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("smc".to_string()),
        Just("tcp".to_string()),
        Just("program".to_string()),
        Just("role".to_string()),
        Just("client".to_string()),
        Just("server".to_string()),
        Just("remote".to_string()),
        Just("local".to_string()),
        Just("port".to_string()),
        Just(";".to_string()),
        Just(",".to_string()),
        Just("::ffff:10.0.0.0/104".to_string()),
        Just("[a-".to_string()),
        (0u32..70000).prop_map(|n| n.to_string()),
        (0u32..70000, 0u32..70000).prop_map(|(a, b)| format!("{a}-{b}")),
        (any::<[u8; 4]>(), 0u8..40)
            .prop_map(|(a, l)| format!("{}.{}.{}.{}/{l}", a[0], a[1], a[2], a[3])),
        (any::<u128>(), 0u8..140).prop_map(|(a, l)| format!("{}/{l}", std::net::Ipv6Addr::from(a))),
        "[a-z*?\\[\\]!/-]{1,8}",
        "\\PC{0,4}",
    ]
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match Policy::parse(text) {
        Ok(p) => {
            let canonical = p.to_string();
            let again = Policy::parse(&canonical)
                .map_err(|e| TestCaseError::fail(format!("{canonical:?} from {text:?}: {e}")))?;
            prop_assert_eq!(&again, &p, "{:?} -> {:?}", text, canonical);
            prop_assert_eq!(again.to_string(), canonical);
            // Deciding with whatever the policy holds never panics either.
            let pp = p.for_program(b"/usr/bin/redis-server");
            for role in [Role::Client, Role::Server] {
                let d = pp.decide(role, "10.0.0.1:6379".parse().ok(), "[::1]:80".parse().ok());
                if let Some(i) = d.rule {
                    prop_assert!(i < p.len());
                }
            }
        }
        Err(e) => {
            prop_assert!(e.offset <= text.len());
            prop_assert!(text.is_char_boundary(e.offset));
            prop_assert!(text[e.offset..].starts_with(&e.token), "{:?}: {}", text, e);
            let line = e.to_string();
            prop_assert!(!line.contains('\n') || text.contains('\n'));
            prop_assert!(line.contains("expected "));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_strings(text in "\\PC{0,80}") {
        check(&text)?;
    }

    #[test]
    fn arbitrary_bytes_as_lossy_text(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn near_grammatical_policies(tokens in proptest::collection::vec(token(), 0..16)) {
        check(&tokens.join(" "))?;
    }

    #[test]
    fn well_formed_rules_round_trip(
        rules in proptest::collection::vec(
            (
                prop_oneof![Just("smc"), Just("tcp")],
                proptest::option::of("[a-z][a-z0-9*?-]{0,6}"),
                proptest::option::of(prop_oneof![Just("client"), Just("server")]),
                proptest::option::of((any::<[u8; 4]>(), 0u8..=32)),
                proptest::option::of((any::<u128>(), 0u8..=128)),
                (any::<u16>(), any::<u16>()),
            ),
            1..6,
        ),
        default in proptest::option::of(prop_oneof![Just("smc"), Just("tcp")]),
    ) {
        let mut parts = Vec::new();
        // Every rule has a port, so none is a default rule.
        for (action, program, role, v4, v6, ports) in rules {
            let mut r = action.to_string();
            if let Some(p) = program { r += &format!(" program {p}"); }
            if let Some(x) = role { r += &format!(" role {x}"); }
            if let Some((a, l)) = v4 {
                let net = u32::from_be_bytes(a) & u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
                r += &format!(" remote {}/{l}", std::net::Ipv4Addr::from(net));
            }
            if let Some((a, l)) = v6 {
                let net = a & u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
                r += &format!(" local {}/{l}", std::net::Ipv6Addr::from(net));
            }
            r += &format!(" port {}-{}", ports.0.min(ports.1), ports.0.max(ports.1));
            parts.push(r);
        }
        parts.extend(default.map(str::to_string));
        let text = parts.join("; ");
        let p = Policy::parse(&text).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(p.len(), parts.len());
        check(&text)?;
    }
}
