//! The arithmetic of the general vector operations (`Unary`, `Binary`, `Select`, `Reduce`,
//! `Softmax`), in f32 as the device's `Vector` vertex computes it and in float64 for the host
//! reference.
//!
//! Contract: the f32 functions take f16 values widened to f32 and return the f32 result the vertex
//! rounds once to f16; a reduction and a softmax run over one row in column order (one worker owns a
//! row). Transcendentals come from `libm`, so results are bit-identical on every platform. The
//! float64 functions are the same definitions in float64. A comparison, `is_nan` and `is_inf` give
//! exactly 1 or 0 (a NaN compares unequal to everything, so only `not_equal` holds for it); a select
//! takes `x` where its condition is not 0 (a NaN condition included, as ONNX casts NaN to true).

use super::{gelu_erf_f32, gelu_erf_f64, gelu_tanh_f32, gelu_tanh_f64};
use crate::elements::{BinaryFn, ReduceFn, UnaryFn};

/// `f(x)` in f32.
pub fn unary_f32(f: UnaryFn, x: f32) -> f32 {
    match f {
        UnaryFn::Neg => -x,
        UnaryFn::Abs => x.abs(),
        UnaryFn::Sqrt => libm::sqrtf(x),
        UnaryFn::Reciprocal => 1.0 / x,
        UnaryFn::Exp => libm::expf(x),
        UnaryFn::Erf => libm::erff(x),
        UnaryFn::Tanh => libm::tanhf(x),
        UnaryFn::Sigmoid => 1.0 / (1.0 + libm::expf(-x)),
        UnaryFn::Relu => x.max(0.0),
        UnaryFn::GeluErf => gelu_erf_f32(x),
        UnaryFn::GeluTanh => gelu_tanh_f32(x),
        UnaryFn::IsNan => truth(x.is_nan()),
        UnaryFn::IsInf => truth(x.is_infinite()),
        UnaryFn::Pow { exponent } => libm::powf(x, exponent),
    }
}

/// `f(x)` in float64.
pub fn unary_f64(f: UnaryFn, x: f64) -> f64 {
    match f {
        UnaryFn::Neg => -x,
        UnaryFn::Abs => x.abs(),
        UnaryFn::Sqrt => libm::sqrt(x),
        UnaryFn::Reciprocal => 1.0 / x,
        UnaryFn::Exp => libm::exp(x),
        UnaryFn::Erf => libm::erf(x),
        UnaryFn::Tanh => libm::tanh(x),
        UnaryFn::Sigmoid => 1.0 / (1.0 + libm::exp(-x)),
        UnaryFn::Relu => x.max(0.0),
        UnaryFn::GeluErf => gelu_erf_f64(x),
        UnaryFn::GeluTanh => gelu_tanh_f64(x),
        UnaryFn::IsNan => f64::from(truth(x.is_nan())),
        UnaryFn::IsInf => f64::from(truth(x.is_infinite())),
        UnaryFn::Pow { exponent } => libm::pow(x, f64::from(exponent)),
    }
}

/// `f(a, b)` in f32.
pub fn binary_f32(f: BinaryFn, a: f32, b: f32) -> f32 {
    match f {
        BinaryFn::Add => a + b,
        BinaryFn::Sub => a - b,
        BinaryFn::Mul => a * b,
        BinaryFn::Div => a / b,
        BinaryFn::Pow => libm::powf(a, b),
        BinaryFn::Max => a.max(b),
        BinaryFn::Min => a.min(b),
        BinaryFn::Equal => truth(a == b),
        BinaryFn::NotEqual => truth(a != b),
        BinaryFn::Less => truth(a < b),
        BinaryFn::LessEqual => truth(a <= b),
        BinaryFn::Greater => truth(a > b),
        BinaryFn::GreaterEqual => truth(a >= b),
    }
}

/// `f(a, b)` in float64.
pub fn binary_f64(f: BinaryFn, a: f64, b: f64) -> f64 {
    match f {
        BinaryFn::Add => a + b,
        BinaryFn::Sub => a - b,
        BinaryFn::Mul => a * b,
        BinaryFn::Div => a / b,
        BinaryFn::Pow => libm::pow(a, b),
        BinaryFn::Max => a.max(b),
        BinaryFn::Min => a.min(b),
        BinaryFn::Equal => f64::from(truth(a == b)),
        BinaryFn::NotEqual => f64::from(truth(a != b)),
        BinaryFn::Less => f64::from(truth(a < b)),
        BinaryFn::LessEqual => f64::from(truth(a <= b)),
        BinaryFn::Greater => f64::from(truth(a > b)),
        BinaryFn::GreaterEqual => f64::from(truth(a >= b)),
    }
}

/// 1 for true, 0 for false: what a comparison stores.
fn truth(holds: bool) -> f32 {
    f32::from(u8::from(holds))
}

/// `condition ≠ 0 ? x : y`, in f32 and float64 alike (it selects, it computes nothing).
pub fn select<T: PartialEq + From<u8>>(condition: T, x: T, y: T) -> T {
    if condition != T::from(0) { x } else { y }
}

