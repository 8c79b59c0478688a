//! The one-line syntax: what is accepted and its canonical form, and what is refused, where, and
//! with which words.

use smcrun_policy::{Action, Policy};

#[test]
fn accepted_policies_and_their_canonical_form() {
    for (text, canonical, len) in [
        // The manual's examples (docs/src/guide/policy.md).
        ("smc port 6379,3306; tcp", "smc port 6379,3306; tcp", 2),
        (
            "tcp remote 127.0.0.0/8,::1; smc",
            "tcp remote 127.0.0.0/8,::1; smc",
            2,
        ),
        ("tcp remote 10.1.2.3; smc", "tcp remote 10.1.2.3; smc", 2),
        (
            "smc role server port 6379; tcp",
            "smc role server port 6379; tcp",
            2,
        ),
        // Qualifiers in any order come out in canonical order.
        (
            "tcp port 80 local 10.0.0.0/8 role client remote fd00::/8 program curl",
            "tcp program curl role client remote fd00::/8 local 10.0.0.0/8 port 80",
            1,
        ),
        // Whitespace, case and separators are tolerated.
        (
            "  SMC   PORT 1 , 2 ,3-4 ;TCP ; ",
            "smc port 1,2,3-4; tcp",
            2,
        ),
        ("smc port 1;;tcp", "smc port 1; tcp", 2),
        ("\tsmc\nprogram\tredis-*\n", "smc program redis-*", 1),
        // Bare and full-length addresses print bare; v4-mapped prints as IPv4.
        (
            "tcp remote 10.1.2.3/32,::1/128",
            "tcp remote 10.1.2.3,::1",
            1,
        ),
        (
            "tcp remote ::ffff:10.0.0.0/104,::FFFF:1.2.3.4",
            "tcp remote 10.0.0.0/8,1.2.3.4",
            1,
        ),
        // Port ranges; a range of one prints as the port.
        (
            "smc port 8000-8099,0,65535,7-7",
            "smc port 8000-8099,0,65535,7",
            1,
        ),
        // Globs and paths.
        (
            "smc program /usr/bin/*,[rm]edis-?erver",
            "smc program /usr/bin/*,[rm]edis-?erver",
            1,
        ),
        // Defaults alone.
        ("tcp", "tcp", 1),
        ("smc;", "smc", 1),
        // The empty policy.
        ("", "", 0),
        (" ; ;", "", 0),
        // No default rule: the rules as written, nothing added.
        ("tcp port 22", "tcp port 22", 1),
    ] {
        let p = Policy::parse(text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        assert_eq!(p.to_string(), canonical, "{text:?}");
        assert_eq!(p.len(), len, "{text:?}");
        let again = Policy::parse(canonical).unwrap();
        assert_eq!(again, p, "{canonical:?} must parse back to the same policy");
    }
}

#[test]
fn default_action() {
    assert_eq!(Policy::parse("").unwrap().default_action(), Action::Smc);
    assert_eq!(
        Policy::parse("tcp port 1").unwrap().default_action(),
        Action::Smc
    );
    assert_eq!(
        Policy::parse("smc port 1; tcp").unwrap().default_action(),
        Action::Tcp
    );
    assert_eq!(Policy::default(), Policy::parse("").unwrap());
}

#[test]
fn refused_policies_name_offset_token_and_what_was_expected() {
    for (text, offset, token, line) in [
        (
            "smc port 1; tcp prot 80",
            16,
            "prot",
            "at offset 16: \"prot\" is not a qualifier; expected one of program, role, remote, local, port",
        ),
        ("smcr port 1", 0, "smcr", "at offset 0: \"smcr\" is not an action; expected smc or tcp"),
        (", smc", 0, ",", "at offset 0: \",\" is not an action; expected smc or tcp"),
        ("smc , port 1", 4, ",", "at offset 4: \",\" is not a qualifier; expected one of program, role, remote, local, port"),
        (
            "tcp; smc port 1",
            5,
            "smc",
            "at offset 5: \"smc\" starts a rule after the default rule at offset 0, which always matches, so it is never reached; expected the default rule (an action alone) last",
        ),
        ("smc; tcp", 5, "tcp", ""),
        ("smc port", 4, "port", "at offset 4: \"port\" has no value; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
        ("smc port; tcp", 4, "port", ""),
        ("smc port 1,", 10, ",", "at offset 10: \",\" ends the values of port with none after it; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
        ("smc port 1,,2", 11, ",", "at offset 11: \",\" comes where a value of port belongs; expected a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099"),
        ("smc port 65536", 9, "65536", ""),
        ("smc port 90-80", 9, "90-80", "at offset 9: \"90-80\" is an empty range; expected the lower port first, e.g. 8000-8099"),
        ("smc port http", 9, "http", ""),
        ("smc port 1 port 2", 11, "port", "at offset 11: \"port\" is given twice in this rule; expected each qualifier at most once per rule (list several values with ',')"),
        ("smc role clinet", 9, "clinet", "at offset 9: \"clinet\" is not a role; expected client or server"),
        ("smc role client,server", 16, "server", "at offset 16: \"server\" is a second role; expected one role: client or server"),
        ("tcp remote 10.0.0.300", 11, "10.0.0.300", "at offset 11: \"10.0.0.300\" is not an address; expected an IPv4 or IPv6 address or CIDR, e.g. 10.0.0.0/8, 192.168.1.5 or fd00::/8"),
        ("tcp remote 10.1.2.3/8", 11, "10.1.2.3/8", "at offset 11: \"10.1.2.3/8\" has bits set after the prefix; expected the network address, 10.0.0.0/8"),
        ("tcp local 10.0.0.0/33", 10, "10.0.0.0/33", "at offset 10: \"10.0.0.0/33\" has a bad prefix length; expected a length from 0 to 32 after the '/'"),
        ("tcp remote ::1/200", 11, "::1/200", ""),
        ("tcp remote localhost", 11, "localhost", ""),
        ("smc program [ab", 12, "[ab", ""),
        ("smc remote 1.2.3.4 port", 19, "port", ""),
        ("smc port 1; smc program", 16, "program", ""),
        // Offsets are bytes: a two-byte character before the bad token counts twice.
        ("smc program é prot 1", 15, "prot", ""),
        ("smc port 1 ; tcp port x", 22, "x", ""),
    ] {
        let err = Policy::parse(text).expect_err(text);
        assert_eq!((err.offset, err.token.as_str()), (offset, token), "{text:?}: {err}");
        if !line.is_empty() {
            assert_eq!(err.to_string(), line, "{text:?}");
        }
        let shown = err.to_string();
        assert!(!shown.contains('\n'), "one line: {shown}");
        assert!(shown.contains("expected "), "{shown}");
        assert_eq!(shown, format!("at offset {offset}: {}", err.message()));
    }
}
