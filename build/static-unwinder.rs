//! The build script of the shim and of smcrun: links the C unwinder (libgcc_eh) in statically
//! instead of depending on libgcc_s.so: one shared library fewer to find, map and relocate in every
//! program started under smcrun (the shim's; most programs, like /bin/true or a shell, do not load
//! libgcc_s themselves) and in smcrun's own start-up. Both still unwind their own panics (the shim
//! catches every one in its hooks, so none ever leaves it and the program's own unwinder, if it has
//! one, never meets the shim's frames).
//!
//! Rust's std asks the linker for `-lgcc_s`; a linker script named libgcc_s.so in a folder
//! searched first answers with the static archive instead.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out.join("static-unwinder");
    std::fs::create_dir_all(&dir).expect("make OUT_DIR/static-unwinder");
    std::fs::write(dir.join("libgcc_s.so"), "INPUT(-lgcc_eh)\n").expect("write the linker script");
    println!("cargo:rustc-link-search=native={}", dir.display());
}
