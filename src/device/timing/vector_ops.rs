//! The device's timing of a general vector vertex (`isa::Vector`), from Graphcore's poplibs cycle
//! estimators for the codelets Poplar runs for the same work on one tile's contiguous f16 rows.
//! Every formula names its file and function in poplibs (`lib/popops/popopsCycleEstimators.cpp` and
//! `.hpp`, `lib/popops/PerformanceEstimation.cpp`, `lib/popnn/popnnCycleEstimators.cpp`,
//! `lib/popnn/PerformanceEstimation.hpp`, `lib/popops/reduction/CycleEstimationFunctions.cpp`,
//! `lib/popops/ElementWise.cpp`, `lib/popops/ElementWiseInternal.cpp`, `lib/popnn/NonLinearity.cpp`,
//! `lib/poputil/Util.cpp`); the figures carry over, the code is ours.
//!
//! Contract: [`vector_op`] is a function of the decoded vertex and the target's hardware parameters
//! only (`workers`, the f16 and f32 vector widths); it never calls the compiler's estimate
//! (`Target::vector_op_cycles`). Each codelet's estimate is split into its fixed part (supervisor
//! and per-worker entry overheads) and its work, so that a fused vertex (the softmax) can drop the
//! fixed parts of the codelets it fuses. A select is Poplar's ternary `select` (`Select`,
//! `BroadcastSelect` or `BroadcastSelectorSelect` by which operands are single values), whose worker
//! vertices share the elements as poputil splits regions; the comparisons are popops' binary
//! operators of the same names. Arithmetic saturates.

use crate::ir::{BinaryFn, ReduceFn, UnaryFn};
use crate::isa::{Placed, Spread, Vector, VectorFn};
use crate::numerics::dealt;
use crate::target::Target;

/// A codelet's tile cycles: its fixed overheads and its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Codelet {
    pub(super) fixed: u64,
    pub(super) work: u64,
}

impl Codelet {
    pub(super) fn total(self) -> u64 {
        self.fixed.saturating_add(self.work)
    }
}

/// `basicOpSupervisorOverhead` (popops `PerformanceEstimation.cpp`): 11 cycles.
pub(super) const SUPERVISOR: u64 = 11;

/// A row of poplibs' `OpPerformanceInfo` tables (popops `popopsCycleEstimators.hpp`): cycles per
/// loop, whether a loop is one natural vector, and otherwise the elements per loop (0: one).
#[derive(Clone, Copy)]
pub(super) struct PerfInfo {
    pub(super) cycles: u64,
    pub(super) natural: bool,
    pub(super) unroll: u64,
}

pub(super) const fn info(cycles: u64, natural: bool, unroll: u64) -> PerfInfo {
    PerfInfo {
        cycles,
        natural,
        unroll,
    }
}

/// The unary functions popops runs (`unaryOpPerfInfo`, HALF rows; INVERSE also FLOAT from
/// `unaryOpInPlacePerfInfo` for the softmax's sums): NEGATE, ABSOLUTE, SQRT, INVERSE, EXPONENT,
/// ERF, SQUARE, RSQRT, IS_NAN, IS_INF.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PopopsUnary {
    Negate,
    Absolute,
    Sqrt,
    Inverse,
    Exponent,
    Erf,
    Square,
    Rsqrt,
    IsNan,
    IsInf,
}

impl PopopsUnary {
    pub(super) fn half(self) -> PerfInfo {
        match self {
            PopopsUnary::Negate => info(2, false, 4),
            PopopsUnary::Absolute => info(1, false, 0),
            PopopsUnary::Sqrt => info(23, false, 4),
            PopopsUnary::Inverse => info(15, false, 4),
            PopopsUnary::Exponent => info(4, false, 4),
            PopopsUnary::Erf => info(13, false, 1),
            PopopsUnary::Square => info(2, false, 4),
            PopopsUnary::Rsqrt => info(19, false, 4),
            PopopsUnary::IsNan => info(3, true, 0),
            PopopsUnary::IsInf => info(5, true, 0),
        }
    }
}

