//! Which rules of a policy the handshake policy honours, and the kernel's rule table for them
//! (the values of `handshake.bpf.c`'s maps: each layout is defined there).
//!
//! At the SYN (client) and the SYN-ACK (server) the kernel knows the connection's addresses and
//! ports and which side it is on, but no program: the kernel sends the SYN-ACK from softirq, and
//! a SYN may be a retransmission from a timer. So rules about role, address and port are decided
//! there, for every SMC socket of the network namespace; a rule naming programs cannot be
//! (`program *`, every program, can). Such policies are refused before anything is loaded.

use crate::layout::Pod;
use smcrun_policy::{Action, Net, Policy, Role};

/// Rules the kernel table holds (`HS_MAX_RULES`).
pub const HS_MAX_RULES: usize = 16;
/// Ports, remote and local ranges per rule (`HS_MAX_LIST`).
pub const HS_MAX_LIST: usize = 8;

/// `ACTION_*` as in the object (the same codes as BPF mode's).
pub use crate::layout::{ACTION_SMC, ACTION_TCP};

/// `ROLE_*`: a rule about both sides.
pub const ROLE_ANY: u32 = 0;
/// About the client's SYN.
pub const ROLE_CLIENT: u32 = 1;
/// About the server's SYN-ACK.
pub const ROLE_SERVER: u32 = 2;

/// `NET_*`: an IPv4 range.
pub const NET_V4: u32 = 4;
/// An IPv6 range.
pub const NET_V6: u32 = 6;

/// `struct hs_net`: network and mask bytes in network order, word by word.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsNet {
    /// `NET_V4` or `NET_V6`.
    pub family: u32,
    /// The network's bytes (IPv4: word 0).
    pub net: [u32; 4],
    /// The prefix's mask bytes.
    pub mask: [u32; 4],
}

/// `struct hs_ports`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsPorts {
    /// Lowest port.
    pub low: u16,
    /// Highest port (inclusive).
    pub high: u16,
}

/// `struct hs_rule`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsRule {
    /// `ACTION_*`.
    pub action: u32,
    /// `ROLE_*`.
    pub role: u32,
    /// Ports given.
    pub nports: u32,
    /// Remote ranges given.
    pub nremote: u32,
    /// Local ranges given.
    pub nlocal: u32,
    /// Zero.
    pub pad: u32,
    /// The service port ranges.
    pub ports: [HsPorts; HS_MAX_LIST],
    /// The remote ranges.
    pub remote: [HsNet; HS_MAX_LIST],
    /// The local ranges.
    pub local: [HsNet; HS_MAX_LIST],
}

/// `struct hs_policy`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsPolicy {
    /// Rules in `hs_rules`.
    pub nrules: u32,
    /// `ACTION_*` when none matches.
    pub default_action: u32,
}

/// `struct hs_counters`: connections the kernel decided, by side and answer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsCounters {
    /// Client SYNs that carried the SMC option.
    pub client_smc: u64,
    /// Client SYNs sent without it (TCP).
    pub client_tcp: u64,
    /// Server SYN-ACKs that carried it.
    pub server_smc: u64,
    /// Server SYN-ACKs sent without it (TCP).
    pub server_tcp: u64,
}

// SAFETY: repr(C), u32 fields and u32 arrays only (36 bytes, 4-aligned): no padding.
unsafe impl Pod for HsNet {}
// SAFETY: repr(C), two u16s filling 4 bytes: no padding.
unsafe impl Pod for HsPorts {}
// SAFETY: repr(C): six u32s, then arrays of HsPorts and HsNet (Pod, 4-aligned, sizes multiples
// of 4): every field starts where the one before ends, no padding.
unsafe impl Pod for HsRule {}
// SAFETY: repr(C), two u32s: no padding.
unsafe impl Pod for HsPolicy {}
// SAFETY: repr(C), u64 fields only: no padding.
unsafe impl Pod for HsCounters {}

/// The kernel's side of a policy: its rules in order and the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HsTable {
    /// At most [`HS_MAX_RULES`].
    pub rules: Vec<HsRule>,
    /// `ACTION_*`.
    pub default_action: u32,
}

