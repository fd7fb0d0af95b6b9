//! Constant tensors and the constant evaluator: the int64/float arithmetic on shapes and indices that an
//! export leaves in the graph (Shape, Gather, Unsqueeze, Concat, Reshape, ConstantOfShape, Equal,
//! Where, Expand, Slice, Cast, Range, element-wise arithmetic), and the shape rules those operators share
//! with the lowering (broadcasting, Reshape's `0` and `-1`, axes).
//!
//! Input: decoded `TensorProto`s and the constant inputs of one node. Output: a [`Tensor`] or a message
//! saying what was wrong (the caller adds the node). No operator allocates more than
//! [`MAX_ELEMENTS`] elements, so crafted shapes cannot exhaust memory.

use super::proto::{TensorProto, data_type};

/// The most elements a folded constant may hold (2^24); an initializer may hold up to 2^31.
pub const MAX_ELEMENTS: usize = 1 << 24;

/// The elements of a constant: floats (float and double) or integers (int32, int64 and bool).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A constant tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

/// The number of elements of `shape`, or an error past [`MAX_ELEMENTS`].
pub fn elements(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("shape {shape:?} has more than {MAX_ELEMENTS} elements"))
}

/// `axis` (negative counts from the end) as an index below `rank`.
pub fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if (0..rank as i64).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            _ => Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        })
        .collect()
}

/// Reshape's target: `0` copies the input's dimension (unless `allowzero`), one `-1` is inferred.
/// It applies to computed tensors too, so it bounds nothing but overflow.
pub fn reshape(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>, String> {
    let elements = |shape: &[usize]| {
        shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| format!("shape {shape:?} overflows"))
    };
    let total = elements(input)?;
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(
                *input
                    .get(i)
                    .ok_or_else(|| format!("reshape {spec:?}: no input dimension {i} to copy"))?,
            ),
            d if d >= 0 => out.push(d as usize),
            _ => return Err(format!("reshape {spec:?}: invalid dimension {d}")),
        }
    }
    let known = elements(&out)?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {input:?} into {spec:?}"));
        }
        out[i] = total / known;
    }
    if elements(&out)? != total {
        return Err(format!("cannot reshape {input:?} into {spec:?}"));
    }
    Ok(out)
}

/// Unsqueeze: `axes` (of the output) inserted as unit dimensions.
pub fn unsqueeze(input: &[usize], axes: &[i64]) -> Result<Vec<usize>, String> {
    let rank = input.len() + axes.len();
    let mut inserted = vec![false; rank];
    for &a in axes {
        let a = axis(a, rank)?;
        if std::mem::replace(&mut inserted[a], true) {
            return Err(format!("unsqueeze axes {axes:?} repeat an axis"));
        }
    }
    let mut dims = input.iter();
    Ok(inserted
        .iter()
        .map(|&u| if u { 1 } else { *dims.next().unwrap_or(&1) })
        .collect())
}

