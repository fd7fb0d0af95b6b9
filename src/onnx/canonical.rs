//! Canonicalisation: each pass rewrites one family of equivalent spellings to one form, so that the
//! lowering knows one spelling of each thing. The list ([`PASSES`]) is data; [`canonicalise`] runs it
//! in order, folding again after each pass that rewrote something (a rewrite may leave constants to
//! fold, a transposed weight say) and checking the graph is still well formed.
//!
//! | pass | from | to |
//! |---|---|---|
//! | `conv_patches` | a `Conv` whose kernel equals its stride (a ViT's patch embedding) | Reshape/Transpose of the image into rows of patches, `MatMul` by the kernel as `[C·p·q, D]`, `Add` of the bias, Reshape/Transpose to NCHW |
//! | `gemm` | `Gemm(A, B, C)` with its `alpha`, `beta`, `transA`, `transB` | `MatMul`, `Transpose`, `Mul`, `Add` |
//! | `layer_norm` | `ReduceMean`/`Sub`/`Pow` (or `Mul`)/`ReduceMean`/`Add ε`/`Sqrt`/`Div`, then `Mul γ`, `Add β` | `LayerNormalization` with ε from the graph |
//! | `gelu` | erf-GELU (÷√2 or ·1/√2, any order of the products), tanh-GELU (`Pow(x, 3)` or `x·x·x`) | `Gelu` (`approximate` none or tanh) |
//! | `weight_slices` | a `Slice` or `Split` of the last axis of `MatMul(x, W)` (+ `b`), `W` and `b` constant | one `MatMul` (+ `Add`) per part, over the weight's columns |
//! | `split_slices` | a `Split` of a computed tensor no weight slice took | one `Slice` per output |
//! | `scalar_scale` | a scalar `Mul`/`Div` on an operand of a `MatMul` of two computed tensors, through `Reshape`/`Transpose` | the product of the scalars applied to the `MatMul`'s result |
//! | `movement_chains` | a chain of `Reshape`/`Transpose` of a computed tensor that moves its elements as one `Transpose` would (the dynamo exporter's `kᵀ` through `[b·h, s, d]`), or leaves them in order | that `Transpose`, or one `Reshape` |
//! | `bool_mask` | `Where(c, 0, f)`, `Where(c, scores, f)`, `Where(Not(c), f, 0)`, `c` a mask from an integer graph input | `(1 − Cast(c)) · f` added to the scores |
//! | `mean_pool` | `ReduceSum(x·m, 1) / Clip(ReduceSum(m, 1), min)` (or `Max`, or no bound) | `MaskedMeanPool(x, m)`, the front end's own operator, a host `MeanPool` |
//! | `layer_norm_axes` | LayerNormalization over axes `[a..]` other than the last alone, or with its `Mean` and `InvStdDev` read | Reshape to `[lead, trailing]`, LayerNormalization over the last axis, the statistics by ReduceMean/Sub/Mul/Add/Sqrt/Reciprocal, Reshape back |
//! | `reduce_axes` | ReduceSum, ReduceMean, ReduceMax over any axes | Transpose those axes last, Reshape them into one, the reduction over the last axis, Reshape to the result's shape |
//! | `softmax_axis` | Softmax over another axis (before opset 13, over the trailing axes from it) | Transpose (or Reshape) it last, Softmax over the last axis, back |
//! | `nan_guard` | `Where(IsNaN(p), 0, p)` after a Softmax (the dynamo exporter's guard of fully masked rows) | `p` |
//!
//! Input and output: an [`OpGraph`] after [`super::fold::fold`]. Each pass returns how many rewrites it
//! made; the notes say so.

use super::OnnxError;
use super::opgraph::{Elem, Info, Node, OpGraph};
use super::tensor::{Attrs, Data, Tensor};

type Pass = fn(&mut OpGraph) -> Result<usize, OnnxError>;

