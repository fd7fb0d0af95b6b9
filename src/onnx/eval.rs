//! The constant evaluator: ONNX operators on constant inputs, with ONNX's own semantics (numpy
//! broadcasting, negative axes, Reshape's `0` and `-1`, Slice's clamping). It folds the shape and index
//! arithmetic an export leaves in the graph once the input shapes are fixed (Shape, Gather, Range,
//! Concat, Unsqueeze, Squeeze, Reshape, Expand, Slice, Cast, ConstantOfShape, comparisons, And/Or/Not,
//! Where, Max/Min, IsNaN, Trilu, …), weight transforms (Transpose, MatMul of constants, Resize of
//! position embeddings) and weight-only dequantisation (DequantizeLinear, Cast of int8).
//!
//! Input: an operator's name, its constant inputs in node order (`None` for an omitted optional
//! input), its attributes and the opset. Output: its outputs, or a message saying what was wrong (the
//! caller adds the node). No operator allocates more than [`MAX_ELEMENTS`] elements.

use super::proto::data_type;
use super::tensor::{
    Attrs, Data, MAX_ELEMENTS, Tensor, axis, broadcast, broadcast_sources, elements, reshape,
    unsqueeze,
};

/// Whether [`eval`] evaluates `op` when all its inputs are constant.
pub fn foldable(op: &str) -> bool {
    const OPS: &[&str] = &[
        "Identity",
        "GatherND",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Mod",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "Not",
        "Max",
        "Min",
        "Sqrt",
        "Neg",
        "Abs",
        "Reciprocal",
        "Exp",
        "Log",
        "Erf",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Floor",
        "Ceil",
        "IsNaN",
        "IsInf",
        "Cast",
        "CastLike",
        "Shape",
        "Size",
        "ConstantOfShape",
        "Unsqueeze",
        "Squeeze",
        "Reshape",
        "Flatten",
        "Expand",
        "Where",
        "Gather",
        "Concat",
        "Slice",
        "Range",
        "Transpose",
        "Split",
        "Trilu",
        "DequantizeLinear",
        "MatMul",
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "Tile",
        "CumSum",
        "Resize",
    ];
    OPS.contains(&op)
}

fn ints_shape(t: &Tensor) -> Result<Vec<usize>, String> {
    t.ints()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect()
}

fn map_floats(t: &Tensor, f: impl Fn(f64) -> f64) -> Tensor {
    Tensor {
        shape: t.shape.clone(),
        data: Data::F32(t.floats().iter().map(|&x| f(f64::from(x)) as f32).collect()),
    }
}

fn bools(shape: Vec<usize>, v: impl Iterator<Item = bool>) -> Tensor {
    Tensor {
        shape,
        data: Data::I64(v.map(i64::from).collect()),
    }
}

/// Element-wise `f` (floats) or `i` (integers) with numpy broadcasting; float when either side is.
fn binary(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f64, f64) -> f64,
    i: impl Fn(i64, i64) -> Option<i64>,
) -> Result<Tensor, String> {
    let out = broadcast(&a.shape, &b.shape)?;
    let (sa, sb) = (
        broadcast_sources(&a.shape, &out)?,
        broadcast_sources(&b.shape, &out)?,
    );
    let data = match (&a.data, &b.data) {
        (Data::I64(x), Data::I64(y)) => Data::I64(
            sa.iter()
                .zip(&sb)
                .map(|(&p, &q)| i(x[p], y[q]).ok_or("integer overflow or division by zero"))
                .collect::<Result<_, _>>()?,
        ),
        _ => {
            let (x, y) = (a.floats(), b.floats());
            Data::F32(
                sa.iter()
                    .zip(&sb)
                    .map(|(&p, &q)| f(f64::from(x[p]), f64::from(y[q])) as f32)
                    .collect(),
            )
        }
    };
    Ok(Tensor { shape: out, data })
}

