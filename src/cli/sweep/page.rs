//! The sweep's HTML page: one self-contained file (no script, no network) with two inline SVG plots,
//! cycles and efficiency against the first axis, one path per combination of the other axes' values
//! (a point that has no figure breaks its path), axes labelled with their values, and the table.
//! Built with `maud`, which escapes every string it interpolates.

use super::{Axis, Cell, Row, grid, header};
use maud::{DOCTYPE, Markup, PreEscaped, html};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 340.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 56.0;
/// Horizontal ticks on the y axis, about.
const Y_TICKS: f64 = 5.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
svg{background:#fff;border:1px solid #ddd;margin:0 1em 1em 0}\
svg text{font-size:12px;fill:#333}\
.grid{stroke:#eee}.axis{stroke:#666}\
path.line{fill:none;stroke-width:2}\
table{border-collapse:collapse;font-size:13px}\
td,th{border:1px solid #ddd;padding:2px 8px;text-align:right;white-space:nowrap}\
td.text{text-align:left}td.error{text-align:left;white-space:normal}\
.swatch{display:inline-block;width:1em;height:.6em;margin-right:.4em}\
.fail{color:#b00}";

/// One line of a plot: the points that share every value but the first axis's, in grid order.
struct Line {
    label: String,
    /// The rows' indices.
    rows: Vec<usize>,
}

/// The plots' lines, in order of their first point.
fn lines(axes: &[Axis], rows: &[Row]) -> Vec<Line> {
    let mut lines: Vec<(Vec<String>, Line)> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let rest = row.values[1..].to_vec();
        match lines.iter_mut().find(|(key, _)| *key == rest) {
            Some((_, line)) => line.rows.push(i),
            None => {
                let label = if rest.is_empty() {
                    "every point".to_string()
                } else {
                    (axes[1..].iter().zip(&rest))
                        .map(|(a, v)| format!("{}={v}", a.name))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                lines.push((
                    rest,
                    Line {
                        label,
                        rows: vec![i],
                    },
                ));
            }
        }
    }
    lines.into_iter().map(|(_, line)| line).collect()
}

/// Where each value of `axis` sits along the x axis, from 0 to 1: in proportion when every value is a
/// number, evenly spaced in the order given otherwise; a lone value in the middle.
fn x_positions(axis: &Axis) -> Vec<f64> {
    let numbers: Option<Vec<f64>> = axis.values.iter().map(|v| v.parse().ok()).collect();
    let n = axis.values.len();
    match numbers {
        Some(xs) => {
            let (lo, hi) = xs
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                    (l.min(x), h.max(x))
                });
            xs.iter()
                .map(|&x| if hi > lo { (x - lo) / (hi - lo) } else { 0.5 })
                .collect()
        }
        None if n > 1 => (0..n).map(|i| i as f64 / (n - 1) as f64).collect(),
        None => vec![0.5],
    }
}

/// A round step (1, 2 or 5 times a power of ten) that cuts `0..max` into about [`Y_TICKS`] parts.
fn tick_step(max: f64) -> f64 {
    let raw = max / Y_TICKS;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * power)
}

/// A coordinate, to a tenth of a pixel.
fn px(v: f64) -> String {
    format!("{v:.1}")
}

/// A tick's label: as many decimals as the step needs.
fn tick_label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    format!("{value:.decimals$}")
}

/// One plot of `figure` against the first axis: gridlines and labelled ticks, one path per line, a
/// marker with its values per point.
fn plot(
    y_label: &str,
    axes: &[Axis],
    rows: &[Row],
    lines: &[Line],
    figure: fn(&Row) -> Option<f64>,
) -> Markup {
    let axis = &axes[0];
    let positions = x_positions(axis);
    let points = grid(axes);
    let max = rows.iter().filter_map(figure).fold(0.0, f64::max);
    let step = if max > 0.0 { tick_step(max) } else { 1.0 };
    let top = (max / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_of = |row: usize| LEFT + positions[points[row][0]] * plot_w;
    let y_of = |v: f64| TOP + plot_h * (1.0 - v / top);
    let ticks = (top / step).round() as usize;
    let path = |line: &Line| {
        let mut d = String::new();
        let mut pen_down = false;
        for &r in &line.rows {
            match figure(&rows[r]) {
                Some(v) => {
                    d.push_str(&format!(
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        x_of(r),
                        y_of(v)
                    ));
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        d.trim_end().to_string()
    };
    let title = |r: usize| {
        let values: Vec<String> = (axes.iter().zip(&rows[r].values))
            .map(|(a, v)| format!("{}={v}", a.name))
            .collect();
        let figure = figure(&rows[r]).map_or("-".to_string(), |v| v.to_string());
        format!("{}: {y_label} {figure}", values.join(" "))
    };
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(HEIGHT)
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(y_label) {
            @for i in 0..=ticks {
                @let v = step * i as f64;
                line.grid x1=(px(LEFT)) x2=(px(WIDTH - RIGHT)) y1=(px(y_of(v))) y2=(px(y_of(v))) {}
                text x=(px(LEFT - 6.0)) y=(px(y_of(v) + 4.0)) text-anchor="end" { (tick_label(v, step)) }
            }
            @for (value, &pos) in axis.values.iter().zip(&positions) {
                @let x = LEFT + pos * plot_w;
                line.axis x1=(px(x)) x2=(px(x)) y1=(px(TOP + plot_h)) y2=(px(TOP + plot_h + 5.0)) {}
                text x=(px(x)) y=(px(TOP + plot_h + 18.0)) text-anchor="middle" { (value) }
            }
            line.axis x1=(px(LEFT)) x2=(px(LEFT)) y1=(px(TOP)) y2=(px(TOP + plot_h)) {}
            line.axis x1=(px(LEFT)) x2=(px(WIDTH - RIGHT)) y1=(px(TOP + plot_h)) y2=(px(TOP + plot_h)) {}
            text x=(px(LEFT + plot_w / 2.0)) y=(px(HEIGHT - 8.0)) text-anchor="middle" { (axis.name) }
            text x="16" y=(px(TOP + plot_h / 2.0)) text-anchor="middle"
                transform=(format!("rotate(-90 16 {})", TOP + plot_h / 2.0)) { (y_label) }
            @for (i, line) in lines.iter().enumerate() {
                @let colour = COLOURS[i % COLOURS.len()];
                path.line stroke=(colour) d=(path(line)) { title { (line.label) } }
                @for &r in &line.rows {
                    @if let Some(v) = figure(&rows[r]) {
                        circle cx=(px(x_of(r))) cy=(px(y_of(v))) r="3"
                            fill=(colour) { title { (title(r)) } }
                    }
                }
            }
        }
    }
}

/// The page: a heading naming the workload, the plots with their legend, the table.
pub fn page(workload: &str, axes: &[Axis], rows: &[Row]) -> String {
    let lines = lines(axes, rows);
    let failed = rows.iter().filter(|r| r.failed()).count();
    let header = header(axes);
    let cycles = |r: &Row| r.measured.as_ref().map(|m| m.cycles as f64);
    let efficiency = |r: &Row| r.measured.as_ref().map(|m| m.efficiency_percent);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "sweep " (workload) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "sweep " (workload) }
                p {
                    (rows.len()) " points"
                    @if failed > 0 { ", " span.fail { (failed) " failed" } }
                    "; against " (axes[0].name) ", one line per combination of the other values."
                }
                (plot("cycles", axes, rows, &lines, cycles))
                (plot("efficiency (% of peak)", axes, rows, &lines, efficiency))
                ul.legend {
                    @for (i, line) in lines.iter().enumerate() {
                        li {
                            span.swatch style=(format!("background:{}", COLOURS[i % COLOURS.len()])) {}
                            (line.label)
                        }
                    }
                }
                table {
                    thead { tr { @for h in &header { th { (h) } } } }
                    tbody {
                        @for row in rows {
                            tr {
                                @for (h, cell) in header.iter().zip(row.cells()) {
                                    @let class = match (h.as_str(), &cell) {
                                        ("error", _) => "error",
                                        (_, Cell::Text(_)) => "text",
                                        _ => "",
                                    };
                                    td class=(class) { (cell.text()) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    .into_string()
}
