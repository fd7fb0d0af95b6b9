//! Arithmetic shared by the device and the host: f16 rounding, the AMP's block accumulation, the epilogue,
//! the online softmax, how a vertex's rows are dealt to the workers (which fixes the order sums are
//! formed in), the seeded generator of inputs and weights (booleans 1 or 0), the float64 host
//! reference and the numerical check. A boolean is rounded, and its unit roundoff taken, as the f16
//! the device holds it as.
//!
//! The AMP sums the products of each 16-deep block in f32 (products of f16 values are exact in f32), in
//! order, then adds the block sum to the partial and rounds the partial to the partials type. The epilogue
//! computes in f32 and rounds once to f16. Transcendentals come from `libm`, so results are bit-identical on
//! every platform.

use crate::ids::ValueId;
use crate::ir::{DType, Value, ValueRole};
use crate::isa::Activation;
use crate::rng::SplitMix64;
use half::f16;

mod amp;
mod reference;
mod rounding;
mod tolerance;
mod vector;
pub use amp::{AmpShape, amp_matmul};
pub use reference::{Reference, reference};
pub use rounding::{add_rounded, round_f16, round_slice, round_to};
pub use tolerance::tolerance;
pub use vector::{
    binary_f32, binary_f64, reduce_row_f32, reduce_row_f64, select, softmax_row_f32,
    softmax_row_f64, unary_f32, unary_f64,
};

pub const GELU_SQRT_2_OVER_PI: f32 = 0.797_884_6;
pub const GELU_CUBIC: f32 = 0.044_715;

/// Unit roundoff of a type (half an ulp at 1; a boolean's is f16's, as the device holds it).
pub fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::Bool => 2f64.powi(-11),
        DType::F32 => 2f64.powi(-24),
        DType::I64 => 0.0,
    }
}

#[inline]
pub fn gelu_tanh_f32(x: f32) -> f32 {
    let inner = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    0.5 * x * (1.0 + libm::tanhf(inner))
}

/// `0.5 x (1 + erf(x / √2))` in float64.
pub fn gelu_erf_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

pub fn gelu_tanh_f64(x: f64) -> f64 {
    0.5 * x
        * (1.0 + (f64::from(GELU_SQRT_2_OVER_PI) * (x + f64::from(GELU_CUBIC) * x * x * x)).tanh())
}

/// The epilogue of a matmul: `f16(activation?(partial + bias?) + residual?)`, computed in f32.
#[inline]
pub fn epilogue(
    partial: f32,
    bias: Option<f32>,
    activation: Option<Activation>,
    residual: Option<f32>,
) -> f16 {
    let mut v = partial + bias.unwrap_or(0.0);
    v = match activation {
        None => v,
        Some(Activation::GeluTanh) => gelu_tanh_f32(v),
        Some(Activation::GeluErf) => gelu_erf_f32(v),
    };
    f16::from_f32(v + residual.unwrap_or(0.0))
}