/// popnn's non-linearities (`getNonLinearityOpCycles`, popnn `PerformanceEstimation.hpp`, half):
/// cycles of one op and of one op in the vector loop.
#[derive(Clone, Copy)]
pub(super) enum NonLinearity {
    Relu,
    Sigmoid,
    Tanh,
    Gelu,
    GeluErf,
}

impl NonLinearity {
    fn op_cycles(self, vector: bool) -> u64 {
        let twice = if vector { 2 } else { 1 };
        match self {
            NonLinearity::Relu => 1,
            NonLinearity::Sigmoid => 2 * twice,
            NonLinearity::Tanh => twice,
            NonLinearity::Gelu => 5,
            NonLinearity::GeluErf => 15,
        }
    }
}

/// `binaryOpPerfInfo` (HALF) for the binary functions; the comparisons are EQUAL, NOT_EQUAL,
/// LESS_THAN, LESS_THAN_EQUAL, GREATER_THAN and GREATER_THAN_EQUAL.
pub(super) fn binary_half(f: BinaryFn) -> PerfInfo {
    match f {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul => info(1, true, 0),
        BinaryFn::Div => info(21, false, 4),
        BinaryFn::Max | BinaryFn::Min => info(4, false, 4),
        BinaryFn::Pow => info(325, false, 1),
        BinaryFn::NotEqual => info(11, false, 4),
        BinaryFn::Equal
        | BinaryFn::Less
        | BinaryFn::LessEqual
        | BinaryFn::Greater
        | BinaryFn::GreaterEqual => info(9, false, 4),
    }
}

/// `broadcastOpPerfInfo` (HALF) for the binary functions.
fn broadcast_half(f: BinaryFn) -> PerfInfo {
    match f {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul => info(1, true, 0),
        BinaryFn::Div => info(8, false, 2),
        BinaryFn::Max | BinaryFn::Min => info(3, false, 4),
        BinaryFn::Pow => info(325, false, 1),
        BinaryFn::NotEqual => info(10, false, 4),
        BinaryFn::Equal
        | BinaryFn::Less
        | BinaryFn::LessEqual
        | BinaryFn::Greater
        | BinaryFn::GreaterEqual => info(8, false, 4),
    }
}

/// `hasExternalCodelet` (popops `popopsCycleEstimators.cpp`): add, subtract and multiply.
pub(super) fn external(f: BinaryFn) -> bool {
    matches!(f, BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul)
}

/// `basicOpLoopCycles` (popops `PerformanceEstimation.cpp`): `cycles · (n + width − 1) / width`.
pub(super) fn basic_loop(n: u64, width: u64, cycles: u64) -> u64 {
    cycles.saturating_mul(n.saturating_add(width - 1)) / width.max(1)
}

/// `unaryOpInnerLoopCycles` (popops `popopsCycleEstimators.cpp`).
fn unary_inner(p: PerfInfo, n: u64, width: u64) -> u64 {
    if !p.natural && p.unroll > 0 {
        return n.div_ceil(p.unroll).saturating_mul(p.cycles);
    }
    basic_loop(n, if p.natural { width } else { 1 }, p.cycles + 4)
}

/// `UnaryOp1D` (popops `popopsCycleEstimators.cpp`): per worker 17 cycles (33 for EXPONENT) and the
/// inner loop over its share, `ceil(n / workers)`; the supervisor's 9 and `basicOpSupervisorOverhead`.
/// `in_place`: `UnaryOp1DInPlace`, 55 per worker.
pub(super) fn unary_op(
    t: &Target,
    op: PopopsUnary,
    p: PerfInfo,
    width: u64,
    n: u64,
    in_place: bool,
) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let entry = match (in_place, op) {
        (true, _) => 55,
        (false, PopopsUnary::Exponent) => 33,
        (false, _) => 17,
    };
    Codelet {
        fixed: workers * entry + 9 + SUPERVISOR,
        work: workers.saturating_mul(unary_inner(p, n.div_ceil(workers), width)),
    }
}

