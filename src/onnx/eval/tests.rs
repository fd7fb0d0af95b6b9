//! The evaluator's tests: the index arithmetic of the exporters, masks, weight transforms.

use super::*;
use crate::onnx::tensor::{broadcast, reshape, unsqueeze};

fn ints(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
    Tensor {
        shape,
        data: Data::I64(v),
    }
}
fn floats(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
    Tensor {
        shape,
        data: Data::F32(v),
    }
}
fn ev(op: &str, inputs: &[&Tensor], attrs: &Attrs) -> Result<Tensor, String> {
    let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    eval(op, &ins, attrs, 17).map(|mut v| v.remove(0))
}

#[test]
fn shape_rules() {
    assert_eq!(broadcast(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
    assert!(broadcast(&[2], &[3]).is_err());
    assert_eq!(
        reshape(&[2, 6, 8], &[0, -1, 4, 2], false).unwrap(),
        vec![2, 6, 4, 2]
    );
    assert_eq!(unsqueeze(&[2, 5], &[1, -1]).unwrap(), vec![2, 1, 5, 1]);
    assert!(squeeze(&[2, 3], &[0]).is_err());
}

#[test]
fn folds_the_export_s_index_arithmetic() {
    let a = Attrs::default();
    let arange = ints(vec![1, 6], (0..6).collect());
    let s = eval(
        "Slice",
        &[
            Some(&arange),
            Some(&ints(vec![1], vec![0])),
            Some(&ints(vec![1], vec![4])),
            Some(&ints(vec![1], vec![1])),
            None,
        ],
        &a,
        17,
    )
    .unwrap()
    .remove(0);
    assert_eq!(s, ints(vec![1, 4], vec![0, 1, 2, 3]));
    let e = ev("Expand", &[&s, &ints(vec![2], vec![2, 4])], &a).unwrap();
    assert_eq!(e.ints(), vec![0, 1, 2, 3, 0, 1, 2, 3]);
    let g = ev(
        "Gather",
        &[&ints(vec![3], vec![7, 8, 9]), &ints(vec![], vec![-1])],
        &a,
    )
    .unwrap();
    assert_eq!(g, ints(vec![], vec![9]));
    let c = ev(
        "Concat",
        &[&ints(vec![1], vec![7]), &ints(vec![2], vec![8, 9])],
        &Attrs::default().with_int("axis", 0),
    )
    .unwrap();
    assert_eq!(c, ints(vec![3], vec![7, 8, 9]));
    assert!(ev("Expand", &[&s, &ints(vec![2], vec![1 << 40, 4])], &a).is_err());
}

#[test]
fn folds_the_dynamo_exporter_s_mask_arithmetic() {
    let a = Attrs::default();
    let r = ev(
        "Range",
        &[
            &ints(vec![], vec![0]),
            &ints(vec![], vec![4]),
            &ints(vec![], vec![1]),
        ],
        &a,
    )
    .unwrap();
    assert_eq!(r, ints(vec![4], vec![0, 1, 2, 3]));
    let ge = ev("GreaterOrEqual", &[&r, &ints(vec![1], vec![2])], &a).unwrap();
    assert_eq!(ge.ints(), vec![0, 0, 1, 1]);
    let and = ev("And", &[&ge, &ints(vec![4], vec![1, 1, 0, 1])], &a).unwrap();
    assert_eq!(and.ints(), vec![0, 0, 0, 1]);
    assert_eq!(ev("Not", &[&and], &a).unwrap().ints(), vec![1, 1, 1, 0]);
    let max = ev(
        "Max",
        &[
            &floats(vec![2], vec![1.0, -3.0]),
            &floats(vec![1], vec![0.0]),
        ],
        &a,
    )
    .unwrap();
    assert_eq!(max.floats(), vec![1.0, 0.0]);
    let nan = ev("IsNaN", &[&floats(vec![2], vec![f32::NAN, 1.0])], &a).unwrap();
    assert_eq!(nan.ints(), vec![1, 0]);
    let tril = ev(
        "Trilu",
        &[&ints(vec![2, 2], vec![1, 1, 1, 1])],
        &Attrs::default().with_int("upper", 0),
    )
    .unwrap();
    assert_eq!(tril.ints(), vec![1, 0, 1, 1]);
    let w = ev(
        "Where",
        &[
            &ints(vec![2], vec![1, 0]),
            &floats(vec![], vec![0.0]),
            &floats(vec![], vec![-1e9]),
        ],
        &a,
    )
    .unwrap();
    assert_eq!(w.floats(), vec![0.0, -1e9]);
}

#[test]
fn transposes_splits_and_dequantises_weights() {
    let a = Attrs::default();
    let m = floats(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = ev("Transpose", &[&m], &a).unwrap();
    assert_eq!(t, floats(vec![3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    let parts = eval(
        "Split",
        &[Some(&m), Some(&ints(vec![2], vec![1, 2]))],
        &Attrs::default().with_int("axis", 1),
        17,
    )
    .unwrap();
    assert_eq!(parts[1], floats(vec![2, 2], vec![2.0, 3.0, 5.0, 6.0]));
    let q = ints(vec![2, 2], vec![-128, 127, 2, 0]);
    // Per channel along axis 1: scales 0.5 and 2, zero points 0 and 1.
    let d = ev(
        "DequantizeLinear",
        &[
            &q,
            &floats(vec![2], vec![0.5, 2.0]),
            &ints(vec![2], vec![0, 1]),
        ],
        &a,
    )
    .unwrap();
    assert_eq!(d.floats(), vec![-64.0, 252.0, 1.0, -2.0]);
    let per_tensor = ev("DequantizeLinear", &[&q, &floats(vec![], vec![0.25])], &a).unwrap();
    assert_eq!(per_tensor.floats(), vec![-32.0, 31.75, 0.5, 0.0]);
    let c = ev("Cast", &[&q], &Attrs::default().with_int("to", 1)).unwrap();
    assert_eq!(c.floats(), vec![-128.0, 127.0, 2.0, 0.0]);
    assert!(
        ev("Cast", &[&q], &Attrs::default().with_int("to", 8))
            .unwrap_err()
            .contains("string")
    );
}

/// Resize of a [1, 1, 2, 3] constant to [1, 1, 3, 5], against onnxruntime 1.32's outputs for the same
/// node (opset 13): each mode and coordinate transformation as ONNX defines it.
#[test]
fn resizes_constants_as_onnxruntime_does() {
    let x = Tensor {
        shape: vec![1, 1, 2, 3],
        data: Data::F32((1..=6).map(|v| v as f32).collect()),
    };
    let sizes = Tensor {
        shape: vec![4],
        data: Data::I64(vec![1, 1, 3, 5]),
    };
    let cases: [(&str, &str, i64, [f32; 15]); 5] = [
        (
            "linear",
            "half_pixel",
            0,
            [
                1.0, 1.4, 2.0, 2.6, 3.0, 2.5, 2.9, 3.5, 4.1, 4.5, 4.0, 4.4, 5.0, 5.6, 6.0,
            ],
        ),
        (
            "cubic",
            "half_pixel",
            0,
            [
                0.643584, 1.055584, 1.739584, 2.423585, 2.835586, 2.404001, 2.816, 3.5, 4.184001,
                4.596002, 4.16442, 4.576417, 5.260419, 5.944421, 6.356422,
            ],
        ),
        (
            "nearest",
            "asymmetric",
            0,
            [
                1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0, 5.0, 6.0, 6.0, 4.0, 5.0, 5.0, 6.0, 6.0,
            ],
        ),
        (
            "linear",
            "align_corners",
            0,
            [
                1.0, 1.5, 2.0, 2.5, 3.0, 2.5, 3.0, 3.5, 4.0, 4.5, 4.0, 4.5, 5.0, 5.5, 6.0,
            ],
        ),
        (
            "cubic",
            "pytorch_half_pixel",
            1,
            [
                0.579441, 0.981144, 1.695946, 2.410747, 2.812451, 2.383495, 2.785198, 3.5,
                4.214801, 4.616505, 4.187549, 4.589252, 5.304054, 6.018855, 6.420559,
            ],
        ),
    ];
    for (mode, transform, exclude, want) in cases {
        let attrs = Attrs::default()
            .with_str("mode", mode)
            .with_str("coordinate_transformation_mode", transform)
            .with_int("exclude_outside", exclude);
        let got = eval("Resize", &[Some(&x), None, None, Some(&sizes)], &attrs, 13)
            .unwrap()
            .remove(0);
        assert_eq!(got.shape, vec![1, 1, 3, 5]);
        for (g, w) in got.floats().iter().zip(want) {
            assert!(
                (g - w).abs() < 1e-5,
                "{mode} {transform}: {:?}",
                got.floats()
            );
        }
    }
}
