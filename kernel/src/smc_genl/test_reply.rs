//! Replies as the kernel frames them, for the parsers' unit tests.

use netlink_packet_core::NLMSG_DONE;

use crate::attr::Writer;
use crate::nl::frame;

const FAM: u16 = 0x1e;

/// Attribute `kind` as a nest (NLA_F_NESTED) around `inner`.
pub fn nest(kind: u16, inner: Writer) -> Writer {
    Writer::new().bytes(kind | 0x8000, &inner.finish())
}

/// Append a u64 as `nla_put_u64_64bit` does.
pub fn u64a(w: Writer, kind: u16, v: u64) -> Writer {
    // A 4-byte pad attribute before the value: type 0 is the PAD of every nest this is used in.
    w.bytes(0, &[]).bytes(kind, &v.to_ne_bytes())
}

/// A dump reply: one generic netlink message of `command` per body, then NLMSG_DONE.
pub fn reply(command: u8, bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut raw = Vec::new();
    for b in bodies {
        let mut g = vec![command, 1, 0, 0];
        g.extend(b);
        raw.extend(frame(FAM, 2, 1, &g));
    }
    raw.extend(frame(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes()));
    raw
}
