//! The AMP vertex's arithmetic, shared by the device and the tests: per 16-deep block of the depth,
//! each output's products of f16 values summed in f32 from zero in depth order, added to the
//! partial and rounded to the partials' type.
//!
//! Contract: [`amp_matmul`] gives the same bits whichever way its loops group the outputs and
//! whichever instruction set they are compiled for (AVX2 where the CPU has it): products and sums are
//! the same IEEE operations, never fused.

use super::round_slice;
use crate::ir::DType;

/// One AMP vertex: `out[r][c] (partials) = Σ_blocks round(partial + Σ_16 a[r][k] b[k][c])`.
/// `a` is `rows x depth`, `b` is `depth x cols`, both already widened to f32; `depth` is a multiple
/// of the block depth (zero padded). `out` is `rows x cols` in f32 holding values of the partials
/// type. On an x86-64 with AVX2 the same loops are compiled for it (the products and sums are the
/// same IEEE operations, never fused, so the result is bit-identical).
pub fn amp_matmul(a: &[f32], b: &[f32], out: &mut [f32], shape: &AmpShape) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { amp_matmul_avx2(a, b, out, shape) };
    }
    amp_loops(a, b, out, shape);
}

/// The sizes of an [`amp_matmul`] and the strides of its operands, in elements.
pub struct AmpShape {
    pub a_stride: usize,
    pub b_stride: usize,
    pub out_stride: usize,
    pub rows: usize,
    pub depth: usize,
    pub cols: usize,
    pub block_depth: usize,
    pub partials: DType,
}

/// [`amp_loops`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn amp_matmul_avx2(a: &[f32], b: &[f32], out: &mut [f32], shape: &AmpShape) {
    amp_loops(a, b, out, shape);
}

/// [`amp_matmul`]'s loops. [`ROWS`] rows' outputs are summed [`LANES`] columns at a time (rows and
/// columns left over fewer at a time), the sums held in registers across the block's depth.
/// Whatever the grouping, each block's sum of an output starts at zero and adds its products in
/// depth order, then joins the partial. A zero of `a` adds nothing: where `b` is finite its product
/// is ±0, which leaves every sum as it was (a sum that starts at +0 and adds products of halves is
/// never -0); where `b` holds an infinity or a NaN, each row's zeros are skipped, a row at a time.
#[inline(always)]
fn amp_loops(a: &[f32], b: &[f32], out: &mut [f32], shape: &AmpShape) {
    let &AmpShape {
        a_stride,
        b_stride,
        out_stride,
        rows,
        depth,
        cols,
        block_depth,
        partials,
    } = shape;
    let finite = (0..depth).all(|k| {
        b[k * b_stride..k * b_stride + cols]
            .iter()
            .all(|v| v.is_finite())
    });
    let lanes = cols - cols % LANES;
    let strides = (a_stride, b_stride, out_stride);
    let mut r0 = 0;
    while r0 < rows {
        let group = if finite && rows - r0 >= ROWS { ROWS } else { 1 };
        for r in r0..r0 + group {
            out[r * out_stride..r * out_stride + cols].fill(0.0);
        }
        for k0 in (0..depth).step_by(block_depth) {
            let a = &a[r0 * a_stride + k0..];
            let b = &b[k0 * b_stride..];
            let o = &mut out[r0 * out_stride..];
            for c0 in (0..lanes).step_by(LANES) {
                let (b, o) = (&b[c0..], &mut o[c0..]);
                match group {
                    ROWS => block_sums::<ROWS, LANES>(a, b, o, strides, block_depth, finite),
                    _ => block_sums::<1, LANES>(a, b, o, strides, block_depth, finite),
                }
            }
            for c in lanes..cols {
                let (b, o) = (&b[c..], &mut o[c..]);
                match group {
                    ROWS => block_sums::<ROWS, 1>(a, b, o, strides, block_depth, finite),
                    _ => block_sums::<1, 1>(a, b, o, strides, block_depth, finite),
                }
            }
            for r in r0..r0 + group {
                round_slice(partials, &mut out[r * out_stride..r * out_stride + cols]);
            }
        }
        r0 += group;
    }
}

