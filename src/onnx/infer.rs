//! Shape inference: the shapes and element kinds of a node's outputs from its inputs' (constant
//! inputs by value, so a Reshape's target or a Slice's bounds are read), with ONNX's rules.
//!
//! Input: a node, an [`Operand`] per input (`None` when omitted) and the opset. Output: an [`Info`]
//! per output, or a message naming what the operator would need (the caller adds the node). An
//! operator the front end does not know is refused here, by name.

use super::eval::{
    flatten, permutation, shape_slice, slice_args, slice_indices, split_sizes, squeeze,
};
use super::opgraph::{Elem, Info, Node};
use super::tensor::{Tensor, axis, broadcast, reshape, unsqueeze};

/// What a pass knows of a node's input.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Const(&'a Tensor),
    Computed(&'a Info),
}

impl Operand<'_> {
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Operand::Const(t) => t.shape.clone(),
            Operand::Computed(i) => i.shape.clone(),
        }
    }
    pub fn elem(&self) -> Elem {
        match self {
            Operand::Const(t) => Elem::of(t),
            Operand::Computed(i) => i.elem,
        }
    }
    fn ints(&self, what: &str) -> Result<Vec<i64>, String> {
        match self {
            Operand::Const(t) => Ok(t.ints()),
            Operand::Computed(_) => Err(format!(
                "its {what} must be constant once the input shapes are fixed"
            )),
        }
    }
}

/// Operators refused by name, with what would be needed instead.
fn refusal(op: &str) -> Option<&'static str> {
    Some(match op {
        "MatMulInteger"
        | "DynamicQuantizeLinear"
        | "ConvInteger"
        | "QLinearMatMul"
        | "QLinearConv"
        | "QuantizeLinear" => {
            "activations quantised at run time are not supported: export with weight-only quantisation \
             (DequantizeLinear or Cast and Mul of int8 weights) or with float weights"
        }
        "Loop" | "If" | "Scan" => {
            "control flow is not supported: export with fixed shapes and no branches"
        }
        _ => return None,
    })
}

