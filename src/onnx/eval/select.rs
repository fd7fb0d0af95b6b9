//! The selection operators of the evaluator: Gather, GatherND, Concat and Slice, on constants (or on
//! element indices, for the views of computed tensors).

use crate::onnx::tensor::{Data, Tensor, axis, elements};

pub fn gather(data: &Tensor, indices: &Tensor, axis_attr: i64) -> Result<Tensor, String> {
    let a = axis(axis_attr, data.shape.len())?;
    let (outer, n, inner) = (
        data.shape[..a].iter().product::<usize>(),
        data.shape[a],
        data.shape[a + 1..].iter().product::<usize>(),
    );
    let idx = indices
        .ints()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n as i64 } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < n)
                .ok_or_else(|| format!("index {i} out of range {n}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut shape = data.shape[..a].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&data.shape[a + 1..]);
    elements(&shape)?;
    let mut src = Vec::new();
    for o in 0..outer {
        for &i in &idx {
            src.extend((0..inner).map(|k| (o * n + i) * inner + k));
        }
    }
    Ok(data.pick(shape, &src))
}

/// GatherND with `batch_dims` 0: `out[i…] = data[indices[i…, :]]`, each index tuple naming the
/// leading dimensions of `data`.
pub fn gather_nd(data: &Tensor, indices: &Tensor, batch_dims: i64) -> Result<Tensor, String> {
    if batch_dims != 0 {
        return Err(format!(
            "GatherND with batch_dims {batch_dims} is not supported"
        ));
    }
    let (lead, k) = match indices.shape.split_last() {
        Some((&k, lead)) if k <= data.shape.len() => (lead.to_vec(), k),
        _ => {
            return Err(format!(
                "GatherND indices {:?} do not fit data {:?}",
                indices.shape, data.shape
            ));
        }
    };
    let inner: usize = data.shape[k..].iter().product();
    let mut shape = lead.clone();
    shape.extend(&data.shape[k..]);
    let n = elements(&shape)?;
    let idx = indices.ints();
    let mut src = Vec::with_capacity(n);
    for tuple in idx.chunks(k.max(1)).take(lead.iter().product()) {
        let mut flat = 0usize;
        for (a, &i) in tuple.iter().enumerate().take(k) {
            let d = data.shape[a] as i64;
            let j = if i < 0 { i + d } else { i };
            if !(0..d).contains(&j) {
                return Err(format!("index {i} out of range {d}"));
            }
            flat = flat * data.shape[a] + j as usize;
        }
        src.extend((0..inner).map(|q| flat * inner + q));
    }
    Ok(data.pick(shape, &src))
}

pub fn concat(parts: &[&Tensor], axis_attr: i64) -> Result<Tensor, String> {
    let first = parts.first().ok_or("no inputs")?;
    let a = axis(axis_attr, first.shape.len())?;
    let mut shape = first.shape.clone();
    shape[a] = 0;
    for p in parts {
        if p.shape.len() != shape.len()
            || p.shape
                .iter()
                .enumerate()
                .any(|(i, &d)| i != a && d != shape[i])
        {
            return Err(format!(
                "inputs {:?} and {:?} do not concatenate",
                first.shape, p.shape
            ));
        }
        shape[a] += p.shape[a];
    }
    elements(&shape)?;
    let outer: usize = shape[..a].iter().product();
    let floats = parts.iter().any(|p| p.is_float());
    let (fs, is): (Vec<Vec<f32>>, Vec<Vec<i64>>) = if floats {
        (parts.iter().map(|p| p.floats()).collect(), Vec::new())
    } else {
        (Vec::new(), parts.iter().map(|p| p.ints()).collect())
    };
    let (mut f, mut i) = (Vec::new(), Vec::new());
    for o in 0..outer {
        for (k, p) in parts.iter().enumerate() {
            let chunk: usize = p.shape[a..].iter().product();
            let range = o * chunk..(o + 1) * chunk;
            if floats {
                f.extend_from_slice(&fs[k][range]);
            } else {
                i.extend_from_slice(&is[k][range]);
            }
        }
    }
    let data = if floats { Data::F32(f) } else { Data::I64(i) };
    Ok(Tensor { shape, data })
}

/// The indices Slice picks along one axis of length `d`.
pub fn slice_indices(d: usize, start: i64, end: i64, step: i64) -> Result<Vec<usize>, String> {
    if step == 0 {
        return Err("slice step 0".to_string());
    }
    let d = d as i64;
    let clamp =
        |v: i64, lo: i64, hi: i64| (if v < 0 { v.saturating_add(d) } else { v }).clamp(lo, hi);
    let (mut i, end) = if step > 0 {
        (clamp(start, 0, d), clamp(end, 0, d))
    } else {
        (clamp(start, 0, d - 1), clamp(end.max(-d - 1), -1, d - 1))
    };
    let mut chosen = Vec::new();
    while (step > 0 && i < end) || (step < 0 && i > end) {
        chosen.push(i as usize);
        i += step;
    }
    Ok(chosen)
}

pub fn slice(
    t: &Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<Tensor, String> {
    let rank = t.shape.len();
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps differ in length".to_string());
    }
    let mut pick: Vec<Vec<usize>> = t.shape.iter().map(|&d| (0..d).collect()).collect();
    for k in 0..starts.len() {
        let a = axis(axes[k], rank)?;
        pick[a] = slice_indices(t.shape[a], starts[k], ends[k], steps[k])?;
    }
    let shape: Vec<usize> = pick.iter().map(Vec::len).collect();
    let n = elements(&shape)?;
    let mut src = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    for _ in 0..n {
        let mut flat = 0;
        for (ax, &i) in idx.iter().enumerate() {
            flat = flat * t.shape[ax] + pick[ax][i];
        }
        src.push(flat);
        for ax in (0..rank).rev() {
            idx[ax] += 1;
            if idx[ax] < shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    Ok(t.pick(shape, &src))
}
