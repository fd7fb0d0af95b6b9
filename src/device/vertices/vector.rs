//! The semantics of the general vector vertex (`isa::Vector`): its operands loaded as f16, each
//! spread over the `rows x cols` output as its `Spread` says, the function computed in f32
//! ([`crate::numerics::unary_f32`] and siblings; a reduction and a softmax row by row in column
//! order), each result rounded once to f16 and stored (transposed when asked). A binary function
//! takes `b`, no other does; only a binary function's `a` may be spread. Timed by
//! `timing::vector_op`.

use super::super::memory::{Matrix, TileMemory};
use super::super::timing;
use super::{expect, stored_form};
use crate::ir::DType;
use crate::isa::{Placed, Spread, Vector, VectorFn};
use crate::numerics::{binary_f32, reduce_row_f32, round_to, softmax_row_f32, unary_f32};
use crate::target::Target;

/// Executes a vector vertex; returns its cycles.
pub(super) fn vector(
    target: &Target,
    memory: &mut TileMemory,
    v: &Vector<Placed>,
    step: u32,
) -> Result<u64, String> {
    let (rows, cols) = (v.rows, v.cols);
    let binary = matches!(v.function, VectorFn::Binary(_));
    if binary != v.b.is_some() || (!binary && v.a_spread != Spread::Whole) {
        return Err(format!(
            "vector {}: operand b {} and a spread {}, which the function does not take",
            v.function.name(),
            if v.b.is_some() { "given" } else { "missing" },
            v.a_spread.name()
        ));
    }
    let load = |o: &Placed, spread: Spread, what: &str| {
        let (r, c) = spread.extent(rows, cols);
        memory.load(
            &Matrix {
                addr: expect(o, DType::F16, what)?,
                stride: o.stride,
                rows: r,
                cols: c,
                dtype: DType::F16,
            },
            what,
        )
    };
    let a = load(&v.a, v.a_spread, "vector operand a")?;
    let b = match &v.b {
        Some(b) => Some(load(b, v.b_spread, "vector operand b")?),
        None => None,
    };
    let (r, c) = (rows as usize, cols as usize);
    let half = |x: f32| round_to(DType::F16, x);
    let result: Vec<f32> = match v.function {
        VectorFn::Unary(f) => a.iter().map(|&x| half(unary_f32(f, x))).collect(),
        VectorFn::Binary(f) => {
            let b = b.unwrap_or_default();
            (0..r * c)
                .map(|i| {
                    let (row, col) = (i / c.max(1), i % c.max(1));
                    let x = a[v.a_spread.index(row, col, c)];
                    let y = b[v.b_spread.index(row, col, c)];
                    half(binary_f32(f, x, y))
                })
                .collect()
        }
        VectorFn::Reduce(f) => a
            .chunks(c.max(1))
            .take(r)
            .map(|row| half(reduce_row_f32(f, row)))
            .collect(),
        VectorFn::Softmax => a
            .chunks(c.max(1))
            .take(r)
            .flat_map(softmax_row_f32)
            .map(half)
            .collect(),
    };
    let (out_rows, out_cols) = v.out_shape();
    let (stored, result) = stored_form(out_rows, out_cols, result, v.transpose);
    memory.store(
        &Matrix {
            addr: expect(&v.out, DType::F16, "vector output")?,
            stride: v.out.stride,
            rows: stored.0,
            cols: stored.1,
            dtype: DType::F16,
        },
        &result,
        step,
        "vector output",
    )?;
    Ok(timing::vector_op(target, v))
}
