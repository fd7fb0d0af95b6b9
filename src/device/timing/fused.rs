//! The device's timing of the fused vector vertices (`isa::Epilogue`, `isa::LayerNorm` and the split
//! layer norm's `isa::LayerNormMoments` and `isa::LayerNormApply`, and flash
//! attention's `isa::Softmax`, `isa::Accumulate` and `isa::Combine`), from
//! Graphcore's poplibs cycle estimators for the chain of codelets Poplar runs for the same work on
//! one tile; the figures carry over, the code is ours (the codelet estimates are those of
//! `timing/vector_ops.rs`, which cites each, and below).
//!
//! One fused vertex replaces the chain, so it is charged the chain's estimates less what fusing
//! removes:
//! - every codelet's fixed part after the first (the supervisor's launch and
//!   `basicOpSupervisorOverhead`, each worker's entry and loop set-up);
//! - for an element-wise binary codelet after the first, the intermediate's reload and store: of
//!   the two cycles a vector `binaryOpInnerLoopCycles` (popops `popopsCycleEstimators.cpp`) adds to
//!   an external codelet's loop "for load/store and loop decision", one; the codelet's own
//!   operand (a bias, a residual, another part of the partials) is still loaded.
//!
//! Kept whole: the loop bodies of the non-linearities, the exponentials, the broadcasts by row, the
//! reductions, the casts and the transpose, whose estimates do not separate a loop's memory cycles from its
//! arithmetic.
//!
//! Contract: [`epilogue`], [`layer_norm`], [`layer_norm_moments`], [`layer_norm_apply`],
//! [`softmax`], [`accumulate`] and [`combine`] are
//! functions of the decoded vertex and the target's hardware parameters only (`workers`, the f16
//! and f32 vector widths); they never call the compiler's estimates (`Target::epilogue_cycles` and
//! its siblings). Arithmetic saturates.

use super::assemble::{memcpy_run, transposes};
use super::vector_ops::{
    Codelet, NonLinearity, PopopsUnary, SUPERVISOR, broadcast_outer, continuous_reduce, info,
    non_linearity, unary_op,
};
use crate::ir::BinaryFn;
use crate::ir::DType;
use crate::isa::{
    Accumulate, Activation, Combine, Epilogue, LayerNorm, LayerNormApply, LayerNormMoments, Placed,
    Softmax,
};
use crate::target::Target;

/// The cycles `binaryOpInnerLoopCycles` adds to an external codelet's loop per vector for loads,
/// the store and the loop decision (popops `popopsCycleEstimators.cpp`), and the reload and store
/// of those a fused chain removes.
const LOOP_MEMORY: u64 = 2;
const FUSED_AWAY: u64 = 1;

/// A chain of codelets as one fused vertex: the first's fixed part and every codelet's work.
#[derive(Default)]
struct Chain {
    fixed: Option<u64>,
    work: u64,
}

impl Chain {
    fn push(&mut self, c: Codelet) {
        self.fixed.get_or_insert(c.fixed);
        self.work = self.work.saturating_add(c.work);
    }

    /// An element-wise add, subtract or multiply of `n` elements `width` to a vector, in place:
    /// `BinaryOp1DInPlace` (`getBinaryOp1DInPlaceEstimate`, 58 cycles a worker) first in the chain,
    /// `BinaryOp1D` (26 a worker at half, 29 at float) otherwise; either way one cycle a vector and
    /// the loop's memory cycles, less the reload and store a fused chain removes.
    fn elementwise(&mut self, t: &Target, n: u64, dtype: DType, in_place: bool) {
        let workers = u64::from(t.workers.max(1));
        let width = lanes(t, dtype);
        let fused = self.fixed.is_some();
        let per_vector = 1 + LOOP_MEMORY - if fused { FUSED_AWAY } else { 0 };
        let entry = match (in_place, dtype) {
            (true, _) => 58,
            (false, DType::F16) => 26,
            (false, _) => 29,
        };
        self.push(Codelet {
            fixed: workers * entry + SUPERVISOR,
            work: workers.saturating_mul(
                n.div_ceil(workers)
                    .div_ceil(width)
                    .saturating_mul(per_vector),
            ),
        });
    }

