//! Canonicalisation of the axis an operator works on: reductions, Softmax and LayerNormalization
//! lower over the last axis only, so an operator over other axes becomes a Transpose that puts those
//! axes last, a Reshape that merges them, the operator over the last axis and the movements back. A
//! LayerNormalization whose `Mean` and `InvStdDev` outputs are read gets them computed beside it.
//!
//! Input and output: an [`OpGraph`] after folding; each pass returns how many nodes it rewrote.

use super::OnnxError;
use super::opgraph::{Elem, Info, Node, OpGraph};
use super::tensor::{self, Attrs, Data, Tensor};

fn float(shape: Vec<usize>) -> Info {
    Info {
        shape,
        elem: Elem::Float,
    }
}

/// A constant int64 shape tensor.
fn shape_const(g: &mut OpGraph, base: &str, shape: &[usize]) -> String {
    g.constant(
        base,
        Tensor {
            shape: vec![shape.len()],
            data: Data::I64(shape.iter().map(|&d| d as i64).collect()),
        },
    )
}

/// Steps that bring the axes `moved` of `x` (shape `shape`) last and merge them into one:
/// `(steps, the result's name, its shape)`.
fn gather_axes(
    g: &mut OpGraph,
    node: &Node,
    x: &str,
    shape: &[usize],
    moved: &[usize],
) -> (Vec<Node>, String, Vec<usize>) {
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|a| !moved.contains(a)).collect();
    let perm: Vec<usize> = kept.iter().chain(moved).copied().collect();
    let mut steps = Vec::new();
    let mut cur = x.to_string();
    if perm.iter().enumerate().any(|(i, &a)| i != a) {
        let t = g.step(
            &node.name,
            "Transpose",
            vec![cur],
            Attrs::default().with_ints("perm", perm.iter().map(|&a| a as i64).collect()),
            float(perm.iter().map(|&a| shape[a]).collect()),
        );
        cur = t.output().to_string();
        steps.push(t);
    }
    let mut merged: Vec<usize> = kept.iter().map(|&a| shape[a]).collect();
    merged.push(moved.iter().map(|&a| shape[a]).product());
    if moved.len() != 1 {
        let s = shape_const(g, &node.name, &merged);
        let r = g.step(
            &node.name,
            "Reshape",
            vec![cur, s],
            Attrs::default(),
            float(merged.clone()),
        );
        cur = r.output().to_string();
        steps.push(r);
    }
    (steps, cur, merged)
}

/// A Reshape of `x` to `shape` as a step.
fn reshape_to(g: &mut OpGraph, node: &Node, x: String, shape: &[usize]) -> Node {
    let s = shape_const(g, &node.name, shape);
    g.step(
        &node.name,
        "Reshape",
        vec![x, s],
        Attrs::default(),
        float(shape.to_vec()),
    )
}

/// ReduceSum, ReduceMean and ReduceMax over any axes → over the last axis of a transposed, merged view.
pub fn reduce_axes(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if !matches!(node.op.as_str(), "ReduceSum" | "ReduceMean" | "ReduceMax") {
            continue;
        }
        let Some((x, shape)) = g.computed_input(&node, 0) else {
            continue;
        };
        let rank = shape.len();
        let axes = match node.input(1) {
            Some(a) => match g.consts.get(a) {
                Some(t) => t.ints(),
                None => continue,
            },
            None => node.attrs.ints("axes").unwrap_or_default(),
        };
        if axes.is_empty() && node.attrs.i("noop_with_empty_axes") == Some(1) {
            let id = g.step(
                &node.name,
                "Identity",
                vec![x.clone()],
                Attrs::default(),
                float(shape.clone()),
            );
            g.replace(at - 1, vec![id]);
            count += 1;
            continue;
        }
        let mut moved: Vec<usize> = if axes.is_empty() {
            (0..rank).collect()
        } else {
            axes.iter()
                .map(|&a| tensor::axis(a, rank))
                .collect::<Result<_, _>>()
                .map_err(|m| node.error(m))?
        };
        moved.sort_unstable();
        moved.dedup();
        if moved == [rank - 1] || rank == 0 {
            continue;
        }
        let keep = node.attrs.i("keepdims").unwrap_or(1) != 0;
        let (mut steps, cur, merged) = gather_axes(g, &node, &x, &shape, &moved);
        let mut reduced = merged.clone();
        *reduced.last_mut().expect("rank ≥ 1") = 1;
        let axes_last = g.constant(
            &node.name,
            Tensor {
                shape: vec![1],
                data: Data::I64(vec![-1]),
            },
        );
        let r = g.step(
            &node.name,
            &node.op,
            vec![cur, axes_last],
            Attrs::default().with_int("keepdims", 1),
            float(reduced),
        );
        let out: Vec<usize> = (0..rank)
            .filter_map(|a| {
                if moved.contains(&a) {
                    keep.then_some(1)
                } else {
                    Some(shape[a])
                }
            })
            .collect();
        let back = reshape_to(g, &node, r.output().to_string(), &out);
        steps.extend([r, back]);
        g.replace(at - 1, steps);
        count += 1;
    }
    Ok(count)
}

