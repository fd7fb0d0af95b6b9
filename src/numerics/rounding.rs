//! Rounding to the types the device and the host hold values in: f16 (and booleans, held as f16)
//! rounded to nearest, ties to even, bit for bit as IEEE 754's conversion (and `half`'s) rounds;
//! f32 kept; i64 to the nearest integer.
//!
//! Contract: [`round_f16`] gives the bits `f16::from_f32(x).to_f32()` gives for every f32, NaNs
//! included; [`round_to`], [`round_slice`] and [`add_rounded`] round with it. The loops are written
//! without branches so that they vectorize, and [`add_rounded`] is compiled for AVX2 where the CPU
//! has it; neither changes a bit of the result.

use crate::ir::DType;

/// Rounds an f32 to a type as the device or the host holds it (a boolean as f16), returned as f32.
#[inline]
pub fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 | DType::Bool => round_f16(v),
        DType::F32 => v,
        DType::I64 => v.round(),
    }
}

/// Every value of `values` rounded to `dtype` as [`round_to`] rounds one.
#[inline]
pub fn round_slice(dtype: DType, values: &mut [f32]) {
    match dtype {
        DType::F16 | DType::Bool => values.iter_mut().for_each(|v| *v = round_f16(*v)),
        DType::F32 => {}
        DType::I64 => values.iter_mut().for_each(|v| *v = v.round()),
    }
}

/// `out[i] = round_to(dtype, (out[i] + sum[i]) as f32)`, widened back: a running sum of float64
/// block sums kept in the partials' type. On an x86-64 with AVX2 the loop is compiled for it (the
/// same IEEE operations, so the same bits).
pub fn add_rounded(dtype: DType, out: &mut [f64], sum: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { add_rounded_avx2(dtype, out, sum) };
    }
    add_rounded_loop(dtype, out, sum);
}

/// [`add_rounded_loop`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_rounded_avx2(dtype: DType, out: &mut [f64], sum: &[f64]) {
    add_rounded_loop(dtype, out, sum);
}

#[inline(always)]
fn add_rounded_loop(dtype: DType, out: &mut [f64], sum: &[f64]) {
    for (o, s) in out.iter_mut().zip(sum) {
        *o = f64::from(round_to(dtype, (*o + s) as f32));
    }
}

