//! The text of the operator's views: smc-tools' short counters ("200.7M"), smc_monitor_ex's
//! units ("1.81 GB/s", "21.66 K/s") and aligned tables, shared by every view's `text` module.
//! Pure: strings in, strings out; the launcher prints them.

pub use smcrun_report::text::safe;

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
}