/// Softmax over an axis other than the last: from opset 13 over that axis (moved last and back), before
/// it over the trailing axes from it, flattened.
pub fn softmax_axis(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "Softmax" {
            continue;
        }
        let Some((x, shape)) = g.computed_input(&node, 0) else {
            continue;
        };
        let rank = shape.len();
        let default = if g.opset >= 13 { -1 } else { 1 };
        let a = tensor::axis(node.attrs.i("axis").unwrap_or(default), rank)
            .map_err(|m| node.error(m))?;
        let moved: Vec<usize> = if g.opset >= 13 {
            vec![a]
        } else {
            (a..rank).collect()
        };
        if moved == [rank - 1] {
            continue;
        }
        let last = Attrs::default().with_int("axis", -1);
        let (mut steps, cur, merged) = if g.opset >= 13 {
            gather_axes(g, &node, &x, &shape, &moved)
        } else {
            let merged = vec![shape[..a].iter().product(), shape[a..].iter().product()];
            let r = reshape_to(g, &node, x.clone(), &merged);
            let cur = r.output().to_string();
            (vec![r], cur, merged)
        };
        let s = g.step(
            &node.name,
            "Softmax",
            vec![cur],
            last,
            float(merged.clone()),
        );
        let cur = s.output().to_string();
        steps.push(s);
        if g.opset >= 13 {
            // Back: the transposed shape, then the inverse permutation.
            let kept: Vec<usize> = (0..rank).filter(|&b| b != a).collect();
            let perm: Vec<usize> = kept.iter().copied().chain([a]).collect();
            let mut inverse = vec![0i64; rank];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i as i64;
            }
            steps.push(g.step(
                &node.name,
                "Transpose",
                vec![cur],
                Attrs::default().with_ints("perm", inverse),
                float(shape.clone()),
            ));
        } else {
            steps.push(reshape_to(g, &node, cur, &shape));
        }
        g.replace(at - 1, steps);
        count += 1;
    }
    Ok(count)
}

