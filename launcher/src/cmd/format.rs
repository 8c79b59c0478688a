//! What every operator view shares: the one-line refusal and its exit status, JSON printing, unit
//! scaling (smc-tools' "200.7M" counters, smc_monitor_ex's "1.81 GB/s" rates), percentages, aligned
//! text tables and interface names.
//!
//! Exit status of the views: 0 the kernel answered (possibly with nothing), 1 the kernel interface
//! is missing or refused (one line names the module and, where the kernel can load it, the
//! `modprobe` that does; or the refusal), 2 bad usage, 125 the kernel's version predates the
//! interface (one line names it and the Linux version that added it).

use crate::status::{Exit, Failure, Outcome};
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
pub use smcrun_report::text::safe;

/// Whether the command asked for JSON (`-j`/`--json`), set once by `main` from the parsed line.
static JSON: AtomicBool = AtomicBool::new(false);

/// Remember that the command asked for JSON: its failures then print an error object too.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// The error object a JSON command prints on stdout when it fails, so that a script reading
/// stdout learns why there is no data (the same line also goes to stderr).
#[derive(Serialize)]
struct ErrorView<'a> {
    /// The line printed on stderr.
    error: &'a str,
    /// The status smcrun exits with.
    exit_code: u8,
}

/// A failure: its one line on stderr and, when the command asked for JSON, `{"error": LINE,
/// "exit_code": N}` on stdout; returns the status. `line` is the whole line (`smcrun ps: ...`).
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
        error: line,
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

/// Print `v` as pretty JSON on stdout (through one buffer; see [`stdout_result`]).
pub fn print_json(v: &impl Serialize) -> Outcome {
    let mut out = BufWriter::new(std::io::stdout().lock());
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

/// A counter in smc-tools' short form: 4 significant digits and a decimal suffix
/// (`5076` → "5.076K", `200705600` → "200.7M"); values under 1000 as they are.
pub fn short(v: u64) -> String {
    if v < 1000 {
        return v.to_string();
    }
    let mut x = v as f64;
    let mut unit = 0;
    const UNITS: [&str; 6] = ["", "K", "M", "G", "T", "P"];
    while x >= 1000.0 && unit < UNITS.len() - 1 {
        x /= 1000.0;
        unit += 1;
    }
    let digits = if x >= 100.0 {
        1
    } else if x >= 10.0 {
        2
    } else {
        3
    };
    let mut s = format!("{x:.digits$}");
    // 999.95K rounds to "1000.0": say 1.000M instead.
    if s.starts_with("1000") && unit < UNITS.len() - 1 {
        unit += 1;
        s = "1.000".to_string();
    }
    format!("{s}{}", UNITS[unit])
}

/// Bytes (or bytes per second with `per` = "/s") in binary units with two decimals, as
/// smc_monitor_ex prints them: "0 B", "512.00 KB", "1.81 GB/s". With `raw` the plain number.
pub fn bytes(v: f64, raw: bool, per: &str) -> String {
    if raw {
        return format!("{v:.0} B{per}");
    }
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut x = v;
    let mut unit = 0;
    while x >= 1024.0 && unit < UNITS.len() - 1 {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{x:.0} B{per}")
    } else {
        format!("{x:.2} {}{per}", UNITS[unit])
    }
}

/// A rate of events per second in decimal units: "0 /s", "21.66 K/s"; with `raw` the plain number.
pub fn rate(v: f64, raw: bool) -> String {
    if raw || v < 1000.0 {
        return if v.fract() == 0.0 || raw {
            format!("{v:.0} /s")
        } else {
            format!("{v:.1} /s")
        };
    }
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut x = v;
    let mut unit = 0;
    while x >= 1000.0 && unit < UNITS.len() - 1 {
        x /= 1000.0;
        unit += 1;
    }
    format!("{x:.2} {}/s", UNITS[unit])
}

/// Column alignment in a [`Table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right.
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A text table: a header row and rows, each column as wide as its widest cell, separated by
/// two spaces; the last column is not padded.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names and alignments.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            header: columns.iter().map(|(h, _)| h.to_string()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (missing cells print empty, extra cells are kept). Each cell is shown with its
    /// control characters escaped ([`safe`]): cells carry names the kernel, a program or another
    /// user chose (devices, interfaces, EIDs, commands).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| safe(&c).into_owned()).collect());
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines of text (header first).
    pub fn render(&self) -> Vec<String> {
        let ncol = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0usize; ncol];
        for r in self.rows.iter().chain([&self.header]) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &Vec<String>| {
            let mut out = String::new();
            for (i, w) in width.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    out.push_str("  ");
                }
                let pad = w - cell.chars().count();
                let last = i + 1 == ncol;
                match self.align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        out.push_str(&" ".repeat(pad));
                        out.push_str(cell);
                    }
                    Align::Left => {
                        out.push_str(cell);
                        if !last {
                            out.push_str(&" ".repeat(pad));
                        }
                    }
                }
            }
            out.trim_end().to_string()
        };
        std::iter::once(line(&self.header))
            .chain(self.rows.iter().map(line))
            .collect()
    }

    /// Print the table on stdout.
    pub fn print(&self) -> Outcome {
        print_lines(self.render())
    }
}

