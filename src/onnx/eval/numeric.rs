//! The evaluator's numeric operators on constants: Cast, DequantizeLinear, MatMul and the reductions.

use crate::onnx::proto::data_type;
use crate::onnx::tensor::{Attrs, Data, Tensor, axis, broadcast_sources, element_name, elements};

pub fn cast(t: &Tensor, to: i32) -> Result<Tensor, String> {
    use data_type as d;
    let data = match to {
        d::FLOAT | d::DOUBLE => Data::F32(t.floats()),
        d::FLOAT16 => Data::F32(
            t.floats()
                .iter()
                .map(|&x| half::f16::from_f32(x).to_f32())
                .collect(),
        ),
        d::BFLOAT16 => Data::F32(
            t.floats()
                .iter()
                .map(|&x| half::bf16::from_f32(x).to_f32())
                .collect(),
        ),
        d::BOOL => Data::I64(t.floats().iter().map(|&x| i64::from(x != 0.0)).collect()),
        d::INT64 | d::INT32 | d::INT16 | d::INT8 | d::UINT8 | d::UINT16 | d::UINT32 | d::UINT64 => {
            Data::I64(t.ints())
        }
        to => {
            return Err(format!(
                "cast to element type {} is not supported",
                element_name(to)
            ));
        }
    };
    Ok(Tensor {
        shape: t.shape.clone(),
        data,
    })
}

/// `(x − zero_point) · scale`, per tensor or per slice along `axis`.
pub fn dequantize(
    x: &Tensor,
    scale: &Tensor,
    zero: Option<&Tensor>,
    attrs: &Attrs,
) -> Result<Tensor, String> {
    let a = axis(attrs.i("axis").unwrap_or(1), x.shape.len().max(1))?;
    let (scales, zeros) = (
        scale.floats(),
        zero.map_or_else(|| vec![0; scales_len(scale)], Tensor::ints),
    );
    if scales.len() != zeros.len() {
        return Err("scale and zero point differ in length".to_string());
    }
    let per = |i: usize| -> usize {
        if scales.len() == 1 {
            0
        } else {
            let inner: usize = x.shape[a + 1..].iter().product();
            (i / inner) % x.shape[a]
        }
    };
    if scales.len() != 1 && x.shape.get(a) != Some(&scales.len()) {
        return Err(format!(
            "{} scales for axis {a} of {:?}: per-channel dequantisation takes one a channel",
            scales.len(),
            x.shape
        ));
    }
    let v = x.ints();
    Ok(Tensor {
        shape: x.shape.clone(),
        data: Data::F32(
            v.iter()
                .enumerate()
                .map(|(i, &q)| ((q - zeros[per(i)]) as f64 * f64::from(scales[per(i)])) as f32)
                .collect(),
        ),
    })
}

fn scales_len(t: &Tensor) -> usize {
    t.len()
}

pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    if a.shape.len() != 2 || b.shape.len() != 2 || a.shape[1] != b.shape[0] {
        return Err(format!(
            "only 2-D matmuls of constants fold; got {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    elements(&[m, n])?;
    elements(&[m, k, n])?;
    let (x, y) = (a.floats(), b.floats());
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|p| f64::from(x[i * k + p]) * f64::from(y[p * n + j]))
                .sum::<f64>() as f32;
        }
    }
    Ok(Tensor {
        shape: vec![m, n],
        data: Data::F32(out),
    })
}

