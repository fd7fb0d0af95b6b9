//! The device's timing of the data-movement vertex (`isa::Assemble`), from Graphcore's poplibs
//! cycle estimators for the code Poplar runs to move the same elements on one tile; the figures
//! carry over, the code is ours.
//!
//! Poplar lowers a rearrangement on a tile to on-tile copies of contiguous regions and, for 2-D
//! transposes, to popops' transpose vertices (`popops::rearrange::addTransposeVertices`,
//! `lib/popops/Rearrange.cpp`). No single codelet copies a general strided view, so the vertex is
//! charged as the sequence Poplar would run, each piece by its form (`isa::CopyForm`):
//!
//! - runs contiguous on both sides (a run of one element for a piece contiguous on neither side)
//!   as the `LongMemcpy` rows of `BroadcastSelectorSelectCycles` (popops
//!   `lib/popops/popopsCycleEstimators.cpp`): 11 + 1 cycles a worker, then per run 12 + 23 cycles,
//!   one cycle per 4 bytes (ld64/st64) and 5 per byte left over; every run of the vertex, piece by
//!   piece, dealt to the workers in order as poplibs deals elementwise work (`numerics::dealt`),
//!   the tile waiting for the slowest, `workers` cycles a worker cycle — one codelet for all runs;
//! - each piece of 2-D transposes as one supervisor transpose vertex, `getTransposeCycleEstimate`
//!   (popsparse `lib/popsparse/PerformanceEstimation.hpp`, half: grains of 4 elements, 4 cycles a
//!   grain, a supervisor's 7 cycles): its source rows and columns rounded up to whole grains (the
//!   estimate's precondition, which Poplar meets by padding).
//!
//! Contract: [`assemble`] is a function of the decoded vertex and the target's worker count only;
//! it never calls the compiler's estimate (`Target::assemble_cycles`). Arithmetic saturates.

use crate::isa::{Assemble, CopyForm, Placed};
use crate::numerics::dealt;
use crate::target::Target;

/// `LongMemcpy` of one run of `bytes` (`BroadcastSelectorSelectCycles`): 12 + 23, a cycle per 4
/// bytes, 5 per byte left over.
pub(super) fn memcpy_run(bytes: u64) -> u64 {
    12 + 23 + bytes / 4 + (bytes % 4) * 5
}

/// `getTransposeCycleEstimate` (popsparse `PerformanceEstimation.hpp`) for `count` half
/// transposes of `rows x cols` source elements (each rounded up to grains of 4).
pub(super) fn transposes(workers: u64, count: u64, rows: u64, cols: u64) -> u64 {
    const SUPERVISOR: u64 = 7;
    const PER_GRAIN: u64 = 4;
    let (row_grains, col_grains) = (rows.div_ceil(4).max(1), cols.div_ceil(4).max(1));
    let per_worker = count.div_ceil(workers.max(1));
    let slowest = if row_grains == 1 && col_grains == 1 {
        if per_worker == 1 {
            17 + 12
        } else {
            (17u64 + 20).saturating_add(per_worker.saturating_sub(2).saturating_mul(PER_GRAIN))
        }
    } else if col_grains == 1 {
        let each = 15 + 20 + PER_GRAIN.saturating_mul(row_grains.saturating_sub(2));
        27u64.saturating_add(per_worker.saturating_mul(each))
    } else {
        let row = 12 + PER_GRAIN.saturating_mul(col_grains.saturating_sub(2));
        let each = 18u64.saturating_add(row_grains.saturating_mul(row));
        29u64.saturating_add(per_worker.saturating_mul(each))
    };
    SUPERVISOR.saturating_add(workers.saturating_mul(slowest))
}

/// Tile cycles of an assemble vertex: one `LongMemcpy` codelet over all its runs, one transpose
/// vertex per piece of transposes.
pub fn assemble(target: &Target, v: &Assemble<Placed>) -> u64 {
    let workers = u64::from(target.workers.max(1));
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut cycles = 0u64;
    for p in &v.pieces {
        match p.form() {
            CopyForm::Runs { count, len } => runs.push((count, memcpy_run(len.saturating_mul(2)))),
            CopyForm::Transposes { count, rows, cols } => {
                cycles = cycles.saturating_add(transposes(workers, count, rows, cols));
            }
        }
    }
    let total: u64 = runs.iter().map(|r| r.0).fold(0, u64::saturating_add);
    if total == 0 {
        return cycles;
    }
    // The runs in order, dealt: each worker takes the next `share` of them.
    let shares: Vec<u64> = dealt(
        u32::try_from(total).unwrap_or(u32::MAX),
        target.workers.max(1),
    )
    .map(u64::from)
    .collect();
    let (mut group, mut left) = (0usize, runs[0].0);
    let mut slowest = 0u64;
    for share in shares {
        let mut worker = 11 + 1u64;
        let mut need = share;
        while need > 0 && group < runs.len() {
            let take = need.min(left);
            worker = worker.saturating_add(take.saturating_mul(runs[group].1));
            need -= take;
            left -= take;
            if left == 0 {
                group += 1;
                left = runs.get(group).map_or(0, |r| r.0);
            }
        }
        slowest = slowest.max(worker);
    }
    cycles.saturating_add(workers.saturating_mul(slowest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_follow_poplibs_branches() {
        // One 4x4 transpose a worker: 7 + 6 · (17 + 12).
        assert_eq!(transposes(6, 6, 4, 4), 7 + 6 * 29);
        // 8x16 source, one per worker: 7 + 6 · (29 + 18 + 2 · (12 + 4 · 2)).
        assert_eq!(transposes(6, 1, 8, 16), 7 + 6 * (29 + 18 + 2 * 20));
        // 5 rows round up to two grains.
        assert_eq!(transposes(6, 1, 5, 16), transposes(6, 1, 8, 16));
    }

    #[test]
    fn a_memcpy_run_costs_its_words() {
        assert_eq!(memcpy_run(16), 35 + 4);
        assert_eq!(memcpy_run(2), 35 + 10);
    }
}