    /// Tile cycles of the fused vertex.
    fn total(&self) -> u64 {
        self.fixed.unwrap_or(SUPERVISOR).saturating_add(self.work)
    }
}

fn lanes(t: &Target, dtype: DType) -> u64 {
    match dtype {
        DType::F16 | DType::Bool => t.vector_f16_lanes,
        DType::F32 | DType::I64 => t.vector_f32_lanes,
    }
    .max(1)
}

/// `getCast1DCycleEstimate` (popops `PerformanceEstimation.cpp`) for float to half over `n`: 12,
/// and per worker 18 and `castWorkerCycles` over its share: a prologue of 19, two cycles per
/// vector of four (two 64-bit loads of floats, one store of halves), and per remainder bit a test
/// and, when set, two cycles.
fn cast_to_half(t: &Target, n: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let share = n.div_ceil(workers);
    let remainder = share % 4;
    let tail: u64 = (0..2).map(|bit| 1 + 2 * ((remainder >> bit) & 1)).sum();
    Codelet {
        fixed: 12 + workers * (18 + 19),
        work: workers.saturating_mul(2 * (share / 4) + tail),
    }
}

/// poplin's `ReduceAdd` (`getReduceCycleEstimate`, poplin `PerformanceEstimation.hpp`; its supervisor
/// form, the partials not in interleaved memory), the vertex Poplar's matmuls sum their partials
/// with: `parts` partials of `n` elements summed in f32 and written as halves. Its accumulator takes
/// 4 floats or 8 halves a loop, each part's load costing a vector over the 64-bit data path (the
/// f16 or f32 lanes) and a cycle for the next pointer; the loops (one more per remainder bit) are
/// dealt to the workers; a worker spends 32 cycles on entry and 6 (f32 parts) or 8 (f16) a loop
/// besides the loads; a remainder the workers do not share evenly costs `2 · parts` and 13 or 11.
fn reduce_add(t: &Target, n: u64, parts: u64, partials: DType) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let float = partials != DType::F16;
    let accumulator: u64 = if float { 4 } else { 8 };
    let per_loop = accumulator / accumulator.min(lanes(t, partials)) + 1;
    let loops = n / accumulator + u64::from((n % accumulator).count_ones());
    let mut each = loops / workers;
    let mut remainder = 0;
    if !loops.is_multiple_of(workers) {
        if !n.is_multiple_of(accumulator) {
            remainder = 2 * parts + if float { 13 } else { 11 };
        } else {
            each += 1;
        }
    }
    let overhead = if float { 6 } else { 8 };
    Codelet {
        fixed: workers * 32,
        work: workers.saturating_mul(
            remainder + each.saturating_mul(per_loop.saturating_mul(parts) + overhead),
        ),
    }
}

/// `rows` rows of `row_bytes` copied, a `LongMemcpy` run a row (`BroadcastSelectorSelectCycles`, as
/// `timing/assemble.rs` charges runs: 11 + 1 cycles a worker), whole rows dealt to the workers.
fn copy_rows(t: &Target, rows: u64, row_bytes: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    Codelet {
        fixed: workers * (11 + 1),
        work: workers.saturating_mul(rows.div_ceil(workers).saturating_mul(memcpy_run(row_bytes))),
    }
}

/// `broadcastArithmetic1DCycleEstimate` (popops `popopsCycleEstimators.cpp`, `BroadcastScalar1D`)
/// over `n` floats with `VARIANCE_TO_INV_STD_DEV` (`broadcastOpPerfInfo`, FLOAT: 12 cycles per 2
/// elements): per worker 20 and its loops; `basicOpSupervisorOverhead`.
fn inverse_std_dev(t: &Target, n: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    Codelet {
        fixed: workers * 20 + SUPERVISOR,
        work: workers.saturating_mul(n.div_ceil(workers).div_ceil(2).saturating_mul(12)),
    }
}