/// LayerNormalization over axes `[axis..]` other than the last alone → over the last axis of the
/// input reshaped to `[lead, trailing]`; its `Mean` and `InvStdDev` outputs, when read, computed
/// beside it by ReduceMean, Sub, Mul, Add, Sqrt and Reciprocal.
pub fn layer_norm_axes(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "LayerNormalization" {
            continue;
        }
        let Some((x, shape)) = g.computed_input(&node, 0) else {
            continue;
        };
        let rank = shape.len();
        let a =
            tensor::axis(node.attrs.i("axis").unwrap_or(-1), rank).map_err(|m| node.error(m))?;
        let stats_read = node.outputs[1..]
            .iter()
            .any(|o| !o.is_empty() && g.uses(o) > 0);
        if a == rank - 1 && !stats_read {
            continue;
        }
        let eps = node.attrs.f("epsilon").unwrap_or(1e-5);
        let lead: usize = shape[..a].iter().product();
        let trailing: usize = shape[a..].iter().product();
        let merged = vec![lead, trailing];
        let mut steps = Vec::new();
        let mut cur = x.clone();
        if a != rank - 1 || rank != 2 {
            let r = reshape_to(g, &node, x.clone(), &merged);
            cur = r.output().to_string();
            steps.push(r);
        }
        // gamma and beta as [trailing] constants, when constant; computed ones are refused later.
        let mut params = Vec::new();
        for i in [1, 2] {
            match node.input(i) {
                Some(p) => match g.consts.get(p).cloned() {
                    Some(t) => params.push(g.constant(
                        p,
                        Tensor {
                            shape: vec![t.len()],
                            data: Data::F32(t.floats()),
                        },
                    )),
                    None => params.push(p.to_string()),
                },
                None => {
                    let v = if i == 1 { 1.0 } else { 0.0 };
                    params.push(g.constant(
                        &node.name,
                        Tensor {
                            shape: vec![trailing],
                            data: Data::F32(vec![v; trailing]),
                        },
                    ));
                }
            }
        }
        let attrs = Attrs::default()
            .with_float("epsilon", eps)
            .with_int("axis", -1);
        let ln = g.step(
            &node.name,
            "LayerNormalization",
            vec![cur.clone(), params[0].clone(), params[1].clone()],
            attrs,
            float(merged.clone()),
        );
        let ln_out = ln.output().to_string();
        steps.push(ln);
        let stats_shape: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if i < a { d } else { 1 })
            .collect();
        let mut extra: Vec<(String, Node)> = Vec::new();
        if stats_read {
            let axes = g.constant(
                &node.name,
                Tensor {
                    shape: vec![1],
                    data: Data::I64(vec![-1]),
                },
            );
            let col = float(vec![lead, 1]);
            let keep = Attrs::default().with_int("keepdims", 1);
            let mean = g.step(
                &node.name,
                "ReduceMean",
                vec![cur.clone(), axes.clone()],
                keep.clone(),
                col.clone(),
            );
            let d = g.step(
                &node.name,
                "Sub",
                vec![cur.clone(), mean.output().to_string()],
                Attrs::default(),
                float(merged.clone()),
            );
            let sq = g.step(
                &node.name,
                "Mul",
                vec![d.output().to_string(), d.output().to_string()],
                Attrs::default(),
                float(merged.clone()),
            );
            let var = g.step(
                &node.name,
                "ReduceMean",
                vec![sq.output().to_string(), axes],
                keep,
                col.clone(),
            );
            let e = g.scalar_const(&node.name, eps);
            let ve = g.step(
                &node.name,
                "Add",
                vec![var.output().to_string(), e],
                Attrs::default(),
                col.clone(),
            );
            let sd = g.step(
                &node.name,
                "Sqrt",
                vec![ve.output().to_string()],
                Attrs::default(),
                col.clone(),
            );
            let inv = g.step(
                &node.name,
                "Reciprocal",
                vec![sd.output().to_string()],
                Attrs::default(),
                col,
            );
            let (m_out, i_out) = (mean.output().to_string(), inv.output().to_string());
            steps.extend([mean, d, sq, var, ve, sd, inv]);
            for (k, src) in [(1, m_out), (2, i_out)] {
                if let Some(o) = node.outputs.get(k).filter(|o| !o.is_empty()) {
                    let mut back = reshape_to(g, &node, src, &stats_shape);
                    back.outputs = vec![o.clone()];
                    extra.push((o.clone(), back));
                }
            }
        }
        let back = reshape_to(g, &node, ln_out, &shape);
        steps.push(back);
        // The replaced node's first output goes to the last step; the statistics keep their names.
        let pos = at - 1;
        g.nodes[pos].outputs.truncate(1);
        g.replace(pos, steps);
        let end = g
            .nodes
            .iter()
            .position(|n| n.outputs.first() == node.outputs.first())
            .map_or(g.nodes.len(), |i| i + 1);
        for (k, (_, mut n)) in extra.into_iter().enumerate() {
            n.index = node.index;
            g.nodes.insert(end + k, n);
        }
        at = end;
        count += 1;
    }
    Ok(count)
}
