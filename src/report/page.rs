//! The HTML pages `report` writes, from maud templates, which escape every string they interpolate (a
//! workload, target, value or operation name is text, never markup). [`html`]: one profile — the BSP
//! timeline, heat maps of busy cycles, memory and the estimate's error per tile with their colour
//! scales (`super::heat`), a tile's memory map when the package is at hand, and the summary as
//! tables. [`MemoryMap`]: one tile's buffers by address against the supersteps they are live in,
//! coloured by kind. [`layout`], [`svg_text`], [`timeline`] and [`scrolled`] are shared with the
//! comparison page. Self-contained: no network.
//!
//! Every step is named by the graph operations it serves, in its timeline tooltip and its table row.
//! Nothing is cut to fit: wide tables scroll inside their own box, a timeline bar carries only a label
//! that fits it whole (its tooltip and table row name it in full), and axis labels are thinned so
//! none overlaps another.

use super::summary::{Summary, TilesOff, share};
use crate::device::Execution;
use crate::ir::{BufferClass, BufferInfo, Package};
use maud::{DOCTYPE, Markup, PreEscaped, html as markup};

const STYLE: &str = "
body { font: 13px system-ui, sans-serif; margin: 20px; }
.maps { display: flex; flex-wrap: wrap; gap: 40px; }
.map { display: grid; grid-auto-rows: 5px; gap: 1px; }
.cell { width: 12px; height: 5px; }
svg.timeline { display: block; width: 100%; max-width: 1200px; height: auto; margin: 8px 0 4px; }
svg.timeline text { fill: #fff; pointer-events: none; }
.compute { fill: #2b7bba; background: #2b7bba; } .exchange { fill: #e6842a; background: #e6842a; }
.sync { fill: #999; background: #999; }
.scroll { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; } td, th { padding: 1px 8px; text-align: right; white-space: nowrap; }
td.names, th.names { text-align: left; white-space: normal; overflow-wrap: anywhere; min-width: 16em; }
.legend { margin-top: 6px; font-size: 11px; }
.legend .ramp { height: 10px; border: 1px solid #ccc; }
.legend .ends { display: flex; justify-content: space-between; gap: 8px; }
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

/// A wide element in a box of the page's width that scrolls sideways, so the page never does.
pub(super) fn scrolled(inner: Markup) -> Markup {
    markup! { div.scroll { (inner) } }
}

/// The width one character of a 10-pixel label takes at most, in pixels: wider than any glyph of the
/// page's fonts averages, so a label judged to fit does.
const CHAR_PX: f64 = 7.0;

/// The width a 10-pixel label takes at most, in pixels.
pub(super) fn label_width(text: &str) -> f64 {
    CHAR_PX * text.chars().count() as f64
}

/// Every how many of `n` evenly spaced labels of up to `chars` characters to draw, `slot` pixels
/// apart, so that none overlaps the next.
pub(super) fn label_stride(slot: f64, chars: usize) -> usize {
    let wide = CHAR_PX * chars as f64 + 4.0;
    ((wide / slot.max(0.01)).ceil() as usize).max(1)
}

/// A step as its timeline label names it: `step5 /l0/query/MatMul_48 +1`.
pub(super) fn step_name(step: usize, operators: &[String]) -> String {
    match operators {
        [] => format!("step{step}"),
        [one] => format!("step{step} {one}"),
        [first, rest @ ..] => format!("step{step} {first} +{}", rest.len()),
    }
}

/// The width of a timeline, in the SVG's own units (it scales down with the window).
pub(super) const TIMELINE_WIDTH: f64 = 1200.0;

/// The BSP timeline to the scale of a run of `longest` cycles: a bar per superstep and per sync,
/// widths in proportion to cycles. A bar's label is the longest of its step's names that fits it
/// whole (`step5 /l0/query/MatMul_48 +1`, `step5`, `5`), or none; its tooltip names the step's
/// operations in full.
pub(super) fn timeline(e: &Execution, longest: u64) -> Markup {
    let (height, scale) = (24.0, TIMELINE_WIDTH / longest.max(1) as f64);
    let mut x = 0.0;
    let mut bars = Vec::with_capacity(2 * e.steps.len());
    for (i, st) in e.steps.iter().enumerate() {
        let w = st.cycles as f64 * scale;
        let label = [
            step_name(i, &st.operators),
            format!("step{i}"),
            i.to_string(),
        ]
        .into_iter()
        .find(|l| label_width(l) + 4.0 <= w);
        let title = format!(
            "step{i} {}: {} cycles (estimate {}); serves {}",
            st.kind,
            st.cycles,
            st.estimated_cycles,
            super::summary::serves(&st.operators)
        );
        bars.push((x, w, st.kind.clone(), title, label));
        x += w;
        let w = st.sync_cycles as f64 * scale;
        let title = format!(
            "sync after step{i}: {} cycles (estimate {})",
            st.sync_cycles, st.estimated_sync_cycles
        );
        bars.push((x, w, "sync".to_string(), title, None));
        x += w;
    }
    markup! {
        svg.timeline viewBox=(format!("0 0 {TIMELINE_WIDTH} {height}")) xmlns="http://www.w3.org/2000/svg" {
            @for (x, w, kind, title, label) in bars {
                g {
                    rect class=(kind) x=(format!("{x:.2}")) y="0" width=(format!("{w:.2}"))
                        height=(height) { title { (title) } }
                    @if let Some(label) = label {
                        (svg_text(x + 2.0, 16.0, "start", &label))
                    }
                }
            }
        }
    }
}

/// What the timeline's colours mean.
pub(super) fn timeline_key() -> Markup {
    markup! {
        p {
            "Each bar is a superstep (hover for the operations it serves), its width its cycles:"
            @for kind in ["compute", "exchange", "sync"] {
                span class={"swatch " (kind)} {} (kind)
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
        // Step numbers far enough apart not to overlap.
        let stride = label_stride(x(1) - x(0), self.steps.to_string().len());
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
                @for s in (0..self.steps).step_by(stride) {
                    (svg_text(x(s) + 2.0, height - 6.0, "start", &s.to_string()))
                }
            }
            div.scroll { table {
                tr { th { "address" } th { "bytes" } th { "kind" } th.names { "value" } th { "live steps" } }
                tr { td { (format!("{code:#x}", code = self.code.0)) } td { (self.code.1) } td { "code" } td.names {} td { "all" } }
                @for (b, name) in &self.buffers {
                    tr {
                        td { (format!("{:#x}", b.address)) } td { (b.bytes) }
                        td { (format!("{:?}", b.label.class)) } td.names { (name) " " (b.label.rect) }
                        td { (b.first_step) "–" (b.last_step) }
                    }
                }
            } }
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

/// The colour of a buffer kind: fifteen hues 24° apart, neighbouring kinds seven steps apart.
fn colour(class: BufferClass) -> String {
    format!("hsl({}, 65%, 50%)", (class as u32 * 7 % 15) * 24)
}

/// One profile's page; with `map`, the memory map of its tile; otherwise `no_map` says why not.
pub fn html(e: &Execution, map: Result<&MemoryMap, &str>) -> String {
    let columns = e.memory.len().div_ceil(e.tiles_per_column.max(1) as usize);
    let (maps, script) = super::heat::maps(e);
    let summary = Summary::of(e);
    let body = markup! {
        h1 { (e.workload) }
        p {
            (e.cycles) " cycles on " (e.target) "; " (e.memory.len()) " tiles in " (columns)
            " columns of " (e.tiles_per_column) "; package " (e.package) "."
        }
        h2 { "BSP timeline" }
        (timeline(e, e.cycles))
        (timeline_key())
        (maps)
        @match map {
            Ok(map) => (map.markup()),
            Err(why) => p { "No memory map: " (why) },
        }
        h2 { "supersteps" }
        (tables(&summary))
        script { (PreEscaped(script)) }
    };
    layout(&format!("{}: execution profile", e.workload), body)
}

/// The summary as tables: every step (each row naming, in `data-serves`, the operations its step
/// serves, which the heat maps' tooltips read), the totals, and where the estimate is furthest off.
fn tables(s: &Summary) -> Markup {
    let names = |step: usize| s.serves(step);
    markup! {
        p {
            "minimum tile cycles " (s.minimum_tile_cycles) ", sync cycles " (s.sync_cycles)
            "; compute " (s.compute_cycles) (format!(" ({:.1}%)", share(s.compute_cycles, s.cycles)))
            ", exchange " (s.exchange_cycles) (format!(" ({:.1}%)", share(s.exchange_cycles, s.cycles)))
            ", sync " (s.sync_cycles) (format!(" ({:.1}%)", share(s.sync_cycles, s.cycles)))
            "; most standard bytes on a tile " (s.most_standard_bytes)
            ", most interleaved bytes on a tile " (s.most_interleaved_bytes) "."
        }
        (scrolled(markup! { table #steps {
            tr {
                th { "step" } th { "kind" } th { "cycles" } th { "share" } th { "estimate" }
                th { "est/sim" } th { "sync" } th { "est sync" } th { "busy tiles" }
                th { "mean busy" } th { "furthest tile (est/sim)" } th.names { "serves" }
            }
            @for st in &s.steps {
                tr data-step=(st.step) data-serves=(names(st.step)) {
                    td { "step" (st.step) } td { (st.kind) } td { (st.cycles) }
                    td { (format!("{:.1}%", st.share)) } td { (st.estimate) }
                    td { (format!("{:.3}", st.estimate_ratio)) } td { (st.sync_cycles) }
                    td { (st.estimated_sync_cycles) } td { (st.busy_tiles) } td { (st.mean_busy) }
                    td { (st.furthest_tile.map_or("-".to_string(), |t| format!(
                        "tile{} ({:.3})", t.tile, 1.0 + t.error()))) }
                    td.names { (names(st.step)) }
                }
            }
        } }))
        @if !s.steps_furthest_off.is_empty() {
            h3 { "estimate furthest off by superstep, sync included" }
            (scrolled(markup! { table.furthest {
                tr { th { "step" } th { "estimate" } th { "device" } th { "error" } th.names { "serves" } }
                @for w in &s.steps_furthest_off {
                    tr {
                        td { "step" (w.step) } td { (w.estimate) } td { (w.device) }
                        td { (format!("{:+.1} %", 100.0 * w.error)) } td.names { (names(w.step)) }
                    }
                }
            } }))
        }
        @if !s.tiles_furthest_off.is_empty() {
            h3 { "estimate furthest off by tile" }
            (scrolled(markup! { table.furthest {
                tr {
                    th { "step" } th { "tile" } th { "tiles alike" } th { "estimate" } th { "device" }
                    th { "error" } th.names { "serves" }
                }
                @for TilesOff { first: t, tiles } in &s.tiles_furthest_off {
                    tr {
                        td { "step" (t.step) } td { "tile" (t.tile) } td { (tiles) }
                        td { (t.estimate) } td { (t.device) }
                        td { (format!("{:+.1} %", 100.0 * t.error())) } td.names { (names(t.step)) }
                    }
                }
            } }))
        }
    }
}
