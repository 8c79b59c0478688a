//! BPF mode on the command line: `smcrun --bpf[=auto] -- COMMAND`, `smcrun attach --cgroup
//! PATH` / `--netns PATH|PID`, `smcrun detach --cgroup PATH` / `--netns PATH|PID`, `smcrun
//! attach --list`, and `smcrun policy check --bpf`. The kernel side lives in the `smcrun-bpf`
//! crate, the text and JSON in `smcrun_views::bpf`; this file decides, refuses, forks the holder
//! that keeps an attachment (and the smc module) alive, and prints.
//!
//! `smcrun --bpf -- COMMAND` attaches a process-tree scope holding smcrun's own pid, then forks
//! a holder (detached into its own session, its stdio on /dev/null) that keeps the attachment
//! and an SMC socket until the last process of the tree has exited, and execs COMMAND in place:
//! the program keeps smcrun's PID, argv, exit status and signals, as without `--bpf`.

use crate::cmd::format;
use crate::run::config_file;
use crate::run::exec::{self, RunOptions};
use crate::status::{Exit, Failure, Outcome};
use clap::{Args, ValueEnum};
use smcrun_bpf::pinned::{self, Attached, Detached, Kind};
use smcrun_bpf::prereq::{self, Scope};
use smcrun_bpf::rules::{self, Analysis};
use smcrun_bpf::scopes;
use smcrun_bpf::tree::TreeScope;
use smcrun_bpf::{cgroup, netns_scope};
use smcrun_policy::Policy;
use smcrun_settings::POLICY;
use smcrun_views::bpf::json::{
    AttachView, DetachView, PolicyCheckView, ScopeView, ScopesListView, TreeView,
};
use smcrun_views::bpf::{text, tree_since};
use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `--bpf` (always BPF mode) or `--bpf=auto` (BPF mode where the kernel allows it, else the
/// preload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BpfMode {
    /// --bpf (or --bpf=on): BPF mode or nothing.
    On,
    /// --bpf=auto: BPF mode when possible, else the preload.
    Auto,
}

/// How often the holder looks whether the tree or the cgroup attachment is still there.
const HOLD_POLL: Duration = Duration::from_millis(100);

/// The policy a run asks for: --policy/--config (already canonical in `opts`), else
/// $SMCRUN_POLICY, else none.
fn policy_of(opts: &RunOptions) -> Result<Policy, String> {
    let text = match &opts.policy {
        Some(t) => t.clone(),
        None => std::env::var(POLICY.var).unwrap_or_default(),
    };
    Policy::parse(&text).map_err(|e| format!("--policy: {e}"))
}

/// The preload's own settings, which BPF mode does not use.
fn preload_only_options(opts: &RunOptions) -> Vec<&'static str> {
    let mut v = Vec::new();
    if opts.rcvbuf.is_some() {
        v.push("--rcvbuf");
    }
    if opts.sndbuf.is_some() {
        v.push("--sndbuf");
    }
    if opts.mode.is_some() {
        v.push("--mode");
    }
    if opts.fallback.is_some() {
        v.push("--fallback");
    }
    if opts.report {
        v.push("--report");
    }
    if opts.require_preload {
        v.push("--require-preload");
    }
    v
}