/// One rule's verdict for the handshake: `Ok` when the kernel decides it at the SYN, else why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HsVerdict {
    /// 1-based position in the policy.
    pub position: usize,
    /// The rule's canonical text.
    pub text: String,
    /// `None` when honoured, else why it cannot be.
    pub refused: Option<String>,
}

/// A policy examined for the handshake.
#[derive(Debug, Clone)]
pub struct HsAnalysis {
    /// Every rule, the default included, in order.
    pub verdicts: Vec<HsVerdict>,
    /// The kernel table, when every rule is honoured.
    pub table: Option<HsTable>,
}

impl HsAnalysis {
    /// One line for a refusal: the first rule the handshake cannot honour and why.
    pub fn refusal(&self) -> Option<String> {
        let v = self.verdicts.iter().find(|v| v.refused.is_some())?;
        Some(format!(
            "rule {} \"{}\" {}",
            v.position,
            v.text,
            v.refused.as_deref().unwrap_or_default()
        ))
    }
}

fn action_code(a: Action) -> u32 {
    match a {
        Action::Smc => ACTION_SMC,
        Action::Tcp => ACTION_TCP,
    }
}

/// A range as the object compares it.
pub fn hs_net(n: &Net) -> HsNet {
    let words = |bytes: &[u8]| -> [u32; 4] {
        let mut w = [0u32; 4];
        for (i, c) in bytes.chunks(4).enumerate() {
            w[i] = u32::from_ne_bytes(c.try_into().expect("4 bytes"));
        }
        w
    };
    let (family, addr, len, bits): (u32, Vec<u8>, u8, u32) = match n {
        Net::V4(a, l) => (NET_V4, a.octets().to_vec(), *l, 32),
        Net::V6(a, l) => (NET_V6, a.octets().to_vec(), *l, 128),
    };
    let mask_bits: u128 = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    let mask = mask_bits.to_be_bytes();
    let mask = &mask[..(bits / 8) as usize];
    let net: Vec<u8> = addr.iter().zip(mask).map(|(a, m)| a & m).collect();
    HsNet {
        family,
        net: words(&net),
        mask: words(mask),
    }
}

fn list<T: Copy + Default>(items: &[T], what: &str) -> Result<([T; HS_MAX_LIST], u32), String> {
    if items.len() > HS_MAX_LIST {
        return Err(format!(
            "has {} {what}; the handshake policy holds at most {HS_MAX_LIST} per rule",
            items.len()
        ));
    }
    let mut out = [T::default(); HS_MAX_LIST];
    out[..items.len()].copy_from_slice(items);
    Ok((out, items.len() as u32))
}

