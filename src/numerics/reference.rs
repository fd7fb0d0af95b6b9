//! The float64 host reference: the graph evaluated from the host's data, twice.
//!
//! Contract: [`reference`] evaluates every operation in float64 (`Reference::data`, what the device's
//! outputs are compared with), and again with the precision of the device's storage modelled
//! (`Reference::rounded`): every value a device operation writes rounded to its type, a matmul's
//! running partial sums rounded to the partials' type after each 16-deep block of the depth (the AMP's
//! accumulation), an attention's scores rounded to the partials' type, its exponents and
//! probabilities to f16 (the online softmax's) and the running sums of its weighted values to the
//! partials' type after every 16 keys. How far `rounded` lies from `data` is what precision
//! alone moves the result by; the tolerance builds on it ([`super::tolerance`]). Host operations are
//! evaluated alike in both, their f16 results rounded in `rounded`. Element-wise operations (a select
//! and the comparisons among them) broadcast each operand over the output as the device does.
//! Both keep the graph's outputs only: an intermediate is held until its last reader has run, so the
//! reference holds its outputs and, twice over (the two evaluations run side by side), the
//! activations live at once, not every activation of the model.

use super::{
    add_rounded, binary_f64, gelu_erf_f64, gelu_tanh_f64, reduce_row_f64, round_to, saturate,
    select, softmax_row_f64, unary_f64,
};
use crate::ids::ValueId;
use crate::ir::{AttentionShape, DType, Graph, OpKind, ValueRole};
use crate::progress::Progress;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// What the float64 host reference computed.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    /// Every output's data (a value of role `Output`) in exact (float64) arithmetic, indexed by value
    /// id; empty for every other value. An intermediate is held only until its last reader has run,
    /// and the host's inputs and weights are widened from its data only while an operation reads them.
    pub data: Vec<Vec<f64>>,
    /// The same with the device's storage precision modelled (module docs).
    pub rounded: Vec<Vec<f64>>,
}

/// Rows of a matmul the reference works on together.
const ROWS_AT_ONCE: usize = 64;