pub fn reduce(op: &str, t: &Tensor, axes: &[i64], keep: bool) -> Result<Tensor, String> {
    let rank = t.shape.len();
    let axes: Vec<usize> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        axes.iter()
            .map(|&a| axis(a, rank))
            .collect::<Result<_, _>>()?
    };
    let out_full: Vec<usize> = (0..rank)
        .map(|a| if axes.contains(&a) { 1 } else { t.shape[a] })
        .collect();
    let n = elements(&out_full)?;
    let src = broadcast_sources(&out_full, &t.shape)?;
    let (init, f): (f64, fn(f64, f64) -> f64) = match op {
        "ReduceMax" => (f64::NEG_INFINITY, f64::max),
        "ReduceMin" => (f64::INFINITY, f64::min),
        "ReduceProd" => (1.0, |a, b| a * b),
        _ => (0.0, |a, b| a + b),
    };
    let mut acc = vec![init; n];
    let v = t.floats();
    for (i, &o) in src.iter().enumerate() {
        acc[o] = f(acc[o], f64::from(v[i]));
    }
    if op == "ReduceMean" {
        let count = (t.len() / n.max(1)).max(1) as f64;
        acc.iter_mut().for_each(|x| *x /= count);
    }
    let shape = if keep {
        out_full
    } else {
        (0..rank)
            .filter(|a| !axes.contains(a))
            .map(|a| t.shape[a])
            .collect()
    };
    Ok(Tensor {
        shape,
        data: if t.is_float() {
            Data::F32(acc.iter().map(|&x| x as f32).collect())
        } else {
            Data::I64(acc.iter().map(|&x| x as i64).collect())
        },
    })
}