/// `x` rounded to the nearest f16, ties to even, and widened back: the bits
/// `f16::from_f32(x).to_f32()` gives (IEEE 754 conversion; a NaN keeps its sign and the top ten bits
/// of its payload and is made quiet), computed without branches so that a loop of it vectorizes.
#[inline(always)]
pub fn round_f16(x: f32) -> f32 {
    // |x|'s bits, at or above which a value is an f16 normal (2^-14), rounds past the largest f16
    // (65520, halfway to 2^16, ties to the even 2^16) and is not a number.
    const NORMAL: u32 = 0x3880_0000;
    const OVERFLOW: u32 = 0x477f_f000;
    const INFINITY: u32 = 0x7f80_0000;
    let bits = x.to_bits();
    let (sign, a) = (bits & 0x8000_0000, bits & 0x7fff_ffff);
    // A normal keeps 10 of f32's 23 fraction bits: add just under half of the 13 dropped (or half,
    // when the kept last bit is odd) and clear them; a carry moves into the exponent as it should.
    let normal = (a + 0x0fff + ((a >> 13) & 1)) & !0x1fff;
    // A subnormal is a multiple of 2^-24: added to 0.5, whose ulp that is, the sum rounds to one,
    // ties to even, and taking 0.5 away again is exact.
    let subnormal = ((f32::from_bits(a) + 0.5) - 0.5).to_bits();
    let nan = INFINITY | 0x0040_0000 | (a & 0x007f_e000);
    let rounded = if a < NORMAL {
        subnormal
    } else if a < OVERFLOW {
        normal
    } else if a <= INFINITY {
        INFINITY
    } else {
        nan
    };
    f32::from_bits(sign | rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// Every f32 whose rounding to f16 could go wrong: each f16's value, the f32s next to it, the
    /// midpoints between neighbouring f16s and the f32s either side of them (subnormals, the step
    /// past the largest f16 and the infinities included), NaNs of several payloads, and every 251st
    /// f32 bit pattern.
    fn hard_f32s() -> impl Iterator<Item = f32> {
        let near_halves = (0..=u16::MAX).flat_map(|h| {
            let here = f16::from_bits(h).to_f32();
            let next = f16::from_bits(h.wrapping_add(1)).to_f32();
            let mid = ((f64::from(here) + f64::from(next)) / 2.0) as f32;
            [here, mid].into_iter().flat_map(|v| {
                let bits = v.to_bits();
                (0..=4).map(move |d| f32::from_bits(bits.wrapping_add(d).wrapping_sub(2)))
            })
        });
        let nans = [
            0x7f80_0001u32,
            0x7fc0_0000,
            0xffa0_1234,
            0x7fff_ffff,
            0x7f80_2000,
        ];
        let sampled = (0..=u32::MAX / 251).map(|i| f32::from_bits(i * 251));
        (near_halves.chain(nans.map(f32::from_bits)))
            .chain([65519.0, 65520.0, 65536.0, -1.0e6, f32::MAX, f32::INFINITY])
            .chain(sampled)
    }

    /// The first of [`hard_f32s`] that `round` rounds otherwise than `half`'s conversion, bit for bit.
    fn first_disagreement(round: impl Fn(f32) -> f32) -> Option<f32> {
        hard_f32s().find(|&x| round(x).to_bits() != f16::from_f32(x).to_f32().to_bits())
    }

    #[test]
    fn rounding_to_f16_is_halfs_conversion_ties_subnormals_overflow_and_nans_included() {
        assert_eq!(first_disagreement(round_f16), None);
        // Two near misses are caught: normals rounded with ties away from zero, and subnormals
        // truncated.
        let ties_away = |x: f32| {
            let (bits, a) = (x.to_bits(), x.to_bits() & 0x7fff_ffff);
            if (0x3880_0000..0x477f_f000).contains(&a) {
                f32::from_bits((bits & 0x8000_0000) | ((a + 0x1000) & !0x1fff))
            } else {
                round_f16(x)
            }
        };
        assert!(first_disagreement(ties_away).is_some());
        let truncated = |x: f32| {
            if x.abs() < 6.1e-5 {
                (x * 16_777_216.0).trunc() / 16_777_216.0
            } else {
                round_f16(x)
            }
        };
        assert!(first_disagreement(truncated).is_some());
        // A slice rounds as each of its values rounds, in every type.
        let values: Vec<f32> = hard_f32s().step_by(97).take(20_000).collect();
        for dtype in [DType::F16, DType::Bool, DType::F32, DType::I64] {
            let mut slice = values.clone();
            round_slice(dtype, &mut slice);
            let each = values.iter().map(|&v| round_to(dtype, v));
            assert!(
                slice
                    .iter()
                    .zip(each)
                    .all(|(s, e)| s.to_bits() == e.to_bits()),
                "{dtype}"
            );
        }
    }

    /// A running sum kept in f16 takes each block sum as `half` would round it: added in float64,
    /// narrowed to f32, rounded to f16; kept in f32, narrowed only.
    #[test]
    fn a_running_sum_is_rounded_to_its_type_after_each_addition() {
        let values: Vec<f32> = hard_f32s().step_by(89).take(30_000).collect();
        let sums: Vec<f64> = values.iter().map(|&v| f64::from(v) * 0.75 + 1e-9).collect();
        for dtype in [DType::F16, DType::F32] {
            let mut out: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
            let expected: Vec<u64> = (out.iter().zip(&sums))
                .map(|(o, s)| {
                    let narrowed = (o + s) as f32;
                    let kept = match dtype {
                        DType::F16 => f16::from_f32(narrowed).to_f32(),
                        _ => narrowed,
                    };
                    f64::from(kept).to_bits()
                })
                .collect();
            add_rounded(dtype, &mut out, &sums);
            assert_eq!(
                out.iter().map(|o| o.to_bits()).collect::<Vec<_>>(),
                expected,
                "{dtype}"
            );
        }
    }
}
