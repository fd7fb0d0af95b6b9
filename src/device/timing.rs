//! The device's own cycle model for what it executes, from the decoded instruction and the target's
//! parameters, built from the tile's mechanisms rather than from the compiler's estimate
//! (`Target::amp_cycles` and its siblings are never called here).
//!
//! An AMP vertex ([`amp`]): the supervisor launches it and sets it up, then per 16x16 weight block it
//! sets the block up and loads the block's weights into the AMP (128-bit loads from interleaved
//! memory); per pass over the rows (one with f16 partials, two with f32, whose AMP computes eight
//! output channels at once) it starts the six workers and waits for them; each input-channel group
//! after the first costs its loop. The vertex's rows are dealt to the workers as evenly as possible;
//! each worker fills and drains the AMP pipeline and issues four AMP bundles a row. Workers issue in
//! the barrel, one bundle every `workers` tile cycles each, so a pass takes `workers` tile cycles per
//! bundle of its slowest worker, and at least the supervisor's wait after its fastest; idle workers
//! cost nothing. The loop structure and its per-block costs are poplibs' 1x1 convolution estimate.
//!
//! Fitted to Graphcore's measured curve (one block of N rows on a Bow IPU): within 6.7 cycles for all
//! 128 published N (`ipu-codegen calibrate`).
//!
//! A vector vertex ([`vector`]): the supervisor launches it and the six workers share its rows (an
//! elementwise vertex's 64-bit grains) as evenly as possible; a worker may also do a vertex's
//! per-column work itself beside its rows (the accesses that work makes are then every worker's,
//! the rest are shared by rows). A worker issues
//! one bundle every `workers` tile cycles, each one FP instruction (f16v4: 4 lanes; f32v2: 2 lanes; 2
//! transcendental lanes) beside one load or store (64 bits, or a 128-bit load from interleaved
//! memory); so a worker's bundles are the larger of its lane operations over the lane width and its
//! share of the accesses the vertex actually made on the device, and the slowest worker sets the
//! vertex's time. A vertex whose workers need each other's results (the softmax's maximum before its
//! exponentials) makes several passes ([`passes`]), each timed so, the supervisor restarting the
//! workers between them.
//!
//! The online softmax, the accumulation and the merge of flash attention are timed so. A general
//! vector vertex (`isa::Vector`, [`vector_op`]) is timed instead from poplibs' cycle estimators for
//! the codelets Poplar runs for the same work (`timing/vector_ops.rs`, each formula citing its
//! poplibs file and function), and so are the epilogue and the layer norm, each as the chain of
//! codelets it fuses ([`epilogue`], [`layer_norm`], `timing/fused.rs`). The data-movement vertex (`isa::Assemble`, [`assemble`])
//! likewise, from the memcpy and transpose estimators for what Poplar runs (`timing/assemble.rs`).
//!
//! Memory-element conflicts: an AMP bundle loads its input, loads and stores partials in one cycle;
//! the device refuses an AMP whose input and partials share a 16 KiB element (poplibs' constraint), and
//! interleaved partials alternate between the two elements of a pair, so the bundle never stalls. A
//! vector worker makes one access a bundle and the barrel issues one bundle a cycle, so two accesses
//! never meet in one cycle either.
//!
//! The target's costs come from the package and may be anything: the arithmetic saturates at u64::MAX
//! rather than wrapping, and the superstep refuses a count past u32 as a fault.

mod assemble;
mod fused;
mod vector_ops;
pub use assemble::assemble;
pub use fused::{epilogue, layer_norm};
pub use vector_ops::vector_op;

use crate::isa::{Amp, Placed};
use crate::numerics::dealt;
use crate::target::Target;

/// The slowest and the fastest of workers' tile cycles (0 and 0 for none).
fn slowest_and_fastest(cycles: impl Iterator<Item = u64>) -> (u64, u64) {
    let (slowest, fastest) = cycles.fold((0, u64::MAX), |(s, f), c| (s.max(c), f.min(c)));
    (slowest, if fastest == u64::MAX { 0 } else { fastest })
}