/// The passes, in order.
pub const PASSES: [(&str, Pass); 14] = [
    ("conv_patches", super::patches::conv_patches),
    ("gemm", gemm),
    ("layer_norm", super::spellings::layer_norm),
    ("gelu", super::spellings::gelu),
    ("weight_slices", weight_slices),
    ("split_slices", split_slices),
    ("scalar_scale", scalar_scale),
    ("movement_chains", movement_chains),
    ("bool_mask", super::spellings::bool_mask),
    ("nan_guard", super::spellings::nan_guard),
    ("mean_pool", super::spellings::mean_pool),
    ("layer_norm_axes", super::axes::layer_norm_axes),
    ("reduce_axes", super::axes::reduce_axes),
    ("softmax_axis", super::axes::softmax_axis),
];

/// Runs every pass; returns `(pass, rewrites)` for those that rewrote something.
pub fn canonicalise(g: &mut OpGraph) -> Result<Vec<(&'static str, usize)>, OnnxError> {
    let mut done = Vec::new();
    for (name, pass) in PASSES {
        let n = pass(g)?;
        if n > 0 {
            g.prune();
            super::fold::fold(g)?;
            done.push((name, n));
        }
    }
    Ok(done)
}

fn info(g: &OpGraph, t: &str) -> Info {
    g.infos.get(t).cloned().unwrap_or(Info {
        shape: g.shape(t).unwrap_or_default(),
        elem: Elem::Float,
    })
}

/// `Gemm(A, B, C) = alpha · A' · B' + beta · C` as MatMul, Transpose, Mul and Add.
fn gemm(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    while let Some(at) = g.nodes.iter().position(|n| n.op == "Gemm") {
        let node = g.nodes[at].clone();
        let out_info = info(g, node.output());
        let mut steps = Vec::new();
        let mut operand = |g: &mut OpGraph, i: usize, flag: &str| -> Result<String, OnnxError> {
            let name = node
                .input(i)
                .ok_or_else(|| node.error(format!("input {i} is missing")))?
                .to_string();
            if node.attrs.i(flag) != Some(1) {
                return Ok(name);
            }
            let mut shape = g.shape(&name).unwrap_or_default();
            shape.reverse();
            let step = g.step(
                &node.name,
                "Transpose",
                vec![name],
                Attrs::default().with_ints("perm", vec![1, 0]),
                Info {
                    shape,
                    elem: Elem::Float,
                },
            );
            let out = step.output().to_string();
            steps.push(step);
            Ok(out)
        };
        let a = operand(g, 0, "transA")?;
        let b = operand(g, 1, "transB")?;
        let mut y = g.step(
            &node.name,
            "MatMul",
            vec![a, b],
            Attrs::default(),
            out_info.clone(),
        );
        let alpha = node.attrs.f("alpha").unwrap_or(1.0);
        if alpha != 1.0 {
            let c = g.scalar_const(&node.name, alpha);
            steps.push(y.clone());
            y = g.step(
                &node.name,
                "Mul",
                vec![y.output().to_string(), c],
                Attrs::default(),
                out_info.clone(),
            );
        }
        if let Some(c) = node.input(2) {
            let beta = node.attrs.f("beta").unwrap_or(1.0);
            let mut c = c.to_string();
            if beta != 1.0 {
                let b = g.scalar_const(&node.name, beta);
                let shape = g.shape(&c).unwrap_or_default();
                let scaled = g.step(
                    &node.name,
                    "Mul",
                    vec![c, b],
                    Attrs::default(),
                    Info {
                        shape,
                        elem: Elem::Float,
                    },
                );
                c = scaled.output().to_string();
                steps.push(scaled);
            }
            steps.push(y.clone());
            y = g.step(
                &node.name,
                "Add",
                vec![y.output().to_string(), c],
                Attrs::default(),
                out_info.clone(),
            );
        }
        steps.push(y);
        g.replace(at, steps);
        count += 1;
    }
    Ok(count)
}

