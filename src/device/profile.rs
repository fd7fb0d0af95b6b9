//! What one `run` reports, `execution.ipuprofile`: the package it ran; per superstep its kind, the
//! graph operations it serves (the package's names for them), estimated and executed cycles, the sync that ends it (executed and estimated) and every tile's busy cycles;
//! the run's cycles (every superstep and its sync),
//! the busiest tile's own cycles, each tile's memory in use, and the bytes the host streamed. Its file
//! form (magic, body hash, store bytes) is [`crate::report`]'s.
//!
//! Contract: [`Device::profile`] only reads the device after the run; it adds up the figures the
//! supersteps and streams measured and changes nothing. A total past u64 (a package's target may
//! name any sync cost) is a [`Fault`], never a wrap.

use super::{Device, Fault, fault};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepProfile {
    pub kind: String,
    /// The graph operations the step serves, by name, as the package names them
    /// ([`crate::ir::StepEstimate::operators`]).
    pub operators: Vec<String>,
    pub estimated_cycles: u64,
    pub cycles: u64,
    /// The sync that ends the step, as the device ran it and as the compiler estimated it.
    pub sync_cycles: u64,
    pub estimated_sync_cycles: u64,
    /// Per tile: cycles busy in this step (its compute, or until its last send leaves or last word
    /// arrives); the rest of the step, and the sync, it waits.
    pub tile_busy: Vec<u32>,
    /// Per tile: the compiler's estimate of its compute (empty for an exchange step).
    pub tile_estimates: Vec<u32>,
}

/// What one `run` did: `execution.ipuprofile`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub workload: String,
    pub target: String,
    /// The blake3 (hex) of the `model.ipuexe` body the run executed: the package this profile
    /// measured. The device never sees the file: [`Device::run`] leaves it empty, for `run`, which
    /// read the file, to name.
    pub package: String,
    pub clock_khz: u64,
    /// Tiles per column of the chip (tile `t` sits in column `t / tiles_per_column`).
    pub tiles_per_column: u32,
    /// Device cycles of one `run`: every superstep and its sync.
    pub cycles: u64,
    /// The busiest tile's own cycles: its compute and exchange activity plus the syncs, without waiting
    /// for other tiles. `cycles - minimum_tile_cycles` is time lost to imbalance.
    pub minimum_tile_cycles: u64,
    pub sync_cycles: u64,
    pub steps: Vec<StepProfile>,
    /// Per tile: bytes in use in standard and in interleaved memory (up to the highest written byte).
    pub memory: Vec<(u32, u32)>,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub weight_bytes: u64,
}

impl Device {
    /// The profile of a run of the package whose supersteps measured `steps`, with the bytes its
    /// streams moved in and out (the weights' bytes are those `initialize` streams).
    pub(super) fn profile(
        &self,
        steps: Vec<StepProfile>,
        input_bytes: u64,
        output_bytes: u64,
    ) -> Result<Execution, Fault> {
        let package = &self.package;
        let weight_bytes = package
            .host
            .initialize
            .iter()
            .try_fold(0u64, |sum, t| {
                sum.checked_add(t.rect.elements().checked_mul(2)?)
            })
            .ok_or_else(|| {
                fault(
                    0,
                    0,
                    0,
                    "initialize: its transfers' bytes pass u64".to_string(),
                )
            })?;
        // Sums of u32 figures, one per superstep (fewer than the code's bytes): within u64.
        let busiest_tile = (0..self.tiles.len())
            .map(|t| steps.iter().map(|s| u64::from(s.tile_busy[t])).sum::<u64>())
            .max()
            .unwrap_or(0);
        let supersteps = steps.iter().map(|s| s.cycles).sum::<u64>();
        let totals = steps
            .iter()
            .try_fold(0u64, |sum, s| sum.checked_add(s.sync_cycles))
            .and_then(|sync| {
                let cycles = supersteps.checked_add(sync)?;
                Some((sync, cycles, busiest_tile.checked_add(sync)?))
            });
        let Some((sync_cycles, cycles, minimum_tile_cycles)) = totals else {
            return Err(fault(
                0,
                steps.len(),
                0,
                format!(
                    "sync: {} syncs of {} cycles and the supersteps' {supersteps} cycles pass u64",
                    steps.len(),
                    self.target.sync_cycles
                ),
            ));
        };
        Ok(Execution {
            workload: package.workload.clone(),
            target: self.target.name.clone(),
            package: String::new(),
            clock_khz: self.target.clock_khz,
            tiles_per_column: self.target.tiles / self.target.columns,
            cycles,
            minimum_tile_cycles,
            sync_cycles,
            steps,
            memory: self.memory_in_use(),
            input_bytes,
            output_bytes,
            weight_bytes,
        })
    }

    /// Per tile: bytes in use in standard and in interleaved memory (up to the highest written byte).
    fn memory_in_use(&self) -> Vec<(u32, u32)> {
        self.tiles
            .iter()
            .map(|t| {
                let (standard_end, interleaved_end) = t.memory.used_ends();
                (
                    standard_end - self.target.memory_base,
                    interleaved_end - self.target.interleaved_base,
                )
            })
            .collect()
    }
}
