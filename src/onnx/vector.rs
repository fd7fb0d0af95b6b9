//! Op-by-op lowering of what no pattern fuses onto the graph's general vector operations: element-wise
//! unary operators (and `Pow` by a constant), binary operators and select with ONNX broadcasting,
//! reductions and Softmax over the last axis. Fusion (a bias, GELU or residual into a matmul's
//! epilogue) stays the business of the patterns and of `lower_mid`; this is the way in for everything
//! else ([`super::logic`] lowers comparisons, logic, `Where` and `Cast` onto these).
//!
//! A value is `[rows, cols]`: its ONNX shape's leading dimensions flattened into rows and its last
//! dimension as columns. An operand broadcasts in that view when it is the whole `[rows, cols]`, one row
//! `[1, cols]`, one column `[rows, 1]` or one value `[1, 1]`; one that broadcasts otherwise (over a
//! batch, say) is expanded to the output's shape: a constant when it becomes a weight, a computed
//! tensor as a view assembled once ([`super::movement`]). A predicate's result (`is_nan`, `is_inf`,
//! a comparison) is a boolean value.

use super::patterns::{Ctx, Sym};
use super::tensor::{self, Tensor};
use crate::ids::ValueId;
use crate::ir::{BinaryFn, DType, OpKind, ReduceFn, UnaryFn, ValueRole};

/// How an operand of ONNX shape `t` sits in an output of ONNX shape `out`, as `[rows, cols]`: `None`
/// when it is none of whole, row, column or value.
fn view(t: &[usize], out: &[usize]) -> Option<(usize, usize)> {
    let (rows, cols) = flat(out);
    let rank = out.len();
    let padded: Vec<usize> = std::iter::repeat_n(1, rank.saturating_sub(t.len()))
        .chain(t.iter().copied())
        .collect();
    if padded.len() != rank {
        return None;
    }
    let last = padded.last().copied().unwrap_or(1);
    let lead = &padded[..rank.saturating_sub(1)];
    let lead_whole = lead == &out[..rank.saturating_sub(1)];
    let lead_one = lead.iter().all(|&d| d == 1);
    let r = if lead_whole {
        rows
    } else if lead_one {
        1
    } else {
        return None;
    };
    let c = if last == cols {
        cols
    } else if last == 1 {
        1
    } else {
        return None;
    };
    Some((r, c))
}

/// `[rows, cols]` of an ONNX shape.
fn flat(shape: &[usize]) -> (usize, usize) {
    match shape.split_last() {
        Some((&last, lead)) => (lead.iter().product(), last),
        None => (1, 1),
    }
}

impl Ctx {
    /// `out = f(x)` element by element.
    pub(super) fn unary(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        function: UnaryFn,
    ) -> Result<Sym, String> {
        let (x, shape) = self.materialize(x)?;
        let dtype = match function {
            UnaryFn::IsNan | UnaryFn::IsInf => DType::Bool,
            _ => DType::F16,
        };
        let out = self.value(tensor, &shape, dtype, ValueRole::Intermediate, 0)?;
        self.op(name, OpKind::Unary { x, function }, out);
        Ok(Sym::Value { id: out, shape })
    }

    /// An operand of an element-wise operation as a value: computed values as they are when they sit
    /// in the output as whole, row, column or value (else expanded to the output's shape by an
    /// assembled view), constants as f16 weights of the same view (or expanded likewise).
    fn operand(&mut self, s: &Sym, out: &[usize]) -> Result<ValueId, String> {
        match s {
            Sym::Const(n, t) => {
                // A constant keeps its name unless it is expanded to the output's shape.
                let (t, name) = if view(&t.shape, out).is_some() {
                    (t.as_ref().clone(), n.clone())
                } else {
                    (t.expand(out)?, format!("{n}/expanded"))
                };
                let (r, c) = view(&t.shape, out)
                    .ok_or_else(|| format!("constant `{n}` does not broadcast to {out:?}"))?;
                // The user binds it by its own (or expanded) ONNX shape, whose flattened view it is.
                let shape = if flat(&t.shape) == (r, c) {
                    t.shape.clone()
                } else {
                    vec![r, c]
                };
                let t = Tensor {
                    shape: vec![r, c],
                    data: tensor::Data::F32(t.floats()),
                };
                self.weight(&name, &t, &shape, DType::F16, 1)
            }
            other => {
                if view(&other.shape(), out).is_none() {
                    let (sources, index) = self.as_view(other)?;
                    let index = std::rc::Rc::new(index.expand(out)?);
                    return self.operand(&Sym::View { sources, index }, out);
                }
                let (id, shape) = self.materialize(other)?;
                let v = &self.values[id.index()];
                let (r, c) = view(&shape, out).ok_or("unreachable: the view was checked")?;
                if (v.rows as usize, v.cols as usize) != flat(&shape) || (r, c) == (0, 0) {
                    return Err(format!(
                        "the operand `{}` is not stored as {shape:?}",
                        v.name
                    ));
                }
                Ok(id)
            }
        }
    }