/// A comparison or logical operator with broadcasting, giving bools.
fn compare(a: &Tensor, b: &Tensor, f: impl Fn(f64, f64) -> bool) -> Result<Tensor, String> {
    let t = binary(
        a,
        b,
        |x, y| f64::from(u8::from(f(x, y))),
        |x, y| Some(i64::from(f(x as f64, y as f64))),
    )?;
    Ok(Tensor {
        data: Data::I64(t.ints()),
        ..t
    })
}

/// Evaluates one node whose inputs are all constant.
pub fn eval(
    op: &str,
    inputs: &[Option<&Tensor>],
    attrs: &Attrs,
    opset: i64,
) -> Result<Vec<Tensor>, String> {
    let input = |i: usize| -> Result<&Tensor, String> {
        inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| format!("input {i} is missing"))
    };
    let optional = |i: usize| inputs.get(i).copied().flatten();
    // Axes from the attribute (before opset 13 or 18, by operator) or the second input.
    let axes_of = |i: usize| -> Option<Vec<i64>> {
        optional(i).map(Tensor::ints).or_else(|| attrs.ints("axes"))
    };
    let one = |t: Tensor| Ok(vec![t]);
    match op {
        "Identity" => one(input(0)?.clone()),
        "Add" => one(binary(
            input(0)?,
            input(1)?,
            |a, b| a + b,
            i64::checked_add,
        )?),
        "Sub" => one(binary(
            input(0)?,
            input(1)?,
            |a, b| a - b,
            i64::checked_sub,
        )?),
        "Mul" => one(binary(
            input(0)?,
            input(1)?,
            |a, b| a * b,
            i64::checked_mul,
        )?),
        "Div" => one(binary(
            input(0)?,
            input(1)?,
            |a, b| a / b,
            i64::checked_div,
        )?),
        "Mod" => one(binary(
            input(0)?,
            input(1)?,
            |a, b| {
                if attrs.i("fmod") == Some(1) {
                    a % b
                } else {
                    a - b * (a / b).floor()
                }
            },
            |a, b| {
                a.checked_rem_euclid(b)
                    .map(|r| if b < 0 && r != 0 { r + b } else { r })
            },
        )?),
        "Pow" => one(binary(input(0)?, input(1)?, f64::powf, |a, b| {
            u32::try_from(b).ok().and_then(|b| a.checked_pow(b))
        })?),
        "Max" | "Min" => {
            let max = op == "Max";
            let mut acc = input(0)?.clone();
            for t in inputs[1..].iter().flatten() {
                acc = binary(
                    &acc,
                    t,
                    |a, b| if (a > b) == max || a.is_nan() { a } else { b },
                    |a, b| Some(if max { a.max(b) } else { a.min(b) }),
                )?;
            }
            one(acc)
        }
        "Equal" => one(compare(input(0)?, input(1)?, |a, b| a == b)?),
        "Less" => one(compare(input(0)?, input(1)?, |a, b| a < b)?),
        "Greater" => one(compare(input(0)?, input(1)?, |a, b| a > b)?),
        "LessOrEqual" => one(compare(input(0)?, input(1)?, |a, b| a <= b)?),
        "GreaterOrEqual" => one(compare(input(0)?, input(1)?, |a, b| a >= b)?),
        "And" => one(compare(input(0)?, input(1)?, |a, b| a != 0.0 && b != 0.0)?),
        "Or" => one(compare(input(0)?, input(1)?, |a, b| a != 0.0 || b != 0.0)?),
        "Xor" => one(compare(input(0)?, input(1)?, |a, b| {
            (a != 0.0) != (b != 0.0)
        })?),
        "Not" => {
            let t = input(0)?;
            one(bools(t.shape.clone(), t.ints().into_iter().map(|x| x == 0)))
        }
        "IsNaN" => {
            let t = input(0)?;
            one(bools(
                t.shape.clone(),
                t.floats().into_iter().map(f32::is_nan),
            ))
        }
        "IsInf" => {
            let t = input(0)?;
            let (pos, neg) = (
                attrs.i("detect_positive").unwrap_or(1) != 0,
                attrs.i("detect_negative").unwrap_or(1) != 0,
            );
            one(bools(
                t.shape.clone(),
                t.floats()
                    .into_iter()
                    .map(|x| x.is_infinite() && ((x > 0.0 && pos) || (x < 0.0 && neg))),
            ))
        }
        "Neg" => {
            let t = input(0)?;
            one(match &t.data {
                Data::I64(v) => Tensor {
                    shape: t.shape.clone(),
                    data: Data::I64(v.iter().map(|x| x.wrapping_neg()).collect()),
                },
                Data::F32(_) => map_floats(t, |x| -x),
            })
        }
        "Abs" => {
            let t = input(0)?;
            one(match &t.data {
                Data::I64(v) => Tensor {
                    shape: t.shape.clone(),
                    data: Data::I64(v.iter().map(|x| x.wrapping_abs()).collect()),
                },
                Data::F32(_) => map_floats(t, f64::abs),
            })
        }
        "Sqrt" => one(map_floats(input(0)?, f64::sqrt)),
        "Reciprocal" => one(map_floats(input(0)?, |x| 1.0 / x)),
        "Exp" => one(map_floats(input(0)?, f64::exp)),
        "Log" => one(map_floats(input(0)?, f64::ln)),
        "Erf" => one(map_floats(input(0)?, libm::erf)),
        "Tanh" => one(map_floats(input(0)?, f64::tanh)),
        "Sigmoid" => one(map_floats(input(0)?, |x| 1.0 / (1.0 + (-x).exp()))),
        "Relu" => one(map_floats(input(0)?, |x| x.max(0.0))),
        "Floor" => one(map_floats(input(0)?, f64::floor)),
        "Ceil" => one(map_floats(input(0)?, f64::ceil)),
        "Cast" | "CastLike" => {
            let t = input(0)?;
            let to = if op == "CastLike" {
                if input(1)?.is_float() {
                    data_type::FLOAT
                } else {
                    data_type::INT64
                }
            } else {
                attrs.i("to").unwrap_or(i64::from(data_type::FLOAT)) as i32
            };
            one(cast(t, to)?)
        }
        "Shape" => {
            let t = input(0)?;
            one(super::tensor::shape_tensor(&shape_slice(&t.shape, attrs)))
        }
        "Size" => one(Tensor {
            shape: Vec::new(),
            data: Data::I64(vec![input(0)?.len() as i64]),
        }),
        "ConstantOfShape" => {
            let shape = ints_shape(input(0)?)?;
            let n = elements(&shape)?;
            let value = match attrs.t("value") {
                Some(v) if v.len() == 1 => v.clone(),
                Some(_) => return Err("value must hold one element".to_string()),
                None => Tensor::scalar_f32(0.0),
            };
            one(value.pick(shape, &vec![0; n]))
        }
        "Unsqueeze" => {
            let t = input(0)?;
            let axes = axes_of(1).ok_or("Unsqueeze needs its axes")?;
            one(t.reshaped(unsqueeze(&t.shape, &axes)?))
        }
        "Squeeze" => {
            let t = input(0)?;
            one(t.reshaped(squeeze(&t.shape, &axes_of(1).unwrap_or_default())?))
        }
        "Reshape" => {
            let t = input(0)?;
            let shape = reshape(&t.shape, &input(1)?.ints(), attrs.i("allowzero") == Some(1))?;
            one(t.reshaped(shape))
        }
        "Flatten" => {
            let t = input(0)?;
            one(t.reshaped(flatten(&t.shape, attrs.i("axis").unwrap_or(1))?))
        }
        "Expand" => {
            let shape = ints_shape(input(1)?)?;
            one(input(0)?.expand(&shape)?)
        }
        "Where" => {
            let (c, x, y) = (input(0)?, input(1)?, input(2)?);
            let out = broadcast(&broadcast(&c.shape, &x.shape)?, &y.shape)?;
            let (c, x, y) = (c.expand(&out)?, x.expand(&out)?, y.expand(&out)?);
            let pick = c.ints();
            let data = match (&x.data, &y.data) {
                (Data::I64(a), Data::I64(b)) => Data::I64(
                    pick.iter()
                        .enumerate()
                        .map(|(i, &p)| if p != 0 { a[i] } else { b[i] })
                        .collect(),
                ),
                _ => {
                    let (a, b) = (x.floats(), y.floats());
                    Data::F32(
                        pick.iter()
                            .enumerate()
                            .map(|(i, &p)| if p != 0 { a[i] } else { b[i] })
                            .collect(),
                    )
                }
            };
            one(Tensor { shape: out, data })
        }
        "Gather" => one(gather(input(0)?, input(1)?, attrs.i("axis").unwrap_or(0))?),
        "GatherND" => one(gather_nd(
            input(0)?,
            input(1)?,
            attrs.i("batch_dims").unwrap_or(0),
        )?),
        "Concat" => one(concat(
            &inputs
                .iter()
                .map(|t| t.ok_or("input missing"))
                .collect::<Result<Vec<_>, _>>()?,
            attrs.i("axis").ok_or("attribute axis is missing")?,
        )?),
        "Slice" => {
            let ints = |i: usize| Ok(optional(i).map(Tensor::ints));
            let (starts, ends, axes, steps) = slice_args(opset, attrs, ints)?;
            one(slice(input(0)?, &starts, &ends, axes, steps)?)
        }
        "Range" => {
            let (start, limit, delta) = (input(0)?, input(1)?, input(2)?);
            let (s, l, d) = (
                start.scalar().ok_or("start is not a scalar")?,
                limit.scalar().ok_or("limit is not a scalar")?,
                delta.scalar().ok_or("delta is not a scalar")?,
            );
            let n = ((f64::from(l) - f64::from(s)) / f64::from(d))
                .ceil()
                .max(0.0);
            if !(n.is_finite() && (n as usize) <= MAX_ELEMENTS) {
                return Err("range is too long".to_string());
            }
            let values = (0..n as usize).map(|i| f64::from(s) + f64::from(d) * i as f64);
            one(Tensor {
                shape: vec![n as usize],
                data: if start.is_float() {
                    Data::F32(values.map(|x| x as f32).collect())
                } else {
                    Data::I64(values.map(|x| x as i64).collect())
                },
            })
        }
        "Transpose" => {
            let t = input(0)?;
            let rank = t.shape.len();
            let perm = attrs
                .ints("perm")
                .unwrap_or_else(|| (0..rank as i64).rev().collect());
            one(transpose(t, &perm)?)
        }
        "Split" => split(input(0)?, optional(1), attrs, opset),
        "Trilu" => {
            let t = input(0)?;
            let k = optional(1).and_then(Tensor::scalar).map_or(0, |k| k as i64);
            let upper = attrs.i("upper").unwrap_or(1) != 0;
            let rank = t.shape.len();
            if rank < 2 {
                return Err("Trilu needs a rank of at least 2".to_string());
            }
            let (rows, cols) = (t.shape[rank - 2], t.shape[rank - 1]);
            let keep: Vec<bool> = (0..t.len())
                .map(|i| {
                    let (r, c) = (((i / cols) % rows) as i64, (i % cols) as i64);
                    if upper { c - r >= k } else { c - r <= k }
                })
                .collect();
            let data = match &t.data {
                Data::F32(v) => Data::F32(
                    v.iter()
                        .zip(&keep)
                        .map(|(&x, &k)| if k { x } else { 0.0 })
                        .collect(),
                ),
                Data::I64(v) => Data::I64(
                    v.iter()
                        .zip(&keep)
                        .map(|(&x, &k)| if k { x } else { 0 })
                        .collect(),
                ),
            };
            one(Tensor {
                shape: t.shape.clone(),
                data,
            })
        }
        "DequantizeLinear" => one(dequantize(input(0)?, input(1)?, optional(2), attrs)?),
        "MatMul" => one(matmul(input(0)?, input(1)?)?),
        "Resize" if opset < 11 => one(resize(input(0)?, optional(1), None, attrs)?),
        "Resize" => one(resize(input(0)?, optional(2), optional(3), attrs)?),
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
            // Axes: an attribute, or from opset 13 (ReduceSum) and 18 (the others) an input.
            let axes = axes_of(1).unwrap_or_default();
            let noop = attrs.i("noop_with_empty_axes").unwrap_or(0) != 0;
            if axes.is_empty() && noop {
                return one(input(0)?.clone());
            }
            one(reduce(
                op,
                input(0)?,
                &axes,
                attrs.i("keepdims").unwrap_or(1) != 0,
            )?)
        }
        "Tile" => {
            let t = input(0)?;
            let reps = input(1)?.ints();
            if reps.len() != t.shape.len() || reps.iter().any(|&r| r < 0) {
                return Err(format!(
                    "Tile repeats {reps:?} do not fit rank {}",
                    t.shape.len()
                ));
            }
            let mut out = t.clone();
            for (a, &r) in reps.iter().enumerate() {
                let parts = vec![&out; r as usize];
                out = if parts.is_empty() {
                    let mut shape = out.shape.clone();
                    shape[a] = 0;
                    Tensor {
                        shape,
                        data: Data::F32(Vec::new()),
                    }
                } else {
                    concat(&parts, a as i64)?
                };
            }
            one(out)
        }
        "CumSum" => {
            let t = input(0)?;
            let a = axis(
                input(1)?.scalar().ok_or("CumSum's axis is not a scalar")? as i64,
                t.shape.len(),
            )?;
            let (exclusive, reverse) = (
                attrs.i("exclusive") == Some(1),
                attrs.i("reverse") == Some(1),
            );
            let (n, inner) = (t.shape[a], t.shape[a + 1..].iter().product::<usize>());
            let mut v: Vec<f64> = t.floats().iter().map(|&x| f64::from(x)).collect();
            let src = v.clone();
            for (i, out) in v.iter_mut().enumerate() {
                let (pos, base) = ((i / inner) % n, i - ((i / inner) % n) * inner);
                let range: Vec<usize> = if reverse {
                    (pos..n).collect()
                } else {
                    (0..=pos).collect()
                };
                *out = range
                    .into_iter()
                    .filter(|&j| !(exclusive && j == pos))
                    .map(|j| src[base + j * inner])
                    .sum();
            }
            one(Tensor {
                shape: t.shape.clone(),
                data: if t.is_float() {
                    Data::F32(v.iter().map(|&x| x as f32).collect())
                } else {
                    Data::I64(v.iter().map(|&x| x as i64).collect())
                },
            })
        }
        other => Err(format!("operator {other} cannot be evaluated on constants")),
    }
}

