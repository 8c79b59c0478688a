//! `smcrun monitor`'s text: smc_monitor_ex's header and lines, in fixed-width columns.

use super::{Line, MonMode, View};
use crate::text::{bytes, rate};

/// The column names of `view`.
pub fn columns(view: View) -> Vec<&'static str> {
    let mut c = vec!["Date", "Mode"];
    if matches!(view, View::Speed | View::Base) {
        c.extend(["Rx Rate", "Rx Rps", "Tx Rate", "Tx Rps"]);
    }
    if matches!(view, View::Connection | View::Base) {
        c.push("#Conn");
    }
    if matches!(view, View::Memory | View::Base) {
        c.extend(["Rx Bufs", "Tx Bufs"]);
    }
    c
}

/// The width of the date column.
const DATE_W: usize = 19;
/// The width of the mode column.
const MODE_W: usize = 8;
/// The width of every figure's column.
const COL_W: usize = 13;

/// The header line.
pub fn header(view: View) -> String {
    let cols = columns(view);
    let mut out = format!("{:<DATE_W$}  {:<MODE_W$}", cols[0], cols[1]);
    for c in &cols[2..] {
        out.push_str(&format!("  {c:>COL_W$}"));
    }
    out
}

/// One text line.
pub fn text(view: View, mode: MonMode, date: &str, l: &Line, raw: bool) -> String {
    let mut cells: Vec<String> = Vec::new();
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    if matches!(view, View::Speed | View::Base) {
        cells.push(or_dash(l.rx_rate.map(|v| bytes(v, raw, "/s"))));
        cells.push(or_dash(l.rx_rps.map(|v| rate(v, raw))));
        cells.push(or_dash(l.tx_rate.map(|v| bytes(v, raw, "/s"))));
        cells.push(or_dash(l.tx_rps.map(|v| rate(v, raw))));
    }
    if matches!(view, View::Connection | View::Base) {
        cells.push(or_dash(l.conns.map(|v| v.to_string())));
    }
    if matches!(view, View::Memory | View::Base) {
        cells.push(or_dash(l.rx_bufs.map(|v| bytes(v as f64, raw, ""))));
        cells.push(or_dash(l.tx_bufs.map(|v| bytes(v as f64, raw, ""))));
    }
    let mut out = format!("{date:<DATE_W$}  {:<MODE_W$}", mode.name());
    for c in cells {
        out.push_str(&format!("  {c:>COL_W$}"));
    }
    out
}
