//! smcrun's own exit statuses, chosen here and nowhere else. A program smcrun runs keeps its own
//! status: smcrun execs it and is gone.

use std::process::ExitCode;

/// Why smcrun itself exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Ok,
    /// 1: the kernel interface is missing or refused, a sysctl could not be set, the shim could
    /// not be found, the output could not be written, or a view found what it reports as a
    /// failure (`demo --require-smc`, `doctor` warnings).
    Failed,
    /// 2: bad usage, or a bad option, config or policy value (the message names it).
    Usage,
    /// 3: `doctor` found a check that failed (SMC, or with `--bpf` BPF mode, cannot work here).
    ChecksFailed,
    /// 125: not possible here: BPF mode's or the agent's prerequisite is missing, or the kernel's
    /// version predates what was asked for (IPPROTO_SMC with `--mode inet --fallback strict`, an
    /// SMC netlink interface a view reads); the one line names it (and the version that has it).
    Unavailable,
    /// 126: the program is not executable, or `--require-preload` refused it.
    NotExecutable,
    /// 127: the program was not found.
    NotFound,
}

impl Exit {
    /// Every status smcrun itself exits with, in order (the man pages' EXIT STATUS).
    pub const ALL: [Exit; 7] = [
        Exit::Ok,
        Exit::Failed,
        Exit::Usage,
        Exit::ChecksFailed,
        Exit::Unavailable,
        Exit::NotExecutable,
        Exit::NotFound,
    ];

    /// What the status means, in one line (the man pages and the manual print it).
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "done",
            Exit::Failed => "the kernel interface is missing or refused, a sysctl could not be set, the shim could not be found, the output could not be written, or a view found what it reports as a failure (demo --require-smc, doctor's warnings)",
            Exit::Usage => "bad usage, or a bad option, config or policy value (the message names it)",
            Exit::ChecksFailed => "doctor: a check failed (SMC, or with --bpf BPF mode, cannot work here)",
            Exit::Unavailable => "not possible here: BPF mode's or the agent's prerequisite is missing, or the kernel predates what was asked for (the message names it and the version that has it)",
            Exit::NotExecutable => "the program is not executable, or --require-preload refused it",
            Exit::NotFound => "the program was not found",
        }
    }

    /// The status number.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::ChecksFailed => 3,
            Exit::Unavailable => 125,
            Exit::NotExecutable => 126,
            Exit::NotFound => 127,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// What a subcommand ends with: the status of what it printed, or the refusal `main` prints
/// once ([`finish`]).
pub type Outcome = Result<ExitCode, Failure>;

/// A refusal: one line for stderr and the status it ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// How smcrun exits.
    pub exit: Exit,
    /// Who says it, in front of the line: `smcrun`, or `smcrun ps` for a subcommand's own words.
    pub who: &'static str,
    /// The line, without the `smcrun: ` that [`Failure::report`] puts in front.
    pub message: String,
}

impl Failure {
    /// A failure with its status, said by `smcrun`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure::of("smcrun", exit, message)
    }

    /// A failure said by `who` (`smcrun ps`).
    pub fn of(who: &'static str, exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            who,
            message: message.into(),
        }
    }

    /// The kernel's refusal `e`: [`Exit::Unavailable`] when the kernel's version predates the
    /// interface, else [`Exit::Failed`].
    pub fn refused(e: &smcrun_kernel::Error) -> Failure {
        let exit = if e.is_kernel_lacking() {
            Exit::Unavailable
        } else {
            Exit::Failed
        };
        Failure::new(exit, e.to_string())
    }

    /// Prints the line (and, for a JSON command, the error object) and gives the status to exit
    /// with.
    pub fn report(self) -> ExitCode {
        crate::cmd::format::fail(self.exit, &format!("{}: {}", self.who, self.message))
    }
}

/// The status a subcommand's outcome ends smcrun with, its refusal printed here, once.
pub fn finish(outcome: Outcome) -> ExitCode {
    outcome.unwrap_or_else(Failure::report)
}

/// `smcrun doctor`'s status for the worst of its checks: 0 all passed (or skipped), 1 a warning,
/// 3 a failure (not 2, bad usage, so that a script can tell "SMC cannot work here" from "doctor
/// was called wrong").
pub const fn doctor(worst: smcrun_views::doctor::Verdict) -> Exit {
    use smcrun_views::doctor::Verdict;
    match worst {
        Verdict::Passed => Exit::Ok,
        Verdict::Warnings => Exit::Failed,
        Verdict::Failed => Exit::ChecksFailed,
    }
}
