//! Data movement of computed tensors (Transpose, Reshape, Slice, Expand, Squeeze, Unsqueeze, Flatten,
//! Gather with constant indices, Concat), lowered lazily: a [`Sym::View`] holds, for each element, the
//! element of its sources it is (evaluated by [`super::eval`] on element indices, so every operator
//! has ONNX's own semantics), and chains of movements compose for free. When an operation reads the
//! view, [`Ctx::materialize`] emits one `Assemble`, its pieces found by [`pieces`].
//!
//! Sources are graph values laid end to end: an index is an offset into that concatenation. A
//! constant moved with a computed tensor (a class token concatenated to patches) becomes an f16
//! weight among the sources.

use super::opgraph::Node;
use super::patterns::{Ctx, Sym};
use super::tensor::{Data, Tensor};
use crate::ids::ValueId;
use crate::ir::{DType, OpKind, Piece, Strided, ValueRole};
use std::rc::Rc;

impl Ctx {
    /// `s` as sources and indices: a value is itself, in order.
    pub(super) fn as_view(&mut self, s: &Sym) -> Result<(Vec<ValueId>, Rc<Tensor>), String> {
        match s {
            Sym::View { sources, index } => Ok((sources.clone(), index.clone())),
            Sym::Heads { id, base, perm } => {
                let p: Vec<i64> = perm.iter().map(|&a| a as i64).collect();
                Ok((
                    vec![*id],
                    Rc::new(super::eval::transpose(&iota(base, 0), &p)?),
                ))
            }
            Sym::Const(n, t) if t.is_float() => {
                let rows: usize = t.shape.iter().rev().skip(1).product();
                let cols = t.shape.last().copied().unwrap_or(1);
                let w = self.weight(
                    n,
                    &t.reshaped(vec![rows, cols]),
                    &t.shape.clone(),
                    DType::F16,
                    1,
                )?;
                Ok((vec![w], iota(&t.shape, 0)))
            }
            other => {
                let (id, shape) = self.materialize(other)?;
                Ok((vec![id], iota(&shape, 0)))
            }
        }
    }

    /// A movement operator on a computed tensor (input 0; the others constant).
    pub(super) fn movement(&mut self, node: &Node, ins: &[Option<Sym>]) -> Result<Sym, String> {
        let x = ins
            .first()
            .and_then(Option::as_ref)
            .ok_or("input 0 is missing")?;
        let (sources, index) = self.as_view(x)?;
        let mut consts: Vec<Option<&Tensor>> = vec![Some(index.as_ref())];
        for s in &ins[1..] {
            match s {
                Some(Sym::Const(_, t)) => consts.push(Some(t.as_ref())),
                None => consts.push(None),
                Some(other) => {
                    return Err(format!(
                        "{}'s operands besides its data must be constant, not {}",
                        node.op,
                        other.what()
                    ));
                }
            }
        }
        let attrs = match node.op.as_str() {
            "Transpose" if node.attrs.ints("perm").is_none() => {
                let rank = index.shape.len() as i64;
                node.attrs
                    .clone()
                    .with_ints("perm", (0..rank).rev().collect())
            }
            _ => node.attrs.clone(),
        };
        let moved = super::eval::eval(&node.op, &consts, &attrs, self.opset)?;
        let index = Rc::new(moved.into_iter().next().ok_or("no output")?);
        Ok(Sym::View { sources, index })
    }

    /// Concat of tensors any of which is computed.
    pub(super) fn concat(&mut self, node: &Node, ins: &[Option<Sym>]) -> Result<Sym, String> {
        let mut sources = Vec::new();
        let mut parts = Vec::new();
        for s in ins.iter().flatten() {
            let (src, index) = self.as_view(s)?;
            let base: usize = sources.iter().map(|&v| self.elements(v)).sum();
            let shifted: Vec<i64> = index.ints().iter().map(|&i| i + base as i64).collect();
            parts.push(Tensor {
                shape: index.shape.clone(),
                data: Data::I64(shifted),
            });
            sources.extend(src);
        }
        let refs: Vec<Option<&Tensor>> = parts.iter().map(Some).collect();
        let index = super::eval::eval("Concat", &refs, &node.attrs, self.opset)?.remove(0);
        Ok(Sym::View {
            sources,
            index: Rc::new(index),
        })
    }

