//! Matching: first match wins, the default, roles and service ports, IPv4, IPv6 and v4-mapped
//! addresses on both sides, programs by name and by path, and the kind of socket to create.

use smcrun_policy::{Action, Decision, Family, Policy, ProgramPolicy, Role};
use std::net::SocketAddr;

fn policy(text: &str, exe: &str) -> ProgramPolicy {
    Policy::parse(text)
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        .for_program(exe.as_bytes())
}

fn addr(s: &str) -> Option<SocketAddr> {
    (!s.is_empty()).then(|| s.parse().unwrap_or_else(|_| panic!("test address {s}")))
}

const TCP: Action = Action::Tcp;
const SMC: Action = Action::Smc;
const C: Role = Role::Client;
const S: Role = Role::Server;

/// (policy, program, role, local, remote, action, rule index).
type Case = (
    &'static str,
    &'static str,
    Role,
    &'static str,
    &'static str,
    Action,
    Option<usize>,
);

#[test]
fn decisions() {
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // "only 6379 and 3306"
        ("smc port 6379,3306; tcp", "redis-benchmark", C, "", "10.0.0.5:6379", SMC, Some(0)),
        ("smc port 6379,3306; tcp", "mysql", C, "", "[fd00::5]:3306", SMC, Some(0)),
        ("smc port 6379,3306; tcp", "curl", C, "", "10.0.0.5:80", TCP, None),
        // A server's service port is its own; a client's own port does not count.
        ("smc port 6379,3306; tcp", "redis-server", S, "0.0.0.0:6379", "", SMC, Some(0)),
        ("smc port 6379,3306; tcp", "redis-server", S, "0.0.0.0:6380", "", TCP, None),
        ("smc port 6379; tcp", "x", C, "10.0.0.1:6379", "10.0.0.2:40000", TCP, None),
        // "never loopback", both families and v4-mapped.
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "127.0.0.1:6379", TCP, Some(0)),
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "127.200.1.1:1", TCP, Some(0)),
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "[::1]:6379", TCP, Some(0)),
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "[::ffff:127.0.0.1]:6379", TCP, Some(0)),
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "10.0.0.1:6379", SMC, None),
        ("tcp remote 127.0.0.0/8,::1; smc", "x", C, "", "[fd00::1]:6379", SMC, None),
        // A `remote` rule does not hold at bind, where there is no remote address.
        ("tcp remote 127.0.0.0/8,::1; smc", "x", S, "127.0.0.1:6379", "", SMC, None),
        // "never 10.1.2.3", and v4-mapped rules.
        ("tcp remote 10.1.2.3; smc", "x", C, "", "10.1.2.3:22", TCP, Some(0)),
        ("tcp remote 10.1.2.3; smc", "x", C, "", "[::ffff:10.1.2.3]:22", TCP, Some(0)),
        ("tcp remote 10.1.2.3; smc", "x", C, "", "10.1.2.4:22", SMC, None),
        ("tcp remote ::ffff:10.1.2.3; smc", "x", C, "", "10.1.2.3:22", TCP, Some(0)),
        ("tcp remote ::ffff:10.1.2.0/120; smc", "x", C, "", "[::ffff:10.1.2.77]:22", TCP, Some(0)),
        ("tcp local ::ffff:10.0.0.0/104; smc", "x", S, "10.9.9.9:22", "", TCP, Some(0)),
        // IPv6 prefixes match IPv6 peers only; ::/0 is every IPv6 peer.
        ("tcp remote fd00::/8; smc", "x", C, "", "[fd12:3456::1]:1", TCP, Some(0)),
        ("tcp remote fd00::/8; smc", "x", C, "", "[fe80::1]:1", SMC, None),
        ("tcp remote ::/0; smc", "x", C, "", "[2001:db8::1]:1", TCP, Some(0)),
        ("tcp remote ::/0; smc", "x", C, "", "192.0.2.1:1", SMC, None),
        ("tcp remote ::/0; smc", "x", C, "", "[::ffff:192.0.2.1]:1", SMC, None),
        ("tcp remote 0.0.0.0/0; smc", "x", C, "", "[::ffff:192.0.2.1]:1", TCP, Some(0)),
        // A server rule.
        ("smc role server port 6379; tcp", "redis-server", S, "[::]:6379", "", SMC, Some(0)),
        ("smc role server port 6379; tcp", "redis-cli", C, "", "10.0.0.1:6379", TCP, None),
        // local addresses: known for a server, and for a client that bound first.
        ("smc local 192.168.0.0/16; tcp", "x", S, "192.168.1.1:80", "", SMC, Some(0)),
        ("smc local 192.168.0.0/16; tcp", "x", S, "0.0.0.0:80", "", TCP, None),
        ("smc local 192.168.0.0/16; tcp", "x", C, "", "192.168.1.2:80", TCP, None),
        ("smc local 192.168.0.0/16; tcp", "x", C, "192.168.1.1:5000", "10.0.0.1:80", SMC, Some(0)),
        // Port ranges and their edges.
        ("smc port 8000-8099; tcp", "x", C, "", "10.0.0.1:8000", SMC, Some(0)),
        ("smc port 8000-8099; tcp", "x", C, "", "10.0.0.1:8099", SMC, Some(0)),
        ("smc port 8000-8099; tcp", "x", C, "", "10.0.0.1:8100", TCP, None),
        ("smc port 8000-8099; tcp", "x", C, "", "10.0.0.1:7999", TCP, None),
        // First match wins.
        ("tcp remote 10.0.0.9; smc remote 10.0.0.0/8; tcp", "x", C, "", "10.0.0.9:1", TCP, Some(0)),
        ("tcp remote 10.0.0.9; smc remote 10.0.0.0/8; tcp", "x", C, "", "10.0.0.8:1", SMC, Some(1)),
        ("tcp remote 10.0.0.9; smc remote 10.0.0.0/8; tcp", "x", C, "", "11.0.0.8:1", TCP, None),
        ("smc port 1; tcp port 1; tcp", "x", C, "", "10.0.0.1:1", SMC, Some(0)),
        // All qualifiers of a rule must hold.
        ("smc role client remote 10.0.0.0/8 port 80; tcp", "x", C, "", "10.1.1.1:80", SMC, Some(0)),
        ("smc role client remote 10.0.0.0/8 port 80; tcp", "x", C, "", "10.1.1.1:81", TCP, None),
        ("smc role client remote 10.0.0.0/8 port 80; tcp", "x", C, "", "11.1.1.1:80", TCP, None),
        ("smc role client remote 10.0.0.0/8 port 80; tcp", "x", S, "10.1.1.1:80", "", TCP, None),
        // Programs: basename, glob, full path; the rule index is the one in the whole policy.
        ("tcp program curl; smc program redis-*; tcp", "/usr/bin/redis-server", C, "", "1.2.3.4:1", SMC, Some(1)),
        ("tcp program curl; smc program redis-*; tcp", "/usr/bin/curl", C, "", "1.2.3.4:1", TCP, Some(0)),
        ("tcp program curl; smc program redis-*; tcp", "/usr/bin/wget", C, "", "1.2.3.4:1", TCP, None),
        ("smc program /opt/*; tcp", "/opt/app/bin/server", C, "", "1.2.3.4:1", SMC, Some(0)),
        ("smc program /opt/*; tcp", "/usr/bin/server", C, "", "1.2.3.4:1", TCP, None),
        ("smc program /usr/bin/redis-server; tcp", "/usr/local/bin/redis-server", C, "", "1.2.3.4:1", TCP, None),
        ("smc program server; tcp", "/opt/app/bin/server", C, "", "1.2.3.4:1", SMC, Some(0)),
        ("smc program curl,wget; tcp", "wget", C, "", "1.2.3.4:1", SMC, Some(0)),
        // Without a default rule the default is smc.
        ("tcp port 22", "x", C, "", "1.2.3.4:22", TCP, Some(0)),
        ("tcp port 22", "x", C, "", "1.2.3.4:23", SMC, None),
        ("", "x", C, "", "1.2.3.4:23", SMC, None),
        // A qualifier that needs an address that is not known does not hold.
        ("tcp port 22", "x", C, "", "", SMC, None),
        ("tcp remote 0.0.0.0/0,::/0", "x", C, "", "", SMC, None),
    ];
    for &(text, exe, role, local, remote, action, rule) in cases {
        let got = policy(text, exe).decide(role, addr(local), addr(remote));
        assert_eq!(
            got,
            Decision { action, rule },
            "{text:?} for {exe} as {role} local {local:?} remote {remote:?}"
        );
    }
}