/// Resize of a constant (position embeddings a ViT export interpolates to its image size): nearest,
/// linear or cubic, separably along each axis, with ONNX's coordinate transformations (`half_pixel`,
/// `pytorch_half_pixel`, `align_corners`, `asymmetric`) and its edge padding, as onnx's reference
/// (`onnx/reference/ops/op_resize.py`) computes it. `scales` or `sizes` give the output's shape.
pub fn resize(
    x: &Tensor,
    scales: Option<&Tensor>,
    sizes: Option<&Tensor>,
    attrs: &Attrs,
) -> Result<Tensor, String> {
    let rank = x.shape.len();
    let axes: Vec<usize> = match attrs.ints("axes") {
        Some(a) => a.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if attrs.i("antialias").unwrap_or(0) != 0 {
        return Err("Resize with antialias is not supported".to_string());
    }
    if attrs
        .s("keep_aspect_ratio_policy")
        .is_some_and(|p| p != "stretch")
    {
        return Err(
            "Resize keeps no aspect ratio here: only the `stretch` policy folds".to_string(),
        );
    }
    let mode = attrs.s("mode").unwrap_or("nearest");
    let transform = attrs
        .s("coordinate_transformation_mode")
        .unwrap_or("half_pixel");
    if !matches!(
        transform,
        "half_pixel" | "pytorch_half_pixel" | "align_corners" | "asymmetric"
    ) {
        return Err(format!(
            "Resize's coordinate transformation `{transform}` is not supported"
        ));
    }
    // Per axis: the output size and the scale.
    let mut out_shape = x.shape.clone();
    let mut factor = vec![1.0f64; rank];
    match (
        sizes.filter(|s| !s.is_empty()),
        scales.filter(|s| !s.is_empty()),
    ) {
        (Some(s), _) => {
            let s = s.ints();
            if s.len() != axes.len() {
                return Err(format!("{} sizes for {} axes", s.len(), axes.len()));
            }
            for (&a, &n) in axes.iter().zip(&s) {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("size {n} is not positive"))?;
                factor[a] = n as f64 / x.shape[a] as f64;
                out_shape[a] = n;
            }
        }
        (None, Some(s)) => {
            let s = s.floats();
            if s.len() != axes.len() {
                return Err(format!("{} scales for {} axes", s.len(), axes.len()));
            }
            for (&a, &f) in axes.iter().zip(&s) {
                if !(f.is_finite() && f > 0.0) {
                    return Err(format!("scale {f} is not positive"));
                }
                factor[a] = f64::from(f);
                out_shape[a] = (x.shape[a] as f64 * factor[a]).floor() as usize;
            }
        }
        (None, None) => return Err("Resize needs scales or sizes".to_string()),
    }
    elements(&out_shape)?;
    let a_coeff = f64::from(attrs.f("cubic_coeff_a").unwrap_or(-0.75));
    let exclude = attrs.i("exclude_outside").unwrap_or(0) != 0;
    let nearest_mode = attrs.s("nearest_mode").unwrap_or("round_prefer_floor");
    let mut data: Vec<f64> = x.floats().iter().map(|&v| f64::from(v)).collect();
    let mut shape = x.shape.clone();
    for a in 0..rank {
        let (input, output) = (shape[a], out_shape[a]);
        if input == output && factor[a] == 1.0 {
            continue;
        }
        // For each output index along `a`: the source indices and their weights.
        let mut taps: Vec<Vec<(usize, f64)>> = Vec::with_capacity(output);
        for o in 0..output {
            let o = o as f64;
            let s = factor[a];
            let x0 = match transform {
                "align_corners" if output == 1 => 0.0,
                "align_corners" => o * (input as f64 - 1.0) / (output as f64 - 1.0),
                "asymmetric" => o / s,
                "pytorch_half_pixel" if output == 1 => -0.5,
                _ => (o + 0.5) / s - 0.5,
            };
            let ratio = if x0.fract() == 0.0 {
                1.0
            } else {
                x0 - x0.floor()
            };
            let mut coeffs: Vec<f64> = match mode {
                "nearest" if ratio == 1.0 => vec![0.0, 1.0],
                "nearest" => {
                    let up = match nearest_mode {
                        "round_prefer_ceil" => ratio >= 0.5,
                        "floor" => false,
                        "ceil" => true,
                        _ => ratio > 0.5,
                    };
                    vec![f64::from(u8::from(!up)), f64::from(u8::from(up))]
                }
                "linear" => vec![1.0 - ratio, ratio],
                "cubic" => {
                    let (r, q) = (ratio, 1.0 - ratio);
                    let far = |t: f64| {
                        ((a_coeff * (t + 1.0) - 5.0 * a_coeff) * (t + 1.0) + 8.0 * a_coeff)
                            * (t + 1.0)
                            - 4.0 * a_coeff
                    };
                    let near = |t: f64| ((a_coeff + 2.0) * t - (a_coeff + 3.0)) * t * t + 1.0;
                    vec![far(r), near(r), near(q), far(q)]
                }
                other => {
                    return Err(format!(
                        "Resize mode `{other}` is not one of nearest, linear, cubic"
                    ));
                }
            };
            // The n nearest integers to x0 (ties to the smaller), in order.
            let n = coeffs.len() as i64;
            let first = (x0 - n as f64 / 2.0).ceil() as i64;
            let first = if ((first + n) as f64 - x0).abs() < (x0 - first as f64).abs() {
                first + 1
            } else {
                first
            };
            let idx: Vec<i64> = (first..first + n).collect();
            if exclude {
                for (c, &i) in coeffs.iter_mut().zip(&idx) {
                    if i < 0 || i >= input as i64 {
                        *c = 0.0;
                    }
                }
                let sum: f64 = coeffs.iter().sum();
                coeffs.iter_mut().for_each(|c| *c /= sum);
            }
            taps.push(
                idx.iter()
                    .zip(coeffs)
                    .map(|(&i, c)| (i.clamp(0, input as i64 - 1) as usize, c))
                    .collect(),
            );
        }
        let (outer, inner) = (
            shape[..a].iter().product::<usize>(),
            shape[a + 1..].iter().product::<usize>(),
        );
        let mut next = vec![0.0f64; outer * output * inner];
        for o in 0..outer {
            for (j, tap) in taps.iter().enumerate() {
                for k in 0..inner {
                    next[(o * output + j) * inner + k] = tap
                        .iter()
                        .map(|&(i, c)| c * data[(o * input + i) * inner + k])
                        .sum();
                }
            }
        }
        data = next;
        shape[a] = output;
    }
    Ok(Tensor {
        shape,
        data: Data::F32(data.iter().map(|&v| v as f32).collect()),
    })
}
