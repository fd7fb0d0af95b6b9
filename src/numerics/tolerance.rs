//! The tolerance on an output's absolute error, derived from the precision by following an error
//! estimate through the graph, value by value, from the float64 reference's data.
//!
//! Contract: [`tolerance`] bounds the largest absolute error over an output's elements at
//! `max(4, √(2 ln n) + 1)` times the estimated root-mean-square error of one element (the largest of
//! `n` roughly normal errors rarely passes `√(2 ln n)` standard deviations). Host data is exact
//! (inputs and weights are bound in the types the device reads), so inputs and weights start with no
//! error; each operation's estimate follows from its inputs' and its own roundings, magnitudes taken as
//! the reference's root mean squares:
//! - a matmul over depth `k` carries its operands' errors (`k · (s_a² · ms(b) + s_b² · ms(a))`), rounds
//!   its partials once per 16-deep block (a random walk of `⌈k/16⌉` roundings at the partials' unit
//!   roundoff) and its f16 output once;
//! - a bias add keeps its input's error, a residual add adds its operands', a GELU multiplies its
//!   input's by its steepest slope (1.13);
//! - a layer norm multiplies its input's error by gamma's root mean square over the smallest standard
//!   deviation of its rows, then rounds to f16;
//! - an attention's output is a weighted mean of values. Each weight is off by the rounding of its
//!   f16 exponent (`u16 · spread`), of its f16 probability (`u16`), of its score's partials
//!   (`up · √⌈d/16⌉ · largest score`) and by its inputs' errors (`scale · √d · (s_q · rms(k) + s_k ·
//!   rms(q))`, a sum of `d` products off by their operands' errors), each taken at its worst; treating those relative errors `ε_j`
//!   as independent, they move an output element by `Σ_j w_j ε_j (v_j − o)`, whose standard deviation
//!   is at most the error times the reference's largest sensitivity `√Σ_j w_j² (v_j − o)²`. The
//!   weighted sum rounds its partials once per 16-deep block of keys, relative to partial sums
//!   estimated at `|o| + 2 |v| √Σ w²` (values of random sign; the reference's largest partials walk),
//!   the values' own error passes through, and the output rounds to f16;
//! - the host's embedding sum rounds to f16; its mask bias is exact; its mean pooling keeps its
//!   input's error.
//!
//! Like any such estimate this is statistical, for data like the seeded data or a trained model's,
//! not a worst case: data with structure (long runs of values of one sign) could exceed it.

use super::{Reference, unit_roundoff};
use crate::ids::ValueId;
use crate::ir::{DType, Graph, OpKind};

/// The steepest slope of GELU (tanh or erf), at about x = 0.75·√2.
const GELU_SLOPE: f64 = 1.13;

/// The bound on the largest absolute error of the device's `output` (module docs).
pub fn tolerance(graph: &Graph, reference: &Reference, output: ValueId) -> f64 {
    let u16 = unit_roundoff(DType::F16);
    let up = unit_roundoff(graph.partials);
    let data = |v: ValueId| reference.data[v.index()].as_slice();
    let rms = |v: ValueId| {
        let d = data(v);
        (d.iter().map(|x| x * x).sum::<f64>() / d.len().max(1) as f64).sqrt()
    };
    let mut error = vec![0f64; graph.values.len()];
    for op in &graph.ops {
        let out = rms(op.out);
        let s = &error;
        error[op.out.index()] = match op.kind {
            OpKind::MatMul { a, b } => {
                let k = f64::from(graph.value(a).cols);
                let carried = k
                    * (s[a.index()].powi(2) * rms(b).powi(2)
                        + s[b.index()].powi(2) * rms(a).powi(2));
                let rounding = (up * (k / 16.0).ceil().sqrt() + u16) * out;
                (carried + rounding.powi(2)).sqrt()
            }
            OpKind::AddBias { x, bias } => s[x.index()] + s[bias.index()],
            OpKind::Add { a, b } => s[a.index()] + s[b.index()] + u16 * out,
            OpKind::GeluTanh { x } | OpKind::GeluErf { x } => GELU_SLOPE * s[x.index()],
            OpKind::LayerNorm { x, gamma, .. } => {
                let cols = graph.value(x).cols.max(1) as usize;
                let spread = data(x)
                    .chunks(cols)
                    .map(|row| {
                        let mean = row.iter().sum::<f64>() / cols as f64;
                        (row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64).sqrt()
                    })
                    .fold(f64::INFINITY, f64::min);
                s[x.index()] * rms(gamma) / spread.max(f64::MIN_POSITIVE) + u16 * out
            }
            OpKind::Attention { q, k, v, scale, .. } => {
                let shape = graph.attention_shape(op).expect("an attention has a shape");
                let stats = &reference.softmax;
                // A score sums `d` products, each off by its operands' errors.
                let inputs = f64::from(scale)
                    * f64::from(shape.head_dim).sqrt()
                    * (s[q.index()] * rms(k) + s[k.index()] * rms(q));
                let weight = u16 * (1.0 + stats.spread)
                    + up * f64::from(shape.head_dim.div_ceil(16)).sqrt() * stats.logit
                    + inputs;
                stats.sensitivity * weight + up * stats.partials_walk + s[v.index()] + u16 * out
            }
            OpKind::Embed { .. } => u16 * out,
            OpKind::MaskBias { .. } => 0.0,
            OpKind::MeanPool { x, .. } => s[x.index()],
        };
    }
    let n = data(output).len().max(1) as f64;
    let spread = (2.0 * n.ln()).sqrt() + 1.0;
    spread.max(4.0) * error[output.index()].max(f64::MIN_POSITIVE)
}
