//! The device's own cycle model for what it executes, from the decoded instruction and the target's
//! parameters, built from the tile's mechanisms rather than from the compiler's estimate
//! (`Target::amp_cycles` and its siblings are never called here).
//!
//! An AMP vertex ([`amp`]): the supervisor launches it, then per 16x16 weight block it sets the block
//! up, loads the block's weights into the AMP (128-bit loads from interleaved memory), starts the six
//! workers and waits for them. The vertex's rows are dealt to the workers as evenly as possible; each
//! worker fills and drains the AMP pipeline and issues four AMP bundles a row (eight with f32
//! partials). Workers issue in the barrel, one bundle every `workers` tile cycles each, so a pass takes
//! `workers` tile cycles per bundle of its slowest worker; idle workers cost nothing.
//!
//! Fitted to Graphcore's measured curve (one block of N rows on a Bow IPU): within 7.7 cycles for all
//! 128 published N (`ipu-codegen calibrate`).

use crate::ir::DType;
use crate::isa::{Amp, Placed};
use crate::target::Target;

/// Rows per worker when `rows` are dealt to `workers` as evenly as possible.
fn dealt(rows: u32, workers: u32) -> impl Iterator<Item = u32> {
    (0..workers).map(move |w| rows / workers + u32::from(w < rows % workers))
}

/// Tile cycles of an AMP vertex as the device executes it.
pub fn amp(target: &Target, v: &Amp<Placed>) -> u64 {
    if v.rows == 0 || v.depth == 0 || v.cols == 0 {
        return target.vertex_overhead_cycles;
    }
    let blocks = u64::from(v.depth.div_ceil(target.amp_block_depth))
        * u64::from(v.cols.div_ceil(target.amp_block_width));
    let bundles_per_row = match v.partials.dtype {
        DType::F16 => target.amp_row_cycles_f16_partials,
        DType::F32 | DType::I64 => target.amp_row_cycles_f32_partials,
    };
    let slowest_worker = dealt(v.rows, target.workers)
        .filter(|&rows| rows > 0)
        .map(|rows| target.amp_worker_fill_cycles + bundles_per_row * u64::from(rows))
        .max()
        .unwrap_or(0);
    let worker_pass = u64::from(target.workers) * slowest_worker;
    let weight_bytes = u64::from(target.amp_block_depth * target.amp_block_width) * 2;
    let weight_load = weight_bytes.div_ceil(target.weight_load_bytes_per_cycle);
    target.vertex_overhead_cycles
        + blocks * (target.amp_block_supervisor_cycles + weight_load + worker_pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_dealt_as_evenly_as_possible() {
        assert_eq!(dealt(14, 6).collect::<Vec<_>>(), [3, 3, 2, 2, 2, 2]);
        assert_eq!(dealt(4, 6).collect::<Vec<_>>(), [1, 1, 1, 1, 0, 0]);
        assert_eq!(dealt(14, 6).sum::<u32>(), 14);
    }
}
