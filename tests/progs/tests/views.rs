//! The operator views on this machine's kernel: without SMC each says in one line which module is
//! missing and, only where the kernel can load it, how (never `modprobe` on a kernel without
//! module support), and exits 1; without RDMA devices `smcrun rdma` says "no RDMA
//! devices" and exits 1 (under `--json` also as an error object on stdout); bad usage exits 2. (What they show on a real SMC kernel is checked by
//! the VM test bed's `views` check.)

mod common;

use common::{kernel_has_af_smc, run, smcrun};

/// Every view, with its JSON form, and the module whose absence it reports.
const SMC_VIEWS: &[(&[&str], &str)] = &[
    (&["ss"], "smc_diag"),
    (&["ss", "-a", "-p", "--json"], "smc_diag"),
    (&["stats"], "smc"),
    (&["stats", "-d", "-m", "smcr", "--json"], "smc"),
    (&["stats", "--interval", "0.1"], "smc"),
    (&["linkgroup", "-d"], "smc"),
    (&["linkgroup", "--json"], "smc"),
    (&["link"], "smc"),
    (&["link", "--json"], "smc"),
    (&["device"], "smc"),
    (&["device", "--json"], "smc"),
    (&["info"], "smc"),
    (&["info", "--json"], "smc"),
    (&["monitor", "base", "-i", "0.1", "--count", "1"], "smc"),
    (&["monitor", "connection", "--json", "--count", "1"], "smc"),
];

fn lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// What a failing view prints on stdout: nothing, or under `--json` an error object carrying the
/// same line as stderr and the exit status (a script reading stdout still learns why).
fn assert_failure_stdout(args: &[&str], out: &str, err: &str, code: i32) {
    if !args.iter().any(|a| *a == "--json" || *a == "-j") {
        assert!(out.is_empty(), "{args:?} printed on stdout: {out}");
        return;
    }
    let v: serde_json::Value = serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not one JSON object ({e}): {out}"));
    assert_eq!(v["error"].as_str(), Some(err.trim()), "{args:?}: {out}");
    assert_eq!(
        v["exit_code"].as_i64(),
        Some(i64::from(code)),
        "{args:?}: {out}"
    );
}

#[test]
fn without_smc_each_view_names_the_missing_module_in_one_line() {
    let has_smc = kernel_has_af_smc();
    for (args, module) in SMC_VIEWS {
        let mut c = smcrun();
        c.args(*args);
        let (out, err, o) = run(c);
        if has_smc {
            // A kernel with SMC answers (exit 0), or refuses in one line (e.g. smc_diag missing).
            match o.status.code() {
                Some(0) => assert!(!out.is_empty(), "{args:?} printed nothing"),
                Some(1) => assert_eq!(lines(&err).len(), 1, "{args:?}: {err}"),
                other => panic!("{args:?} exited {other:?}: {err}"),
            }
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{args:?}: {out}{err}");
        assert_failure_stdout(args, &out, &err, 1);
        let l = lines(&err);
        assert_eq!(l.len(), 1, "{args:?} must say it in one line: {err}");
        assert!(l[0].starts_with("smcrun: "), "{args:?}: {err}");
        if std::path::Path::new("/proc/modules").exists() {
            let loadable = format!(
                "the kernel module `{module}` is not loaded; load it with `modprobe {module}`"
            );
            let absent = format!("has no `{module}`");
            assert!(
                l[0].contains(&loadable) || l[0].contains(&absent),
                "{args:?}: {err}"
            );
        } else {
            // A kernel without module support (this machine's): never "modprobe".
            let want = format!(
                "this kernel has no `{module}`: it is not built in, and the kernel has no module support"
            );
            assert!(l[0].contains(&want), "{args:?}: {err}");
            assert!(!l[0].contains("modprobe"), "{args:?}: {err}");
        }
    }
}

fn has_rdma_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn without_rdma_devices_the_rdma_view_says_so() {
    for args in [
        &["rdma"][..],
        &["rdma", "--json"],
        &["rdma", "qp", "--state", "RTS"],
    ] {
        let mut c = smcrun();
        c.args(args);
        let (out, err, o) = run(c);
        if has_rdma_devices() {
            assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{args:?}: {out}{err}");
        assert_failure_stdout(args, &out, &err, 1);
        let l = lines(&err);
        assert_eq!(l.len(), 1, "{args:?}: {err}");
        assert!(
            l[0].starts_with("smcrun: no RDMA devices"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn bad_view_usage_exits_2_naming_the_value() {
    for (args, named) in [
        (&["monitor", "speed", "-m", "fallback"][..], "-m fallback"),
        (&["monitor", "base", "-i", "0"], "\"0\""),
        (&["stats", "--interval", "soon"], "\"soon\""),
        (&["stats", "-m", "smcx"], "smcx"),
        (&["rdma", "qp", "cq"], "\"cq\""),
        (&["monitor", "bandwidth"], "bandwidth"),
    ] {
        let mut c = smcrun();
        c.args(args);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} must name {named}: {err}");
    }
}
