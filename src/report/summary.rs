//! The summary of one profile: every superstep with its cycles, its share of the run, the
//! compiler's estimate and the graph operations it serves, the sync that ends it beside its estimate,
//! the totals, the memory maxima, and where the estimate is furthest off: the [`FURTHEST`] supersteps (each with its sync) and the
//! [`FURTHEST`] tiles of compute steps whose estimates are furthest from the device. One
//! value, [`Summary`], printed as the text table ([`Summary::text`]) and as JSON (`report --json`)
//! with the same fields. Never panics on a crafted profile.

use crate::device::{Execution, StepProfile};
use serde::Serialize;
use std::fmt::Write as _;

/// Percent of `whole` that `part` is (0 of nothing).
pub(super) fn share(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// A tile's estimate against the device in one step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TileEstimate {
    pub step: usize,
    pub tile: usize,
    pub estimate: u32,
    pub device: u32,
}

impl TileEstimate {
    /// The estimate's error relative to the device's busy cycles.
    pub fn error(&self) -> f64 {
        (f64::from(self.estimate) - f64::from(self.device)) / f64::from(self.device.max(1))
    }
}

/// One superstep as the table shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepSummary {
    pub step: usize,
    pub kind: String,
    pub cycles: u64,
    /// Percent of the run.
    pub share: f64,
    pub estimate: u64,
    /// Estimate over device cycles.
    pub estimate_ratio: f64,
    /// The sync that ends the step, on the device and as the compiler estimated it.
    pub sync_cycles: u64,
    pub estimated_sync_cycles: u64,
    pub busy_tiles: usize,
    pub mean_busy: u64,
    /// The tile of a compute step whose estimate is furthest from the device.
    pub furthest_tile: Option<TileEstimate>,
    /// The graph operations the step serves, by name.
    pub operators: Vec<String>,
}

/// How many supersteps, and how many tiles, the summary lists as furthest off.
pub const FURTHEST: usize = 5;

/// A superstep and its sync, as estimated and on the device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepEstimate {
    pub step: usize,
    /// The step's cycles and the sync that ends it, as the compiler estimated them.
    pub estimate: u64,
    /// The same on the device.
    pub device: u64,
    /// Relative to the device's cycles.
    pub error: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub workload: String,
    pub target: String,
    pub package: String,
    pub cycles: u64,
    pub minimum_tile_cycles: u64,
    pub sync_cycles: u64,
    pub tiles: usize,
    pub steps: Vec<StepSummary>,
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub most_standard_bytes: u32,
    pub most_interleaved_bytes: u32,
    /// The supersteps whose estimates, sync included, are furthest from the device, furthest first.
    pub steps_furthest_off: Vec<StepEstimate>,
    /// Over all compute steps, the tiles whose estimates are furthest from the device, furthest
    /// first, those of one step with the same figures as one entry.
    pub tiles_furthest_off: Vec<TilesOff>,
}

/// Tiles of one compute step with the same estimate and device cycles: the first of them, and how
/// many they are.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TilesOff {
    #[serde(flatten)]
    pub first: TileEstimate,
    pub tiles: usize,
}

/// A compute step's tiles with an estimate or busy cycles, each beside the device.
fn tile_estimates(step: usize, st: &StepProfile) -> impl Iterator<Item = TileEstimate> + '_ {
    (st.tile_estimates.iter().zip(&st.tile_busy).enumerate())
        .filter(|(_, (e, b))| **e > 0 || **b > 0)
        .map(move |(tile, (&estimate, &device))| TileEstimate {
            step,
            tile,
            estimate,
            device,
        })
}

/// The tile of a compute step whose estimate is furthest from the device, if the step has estimates
/// (the first of equals).
fn furthest_tile(step: usize, st: &StepProfile) -> Option<TileEstimate> {
    tile_estimates(step, st).reduce(|f, t| {
        if t.error().abs() > f.error().abs() {
            t
        } else {
            f
        }
    })
}

