//! Whether this kernel has a module (smc, smc_diag, ib_core, ...) and what an operator can do
//! about it: the one place that decides whether "load it with `modprobe smc`" is true advice.
//!
//! A kernel built without module support (no `/proc/modules`) cannot load anything, and a kernel
//! whose module tree (`/lib/modules/RELEASE/`) lists no such module cannot load it either; telling
//! their operators to run `modprobe` sends them after something that cannot work.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// What the kernel can do about one module right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Availability {
    /// Loaded (listed in `/proc/modules`).
    Loaded,
    /// Compiled into the kernel (`modules.builtin`, or `/sys/module/NAME` without a loaded module).
    BuiltIn,
    /// Not loaded, and the kernel's module tree has it: `modprobe` loads it.
    Loadable {
        /// The module file, relative to `/lib/modules/RELEASE/`.
        file: String,
    },
    /// The kernel has module support, but its module tree has no such module and it is not built
    /// in: this kernel was built without it.
    NotBuilt {
        /// The kernel release (`uname -r`).
        release: String,
    },
    /// The kernel was built without module support (no `/proc/modules`) and does not have the
    /// module built in: it does not have it, and cannot get it.
    NoModuleSupport,
    /// Module loading was switched off until the next boot (`kernel.modules_disabled = 1`).
    LoadingDisabled,
    /// Not loaded, and this system has no module tree for the running kernel (a container without
    /// the host's `/lib/modules`): whether it can be loaded is not known here.
    Unknown {
        /// The kernel release (`uname -r`).
        release: String,
    },
}

impl Availability {
    /// True when the kernel has the module now (loaded or built in).
    pub fn present(&self) -> bool {
        matches!(self, Availability::Loaded | Availability::BuiltIn)
    }

    /// True when the kernel can never have it without another kernel (not built, or no module
    /// support): the advice is a kernel, not a command.
    pub fn impossible(&self) -> bool {
        matches!(
            self,
            Availability::NotBuilt { .. } | Availability::NoModuleSupport
        )
    }

    /// Why the kernel does not have `module` and cannot get it, for [`Availability::impossible`]
    /// states ("it is not built in, and the kernel has no module support ..."); `None` otherwise.
    pub fn why_impossible(&self, module: &str) -> Option<String> {
        match self {
            Availability::NotBuilt { release } => Some(format!(
                "it is not built in and /lib/modules/{release}/ has no `{module}` module"
            )),
            Availability::NoModuleSupport => Some(
                "it is not built in, and the kernel has no module support (no /proc/modules) to load it"
                    .to_string(),
            ),
            _ => None,
        }
    }

    /// One clause saying why `module` is not there and what to do, for an error that found the
    /// kernel interface missing: "the kernel module `smc` is not loaded; load it with `modprobe
    /// smc` (as root)" only where that is true.
    pub fn advice(&self, module: &str) -> String {
        match self {
            Availability::Loadable { .. } => format!(
                "the kernel module `{module}` is not loaded; load it with `modprobe {module}` (as root)"
            ),
            Availability::Loaded | Availability::BuiltIn => format!(
                "the kernel has `{module}` ({}) but the interface did not answer as if it did; \
                 is this a network namespace or a kernel where it is disabled?",
                if *self == Availability::Loaded { "loaded" } else { "built in" }
            ),
            Availability::NotBuilt { .. } | Availability::NoModuleSupport => format!(
                "this kernel has no `{module}`: {}; it needs a kernel built with it",
                self.why_impossible(module).unwrap_or_default()
            ),
            Availability::LoadingDisabled => format!(
                "the kernel module `{module}` is not loaded, and module loading is switched off until the next boot (kernel.modules_disabled = 1)"
            ),
            Availability::Unknown { release } => format!(
                "the kernel module `{module}` is not loaded, and /lib/modules/{release}/ is missing here (a container?), so whether it can be loaded is not known; on the host, `modprobe {module}` (as root) loads it if the kernel has it"
            ),
        }
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Availability::Loaded => "loaded",
            Availability::BuiltIn => "built in",
            Availability::Loadable { .. } => "loadable",
            Availability::NotBuilt { .. } => "not built for this kernel",
            Availability::NoModuleSupport => "absent (no module support)",
            Availability::LoadingDisabled => "not loaded (loading disabled)",
            Availability::Unknown { .. } => "not loaded (module tree missing)",
        })
    }
}

/// Where a system keeps what [`availability_in`] reads (the real one: [`Root::system`]).
#[derive(Debug, Clone)]
pub struct Root {
    /// `/proc` (modules, sys/kernel/modules_disabled).
    pub proc: PathBuf,
    /// `/sys` (module/NAME).
    pub sys: PathBuf,
    /// `/lib/modules/RELEASE`.
    pub modules: PathBuf,
    /// The kernel release.
    pub release: String,
}

impl Root {
    /// The running system's paths.
    pub fn system() -> Root {
        let release = kernel_release();
        Root {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            modules: Path::new("/lib/modules").join(&release),
            release,
        }
    }
}

pub use crate::features::kernel_release;

/// What the running kernel can do about `module`.
pub fn availability(module: &str) -> Availability {
    availability_in(&Root::system(), module)
}

/// Module names compare with '-' and '_' alike, as modprobe does.
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'-' | b'_') && matches!(y, b'-' | b'_')))
}

/// The module name of a modules.dep / modules.builtin path ("kernel/net/smc/smc.ko.xz" → "smc").
fn module_of(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.split(".ko").next().unwrap_or(base)
}