/// `smcrun --bpf[=auto] [OPTIONS] -- COMMAND`.
pub fn run(opts: &RunOptions, mode: BpfMode, cmd: Vec<OsString>) -> Outcome {
    let fall_back = |why: &str| {
        if opts.debug > 0 {
            eprintln!("smcrun: --bpf=auto: {why}; using the preload");
        }
        exec::run(opts, cmd.clone())
    };
    let policy = match policy_of(opts) {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::new(
                Exit::Usage,
                format!("{e} (nothing was started)"),
            ));
        }
    };
    let preload_only = preload_only_options(opts);
    if mode == BpfMode::On && !preload_only.is_empty() {
        return Err(Failure::new(Exit::Usage, format!("--bpf: {} {} of the preload, which BPF mode does not use; drop {} or use --bpf=auto (nothing was started)", preload_only.join(", "),
            if preload_only.len() == 1 { "is a setting" } else { "are settings" },
            if preload_only.len() == 1 { "it" } else { "them" })));
    }
    let analysis = rules::analyse(&policy);
    let Some(kernel_policy) = analysis.kernel.clone() else {
        let why = analysis.refusal().unwrap_or_default();
        if mode == BpfMode::Auto {
            return fall_back(&format!("the policy's {why}"));
        }
        return Err(Failure::new(Exit::Usage, format!("--bpf: the policy's {why}; BPF mode cannot honour it (nothing was attached or started; see smcrun policy check --bpf)")));
    };
    if !preload_only.is_empty() {
        // --bpf=auto with preload settings: they apply only if the preload is used.
        return fall_back(&format!("{} ask for the preload", preload_only.join(", ")));
    }
    let Some(program) = cmd.first() else {
        return Err(Failure::new(Exit::Usage, "no command given"));
    };
    let resolved = exec::resolve_command(program)?;
    let report = prereq::check_before_attach();
    if let Some(why) = report.refusal(Scope::Tree) {
        if mode == BpfMode::Auto {
            return fall_back(&format!("BPF mode is unavailable: {why}"));
        }
        return Err(Failure::new(
            Exit::Unavailable,
            format!("--bpf: {why} (nothing was attached or started)"),
        ));
    }
    exec::apply_sysctls(opts)?;
    let me = std::process::id();
    let scope = match TreeScope::attach(me, &kernel_policy) {
        Ok(s) => s,
        Err(e) => {
            if mode == BpfMode::Auto {
                return fall_back(&format!("BPF mode is unavailable: {e}"));
            }
            return Err(Failure::new(
                Exit::Unavailable,
                format!("--bpf: {e} (nothing was started)"),
            ));
        }
    };
    if let Err(e) = spawn_holder(|| hold_tree(scope)) {
        return Err(Failure::new(
            Exit::Failed,
            format!("--bpf: cannot start the holder of the attachment: {e} (nothing was started)"),
        ));
    }
    if opts.debug > 0 {
        eprintln!(
            "smcrun: --bpf: pid {me} and its descendants get SMC sockets through the kernel (policy: {})",
            if policy.is_empty() { "none".to_string() } else { policy.to_string() }
        );
    }
    // The parent's copies of the scope's fds were dropped with `scope` (moved into the holder's
    // closure and freed here when spawn_holder returned); the holder keeps its own.
    Err(exec::exec(&resolved, &cmd))
}

/// Forks a holder that runs `hold` in its own session with stdio on /dev/null, through an
/// intermediate child that exits at once (so the holder is not the program's child and the
/// program never sees it in wait()). Returns when the intermediate child has been reaped.
/// fork and _exit have no safe call in std, nix or rustix.
#[allow(unsafe_code)]
fn spawn_holder(hold: impl FnOnce()) -> Result<(), String> {
    use nix::sys::wait::waitpid;
    use nix::unistd::{fork, setsid, ForkResult};
    // SAFETY: smcrun is single-threaded here, so the child is a whole copy of it (no lock held by
    // a thread that did not come along); the intermediate child only calls setsid, fork and
    // _exit, which are async-signal-safe, and the holder owns its process from then on.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Parent { child } => {
            waitpid(child, None).map_err(|e| format!("waitpid: {e}"))?;
            Ok(())
        }
        ForkResult::Child => {
            let _ = setsid();
            // SAFETY: the intermediate child is a fork of a single-threaded process, so it has
            // one thread too: the holder it forks may run any code (see above).
            match unsafe { fork() } {
                Ok(ForkResult::Child) => {
                    detach_stdio();
                    hold();
                    // SAFETY: _exit(2) takes an integer and ends the process without running the
                    // parent's atexit handlers (as wanted) or any destructor, which leaks at
                    // worst. (Neither nix nor rustix's safe API has it.)
                    unsafe { libc::_exit(0) }
                }
                // SAFETY: as above, for the intermediate child.
                _ => unsafe { libc::_exit(0) },
            }
        }
    }
}

