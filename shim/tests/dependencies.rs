//! What the preloaded object is built from: only what its hooks and the runtime use. The
//! generic netlink readers (the launcher's and the exporter's) stay out of it, through the
//! kernel crate's `genl` feature, which the runtime does not turn on.

use std::process::Command;

#[test]
fn the_preloaded_object_needs_no_generic_netlink() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "smcrun-shim",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.contains("smcrun-runtime"),
        "not the shim's tree:\n{tree}"
    );
    let generic: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("netlink-packet-generic"))
        .collect();
    assert!(
        generic.is_empty(),
        "the shim's tree has {generic:?}:\n{tree}"
    );
}
