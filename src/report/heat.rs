//! The profile page's heat maps of the tiles, one cell per tile, column-major (each grid column one
//! column of the chip): busy cycles over the run, memory in use, and the compute step where the
//! tile's estimate is furthest from the device, in percent. Each map has its colour scale beside it
//! ([`Scale`], a legend with its ends' values and unit), computed here, so the legend and the cells
//! the page's script colours agree. The script gets numbers only; a tile's tooltip names the step
//! it is busiest in (or furthest off in) by the operations it serves, read from the step table's
//! `data-serves`, which maud escapes.

use super::summary::tile_furthest;
use crate::device::Execution;
use maud::{Markup, html as markup};

/// A map's colour scale: values from `lo` to `hi` in `unit`, light to dark in one hue; or, when
/// `diverging`, from `-hi` (dark blue, under) through 0 (light) to `hi` (dark red, over).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub unit: &'static str,
    pub diverging: bool,
}

/// Hues of the maps: busy cycles, memory, an estimate over and under the device.
const BUSY_HUE: u32 = 210;
const MEMORY_HUE: u32 = 30;
const OVER_HUE: u32 = 0;
const UNDER_HUE: u32 = 220;

/// The lightness of a cell at fraction `t` of its scale, in percent: 95 (nearly white) to 35.
fn lightness(t: f64) -> f64 {
    95.0 - 60.0 * t
}

impl Scale {
    /// The scale from the least to the most of `values`.
    pub fn spanning(values: &[f64], unit: &'static str) -> Scale {
        let lo = values.iter().copied().reduce(f64::min).unwrap_or(0.0);
        let hi = values.iter().copied().reduce(f64::max).unwrap_or(0.0);
        Scale {
            lo,
            hi,
            unit,
            diverging: false,
        }
    }

    /// The scale from minus to plus the largest magnitude of `values`.
    pub fn around_zero(values: &[f64], unit: &'static str) -> Scale {
        let hi = values.iter().map(|v| v.abs()).fold(0.0, f64::max);
        Scale {
            lo: -hi,
            hi,
            unit,
            diverging: true,
        }
    }

    /// A value with its unit, as the legend prints it.
    fn show(&self, v: f64) -> String {
        if self.diverging {
            format!("{v:+.1} {}", self.unit)
        } else {
            format!("{v:.0} {}", self.unit)
        }
    }

    /// The legend: a ramp of the scale's colours, its ends (and, diverging, its middle) labelled.
    fn legend(&self, hue: u32, width: usize) -> Markup {
        let colour = |hue: u32, t: f64| format!("hsl({hue}, 80%, {:.0}%)", lightness(t));
        let ramp = if self.diverging {
            format!(
                "background: linear-gradient(to right, {}, {}, {})",
                colour(UNDER_HUE, 1.0),
                colour(OVER_HUE, 0.0),
                colour(OVER_HUE, 1.0)
            )
        } else {
            format!(
                "background: linear-gradient(to right, {}, {})",
                colour(hue, 0.0),
                colour(hue, 1.0)
            )
        };
        markup! {
            div.legend style=(format!("width: {}px", width.max(180))) {
                div.ramp style=(ramp) {}
                div.ends {
                    span.lo { (self.show(self.lo)) }
                    @if self.diverging { span { (self.show(0.0)) } }
                    span.hi { (self.show(self.hi)) }
                }
            }
        }
    }
}