/// Puts stdin, stdout and stderr on /dev/null and leaves the working directory, so the holder
/// keeps no pipe, terminal or mount of the caller's busy.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
    let _ = std::env::set_current_dir("/");
}

/// Closes every descriptor above stderr: close_range(2) (Linux 5.9+), else one by one from
/// /proc/self/fd (whose own descriptor is closed last, by the iterator's drop).
#[allow(unsafe_code)]
fn close_inherited() {
    // SAFETY: close_range(2) takes integers only; the descriptors from 3 up that it closes
    // belong to nothing in this process any more (the holder has just started, and opens its
    // own afterwards), so no owner is left holding a closed number. No safe wrapper has it
    // (nix 0.29 and rustix lack close_range).
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } == 0 {
        return;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // The listing's own descriptor is gone by now: EBADF, ignored.
        let _ = nix::unistd::close(fd);
    }
}

/// The holder of a process-tree scope: takes itself out of the tree, then waits until the tree
/// is empty; dropping the scope detaches it and closes the SMC socket.
fn hold_tree(scope: TreeScope) {
    let _ = scope.remove(std::process::id());
    loop {
        std::thread::sleep(HOLD_POLL);
        match scope.processes() {
            Ok(p) if !p.is_empty() => continue,
            _ => break,
        }
    }
    drop(scope);
}

/// Where the cgroup holder's lock lives: the holder keeps it locked while it runs.
const HOLDER_LOCK: &str = "/run/smcrun-bpf-holder.lock";

/// The holder of the pinned attachment (cgroups and network namespaces): one at a time (the lock), holding an SMC socket
/// while the attachment is pinned.
fn hold_cgroups() {
    // It lives until the last detach: none of the caller's descriptors may stay open with it (a
    // pipe of `out=$(smcrun attach ...)` would never see its end). It needs none of them: its
    // lock and its SMC socket are opened below.
    close_inherited();
    let Ok(lock) = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(HOLDER_LOCK)
    else {
        return;
    };
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return; // another holder runs
    }
    let Ok(_smc) = smcrun_bpf::module_hold::open() else {
        return;
    };
    while pinned::attached() {
        std::thread::sleep(HOLD_POLL * 5);
    }
}

/// `smcrun attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// The cgroup v2 directory (/sys/fs/cgroup/...), a path below the cgroup2 root
    /// (/system.slice/redis.service) or a systemd unit (redis.service).
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present_any = ["list", "netns"],
        conflicts_with_all = ["list", "netns"]
    )]
    pub cgroup: Option<PathBuf>,
    /// A network namespace (a pod's, a container's): its file (/run/netns/NAME,
    /// /proc/PID/ns/net) or a process id (that process's network namespace).
    #[arg(long, value_name = "PATH|PID", conflicts_with = "list")]
    pub netns: Option<String>,
    /// The policy for the scope's sockets (program rules only; see `smcrun policy check --bpf`).
    #[arg(long, value_name = "POLICY", conflicts_with = "config")]
    pub policy: Option<String>,
    /// A config file whose policy to use.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// List what is attached (cgroups, network namespaces and `smcrun --bpf` process trees),
    /// since when, and the counts.
    #[arg(long)]
    pub list: bool,
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// `smcrun detach`.
#[derive(Args, Debug)]
pub struct DetachArgs {
    /// The cgroup, as given to `smcrun attach --cgroup`.
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "netns",
        conflicts_with = "netns"
    )]
    pub cgroup: Option<PathBuf>,
    /// The network namespace (its file or a process id in it), as given to `smcrun attach
    /// --netns`; one whose file is gone is found by the path it was attached by.
    #[arg(long, value_name = "PATH|PID")]
    pub netns: Option<String>,
    /// Print JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
}