/// Slice's starts, ends, axes and steps: attributes before opset 10, inputs 1 to 4 (read by `input`)
/// from it.
#[allow(clippy::type_complexity)]
pub fn slice_args(
    opset: i64,
    attrs: &Attrs,
    input: impl Fn(usize) -> Result<Option<Vec<i64>>, String>,
) -> Result<(Vec<i64>, Vec<i64>, Option<Vec<i64>>, Option<Vec<i64>>), String> {
    if opset < 10 {
        return Ok((
            attrs.ints("starts").ok_or("Slice needs starts")?,
            attrs.ints("ends").ok_or("Slice needs ends")?,
            attrs.ints("axes"),
            None,
        ));
    }
    Ok((
        input(1)?.ok_or("Slice needs starts")?,
        input(2)?.ok_or("Slice needs ends")?,
        input(3)?,
        input(4)?,
    ))
}

/// `Shape`'s `start` and `end` attributes applied to `shape`.
pub fn shape_slice(shape: &[usize], attrs: &Attrs) -> Vec<usize> {
    let rank = shape.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (start, end) = (
        clamp(attrs.i("start").unwrap_or(0)),
        clamp(attrs.i("end").unwrap_or(rank)),
    );
    shape
        .get(start..end.max(start))
        .unwrap_or_default()
        .to_vec()
}