/// Rows [`amp_loops`] sums at once where that many are left and `b` is finite.
const ROWS: usize = 4;
/// Columns it sums at once where that many are left: with [`ROWS`], eight vectors of AVX2.
const LANES: usize = 16;

/// Adds to `R x N` outputs of `out` their block's sums `Σ_j a[i][j] · b[j][c]`, each from zero in
/// depth order; unless `finite` (`b` holds no infinity or NaN), a zero of `a` is skipped. `a`, `b`
/// and `out` start at the block's first element; `strides` are theirs, in that order.
#[inline(always)]
fn block_sums<const R: usize, const N: usize>(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    (a_stride, b_stride, out_stride): (usize, usize, usize),
    block_depth: usize,
    finite: bool,
) {
    let mut sums = [[0f32; N]; R];
    for j in 0..block_depth {
        let lane = &b[j * b_stride..j * b_stride + N];
        for (i, sums) in sums.iter_mut().enumerate() {
            let av = a[i * a_stride + j];
            if !finite && av == 0.0 {
                continue;
            }
            for (s, &bv) in sums.iter_mut().zip(lane) {
                *s += av * bv;
            }
        }
    }
    for (i, sums) in sums.iter().enumerate() {
        let row = &mut out[i * out_stride..i * out_stride + N];
        for (o, s) in row.iter_mut().zip(sums) {
            *o += s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn the_amp_sums_each_output_block_by_block_in_depth_order() {
        // Every output summed alone, as the AMP's contract states it: per 16-deep block a sum from
        // zero in depth order, zeros of `a` skipped, added to the partial and rounded to its type.
        let mut rng = crate::rng::SplitMix64(7);
        for (rows, cols, partials, infinities) in [
            (5, 16, DType::F16, false),
            (9, 37, DType::F32, false),
            (3, 12, DType::F16, false),
            (4, 150, DType::F32, false),
            (6, 64, DType::F16, false),
            (9, 81, DType::F16, true),
            (4, 16, DType::F32, true),
        ] {
            let (depth, block) = (48, 16);
            let mut value = |zero_every: u64| {
                let v = f16::from_f64(rng.uniform() * 8.0 - 4.0).to_f32();
                if rng.below(zero_every) == 0 { 0.0 } else { v }
            };
            let mut a: Vec<f32> = (0..rows * depth).map(|_| value(5)).collect();
            let mut b: Vec<f32> = (0..depth * cols).map(|_| value(50)).collect();
            // Depth 1 of `a` is zero in every row, so the infinities of `b` it meets add nothing.
            if infinities {
                (0..rows).for_each(|r| a[r * depth + 1] = 0.0);
                (0..cols)
                    .step_by(2)
                    .for_each(|c| b[cols + c] = f32::INFINITY);
            }
            let shape = AmpShape {
                a_stride: depth,
                b_stride: cols,
                out_stride: cols,
                rows,
                depth,
                cols,
                block_depth: block,
                partials,
            };
            let mut out = vec![f32::NAN; rows * cols];
            amp_matmul(&a, &b, &mut out, &shape);
            // The loops as compiled for any x86-64, whichever `amp_matmul` chose.
            let mut portable = vec![f32::NAN; rows * cols];
            amp_loops(&a, &b, &mut portable, &shape);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&portable), "{rows}x{cols}");
            for r in 0..rows {
                for c in 0..cols {
                    let mut partial = 0f32;
                    for k0 in (0..depth).step_by(block) {
                        let mut sum = 0f32;
                        for k in k0..k0 + block {
                            if a[r * depth + k] != 0.0 {
                                sum += a[r * depth + k] * b[k * cols + c];
                            }
                        }
                        partial += sum;
                        if partials == DType::F16 {
                            partial = f16::from_f32(partial).to_f32();
                        }
                    }
                    assert_eq!(
                        out[r * cols + c].to_bits(),
                        partial.to_bits(),
                        "{rows}x{cols} ({r}, {c})"
                    );
                }
            }
        }
    }
}