    fn elements(&self, v: ValueId) -> usize {
        let v = &self.values[v.index()];
        v.rows as usize * v.cols as usize
    }

    /// A view as a value: one `Assemble` of its pieces.
    pub(super) fn assemble(
        &mut self,
        name: &str,
        tensor: &str,
        sources: &[ValueId],
        index: &Tensor,
    ) -> Result<(ValueId, Vec<usize>), String> {
        let shape = index.shape.clone();
        let sizes: Vec<usize> = sources.iter().map(|&v| self.elements(v)).collect();
        let (rows, cols) = match shape.split_last() {
            Some((&c, lead)) => (lead.iter().product::<usize>(), c),
            None => (1, 1),
        };
        let found = pieces(&index.ints(), rows, cols, &sizes)?;
        let pieces = found
            .into_iter()
            .map(|p| Piece {
                x: sources[p.source],
                shape: p.shape,
                from: Strided {
                    offset: p.from.0,
                    strides: p.from.1,
                },
                to: Strided {
                    offset: p.to.0,
                    strides: p.to.1,
                },
            })
            .collect();
        let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
        self.op(name, OpKind::Assemble { pieces }, out);
        Ok((out, shape))
    }
}

/// Each element of `shape` its own index, from `base`.
pub(super) fn iota(shape: &[usize], base: i64) -> Rc<Tensor> {
    let n: usize = shape.iter().product();
    Rc::new(Tensor {
        shape: shape.to_vec(),
        data: Data::I64((base..base + n as i64).collect()),
    })
}

/// One piece found: `shape` (up to 3-D), the source, and `(offset, strides)` on either side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub source: usize,
    pub shape: Vec<u32>,
    pub from: (u64, Vec<i64>),
    pub to: (u64, Vec<i64>),
}

/// A run within one output row: `count` segments of `len` elements, each a strided run of one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    source: usize,
    start: i64,
    stride: i64,
    len: usize,
    count: usize,
    step: i64,
    col: usize,
}