/// Examines `policy` for the handshake.
pub fn analyse(policy: &Policy) -> HsAnalysis {
    let mut verdicts = Vec::new();
    let mut rules = Vec::new();
    for r in policy.rules() {
        let encoded = (|| -> Result<HsRule, String> {
            if r.programs.iter().any(|g| g != "*") {
                return Err(format!(
                    "names programs ({}), and the kernel decides the handshake without knowing the program (a SYN-ACK is sent from softirq): only the preload and BPF mode can honour it",
                    r.programs.join(",")
                ));
            }
            let ports: Vec<HsPorts> = r
                .ports
                .iter()
                .map(|&(low, high)| HsPorts { low, high })
                .collect();
            let remote: Vec<HsNet> = r.remote.iter().map(hs_net).collect();
            let local: Vec<HsNet> = r.local.iter().map(hs_net).collect();
            let (ports, nports) = list(&ports, "ports")?;
            let (remote, nremote) = list(&remote, "remote ranges")?;
            let (local, nlocal) = list(&local, "local ranges")?;
            Ok(HsRule {
                action: action_code(r.action),
                role: match r.role {
                    None => ROLE_ANY,
                    Some(Role::Client) => ROLE_CLIENT,
                    Some(Role::Server) => ROLE_SERVER,
                },
                nports,
                nremote,
                nlocal,
                pad: 0,
                ports,
                remote,
                local,
            })
        })();
        let refused = match encoded {
            Ok(k) => {
                rules.push(k);
                None
            }
            Err(why) => Some(why),
        };
        verdicts.push(HsVerdict {
            position: r.index + 1,
            text: r.text,
            refused,
        });
    }
    if policy.has_default_rule() {
        verdicts.push(HsVerdict {
            position: verdicts.len() + 1,
            text: policy.default_action().to_string(),
            refused: None,
        });
    }
    if rules.len() > HS_MAX_RULES {
        if let Some(v) = verdicts.get_mut(HS_MAX_RULES) {
            v.refused = Some(format!(
                "is past the {HS_MAX_RULES} rules the handshake policy holds"
            ));
        }
    }
    let all = verdicts.iter().all(|v| v.refused.is_none());
    HsAnalysis {
        table: all.then(|| HsTable {
            rules,
            default_action: action_code(policy.default_action()),
        }),
        verdicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn an(p: &str) -> HsAnalysis {
        analyse(&Policy::parse(p).unwrap())
    }

    #[test]
    fn ports_roles_and_addresses_go_to_the_kernel() {
        let a = an("smc port 6379; tcp");
        let t = a.table.expect("honoured");
        assert_eq!(t.rules.len(), 1);
        assert_eq!(t.rules[0].nports, 1);
        assert_eq!(
            t.rules[0].ports[0],
            HsPorts {
                low: 6379,
                high: 6379
            }
        );
        assert_eq!(t.rules[0].role, ROLE_ANY);
        assert_eq!(t.rules[0].action, ACTION_SMC);
        assert_eq!(t.default_action, ACTION_TCP);
        let t = an("tcp role server remote 10.1.0.0/16,fd00::/8 local ::1")
            .table
            .unwrap();
        let r = t.rules[0];
        assert_eq!((r.role, r.nremote, r.nlocal), (ROLE_SERVER, 2, 1));
        assert_eq!(r.remote[0].family, NET_V4);
        assert_eq!(r.remote[0].net[0].to_ne_bytes(), [10, 1, 0, 0]);
        assert_eq!(r.remote[0].mask[0].to_ne_bytes(), [255, 255, 0, 0]);
        assert_eq!(&r.remote[0].mask[1..], &[0, 0, 0]);
        assert_eq!(r.remote[1].family, NET_V6);
        assert_eq!(r.remote[1].mask[0].to_ne_bytes(), [255, 0, 0, 0]);
        assert_eq!(r.local[0].mask, [u32::MAX; 4]);
        assert_eq!(r.local[0].net[3].to_ne_bytes(), [0, 0, 0, 1]);
        assert_eq!(t.default_action, ACTION_SMC, "no default rule: smc");
        assert_eq!(hs_net(&Net::V4([0, 0, 0, 0].into(), 0)).mask, [0; 4]);
    }

    #[test]
    fn program_rules_are_refused_with_the_reason() {
        let a = an("tcp program redis-benchmark; smc");
        assert!(a.table.is_none());
        let r = a.refusal().unwrap();
        assert!(
            r.starts_with("rule 1 \"tcp program redis-benchmark\" names programs"),
            "{r}"
        );
        assert!(an("tcp program * port 80").table.is_some());
        let many: Vec<String> = (0..17).map(|i| format!("tcp port {i}")).collect();
        assert!(an(&many.join("; ")).table.is_none());
        let ports: Vec<String> = (0..9).map(|i| i.to_string()).collect();
        let a = an(&format!("tcp port {}", ports.join(",")));
        assert!(
            a.refusal().unwrap().contains("at most 8"),
            "{:?}",
            a.refusal()
        );
    }

    #[test]
    fn the_object_has_the_sizes_rust_writes() {
        let data = crate::handshake::OBJECT.to_vec();
        let obj = aya_obj::Object::parse(&data).unwrap();
        for (name, k, v) in crate::handshake::SIZES {
            let m = &obj.maps[*name];
            assert_eq!(
                (m.key_size() as usize, m.value_size() as usize),
                (*k, *v),
                "{name}"
            );
        }
        assert_eq!(obj.maps["hs_rules"].max_entries() as usize, HS_MAX_RULES);
        for p in crate::handshake::PROGRAMS {
            assert!(obj.programs.contains_key(p.0), "{}", p.0);
        }
    }
}
