//! What a run found, and how it is written: `latest.json` (everything), `latest.md` (the table
//! bench/README.md shows) and `latest.svg` (the chart of the paired ratios).

use crate::stats::{differences, ratios, Summary};
use serde::{Deserialize, Serialize};

/// A goal a figure is held to (from the issues), judged on the median.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Goal {
    /// B/A at most this.
    RatioAtMost(f64),
    /// B/A at least this.
    RatioAtLeast(f64),
    /// B - A at most this (in the row's unit).
    AddedAtMost(f64),
    /// The value (B, or the only side) at most this.
    AtMost(f64),
}

impl Goal {
    fn describe(&self, unit: &str) -> String {
        match self {
            Goal::RatioAtMost(x) => format!("≤ {x}×"),
            Goal::RatioAtLeast(x) => format!("≥ {x}×"),
            Goal::AddedAtMost(x) => format!("≤ +{} {unit}", num(*x)),
            Goal::AtMost(x) => format!("≤ {} {unit}", num(*x)),
        }
    }
}

/// One figure: side A against side B over interleaved pairs, or one side alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// The measurement it belongs to (`hooks`, `preload`, ...).
    pub group: String,
    /// What was measured.
    pub name: String,
    /// The unit of A, B and B - A.
    pub unit: String,
    /// What side A is (empty for a figure without a baseline).
    pub a_label: String,
    /// What side B is.
    pub b_label: String,
    /// Side A's values.
    pub a: Option<Summary>,
    /// Side B's values (the only side of a figure without a baseline).
    pub b: Option<Summary>,
    /// B/A pair by pair.
    pub ratio: Option<Summary>,
    /// B - A pair by pair.
    pub added: Option<Summary>,
    /// The raw values, in pair order.
    pub a_values: Vec<f64>,
    /// The raw values of B, in pair order.
    pub b_values: Vec<f64>,
    /// The goal, if the issue gives one.
    pub goal: Option<Goal>,
    /// Whether the median meets it.
    pub met: Option<bool>,
    /// "within noise" when the ratio's quartiles straddle 1.0, else "B higher" / "B lower".
    pub noise: Option<String>,
    /// Anything the reader must know to read it (a caveat, how it was taken).
    pub note: String,
    /// Why it could not be measured (the other fields are then empty).
    pub skipped: Option<String>,
}

impl Row {
    /// A figure of B against A, from values taken in interleaved pairs.
    pub fn paired(
        group: &str,
        name: &str,
        unit: &str,
        a: (&str, &[f64]),
        b: (&str, &[f64]),
    ) -> Row {
        let r = ratios(a.1, b.1);
        let ratio = Summary::of(&r);
        Row {
            group: group.into(),
            name: name.into(),
            unit: unit.into(),
            a_label: a.0.into(),
            b_label: b.0.into(),
            a: Summary::of(a.1),
            b: Summary::of(b.1),
            ratio,
            added: Summary::of(&differences(a.1, b.1)),
            a_values: a.1.to_vec(),
            b_values: b.1.to_vec(),
            goal: None,
            met: None,
            noise: ratio.map(|r| {
                if r.straddles(1.0) {
                    "within noise".to_string()
                } else if r.median > 1.0 {
                    "B higher".to_string()
                } else {
                    "B lower".to_string()
                }
            }),
            note: String::new(),
            skipped: None,
        }
    }

    /// A figure with no baseline (a cost measured alone).
    pub fn single(group: &str, name: &str, unit: &str, label: &str, values: &[f64]) -> Row {
        let mut r = Row::paired(group, name, unit, ("", &[]), (label, values));
        r.ratio = None;
        r.added = None;
        r.noise = None;
        r
    }

    /// A figure that could not be measured here, and why.
    pub fn skipped(group: &str, name: &str, why: &str) -> Row {
        let mut r = Row::single(group, name, "", "", &[]);
        r.skipped = Some(why.into());
        r
    }

