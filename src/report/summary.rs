//! The summary of one profile: every superstep with its cycles, its share of the run and the
//! compiler's estimate, the sync that ends it beside its estimate, the totals, the memory maxima, and where the estimate is furthest off. One
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
}

/// The superstep whose estimate is furthest from the device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WorstStep {
    pub step: usize,
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
    pub worst_step: Option<WorstStep>,
    /// Over all compute steps, the tile whose estimate is furthest from the device.
    pub furthest_tile: Option<TileEstimate>,
}

/// The tile of a compute step whose estimate is furthest from the device, if the step has estimates.
fn furthest_tile(step: usize, st: &StepProfile) -> Option<TileEstimate> {
    st.tile_estimates
        .iter()
        .zip(&st.tile_busy)
        .enumerate()
        .filter(|(_, (e, b))| **e > 0 || **b > 0)
        .map(|(tile, (&estimate, &device))| TileEstimate {
            step,
            tile,
            estimate,
            device,
        })
        .max_by(|a, b| a.error().abs().total_cmp(&b.error().abs()))
}

/// The superstep whose estimate is furthest from the device, with the estimate's relative error.
pub fn worst_step(e: &Execution) -> Option<(usize, f64)> {
    e.steps
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let error = (st.estimated_cycles as f64 - st.cycles as f64) / st.cycles.max(1) as f64;
            (i, error)
        })
        .rev() // the first of equals
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
}

/// Per tile, the estimate's largest relative error over the compute steps, in percent.
pub(super) fn tile_errors(e: &Execution) -> Vec<f64> {
    let mut worst = vec![0f64; e.memory.len()];
    for (step, st) in e.steps.iter().enumerate() {
        for (tile, (&estimate, &device)) in st.tile_estimates.iter().zip(&st.tile_busy).enumerate()
        {
            if (estimate > 0 || device > 0) && tile < worst.len() {
                let t = TileEstimate {
                    step,
                    tile,
                    estimate,
                    device,
                };
                let err = 100.0 * t.error();
                if err.abs() > worst[tile].abs() {
                    worst[tile] = err;
                }
            }
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
                }
            })
            .collect();
        let total = |kind: &str| {
            e.steps
                .iter()
                .filter(|s| s.kind == kind)
                .fold(0u64, |sum, s| sum.saturating_add(s.cycles))
        };
        let furthest = steps.iter().filter_map(|s| s.furthest_tile).reduce(|f, t| {
            if t.error().abs() > f.error().abs() {
                t
            } else {
                f
            }
        });
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
            worst_step: worst_step(e).map(|(step, error)| WorstStep { step, error }),
            furthest_tile: furthest,
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
            "{:<6} {:<9} {:>10} {:>7} {:>10} {:>9} {:>6} {:>8} {:>12} {:>10}  furthest tile (est/sim)",
            "step",
            "kind",
            "cycles",
            "share",
            "estimate",
            "est/sim",
            "sync",
            "est sync",
            "busy tiles",
            "mean busy"
        );
        for st in &self.steps {
            let _ = writeln!(
                s,
                "{:<6} {:<9} {:>10} {:>6.1}% {:>10} {:>9.3} {:>6} {:>8} {:>12} {:>10}  {}",
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
                ))
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
        if let Some(w) = self.worst_step {
            let _ = writeln!(
                s,
                "estimate furthest off by superstep: step{} ({:+.1} %)",
                w.step,
                100.0 * w.error
            );
        }
        if let Some(t) = self.furthest_tile {
            let _ = writeln!(
                s,
                "estimate furthest off: step{} tile{} estimate {} device {} ({:+.1} %)",
                t.step,
                t.tile,
                t.estimate,
                t.device,
                100.0 * t.error()
            );
        }
        s
    }

    /// The summary as one JSON object, the text's fields in camelCase.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