/// For each element of `out` (row-major), the flat index of the element of a tensor of shape `input`
/// that broadcasts to it.
fn broadcast_sources(input: &[usize], out: &[usize]) -> Result<Vec<usize>, String> {
    let n = elements(out)?;
    let offset = out.len() - input.len();
    let mut strides = vec![0usize; out.len()];
    let mut s = 1;
    for (i, &d) in input.iter().enumerate().rev() {
        strides[i + offset] = if d == 1 { 0 } else { s };
        s *= d;
    }
    let mut src = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..n {
        src.push(idx.iter().zip(&strides).map(|(i, s)| i * s).sum());
        for k in (0..out.len()).rev() {
            idx[k] += 1;
            if idx[k] < out[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(src)
}

impl Tensor {
    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor {
            shape: Vec::new(),
            data: Data::F32(vec![v]),
        }
    }

    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_float(&self) -> bool {
        matches!(self.data, Data::F32(_))
    }

    /// The elements as integers (floats truncated).
    pub fn ints(&self) -> Vec<i64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
        }
    }

    /// The elements as floats.
    pub fn floats(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// The single element of a one-element tensor.
    pub fn scalar(&self) -> Option<f32> {
        (self.len() == 1).then(|| self.floats()[0])
    }

    /// Decodes an initializer or a Constant node's value.
    pub fn from_proto(t: &TensorProto) -> Result<Tensor, String> {
        if t.data_location == 1 {
            return Err("external tensor data is not supported".to_string());
        }
        let shape = t
            .dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
            .collect::<Result<Vec<_>, _>>()?;
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n < 1 << 31)
            .ok_or_else(|| format!("shape {shape:?} has 2^31 elements or more"))?;
        let raw = &t.raw_data;
        let data = match t.data_type {
            data_type::FLOAT if !raw.is_empty() => Data::F32(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            data_type::FLOAT => Data::F32(t.float_data.clone()),
            data_type::DOUBLE if !raw.is_empty() => Data::F32(
                raw.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32)
                    .collect(),
            ),
            data_type::DOUBLE => Data::F32(t.double_data.iter().map(|&x| x as f32).collect()),
            data_type::INT64 if !raw.is_empty() => Data::I64(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            data_type::INT64 => Data::I64(t.int64_data.clone()),
            data_type::INT32 if !raw.is_empty() => Data::I64(
                raw.chunks_exact(4)
                    .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect(),
            ),
            data_type::INT32 | data_type::BOOL if raw.is_empty() => {
                Data::I64(t.int32_data.iter().map(|&x| i64::from(x)).collect())
            }
            data_type::BOOL => Data::I64(raw.iter().map(|&b| i64::from(b != 0)).collect()),
            other => return Err(format!("tensor element type {other} is not supported")),
        };
        let tensor = Tensor { shape, data };
        if tensor.len() != n {
            return Err(format!(
                "tensor of shape {:?} holds {} elements, not {n}",
                tensor.shape,
                tensor.len()
            ));
        }
        Ok(tensor)
    }

    /// The elements at the given flat source indices, in a tensor of `shape`.
    fn pick(&self, shape: Vec<usize>, src: &[usize]) -> Tensor {
        let data = match &self.data {
            Data::F32(v) => Data::F32(src.iter().map(|&i| v[i]).collect()),
            Data::I64(v) => Data::I64(src.iter().map(|&i| v[i]).collect()),
        };
        Tensor { shape, data }
    }

    pub fn expand(&self, shape: &[usize]) -> Result<Tensor, String> {
        let out = broadcast(&self.shape, shape)?;
        let src = broadcast_sources(&self.shape, &out)?;
        Ok(self.pick(out, &src))
    }

    pub fn reshaped(&self, shape: Vec<usize>) -> Tensor {
        Tensor {
            shape,
            data: self.data.clone(),
        }
    }

    /// Element-wise `op` with numpy broadcasting; the result is float when either side is.
    fn binary(
        &self,
        other: &Tensor,
        f: impl Fn(f64, f64) -> f64,
        i: impl Fn(i64, i64) -> Option<i64>,
    ) -> Result<Tensor, String> {
        let out = broadcast(&self.shape, &other.shape)?;
        let (sa, sb) = (
            broadcast_sources(&self.shape, &out)?,
            broadcast_sources(&other.shape, &out)?,
        );
        let data = match (&self.data, &other.data) {
            (Data::I64(a), Data::I64(b)) => Data::I64(
                sa.iter()
                    .zip(&sb)
                    .map(|(&x, &y)| i(a[x], b[y]).ok_or("integer overflow or division by zero"))
                    .collect::<Result<_, _>>()?,
            ),
            _ => {
                let (a, b) = (self.floats(), other.floats());
                Data::F32(
                    sa.iter()
                        .zip(&sb)
                        .map(|(&x, &y)| f(f64::from(a[x]), f64::from(b[y])) as f32)
                        .collect(),
                )
            }
        };
        Ok(Tensor { shape: out, data })
    }

    /// Folds one node whose inputs are all constant. `inputs` are in node order (`None` for an omitted
    /// optional input); `attr_i`, `attr_ints` and `attr_t` read the node's attributes.
    pub fn fold(op: &str, inputs: &[Option<&Tensor>], attrs: &Attrs) -> Result<Tensor, String> {
        let input = |i: usize| -> Result<&Tensor, String> {
            inputs
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| format!("input {i} is missing"))
        };
        match op {
            "Identity" => Ok(input(0)?.clone()),
            "Add" => input(0)?.binary(input(1)?, |a, b| a + b, i64::checked_add),
            "Sub" => input(0)?.binary(input(1)?, |a, b| a - b, i64::checked_sub),
            "Mul" => input(0)?.binary(input(1)?, |a, b| a * b, i64::checked_mul),
            "Div" => input(0)?.binary(input(1)?, |a, b| a / b, i64::checked_div),
            "Equal" => {
                let t = input(0)?.binary(
                    input(1)?,
                    |a, b| f64::from(u8::from(a == b)),
                    |a, b| Some(i64::from(a == b)),
                )?;
                Ok(Tensor {
                    data: Data::I64(t.ints()),
                    ..t
                })
            }
            "Sqrt" => {
                let t = input(0)?;
                Ok(Tensor {
                    shape: t.shape.clone(),
                    data: Data::F32(t.floats().iter().map(|x| x.sqrt()).collect()),
                })
            }
            "Cast" => {
                let t = input(0)?;
                let data = match attrs.i("to").unwrap_or(data_type::FLOAT as i64) as i32 {
                    data_type::FLOAT | data_type::DOUBLE => Data::F32(t.floats()),
                    data_type::BOOL => {
                        Data::I64(t.floats().iter().map(|&x| i64::from(x != 0.0)).collect())
                    }
                    data_type::INT64 | data_type::INT32 => Data::I64(t.ints()),
                    to => return Err(format!("cast to element type {to} is not supported")),
                };
                Ok(Tensor {
                    shape: t.shape.clone(),
                    data,
                })
            }
            "Shape" => {
                let t = input(0)?;
                Ok(shape_tensor(&t.shape))
            }
            "ConstantOfShape" => {
                let dims = input(0)?.ints();
                let shape = dims
                    .iter()
                    .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                    .collect::<Result<Vec<_>, _>>()?;
                let n = elements(&shape)?;
                let value = match attrs.t("value") {
                    Some(v) if v.len() == 1 => v.clone(),
                    Some(_) => return Err("value must hold one element".to_string()),
                    None => Tensor::scalar_f32(0.0),
                };
                Ok(value.pick(shape, &vec![0; n]))
            }
            "Unsqueeze" | "Squeeze" => {
                let t = input(0)?;
                let axes = match inputs.get(1).copied().flatten() {
                    Some(a) => a.ints(),
                    None => attrs.ints("axes").unwrap_or_default(),
                };
                let shape = if op == "Unsqueeze" {
                    unsqueeze(&t.shape, &axes)?
                } else {
                    let drop = axes
                        .iter()
                        .map(|&a| axis(a, t.shape.len()))
                        .collect::<Result<Vec<_>, _>>()?;
                    (0..t.shape.len())
                        .filter(|i| !(drop.contains(i) || drop.is_empty() && t.shape[*i] == 1))
                        .map(|i| t.shape[i])
                        .collect()
                };
                Ok(t.reshaped(shape))
            }
            "Reshape" => {
                let t = input(0)?;
                let shape = reshape(&t.shape, &input(1)?.ints(), attrs.i("allowzero") == Some(1))?;
                Ok(t.reshaped(shape))
            }
            "Expand" => {
                let dims = input(1)?.ints();
                let shape = dims
                    .iter()
                    .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                    .collect::<Result<Vec<_>, _>>()?;
                input(0)?.expand(&shape)
            }
            "Where" => {
                let (c, x, y) = (input(0)?, input(1)?, input(2)?);
                let out = broadcast(&broadcast(&c.shape, &x.shape)?, &y.shape)?;
                let (c, x, y) = (c.expand(&out)?, x.expand(&out)?, y.expand(&out)?);
                let pick = c.ints();
                let data = match (&x.data, &y.data) {
                    (Data::I64(a), Data::I64(b)) => Data::I64(
                        pick.iter()
                            .enumerate()
                            .map(|(i, &p)| if p != 0 { a[i] } else { b[i] })
                            .collect(),
                    ),
                    _ => {
                        let (a, b) = (x.floats(), y.floats());
                        Data::F32(
                            pick.iter()
                                .enumerate()
                                .map(|(i, &p)| if p != 0 { a[i] } else { b[i] })
                                .collect(),
                        )
                    }
                };
                Ok(Tensor { shape: out, data })
            }
            "Gather" => gather(input(0)?, input(1)?, attrs.i("axis").unwrap_or(0)),
            "Concat" => concat(
                &inputs
                    .iter()
                    .map(|t| t.ok_or("input missing"))
                    .collect::<Result<Vec<_>, _>>()?,
                attrs.i("axis").ok_or("attribute axis is missing")?,
            ),
            "Slice" => slice(
                input(0)?,
                &input(1)?.ints(),
                &input(2)?.ints(),
                inputs.get(3).copied().flatten().map(|t| t.ints()),
                inputs.get(4).copied().flatten().map(|t| t.ints()),
            ),
            "Range" => {
                let (start, limit, delta) = (input(0)?, input(1)?, input(2)?);
                let (s, l, d) = (
                    start.scalar().ok_or("start is not a scalar")?,
                    limit.scalar().ok_or("limit is not a scalar")?,
                    delta.scalar().ok_or("delta is not a scalar")?,
                );
                let n = ((l - s) / d).ceil().max(0.0);
                if !(n.is_finite() && (n as usize) <= MAX_ELEMENTS) {
                    return Err("range is too long".to_string());
                }
                let t = Tensor {
                    shape: vec![n as usize],
                    data: Data::F32((0..n as usize).map(|i| s + d * i as f32).collect()),
                };
                Ok(if start.is_float() {
                    t
                } else {
                    Tensor {
                        data: Data::I64(t.ints()),
                        ..t
                    }
                })
            }
            other => Err(format!("operator {other} cannot be evaluated on constants")),
        }
    }
}