/// The three maps with their legends, and the script that draws their cells.
pub(super) fn maps(e: &Execution) -> (Markup, String) {
    let tiles = e.memory.len();
    let busy: Vec<u64> = (0..tiles)
        .map(|t| {
            (e.steps.iter())
                .map(|s| u64::from(s.tile_busy.get(t).copied().unwrap_or(0)))
                .sum()
        })
        .collect();
    // Per tile, the step it is busiest in (the first of equals), or -1 if never busy.
    let busiest: Vec<i64> = (0..tiles)
        .map(|t| {
            let busy_in = |i: usize| e.steps[i].tile_busy.get(t).copied().unwrap_or(0);
            (0..e.steps.len())
                .filter(|&i| busy_in(i) > 0)
                .max_by_key(|&i| (busy_in(i), usize::MAX - i))
                .map_or(-1, |i| i as i64)
        })
        .collect();
    let memory: Vec<u64> = (e.memory.iter())
        .map(|&(s, i)| u64::from(s) + u64::from(i))
        .collect();
    let furthest = tile_furthest(e);
    let errors: Vec<f64> = (furthest.iter())
        .map(|t| t.map_or(0.0, |t| 100.0 * t.error()))
        .collect();
    let error_steps = furthest.iter().map(|t| t.map_or(-1, |t| t.step as i64));
    let as_f64 = |v: &[u64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let scales = [
        Scale::spanning(&as_f64(&busy), "cycles"),
        Scale::spanning(&as_f64(&memory), "bytes"),
        Scale::around_zero(&errors, "%"),
    ];
    let per_column = e.tiles_per_column.max(1);
    let columns = tiles.div_ceil(per_column as usize);
    let width = columns * 13;
    let grid = format!("grid-template-columns: repeat({columns}, 12px)");
    let [busy_scale, memory_scale, error_scale] = scales;
    let markup = markup! {
        div.maps {
            div {
                h2 { "busy cycles per tile" }
                div #busy .map style=(grid) {}
                (busy_scale.legend(BUSY_HUE, width))
                p { "cycles each tile is busy over the run" }
            }
            div {
                h2 { "memory used per tile" }
                div #memory .map style=(grid) {}
                (memory_scale.legend(MEMORY_HUE, width))
                p { "bytes in use, standard and interleaved" }
            }
            div {
                h2 { "estimate vs device per tile" }
                div #estimate .map style=(grid) {}
                (error_scale.legend(OVER_HUE, width))
                p { "the compute step where the tile's estimate is furthest off, in % (red: over, blue: under)" }
            }
        }
    };
    let errors = errors.iter().map(|x| format!("{x:.2}"));
    let bound = |s: &Scale| format!("{}, {}", s.lo, s.hi);
    let script = format!(
        "const busy = [{}];\nconst busiest = [{}];\nconst memory = [{}];\nconst errors = [{}];\n\
         const errorSteps = [{}];\nconst perColumn = {per_column};\nconst columns = {columns};\n\
         const busyScale = [{}];\nconst memoryScale = [{}];\nconst errorScale = [{}];\n\
         const hues = {{ busy: {BUSY_HUE}, memory: {MEMORY_HUE}, over: {OVER_HUE}, under: {UNDER_HUE} }};\n{DRAW}",
        numbers(&busy),
        numbers(&busiest),
        numbers(&memory),
        numbers(errors),
        numbers(error_steps),
        bound(&busy_scale),
        bound(&memory_scale),
        bound(&error_scale),
    );
    (markup, script)
}

/// A list of numbers for the page's script.
fn numbers<T: std::fmt::Display>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Draws the heat maps, column-major: each grid column is one column of the chip. A cell's colour is
/// its value's place on its map's scale (`shade`), the same formula as the legend's ramp; its
/// tooltip names the tile, its value with its unit and the step it is about, by the operations
/// that step serves.
const DRAW: &str = r##"
const serves = [];
for (const row of document.querySelectorAll("#steps tr[data-step]")) {
  serves[Number(row.dataset.step)] = row.dataset.serves;
}
function step(s, what) {
  return s < 0 ? "" : "; " + what + " step" + s + ", serving " + serves[s];
}
function shade(hue, t) {
  return "hsl(" + hue + ", 80%, " + (95 - 60 * Math.min(1, Math.max(0, t))) + "%)";
}
function spanning(hue, scale) {
  const [lo, hi] = scale;
  return v => shade(hue, hi > lo ? (v - lo) / (hi - lo) : 1);
}
function draw(id, values, colour, label) {
  const map = document.getElementById(id);
  for (let row = 0; row < perColumn; row++) {
    for (let col = 0; col < columns; col++) {
      const tile = col * perColumn + row;
      if (tile >= values.length) continue;
      const cell = document.createElement("div");
      cell.className = "cell";
      cell.title = "tile" + tile + ": " + label(values[tile], tile);
      cell.style.background = colour(values[tile]);
      map.appendChild(cell);
    }
  }
}
draw("busy", busy, spanning(hues.busy, busyScale),
  (v, t) => v + " cycles busy" + step(busiest[t], "busiest in"));
draw("memory", memory, spanning(hues.memory, memoryScale),
  (v, t) => v + " bytes in use" + step(busiest[t], "busiest in"));
draw("estimate", errors,
  v => shade(v >= 0 ? hues.over : hues.under, errorScale[1] > 0 ? Math.abs(v) / errorScale[1] : 0),
  (v, t) => errorSteps[t] < 0 ? "no estimate"
    : "estimate " + (v >= 0 ? "+" : "") + v + " %" + step(errorSteps[t], "in"));
"##;