/// Tile cycles of a matmul epilogue: several parts of the partials summed either by in-place adds
/// at their type (`BinaryOp1DInPlace`) and a cast to half (`Cast1D`) or by one reduction into
/// halves (poplin's `ReduceAdd`), whichever is cheaper; one part of f32 partials cast to half; the
/// bias added (`BinaryOp1D` along the rows, a `BroadcastVectorOuter` down them), the activation
/// (`NonLinearity1D` GELU or GELU_ERF, popnn `popnnCycleEstimators.cpp`), the residual added
/// (`BinaryOp1D`), and a transposed output written by the transpose vertex
/// (`getTransposeCycleEstimate`, the rows shared among the workers); one half part with nothing to
/// apply is copied (`LongMemcpy`, a run a row).
pub fn epilogue(t: &Target, v: &Epilogue<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let n = rows.saturating_mul(cols);
    let partials = v.partials.first().map_or(DType::F16, |p| p.dtype);
    let parts = v.partials.len() as u64;
    let chain = |reduced: bool| {
        let mut chain = Chain::default();
        if reduced {
            chain.push(reduce_add(t, n, parts, partials));
        } else {
            for _ in 1..parts {
                chain.elementwise(t, n, partials, true);
            }
            if partials != DType::F16 {
                chain.push(cast_to_half(t, n));
            }
        }
        applied(t, v, chain).total()
    };
    if parts > 1 {
        chain(false).min(chain(true))
    } else {
        chain(false)
    }
}

/// An epilogue's chain after its parts are summed: the bias, the activation, the residual, and the
/// copy or the transpose that writes the output.
fn applied(t: &Target, v: &Epilogue<Placed>, mut chain: Chain) -> Chain {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let n = rows.saturating_mul(cols);
    match (&v.bias, v.bias_by_row) {
        (None, _) => {}
        (Some(_), false) => chain.elementwise(t, n, DType::F16, false),
        (Some(_), true) => chain.push(broadcast_outer(t, BinaryFn::Add, rows, cols)),
    }
    match v.activation {
        None => {}
        Some(Activation::GeluTanh) => chain.push(non_linearity(t, NonLinearity::Gelu, n)),
        Some(Activation::GeluErf) => chain.push(non_linearity(t, NonLinearity::GeluErf, n)),
    }
    if v.residual.is_some() {
        chain.elementwise(t, n, DType::F16, false);
    }
    let workers = u64::from(t.workers.max(1));
    if chain.fixed.is_none() && !v.transpose {
        // One f16 part and nothing to apply: the partials copied.
        chain.push(copy_rows(t, rows, cols.saturating_mul(2)));
    }
    if v.transpose {
        let each = rows.div_ceil(workers);
        chain.push(Codelet {
            fixed: 7,
            work: transposes(workers, workers, each, cols).saturating_sub(7),
        });
    }
    chain
}

/// Tile cycles of a layer norm over `rows x cols` halves, as popnn's layer norm runs it (statistics
/// by `popops::reduce`, then the whitening and the affine transform): the rows' sums and sums of
/// squares (`ContinuousReduce`, twice), both scaled by `1/cols` (`BinaryOp1D` MULTIPLY over
/// `2 · rows` floats), the variance as the mean square less the squared mean (`BinaryOp1D`
/// MULTIPLY and SUBTRACT over `rows` floats), its inverse standard deviation with epsilon
/// (`BroadcastScalar1D` VARIANCE_TO_INV_STD_DEV), the mean subtracted and the result scaled per row
/// (`BroadcastVectorOuter` SUBTRACT and MULTIPLY), and gamma and beta along the rows (`BinaryOp1D`
/// MULTIPLY and ADD).
pub fn layer_norm(t: &Target, v: &LayerNorm<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let mut chain = Chain::default();
    chain.push(continuous_reduce(t, v.rows, cols));
    chain.push(continuous_reduce(t, v.rows, cols));
    chain.elementwise(t, 2 * rows, DType::F32, false);
    chain.elementwise(t, rows, DType::F32, false);
    chain.elementwise(t, rows, DType::F32, false);
    normalized(t, &mut chain, rows, cols);
    chain.total()
}