/// A pass the supervisor starts the workers on: it ends no sooner than the supervisor's wait after
/// the fastest worker.
fn supervised_pass(target: &Target, slowest: u64, fastest: u64) -> u64 {
    target
        .worker_pass_cycles
        .saturating_add(slowest.max(fastest.saturating_add(target.worker_sync_cycles)))
}

/// Tile cycles of an AMP vertex as the device executes it.
pub fn amp(target: &Target, v: &Amp<Placed>) -> u64 {
    if v.rows == 0 || v.depth == 0 || v.cols == 0 {
        return target.vertex_overhead_cycles;
    }
    let depth_groups = u64::from(v.depth.div_ceil(target.amp_block_depth));
    let blocks = depth_groups.saturating_mul(u64::from(v.cols.div_ceil(target.amp_block_width)));
    let workers = u64::from(target.workers);
    let worker_cycles = |rows: u32| {
        let bundles = target.amp_row_cycles.saturating_mul(u64::from(rows));
        workers.saturating_mul(target.amp_worker_fill_cycles.saturating_add(bundles))
    };
    let (slowest, fastest) = slowest_and_fastest(
        dealt(v.rows, target.workers)
            .filter(|&rows| rows > 0)
            .map(worker_cycles),
    );
    let weight_bytes = u64::from(target.amp_block_depth)
        .saturating_mul(u64::from(target.amp_block_width))
        .saturating_mul(2);
    let weight_load = weight_bytes.div_ceil(target.weight_load_bytes_per_cycle.max(1));
    // Passes over the rows per weight block: the block's output channels over the AMP's units at
    // the partials' type.
    let units = match v.partials.dtype {
        crate::ir::DType::F16 => target.amp_units_f16_partials,
        _ => target.amp_units_f32_partials,
    };
    let passes = u64::from(target.amp_block_width.div_ceil(units.max(1)));
    let block = target
        .amp_block_supervisor_cycles
        .saturating_add(weight_load)
        .saturating_add(passes.saturating_mul(supervised_pass(target, slowest, fastest)));
    target
        .vertex_overhead_cycles
        .saturating_add(target.amp_vertex_supervisor_cycles)
        .saturating_add(blocks.saturating_mul(block))
        .saturating_add((depth_groups - 1).saturating_mul(target.amp_depth_group_supervisor_cycles))
}

/// A vector vertex's work as the device executes it: rows dealt to the workers (or, for an
/// elementwise vertex, 64-bit grains of its rows) and, per row, lane operations at each width and
/// transcendentals; and what every worker with rows does itself beside them (per-column factors it
/// computes from a few rows every worker reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VectorWork {
    pub rows: u32,
    pub f16_ops: u64,
    pub f32_ops: u64,
    pub transcendentals: u64,
    pub worker_f32_ops: u64,
    pub worker_transcendentals: u64,
    /// Of the vertex's accesses, those every worker makes itself (counted once among them).
    pub worker_accesses: u64,
}

/// Tile cycles of a vector vertex doing `work`, having made `accesses` loads and stores.
pub fn vector(target: &Target, work: &VectorWork, accesses: u64) -> u64 {
    passes(target, &[(*work, accesses)])
}

/// Tile cycles of a vector vertex whose workers make several passes, one after another, each with
/// its work and the accesses it made: the launch, the first pass as [`vector`] times it, then per
/// later pass the supervisor starts the workers and ends it no sooner than its wait after the
/// fastest worker.
pub fn passes(target: &Target, passes: &[(VectorWork, u64)]) -> u64 {
    let mut cycles = target.vertex_overhead_cycles;
    for (i, (work, accesses)) in passes.iter().enumerate() {
        let (slowest, fastest) = workers(target, work, *accesses);
        let pass = if i == 0 {
            slowest
        } else {
            supervised_pass(target, slowest, fastest)
        };
        cycles = cycles.saturating_add(pass);
    }
    cycles
}