/// Finds the cgroup directory an operator means: a directory on cgroup2, a path below the
/// cgroup2 root, or a systemd unit (its ControlGroup, from systemctl).
pub fn resolve_cgroup(arg: &Path) -> Result<PathBuf, String> {
    let root = prereq::cgroup2_root();
    if arg.is_dir() && cgroup::cgroup_id(arg).is_ok() {
        return Ok(arg.to_path_buf());
    }
    if let Some(root) = &root {
        if arg.is_absolute() {
            let below = root.join(arg.strip_prefix("/").unwrap_or(arg));
            if below.is_dir() {
                return Ok(below);
            }
        }
    }
    let s = arg.to_string_lossy();
    let unit_like = !s.contains('/')
        && [".service", ".scope", ".slice", ".socket", ".mount"]
            .iter()
            .any(|e| s.ends_with(e));
    if unit_like {
        let root = root.ok_or("no cgroup2 file system is mounted")?;
        let out = std::process::Command::new("systemctl")
            .args(["show", "--property=ControlGroup", "--value", &s])
            .output()
            .map_err(|e| format!("{s}: cannot ask systemctl for its cgroup: {e}"))?;
        let cg = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || cg.is_empty() {
            return Err(format!(
                "{s}: systemd knows no cgroup of this unit (is it running?)"
            ));
        }
        return Ok(root.join(cg.trim_start_matches('/')));
    }
    if arg.exists() {
        return cgroup::cgroup_id(arg)
            .map(|_| arg.to_path_buf())
            .map_err(|e| e.to_string());
    }
    Err(format!(
        "{}: no such cgroup; expected a cgroup v2 directory (/sys/fs/cgroup/...), a path below the cgroup2 root, or a systemd unit name",
        arg.display()
    ))
}

fn attach_policy(args: &AttachArgs) -> Result<Policy, String> {
    if let Some(text) = &args.policy {
        return Policy::parse(text).map_err(|e| format!("--policy: {e}"));
    }
    if let Some(path) = &args.config {
        return Ok(config_file::load(path)?.policy.unwrap_or_default());
    }
    Ok(Policy::default())
}

/// The scope `attach` or `detach` is about, resolved: a cgroup directory or a network namespace.
enum Resolved {
    Cgroup(PathBuf),
    Netns(netns_scope::Netns),
}

impl Resolved {
    fn kind(&self) -> Kind {
        match self {
            Resolved::Cgroup(_) => Kind::Cgroup,
            Resolved::Netns(_) => Kind::Netns,
        }
    }

    fn path(&self) -> &Path {
        match self {
            Resolved::Cgroup(d) => d,
            Resolved::Netns(n) => &n.path,
        }
    }
}

/// `smcrun attach ...`.
pub fn attach(args: &AttachArgs) -> Outcome {
    if args.list {
        return list(args.json);
    }
    let fail_usage = |e: String| {
        Err(Failure::new(
            Exit::Usage,
            format!("attach: {e} (nothing was attached)"),
        ))
    };
    let policy = match attach_policy(args) {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::new(
                Exit::Usage,
                format!("{e} (nothing was attached)"),
            ));
        }
    };
    let analysis = rules::analyse(&policy);
    let Some(kernel_policy) = analysis.kernel.clone() else {
        return Err(Failure::new(Exit::Usage, format!("attach: the policy's {}; BPF mode cannot honour it (nothing was attached; see smcrun policy check --bpf)", analysis.refusal().unwrap_or_default())),
        );
    };
    let target = match (&args.cgroup, &args.netns) {
        (Some(arg), _) => match resolve_cgroup(arg) {
            Ok(d) => Resolved::Cgroup(d),
            Err(e) => return fail_usage(e),
        },
        (None, Some(arg)) => match netns_scope::resolve(arg) {
            Ok(n) => Resolved::Netns(n),
            Err(e) => return fail_usage(e.to_string()),
        },
        (None, None) => {
            return Err(Failure::new(
                Exit::Usage,
                "attach needs --cgroup PATH, --netns PATH|PID or --list",
            ));
        }
    };
    let scope = match target {
        Resolved::Cgroup(_) => Scope::Cgroup,
        Resolved::Netns(_) => Scope::Netns,
    };
    if let Some(why) = prereq::check_before_attach().refusal(scope) {
        return Err(Failure::new(
            Exit::Unavailable,
            format!("attach: {why} (nothing was attached)"),
        ));
    }
    let policy_text = policy.to_string();
    let done: Result<Attached, smcrun_bpf::Error> = match &target {
        Resolved::Cgroup(dir) => cgroup::attach(dir, &policy_text, &kernel_policy),
        Resolved::Netns(n) => netns_scope::attach(n, &policy_text, &kernel_policy),
    };
    let path = target.path();
    match done {
        Ok(a) => {
            if let Err(e) = spawn_holder(hold_cgroups) {
                eprintln!("smcrun: warning: cannot start the holder of the smc module: {e}");
            }
            if args.json {
                let view = AttachView::new(target.kind(), path, &a, policy_text);
                format::print_json(&view)
            } else {
                format::print_lines([text::attached(target.kind(), path, &a, &policy_text)])
            }
        }
        Err(e) => Err(Failure::new(
            Exit::Failed,
            format!("attach {}: {e}", path.display()),
        )),
    }
}