/// The rows' inverse standard deviations with epsilon (`BroadcastScalar1D`
/// VARIANCE_TO_INV_STD_DEV), the mean subtracted and the result scaled per row
/// (`BroadcastVectorOuter` SUBTRACT and MULTIPLY), and gamma and beta along the rows (`BinaryOp1D`
/// MULTIPLY and ADD) over `rows x cols` halves, added to `chain`.
fn normalized(t: &Target, chain: &mut Chain, rows: u64, cols: u64) {
    let n = rows.saturating_mul(cols);
    chain.push(inverse_std_dev(t, rows));
    chain.push(broadcast_outer(t, BinaryFn::Sub, rows, cols));
    chain.push(broadcast_outer(t, BinaryFn::Mul, rows, cols));
    chain.elementwise(t, n, DType::F16, false);
    chain.elementwise(t, n, DType::F16, false);
}

/// Tile cycles of a column block's moments of a split layer norm, as popnn's statistics would run
/// them on one block: the rows' sums (`ContinuousReduce`), scaled by `1/cols` to the means
/// (`BinaryOp1D` MULTIPLY over `rows` floats), the means subtracted (`BroadcastVectorOuter`
/// SUBTRACT) and the squared deviations summed (`ContinuousReduce`, SQUARE_ADD).
pub fn layer_norm_moments(t: &Target, v: &LayerNormMoments<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let mut chain = Chain::default();
    chain.push(continuous_reduce(t, v.rows, cols));
    chain.elementwise(t, rows, DType::F32, false);
    chain.push(broadcast_outer(t, BinaryFn::Sub, rows, cols));
    chain.push(continuous_reduce(t, v.rows, cols));
    chain.total()
}

/// Tile cycles of a column block of a split layer norm: the blocks' means summed per row
/// (`ContinuousReduce` over `blocks` partials) and scaled (`BinaryOp1D` over `rows` floats); the
/// block means' deviations, squared, scaled by the count and added to the squared deviations
/// (`BinaryOp1D` SUBTRACT, MULTIPLY, MULTIPLY and ADD over `rows · blocks` floats) and summed
/// (`ContinuousReduce`); the variance scaled and its inverse standard deviation
/// (`BroadcastScalar1D` VARIANCE_TO_INV_STD_DEV); then the whitening and the affine transform over
/// the block as [`layer_norm`] charges them.
pub fn layer_norm_apply(t: &Target, v: &LayerNormApply<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let blocks = v.moments.len() as u64;
    let mut chain = Chain::default();
    chain.push(continuous_reduce(t, v.rows, blocks));
    chain.elementwise(t, rows, DType::F32, false);
    for _ in 0..4 {
        chain.elementwise(t, rows.saturating_mul(blocks), DType::F32, false);
    }
    chain.push(continuous_reduce(t, v.rows, blocks));
    chain.elementwise(t, rows, DType::F32, false);
    normalized(t, &mut chain, rows, cols);
    chain.total()
}

/// What a strided reduction computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    Max,
    Add,
}

