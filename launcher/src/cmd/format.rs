//! What printing every operator view shares: a refusal's line and, for a JSON command, its
//! error object (behind [`crate::status::Failure::report`]), JSON, lines and tables on stdout (a
//! closed pipe ends quietly, any other write failure is a refusal), and the `--interval` parser.
//! The text itself (units, tables) is `smcrun_views::text`'s; the exit statuses are
//! [`crate::status`]'s.

use crate::status::{Exit, Failure, Outcome};
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
pub use smcrun_report::text::safe;
use smcrun_views::error::ErrorView;

/// Whether the command asked for JSON (`-j`/`--json`), set once by `main` from the parsed line.
static JSON: AtomicBool = AtomicBool::new(false);

/// Remember that the command asked for JSON: its failures then print an error object too.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// A failure (only [`crate::status::Failure::report`] calls it): its one line on stderr and,
/// when the command asked for JSON, `{"error": LINE, "exit_code": N}` on stdout; returns the
/// status. `line` is the whole line (`smcrun ps: ...`).
pub fn fail(exit: Exit, line: &str) -> ExitCode {
    eprintln!("{line}");
    if JSON.load(Ordering::Relaxed) {
        print_error_object(exit, line);
    }
    exit.into()
}

/// The error object alone (for a line already printed, as clap prints its usage errors).
pub fn print_error_object(exit: Exit, line: &str) {
    // Best effort: stdout may be what failed.
    let _ = print_json(&ErrorView {
        error: line.into(),
        exit_code: exit.code(),
    });
}

/// The end of writing a view to stdout: a reader that went away (`| head`) ends the output
/// quietly with success; any other failure (a full disk, /dev/full) is one line on stderr and
/// exit 1.
pub fn stdout_result(written: std::io::Result<()>) -> Outcome {
    match written {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(Failure::new(
            Exit::Failed,
            format!("cannot write to stdout: {e}"),
        )),
    }
}

/// The last guard for output still written with `print!`/`println!` (std panics with "failed
/// printing to stdout" when stdout is closed or full): a closed pipe ends quietly with success,
/// any other failure is the one line of [`stdout_result`] and exit 1, never a panic (101).
pub fn install_stdout_guard() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload_as_str().unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            if why.contains("Broken pipe") {
                std::process::exit(0);
            }
            eprintln!("smcrun: cannot write to stdout: {why}");
            std::process::exit(i32::from(Exit::Failed.code()));
        }
        default(info);
    }));
}

/// Write `bytes` to stdout in one go (see [`stdout_result`]).
pub fn write_stdout(bytes: &[u8]) -> Outcome {
    let mut out = std::io::stdout().lock();
    stdout_result(out.write_all(bytes).and_then(|()| out.flush()))
}

/// Bytes of JSON gathered before each write to stdout: the serializer hands over a few bytes at a
/// time, and `ss -a --json` with 10,000 sockets is about 2.7 MB (std's 8 KiB buffer made that
/// some 330 write calls, this one 11).
const JSON_BUFFER: usize = 256 * 1024;

/// Print `v` as pretty JSON on stdout (through one buffer; see [`stdout_result`]).
pub fn print_json(v: &impl Serialize) -> Outcome {
    let mut out = BufWriter::with_capacity(JSON_BUFFER, std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut out, v)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
    stdout_result(written)
}

/// Print lines on stdout through one buffer (thousands of sockets cost one write, not one per
/// line; see [`stdout_result`]).
pub fn print_lines<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> Outcome {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let written = lines
        .into_iter()
        .try_for_each(|l| writeln!(out, "{}", l.as_ref()))
        .and_then(|()| out.flush());
    stdout_result(written)
}

/// Print one line now (the monitor's); an error means the caller should stop (and end with
/// [`stdout_result`]).
pub fn emit_line(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())
}

pub use smcrun_views::text::Table;

/// Print a table on stdout.
pub fn print_table(t: &Table) -> Outcome {
    print_lines(t.render())
}

/// Parse a positive number of seconds ("1", "0.5") for `--interval` / `-i`.
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not an interval; expected seconds greater than 0 and at most 86400, e.g. 1 or 0.5"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_must_be_positive_seconds() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert!(seconds("0").is_err());
        assert!(seconds("-1").is_err());
        assert!(seconds("soon").unwrap_err().contains("\"soon\""));
    }
}