/// `smcrun detach ...`.
pub fn detach(args: &DetachArgs) -> Outcome {
    let usage = |e: String| Err(Failure::new(Exit::Usage, format!("detach: {e}")));
    let done: Result<(PathBuf, Detached), smcrun_bpf::Error> = match (&args.cgroup, &args.netns) {
        (Some(arg), _) => match resolve_cgroup(arg) {
            Ok(dir) => cgroup::detach(&dir).map(|d| (dir, d)),
            Err(e) => return usage(e),
        },
        (None, Some(arg)) => match netns_scope::resolve(arg) {
            Ok(n) => netns_scope::detach(&n).map(|d| (n.path, d)),
            Err(e) => match netns_scope::detach_gone(arg) {
                Ok(Some(d)) => Ok((d.scope.path.clone(), d)),
                Ok(None) => return usage(e.to_string()),
                Err(e2) => Err(e2),
            },
        },
        (None, None) => return usage("detach needs --cgroup PATH or --netns PATH|PID".into()),
    };
    match done {
        Ok((path, d)) => {
            if args.json {
                format::print_json(&DetachView::new(&d))
            } else {
                format::print_lines([text::detached(&path, &d)])
            }
        }
        Err(e) => Err(Failure::new(Exit::Failed, format!("detach: {e}"))),
    }
}

/// `smcrun attach --list`: every scope, since when, and its counts.
fn list(json_out: bool) -> Outcome {
    let all = match scopes::all() {
        Ok(a) => a,
        Err(e) => {
            return Err(Failure::new(Exit::Failed, format!("attach --list: {e}")));
        }
    };
    if json_out {
        let scopes = all
            .cgroups
            .iter()
            .chain(&all.netns)
            .map(ScopeView::attached)
            .chain(
                all.trees
                    .iter()
                    .map(|t| ScopeView::Tree(TreeView::new(t, tree_since(t)))),
            )
            .collect();
        format::print_json(&ScopesListView { scopes })?;
        return Ok(ExitCode::SUCCESS);
    }
    format::print_lines(text::list(&all, tree_since))
}

/// `smcrun policy check --bpf`: which rules BPF mode honours. Exit 0 when it honours all of
/// them, 1 when it does not (the reasons are printed).
pub fn policy_check(policy: &Policy, json_out: bool) -> Outcome {
    let a: Analysis = rules::analyse(policy);
    let honoured = a.kernel.is_some();
    if json_out {
        format::print_json(&PolicyCheckView::new(policy.to_string(), &a))?;
    } else {
        format::print_lines(text::policy_check(&a))?;
    }
    Ok(if honoured {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(Exit::Failed)
    })
}