/// `binaryOpInnerLoopCycles` (popops `popopsCycleEstimators.cpp`): natural-width loops take 2
/// cycles more for add, subtract and multiply (their external codelets), 5 for the rest.
pub(super) fn binary_inner(f: BinaryFn, p: PerfInfo, n: u64, width: u64) -> u64 {
    let (per_loop, cycles) = if p.natural {
        (width, p.cycles + if external(f) { 2 } else { 5 })
    } else {
        (p.unroll.max(1), p.cycles)
    };
    n.div_ceil(per_loop).saturating_mul(cycles)
}

/// `BinaryOp1D` (popops `popopsCycleEstimators.cpp`): per worker 26 cycles (half) and the inner
/// loop over `ceil(n / workers)`; `basicOpSupervisorOverhead`.
pub(super) fn binary_op(t: &Target, f: BinaryFn, n: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let inner = binary_inner(f, binary_half(f), n.div_ceil(workers), t.vector_f16_lanes);
    Codelet {
        fixed: workers * 26 + SUPERVISOR,
        work: workers.saturating_mul(inner),
    }
}

/// `broadcastArithmetic1DCycleEstimate` (popops `popopsCycleEstimators.cpp`, `BroadcastScalar1D`,
/// not in place): per worker 20 cycles and its loops over `ceil(n / workers)`, one natural vector
/// per loop at its cycles plus 1 (external codelets) or 4, else `unroll` elements per loop;
/// `basicOpSupervisorOverhead`.
pub(super) fn broadcast_scalar(t: &Target, f: BinaryFn, n: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let p = broadcast_half(f);
    let (per_loop, cycles) = if p.natural {
        (
            t.vector_f16_lanes,
            p.cycles + if external(f) { 1 } else { 4 },
        )
    } else {
        (p.unroll.max(1), p.cycles)
    };
    Codelet {
        fixed: workers * 20 + SUPERVISOR,
        work: workers.saturating_mul(
            n.div_ceil(workers)
                .div_ceil(per_loop)
                .saturating_mul(cycles),
        ),
    }
}

/// `BroadcastVectorOuterCycleEstimate` (popops `popopsCycleEstimators.cpp`), the vertex
/// `binaryOpBroadcastOuterVector` (popops `ElementWise.cpp`) picks for one value per row (add,
/// subtract, multiply): `ByRow1D` when a row is shorter than `workers · width` (a worker per row),
/// else `ByColumn1D` (the workers share each row); 7 outer-loop cycles, 25 when rows are not whole
/// vectors (`allowMisaligned`); an inner-loop overhead of 1; per worker 15 and the outer loops;
/// `basicOpSupervisorOverhead`. In place or not, the same (`getForceInterleavedEstimates` off).
pub(super) fn broadcast_outer(t: &Target, f: BinaryFn, rows: u64, cols: u64) -> Codelet {
    let (workers, width) = (u64::from(t.workers.max(1)), t.vector_f16_lanes.max(1));
    let p = broadcast_half(f);
    let by_row = cols < workers * width;
    let outer = if cols.is_multiple_of(width) { 7 } else { 25 };
    let elements = if by_row { cols } else { cols.div_ceil(workers) };
    let inner = if p.natural {
        basic_loop(elements, width, p.cycles + 1)
    } else {
        (p.cycles + 1).saturating_mul(elements)
    };
    let outer_loops = if by_row { rows.div_ceil(workers) } else { rows };
    Codelet {
        fixed: workers * 15 + SUPERVISOR,
        work: workers.saturating_mul(outer_loops.saturating_mul(outer + inner)),
    }
}