/// The `n` supersteps whose estimates, each with the sync that ends it, are furthest from the
/// device, furthest first (the first of equals first).
pub fn steps_furthest_off(e: &Execution, n: usize) -> Vec<StepEstimate> {
    let mut steps: Vec<StepEstimate> = (e.steps.iter().enumerate())
        .map(|(step, st)| {
            let estimate = st.estimated_cycles.saturating_add(st.estimated_sync_cycles);
            let device = st.cycles.saturating_add(st.sync_cycles);
            let error = (estimate as f64 - device as f64) / device.max(1) as f64;
            StepEstimate {
                step,
                estimate,
                device,
                error,
            }
        })
        .collect();
    steps.sort_by(|a, b| b.error.abs().total_cmp(&a.error.abs()));
    steps.truncate(n);
    steps
}

/// Operation names as the text shows them: comma-separated, `-` for none.
pub(super) fn serves(operators: &[String]) -> String {
    if operators.is_empty() {
        "-".to_string()
    } else {
        operators.join(", ")
    }
}

/// Per tile, where its estimate is furthest from the device over the compute steps (the first of
/// equals), if it has an estimate anywhere.
pub(super) fn tile_furthest(e: &Execution) -> Vec<Option<TileEstimate>> {
    let mut worst: Vec<Option<TileEstimate>> = vec![None; e.memory.len()];
    for t in (e.steps.iter().enumerate()).flat_map(|(step, st)| tile_estimates(step, st)) {
        if let Some(w) = worst.get_mut(t.tile)
            && w.is_none_or(|w| t.error().abs() > w.error().abs())
        {
            *w = Some(t);
        }
    }
    worst
}

