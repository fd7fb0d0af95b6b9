//! Arithmetic shared by the device and the host: f16 rounding, the AMP's block accumulation, the epilogue,
//! the seeded generator of inputs and weights, the float64 host reference and the numerical check.
//!
//! The AMP sums the products of each 16-deep block in f32 (products of f16 values are exact in f32), in
//! order, then adds the block sum to the partial and rounds the partial to the partials type. The epilogue
//! computes in f32 and rounds once to f16. Transcendentals come from `libm`, so results are bit-identical on
//! every platform.

use crate::ir::{DType, Graph, OpKind, Value, ValueRole};
use half::f16;
use rayon::prelude::*;

pub const GELU_SQRT_2_OVER_PI: f32 = 0.797_884_6;
pub const GELU_CUBIC: f32 = 0.044_715;

/// Unit roundoff of a type (half an ulp at 1).
pub fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-11),
        DType::F32 => 2f64.powi(-24),
    }
}

/// Rounds an f32 to the partials type, returned as f32.
#[inline]
pub fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::F32 => v,
    }
}

#[inline]
pub fn gelu_tanh_f32(x: f32) -> f32 {
    let inner = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    0.5 * x * (1.0 + libm::tanhf(inner))
}

pub fn gelu_tanh_f64(x: f64) -> f64 {
    0.5 * x
        * (1.0 + (f64::from(GELU_SQRT_2_OVER_PI) * (x + f64::from(GELU_CUBIC) * x * x * x)).tanh())
}

/// One AMP vertex: `out[r][c] (partials) = Σ_blocks round(partial + Σ_16 a[r][k] b[k][c])`.
/// `a` is `rows x depth` (stride `a_stride`), `b` is `depth x cols` (stride `b_stride`), both already
/// widened to f32; `depth` is a multiple of the block depth (zero padded). `out` is `rows x cols` (stride
/// `out_stride`) in f32 holding values of the partials type.
#[allow(clippy::too_many_arguments)]
pub fn amp_matmul(
    a: &[f32],
    a_stride: usize,
    b: &[f32],
    b_stride: usize,
    out: &mut [f32],
    out_stride: usize,
    rows: usize,
    depth: usize,
    cols: usize,
    block_depth: usize,
    partials: DType,
) {
    let mut block_sum = vec![0f32; cols];
    for r in 0..rows {
        let arow = &a[r * a_stride..r * a_stride + depth];
        let orow = &mut out[r * out_stride..r * out_stride + cols];
        orow.fill(0.0);
        for k0 in (0..depth).step_by(block_depth) {
            block_sum.fill(0.0);
            for k in k0..k0 + block_depth {
                let av = arow[k];
                if av == 0.0 {
                    continue;
                }
                let brow = &b[k * b_stride..k * b_stride + cols];
                for (s, &bv) in block_sum.iter_mut().zip(brow) {
                    *s += av * bv;
                }
            }
            for (o, &s) in orow.iter_mut().zip(&block_sum) {
                *o = round_to(partials, *o + s);
            }
        }
    }
}

/// The epilogue of a matmul: `f16(gelu?(partial + bias?))`, computed in f32.
#[inline]
pub fn epilogue(partial: f32, bias: Option<f32>, gelu: bool) -> f16 {
    let mut v = partial + bias.unwrap_or(0.0);
    if gelu {
        v = gelu_tanh_f32(v);
    }
    f16::from_f32(v)
}

/// SplitMix64: the seeded generator of inputs, weights and synthetic exchange patterns.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The host data of a value (input or weight): row-major f16, from the seed and the value's name.
/// Weights are scaled by 1/sqrt(fan_in).
pub fn generate(value: &Value, seed: u64) -> Vec<f16> {
    let name_hash = blake3::hash(value.name.as_bytes());
    let salt = u64::from_le_bytes(name_hash.as_bytes()[..8].try_into().expect("8 bytes"));
    let mut rng = SplitMix64(seed ^ salt);
    let scale = if value.role == ValueRole::Weight {
        1.0 / f64::from(value.fan_in.max(1)).sqrt()
    } else {
        1.0
    };
    (0..value.elements())
        .map(|_| f16::from_f64(rng.uniform() * scale))
        .collect()
}

