//! The semantics of the general vector vertex (`isa::Vector`): its operands loaded as f16, each
//! spread over the `rows x cols` output as its `Spread` says, the function computed in f32
//! ([`crate::numerics::unary_f32`] and siblings; a reduction and a softmax row by row in column
//! order; a select moves `x`'s or `y`'s f16 as it is), each result rounded once to f16 and stored (transposed when asked). A function takes as
//! many operands as `VectorFn::roles` names; only a function of several operands may spread them.
//! Timed by `timing::vector_op`.

use super::super::memory::{Matrix, TileMemory};
use super::super::timing;
use super::{expect, stored_form};
use crate::ir::DType;
use crate::isa::{Placed, Spread, Vector, VectorFn};
use crate::numerics::{binary_f32, reduce_row_f32, round_to, select, softmax_row_f32, unary_f32};
use crate::target::Target;

/// Executes a vector vertex; returns its cycles.
pub(super) fn vector(
    target: &Target,
    memory: &mut TileMemory,
    v: &Vector<Placed>,
    step: u32,
) -> Result<u64, String> {
    let (rows, cols) = (v.rows, v.cols);
    let roles = v.function.roles();
    let spread_whole = v.operands.iter().all(|&(_, s)| s == Spread::Whole);
    if v.operands.len() != roles.len() || !(v.function.spreads() || spread_whole) {
        let spreads: Vec<&str> = v.operands.iter().map(|(_, s)| s.name()).collect();
        return Err(format!(
            "vector {}: {} operand(s) spread as [{}]; the function takes {} ({}){}",
            v.function.name(),
            v.operands.len(),
            spreads.join(", "),
            roles.len(),
            roles.join(", "),
            if v.function.spreads() { "" } else { ", whole" }
        ));
    }
    let mut loaded = Vec::with_capacity(v.operands.len());
    for ((o, spread), role) in v.operands.iter().zip(roles) {
        let what = format!("vector operand {role}");
        let (r, c) = spread.extent(rows, cols);
        let matrix = Matrix {
            addr: expect(o, DType::F16, &what)?,
            stride: o.stride,
            rows: r,
            cols: c,
            dtype: DType::F16,
        };
        loaded.push((memory.load(&matrix, &what)?, *spread));
    }
    let (r, c) = (rows as usize, cols as usize);
    let half = |x: f32| round_to(DType::F16, x);
    // Operand `k`'s element for output element `i`.
    let at = |k: usize, i: usize| {
        let (data, spread): &(Vec<f32>, Spread) = &loaded[k];
        data[spread.index(i / c.max(1), i % c.max(1), c)]
    };
    let x = &loaded[0].0;
    let result: Vec<f32> = match v.function {
        VectorFn::Unary(f) => x.iter().map(|&x| half(unary_f32(f, x))).collect(),
        VectorFn::Binary(f) => (0..r * c)
            .map(|i| half(binary_f32(f, at(0, i), at(1, i))))
            .collect(),
        VectorFn::Select => (0..r * c)
            .map(|i| select(at(0, i), at(1, i), at(2, i)))
            .collect(),
        VectorFn::Reduce(f) => x
            .chunks(c.max(1))
            .take(r)
            .map(|row| half(reduce_row_f32(f, row)))
            .collect(),
        VectorFn::Softmax => x
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