/// `a[.., depth] · b` in float64 through `matrixmultiply`'s `dgemm`: `a` holds `rows` rows of `k`
/// (row-major), of which columns `depth` are multiplied; `b` is the `depth.len() x n` rows of the
/// right operand those columns meet (row-major). Writes the `rows x n` product, row-major, over `c`
/// (all zeros when the sizes do not agree).
fn block_product(
    a: &[f64],
    b: &[f64],
    rows: usize,
    k: usize,
    depth: std::ops::Range<usize>,
    n: usize,
    c: &mut [f64],
) {
    let d = depth.len();
    if rows == 0
        || d == 0
        || n == 0
        || a.len() < rows * k
        || b.len() < d * n
        || depth.end > k
        || c.len() < rows * n
    {
        c.fill(0.0);
        return;
    }
    // SAFETY: `a` holds `rows` rows of `k` elements, of which columns `depth.start..depth.end` lie
    // inside every row (`depth.end <= k`); `b` holds `d` rows of `n`; `c` holds `rows` rows of `n` and
    // aliases neither. The strides are those row-major layouts', in elements.
    unsafe {
        matrixmultiply::dgemm(
            rows,
            d,
            n,
            1.0,
            a.as_ptr().add(depth.start),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Evaluates the graph in float64 from the host data of its inputs and weights (f32, indexed by value
/// id; what it holds for other values is recomputed), exactly and with storage precision modelled.
/// `progress` hears of every row of every operation's result, in both evaluations.
pub fn reference(graph: &Graph, host: &[Vec<f32>], progress: &dyn Progress) -> Reference {
    let rows: u64 = (graph.ops.iter())
        .map(|op| u64::from(graph.value(op.out).rows))
        .sum();
    progress.start("reference rows", 2 * rows);
    let (data, rounded) = rayon::join(
        || evaluate(graph, host, None, progress),
        || evaluate(graph, host, Some(graph.partials), progress),
    );
    progress.finish();
    Reference { data, rounded }
}

/// `x` rounded to `dtype` when modelling precision.
fn store(precision: Option<DType>, dtype: DType, x: f64) -> f64 {
    match precision {
        Some(_) if dtype != DType::I64 => f64::from(round_to(dtype, x as f32)),
        _ => x,
    }
}

/// The graph's outputs' data (every other value empty once its last reader has run); `precision` is
/// the partials' type when the device's precision is modelled.
/// Each row of a result is reported to `progress` as it is done (a matmul's and an attention's one by
/// one, the others' when the whole result is).
fn evaluate(
    graph: &Graph,
    host: &[Vec<f32>],
    precision: Option<DType>,
    progress: &dyn Progress,
) -> Vec<Vec<f64>> {
    // Computed values only: an operation's operand the host holds (an input, a weight) is widened
    // for that operation alone, so the weights are never held twice over in float64; a computed
    // value other than an output is let go once its last reader has run.
    let mut data: Vec<Vec<f64>> = vec![Vec::new(); graph.values.len()];
    let mut last_reader = vec![None; graph.values.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        for id in op.kind.inputs() {
            last_reader[id.index()] = Some(i);
        }
    }
    let kept = |id: ValueId, i: usize| {
        graph.value(id).role == ValueRole::Output || last_reader[id.index()] > Some(i)
    };
    for (i, op) in graph.ops.iter().enumerate() {
        let out = graph.value(op.out);
        let n = out.cols as usize;
        let held = |id: ValueId| -> Vec<f64> {
            (host
                .get(id.index())
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter())
            .map(|&x| f64::from(x))
            .collect()
        };
        let mut widened: BTreeMap<ValueId, Vec<f64>> = BTreeMap::new();
        for id in op.kind.inputs() {
            if data[id.index()].is_empty() && !widened.contains_key(&id) {
                widened.insert(id, held(id));
            }
        }
        let (computed, widened) = (&data, &widened);
        let data_of = move |id: ValueId| operand(computed, widened, id);
        // Value `id`'s element for element `i` of the output, `id` broadcast over it.
        let at = |id: ValueId, i: usize| {
            let v = graph.value(id);
            let (r, c) = (i / n, i % n);
            let r = if v.rows == 1 { 0 } else { r };
            let c = if v.cols == 1 { 0 } else { c };
            data_of(id)[r * v.cols as usize + c]
        };
        let result: Vec<f64> = match op.kind {
            OpKind::MatMul { a, b } => {
                let k = graph.value(a).cols as usize;
                let (av, bv) = (data_of(a), data_of(b));
                // Rows a group at a time; per 16-deep block of the depth when modelling precision,
                // the group's partial sums as one product (`block_product`), added to the running
                // sums and rounded to the partials' type; exactly, the whole depth at once.
                av.par_chunks(k * ROWS_AT_ONCE)
                    .flat_map_iter(|group| {
                        let rows = group.len() / k.max(1);
                        let mut out = vec![0f64; rows * n];
                        let mut sum = vec![0f64; rows * n];
                        // Exact, the whole depth is one block.
                        let step = if precision.is_some() { 16 } else { k.max(1) };
                        for block in (0..k).step_by(step) {
                            let depth = block..(block + step).min(k);
                            let b_rows = &bv[depth.start * n..depth.end * n];
                            block_product(group, b_rows, rows, k, depth, n, &mut sum);
                            match precision {
                                Some(p) => add_rounded(p, &mut out, &sum),
                                None => out.iter_mut().zip(&sum).for_each(|(o, s)| *o += s),
                            }
                        }
                        for _ in 0..rows {
                            progress.advance(1);
                        }
                        out
                    })
                    .collect()
            }
            OpKind::AddBias { x, bias } => {
                let bv = data_of(bias);
                data_of(x)
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| v + bv[i % n])
                    .collect()
            }
            OpKind::GeluTanh { x } => data_of(x).iter().map(|&v| gelu_tanh_f64(v)).collect(),
            OpKind::GeluErf { x } => data_of(x).iter().map(|&v| gelu_erf_f64(v)).collect(),
            OpKind::Add { a, b } => data_of(a)
                .iter()
                .zip(data_of(b))
                .map(|(x, y)| x + y)
                .collect(),
            OpKind::LayerNorm {
                x,
                gamma,
                beta,
                epsilon,
            } => {
                let (g, b) = (data_of(gamma), data_of(beta));
                data_of(x)
                    .chunks(n)
                    .flat_map(|row| {
                        let mean = row.iter().sum::<f64>() / n as f64;
                        let variance =
                            row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
                        let inverse = 1.0 / (variance + f64::from(epsilon)).sqrt();
                        row.iter()
                            .zip(g.iter().zip(b))
                            .map(move |(v, (g, b))| (v - mean) * inverse * g + b)
                    })
                    .collect()
            }
            OpKind::Unary { x, function } => {
                data_of(x).iter().map(|&v| unary_f64(function, v)).collect()
            }
            OpKind::Binary { a, b, function } => (0..out.elements() as usize)
                .map(|i| binary_f64(function, at(a, i), at(b, i)))
                .collect(),
            OpKind::Select { condition, x, y } => (0..out.elements() as usize)
                .map(|i| select(at(condition, i), at(x, i), at(y, i)))
                .collect(),
            OpKind::Reduce { x, function } => {
                let cols = graph.value(x).cols as usize;
                data_of(x)
                    .chunks(cols)
                    .map(|row| reduce_row_f64(function, row))
                    .collect()
            }
            OpKind::Softmax { x } => data_of(x).chunks(n).flat_map(softmax_row_f64).collect(),
            OpKind::Attention {
                q,
                k,
                v,
                mask,
                scale,
                ..
            } => {
                let shape = graph.attention_shape(op).expect("an attention has a shape");
                let mask = mask.map(&data_of);
                let operands = [q, k, v].map(&data_of);
                attention_f64(
                    &shape,
                    f64::from(scale),
                    mask,
                    operands,
                    precision,
                    progress,
                )
            }
            OpKind::Embed { ref lookups } => {
                let mut out = vec![0f64; out.elements() as usize];
                for &(table, indices) in lookups {
                    let table = data_of(table);
                    for (o, &i) in out.chunks_mut(n).zip(data_of(indices)) {
                        let row = &table[i as usize * n..(i as usize + 1) * n];
                        o.iter_mut().zip(row).for_each(|(o, t)| *o += t);
                    }
                }
                out
            }
            OpKind::Assemble { ref pieces } => {
                let mut out = vec![0f64; out.elements() as usize];
                for p in pieces {
                    let x = data_of(p.x);
                    // Graph::check keeps every index inside its value.
                    crate::elements::for_each_pair(&p.shape, &p.from, &p.to, |f, t| {
                        out[t as usize] = x[f as usize];
                        true
                    });
                }
                out
            }
            OpKind::MaskBias { mask, fill } => data_of(mask)
                .iter()
                .map(|m| saturate(out.dtype, (1.0 - m) * f64::from(fill)))
                .collect(),
            OpKind::MeanPool { x, mask, min_count } => {
                let mask = data_of(mask);
                let tokens = mask.len() / out.rows.max(1) as usize;
                let mut out = vec![0f64; out.elements() as usize];
                for (b, o) in out.chunks_mut(n).enumerate() {
                    let keep = &mask[b * tokens..(b + 1) * tokens];
                    let rows = data_of(x)[b * tokens * n..(b + 1) * tokens * n].chunks(n);
                    for (row, m) in rows.zip(keep) {
                        o.iter_mut().zip(row).for_each(|(o, v)| *o += m * v);
                    }
                    let count = keep.iter().sum::<f64>().max(f64::from(min_count));
                    o.iter_mut().for_each(|o| *o /= count);
                }
                out
            }
        };
        if !matches!(op.kind, OpKind::MatMul { .. } | OpKind::Attention { .. }) {
            progress.advance(u64::from(out.rows));
        }
        data[op.out.index()] = result
            .into_iter()
            .map(|x| store(precision, out.dtype, x))
            .collect();
        for id in op.kind.inputs().into_iter().chain([op.out]) {
            if !kept(id, i) {
                data[id.index()] = Vec::new();
            }
        }
    }
    data
}

/// Value `id`'s data: computed, or widened from the host's for the operation at hand.
fn operand<'a>(
    computed: &'a [Vec<f64>],
    widened: &'a BTreeMap<ValueId, Vec<f64>>,
    id: ValueId,
) -> &'a [f64] {
    match widened.get(&id) {
        Some(w) => w,
        None => &computed[id.index()],
    }
}

/// Attention in float64: per batch, head and query, `softmax(q · kᵀ · scale + mask) · v` over the
/// visible keys; with `precision` (the partials' type) the scores rounded to it, and the exponents
/// (taken from the row's largest logit) and the probabilities to f16.
fn attention_f64(
    s: &AttentionShape,
    scale: f64,
    mask: Option<&[f64]>,
    [q, k, v]: [&[f64]; 3],
    precision: Option<DType>,
    progress: &dyn Progress,
) -> Vec<f64> {
    let (d, width) = (s.head_dim as usize, (s.heads * s.head_dim) as usize);
    let rows = (s.batch * s.queries) as usize;
    let mut out = vec![0f64; rows * width];
    let half = |x: f64| store(precision, DType::F16, x);
    out.par_chunks_mut(width).enumerate().for_each(|(row, o)| {
        let (batch, i) = (row / s.queries as usize, (row % s.queries as usize) as u32);
        let visible = s.visible_keys(i) as usize;
        for h in 0..s.heads as usize {
            let qv = &q[row * width + h * d..row * width + (h + 1) * d];
            let key = |j: usize| (batch * s.keys as usize + j) * width + h * d;
            let logits: Vec<f64> = (0..visible)
                .map(|j| {
                    let score: f64 = qv
                        .iter()
                        .zip(&k[key(j)..key(j) + d])
                        .map(|(a, b)| a * b)
                        .sum();
                    let score = precision.map_or(score, |p| f64::from(round_to(p, score as f32)));
                    score * scale + mask.map_or(0.0, |m| m[batch * s.keys as usize + j])
                })
                .collect();
            let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = logits.iter().map(|x| half(half(x - top).exp())).collect();
            let total: f64 = weights.iter().sum();
            // The weighted sum of the values, its running sums rounded after every 16 keys.
            let mut sum = vec![0f64; d];
            for (block, chunk) in weights.chunks(16).enumerate() {
                let mut part = vec![0f64; d];
                for (i, w) in chunk.iter().enumerate() {
                    let j = block * 16 + i;
                    for (p, vv) in part.iter_mut().zip(&v[key(j)..key(j) + d]) {
                        *p += w * vv;
                    }
                }
                for (s, p) in sum.iter_mut().zip(part) {
                    *s = precision.map_or(*s + p, |t| f64::from(round_to(t, (*s + p) as f32)));
                }
            }
            for (oo, s) in o[h * d..(h + 1) * d].iter_mut().zip(sum) {
                *oo = s / total;
            }
        }
        progress.advance(1);
    });
    out
}