    /// `out = f(a, b)` with ONNX broadcasting; a comparison's result is boolean.
    pub(super) fn binary(
        &mut self,
        name: &str,
        tensor: &str,
        a: &Sym,
        b: &Sym,
        function: BinaryFn,
    ) -> Result<Sym, String> {
        let dtype = if function.compares() {
            DType::Bool
        } else {
            DType::F16
        };
        self.elementwise(name, tensor, &[a, b], dtype, |v| OpKind::Binary {
            a: v[0],
            b: v[1],
            function,
        })
    }

    /// An element-wise operation `kind` makes of its `operands`' values, with ONNX broadcasting, its
    /// result of `dtype`.
    pub(super) fn elementwise(
        &mut self,
        name: &str,
        tensor: &str,
        operands: &[&Sym],
        dtype: DType,
        kind: impl FnOnce(&[ValueId]) -> OpKind,
    ) -> Result<Sym, String> {
        if operands.iter().all(|s| matches!(s, Sym::Const(..))) {
            return Err(
                "an element-wise operation of constants folds; this one did not".to_string(),
            );
        }
        let mut shape = Vec::new();
        for s in operands {
            shape = tensor::broadcast(&shape, &s.shape())?;
        }
        let values = (operands.iter())
            .map(|s| self.operand(s, &shape))
            .collect::<Result<Vec<_>, _>>()?;
        let out = self.value(tensor, &shape, dtype, ValueRole::Intermediate, 0)?;
        self.op(name, kind(&values), out);
        Ok(Sym::Value { id: out, shape })
    }

    /// `ReduceSum`, `ReduceMean` or `ReduceMax` over the last axis.
    pub(super) fn reduce(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        axes: &[i64],
        keep: bool,
        function: ReduceFn,
    ) -> Result<Sym, String> {
        let (x, shape) = self.materialize(x)?;
        let rank = shape.len();
        let last = axes.len() == 1 && tensor::axis(axes[0], rank)? + 1 == rank;
        if !last {
            return Err(format!(
                "a reduction over axes {axes:?} of {shape:?}: only the last axis lowers (transpose the axis last first)"
            ));
        }
        let (rows, _) = flat(&shape);
        let mut out_shape = shape.clone();
        if keep {
            *out_shape.last_mut().expect("rank ≥ 1") = 1;
        } else {
            out_shape.pop();
        }
        let out = self.value_2d(tensor, rows, 1, &out_shape)?;
        self.op(name, OpKind::Reduce { x, function }, out);
        Ok(Sym::Value {
            id: out,
            shape: if keep { out_shape } else { vec![rows, 1] },
        })
    }

    /// Softmax over the last axis.
    pub(super) fn softmax(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        axis: i64,
    ) -> Result<Sym, String> {
        let (x, shape) = self.materialize(x)?;
        if tensor::axis(axis, shape.len())? + 1 != shape.len() {
            return Err(format!(
                "Softmax over axis {axis} of {shape:?}: only the last axis lowers"
            ));
        }
        let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
        self.op(name, OpKind::Softmax { x }, out);
        Ok(Sym::Value { id: out, shape })
    }
}

#[cfg(test)]
mod tests {
    use super::view;

    #[test]
    fn operands_sit_in_the_output_as_whole_row_column_or_value() {
        let out = [2, 3, 4];
        assert_eq!(view(&[2, 3, 4], &out), Some((6, 4)));
        assert_eq!(view(&[4], &out), Some((1, 4)));
        assert_eq!(view(&[1, 1, 4], &out), Some((1, 4)));
        assert_eq!(view(&[2, 3, 1], &out), Some((6, 1)));
        assert_eq!(view(&[], &out), Some((1, 1)));
        assert_eq!(view(&[3, 4], &out), None, "broadcast over the batch only");
        assert_eq!(view(&[2, 1, 4], &out), None);
    }
}