    /// Holds the figure to `goal`.
    pub fn goal(mut self, goal: Goal) -> Row {
        let med = |s: Option<Summary>| s.map(|s| s.median);
        self.met = match goal {
            Goal::RatioAtMost(x) => med(self.ratio).map(|m| m <= x),
            Goal::RatioAtLeast(x) => med(self.ratio).map(|m| m >= x),
            Goal::AddedAtMost(x) => med(self.added).map(|m| m <= x),
            Goal::AtMost(x) => med(self.b).map(|m| m <= x),
        };
        self.goal = Some(goal);
        self
    }

    /// A figure that does not vary between runs (instructions): no noise to judge.
    pub fn deterministic(mut self) -> Row {
        self.noise = None;
        self
    }

    /// Adds a note.
    pub fn note(mut self, note: &str) -> Row {
        self.note = note.into();
        self
    }
}

/// The machine a run was taken on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs this process may use.
    pub cores: usize,
    /// The CPU's model name.
    pub cpu: String,
    /// `uname -r`.
    pub kernel: String,
    /// Memory, in GiB.
    pub memory_gib: f64,
    /// /proc/loadavg's 1, 5 and 15 minute figures when the run started.
    pub load_before: [f64; 3],
    /// The same when it ended.
    pub load_after: [f64; 3],
    /// Whether the kernel has SMC (AF_SMC sockets can be made).
    pub smc: bool,
}

/// A whole run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// `bench/run` with `--quick` (tiny counts: the harness works, the figures mean little).
    pub quick: bool,
    /// When it ran (seconds since 1970).
    pub started_unix: u64,
    /// How long it took.
    pub seconds: f64,
    /// The smcrun source it measured (`git describe`).
    pub source: String,
    /// The machine.
    pub machine: Machine,
    /// Every figure.
    pub rows: Vec<Row>,
}

/// A number with a sensible count of digits for a table.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn summary_cell(s: Option<Summary>, unit: &str) -> String {
    match s {
        Some(s) => format!("{} {unit} [{}–{}]", num(s.median), num(s.q1), num(s.q3)),
        None => "—".into(),
    }
}

/// The group headings of the table, in the order the issue lists them.
pub const GROUPS: [(&str, &str); 9] = [
    ("hooks", "1. Hook cost per call (host, fallback path)"),
    (
        "preload",
        "2. Preloading the shim into a process that makes no socket",
    ),
    ("launcher", "3. Launcher start-up"),
    (
        "redis",
        "4. redis-benchmark A/B on loopback (host, fallback path)",
    ),
    ("runtime", "5. The runtime"),
    ("views", "6. The views and the exporter (VM)"),
    (
        "vm",
        "7. SMC-R over soft-RoCE against TCP, preload against BPF mode (VM, TCG)",
    ),
    (
        "smcd",
        "8. SMC-D loopback against TCP, preload against BPF mode (VM, TCG, the project's SMC-D kernel)",
    ),
    (
        "agent",
        "9. The agent's cost: short SMC-R connections without and with `smcrun agent` (VM, TCG)",
    ),
];