/// `nonLinearity1DCycleEstimator` (popnn `popnnCycleEstimators.cpp`, `NonLinearity1D`, half): the
/// supervisor's 9; per worker an overhead of 20, its share of whole vectors (two cycles to warm up,
/// an op, the vector loop, one and an op to drain), and the remainder's 32- and 16-bit tests and
/// ops.
pub(super) fn non_linearity(t: &Target, nl: NonLinearity, n: u64) -> Codelet {
    let (workers, width) = (u64::from(t.workers.max(1)), t.vector_f16_lanes.max(1));
    let (op, vector_op) = (nl.op_cycles(false), nl.op_cycles(true));
    let vectors = (n / width).div_ceil(workers);
    let remainder = n % width;
    let loop_cycles = if vectors > 0 {
        2 + op + (vectors - 1).saturating_mul(vector_op) + 1 + op
    } else {
        0
    };
    let tail = 2
        + 1
        + if remainder & 2 != 0 { 2 + op } else { 0 }
        + 1
        + if remainder & 1 != 0 { 3 + op } else { 0 };
    Codelet {
        fixed: 9 + workers * 20,
        work: workers.saturating_mul(loop_cycles + tail),
    }
}

/// `getCycleEstimateReduceAllRegionsContinuous` (popops `reduction/CycleEstimationFunctions.cpp`,
/// the `ContinuousReduce` worker vertex for rows reduced along their contiguous elements; add, max,
/// and the scaled add of a mean alike): per worker `cycles_per_op · outputs · (partials / 4)` (half:
/// the smaller of the accumulator width 8 and the 64-bit data path's 4), 2 for an odd row, 12 per
/// output, 10 and the call's 7. poplibs passes it `numOutputsM1`; this takes the worker's outputs.
/// The rows are dealt to the workers; the tile waits for the slowest, `workers` cycles each.
pub(super) fn continuous_reduce(t: &Target, rows: u32, cols: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let elements = t.vector_f16_lanes.max(1);
    let slowest = dealt(rows, t.workers).next().map_or(0, u64::from);
    let per_output = cols / elements + 12;
    Codelet {
        fixed: workers * (10 + 7),
        work: workers
            .saturating_mul(slowest.saturating_mul(per_output) + if cols & 1 == 1 { 2 } else { 0 }),
    }
}

/// The codelet Poplar runs for a unary function over `n` f16 elements: popnn's non-linearities for
/// sigmoid, relu, tanh and both GELUs; popops' `UnaryOp1D` otherwise; `pow` with a constant exponent
/// as `optimiseBinary` rewrites it (popops `ElementWiseInternal.cpp`: 0.5 a SQRT, −0.5 an RSQRT, −1
/// an INVERSE, 2 a SQUARE), any other exponent a `BroadcastScalar1D` POWER (an exponent of 1, a
/// copy Poplar elides, included).
fn unary(t: &Target, f: UnaryFn, n: u64) -> Codelet {
    let popops = |op: PopopsUnary| unary_op(t, op, op.half(), t.vector_f16_lanes, n, false);
    let popnn = |nl| non_linearity(t, nl, n);
    match f {
        UnaryFn::Neg => popops(PopopsUnary::Negate),
        UnaryFn::Abs => popops(PopopsUnary::Absolute),
        UnaryFn::Sqrt => popops(PopopsUnary::Sqrt),
        UnaryFn::Reciprocal => popops(PopopsUnary::Inverse),
        UnaryFn::Exp => popops(PopopsUnary::Exponent),
        UnaryFn::Erf => popops(PopopsUnary::Erf),
        UnaryFn::IsNan => popops(PopopsUnary::IsNan),
        UnaryFn::IsInf => popops(PopopsUnary::IsInf),
        UnaryFn::Sigmoid => popnn(NonLinearity::Sigmoid),
        UnaryFn::Relu => popnn(NonLinearity::Relu),
        UnaryFn::Tanh => popnn(NonLinearity::Tanh),
        UnaryFn::GeluTanh => popnn(NonLinearity::Gelu),
        UnaryFn::GeluErf => popnn(NonLinearity::GeluErf),
        UnaryFn::Pow { exponent } => match exponent {
            0.5 => popops(PopopsUnary::Sqrt),
            -0.5 => popops(PopopsUnary::Rsqrt),
            -1.0 => popops(PopopsUnary::Inverse),
            2.0 => popops(PopopsUnary::Square),
            _ => broadcast_scalar(t, BinaryFn::Pow, n),
        },
    }
}