/// Tile cycles of the slowest and the fastest worker with rows, in a pass doing `work` with
/// `accesses` loads and stores.
fn workers(target: &Target, work: &VectorWork, accesses: u64) -> (u64, u64) {
    let rows = u64::from(work.rows.max(1));
    let dealt_accesses = accesses.saturating_sub(work.worker_accesses);
    let lanes = |n: u64, ops: u64, width: u64| n.saturating_mul(ops).div_ceil(width.max(1));
    let bundles = dealt(work.rows, target.workers)
        .filter(|&r| r > 0)
        .map(|r| {
            let r = u64::from(r);
            let compute = lanes(r, work.f16_ops, target.vector_f16_lanes)
                .saturating_add(lanes(r, work.f32_ops, target.vector_f32_lanes))
                .saturating_add(lanes(
                    r,
                    work.transcendentals,
                    target.transcendental_f16_lanes,
                ))
                .saturating_add(lanes(1, work.worker_f32_ops, target.vector_f32_lanes))
                .saturating_add(lanes(
                    1,
                    work.worker_transcendentals,
                    target.transcendental_f16_lanes,
                ));
            let memory = dealt_accesses
                .saturating_mul(r)
                .div_ceil(rows)
                .saturating_add(work.worker_accesses);
            compute.max(memory)
        });
    slowest_and_fastest(bundles.map(|b| u64::from(target.workers).saturating_mul(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::preset("mk2-1500").unwrap()
    }

    #[test]
    fn a_vector_vertex_waits_for_its_slowest_worker_and_its_memory() {
        let t = target();
        let work = VectorWork {
            rows: 7,
            f16_ops: 40,
            ..VectorWork::default()
        };
        // Seven rows: one worker has two; 2 * 40 / 4 = 20 bundles, 6 tile cycles each.
        assert_eq!(vector(&t, &work, 0), 50 + 6 * 20);
        // 7 * 20 accesses: the two-row worker makes 40.
        assert_eq!(vector(&t, &work, 7 * 20), 50 + 6 * 40);
    }

    #[test]
    fn every_worker_with_rows_does_its_own_work_beside_them() {
        let t = target();
        let work = VectorWork {
            rows: 12,
            f32_ops: 8,
            worker_f32_ops: 10,
            worker_transcendentals: 4,
            ..VectorWork::default()
        };
        // Two rows a worker: 2 * 8 / 2 = 8 bundles, then 10 / 2 + 4 / 2 = 7 of its own.
        assert_eq!(vector(&t, &work, 0), 50 + 6 * (8 + 7));
        // 120 accesses of which 24 every worker makes: 96 / 6 = 16 shared by rows, 40 in all.
        let reads = VectorWork {
            worker_accesses: 24,
            ..work
        };
        assert_eq!(vector(&t, &reads, 120), 50 + 6 * 40);
        // Two rows: four workers idle do nothing.
        let few = VectorWork { rows: 2, ..work };
        assert_eq!(vector(&t, &few, 0), 50 + 6 * (4 + 7));
    }

    #[test]
    fn a_later_pass_is_started_and_waited_for_by_the_supervisor() {
        let t = target();
        let even = VectorWork {
            rows: 12,
            f32_ops: 8,
            ..VectorWork::default()
        };
        let uneven = VectorWork { rows: 13, ..even };
        // One pass: the launch and the slowest worker, no wait (2 rows, 8 bundles).
        assert_eq!(passes(&t, &[(even, 0)]), 50 + 6 * 8);
        // Workers of equal rows: the supervisor's wait shows after a later pass (6 * 8 + 14).
        assert_eq!(
            passes(&t, &[(even, 0), (even, 0)]),
            50 + 6 * 8 + 6 + 6 * 8 + 14
        );
        // 13 rows: the slowest worker (3 rows, 12 bundles) ends 24 cycles after the fastest.
        assert_eq!(
            passes(&t, &[(even, 0), (uneven, 0)]),
            50 + 6 * 8 + 6 + 6 * 12
        );
    }
}
