//! Netlink framing, attributes (nested to any depth) and generic netlink headers: whatever the
//! bytes, an Ok or an error, never a panic, and every attribute lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smcrun_kernel::{attr, genl, nl};

fn walk(buf: &[u8], depth: u32) {
    let Ok(attrs) = attr::parse(buf, "fuzz") else {
        return;
    };
    let range = buf.as_ptr_range();
    for a in attrs {
        assert!(range.start <= a.value.as_ptr() && a.value.as_ptr_range().end <= range.end);
        let _ = (a.u8("f"), a.u16("f"), a.u32("f"), a.u64("f"), a.uint("f"));
        let _ = (a.u16_or_u32("f"), a.string());
        if depth < 8 {
            walk(a.value, depth + 1);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = genl::parse_family(data, "fuzz", "fuzz");
    if let Ok(messages) = nl::data_messages(data, "fuzz") {
        for m in messages {
            walk(m.payload, 0);
            if let Ok((_, attrs)) = genl::split(&m, "fuzz") {
                walk(attrs, 0);
            }
        }
    }
    walk(data, 0);
});