/// The codelet Poplar runs for a binary function over `rows x cols`: a scalar operand (on the right,
/// or on either side of a commuting function: popops `ElementWise.cpp`, `isBinaryOpCommutative`,
/// equality among the comparisons) a `BroadcastScalar1D`; one value per row (likewise)
/// for add, subtract and multiply a `BroadcastVectorOuter` vertex; everything else, a row spread over
/// the rows included, a `BinaryOp1D` over the output's elements (poplibs' `BroadcastVectorInner`
/// vertices for a row, whose estimates follow the slice's alignment paths, are not modelled).
fn binary(t: &Target, f: BinaryFn, spreads: &[Spread], rows: u64, cols: u64) -> Codelet {
    let n = rows.saturating_mul(cols);
    let at = |i: usize| spreads.get(i).copied().unwrap_or(Spread::Whole);
    let (a, b) = (at(0), at(1));
    let other = |s: Spread| {
        if s == b { a } else { b }
    };
    let right_or_commuting = |s: Spread| b == s || (a == s && f.commutes());
    if right_or_commuting(Spread::OneValue) && other(Spread::OneValue) == Spread::Whole {
        broadcast_scalar(t, f, n)
    } else if right_or_commuting(Spread::OneColumn)
        && other(Spread::OneColumn) == Spread::Whole
        && external(f)
    {
        broadcast_outer(t, f, rows, cols)
    } else {
        binary_op(t, f, n)
    }
}

/// How `splitRegionsBetweenWorkers` (poputil `Util.cpp`, `splitRegionsAux`) shares one region of
/// `n` elements among the worker vertices of an element-wise ternary operation (popops
/// `ElementWise.cpp`, `ternaryOp`: grains of the half vector width, at least two grains a vertex,
/// at most one vertex a worker): each vertex's elements, in order.
fn split_regions(n: u64, grain: u64, workers: u64) -> Vec<u64> {
    let grain = grain.max(1);
    let grains = n.div_ceil(grain);
    if grains == 0 {
        return Vec::new();
    }
    let mut most = grains.div_ceil(workers.max(1));
    let vertices_at_least_two = (grains / 2).max(1);
    most = most.max(grains.div_ceil(vertices_at_least_two));
    let vertices = grains.div_ceil(most);
    (0..vertices)
        .map(|v| {
            let (first, end) = (v * grains / vertices, (v + 1) * grains / vertices);
            (end * grain).min(n) - first * grain
        })
        .collect()
}

