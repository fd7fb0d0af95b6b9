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
//! Vector work ([`vector_op`] for a general vector vertex, `timing/vector_ops.rs`; [`epilogue`],
//! [`layer_norm`], [`softmax`], [`accumulate`] and [`combine`] for the fused ones,
//! `timing/fused.rs`) is timed from poplibs' cycle estimators for the codelets Poplar runs for the
//! same work, each formula citing its poplibs file and function; the data-movement vertex
//! (`isa::Assemble`, [`assemble`]) likewise, from the memcpy and transpose estimators for what
//! Poplar runs (`timing/assemble.rs`).
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
pub use fused::{
    accumulate, combine, epilogue, layer_norm, layer_norm_apply, layer_norm_moments, softmax,
};
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
