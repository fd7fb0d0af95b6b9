//! Two profiles side by side (`report A.ipuprofile B.ipuprofile`): each run's totals and, superstep by
//! superstep, both cycle counts, both syncs that end the step, and their difference (step and sync
//! together, so the steps' differences add up to the runs'), their ratio and the graph operations
//! they serve. One value, [`Comparison`], printed as a table, as JSON with the same fields, and as a
//! page (both BSP timelines to one scale, a bar chart of the steps and the table). Steps pair by
//! position; a step only one run has is shown with the other side empty.
//!
//! Every ratio the table and page print is B's cycles over A's, labelled `B/A` ([`RATIO`],
//! [`ratio`]), the step's and the run's alike. (The JSON's `speedup` is the inverse, A's over B's,
//! and says so.)

use super::page::{label_stride, layout, scrolled, svg_text, timeline, timeline_key};
use super::summary::{Summary, serves};
use crate::device::Execution;
use maud::html as markup;
use serde::Serialize;
use std::fmt::Write as _;

/// One run's totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    pub workload: String,
    pub target: String,
    pub package: String,
    pub cycles: u64,
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub sync_cycles: u64,
    pub steps: usize,
    /// The most bytes in use on one tile, standard and interleaved together.
    pub most_bytes_on_a_tile: u64,
}

/// The same superstep of both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepPair {
    pub step: usize,
    pub kind_a: Option<String>,
    pub kind_b: Option<String>,
    pub cycles_a: Option<u64>,
    pub cycles_b: Option<u64>,
    /// The sync ending the step in each run.
    pub sync_a: Option<u64>,
    pub sync_b: Option<u64>,
    /// B's cycles and sync less A's (a missing step counts 0).
    pub delta: i128,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub steps: Vec<StepPair>,
    /// B's cycles less A's.
    pub delta: i128,
    /// A's cycles over B's: above 1 when B is faster (the inverse of the [`RATIO`] the table and
    /// page print).
    pub speedup: f64,
}

impl StepPair {
    /// The step's [`ratio`], if both runs have it.
    pub fn ratio(&self) -> Option<f64> {
        Some(ratio(self.cycles_a?, self.cycles_b?))
    }

    /// The step's kind as the table and page show it: one kind, or A's and B's apart.
    pub fn kind(&self) -> String {
        match (&self.kind_a, &self.kind_b) {
            (Some(a), Some(b)) if a == b => a.clone(),
            (a, b) => format!(
                "{}/{}",
                a.as_deref().unwrap_or("-"),
                b.as_deref().unwrap_or("-")
            ),
        }
    }

    /// The ratio as the table and page print it, `-` without one.
    pub fn ratio_text(&self) -> String {
        self.ratio().map_or("-".to_string(), |r| format!("{r:.3}"))
    }
}

/// How the table and page label a ratio: B's cycles over A's.
pub const RATIO: &str = "B/A";

/// B's cycles over A's, the one ratio the table and page print ([`RATIO`]); A's of 0 counts 1.
pub fn ratio(a: u64, b: u64) -> f64 {
    b as f64 / a.max(1) as f64
}

fn side(e: &Execution) -> Side {
    let s = Summary::of(e);
    Side {
        workload: s.workload,
        target: s.target,
        package: s.package,
        cycles: s.cycles,
        compute_cycles: s.compute_cycles,
        exchange_cycles: s.exchange_cycles,
        sync_cycles: s.sync_cycles,
        steps: e.steps.len(),
        most_bytes_on_a_tile: e
            .memory
            .iter()
            .map(|&(s, i)| u64::from(s) + u64::from(i))
            .max()
            .unwrap_or(0),
    }
}