/// The codelet Poplar's `select` runs over `rows x cols` (popops `ElementWise.cpp`, `ternaryOp`),
/// whose worker vertices share the elements as [`split_regions`] says; the tile waits for the
/// slowest vertex, `workers` cycles each (popops `popopsCycleEstimators.cpp`):
/// - `x` and `y` one value each, the condition not: `BroadcastSelect` (HALF), 9 + 1 a vertex and
///   per region 4 cycles an element and 23 (an odd count) or 30 (an even one, the pointer
///   possibly misaligned);
/// - the condition one value: `BroadcastSelectorSelect` (`BroadcastSelectorSelectCycles`, a
///   `LongMemcpy` of the chosen operand), 11 + 1 a vertex and per region 12 + 23, a cycle per 4
///   bytes and 5 per byte left over;
/// - otherwise every operand broadcast to the output: `Select`, 5 a vertex and per region
///   `selectCycles`: 6 and 5 cycles an element (`basicOpLoopCycles` over single elements: three
///   loads, a `movnz`, a store).
fn select(t: &Target, spreads: &[Spread], rows: u64, cols: u64) -> Codelet {
    let workers = u64::from(t.workers.max(1));
    let at = |i: usize| spreads.get(i).copied().unwrap_or(Spread::Whole);
    let (condition, x, y) = (at(0), at(1), at(2));
    let n = rows.saturating_mul(cols);
    let (fixed, per_region): (u64, fn(u64) -> u64) =
        if x == Spread::OneValue && y == Spread::OneValue && condition != Spread::OneValue {
            (9 + 1, |n| (if n & 1 == 1 { 23 } else { 30 }) + 4 * n)
        } else if condition == Spread::OneValue {
            (11 + 1, |n| {
                let bytes = 2 * n;
                12 + 23 + bytes / 4 + (bytes % 4) * 5
            })
        } else {
            (5, |n| 6 + basic_loop(n, 1, 5))
        };
    let slowest = split_regions(n, t.vector_f16_lanes, workers)
        .into_iter()
        .map(per_region)
        .max()
        .unwrap_or(0);
    Codelet {
        fixed: workers * fixed,
        work: workers.saturating_mul(slowest),
    }
}

/// popnn's stable softmax over `rows` rows of `cols` (`softmaxImpl`, popnn `NonLinearity.cpp`):
/// a max reduction, the subtraction of each row's max (`BroadcastVectorOuter`), the exponentials in
/// place (`UnaryOp1DInPlace` EXPONENT), an add reduction into f32, the sums' reciprocals in place
/// (`UnaryOp1DInPlace` INVERSE, f32) and the multiplication in place (`BroadcastVectorOuter`); the
/// cast of the reciprocals to half, `rows` elements, is left out. One fused vertex charges the sum
/// of the chain less what fusing removes: the fixed overheads of every codelet after the first
/// (the supervisor's `basicOpSupervisorOverhead` and launch, and each worker's entry: 15 per worker
/// for both `BroadcastVectorOuter`, 55 per worker and the supervisor's 9 for both
/// `UnaryOp1DInPlace`, the `ContinuousReduce` call's 10 + 7 per worker for the add).
fn softmax(t: &Target, rows: u32, cols: u64) -> u64 {
    let r = u64::from(rows);
    let n = r.saturating_mul(cols);
    let chain = [
        continuous_reduce(t, rows, cols),
        broadcast_outer(t, BinaryFn::Sub, r, cols),
        unary_op(
            t,
            PopopsUnary::Exponent,
            PopopsUnary::Exponent.half(),
            t.vector_f16_lanes,
            n,
            true,
        ),
        continuous_reduce(t, rows, cols),
        unary_op(
            t,
            PopopsUnary::Inverse,
            info(6, false, 2),
            t.vector_f32_lanes,
            r,
            true,
        ),
        broadcast_outer(t, BinaryFn::Mul, r, cols),
    ];
    chain[0]
        .fixed
        .saturating_add(chain.iter().fold(0u64, |s, c| s.saturating_add(c.work)))
}

