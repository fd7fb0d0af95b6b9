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