/// Find `module` in a modules.dep / modules.builtin style file: the path of its line.
fn listed(file: &Path, module: &str) -> Option<Option<String>> {
    let text = std::fs::read_to_string(file).ok()?;
    Some(
        text.lines()
            .map(|l| l.split(':').next().unwrap_or(l).trim())
            .find(|p| same_name(module_of(p), module))
            .map(String::from),
    )
}

/// What the kernel seen through `root` can do about `module`.
pub fn availability_in(root: &Root, module: &str) -> Availability {
    let proc_modules = std::fs::read_to_string(root.proc.join("modules"));
    if let Ok(list) = &proc_modules {
        if list
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .any(|m| same_name(m, module))
        {
            return Availability::Loaded;
        }
    }
    if let Some(Some(_)) = listed(&root.modules.join("modules.builtin"), module) {
        return Availability::BuiltIn;
    }
    // A built-in module shows in /sys/module only when it has parameters or a version; a loaded
    // one is in /proc/modules (checked above).
    let in_sys = root.sys.join("module").join(module.replace('-', "_"));
    if in_sys.exists() && !in_sys.join("initstate").exists() {
        return Availability::BuiltIn;
    }
    if proc_modules.is_err() {
        return Availability::NoModuleSupport;
    }
    if std::fs::read_to_string(root.proc.join("sys/kernel/modules_disabled"))
        .is_ok_and(|v| v.trim() == "1")
    {
        return Availability::LoadingDisabled;
    }
    match listed(&root.modules.join("modules.dep"), module) {
        Some(Some(file)) => Availability::Loadable { file },
        Some(None) => Availability::NotBuilt {
            release: root.release.clone(),
        },
        None => Availability::Unknown {
            release: root.release.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        dir: PathBuf,
    }

    impl Fake {
        fn new(tag: &str) -> Fake {
            let dir =
                std::env::temp_dir().join(format!("smcrun-kmod-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for d in ["proc/sys/kernel", "sys/module", "lib/modules/6.12.1"] {
                std::fs::create_dir_all(dir.join(d)).unwrap();
            }
            Fake { dir }
        }
        fn root(&self) -> Root {
            Root {
                proc: self.dir.join("proc"),
                sys: self.dir.join("sys"),
                modules: self.dir.join("lib/modules/6.12.1"),
                release: "6.12.1".into(),
            }
        }
        fn write(&self, rel: &str, text: &str) {
            std::fs::write(self.dir.join(rel), text).unwrap();
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn loaded_loadable_built_in_and_not_built() {
        let f = Fake::new("a");
        f.write(
            "proc/modules",
            "smc 245760 1 smc_diag, Live 0x0\nib_core 1 0 - Live 0x0\n",
        );
        f.write(
            "lib/modules/6.12.1/modules.dep",
            "kernel/net/smc/smc.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz\nkernel/net/smc/smc_diag.ko.xz: kernel/net/smc/smc.ko.xz\n",
        );
        f.write(
            "lib/modules/6.12.1/modules.builtin",
            "kernel/net/unix/unix.ko\n",
        );
        let r = f.root();
        assert_eq!(availability_in(&r, "smc"), Availability::Loaded);
        assert_eq!(
            availability_in(&r, "smc_diag"),
            Availability::Loadable {
                file: "kernel/net/smc/smc_diag.ko.xz".into()
            }
        );
        assert_eq!(availability_in(&r, "unix"), Availability::BuiltIn);
        let nb = availability_in(&r, "rdma_rxe");
        assert_eq!(
            nb,
            Availability::NotBuilt {
                release: "6.12.1".into()
            }
        );
        assert!(nb.impossible() && !nb.advice("rdma_rxe").contains("modprobe"));
        let l = availability_in(&r, "smc_diag").advice("smc_diag");
        assert!(
            l.contains("load it with `modprobe smc_diag` (as root)"),
            "{l}"
        );
    }

    #[test]
    fn no_module_support_never_says_modprobe() {
        let f = Fake::new("b");
        let r = f.root();
        let a = availability_in(&r, "smc");
        assert_eq!(a, Availability::NoModuleSupport);
        let text = a.advice("smc");
        assert!(!text.contains("modprobe"), "{text}");
        assert!(text.contains("no module support"), "{text}");
        // ... unless it is built in.
        std::fs::create_dir_all(f.dir.join("sys/module/smc/parameters")).unwrap();
        assert_eq!(availability_in(&r, "smc"), Availability::BuiltIn);
    }

    #[test]
    fn disabled_loading_and_missing_module_tree() {
        let f = Fake::new("c");
        f.write("proc/modules", "");
        std::fs::remove_dir_all(f.dir.join("lib/modules/6.12.1")).unwrap();
        let r = f.root();
        let a = availability_in(&r, "smc");
        assert!(matches!(a, Availability::Unknown { .. }), "{a:?}");
        assert!(a.advice("smc").contains("on the host"));
        f.write("proc/sys/kernel/modules_disabled", "1\n");
        assert_eq!(availability_in(&r, "smc"), Availability::LoadingDisabled);
    }

    #[test]
    fn dashes_and_underscores_are_one() {
        assert!(same_name("smc-diag", "smc_diag"));
        assert!(!same_name("smc", "smc_diag"));
        assert_eq!(module_of("kernel/net/smc/smc_diag.ko.zst"), "smc_diag");
    }
}