/// Tile cycles of a general vector vertex as the device executes it (module docs).
pub fn vector_op(target: &Target, v: &Vector<Placed>) -> u64 {
    let (rows, cols) = (u64::from(v.rows), u64::from(v.cols));
    match v.function {
        VectorFn::Unary(f) => unary(target, f, rows.saturating_mul(cols)).total(),
        VectorFn::Binary(f) => binary(target, f, &v.spreads(), rows, cols).total(),
        VectorFn::Reduce(ReduceFn::Sum | ReduceFn::Mean | ReduceFn::Max) => {
            continuous_reduce(target, v.rows, cols).total()
        }
        VectorFn::Softmax => softmax(target, v.rows, cols),
        VectorFn::Select => select(target, &v.spreads(), rows, cols).total(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::DType;

    fn target() -> Target {
        Target::preset("mk2-1500").unwrap()
    }

    fn vertex(function: VectorFn, rows: u32, cols: u32, spreads: &[Spread]) -> Vector<Placed> {
        let p = Placed {
            address: 0,
            stride: 0,
            dtype: DType::F16,
        };
        Vector {
            function,
            operands: (spreads.iter().take(function.roles().len()))
                .map(|&s| (p, s))
                .collect(),
            out: p,
            rows,
            cols,
            transpose: false,
        }
    }

    #[test]
    fn poplibs_figures_by_hand() {
        let t = target();
        let whole = &[Spread::Whole; 3];
        // UnaryOp1D EXPONENT over 96 halves: 16 a worker, 4 loops of 4 cycles; 6 * (33 + 16) + 9 + 11.
        let exp = vertex(VectorFn::Unary(UnaryFn::Exp), 4, 24, whole);
        assert_eq!(vector_op(&t, &exp), 6 * (33 + 16) + 9 + 11);
        // BinaryOp1D ADD over 96 halves: 16 a worker, 4 loops of 1 + 2; 6 * (26 + 12) + 11.
        let add = vertex(VectorFn::Binary(BinaryFn::Add), 4, 24, whole);
        assert_eq!(vector_op(&t, &add), 6 * (26 + 12) + 11);
        // BroadcastScalar1D MULTIPLY: 4 loops of 1 + 1; 6 * (20 + 8) + 11.
        let scalar = vertex(
            VectorFn::Binary(BinaryFn::Mul),
            4,
            24,
            &[Spread::Whole, Spread::OneValue],
        );
        assert_eq!(vector_op(&t, &scalar), 6 * (20 + 8) + 11);
        // A scalar on the left of a subtraction is no broadcast codelet's: BinaryOp1D.
        let left = vertex(
            VectorFn::Binary(BinaryFn::Sub),
            4,
            24,
            &[Spread::OneValue, Spread::Whole],
        );
        assert_eq!(vector_op(&t, &left), 6 * (26 + 12) + 11);
        // ContinuousReduce over 12 rows of 64: 2 a worker, 2 * (16 + 12) + 17 each.
        let sum = vertex(VectorFn::Reduce(ReduceFn::Sum), 12, 64, whole);
        assert_eq!(vector_op(&t, &sum), 6 * (2 * 28 + 17));
        // NonLinearity1D RELU over 100 halves: 25 vectors, 5 a worker: 20 + (2 + 1 + 4 + 1 + 1) + 4.
        let relu = vertex(VectorFn::Unary(UnaryFn::Relu), 4, 25, whole);
        assert_eq!(vector_op(&t, &relu), 9 + 6 * (20 + 9 + 4));
    }

    #[test]
    fn comparisons_by_hand() {
        let t = target();
        let f = |g, spreads: &[Spread]| vector_op(&t, &vertex(VectorFn::Binary(g), 4, 24, spreads));
        let (whole, value) = (Spread::Whole, Spread::OneValue);
        // BinaryOp1D LESS_THAN over 96 halves: 16 a worker, 4 loops of 9; 6 * (26 + 36) + 11.
        assert_eq!(f(BinaryFn::Less, &[whole, whole]), 6 * (26 + 36) + 11);
        // NOT_EQUAL: loops of 11.
        assert_eq!(f(BinaryFn::NotEqual, &[whole, whole]), 6 * (26 + 44) + 11);
        // EQUAL commutes: a value on the left is a BroadcastScalar1D, 4 loops of 8.
        assert_eq!(f(BinaryFn::Equal, &[value, whole]), 6 * (20 + 32) + 11);
        // GREATER_THAN does not: BinaryOp1D.
        assert_eq!(f(BinaryFn::Greater, &[value, whole]), 6 * (26 + 36) + 11);
        assert_eq!(f(BinaryFn::Greater, &[whole, value]), 6 * (20 + 32) + 11);
        // UnaryOp1D IS_NAN: a natural vector a loop at 3 + 4 cycles, 7 · (16 + 3) / 4 = 33.
        let nan = vertex(VectorFn::Unary(UnaryFn::IsNan), 4, 24, &[whole]);
        assert_eq!(vector_op(&t, &nan), 6 * (17 + 33) + 9 + 11);
    }

    #[test]
    fn regions_split_between_workers_as_poputil_splits_them() {
        assert_eq!(split_regions(231, 4, 6), vec![36, 40, 40, 36, 40, 39]);
        assert_eq!(split_regions(2208, 4, 6), vec![368; 6]);
        // At least two grains a vertex.
        assert_eq!(split_regions(16, 4, 6), vec![8, 8]);
        assert_eq!(split_regions(9, 4, 6), vec![9]);
        assert_eq!(split_regions(0, 4, 6), Vec::<u64>::new());
    }

    #[test]
    fn selects_by_hand() {
        let t = target();
        let select = |rows, cols, spreads: &[Spread]| {
            vector_op(&t, &vertex(VectorFn::Select, rows, cols, spreads))
        };
        use Spread::{OneColumn, OneRow, OneValue, Whole};
        // Select over 2208 halves, 368 a worker: 5 + 6 + 5 · 368, six workers.
        assert_eq!(
            select(23, 96, &[Whole, Whole, Whole]),
            6 * (5 + 6 + 5 * 368)
        );
        // Spread operands are broadcast to the output first: the same codelet.
        assert_eq!(
            select(23, 96, &[OneColumn, OneRow, Whole]),
            6 * (5 + 6 + 5 * 368)
        );
        // BroadcastSelect of 231: the slowest vertex has 40 (even) elements: 10 + 30 + 4 · 40.
        assert_eq!(
            select(7, 33, &[Whole, OneValue, OneValue]),
            6 * (10 + 30 + 160)
        );
        // One vertex of 9 (odd) elements: 10 + 23 + 4 · 9.
        assert_eq!(
            select(1, 9, &[OneRow, OneValue, OneValue]),
            6 * (10 + 23 + 36)
        );
        // BroadcastSelectorSelect copies 368 halves a worker: 12 + 12 + 23 + 736 / 4.
        assert_eq!(
            select(23, 96, &[OneValue, Whole, Whole]),
            6 * (12 + 35 + 184)
        );
        // An odd count copies its last two bytes at 5 cycles each: 39 halves, 78 bytes.
        assert_eq!(
            select(7, 33, &[OneValue, OneRow, Whole]),
            6 * (12 + 35 + 19 + 10)
        );
    }

    #[test]
    fn a_fused_softmax_costs_less_than_its_chain_and_more_than_its_reductions() {
        let t = target();
        let whole = &[Spread::Whole; 3];
        let soft = vector_op(&t, &vertex(VectorFn::Softmax, 12, 64, whole));
        let max = vector_op(&t, &vertex(VectorFn::Reduce(ReduceFn::Max), 12, 64, whole));
        let one_per_row = &[Spread::Whole, Spread::OneColumn];
        let sub = vector_op(
            &t,
            &vertex(VectorFn::Binary(BinaryFn::Sub), 12, 64, one_per_row),
        );
        let exp = vector_op(&t, &vertex(VectorFn::Unary(UnaryFn::Exp), 12, 64, whole));
        let div = vector_op(
            &t,
            &vertex(VectorFn::Binary(BinaryFn::Mul), 12, 64, one_per_row),
        );
        assert!(soft > 2 * max, "{soft} against {max}");
        assert!(soft < 2 * max + sub + exp + div, "{soft}");
    }
}