impl Comparison {
    pub fn of(a: &Execution, b: &Execution) -> Comparison {
        let steps = (0..a.steps.len().max(b.steps.len()))
            .map(|i| {
                let (sa, sb) = (a.steps.get(i), b.steps.get(i));
                let cycles = |s: Option<&crate::device::StepProfile>| s.map(|s| s.cycles);
                let sync = |s: Option<&crate::device::StepProfile>| s.map(|s| s.sync_cycles);
                let whole = |s: Option<&crate::device::StepProfile>| {
                    s.map_or(0, |s| i128::from(s.cycles) + i128::from(s.sync_cycles))
                };
                StepPair {
                    step: i,
                    kind_a: sa.map(|s| s.kind.clone()),
                    kind_b: sb.map(|s| s.kind.clone()),
                    cycles_a: cycles(sa),
                    cycles_b: cycles(sb),
                    sync_a: sync(sa),
                    sync_b: sync(sb),
                    delta: whole(sb) - whole(sa),
                }
            })
            .collect();
        Comparison {
            a: side(a),
            b: side(b),
            steps,
            delta: i128::from(b.cycles) - i128::from(a.cycles),
            speedup: a.cycles as f64 / b.cycles.max(1) as f64,
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        for (name, x) in [("A", &self.a), ("B", &self.b)] {
            let _ = writeln!(
                s,
                "{name}: workload={} target={} package={} cycles={} steps={} compute={} exchange={} \
                 sync={} mostBytesOnATile={}",
                x.workload,
                x.target,
                x.package,
                x.cycles,
                x.steps,
                x.compute_cycles,
                x.exchange_cycles,
                x.sync_cycles,
                x.most_bytes_on_a_tile
            );
        }
        let _ = writeln!(
            s,
            "{:<6} {:<17} {:>10} {:>10} {:>7} {:>7} {:>10} {:>7}",
            "step", "kind", "A cycles", "B cycles", "A sync", "B sync", "B - A", RATIO
        );
        let or_dash = |c: Option<u64>| c.map_or("-".to_string(), |c| c.to_string());
        for p in &self.steps {
            let (kind, ratio) = (p.kind(), p.ratio_text());
            let _ = writeln!(
                s,
                "{:<6} {:<17} {:>10} {:>10} {:>7} {:>7} {:>+10} {:>7}",
                format!("step{}", p.step),
                kind,
                or_dash(p.cycles_a),
                or_dash(p.cycles_b),
                or_dash(p.sync_a),
                or_dash(p.sync_b),
                p.delta,
                ratio
            );
        }
        let _ = writeln!(
            s,
            "cycles: A {} B {} (B - A {:+}); {RATIO} {:.3}",
            self.a.cycles,
            self.b.cycles,
            self.delta,
            ratio(self.a.cycles, self.b.cycles)
        );
        s
    }

    /// The comparison as one JSON object, the text's fields in camelCase.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The graph operations step `i` serves in each run: one list if both name the same, `A: … / B: …`
/// otherwise.
fn step_serves(a: &Execution, b: &Execution, i: usize) -> String {
    fn ops(e: &Execution, i: usize) -> Option<&[String]> {
        e.steps.get(i).map(|s| s.operators.as_slice())
    }
    match (ops(a, i), ops(b, i)) {
        (Some(x), Some(y)) if x == y => serves(x),
        (x, y) => format!(
            "A: {} / B: {}",
            x.map_or("-".to_string(), serves),
            y.map_or("-".to_string(), serves)
        ),
    }
}

/// The comparison page: both timelines to one scale, a bar chart of every step and the table.
pub fn html(a: &Execution, b: &Execution) -> String {
    let c = Comparison::of(a, b);
    let longest = c.a.cycles.max(c.b.cycles);
    let most = c
        .steps
        .iter()
        .map(|p| p.cycles_a.unwrap_or(0).max(p.cycles_b.unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (chart_w, chart_h, left, bottom) = (900.0, 260.0, 60.0, 30.0);
    let slot = (chart_w - left) / c.steps.len().max(1) as f64;
    let bar = |i: usize, which: usize, cycles: Option<u64>| {
        let h = (chart_h - bottom - 10.0) * cycles.unwrap_or(0) as f64 / most;
        let x = left + slot * i as f64 + slot * (0.1 + 0.4 * which as f64);
        (x, chart_h - bottom - h, slot * 0.4, h)
    };
    // Step labels far enough apart not to overlap.
    let stride = label_stride(slot, format!("step{}", c.steps.len()).len());
    let title = format!(
        "{} against {}: execution profiles",
        c.b.workload, c.a.workload
    );
    let or_dash = |c: Option<u64>| c.map_or("-".to_string(), |c| c.to_string());
    let body = markup! {
        h1 { (title) }
        p { "A: " (c.a.workload) " (" (c.a.package) "), " (c.a.cycles) " cycles. "
            "B: " (c.b.workload) " (" (c.b.package) "), " (c.b.cycles) " cycles. "
            (format!("{RATIO} {:.3}", ratio(c.a.cycles, c.b.cycles))) }
        h2 { "BSP timelines (one scale)" }
        p { "A" } (timeline(a, longest))
        p { "B" } (timeline(b, longest))
        (timeline_key())
        h2 { "cycles per superstep (blue: A, orange: B)" }
        svg width=(chart_w) height=(chart_h) xmlns="http://www.w3.org/2000/svg" {
            @for (i, p) in c.steps.iter().enumerate() {
                @for (which, cycles, fill) in [(0, p.cycles_a, "#2b7bba"), (1, p.cycles_b, "#e6842a")] {
                    @let (x, y, w, h) = bar(i, which, cycles);
                    rect.step x=(format!("{x:.1}")) y=(format!("{y:.1}")) width=(format!("{w:.1}"))
                        height=(format!("{h:.1}")) fill=(fill) {
                        title { "step" (i) " " (if which == 0 { "A" } else { "B" }) ": "
                            (or_dash(cycles)) " cycles; serves " (step_serves(a, b, i)) }
                    }
                }
                @if i % stride == 0 {
                    (svg_text(left + slot * (i as f64 + 0.5), chart_h - bottom + 14.0, "middle",
                        &format!("step{i}")))
                }
            }
            (svg_text(left - 4.0, 14.0, "end", &format!("{most:.0}")))
            (svg_text(left - 4.0, chart_h - bottom, "end", "0"))
        }
        h2 { "supersteps" }
        (scrolled(markup! { table #steps {
            tr {
                th { "step" } th { "kind" } th { "A cycles" } th { "B cycles" } th { "A sync" }
                th { "B sync" } th { "B - A" } th { (RATIO) } th.names { "serves" }
            }
            @for p in &c.steps {
                tr {
                    td { "step" (p.step) }
                    td { (p.kind()) }
                    td { (or_dash(p.cycles_a)) } td { (or_dash(p.cycles_b)) }
                    td { (or_dash(p.sync_a)) } td { (or_dash(p.sync_b)) }
                    td { (format!("{:+}", p.delta)) }
                    td { (p.ratio_text()) }
                    td.names { (step_serves(a, b, p.step)) }
                }
            }
            tr.total {
                td { "run" } td {} td { (c.a.cycles) } td { (c.b.cycles) } td { (c.a.sync_cycles) }
                td { (c.b.sync_cycles) } td { (format!("{:+}", c.delta)) }
                td { (format!("{:.3}", ratio(c.a.cycles, c.b.cycles))) } td.names {}
            }
        } }))
    };
    layout(&title, body)
}
