//! The HTML pages `report` writes, from maud templates, which escape every string they interpolate (a
//! workload, target or value name is text, never markup). [`html`]: one profile — the BSP timeline,
//! heat maps of busy cycles, memory and the estimate's error per tile (drawn by the page's script
//! from numbers only), a tile's memory map when the package is at hand, and the summary table.
//! [`MemoryMap`]: one tile's buffers by address against the supersteps they are live in, coloured by
//! kind. [`layout`] and [`svg_text`] are shared with the comparison page. Self-contained: no network.

use super::summary::{Summary, tile_errors};
use crate::device::Execution;
use crate::ir::{BufferClass, BufferInfo, Package};
use maud::{DOCTYPE, Markup, PreEscaped, html as markup};

const STYLE: &str = "
body { font: 13px system-ui, sans-serif; margin: 20px; }
.maps { display: flex; gap: 40px; }
.map { display: grid; grid-auto-rows: 5px; gap: 1px; }
.cell { width: 12px; height: 5px; }
.timeline { display: flex; height: 28px; margin: 8px 0 20px; }
.bar { font-size: 10px; overflow: hidden; color: #fff; padding: 2px; }
.compute { background: #2b7bba; } .exchange { background: #e6842a; } .sync { background: #999; }
pre { background: #f6f6f6; padding: 8px; }
table { border-collapse: collapse; } td, th { padding: 1px 8px; text-align: right; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
";

/// A page with the common head and style.
pub(super) fn layout(title: &str, body: Markup) -> String {
    markup! {
        (DOCTYPE)
        html {
            head {
                meta charset="utf-8";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// An SVG `<text>` at (x, y).
pub(super) fn svg_text(x: f64, y: f64, anchor: &str, text: &str) -> Markup {
    markup! {
        text x=(format!("{x:.1}")) y=(format!("{y:.1}")) text-anchor=(anchor) font-size="10" { (text) }
    }
}

/// The BSP timeline: a bar per superstep and per sync, widths in proportion to cycles.
pub(super) fn timeline(e: &Execution) -> Markup {
    markup! {
        div.timeline {
            @for (i, st) in e.steps.iter().enumerate() {
                div class={"bar " (st.kind)} style={"flex:" (st.cycles)}
                    title={"step" (i) " " (st.kind) ": " (st.cycles) " cycles (estimate "
                        (st.estimated_cycles) ")"} { "step" (i) }
                div.bar.sync style={"flex:" (st.sync_cycles)}
                    title={"sync: " (st.sync_cycles) " cycles (estimate "
                        (st.estimated_sync_cycles) ")"} {}
            }
        }
    }
}

/// One tile's buffers: where each lives and in which supersteps it holds live data.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryMap {
    pub tile: usize,
    pub steps: u32,
    pub memory_base: u32,
    pub interleaved_base: u32,
    pub memory_end: u32,
    /// The tile's code: its address and bytes, live throughout.
    pub code: (u32, u32),
    /// The tile's buffers by address, each with its value's name.
    pub buffers: Vec<(BufferInfo, String)>,
}

impl MemoryMap {
    /// Tile `tile`'s map in `package`.
    pub fn of(package: &Package, tile: usize) -> Result<MemoryMap, String> {
        let image = package.tiles.get(tile).ok_or_else(|| {
            format!(
                "tile {tile} is not on the chip ({} tiles)",
                package.tiles.len()
            )
        })?;
        let mut buffers: Vec<(BufferInfo, String)> = image
            .buffers
            .iter()
            .map(|b| {
                let name = package
                    .graph
                    .values
                    .get(b.label.value.index())
                    .map_or_else(|| b.label.value.to_string(), |v| v.name.clone());
                (b.clone(), name)
            })
            .collect();
        buffers.sort_by_key(|(b, _)| (b.address, b.first_step));
        Ok(MemoryMap {
            tile,
            steps: package.steps.len() as u32,
            memory_base: package.target.memory_base,
            interleaved_base: package.target.interleaved_base,
            memory_end: package.target.memory_end,
            code: (image.code_address, image.code.len() as u32),
            buffers,
        })
    }

    /// The address axis: every buffer's start and end, the bases and the end of memory, sorted, each
    /// with its height on the map. A span some buffer covers is drawn in proportion to the square root
    /// of its bytes, a free span thin, so a 32-byte buffer shows beside a 100 KiB one.
    fn axis(&self, height: f64) -> Vec<(u32, f64)> {
        let mut bounds: Vec<u32> = self
            .buffers
            .iter()
            .flat_map(|(b, _)| [b.address, b.address.saturating_add(b.bytes)])
            .chain([self.memory_base, self.interleaved_base, self.memory_end])
            .chain([self.code.0, self.code.0.saturating_add(self.code.1)])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let (code, code_bytes) = self.code;
        let covered = |lo: u32, hi: u32| {
            (code <= lo && hi <= code.saturating_add(code_bytes))
                || self
                    .buffers
                    .iter()
                    .any(|(b, _)| b.address <= lo && hi <= b.address.saturating_add(b.bytes))
        };
        let weights: Vec<f64> = bounds
            .windows(2)
            .map(|w| {
                if covered(w[0], w[1]) {
                    f64::from(w[1] - w[0]).sqrt().max(4.0)
                } else {
                    2.0
                }
            })
            .collect();
        let total: f64 = weights.iter().sum::<f64>().max(1.0);
        let mut y = 0.0;
        let mut axis = vec![(bounds[0], 0.0)];
        for (w, &b) in weights.iter().zip(&bounds[1..]) {
            y += height * w / total;
            axis.push((b, y));
        }
        axis
    }

    /// The map as SVG (address down, superstep across) and a table of its buffers.
    pub fn markup(&self) -> Markup {
        let (width, height, left, top) = (900.0, 520.0, 70.0, 16.0);
        let axis = self.axis(height - top - 20.0);
        let steps = f64::from(self.steps.max(1));
        let x = |step: u32| left + (width - left - 10.0) * f64::from(step) / steps;
        let y = |address: u32| {
            let i = axis.partition_point(|&(a, _)| a < address);
            top + axis.get(i).or(axis.last()).map_or(0.0, |&(_, y)| y)
        };
        let classes: std::collections::BTreeSet<BufferClass> =
            self.buffers.iter().map(|(b, _)| b.label.class).collect();
        // Address labels at least 11 pixels apart.
        let mut ticks: Vec<u32> = Vec::new();
        for &(a, ay) in &axis {
            if ticks.last().is_none_or(|&t| ay - (y(t) - top) >= 11.0) {
                ticks.push(a);
            }
        }
        markup! {
            h2 { "memory map of tile " (self.tile) }
            p {
                "Each buffer at its address (down) over the supersteps it is live in (across); the line "
                "marks the start of interleaved memory; grey is the tile's code. The address axis is not to scale: a used span's "
                "height grows with the square root of its bytes, a free span is a thin band."
                @for c in &classes {
                    span.swatch style={"background:" (colour(*c))} {} (format!("{c:?}"))
                }
            }
            svg width=(width) height=(height) xmlns="http://www.w3.org/2000/svg" {
                rect x=(left) y=(top) width=(width - left - 10.0) height=(height - top - 20.0)
                    fill="#f6f6f6" {}
                @let (code, code_bytes) = self.code;
                rect.code x=(left) y=(format!("{:.1}", y(code))) width=(width - left - 10.0)
                    height=(format!("{:.1}", y(code.saturating_add(code_bytes)) - y(code)))
                    fill="#bbb" { title { (format!("{code:#x}, {code_bytes} bytes: code")) } }
                @for (b, name) in &self.buffers {
                    @let y0 = y(b.address);
                    @let y1 = y(b.address.saturating_add(b.bytes));
                    @let x0 = x(b.first_step);
                    @let x1 = x(b.last_step.saturating_add(1).min(self.steps));
                    rect x=(format!("{x0:.1}")) y=(format!("{y0:.1}"))
                        width=(format!("{:.1}", (x1 - x0).max(1.0)))
                        height=(format!("{:.1}", (y1 - y0).max(1.0)))
                        class="buffer" fill=(colour(b.label.class)) stroke="#fff" stroke-width="0.5" {
                        title { (describe(b, name)) }
                    }
                }
                line x1=(left) x2=(width - 10.0) y1=(y(self.interleaved_base))
                    y2=(y(self.interleaved_base)) stroke="#000" stroke-dasharray="4 2" {}
                @for a in ticks {
                    (svg_text(left - 4.0, y(a) + 3.0, "end", &format!("{a:#x}")))
                }
                @for s in 0..self.steps {
                    (svg_text(x(s) + 2.0, height - 6.0, "start", &s.to_string()))
                }
            }
            table {
                tr { th { "address" } th { "bytes" } th { "kind" } th { "value" } th { "live steps" } }
                tr { td { (format!("{code:#x}", code = self.code.0)) } td { (self.code.1) } td { "code" } td {} td { "all" } }
                @for (b, name) in &self.buffers {
                    tr {
                        td { (format!("{:#x}", b.address)) } td { (b.bytes) }
                        td { (format!("{:?}", b.label.class)) } td { (name) " " (b.label.rect) }
                        td { (b.first_step) "–" (b.last_step) }
                    }
                }
            }
        }
    }
}

/// A buffer's hover text.
fn describe(b: &BufferInfo, name: &str) -> String {
    format!(
        "{:#x}, {} bytes: {:?} of {name} {}, steps {}–{}",
        b.address, b.bytes, b.label.class, b.label.rect, b.first_step, b.last_step
    )
}

/// The colour of a buffer kind: twelve hues around the wheel.
fn colour(class: BufferClass) -> String {
    format!("hsl({}, 65%, 50%)", (class as u32 * 150) % 360)
}

/// A list of numbers for the page's script.
fn numbers<T: std::fmt::Display>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// One profile's page; with `map`, the memory map of its tile; otherwise `no_map` says why not.
pub fn html(e: &Execution, map: Result<&MemoryMap, &str>) -> String {
    let busy = (0..e.memory.len()).map(|t| {
        e.steps
            .iter()
            .map(|s| u64::from(s.tile_busy.get(t).copied().unwrap_or(0)))
            .sum::<u64>()
    });
    let memory = e.memory.iter().map(|&(s, i)| u64::from(s) + u64::from(i));
    let errors = tile_errors(e).into_iter().map(|x| format!("{x:.2}"));
    let per_column = e.tiles_per_column.max(1);
    let columns = e.memory.len().div_ceil(per_column as usize);
    let script = format!(
        "const busy = [{}];\nconst memory = [{}];\nconst errors = [{}];\n\
         const perColumn = {per_column};\nconst columns = {columns};\n{DRAW}",
        numbers(busy),
        numbers(memory),
        numbers(errors),
    );
    let grid = format!("grid-template-columns: repeat({columns}, 12px)");
    let body = markup! {
        h1 { (e.workload) }
        p {
            (e.cycles) " cycles on " (e.target) "; " (e.memory.len()) " tiles in " (columns)
            " columns of " (e.tiles_per_column) "; package " (e.package) "."
        }
        h2 { "BSP timeline" }
        (timeline(e))
        div.maps {
            div { h2 { "busy cycles per tile" } div #busy .map style=(grid) {} }
            div { h2 { "memory used per tile" } div #memory .map style=(grid) {} }
            div {
                h2 { "estimate vs device per tile" }
                div #estimate .map style=(grid) {}
                p { "the compute step where the tile's estimate is furthest off, in % (red: over, blue: under)" }
            }
        }
        @match map {
            Ok(map) => (map.markup()),
            Err(why) => p { "No memory map: " (why) },
        }
        h2 { "supersteps" }
        pre { (Summary::of(e).text()) }
        script { (PreEscaped(script)) }
    };
    layout(&format!("{}: execution profile", e.workload), body)
}

/// Draws the heat maps, column-major: each grid column is one column of the chip. A cell's shade is
/// the value's magnitude, `hue` its colour and `label` its title.
const DRAW: &str = r#"
function draw(id, values, hue, label) {
  const max = Math.max(1, ...values.map(Math.abs));
  const map = document.getElementById(id);
  for (let row = 0; row < perColumn; row++) {
    for (let col = 0; col < columns; col++) {
      const tile = col * perColumn + row;
      if (tile >= values.length) continue;
      const v = values[tile];
      const cell = document.createElement("div");
      cell.className = "cell";
      cell.title = "tile" + tile + ": " + label(v);
      cell.style.background = "hsl(" + hue(v) + ", 80%, " + (95 - 60 * Math.abs(v) / max) + "%)";
      map.appendChild(cell);
    }
  }
}
draw("busy", busy, () => 210, v => v);
draw("memory", memory, () => 30, v => v);
draw("estimate", errors, v => (v >= 0 ? 0 : 220), v => "estimate " + (v >= 0 ? "+" : "") + v + " %");
"#;