impl Summary {
    pub fn of(e: &Execution) -> Summary {
        let steps: Vec<StepSummary> = e
            .steps
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let busy: Vec<u64> = st
                    .tile_busy
                    .iter()
                    .filter(|&&b| b > 0)
                    .map(|&b| u64::from(b))
                    .collect();
                StepSummary {
                    step: i,
                    kind: st.kind.clone(),
                    cycles: st.cycles,
                    share: share(st.cycles, e.cycles),
                    estimate: st.estimated_cycles,
                    estimate_ratio: st.estimated_cycles as f64 / st.cycles.max(1) as f64,
                    sync_cycles: st.sync_cycles,
                    estimated_sync_cycles: st.estimated_sync_cycles,
                    busy_tiles: busy.len(),
                    mean_busy: busy.iter().sum::<u64>() / busy.len().max(1) as u64,
                    furthest_tile: furthest_tile(i, st),
                    operators: st.operators.clone(),
                }
            })
            .collect();
        let total = |kind: &str| {
            e.steps
                .iter()
                .filter(|s| s.kind == kind)
                .fold(0u64, |sum, s| sum.saturating_add(s.cycles))
        };
        let mut tiles: Vec<TileEstimate> = (e.steps.iter().enumerate())
            .flat_map(|(step, st)| tile_estimates(step, st))
            .collect();
        tiles.sort_by(|a, b| {
            (b.error().abs().total_cmp(&a.error().abs())).then(
                (a.step, a.estimate, a.device, a.tile).cmp(&(b.step, b.estimate, b.device, b.tile)),
            )
        });
        let mut groups: Vec<TilesOff> = Vec::new();
        for t in tiles {
            let figures = |t: &TileEstimate| (t.step, t.estimate, t.device);
            if let Some(g) = groups.last_mut()
                && figures(&g.first) == figures(&t)
            {
                g.tiles += 1;
            } else if groups.len() == FURTHEST {
                break;
            } else {
                groups.push(TilesOff { first: t, tiles: 1 });
            }
        }
        Summary {
            workload: e.workload.clone(),
            target: e.target.clone(),
            package: e.package.clone(),
            cycles: e.cycles,
            minimum_tile_cycles: e.minimum_tile_cycles,
            sync_cycles: e.sync_cycles,
            tiles: e.memory.len(),
            compute_cycles: total("compute"),
            exchange_cycles: total("exchange"),
            most_standard_bytes: e.memory.iter().map(|m| m.0).max().unwrap_or(0),
            most_interleaved_bytes: e.memory.iter().map(|m| m.1).max().unwrap_or(0),
            steps_furthest_off: steps_furthest_off(e, FURTHEST),
            tiles_furthest_off: groups,
            steps,
        }
    }

    /// The text table.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "workload={} target={} package={} cycles={} minimumTileCycles={} syncCycles={} tiles={}",
            self.workload,
            self.target,
            self.package,
            self.cycles,
            self.minimum_tile_cycles,
            self.sync_cycles,
            self.tiles
        );
        let _ = writeln!(
            s,
            "{:<6} {:<9} {:>10} {:>7} {:>10} {:>9} {:>6} {:>8} {:>12} {:>10}  {:<24}  serves",
            "step",
            "kind",
            "cycles",
            "share",
            "estimate",
            "est/sim",
            "sync",
            "est sync",
            "busy tiles",
            "mean busy",
            "furthest tile (est/sim)"
        );
        for st in &self.steps {
            let _ = writeln!(
                s,
                "{:<6} {:<9} {:>10} {:>6.1}% {:>10} {:>9.3} {:>6} {:>8} {:>12} {:>10}  {:<24}  {}",
                format!("step{}", st.step),
                st.kind,
                st.cycles,
                st.share,
                st.estimate,
                st.estimate_ratio,
                st.sync_cycles,
                st.estimated_sync_cycles,
                st.busy_tiles,
                st.mean_busy,
                st.furthest_tile.map_or("-".to_string(), |t| format!(
                    "tile{} ({:.3})",
                    t.tile,
                    1.0 + t.error()
                )),
                serves(&st.operators)
            );
        }
        let _ = writeln!(
            s,
            "compute {} ({:.1}%), exchange {} ({:.1}%), sync {} ({:.1}%)",
            self.compute_cycles,
            share(self.compute_cycles, self.cycles),
            self.exchange_cycles,
            share(self.exchange_cycles, self.cycles),
            self.sync_cycles,
            share(self.sync_cycles, self.cycles)
        );
        let _ = writeln!(
            s,
            "memory: most standard bytes on a tile {}, most interleaved bytes on a tile {}",
            self.most_standard_bytes, self.most_interleaved_bytes
        );
        if !self.steps_furthest_off.is_empty() {
            let _ = writeln!(s, "estimate furthest off by superstep, sync included:");
        }
        for w in &self.steps_furthest_off {
            let _ = writeln!(
                s,
                "  step{} estimate {} device {} ({:+.1} %) serving {}",
                w.step,
                w.estimate,
                w.device,
                100.0 * w.error,
                self.serves(w.step)
            );
        }
        if !self.tiles_furthest_off.is_empty() {
            let _ = writeln!(s, "estimate furthest off by tile:");
        }
        for TilesOff { first: t, tiles } in &self.tiles_furthest_off {
            let others = match tiles {
                1 => String::new(),
                2 => " and 1 other".to_string(),
                n => format!(" and {} others", n - 1),
            };
            let _ = writeln!(
                s,
                "  step{} tile{}{others} estimate {} device {} ({:+.1} %) serving {}",
                t.step,
                t.tile,
                t.estimate,
                t.device,
                100.0 * t.error(),
                self.serves(t.step)
            );
        }
        s
    }

    /// The graph operations step `step` serves, as the text shows them.
    pub fn serves(&self, step: usize) -> String {
        serves(self.steps.get(step).map_or(&[][..], |s| &s.operators))
    }

    /// The summary as one JSON object, the text's fields in camelCase.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