/// The pieces that move the elements `index` names (offsets into sources of `sizes` laid end to end)
/// into an output of `rows × cols`: per row, strided segments, merged into runs of equal segments
/// whose starts progress evenly, merged down rows whose runs match and progress evenly.
pub fn pieces(
    index: &[i64],
    rows: usize,
    cols: usize,
    sizes: &[usize],
) -> Result<Vec<Found>, String> {
    if index.len() != rows * cols {
        return Err(format!(
            "{} indices for {rows}x{cols} elements",
            index.len()
        ));
    }
    let locate = |g: i64| -> Result<(usize, i64), String> {
        let mut base = 0i64;
        for (s, &n) in sizes.iter().enumerate() {
            if g >= base && g < base + n as i64 {
                return Ok((s, g - base));
            }
            base += n as i64;
        }
        Err(format!("index {g} names no source element"))
    };
    let located: Vec<(usize, i64)> = index.iter().map(|&g| locate(g)).collect::<Result<_, _>>()?;
    // Runs, row by row.
    let mut runs: Vec<Vec<Run>> = Vec::with_capacity(rows);
    for r in 0..rows {
        let row = &located[r * cols..(r + 1) * cols];
        let mut segments = Vec::new();
        let mut c = 0;
        while c < cols {
            let (src, start) = row[c];
            let stride = if c + 1 < cols && row[c + 1].0 == src {
                row[c + 1].1 - start
            } else {
                1
            };
            let mut len = 1;
            while c + len < cols
                && row[c + len].0 == src
                && row[c + len].1 - row[c + len - 1].1 == stride
            {
                len += 1;
            }
            segments.push(Run {
                source: src,
                start,
                stride,
                len,
                count: 1,
                step: 0,
                col: c,
            });
            c += len;
        }
        let mut merged: Vec<Run> = Vec::new();
        for s in segments {
            if let Some(last) = merged.last_mut() {
                let next_start = last.start + last.step * last.count as i64;
                let same = last.source == s.source && last.len == s.len && last.stride == s.stride;
                if same && (last.count == 1 || s.start == next_start) {
                    if last.count == 1 {
                        last.step = s.start - last.start;
                    }
                    last.count += 1;
                    continue;
                }
            }
            merged.push(s);
        }
        runs.push(merged);
    }
    // Down the rows.
    let mut out = Vec::new();
    let mut used: Vec<Vec<bool>> = runs.iter().map(|r| vec![false; r.len()]).collect();
    for r in 0..rows {
        for j in 0..runs[r].len() {
            if used[r][j] {
                continue;
            }
            let first = runs[r][j];
            let mut height = 1;
            let mut row_step = 0i64;
            while r + height < rows {
                let Some(k) = runs[r + height].iter().position(|x| x.col == first.col) else {
                    break;
                };
                let next = runs[r + height][k];
                let same = !used[r + height][k]
                    && next.source == first.source
                    && next.len == first.len
                    && next.count == first.count
                    && next.stride == first.stride
                    && next.step == first.step;
                let d = next.start - first.start;
                if !same || (height > 1 && d != row_step * height as i64) {
                    break;
                }
                if height == 1 {
                    row_step = d;
                }
                used[r + height][k] = true;
                height += 1;
            }
            used[r][j] = true;
            let start =
                u64::try_from(first.start).map_err(|_| "a negative source index".to_string())?;
            out.push(Found {
                source: first.source,
                shape: vec![height as u32, first.count as u32, first.len as u32],
                from: (start, vec![row_step, first.step, first.stride]),
                to: (
                    (r * cols + first.col) as u64,
                    vec![cols as i64, first.len as i64, 1],
                ),
            });
        }
    }
    Ok(out)
}