#[test]
fn a_program_known_by_several_names() {
    let p = Policy::parse("smc program redis-server port 6379; tcp").unwrap();
    let remote = addr("10.0.0.1:6379");
    // Debian's redis-server is a symlink: /proc/self/exe names redis-check-rdb.
    let by_exe = p.for_program(b"/usr/bin/redis-check-rdb");
    assert_eq!(by_exe.decide(C, None, remote).action, TCP);
    let by_both = p.for_program_names(&[b"/usr/bin/redis-check-rdb", b"redis-server"]);
    assert_eq!(
        by_both.decide(C, None, remote),
        Decision {
            action: SMC,
            rule: Some(0)
        }
    );
    assert_eq!(p.for_program_names(&[]).fixed(), Some(TCP));
}

#[test]
fn likely_socket_kind() {
    #[rustfmt::skip]
    let cases = [
        // Only smc rules for some ports, default tcp: create SMC, turn the rest to TCP.
        ("smc port 6379,3306; tcp", "x", SMC, SMC),
        ("tcp remote 127.0.0.0/8; smc", "x", SMC, SMC),
        ("", "x", SMC, SMC),
        ("tcp", "x", TCP, TCP),
        ("tcp port 1; tcp", "x", TCP, TCP),
        // The only smc rule is for another program.
        ("smc program redis-server; tcp", "/usr/bin/curl", TCP, TCP),
        ("smc program redis-server; tcp", "/usr/bin/redis-server", SMC, SMC),
        // The only smc rule names IPv6 peers: an AF_INET socket can never match it.
        ("smc remote fd00::/8; tcp", "x", TCP, SMC),
        // An IPv4 rule can match an AF_INET6 socket through a v4-mapped address.
        ("smc remote 10.0.0.0/8; tcp", "x", SMC, SMC),
        ("smc local fd00::/8 remote 10.0.0.0/8; tcp", "x", TCP, SMC),
    ];
    for (text, exe, v4, v6) in cases {
        let p = policy(text, exe);
        assert_eq!(p.likely(Family::V4), v4, "{text:?} {exe} AF_INET");
        assert_eq!(p.likely(Family::V6), v6, "{text:?} {exe} AF_INET6");
    }
}