/// A shape as the 1-D int64 tensor `Shape` returns.
pub fn shape_tensor(shape: &[usize]) -> Tensor {
    Tensor {
        shape: vec![shape.len()],
        data: Data::I64(shape.iter().map(|&d| d as i64).collect()),
    }
}

fn gather(data: &Tensor, indices: &Tensor, axis_attr: i64) -> Result<Tensor, String> {
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

fn concat(parts: &[&Tensor], axis_attr: i64) -> Result<Tensor, String> {
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
    let mut f = Vec::new();
    let mut i = Vec::new();
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

fn slice(
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
    // Per axis: the chosen indices.
    let mut pick: Vec<Vec<usize>> = t.shape.iter().map(|&d| (0..d).collect()).collect();
    for k in 0..starts.len() {
        let a = axis(axes[k], rank)?;
        let d = t.shape[a] as i64;
        let step = steps[k];
        if step == 0 {
            return Err("slice step 0".to_string());
        }
        let clamp = |v: i64, lo: i64, hi: i64| (if v < 0 { v + d } else { v }).clamp(lo, hi);
        let (mut i, end) = if step > 0 {
            (clamp(starts[k], 0, d), clamp(ends[k], 0, d))
        } else {
            (
                clamp(starts[k], 0, d - 1),
                clamp(ends[k].max(-d - 1), -1, d - 1),
            )
        };
        let mut chosen = Vec::new();
        while (step > 0 && i < end) || (step < 0 && i > end) {
            chosen.push(i as usize);
            i += step;
        }
        pick[a] = chosen;
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

/// A node's attributes, decoded.
#[derive(Clone, Debug, Default)]
pub struct Attrs {
    pub ints: Vec<(String, Vec<i64>)>,
    pub int: Vec<(String, i64)>,
    pub float: Vec<(String, f32)>,
    pub tensor: Vec<(String, Tensor)>,
}

impl Attrs {
    pub fn of(node: &super::proto::NodeProto) -> Result<Attrs, String> {
        let mut attrs = Attrs::default();
        for a in &node.attribute {
            let name = a.name.clone();
            // AttributeProto.AttributeType: FLOAT 1, INT 2, TENSOR 4, FLOATS 6, INTS 7.
            match a.r#type {
                1 => attrs.float.push((name, a.f)),
                2 => attrs.int.push((name, a.i)),
                4 => {
                    let t =
                        a.t.as_ref()
                            .ok_or(format!("attribute {name} holds no tensor"))?;
                    attrs.tensor.push((name, Tensor::from_proto(t)?));
                }
                7 => attrs.ints.push((name, a.ints.clone())),
                _ => {}
            }
        }
        Ok(attrs)
    }
    pub fn i(&self, name: &str) -> Option<i64> {
        self.int.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
    pub fn f(&self, name: &str) -> Option<f32> {
        self.float.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.ints
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
    pub fn t(&self, name: &str) -> Option<&Tensor> {
        self.tensor.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor {
            shape,
            data: Data::I64(v),
        }
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
    }

    #[test]
    fn folds_the_export_s_index_arithmetic() {
        let a = Attrs::default();
        let arange = ints(vec![1, 6], (0..6).collect());
        let s = Tensor::fold(
            "Slice",
            &[
                Some(&arange),
                Some(&ints(vec![1], vec![0])),
                Some(&ints(vec![1], vec![4])),
                Some(&ints(vec![1], vec![1])),
                None,
            ],
            &a,
        )
        .unwrap();
        assert_eq!(s, ints(vec![1, 4], vec![0, 1, 2, 3]));
        let e = Tensor::fold("Expand", &[Some(&s), Some(&ints(vec![2], vec![2, 4]))], &a).unwrap();
        assert_eq!(e.ints(), vec![0, 1, 2, 3, 0, 1, 2, 3]);
        let g = Tensor::fold(
            "Gather",
            &[
                Some(&ints(vec![3], vec![7, 8, 9])),
                Some(&ints(vec![], vec![-1])),
            ],
            &a,
        )
        .unwrap();
        assert_eq!(g, ints(vec![], vec![9]));
        let c = Tensor::fold(
            "Concat",
            &[
                Some(&ints(vec![1], vec![7])),
                Some(&ints(vec![2], vec![8, 9])),
            ],
            &Attrs {
                int: vec![("axis".into(), 0)],
                ..Attrs::default()
            },
        )
        .unwrap();
        assert_eq!(c, ints(vec![3], vec![7, 8, 9]));
        assert!(
            Tensor::fold(
                "Expand",
                &[Some(&s), Some(&ints(vec![2], vec![1 << 40, 4]))],
                &a
            )
            .is_err()
        );
    }
}