/// A slice of the last axis of `MatMul(x, W)` (+ `b`), `W` and `b` constant, as a MatMul over the
/// weight's columns (+ the bias's part): a fused QKV projection split into its three.
fn weight_slices(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        let node = g.nodes[at].clone();
        at += 1;
        let parts: Vec<(usize, usize)> = match node.op.as_str() {
            "Split" | "Slice" => match column_parts(g, &node) {
                Some(p) => p,
                None => continue,
            },
            _ => continue,
        };
        let Some(src) = node.input(0) else { continue };
        // The sliced tensor: MatMul(x, W) or Add(MatMul(x, W), b), W and b constant.
        let (matmul, bias) = match g.produced_by(src, "Add") {
            Some(add) => {
                let (p, q) = (add.inputs[0].clone(), add.inputs[1].clone());
                let (m, b) = if g.consts.contains_key(&q) {
                    (p, q)
                } else {
                    (q, p)
                };
                (m, Some(b))
            }
            None => (src.to_string(), None),
        };
        let Some(mm) = g.produced_by(&matmul, "MatMul").cloned() else {
            continue;
        };
        let (Some(w), x) = (g.consts.get(&mm.inputs[1]).cloned(), mm.inputs[0].clone()) else {
            continue;
        };
        let bias = match bias {
            Some(b) => match g.consts.get(&b) {
                Some(t) => Some(t.clone()),
                None => continue,
            },
            None => None,
        };
        let cols = *w.shape.last().unwrap_or(&0);
        if w.shape.len() != 2
            || bias.as_ref().is_some_and(|b| {
                b.shape.iter().rev().skip(1).any(|&d| d != 1) || b.shape.last() != Some(&cols)
            })
        {
            continue;
        }
        let out_shape = g.shape(src).unwrap_or_default();
        let mut steps = Vec::new();
        for (k, &(start, end)) in parts.iter().enumerate() {
            let slice = |t: &Tensor, rows: usize| -> Tensor {
                let v = t.floats();
                let data = (0..rows)
                    .flat_map(|r| v[r * cols + start..r * cols + end].to_vec())
                    .collect();
                Tensor {
                    shape: if t.shape.len() == 2 {
                        vec![rows, end - start]
                    } else {
                        vec![end - start]
                    },
                    data: Data::F32(data),
                }
            };
            let wk = g.constant(&mm.inputs[1], slice(&w, w.shape[0]));
            let mut shape = out_shape.clone();
            if let Some(last) = shape.last_mut() {
                *last = end - start;
            }
            let info = Info {
                shape,
                elem: Elem::Float,
            };
            let mut y = g.step(
                &node.name,
                "MatMul",
                vec![x.clone(), wk],
                Attrs::default(),
                info.clone(),
            );
            if let Some(b) = &bias {
                let bk = g.constant(
                    &node.name,
                    slice(&b.reshaped(vec![1, cols]), 1).reshaped(vec![end - start]),
                );
                steps.push(y.clone());
                y = g.step(
                    &node.name,
                    "Add",
                    vec![y.output().to_string(), bk],
                    Attrs::default(),
                    info,
                );
            }
            y.outputs = vec![node.outputs[k].clone()];
            steps.push(y);
        }
        at = at - 1 + g.replace_each(at - 1, steps);
        count += 1;
    }
    Ok(count)
}

/// The column ranges a Split or Slice takes of the last axis of its input, when it takes only that
/// axis with constant bounds and step 1.
fn column_parts(g: &OpGraph, node: &Node) -> Option<Vec<(usize, usize)>> {
    let shape = g.shape(node.input(0)?)?;
    let last = shape.len().checked_sub(1)?;
    let cols = shape[last];
    let is_last = |a: i64| a == -1 || a == last as i64;
    if node.op == "Split" {
        if !is_last(node.attrs.i("axis").unwrap_or(0)) {
            return None;
        }
        let mut start = 0;
        return node
            .outputs
            .iter()
            .map(|o| {
                let n = *g.shape(o)?.last()?;
                start += n;
                Some((start - n, start))
            })
            .collect();
    }
    let c = |i: usize| {
        node.input(i)
            .and_then(|n| g.consts.get(n))
            .map(|t| t.ints())
    };
    let (starts, ends) = (c(1)?, c(2)?);
    let axes = c(3).unwrap_or(vec![0]);
    if starts.len() != 1 || axes.len() != 1 || !is_last(axes[0]) || c(4).is_some_and(|s| s != [1]) {
        return None;
    }
    let idx = super::eval::slice_indices(cols, starts[0], ends[0], 1).ok()?;
    Some(vec![(*idx.first()?, *idx.last()? + 1)])
}

