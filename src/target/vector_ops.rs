//! The compiler's estimate of a general vector vertex (`isa::Vector`): per codelet Poplar would run
//! for the work, a launch, a fixed cost per worker and a rate per loop over each worker's share of
//! the elements (or rows), in closed form (a select's workers each run a vertex of their own, so it
//! has no launch; a comparison is costed as the binary function it is); `device::timing` times the
//! same vertex from poplibs' estimators and `calibrate` holds the two within ±3 %.

use super::Target;
use crate::elements::{BinaryFn, UnaryFn};
use crate::isa::{Spread, VectorFn};

/// One codelet's cost: `launch + workers · (per_worker + loops · loop_cycles)`, `loops` the worker's
/// share of the elements in loops of `per_loop`.
#[derive(Clone, Copy)]
struct Rate {
    launch: u64,
    per_worker: u64,
    loop_cycles: u64,
    per_loop: u64,
}

impl Rate {
    fn cycles(self, workers: u64, share: u64) -> u64 {
        let loops = share.div_ceil(self.per_loop.max(1));
        self.launch + workers * (self.per_worker + loops * self.loop_cycles)
    }
}

const fn rate(launch: u64, per_worker: u64, loop_cycles: u64, per_loop: u64) -> Rate {
    Rate {
        launch,
        per_worker,
        loop_cycles,
        per_loop,
    }
}

/// A `pow` whose exponent is no special case: a broadcast scalar power, 325 cycles an element.
const POWER: Rate = rate(11, 20, 325, 1);

/// The rate of a unary function over halves: a popops unary codelet (20 cycles to launch, 17 a
/// worker, 33 for exp) or a popnn non-linearity (9 and 20, one vector of four a loop; the loop's
/// fill, drain and remainder tests, seven cycles and two ops, counted a worker); `pow` by exponent.
fn unary_rate(f: UnaryFn) -> Rate {
    match f {
        UnaryFn::Neg => rate(20, 17, 2, 4),
        UnaryFn::Abs => rate(20, 17, 5, 1),
        UnaryFn::Sqrt => rate(20, 17, 23, 4),
        UnaryFn::Reciprocal => rate(20, 17, 15, 4),
        UnaryFn::Exp => rate(20, 33, 4, 4),
        UnaryFn::Erf => rate(20, 17, 13, 1),
        UnaryFn::Relu => rate(9, 20 + 7 + 2, 1, 4),
        UnaryFn::Sigmoid => rate(9, 20 + 7 + 2 * 2, 4, 4),
        UnaryFn::Tanh => rate(9, 20 + 7 + 2, 2, 4),
        UnaryFn::GeluTanh => rate(9, 20 + 7 + 2 * 5, 5, 4),
        UnaryFn::GeluErf => rate(9, 20 + 7 + 2 * 15, 15, 4),
        UnaryFn::IsNan => rate(20, 17, 7, 4),
        UnaryFn::IsInf => rate(20, 17, 9, 4),
        UnaryFn::Pow { exponent } => match exponent {
            0.5 => unary_rate(UnaryFn::Sqrt),
            -0.5 => rate(20, 17, 19, 4),
            -1.0 => unary_rate(UnaryFn::Reciprocal),
            2.0 => rate(20, 17, 2, 4),
            _ => POWER,
        },
    }
}

/// Add, subtract and multiply, which have assembly codelets.
fn fast(f: BinaryFn) -> bool {
    matches!(f, BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul)
}

/// Element-wise binary over equal operands: 11 to launch, 26 a worker.
fn elementwise_rate(f: BinaryFn) -> Rate {
    match f {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul => rate(11, 26, 3, 4),
        BinaryFn::Div => rate(11, 26, 21, 4),
        BinaryFn::Max | BinaryFn::Min => rate(11, 26, 4, 4),
        BinaryFn::Pow => rate(11, 26, 325, 1),
        BinaryFn::NotEqual => rate(11, 26, 11, 4),
        BinaryFn::Equal
        | BinaryFn::Less
        | BinaryFn::LessEqual
        | BinaryFn::Greater
        | BinaryFn::GreaterEqual => rate(11, 26, 9, 4),
    }
}

/// Binary with a scalar: 11 to launch, 20 a worker.
fn scalar_rate(f: BinaryFn) -> Rate {
    match f {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul => rate(11, 20, 2, 4),
        BinaryFn::Div => rate(11, 20, 8, 2),
        BinaryFn::Max | BinaryFn::Min => rate(11, 20, 3, 4),
        BinaryFn::Pow => POWER,
        BinaryFn::NotEqual => rate(11, 20, 10, 4),
        BinaryFn::Equal
        | BinaryFn::Less
        | BinaryFn::LessEqual
        | BinaryFn::Greater
        | BinaryFn::GreaterEqual => rate(11, 20, 8, 4),
    }
}

