//! The tolerance on an output's absolute error, from what precision alone moves it by.
//!
//! Contract: [`tolerance`] is four times the largest difference between the reference with the
//! device's storage precision modelled and the exact one (`Reference::rounded` and
//! `Reference::data`), and never below one f16 rounding of the largest output magnitude. The device
//! rounds where the model rounds, but computes in f32 where the model takes float64, with the vector
//! unit's f16 exponential, and sums in its own order (the online softmax over key blocks; the
//! epilogue's fused bias, activation and residual before its one rounding): differences of the same
//! order as the modelled ones, which the factor of four covers. Like any such bound it is made for the
//! data at hand, through the model's own sensitivity to rounding (a layer norm over rows of small
//! spread, a softmax of wide logits), with no closed form to drift from what the graph computes.

use super::{Reference, unit_roundoff};
use crate::ids::ValueId;
use crate::ir::DType;

/// The bound on the largest absolute error of the device's `output` (module docs).
pub fn tolerance(reference: &Reference, output: ValueId) -> f64 {
    let exact = &reference.data[output.index()];
    let rounded = &reference.rounded[output.index()];
    let moved = exact
        .iter()
        .zip(rounded)
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max);
    let largest = exact.iter().fold(0f64, |m, x| m.max(x.abs()));
    (4.0 * moved)
        .max(unit_roundoff(DType::F16) * largest)
        .max(f64::MIN_POSITIVE)
}