/// `getCyclesEstimateForStridedReduce` (popops `reduction/CycleEstimationFunctions.cpp`): the
/// `StridedReduce` worker vertex reducing `partials` rows of a `columns`-wide block column by
/// column (a reduction over the rows of scoresᵀ, one output a query). Per worker vertex 5 cycles
/// of entry and exit and 11 of loop set-up; per outer loop, `elements` outputs at once (64 bits of
/// partials, as the stride allows), 3 cycles, the loop's completion and the result's store
/// (`cycleMap`) and the inner loop, 3 and a cycle per further partial. The outputs are dealt to
/// the workers in grains of 64 bits; the tile waits for the slowest, `workers` cycles each.
fn strided_reduce(t: &Target, partials: DType, op: Reduction, rows: u64, columns: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let grain = if partials == DType::F16 { 4 } else { 2 };
    let elements = gcd(grain, columns.max(1));
    let share = columns
        .div_ceil(grain)
        .div_ceil(workers)
        .saturating_mul(grain);
    // The store of a float result: half partials 6 for an add, 7 for a max, after one cycle of
    // completion; float partials 2 after 3 (an add) or 2.
    let post = match (partials, op) {
        (DType::F16, Reduction::Add) => 1 + 6,
        (DType::F16, Reduction::Max) => 1 + 7,
        (_, Reduction::Add) => 3 + 2,
        (_, Reduction::Max) => 2 + 2,
    };
    let outer = 3 + post + 3 + rows.saturating_sub(1);
    Codelet {
        fixed: workers * (5 + 11),
        work: workers.saturating_mul(share.div_ceil(elements).saturating_mul(outer)),
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `UnaryOp1DInPlace` EXPONENT over `n` elements of `dtype` (`unaryOpInPlacePerfInfo`: half 4
/// cycles per 4, float 6 per 2).
fn exponent(t: &Target, dtype: DType, n: u64) -> Codelet {
    let (p, width) = match dtype {
        DType::F16 => (PopopsUnary::Exponent.half(), t.vector_f16_lanes),
        _ => (info(6, false, 2), t.vector_f32_lanes),
    };
    unary_op(t, PopopsUnary::Exponent, p, width, n, true)
}

/// Tile cycles of one online-softmax step over `keys x queries` scoresᵀ, as the codelets Poplar
/// would chain: the block's maximum per query (`StridedReduce` MAX over the keys); unless it is
/// the first block, the running maximum merged and the old one's rescale factor (`BinaryOp1D`
/// MAXIMUM and SUBTRACT, `BroadcastScalar1D` MULTIPLY by the scale, `UnaryOp1DInPlace` EXPONENT,
/// over the queries' floats); then per score the scale, the maximum subtracted, the key bias and
/// the causal mask added (element-wise at the scores' type), the cast of float scores to half
/// (`Cast1D`; the exponent is taken of the half difference, as `numerics::softmax_block` computes),
/// the exponential (`UnaryOp1DInPlace` EXPONENT, half), the probabilities'
/// sum per query into floats (`StridedReduce` ADD) and, after the first block, the running sum
/// rescaled and added (two element-wise float steps over the queries).
pub fn softmax(t: &Target, v: &Softmax<Placed>) -> u64 {
    let (keys, queries) = (u64::from(v.keys), u64::from(v.queries));
    let n = keys.saturating_mul(queries);
    let scores = v.scores.dtype;
    let mut chain = Chain::default();
    chain.push(strided_reduce(t, scores, Reduction::Max, keys, queries));
    if !v.first {
        for _ in 0..3 {
            chain.elementwise(t, queries, DType::F32, false);
        }
        chain.push(exponent(t, DType::F32, queries));
    }
    let per_score = 2 + u64::from(v.key_bias.is_some()) + u64::from(v.mask.is_some());
    for _ in 0..per_score {
        chain.elementwise(t, n, scores, false);
    }
    if scores != DType::F16 {
        chain.push(cast_to_half(t, n));
    }
    chain.push(exponent(t, DType::F16, n));
    chain.push(strided_reduce(t, DType::F16, Reduction::Add, keys, queries));
    if !v.first {
        chain.elementwise(t, queries, DType::F32, false);
        chain.elementwise(t, queries, DType::F32, false);
    }
    chain.total()
}

/// Tile cycles of rescaling a flash accumulator (`rows x cols` floats) and adding a block's
/// partials: the accumulator multiplied by each query's factor and the partials added (two
/// element-wise float steps); the first block only copies float partials into the accumulator (a
/// `LongMemcpy` run a row) or casts half ones (`Cast1D`, half to float: one cycle per two).
pub fn accumulate(t: &Target, v: &Accumulate<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let n = rows.saturating_mul(cols);
    let workers = u64::from(t.workers.max(1));
    let mut chain = Chain::default();
    match (v.first, v.partials.dtype) {
        (true, DType::F16) => {
            let share = n.div_ceil(workers);
            chain.push(Codelet {
                fixed: 12 + workers * (18 + 19),
                work: workers.saturating_mul(share / 2 + 1 + 2 * (share % 2)),
            });
        }
        (true, _) => chain.push(copy_rows(t, rows, cols.saturating_mul(4))),
        (false, _) => {
            chain.elementwise(t, n, DType::F32, false);
            chain.elementwise(t, n, DType::F32, false);
        }
    }
    chain.total()
}

/// Tile cycles of merging `states` flash states into the half output (`rows` accumulator rows of
/// `cols` queries): per state its weight per query (its maximum's distance from the largest,
/// scaled and exponentiated, the weighted sum gathered: three element-wise float steps and an
/// `UnaryOp1DInPlace` EXPONENT over the queries), the sum's reciprocal (`UnaryOp1DInPlace` INVERSE,
/// float: 6 cycles per 2); then the first state weighted and each further one weighted and added
/// (element-wise float steps over the accumulators), the result scaled by the reciprocal, cast to
/// half (`Cast1D`) and, when the output is stored transposed, transposed.
pub fn combine(t: &Target, v: &Combine<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    let n = rows.saturating_mul(cols);
    let states = v.states.len() as u64;
    let mut chain = Chain::default();
    for _ in 0..states {
        for _ in 0..3 {
            chain.elementwise(t, cols, DType::F32, false);
        }
        chain.push(exponent(t, DType::F32, cols));
    }
    chain.push(unary_op(
        t,
        PopopsUnary::Inverse,
        info(6, false, 2),
        t.vector_f32_lanes,
        cols,
        true,
    ));
    chain.elementwise(t, n, DType::F32, false);
    for _ in 1..states {
        chain.elementwise(t, n, DType::F32, false);
        chain.elementwise(t, n, DType::F32, false);
    }
    chain.elementwise(t, n, DType::F32, false);
    chain.push(cast_to_half(t, n));
    if v.transpose {
        let workers = u64::from(t.workers.max(1));
        chain.push(Codelet {
            fixed: 7,
            work: transposes(workers, workers, rows.div_ceil(workers), cols).saturating_sub(7),
        });
    }
    chain.total()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::preset("mk2-1500").unwrap()
    }

    #[test]
    fn reduce_add_follows_poplins_estimate() {
        let t = target();
        // getReduceCycleEstimate(48, 12, 64, half out, float partials, 6 workers): 12 loops, two a
        // worker, each 3 cycles a part and 6: 6 · (32 + 2 · (36 + 6)).
        assert_eq!(reduce_add(&t, 48, 12, DType::F32).total(), 696);
        // 42 floats: 10 loops and one for the remainder's bit; 11 do not deal evenly and 42 is
        // no whole vectors, so a worker does one loop and the remainder's 2 · 12 + 13.
        assert_eq!(
            reduce_add(&t, 42, 12, DType::F32).total(),
            6 * (32 + 37 + 42)
        );
        // 64 halves in 3 parts: 8 loops, two a worker, each 3 · 3 + 8.
        assert_eq!(reduce_add(&t, 64, 3, DType::F16).total(), 6 * (32 + 2 * 17));
    }

    /// The device's cycles for a reduction's epilogue: `parts` parts of `partials` over
    /// `rows x cols`, a bias along the rows.
    fn reduction(rows: u32, cols: u32, parts: u32, partials: DType) -> u64 {
        let placed = |address| Placed {
            address,
            stride: 64,
            dtype: partials,
        };
        let v = Epilogue {
            partials: (0..parts).map(|p| placed(p * 4096)).collect(),
            bias: Some(placed(0)),
            bias_by_row: false,
            residual: None,
            out: placed(0),
            rows,
            cols,
            activation: None,
            transpose: false,
        };
        epilogue(&target(), &v)
    }

    #[test]
    fn many_small_parts_are_reduced_and_few_large_ones_added() {
        let t = target();
        // Twelve depth blocks' f32 partials over a small share: the reduction is the cheaper.
        let device = reduction(3, 16, 12, DType::F32);
        let added = (1..12).fold(Chain::default(), |mut c, _| {
            c.elementwise(&t, 48, DType::F32, true);
            c
        });
        assert!(device < added.total(), "{device} vs {}", added.total());
        // Two f16 parts over a large block: adding in place is the cheaper.
        let device = reduction(64, 128, 2, DType::F16);
        assert!(reduce_add(&t, 64 * 128, 2, DType::F16).total() > device);
    }
}