/// The name of network interface `index` ("lo"), the index in brackets when it has none here,
/// "-" for no interface.
pub use smcrun_views::json::linkgroup::ifname;

/// Parse a positive number of seconds ("1", "0.5") for `--interval` / `-i`.
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not an interval; expected seconds greater than 0 and at most 86400, e.g. 1 or 0.5"
        )),
    }
}

/// A reply captured from the real kernel in the VM test bed
/// (`kernel/tests/fixtures/PHASE/NAME.bin`), for the views' tests.
#[cfg(test)]
pub fn fixture(phase: &str, name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../kernel/tests/fixtures/{phase}/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_counters_like_smc_tools() {
        assert_eq!(short(0), "0");
        assert_eq!(short(999), "999");
        assert_eq!(short(5076), "5.076K");
        assert_eq!(short(200_705_600), "200.7M");
        assert_eq!(short(1_194_173_445), "1.194G");
        assert_eq!(short(5_017_741), "5.018M");
        assert_eq!(short(999_999), "1.000M");
    }

    #[test]
    fn bytes_and_rates_like_the_monitor() {
        assert_eq!(bytes(0.0, false, "/s"), "0 B/s");
        assert_eq!(bytes(524_288.0, false, ""), "512.00 KB");
        assert_eq!(
            bytes(1.81 * 1024.0 * 1024.0 * 1024.0, false, "/s"),
            "1.81 GB/s"
        );
        assert_eq!(bytes(524_288.0, true, ""), "524288 B");
        assert_eq!(rate(21_660.0, false), "21.66 K/s");
        assert_eq!(rate(0.0, false), "0 /s");
        assert_eq!(rate(2.5, false), "2.5 /s");
        assert_eq!(rate(21_660.0, true), "21660 /s");
    }

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&[
            ("Name", Align::Left),
            ("#", Align::Right),
            ("X", Align::Left),
        ]);
        t.row(vec!["a".into(), "100".into(), "end".into()]);
        t.row(vec!["long".into(), "2".into()]);
        assert_eq!(
            t.render(),
            vec!["Name    #  X", "a     100  end", "long    2"]
        );
    }

    #[test]
    fn intervals_must_be_positive_seconds() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert!(seconds("0").is_err());
        assert!(seconds("-1").is_err());
        assert!(seconds("soon").unwrap_err().contains("\"soon\""));
    }

    #[test]
    fn loopback_has_a_name() {
        assert_eq!(ifname(1), "lo");
        assert_eq!(ifname(0), "-");
    }
}