#[test]
fn fixed_when_no_rule_applies_to_the_program() {
    assert_eq!(policy("", "x").fixed(), Some(SMC));
    assert_eq!(policy("tcp", "x").fixed(), Some(TCP));
    assert_eq!(
        policy("smc program redis-*; tcp", "curl").fixed(),
        Some(TCP)
    );
    assert_eq!(
        policy("smc program redis-*; tcp", "redis-cli").fixed(),
        None
    );
    assert_eq!(ProgramPolicy::default().fixed(), Some(SMC));
    assert_eq!(ProgramPolicy::default().default_action(), SMC);
}

#[test]
fn uses_local_when_a_rule_of_the_program_names_a_local_address() {
    assert!(policy("smc local 10.0.0.0/8; tcp", "x").uses_local());
    assert!(!policy("smc port 1; tcp remote ::1", "x").uses_local());
    assert!(!policy("smc program other local 10.0.0.0/8; tcp", "x").uses_local());
}

#[test]
fn describing_rules() {
    let p = Policy::parse("smc port 6379,3306; tcp").unwrap();
    assert_eq!(p.describe_rule(Some(0)), "rule 1 of 2: smc port 6379,3306");
    assert_eq!(p.describe_rule(None), "the default: tcp (rule 2 of 2)");
    assert_eq!(p.describe_rule(Some(1)), "rule 2 of 2: tcp");
    assert_eq!(p.describe_rule(Some(7)), "no rule 8 (the policy has 2)");
    assert_eq!(p.rule_text(0).as_deref(), Some("smc port 6379,3306"));
    assert_eq!(p.rule_text(1).as_deref(), Some("tcp"));
    assert_eq!(p.rule_text(2), None);
    let q = Policy::parse("tcp remote 10.1.2.3").unwrap();
    assert_eq!(
        q.describe_rule(None),
        "the default: smc (the policy has no default rule)"
    );
    assert_eq!(q.rule_text(1), None);
}