/// Scalar factors on the operands of a MatMul of two computed tensors (attention's `q · kᵀ`, with q
/// or q and k scaled), moved through Reshape and Transpose onto the MatMul's result.
fn scalar_scale(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        let node = g.nodes[at].clone();
        at += 1;
        if node.op != "MatMul" || node.inputs.iter().any(|i| g.consts.contains_key(i)) {
            continue;
        }
        let mut factor = 1.0f64;
        let mut rewired = Vec::new();
        for operand in &node.inputs {
            // Walk up through single-use Reshape/Transpose to a single-use scalar Mul or Div.
            let mut t = operand.clone();
            let mut reader = (
                at - 1,
                node.inputs.iter().position(|i| i == operand).unwrap_or(0),
            );
            loop {
                if g.uses(&t) != 1 {
                    break;
                }
                let Some(p) = g.producer(&t) else { break };
                let pn = &g.nodes[p];
                match pn.op.as_str() {
                    "Reshape" | "Transpose" => {
                        reader = (p, 0);
                        t = pn.inputs[0].clone();
                    }
                    "Mul" | "Div" => {
                        let (a, b) = (&pn.inputs[0], &pn.inputs[1]);
                        let (x, c) = match (g.scalar(a), g.scalar(b)) {
                            (None, Some(c)) => (a.clone(), c),
                            (Some(c), None) if pn.op == "Mul" => (b.clone(), c),
                            _ => break,
                        };
                        factor *= if pn.op == "Mul" {
                            f64::from(c)
                        } else {
                            1.0 / f64::from(c)
                        };
                        rewired.push((reader, x));
                        break;
                    }
                    _ => break,
                }
            }
        }
        if rewired.is_empty() {
            continue;
        }
        for ((n, i), x) in rewired {
            g.nodes[n].inputs[i] = x;
        }
        let out_info = info(g, node.output());
        let mm_at = at - 1;
        let mm = g.step(
            &node.name,
            "MatMul",
            node.inputs.clone(),
            Attrs::default(),
            out_info.clone(),
        );
        let mm = Node {
            inputs: g.nodes[mm_at].inputs.clone(),
            ..mm
        };
        let c = g.scalar_const(&node.name, factor as f32);
        let scaled = g.step(
            &node.name,
            "Mul",
            vec![mm.output().to_string(), c],
            Attrs::default(),
            out_info,
        );
        g.replace(mm_at, vec![mm, scaled]);
        at = mm_at + 2;
        count += 1;
    }
    Ok(count)
}