/// The outputs' shapes and element kinds of `node`.
pub fn infer(node: &Node, ins: &[Option<Operand>], opset: i64) -> Result<Vec<Info>, String> {
    if let Some(why) = refusal(&node.op) {
        return Err(why.to_string());
    }
    let input = |i: usize| {
        ins.get(i)
            .copied()
            .flatten()
            .ok_or_else(|| format!("input {i} is missing"))
    };
    let attrs = &node.attrs;
    let same = |i: usize, elem: Elem| -> Result<Vec<Info>, String> {
        Ok(vec![Info {
            shape: input(i)?.shape(),
            elem,
        }])
    };
    let one = |shape: Vec<usize>, elem: Elem| Ok(vec![Info { shape, elem }]);
    let axes_of = |i: usize| -> Result<Option<Vec<i64>>, String> {
        match ins.get(i).copied().flatten() {
            Some(a) => a.ints("axes").map(Some),
            None => Ok(attrs.ints("axes")),
        }
    };
    match node.op.as_str() {
        "Identity" | "Neg" | "Abs" | "Relu" | "Floor" | "Ceil" | "Dropout" => {
            let mut out = same(0, input(0)?.elem())?;
            if node.op == "Dropout" && node.outputs.len() > 1 {
                out.push(Info {
                    shape: input(0)?.shape(),
                    elem: Elem::Bool,
                });
            }
            Ok(out)
        }
        "Sqrt" | "Reciprocal" | "Exp" | "Log" | "Erf" | "Tanh" | "Sigmoid" | "Gelu" | "Softmax"
        | "LogSoftmax" | "Clip" => same(0, Elem::Float),
        "Not" | "IsNaN" | "IsInf" => same(0, Elem::Bool),
        "Cast" => same(0, Elem::of_type(attrs.i("to").unwrap_or(1) as i32)),
        "CastLike" => same(0, input(1)?.elem()),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Max" | "Min" | "Sum" => {
            let mut shape = input(0)?.shape();
            let mut elem = input(0)?.elem();
            for o in ins[1..].iter().flatten() {
                shape = broadcast(&shape, &o.shape())?;
                if o.elem() == Elem::Float {
                    elem = Elem::Float;
                }
            }
            one(shape, elem)
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor" => {
            one(
                broadcast(&input(0)?.shape(), &input(1)?.shape())?,
                Elem::Bool,
            )
        }
        "Where" => one(
            broadcast(
                &broadcast(&input(0)?.shape(), &input(1)?.shape())?,
                &input(2)?.shape(),
            )?,
            input(1)?.elem(),
        ),
        "MatMul" => one(matmul(&input(0)?.shape(), &input(1)?.shape())?, Elem::Float),
        "Gemm" => {
            let (a, b) = (input(0)?.shape(), input(1)?.shape());
            if a.len() != 2 || b.len() != 2 {
                return Err(format!("Gemm takes 2-D operands; got {a:?} and {b:?}"));
            }
            let (m, ka) = if attrs.i("transA") == Some(1) {
                (a[1], a[0])
            } else {
                (a[0], a[1])
            };
            let (kb, n) = if attrs.i("transB") == Some(1) {
                (b[1], b[0])
            } else {
                (b[0], b[1])
            };
            if ka != kb {
                return Err(format!("Gemm of {a:?} and {b:?}: inner dimensions differ"));
            }
            one(vec![m, n], Elem::Float)
        }
        "Reshape" => {
            let spec = input(1)?.ints("target shape")?;
            let shape = input(0)?.shape();
            let target =
                reshape(&shape, &spec, attrs.i("allowzero") == Some(1)).map_err(|e| {
                    match (shape.as_slice(), spec.as_slice()) {
                        ([_, _, last], [_, _, h, _]) if *h > 0 && last % *h as usize != 0 => {
                            format!(
                                "{e}: the head count {h} does not divide the hidden size {last}"
                            )
                        }
                        _ => e,
                    }
                })?;
            one(target, input(0)?.elem())
        }
        "Flatten" => one(
            flatten(&input(0)?.shape(), attrs.i("axis").unwrap_or(1))?,
            input(0)?.elem(),
        ),
        "Transpose" => {
            let shape = input(0)?.shape();
            let perm = attrs
                .ints("perm")
                .unwrap_or_else(|| (0..shape.len() as i64).rev().collect());
            let p = permutation(&perm, shape.len())?;
            one(p.iter().map(|&a| shape[a]).collect(), input(0)?.elem())
        }
        "Unsqueeze" => {
            let axes = axes_of(1)?.ok_or("Unsqueeze needs its axes")?;
            one(unsqueeze(&input(0)?.shape(), &axes)?, input(0)?.elem())
        }
        "Squeeze" => one(
            squeeze(&input(0)?.shape(), &axes_of(1)?.unwrap_or_default())?,
            input(0)?.elem(),
        ),
        "Expand" => {
            let dims = input(1)?.ints("shape")?;
            let dims: Vec<usize> = dims
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                .collect::<Result<_, _>>()?;
            one(broadcast(&input(0)?.shape(), &dims)?, input(0)?.elem())
        }
        "Concat" => {
            let parts: Vec<Vec<usize>> = ins.iter().flatten().map(Operand::shape).collect();
            let first = parts.first().ok_or("Concat of nothing")?;
            let a = axis(attrs.i("axis").ok_or("Concat needs its axis")?, first.len())?;
            let mut shape = first.clone();
            shape[a] = 0;
            for p in &parts {
                if p.len() != shape.len()
                    || p.iter().enumerate().any(|(i, &d)| i != a && d != shape[i])
                {
                    return Err(format!(
                        "inputs {first:?} and {p:?} do not concatenate on axis {a}"
                    ));
                }
                shape[a] += p[a];
            }
            one(shape, input(0)?.elem())
        }
        "Slice" => {
            let shape = input(0)?.shape();
            let ints = |k: usize| {
                ins.get(k)
                    .copied()
                    .flatten()
                    .map(|o| o.ints("bounds"))
                    .transpose()
            };
            let (starts, ends, axes, steps) = slice_args(opset, attrs, ints)?;
            let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
            if ends.len() != starts.len()
                || axes.len() != starts.len()
                || steps.len() != starts.len()
            {
                return Err("starts, ends, axes and steps differ in length".to_string());
            }
            let mut out = shape.clone();
            for k in 0..starts.len() {
                let a = axis(axes[k], shape.len())?;
                out[a] = slice_indices(shape[a], starts[k], ends[k], steps[k])?.len();
            }
            one(out, input(0)?.elem())
        }
        "Split" => {
            let shape = input(0)?.shape();
            let a = axis(attrs.i("axis").unwrap_or(0), shape.len())?;
            let given = if opset >= 13 {
                ins.get(1)
                    .copied()
                    .flatten()
                    .map(|o| o.ints("split"))
                    .transpose()?
            } else {
                attrs.ints("split")
            };
            let parts = attrs
                .i("num_outputs")
                .map_or(node.outputs.len(), |n| n.max(0) as usize);
            let sizes = split_sizes(shape[a], given, parts)?;
            if sizes.len() != node.outputs.len() {
                return Err(format!(
                    "Split into {} parts has {} outputs",
                    sizes.len(),
                    node.outputs.len()
                ));
            }
            Ok(sizes
                .into_iter()
                .map(|s| {
                    let mut out = shape.clone();
                    out[a] = s;
                    Info {
                        shape: out,
                        elem: input(0).map_or(Elem::Float, |i| i.elem()),
                    }
                })
                .collect())
        }
        "Gather" => {
            let (data, indices) = (input(0)?.shape(), input(1)?.shape());
            let a = axis(attrs.i("axis").unwrap_or(0), data.len())?;
            let mut shape = data[..a].to_vec();
            shape.extend(&indices);
            shape.extend(&data[a + 1..]);
            one(shape, input(0)?.elem())
        }
        "GatherND" => {
            let (data, indices) = (input(0)?.shape(), input(1)?.shape());
            match indices.split_last() {
                Some((&k, lead)) if k <= data.len() && attrs.i("batch_dims").unwrap_or(0) == 0 => {
                    let mut shape = lead.to_vec();
                    shape.extend(&data[k..]);
                    one(shape, input(0)?.elem())
                }
                _ => Err(format!(
                    "GatherND indices {indices:?} do not fit data {data:?} (batch_dims 0 only)"
                )),
            }
        }
        "Shape" => one(
            vec![shape_slice(&input(0)?.shape(), attrs).len()],
            Elem::Int,
        ),
        "Size" => one(Vec::new(), Elem::Int),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL2" => {
            let shape = input(0)?.shape();
            let axes = axes_of(1)?.unwrap_or_default();
            let keep = attrs.i("keepdims").unwrap_or(1) != 0;
            if axes.is_empty() && attrs.i("noop_with_empty_axes") == Some(1) {
                return one(shape, input(0)?.elem());
            }
            let axes: Vec<usize> = if axes.is_empty() {
                (0..shape.len()).collect()
            } else {
                axes.iter()
                    .map(|&a| axis(a, shape.len()))
                    .collect::<Result<_, _>>()?
            };
            let out = (0..shape.len())
                .filter_map(|a| {
                    if axes.contains(&a) {
                        keep.then_some(1)
                    } else {
                        Some(shape[a])
                    }
                })
                .collect();
            one(out, input(0)?.elem())
        }
        "LayerNormalization" => {
            let mut out = same(0, Elem::Float)?;
            let shape = input(0)?.shape();
            let a = axis(attrs.i("axis").unwrap_or(-1), shape.len())?;
            let stats: Vec<usize> = shape
                .iter()
                .enumerate()
                .map(|(i, &d)| if i < a { d } else { 1 })
                .collect();
            for _ in 1..node.outputs.len() {
                out.push(Info {
                    shape: stats.clone(),
                    elem: Elem::Float,
                });
            }
            Ok(out)
        }
        "Conv" => {
            let (x, w) = (input(0)?.shape(), input(1)?.shape());
            if x.len() != 4 || w.len() != 4 || x[1] != w[1] {
                return Err(format!(
                    "Conv lowers for 2-D images only (NCHW input, OIHW weights); got {x:?} and {w:?}"
                ));
            }
            let kernel = [w[2], w[3]];
            let strides = attrs.ints("strides").unwrap_or(vec![1, 1]);
            let pads = attrs.ints("pads").unwrap_or(vec![0; 4]);
            let mut out = vec![x[0], w[0]];
            for d in 0..2 {
                let s = usize::try_from(strides.get(d).copied().unwrap_or(1))
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or("Conv strides must be positive")?;
                let padded = x[2 + d]
                    + pads.get(d).copied().unwrap_or(0).max(0) as usize
                    + pads.get(d + 2).copied().unwrap_or(0).max(0) as usize;
                if padded < kernel[d] {
                    return Err(format!(
                        "Conv kernel {kernel:?} is larger than the image {x:?}"
                    ));
                }
                out.push((padded - kernel[d]) / s + 1);
            }
            one(out, Elem::Float)
        }
        "DequantizeLinear" => same(0, Elem::Float),
        // The front end's own canonical operator (see `spellings::mean_pool`): [batch, dim].
        "MaskedMeanPool" => match input(0)?.shape().as_slice() {
            [b, _, d] => one(vec![*b, *d], Elem::Float),
            s => Err(format!(
                "MaskedMeanPool takes [batch, tokens, dim], not {s:?}"
            )),
        },
        other => Err(format!(
            "operator {other} is not supported (on tensors computed from the inputs; constants of it fold only when the evaluator knows it)"
        )),
    }
}

/// numpy's matmul shape rule.
pub fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul of a scalar".to_string());
    }
    let (a2, b2) = (
        if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        },
        if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        },
    );
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!(
            "MatMul of {a:?} and {b:?}: inner dimensions {k} and {kb} differ"
        ));
    }
    let mut out = broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}