/// `0.5 x (1 + erf(x / √2))` in f32.
#[inline]
pub fn gelu_erf_f32(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// One row of a layer norm, in f32: its moments ([`row_moments`]), the biased variance
/// `squared deviations / n`, and the row normalized ([`normalized_row`]).
pub fn layer_norm_row(x: &[f32], gamma: &[f32], beta: &[f32], epsilon: f32) -> Vec<f32> {
    let (mean, squares) = row_moments(x);
    let variance = squares / x.len().max(1) as f32;
    normalized_row(x, mean, variance, gamma, beta, epsilon)
}

/// A row's moments in f32, two passes summed in order: its mean (the sum over the count) and the
/// sum of its squared deviations from that mean.
pub fn row_moments(x: &[f32]) -> (f32, f32) {
    let n = x.len().max(1) as f32;
    let mean = x.iter().sum::<f32>() / n;
    let squares = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>();
    (mean, squares)
}

/// The mean and biased variance of a row split into equal column blocks of `count` elements, from
/// each block's [`row_moments`] in block order, in f32 (the pairwise update of Chan, Golub and
/// LeVeque for equal counts): `mean = Σ mean_j / blocks`, `squares = Σ (squares_j + count ·
/// (mean_j − mean)²)`, `variance = squares / (count · blocks)`.
pub fn combined_moments(blocks: &[(f32, f32)], count: u32) -> (f32, f32) {
    let b = blocks.len().max(1) as f32;
    let n = count as f32;
    let mean = blocks.iter().map(|m| m.0).sum::<f32>() / b;
    let squares = blocks
        .iter()
        .map(|&(m, s)| s + n * ((m - mean) * (m - mean)))
        .sum::<f32>();
    (mean, squares / (n * b))
}

/// A row normalized in f32: `inverse = 1/√(variance + epsilon)` and
/// `out[c] = f16((x[c] − mean) · inverse · gamma[c] + beta[c])`.
pub fn normalized_row(
    x: &[f32],
    mean: f32,
    variance: f32,
    gamma: &[f32],
    beta: &[f32],
    epsilon: f32,
) -> Vec<f32> {
    let inverse = 1.0 / (variance + epsilon).sqrt();
    x.iter()
        .zip(gamma.iter().zip(beta))
        .map(|(v, (g, b))| round_f16((v - mean) * inverse * g + b))
        .collect()
}

/// Rows per worker when `rows` are dealt to `workers` as evenly as possible, the first `rows %
/// workers` one more: how the device's workers share a vertex's rows, in order.
pub fn dealt(rows: u32, workers: u32) -> impl Iterator<Item = u32> {
    (0..workers).map(move |w| rows / workers + u32::from(w < rows % workers))
}

/// One step of the online softmax over a block of scoresᵀ (`keys x queries`, dense, values of the
/// partials type). Per query column `c`, with `m` the running max of the raw scores (`-inf` before the
/// first step) and `l` the running sum:
/// - `m' = max(m, max_r s[r][c])` over the unmasked rows;
/// - `rescale[c] = exp(scale · (m - m'))` in f32 (0 on the first step);
/// - `p[r][c] = f16(exp(f16(scale · (s[r][c] - m'))))`: the exponent is rounded to f16 and the exp is
///   the vector unit's f16 transcendental; masked scores give 0;
/// - `l' = l · rescale[c] + Σ_w Σ_{r in w} p[r][c]`, in f32: the rows are dealt to `workers` in
///   contiguous runs as evenly as possible (the first `keys % workers` one longer), each run summed in
///   row order from 0, and the runs' sums added to `l · rescale[c]` in run order.
///
/// With a key bias `b` (an additive mask), key `r`'s scores are `s[r][c] + b[r] / scale` in f32
/// before all of the above: the bias is added to the scaled score (`-inf` masks the key).
///
/// A column with every score masked so far keeps `m = -inf`, `l = 0` and rescale 1. Returns the
/// probabilities (dense, f16 values) and the rescale factors; updates `max` and `sum`.
#[allow(clippy::too_many_arguments)]
pub fn softmax_block(
    scores: &[f32],
    keys: usize,
    queries: usize,
    scale: f32,
    mask: Option<(u32, u32)>,
    key_bias: Option<&[f32]>,
    first: bool,
    max: &mut [f32],
    sum: &mut [f32],
    workers: usize,
) -> (Vec<f32>, Vec<f32>) {
    let biased;
    let scores = match key_bias {
        Some(bias) => {
            biased = (0..keys * queries)
                .map(|i| scores[i] + bias[i / queries] / scale)
                .collect::<Vec<f32>>();
            &biased[..]
        }
        None => scores,
    };
    let visible = |r: usize, c: usize| {
        mask.is_none_or(|(first_key, first_query)| {
            first_key as usize + r <= first_query as usize + c
        })
    };
    let mut probabilities = vec![0f32; keys * queries];
    let mut rescale = vec![1f32; queries];
    let runs: Vec<std::ops::Range<usize>> = dealt(keys as u32, workers.max(1) as u32)
        .scan(0, |start, len| {
            let run = *start..*start + len as usize;
            *start = run.end;
            Some(run)
        })
        .filter(|run| !run.is_empty())
        .collect();
    for c in 0..queries {
        let old = if first { f32::NEG_INFINITY } else { max[c] };
        let new = (0..keys)
            .filter(|&r| visible(r, c))
            .map(|r| scores[r * queries + c])
            .fold(old, f32::max);
        let previous_sum = if first { 0.0 } else { sum[c] };
        if new == f32::NEG_INFINITY {
            max[c] = new;
            sum[c] = previous_sum;
            continue;
        }
        rescale[c] = if old == f32::NEG_INFINITY {
            0.0
        } else {
            libm::expf(scale * (old - new))
        };
        let mut total = previous_sum * rescale[c];
        for run in &runs {
            let mut run_sum = 0f32;
            for r in run.clone().filter(|&r| visible(r, c)) {
                let x = round_f16(scale * (scores[r * queries + c] - new));
                let p = round_f16(libm::expf(x));
                probabilities[r * queries + c] = p;
                run_sum += p;
            }
            total += run_sum;
        }
        max[c] = new;
        sum[c] = total;
    }
    (probabilities, rescale)
}

/// Merges flash states of one query block: each state is `rows` accumulator rows, its max row and its
/// sum row, over `cols` queries (dense f32). Per query, with `M` the largest max, each state weighs
/// `w = exp(scale · (max - M))` (0 for a state that saw no key), normalised by the weighted sums to
/// `v = w / Σ w · sum`, and the output is `f16(Σ v · accumulator)`, accumulated in f32 in state
/// order.
pub fn combine(states: &[Vec<f32>], rows: usize, cols: usize, scale: f32) -> Vec<f32> {
    let mut out = vec![0f32; rows * cols];
    for c in 0..cols {
        let top = states
            .iter()
            .map(|s| s[rows * cols + c])
            .fold(f32::NEG_INFINITY, f32::max);
        let weights: Vec<f32> = states
            .iter()
            .map(|s| {
                let m = s[rows * cols + c];
                if m == f32::NEG_INFINITY {
                    0.0
                } else {
                    libm::expf(scale * (m - top))
                }
            })
            .collect();
        let total: f32 = states
            .iter()
            .zip(&weights)
            .map(|(s, w)| w * s[(rows + 1) * cols + c])
            .sum();
        let weights: Vec<f32> = weights.iter().map(|w| w / total).collect();
        for r in 0..rows {
            let acc: f32 = states
                .iter()
                .zip(&weights)
                .map(|(s, w)| w * s[r * cols + c])
                .sum();
            out[r * cols + c] = round_f16(acc);
        }
    }
    out
}

/// The host data of a value (input or weight), row-major, from the seed and the value's name: for a
/// float value uniform numbers in [-1, 1) rounded to the value's type (to f16 for f16), weights scaled
/// by 1/sqrt(fan_in); for an integer (i64) value, integers uniform in `0..entries` (the rows of the
/// table it indexes), or, when `entries` is 0 (no table: a key-padding mask), 1 over the first three
/// quarters of each row and 0 after (real tokens, then padding); for a boolean value, 1 or 0 with
/// even odds. f32 holds every number exactly.
pub fn generate(value: &Value, seed: u64, entries: u32) -> Vec<f32> {
    let name_hash = blake3::hash(value.name.as_bytes());
    let salt = u64::from_le_bytes(name_hash.as_bytes()[..8].try_into().expect("8 bytes"));
    let mut rng = SplitMix64(seed ^ salt);
    if value.dtype == DType::I64 && entries == 0 {
        let kept = (value.cols * 3).div_ceil(4) as u64;
        return (0..value.elements())
            .map(|i| f32::from(u8::from(i % u64::from(value.cols.max(1)) < kept)))
            .collect();
    }
    if value.dtype == DType::Bool {
        return (0..value.elements())
            .map(|_| f32::from(u8::from(rng.uniform() >= 0.0)))
            .collect();
    }
    if value.dtype == DType::I64 {
        let entries = f64::from(entries);
        return (0..value.elements())
            .map(|_| {
                ((rng.uniform() + 1.0) / 2.0 * entries)
                    .floor()
                    .min(entries - 1.0)
                    .max(0.0) as f32
            })
            .collect();
    }
    let scale = if value.role == ValueRole::Weight {
        1.0 / f64::from(value.fan_in.max(1)).sqrt()
    } else {
        1.0
    };
    (0..value.elements())
        .map(|_| match value.dtype {
            DType::F32 => (rng.uniform() * scale) as f32,
            _ => f16::from_f64(rng.uniform() * scale).to_f32(),
        })
        .collect()
}

/// `x` within the largest finite magnitude of `dtype` (65504 for f16), as a mask bias is rounded.
pub fn saturate(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F16 | DType::Bool => x.clamp(-65504.0, 65504.0),
        DType::F32 => x.clamp(f64::from(f32::MIN), f64::from(f32::MAX)),
        DType::I64 => x,
    }
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

/// Compares one output's data (the device's, or the host's for an output a host operation makes; f32,
/// holding values of the output's type) with the reference's.
pub fn check(device: &[f32], reference: &Reference, output: ValueId) -> Check {
    let reference_data = &reference.data[output.index()];
    let tolerance = tolerance(reference, output);
    let reference = reference_data;
    let mut max_err = 0f64;
    let mut sum_sq = 0f64;
    let mut non_finite = 0;
    for (d, r) in device.iter().zip(reference) {
        let d = f64::from(*d);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores in two blocks, stepped with the online softmax, accumulated and merged, agree with a
    /// one-pass float64 softmax-weighted sum; a masked column stays empty until its first key.
    #[test]
    fn online_softmax_over_blocks_matches_one_pass() {
        let (keys, queries, scale) = (40usize, 3usize, 0.3f32);
        let mut rng = SplitMix64(5);
        let scores: Vec<f32> = (0..keys * queries)
            .map(|_| (rng.uniform() * 8.0) as f32)
            .collect();
        let values: Vec<f32> = (0..keys).map(|_| rng.uniform() as f32).collect();
        let (mut max, mut sum) = (vec![0f32; queries], vec![0f32; queries]);
        // One accumulator row (a head dimension of 1) per query.
        let mut acc = vec![0f32; queries];
        for (first, rows) in [(true, 0..25), (false, 25..keys)] {
            let block = &scores[rows.start * queries..rows.end * queries];
            let n = rows.len();
            let (p, rescale) = softmax_block(
                block, n, queries, scale, None, None, first, &mut max, &mut sum, 6,
            );
            for c in 0..queries {
                let weighted: f32 = (0..n)
                    .map(|r| p[r * queries + c] * values[rows.start + r])
                    .sum();
                acc[c] = if first {
                    weighted
                } else {
                    acc[c] * rescale[c] + weighted
                };
            }
        }
        let mut state = acc.clone();
        state.extend_from_slice(&max);
        state.extend_from_slice(&sum);
        let out = combine(&[state], 1, queries, scale);
        for c in 0..queries {
            let logits: Vec<f64> = (0..keys)
                .map(|r| f64::from(scale) * f64::from(scores[r * queries + c]))
                .collect();
            let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|x| (x - top).exp()).collect();
            let expected: f64 = w
                .iter()
                .zip(&values)
                .map(|(w, v)| w * f64::from(*v))
                .sum::<f64>()
                / w.iter().sum::<f64>();
            let error = (f64::from(out[c]) - expected).abs();
            assert!(error < 4e-3, "query {c}: {} against {expected}", out[c]);
        }

        // Causal: key r is visible to query c when r <= c; query 0 sees key 0 only.
        let (mut max, mut sum) = (vec![0f32; queries], vec![0f32; queries]);
        let (p, _) = softmax_block(
            &scores,
            keys,
            queries,
            scale,
            Some((0, 0)),
            None,
            true,
            &mut max,
            &mut sum,
            6,
        );
        assert_eq!(p[0], 1.0, "query 0 sees only key 0");
        assert!((0..keys).skip(1).all(|r| p[r * queries] == 0.0));
        // A block whose keys all come after every query leaves the state empty.
        let (mut max, mut sum) = (vec![0f32; queries], vec![0f32; queries]);
        softmax_block(
            &scores,
            keys,
            queries,
            scale,
            Some((10, 0)),
            None,
            true,
            &mut max,
            &mut sum,
            6,
        );
        assert!(max.iter().all(|m| *m == f32::NEG_INFINITY) && sum.iter().all(|s| *s == 0.0));
    }

    /// The workers' runs change only the order the sum is formed in: the maxima and probabilities
    /// are the same whatever the number of workers, the sums within f32 rounding, and a run of keys a
    /// worker alone holds is summed on its own. The keys are many enough that the two orders round
    /// differently, so a sum formed in row order fails.
    #[test]
    fn the_sum_is_formed_per_worker_run_of_keys() {
        let (keys, queries, scale) = (601usize, 4usize, 0.7f32);
        let mut rng = SplitMix64(11);
        let scores: Vec<f32> = (0..keys * queries)
            .map(|_| (rng.uniform() * 4.0) as f32)
            .collect();
        let step = |workers| {
            let (mut max, mut sum) = (vec![0f32; queries], vec![0f32; queries]);
            let (p, _) = softmax_block(
                &scores, keys, queries, scale, None, None, true, &mut max, &mut sum, workers,
            );
            (p, max, sum)
        };
        let (p1, m1, s1) = step(1);
        let (p6, m6, s6) = step(6);
        assert_eq!((&p1, &m1), (&p6, &m6));
        assert_ne!(s1, s6, "the data must tell the two orders apart");
        for c in 0..queries {
            assert!((s1[c] - s6[c]).abs() <= 64.0 * f32::EPSILON * s1[c], "{c}");
            // Six workers: runs of 101, 100, 100, 100, 100, 100 keys, summed from 0, then added in
            // order.
            let column =
                |r: std::ops::Range<usize>| -> f32 { r.map(|r| p6[r * queries + c]).sum() };
            let starts = [0, 101, 201, 301, 401, 501, 601];
            let expected = starts
                .windows(2)
                .fold(0f32, |total, w| total + column(w[0]..w[1]));
            assert_eq!(s6[c], expected, "{c}");
        }
    }

    #[test]
    fn rows_are_dealt_as_evenly_as_possible() {
        assert_eq!(dealt(14, 6).collect::<Vec<_>>(), [3, 3, 2, 2, 2, 2]);
        assert_eq!(dealt(4, 6).collect::<Vec<_>>(), [1, 1, 1, 1, 0, 0]);
        assert_eq!(dealt(14, 6).sum::<u32>(), 14);
    }

    #[test]
    fn a_layer_norm_row_matches_float64_and_honours_epsilon() {
        let x: Vec<f32> = (0..40).map(|i| ((i * 7 % 13) as f32 - 6.0) / 3.0).collect();
        let gamma: Vec<f32> = (0..40).map(|i| 0.5 + i as f32 / 80.0).collect();
        let beta: Vec<f32> = (0..40).map(|i| i as f32 / 100.0 - 0.2).collect();
        let out = layer_norm_row(&x, &gamma, &beta, 1e-12);
        let n = x.len() as f64;
        let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = x
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        for (i, o) in out.iter().enumerate() {
            let expected =
                (f64::from(x[i]) - mean) / var.sqrt() * f64::from(gamma[i]) + f64::from(beta[i]);
            assert!(
                (f64::from(*o) - expected).abs() <= 2e-3 * expected.abs().max(1.0),
                "{i}"
            );
        }
        // A constant row is all beta with a real epsilon, and not with none.
        let flat = layer_norm_row(&[2.0; 8], &[1.0; 8], &[0.25; 8], 1e-5);
        assert!(flat.iter().all(|&v| v == 0.25), "{flat:?}");
        assert!(layer_norm_row(&[2.0; 8], &[1.0; 8], &[0.25; 8], 0.0)[0].is_nan());
    }

    #[test]
    fn an_epilogue_adds_its_residual_after_the_activation() {
        let erf = epilogue(1.0, Some(0.5), Some(Activation::GeluErf), Some(-2.0)).to_f32();
        let expected = gelu_erf_f64(1.5) - 2.0;
        assert!(
            (f64::from(erf) - expected).abs() < 2e-3,
            "{erf} against {expected}"
        );
        let tanh = epilogue(1.0, Some(0.5), Some(Activation::GeluTanh), None).to_f32();
        assert!((f64::from(tanh) - gelu_tanh_f64(1.5)).abs() < 2e-3);
        assert_ne!(erf, tanh - 2.0, "erf and tanh GELU differ at 1.5");
    }

    #[test]
    fn a_key_bias_adds_to_the_scaled_scores_and_minus_infinity_masks() {
        let (keys, queries, scale) = (4, 3, 0.5f32);
        let scores: Vec<f32> = (0..keys * queries).map(|i| (i % 5) as f32 - 2.0).collect();
        let bias = [0.0f32, -1.0, f32::NEG_INFINITY, 0.5];
        let run = |bias: Option<&[f32]>| {
            let (mut max, mut sum) = (vec![0f32; queries], vec![0f32; queries]);
            let (p, _) = softmax_block(
                &scores, keys, queries, scale, None, bias, true, &mut max, &mut sum, 6,
            );
            (p, sum)
        };
        let (p, sum) = run(Some(&bias));
        for c in 0..queries {
            assert_eq!(p[2 * queries + c], 0.0, "a -inf bias masks key 2");
            // Probabilities follow exp(scale · s + b) up to the common max.
            let logit = |r: usize| f64::from(scale * scores[r * queries + c] + bias[r]);
            let ratio = f64::from(p[3 * queries + c]) / f64::from(p[c]);
            let expected = (logit(3) - logit(0)).exp();
            assert!(
                (ratio / expected - 1.0).abs() < 4e-3,
                "{c}: {ratio} against {expected}"
            );
            assert!(sum[c] > 0.0);
        }
        let (unbiased, _) = run(None);
        assert_ne!(p, unbiased);
    }

    /// A row split into equal column blocks whose means differ widely: the blocks' moments combined
    /// give the whole row's mean and variance to f32 precision, and so the normalized row to an f16
    /// step; without the blocks' mean deviations the variance is far off.
    #[test]
    fn combined_moments_of_column_blocks_are_the_whole_rows() {
        let mut rng = SplitMix64(17);
        let (blocks, count) = (8usize, 48usize);
        let x: Vec<f32> = (0..blocks * count)
            .map(|i| (i / count) as f32 * 3.0 + (rng.uniform() as f32 - 0.5))
            .collect();
        let (mean, squares) = row_moments(&x);
        let variance = squares / x.len() as f32;
        let parts: Vec<(f32, f32)> = x.chunks(count).map(row_moments).collect();
        let (m, v) = combined_moments(&parts, count as u32);
        assert!((m - mean).abs() <= 1e-5 * mean.abs(), "{m} vs {mean}");
        assert!((v - variance).abs() <= 1e-5 * variance, "{v} vs {variance}");
        let ones = vec![1.0f32; x.len()];
        let zeros = vec![0.0f32; x.len()];
        // Equal but where the f32 difference crosses an f16 rounding boundary: one f16 step apart.
        let split = normalized_row(&x, m, v, &ones, &zeros, 1e-5);
        let whole = layer_norm_row(&x, &ones, &zeros, 1e-5);
        for (a, b) in split.iter().zip(&whole) {
            assert!((a - b).abs() <= b.abs() * 2f32.powi(-10), "{a} vs {b}");
        }
        let within: f32 = parts.iter().map(|p| p.1).sum::<f32>() / x.len() as f32;
        assert!((within - variance).abs() > 0.5 * variance);
    }
}