/// Squeeze: `axes` (of the input) dropped, or every unit dimension when `axes` is empty.
pub fn squeeze(shape: &[usize], axes: &[i64]) -> Result<Vec<usize>, String> {
    let drop = axes
        .iter()
        .map(|&a| axis(a, shape.len()))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(&a) = drop.iter().find(|&&a| shape[a] != 1) {
        return Err(format!("Squeeze of axis {a} of {shape:?}, which is not 1"));
    }
    Ok((0..shape.len())
        .filter(|i| !(drop.contains(i) || drop.is_empty() && shape[*i] == 1))
        .map(|i| shape[i])
        .collect())
}

/// Flatten at `axis`: `[∏ shape[..axis], ∏ shape[axis..]]`.
pub fn flatten(shape: &[usize], axis_attr: i64) -> Result<Vec<usize>, String> {
    let rank = shape.len();
    let a = if axis_attr < 0 {
        axis_attr + rank as i64
    } else {
        axis_attr
    };
    if !(0..=rank as i64).contains(&a) {
        return Err(format!(
            "Flatten axis {axis_attr} is out of range for rank {rank}"
        ));
    }
    let a = a as usize;
    Ok(vec![
        shape[..a].iter().product(),
        shape[a..].iter().product(),
    ])
}

/// `perm` checked as a permutation of `rank` axes.
pub fn permutation(perm: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let p: Vec<usize> = perm
        .iter()
        .map(|&a| usize::try_from(a).ok().filter(|&a| a < rank))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("perm {perm:?} is not a permutation of {rank} axes"))?;
    let mut seen = vec![false; rank];
    if p.len() != rank || p.iter().any(|&a| std::mem::replace(&mut seen[a], true)) {
        return Err(format!("perm {perm:?} is not a permutation of {rank} axes"));
    }
    Ok(p)
}