/// A chain of single-use Reshape and Transpose nodes over a computed tensor that, evaluated on the
/// tensor's element indices, moves them as one Transpose does: replaced by that Transpose.
fn movement_chains(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let last = &g.nodes[at - 1];
        if !matches!(last.op.as_str(), "Reshape" | "Transpose") {
            continue;
        }
        // Walk up the chain while each link is a single-use Reshape or Transpose.
        let mut chain = vec![at - 1];
        let mut up = last.inputs[0].clone();
        while g.uses(&up) == 1 {
            match g.producer(&up) {
                Some(p) if matches!(g.nodes[p].op.as_str(), "Reshape" | "Transpose") => {
                    chain.push(p);
                    up = g.nodes[p].inputs[0].clone();
                }
                _ => break,
            }
        }
        // The longest chain whose source the whole chain transposes.
        let found = (2..=chain.len()).rev().find_map(|k| {
            let source = g.nodes[chain[k - 1]].inputs[0].clone();
            let shape = g.infos.get(&source)?.shape.clone();
            let n = super::tensor::elements(&shape).ok()?;
            let iota = Tensor {
                shape: shape.clone(),
                data: Data::I64((0..n as i64).collect()),
            };
            let mut moved = iota.clone();
            for &i in chain[..k].iter().rev() {
                let node = &g.nodes[i];
                let mut ins: Vec<Option<&Tensor>> = vec![Some(&moved)];
                ins.extend(
                    node.inputs[1..]
                        .iter()
                        .map(|t| g.consts.get(t).map(|c| c.as_ref())),
                );
                moved = super::eval::eval(&node.op, &ins, &node.attrs, g.opset)
                    .ok()?
                    .remove(0);
            }
            permutations(shape.len()).into_iter().find_map(|p| {
                let p: Vec<i64> = p.iter().map(|&a| a as i64).collect();
                let t = super::eval::transpose(&iota, &p).ok()?;
                // In order: the same elements in the same order under another shape.
                let in_order = p.iter().enumerate().all(|(i, &a)| i as i64 == a);
                (t.data == moved.data && (in_order || t.shape == moved.shape))
                    .then(|| (source.clone(), p))
            })
        });
        let Some((source, perm)) = found else {
            continue;
        };
        let ordered = perm.iter().enumerate().all(|(i, &a)| i as i64 == a);
        if ordered && chain.iter().all(|&i| g.nodes[i].op == "Reshape") {
            continue; // Reshapes in a row: nothing moves, and each is free where the last axis stays.
        }
        let out_info = info(g, g.nodes[at - 1].output());
        let t = if perm.iter().enumerate().all(|(i, &a)| i as i64 == a) {
            let dims: Vec<i64> = out_info.shape.iter().map(|&d| d as i64).collect();
            let s = g.constant(
                &source,
                Tensor {
                    shape: vec![dims.len()],
                    data: Data::I64(dims),
                },
            );
            g.step(
                &source,
                "Reshape",
                vec![source.clone(), s],
                Attrs::default(),
                out_info,
            )
        } else {
            g.step(
                &source,
                "Transpose",
                vec![source.clone()],
                Attrs::default().with_ints("perm", perm),
                out_info,
            )
        };
        g.replace(at - 1, vec![t]);
        count += 1;
    }
    Ok(count)
}

/// Every permutation of `rank` axes, identity first (rank at most 6).
fn permutations(rank: usize) -> Vec<Vec<usize>> {
    if rank > 6 {
        return Vec::new();
    }
    let mut out: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..rank {
        let mut next = Vec::new();
        for p in &out {
            for a in (0..rank).filter(|a| !p.contains(a)) {
                next.push([p.clone(), vec![a]].concat());
            }
        }
        out = next;
    }
    out
}

/// A Split of a computed tensor (one the weight slices did not take) as one Slice per output.
fn split_slices(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "Split" {
            continue;
        }
        let Some((x, shape)) = g.computed_input(&node, 0) else {
            continue;
        };
        let a = super::tensor::axis(node.attrs.i("axis").unwrap_or(0), shape.len())
            .map_err(|m| node.error(m))?;
        let mut start = 0i64;
        let mut steps = Vec::new();
        for o in &node.outputs {
            let Some(info) = g.infos.get(o).cloned() else {
                continue;
            };
            let end = start + info.shape[a] as i64;
            let c = |g: &mut OpGraph, v: i64| {
                g.constant(
                    &node.name,
                    Tensor {
                        shape: vec![1],
                        data: Data::I64(vec![v]),
                    },
                )
            };
            let (s, e, ax) = (c(g, start), c(g, end), c(g, a as i64));
            let mut slice = g.step(
                &node.name,
                "Slice",
                vec![x.clone(), s, e, ax],
                Attrs::default(),
                info,
            );
            slice.outputs = vec![o.clone()];
            steps.push(slice);
            start = end;
        }
        at = at - 1 + g.replace_each(at - 1, steps);
        count += 1;
    }
    Ok(count)
}