impl Ctx {
    /// MatMul of a computed tensor by a constant that is not one `[k, n]` weight, with numpy's rules:
    /// a 1-D operand is a row (or a column) dropped from the result, and batch dimensions broadcast.
    /// Each batch is a matmul of its rows by its own weight, the results concatenated.
    pub(super) fn batched_matmul(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        n: &str,
        w: &Tensor,
    ) -> Result<Sym, String> {
        let (xs, ws) = (x.shape(), w.shape.clone());
        // A 0-d result (two 1-D operands) is one element of shape [1]: values have a dimension.
        let out_shape = Some(super::infer::matmul(&xs, &ws)?)
            .filter(|s| !s.is_empty())
            .unwrap_or(vec![1]);
        let x2 = if xs.len() == 1 {
            vec![1, xs[0]]
        } else {
            xs.clone()
        };
        let w2 = if ws.len() == 1 {
            vec![ws[0], 1]
        } else {
            ws.clone()
        };
        let (m, k, cols) = (x2[x2.len() - 2], x2[x2.len() - 1], w2[w2.len() - 1]);
        let batch = super::tensor::broadcast(&x2[..x2.len() - 2], &w2[..w2.len() - 2])?;
        let count: usize = batch.iter().product();
        let (sources, index) = self.as_view(x)?;
        let mut full = batch.clone();
        full.extend([m, k]);
        let xi = index.reshaped(x2.clone()).expand(&full)?;
        let mut wfull = batch.clone();
        wfull.extend([k, cols]);
        let wb = w.reshaped(w2.clone()).expand(&wfull)?;
        let (xv, wv) = (xi.ints(), wb.floats());
        let mut outputs = Vec::with_capacity(count);
        for b in 0..count {
            let rows = Tensor {
                shape: vec![m, k],
                data: Data::I64(xv[b * m * k..(b + 1) * m * k].to_vec()),
            };
            let part = Sym::View {
                sources: sources.clone(),
                index: Rc::new(rows),
            };
            let (a, _) = self.materialize(&part)?;
            let weight = Tensor {
                shape: vec![k, cols],
                data: Data::F32(wv[b * k * cols..(b + 1) * k * cols].to_vec()),
            };
            let wid = self.weight(
                &format!("{n}[{b}]"),
                &weight,
                &[k, cols],
                DType::F16,
                k as u32,
            )?;
            let out = self.value(
                &format!("{tensor}[{b}]"),
                &[m, cols],
                DType::F16,
                ValueRole::Intermediate,
                0,
            )?;
            self.op(&format!("{name}[{b}]"), OpKind::MatMul { a, b: wid }, out);
            outputs.push(out);
        }
        let each = m * cols;
        let index = Tensor {
            shape: out_shape,
            data: Data::I64((0..(count * each) as i64).collect()),
        };
        Ok(Sym::View {
            sources: outputs,
            index: Rc::new(index),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `pieces` and returns the output: each element's global source index.
    fn apply(found: &[Found], rows: usize, cols: usize, sizes: &[usize]) -> Vec<i64> {
        let mut out = vec![-1i64; rows * cols];
        for p in found {
            let base: usize = sizes[..p.source].iter().sum();
            let [a, b, c] = [p.shape[0], p.shape[1], p.shape[2]].map(|d| d as i64);
            for i in 0..a {
                for j in 0..b {
                    for k in 0..c {
                        let from =
                            p.from.0 as i64 + i * p.from.1[0] + j * p.from.1[1] + k * p.from.1[2];
                        let to = p.to.0 as i64 + i * p.to.1[0] + j * p.to.1[1] + k * p.to.1[2];
                        assert_eq!(out[to as usize], -1, "written twice");
                        out[to as usize] = base as i64 + from;
                    }
                }
            }
        }
        out
    }

    fn check(index: Tensor, sizes: &[usize], most: usize) {
        let (rows, cols) = (
            index.shape[..index.shape.len() - 1]
                .iter()
                .product::<usize>(),
            *index.shape.last().unwrap(),
        );
        let found = pieces(&index.ints(), rows, cols, sizes).unwrap();
        assert_eq!(apply(&found, rows, cols, sizes), index.ints());
        assert!(found.len() <= most, "{} pieces: {found:?}", found.len());
    }

    #[test]
    fn transposes_slices_concats_and_patches_are_few_pieces() {
        use crate::onnx::eval::{eval, transpose};
        let a = crate::onnx::tensor::Attrs::default();
        // A 2-D transpose is one piece; a head transpose one a (batch, head).
        check(transpose(&iota(&[6, 8], 0), &[1, 0]).unwrap(), &[48], 1);
        check(
            transpose(&iota(&[2, 5, 3, 4], 0), &[0, 2, 1, 3]).unwrap(),
            &[120],
            6,
        );
        // Two sources concatenated along rows and along columns.
        let (x, y) = (iota(&[2, 3], 0), iota(&[2, 3], 6));
        let rows = eval(
            "Concat",
            &[Some(&x), Some(&y)],
            &a.clone().with_int("axis", 0),
            17,
        )
        .unwrap()
        .remove(0);
        check(rows, &[6, 6], 2);
        let cols = eval(
            "Concat",
            &[Some(&x), Some(&y)],
            &a.clone().with_int("axis", 1),
            17,
        )
        .unwrap()
        .remove(0);
        check(cols, &[6, 6], 2);
        // An expanded row, a slice with step 2.
        check(iota(&[1, 5], 0).expand(&[4, 5]).unwrap(), &[5], 1);
        let s = crate::onnx::eval::slice(
            &iota(&[4, 10], 0),
            &[1],
            &[10],
            Some(vec![1]),
            Some(vec![2]),
        )
        .unwrap();
        check(s, &[40], 1);
        // Patches of a [1, 3, 8, 8] image, kernel 4: per channel and patch row, one piece.
        let r = iota(&[1, 3, 8, 8], 0).reshaped(vec![1, 3, 2, 4, 2, 4]);
        let t = transpose(&r, &[0, 2, 4, 1, 3, 5])
            .unwrap()
            .reshaped(vec![4, 48]);
        check(t, &[192], 6);
        assert!(pieces(&[0, 7], 1, 2, &[4]).is_err());
    }
}