/// The markdown table: one section per measurement.
pub fn markdown(r: &Report) -> String {
    let m = &r.machine;
    let load = |l: [f64; 3]| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]);
    let mut s = format!(
        "Machine: {} cores ({}), kernel {}{}, {:.0} GiB; load average {} at the start, {} at the end \
         (other developers' builds and VMs share these cores). Source {}; {}; {:.0} s.\n\n\
         Each A/B figure: A and B interleaved (A B, B A, …); B/A is taken pair by pair and given as \
         median [first–third quartile]; \"within noise\" when the quartiles straddle 1.0. Goals are \
         judged on the median.\n",
        m.cores,
        m.cpu,
        m.kernel,
        if m.smc { "" } else { " (no SMC: the shim's fallback path)" },
        m.memory_gib,
        load(m.load_before),
        load(m.load_after),
        r.source,
        if r.quick { "`--quick` (tiny counts)" } else { "full counts" },
        r.seconds,
    );
    for (g, title) in GROUPS {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.group == g).collect();
        if rows.is_empty() {
            continue;
        }
        s += &format!(
            "\n### {title}\n\n| measure | A | B | pairs | B/A | B − A | goal | |\n|---|---|---|---|---|---|---|---|\n"
        );
        for x in rows {
            if let Some(why) = &x.skipped {
                s += &format!("| {} | not measured: {why} | | | | | | |\n", x.name);
                continue;
            }
            let side = |label: &str, v: Option<Summary>| {
                if label.is_empty() {
                    "—".to_string()
                } else {
                    format!("{label}: {}", summary_cell(v, &x.unit))
                }
            };
            let ratio = x.ratio.map_or("—".into(), |r| {
                format!("{} [{}–{}]", num(r.median), num(r.q1), num(r.q3))
            });
            let added = x
                .added
                .map_or("—".into(), |d| format!("{} {}", num(d.median), x.unit));
            let goal = x.goal.map_or(String::new(), |g| g.describe(&x.unit));
            let verdict = match (x.met, &x.noise) {
                (Some(true), Some(n)) => format!("met; {n}"),
                (Some(false), Some(n)) => format!("**missed**; {n}"),
                (Some(true), None) => "met".into(),
                (Some(false), None) => "**missed**".into(),
                (None, Some(n)) => n.clone(),
                (None, None) => String::new(),
            };
            let name = if x.note.is_empty() {
                x.name.clone()
            } else {
                format!("{} ({})", x.name, x.note)
            };
            let pairs = x.b.map_or(0, |b| b.n);
            s += &format!(
                "| {name} | {} | {} | {pairs} | {ratio} | {added} | {goal} | {verdict} |\n",
                side(&x.a_label, x.a),
                side(&x.b_label, x.b)
            );
        }
    }
    s
}

/// The chart: every paired ratio of a timing (not the deterministic counts), median and
/// quartiles, against 1.0, on a logarithmic axis (SVG, with plotters). Red: a goal missed; grey:
/// within noise; blue: outside noise, goal met or none.
pub fn svg(r: &Report) -> Result<String, String> {
    use plotters::prelude::*;
    let rows: Vec<&Row> = r
        .rows
        .iter()
        .filter(|x| x.ratio.is_some() && x.noise.is_some())
        .collect();
    if rows.is_empty() {
        return Err("no paired ratios to chart".into());
    }
    let (lo, hi) = rows.iter().fold((1.0f64, 1.0f64), |(lo, hi), x| {
        let q = x.ratio.unwrap();
        (lo.min(q.q1), hi.max(q.q3))
    });
    let (lo, hi) = (lo.max(1e-3) * 0.9, hi * 1.1);
    let height = 90 + 22 * rows.len() as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (980, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let n = rows.len() as i32;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "B/A per interleaved pair: median, quartiles ({}{})",
                    r.machine.kernel,
                    if r.quick { ", --quick" } else { "" }
                ),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(430)
            .build_cartesian_2d((lo..hi).log_scale(), (0..n).into_segmented())
            .map_err(|e| e.to_string())?;
        let labels: Vec<String> = rows
            .iter()
            .map(|x| format!("{}: {} ({} / {})", x.group, x.name, x.b_label, x.a_label))
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len())
            .y_label_formatter(&|y| match y {
                SegmentValue::CenterOf(i) => {
                    let i = (n - 1 - *i) as usize;
                    labels.get(i).map_or(String::new(), |l| {
                        let mut l = l.clone();
                        if l.chars().count() > 70 {
                            l = l.chars().take(69).collect::<String>() + "…";
                        }
                        l
                    })
                }
                _ => String::new(),
            })
            .x_desc("B/A (log scale)")
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
                BLACK.stroke_width(1),
            )))
            .map_err(|e| e.to_string())?;
        for (i, x) in rows.iter().enumerate() {
            let y = n - 1 - i as i32;
            let q = x.ratio.unwrap();
            let colour = match (x.met, q.straddles(1.0)) {
                (Some(false), _) => RED,
                (_, true) => RGBColor(120, 120, 120),
                _ => RGBColor(30, 90, 200),
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (q.q1, SegmentValue::Exact(y)),
                        (q.q3, SegmentValue::Exact(y + 1)),
                    ],
                    colour.mix(0.35).filled(),
                )))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (q.median, SegmentValue::Exact(y)),
                        (q.median, SegmentValue::Exact(y + 1)),
                    ],
                    colour.stroke_width(3),
                )))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}