/// Evaluates the graph in float64 from the (f16) host data of its inputs and weights; returns every
/// value's data, indexed by value id (empty for values never computed).
pub fn reference(graph: &Graph, host: &[Vec<f16>]) -> Vec<Vec<f64>> {
    let mut data: Vec<Vec<f64>> = host
        .iter()
        .map(|v| v.iter().map(|x| x.to_f64()).collect())
        .collect();
    data.resize(graph.values.len(), Vec::new());
    for op in &graph.ops {
        let out = graph.value(op.out);
        let n = out.cols as usize;
        let result: Vec<f64> = match op.kind {
            OpKind::MatMul { a, b } => {
                let k = graph.value(a).cols as usize;
                let (av, bv) = (&data[a.index()], &data[b.index()]);
                av.par_chunks(k)
                    .flat_map_iter(|arow| {
                        let mut row = vec![0f64; n];
                        for (kk, &x) in arow.iter().enumerate() {
                            for (o, &w) in row.iter_mut().zip(&bv[kk * n..(kk + 1) * n]) {
                                *o += x * w;
                            }
                        }
                        row
                    })
                    .collect()
            }
            OpKind::AddBias { x, bias } => {
                let bv = &data[bias.index()];
                data[x.index()]
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| v + bv[i % n])
                    .collect()
            }
            OpKind::GeluTanh { x } => data[x.index()].iter().map(|&v| gelu_tanh_f64(v)).collect(),
        };
        data[op.out.index()] = result;
    }
    data
}

/// The outcome of comparing the device's output with the host reference.
#[derive(Clone, Debug)]
pub struct Check {
    pub maximum_absolute_error: f64,
    pub rms_error: f64,
    pub tolerance: f64,
    pub checked: usize,
    pub non_finite: usize,
    pub pass: bool,
}

/// The tolerance on the final output's absolute error, derived from the precision: each matmul rounds its
/// partial once per 16-deep block (a random walk of `ceil(k/16)` roundings at the partials' unit roundoff)
/// and every f16 value on the way rounds once more; four standard deviations of that, relative to the
/// largest reference magnitude.
pub fn tolerance(graph: &Graph, max_reference: f64) -> f64 {
    let u16 = unit_roundoff(DType::F16);
    let up = unit_roundoff(graph.partials);
    let mut relative = 0.0;
    for op in &graph.ops {
        if let OpKind::MatMul { a, .. } = op.kind {
            relative += up * f64::from(graph.value(a).cols.div_ceil(16)).sqrt() + u16;
        }
    }
    4.0 * relative * max_reference.max(f64::MIN_POSITIVE)
}

pub fn check(graph: &Graph, device: &[f16], reference: &[f64]) -> Check {
    let max_reference = reference.iter().fold(0f64, |m, v| m.max(v.abs()));
    let tolerance = tolerance(graph, max_reference);
    let mut max_err = 0f64;
    let mut sum_sq = 0f64;
    let mut non_finite = 0;
    for (d, r) in device.iter().zip(reference) {
        let d = d.to_f64();
        if !d.is_finite() {
            non_finite += 1;
            continue;
        }
        let e = (d - r).abs();
        max_err = max_err.max(e);
        sum_sq += e * e;
    }
    let checked = device.len().min(reference.len());
    let pass = device.len() == reference.len() && non_finite == 0 && max_err <= tolerance;
    Check {
        maximum_absolute_error: max_err,
        rms_error: (sum_sq / checked.max(1) as f64).sqrt(),
        tolerance,
        checked,
        non_finite,
        pass,
    }
}