pub fn transpose(t: &Tensor, perm: &[i64]) -> Result<Tensor, String> {
    let rank = t.shape.len();
    let p = permutation(perm, rank)?;
    let shape: Vec<usize> = p.iter().map(|&a| t.shape[a]).collect();
    let n = elements(&shape)?;
    let mut strides = vec![1usize; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * t.shape[a + 1];
    }
    let mut src = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    for _ in 0..n {
        src.push(idx.iter().zip(&p).map(|(&i, &a)| i * strides[a]).sum());
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(t.pick(shape, &src))
}

/// The sizes Split cuts axis `a` of `dim` into: `split` (an input from opset 13, else an attribute),
/// or `parts` equal parts (`num_outputs` from opset 18), the last smaller.
pub fn split_sizes(
    dim: usize,
    split: Option<Vec<i64>>,
    parts: usize,
) -> Result<Vec<usize>, String> {
    match split {
        Some(s) => {
            let sizes: Vec<usize> = s
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("negative split {d}")))
                .collect::<Result<_, _>>()?;
            if sizes.iter().sum::<usize>() != dim {
                return Err(format!("split {s:?} does not add up to {dim}"));
            }
            Ok(sizes)
        }
        None if parts > 0 => {
            let each = dim.div_ceil(parts);
            Ok((0..parts)
                .map(|i| each.min(dim.saturating_sub(i * each)))
                .collect())
        }
        None => Err("Split needs its sizes or its number of outputs".to_string()),
    }
}

fn split(
    t: &Tensor,
    sizes: Option<&Tensor>,
    attrs: &Attrs,
    opset: i64,
) -> Result<Vec<Tensor>, String> {
    let a = axis(attrs.i("axis").unwrap_or(0), t.shape.len())?;
    let given = if opset >= 13 {
        sizes.map(Tensor::ints)
    } else {
        attrs.ints("split")
    };
    let parts = attrs.i("num_outputs").map_or(0, |n| n.max(0) as usize);
    let sizes = split_sizes(t.shape[a], given, parts)?;
    let mut start = 0i64;
    sizes
        .iter()
        .map(|&s| {
            let part = slice(t, &[start], &[start + s as i64], Some(vec![a as i64]), None);
            start += s as i64;
            part
        })
        .collect()
}

mod numeric;
mod select;
#[cfg(test)]
mod tests;

use numeric::{cast, dequantize, matmul, reduce, resize};

use select::{concat, gather, gather_nd};
pub use select::{slice, slice_indices};