/// One row reduced in f32, in column order: the sum, the sum over the row's length, or the largest.
pub fn reduce_row_f32(f: ReduceFn, row: &[f32]) -> f32 {
    match f {
        ReduceFn::Sum => row.iter().sum(),
        ReduceFn::Mean => row.iter().sum::<f32>() / row.len().max(1) as f32,
        ReduceFn::Max => row.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    }
}

/// One row reduced in float64.
pub fn reduce_row_f64(f: ReduceFn, row: &[f64]) -> f64 {
    match f {
        ReduceFn::Sum => row.iter().sum(),
        ReduceFn::Mean => row.iter().sum::<f64>() / row.len().max(1) as f64,
        ReduceFn::Max => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// One row's softmax in f32: its largest value subtracted, `exp`, the sum in column order, each
/// exponential divided by it.
pub fn softmax_row_f32(row: &[f32]) -> Vec<f32> {
    let top = reduce_row_f32(ReduceFn::Max, row);
    let e: Vec<f32> = row.iter().map(|&x| libm::expf(x - top)).collect();
    let sum: f32 = e.iter().sum();
    e.iter().map(|x| x / sum).collect()
}

/// One row's softmax in float64.
pub fn softmax_row_f64(row: &[f64]) -> Vec<f64> {
    let top = reduce_row_f64(ReduceFn::Max, row);
    let e: Vec<f64> = row.iter().map(|&x| libm::exp(x - top)).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|x| x / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_and_float64_agree_to_f32_precision() {
        for x in [-2.5f32, -0.3, 0.0, 0.7, 3.0] {
            for f in UnaryFn::PLAIN
                .into_iter()
                .chain([UnaryFn::Pow { exponent: 2.0 }])
            {
                let (a, b) = (unary_f32(f, x), unary_f64(f, f64::from(x)));
                assert!(
                    a.is_nan() && b.is_nan()
                        || f64::from(a) == b
                        || (f64::from(a) - b).abs() <= 1e-6 * b.abs().max(1.0),
                    "{f:?}({x}): {a} against {b}"
                );
            }
        }
        let row = [1.0f32, 3.0, -2.0, 0.5];
        let soft = softmax_row_f32(&row);
        assert!((soft.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(soft[1] > soft[0] && soft[0] > soft[3] && soft[3] > soft[2]);
        assert_eq!(reduce_row_f32(ReduceFn::Max, &row), 3.0);
        assert_eq!(reduce_row_f32(ReduceFn::Mean, &row), 0.625);
        assert_eq!(binary_f32(BinaryFn::Min, 2.0, -1.0), -1.0);
    }

    #[test]
    fn comparisons_give_one_or_zero_as_ieee_compares() {
        let nan = f32::NAN;
        let table = [
            (BinaryFn::Equal, [1.0, 0.0, 0.0, 0.0]),
            (BinaryFn::NotEqual, [0.0, 1.0, 1.0, 1.0]),
            (BinaryFn::Less, [0.0, 1.0, 0.0, 0.0]),
            (BinaryFn::LessEqual, [1.0, 1.0, 0.0, 0.0]),
            (BinaryFn::Greater, [0.0, 0.0, 1.0, 0.0]),
            (BinaryFn::GreaterEqual, [1.0, 0.0, 1.0, 0.0]),
        ];
        // (2, 2), (1, 2), (3, 2) and (NaN, NaN): equal, less, greater, unordered.
        let pairs = [(2.0, 2.0), (1.0, 2.0), (3.0, 2.0), (nan, nan)];
        for (f, want) in table {
            for ((a, b), w) in pairs.into_iter().zip(want) {
                assert_eq!(binary_f32(f, a, b), w, "{f:?}({a}, {b})");
                assert_eq!(binary_f64(f, f64::from(a), f64::from(b)), f64::from(w));
            }
        }
        // -0 equals +0.
        assert_eq!(binary_f32(BinaryFn::Equal, -0.0, 0.0), 1.0);
        for (x, nan_, inf) in [
            (nan, 1.0, 0.0),
            (f32::NEG_INFINITY, 0.0, 1.0),
            (65504.0, 0.0, 0.0),
        ] {
            assert_eq!(unary_f32(UnaryFn::IsNan, x), nan_, "{x}");
            assert_eq!(unary_f32(UnaryFn::IsInf, x), inf, "{x}");
            assert_eq!(unary_f64(UnaryFn::IsInf, f64::from(x)), f64::from(inf));
        }
    }

    #[test]
    fn select_takes_x_where_the_condition_is_not_zero() {
        assert_eq!(select(1.0f32, 2.0, 3.0), 2.0);
        assert_eq!(select(0.0f32, 2.0, 3.0), 3.0);
        assert_eq!(select(-0.0f32, 2.0, 3.0), 3.0);
        assert_eq!(select(-0.5f64, 2.0, 3.0), 2.0);
        assert_eq!(select(f32::NAN, 2.0, 3.0), 2.0);
        // It moves the value bits: a NaN or an infinity passes as it is.
        assert!(select(1.0f32, f32::NAN, 3.0).is_nan());
        assert_eq!(select(0.0f32, 2.0, f32::NEG_INFINITY), f32::NEG_INFINITY);
    }
}