/// A select of `n` elements, by its operands' spreads (condition, x, y): `x` and `y` one value each
/// (the condition not) broadcast into the output, 40 a worker and 4 cycles an element; the
/// condition one value, a copy of the chosen operand, 47 a worker (10 more when `n` is odd, as
/// some worker then copies an odd count) and a cycle per two elements; otherwise 11 a worker and 5
/// cycles an element. No launch: each worker runs a vertex of its own.
fn select_rate(spreads: &[Spread], n: u64) -> Rate {
    let at = |i: usize| spreads.get(i).copied().unwrap_or(Spread::Whole);
    let (condition, x, y) = (at(0), at(1), at(2));
    if x == Spread::OneValue && y == Spread::OneValue && condition != Spread::OneValue {
        rate(0, 40, 4, 1)
    } else if condition == Spread::OneValue {
        rate(0, 47 + 10 * (n % 2), 1, 2)
    } else {
        rate(0, 11, 5, 1)
    }
}

impl Target {
    /// The estimate of one general vector vertex over `rows x cols` (the input's row length for a
    /// reduction), its operands spread as `spreads` says, in order (module docs).
    pub fn vector_op_cycles(
        &self,
        function: VectorFn,
        rows: u32,
        cols: u32,
        spreads: &[Spread],
    ) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let (r, c) = (u64::from(rows), u64::from(cols));
        let n = r * c;
        let share = n.div_ceil(workers);
        match function {
            VectorFn::Unary(f) => unary_rate(f).cycles(workers, share),
            VectorFn::Binary(f) => self.binary_cycles(f, spreads, r, c),
            VectorFn::Select => {
                // Each worker's share in whole vectors.
                let lanes = self.vector_f16_lanes.max(1);
                select_rate(spreads, n).cycles(workers, share.next_multiple_of(lanes).min(n))
            }
            VectorFn::Reduce(_) => self.row_reduction(rows, cols) + workers * 17,
            VectorFn::Softmax => {
                // Max and sum reductions, the max subtracted and the sum's reciprocal multiplied
                // per row, the exponentials, and the sums' reciprocals in f32 (two a loop).
                let per_row = 2 * self.outer_broadcast(r, c, 1) - 2 * (11 + 15 * workers);
                2 * self.row_reduction(rows, cols)
                    + workers * 17
                    + per_row
                    + workers * share.div_ceil(4) * 4
                    + workers * r.div_ceil(workers).div_ceil(2) * 6
            }
        }
    }

    /// A binary function's codelet: a scalar broadcast, a broadcast of one value per row (add,
    /// subtract, multiply), or element-wise; a non-commuting function's left operand is never
    /// the broadcast one.
    fn binary_cycles(&self, f: BinaryFn, spreads: &[Spread], r: u64, c: u64) -> u64 {
        let at = |i: usize| spreads.get(i).copied().unwrap_or(Spread::Whole);
        let (a, b) = (at(0), at(1));
        let workers = u64::from(self.workers.max(1));
        let broadcast = |s: Spread| {
            (b == s && a == Spread::Whole) || (f.commutes() && a == s && b == Spread::Whole)
        };
        if broadcast(Spread::OneValue) {
            scalar_rate(f).cycles(workers, (r * c).div_ceil(workers))
        } else if broadcast(Spread::OneColumn) && fast(f) {
            self.outer_broadcast(r, c, 1)
        } else {
            elementwise_rate(f).cycles(workers, (r * c).div_ceil(workers))
        }
    }

    /// Adding, subtracting or multiplying one value per row (`loop_cycles` and one per vector of four):
    /// a worker per row when rows are shorter than the workers' vectors together, else the workers
    /// sharing each row; 7 cycles a row (25 when rows are not whole vectors), 15 a worker, 11.
    fn outer_broadcast(&self, r: u64, c: u64, loop_cycles: u64) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let width = self.vector_f16_lanes.max(1);
        let per_row = if c.is_multiple_of(width) { 7 } else { 25 };
        let (rows, elements) = if c < workers * width {
            (r.div_ceil(workers), c)
        } else {
            (r, c.div_ceil(workers))
        };
        // A row's vectors in a pipelined loop: a partial vector's share of its cycles counted.
        let vectors = (loop_cycles + 1) * (elements + width - 1) / width;
        11 + workers * (15 + rows * (per_row + vectors))
    }

    /// A row reduction's loops: rows dealt to the workers, each row four elements a cycle and 12,
    /// an odd row 2 more; without the worker's fixed 17.
    fn row_reduction(&self, rows: u32, cols: u32) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let c = u64::from(cols);
        let slowest = u64::from(rows).div_ceil(workers);
        workers * (slowest * (c / self.vector_f16_lanes.max(1) + 12) + 2 * (c % 2))
    }
}
