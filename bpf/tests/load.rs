//! The committed object on this machine's kernel: where BPF mode's kernel prerequisites (BTF, the
//! hook, the right to load programs) hold, every program must pass the verifier and attach;
//! where SMC is missing, a scope must refuse before attaching anything.

use smcrun_bpf::prereq::{self, State};
use smcrun_bpf::{loader, rules::KernelPolicy, tree::TreeScope};

fn can_load() -> bool {
    let r = prereq::check();
    ["btf", "hook", "mptcp", "capabilities", "load"]
        .iter()
        .all(|id| r.checks.iter().any(|c| c.id == *id && c.state == State::Ok))
}

#[test]
fn every_program_loads_and_attaches_where_the_kernel_allows() {
    if !can_load() {
        eprintln!(
            "skipped: this kernel or user cannot load BPF tracing programs: {:?}",
            prereq::check()
        );
        return;
    }
    let inst = loader::load(&["smcrun_tree", "smcrun_attach", "smcrun_fork", "smcrun_exit"])
        .unwrap_or_else(|e| panic!("{e}\n{}", e.verifier_log().unwrap_or("")));
    // Attaching the tracepoints is harmless; the socket hooks convert nothing (empty maps).
    for p in ["smcrun_fork", "smcrun_exit", "smcrun_tree", "smcrun_attach"] {
        inst.attach(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
}

#[test]
fn a_tree_scope_refuses_without_smc() {
    let r = prereq::check();
    let smc = r.checks.iter().find(|c| c.id == "smc").unwrap();
    if smc.state == State::Ok {
        eprintln!("skipped: SMC is usable here");
        return;
    }
    let e = TreeScope::attach(std::process::id(), &KernelPolicy::default()).unwrap_err();
    assert!(e.to_string().starts_with("SMC is not usable"), "{e}");
    assert!(smcrun_bpf::scopes::trees().unwrap().is_empty());
}
