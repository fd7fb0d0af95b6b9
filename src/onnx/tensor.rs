//! Constant tensors: their decoding from `TensorProto`s of every element type an export uses, the
//! shape rules the evaluator and the passes share (broadcasting, Reshape's `0` and `-1`, axes), element
//! type names, and a node's decoded attributes.
//!
//! Input: decoded `TensorProto`s and attributes. Output: a [`Tensor`] (floats as f32, integers and bools
//! as i64) or a message saying what was wrong (the caller adds the node). No tensor is built with more
//! than [`MAX_ELEMENTS`] elements by an operator, so crafted shapes cannot exhaust memory.

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

/// The bytes of one element of ONNX element type `code` in `raw_data`, for the types the importer reads.
pub fn element_bytes(code: i32) -> Option<usize> {
    use data_type as d;
    match code {
        d::FLOAT | d::INT32 | d::UINT32 => Some(4),
        d::DOUBLE | d::INT64 | d::UINT64 => Some(8),
        d::FLOAT16 | d::BFLOAT16 | d::INT16 | d::UINT16 => Some(2),
        d::INT8 | d::UINT8 | d::BOOL => Some(1),
        _ => None,
    }
}

/// ONNX element type `code` by its name in onnx.proto, lower case (`int8`, `float16`).
pub fn element_name(code: i32) -> String {
    const NAMES: [&str; 24] = [
        "undefined",
        "float",
        "uint8",
        "int8",
        "uint16",
        "int16",
        "int32",
        "int64",
        "string",
        "bool",
        "float16",
        "double",
        "uint32",
        "uint64",
        "complex64",
        "complex128",
        "bfloat16",
        "float8e4m3fn",
        "float8e4m3fnuz",
        "float8e5m2",
        "float8e5m2fnuz",
        "uint4",
        "int4",
        "float4e2m1",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("code {code}"), |n| n.to_string())
}

/// Whether ONNX element type `code` is a floating-point type.
pub fn is_float_type(code: i32) -> bool {
    use data_type as d;
    matches!(code, d::FLOAT | d::DOUBLE | d::FLOAT16 | d::BFLOAT16)
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
pub(super) fn broadcast_sources(input: &[usize], out: &[usize]) -> Result<Vec<usize>, String> {
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

    /// Decodes an initializer or a Constant node's value. Floats of every width become f32; integers
    /// and bools i64; other element types are refused by name.
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
        let width = element_bytes(t.data_type).ok_or_else(|| {
            format!(
                "tensor element type {} is not supported",
                element_name(t.data_type)
            )
        })?;
        if !raw.is_empty() && raw.len() != n * width {
            return Err(format!(
                "tensor of shape {shape:?} and type {} holds {} bytes, not {}",
                element_name(t.data_type),
                raw.len(),
                n * width
            ));
        }
        let chunks = || raw.chunks_exact(width);
        let le = |c: &[u8]| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        };
        use data_type as d;
        let data = match t.data_type {
            d::FLOAT if !raw.is_empty() => {
                Data::F32(chunks().map(|c| f32::from_bits(le(c) as u32)).collect())
            }
            d::FLOAT => Data::F32(t.float_data.clone()),
            d::DOUBLE if !raw.is_empty() => {
                Data::F32(chunks().map(|c| f64::from_bits(le(c)) as f32).collect())
            }
            d::DOUBLE => Data::F32(t.double_data.iter().map(|&x| x as f32).collect()),
            d::FLOAT16 | d::BFLOAT16 => {
                let bits: Vec<u16> = if raw.is_empty() {
                    t.int32_data.iter().map(|&x| x as u16).collect()
                } else {
                    chunks().map(|c| le(c) as u16).collect()
                };
                Data::F32(
                    bits.iter()
                        .map(|&b| {
                            if t.data_type == d::FLOAT16 {
                                half::f16::from_bits(b).to_f32()
                            } else {
                                half::bf16::from_bits(b).to_f32()
                            }
                        })
                        .collect(),
                )
            }
            d::INT64 if raw.is_empty() => Data::I64(t.int64_data.clone()),
            d::UINT64 if raw.is_empty() => {
                Data::I64(t.uint64_data.iter().map(|&x| x as i64).collect())
            }
            d::INT64 | d::UINT64 => Data::I64(chunks().map(|c| le(c) as i64).collect()),
            _ if raw.is_empty() => {
                // INT32, INT16, INT8, UINT16, UINT8, BOOL and UINT32 (as int32 or uint64) in their typed fields.
                if t.data_type == d::UINT32 {
                    Data::I64(t.uint64_data.iter().map(|&x| x as i64).collect())
                } else {
                    Data::I64(t.int32_data.iter().map(|&x| i64::from(x)).collect())
                }
            }
            d::INT32 => Data::I64(chunks().map(|c| i64::from(le(c) as u32 as i32)).collect()),
            d::UINT32 => Data::I64(chunks().map(|c| le(c) as i64).collect()),
            d::INT16 => Data::I64(chunks().map(|c| i64::from(le(c) as u16 as i16)).collect()),
            d::UINT16 => Data::I64(chunks().map(|c| le(c) as i64).collect()),
            d::INT8 => Data::I64(raw.iter().map(|&b| i64::from(b as i8)).collect()),
            d::UINT8 => Data::I64(raw.iter().map(|&b| i64::from(b)).collect()),
            _ => Data::I64(raw.iter().map(|&b| i64::from(b != 0)).collect()),
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
    pub(super) fn pick(&self, shape: Vec<usize>, src: &[usize]) -> Tensor {
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
}

/// A shape as the 1-D int64 tensor `Shape` returns.
pub fn shape_tensor(shape: &[usize]) -> Tensor {
    Tensor {
        shape: vec![shape.len()],
        data: Data::I64(shape.iter().map(|&d| d as i64).collect()),
    }
}

/// A node's attributes, decoded.
#[derive(Clone, Debug, Default)]
pub struct Attrs {
    pub ints: Vec<(String, Vec<i64>)>,
    pub int: Vec<(String, i64)>,
    pub float: Vec<(String, f32)>,
    pub string: Vec<(String, String)>,
    pub tensor: Vec<(String, Tensor)>,
}

impl Attrs {
    pub fn of(node: &super::proto::NodeProto) -> Result<Attrs, String> {
        let mut attrs = Attrs::default();
        for a in &node.attribute {
            let name = a.name.clone();
            // AttributeProto.AttributeType: FLOAT 1, INT 2, STRING 3, TENSOR 4, FLOATS 6, INTS 7.
            match a.r#type {
                1 => attrs.float.push((name, a.f)),
                2 => attrs.int.push((name, a.i)),
                3 => attrs
                    .string
                    .push((name, String::from_utf8_lossy(&a.s).into_owned())),
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
    pub fn s(&self, name: &str) -> Option<&str> {
        self.string
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    /// These attributes with integer `name` set to `v` (for the nodes a pass writes).
    pub fn with_int(mut self, name: &str, v: i64) -> Attrs {
        self.int.retain(|(n, _)| n != name);
        self.int.push((name.to_string(), v));
        self
    }
    /// These attributes with float `name` set to `v`.
    pub fn with_float(mut self, name: &str, v: f32) -> Attrs {
        self.float.retain(|(n, _)| n != name);
        self.float.push((name.to_string(), v));
        self
    }
    /// These attributes with string `name` set to `v`.
    pub fn with_str(mut self, name: &str, v: &str) -> Attrs {
        self.string.retain(|(n, _)| n != name);
        self.string.push((name.to_string(), v.to_string()));
        self
    }
    /// These attributes with integer list `name` set to `v`.
    pub fn with_ints(mut self, name: &str, v: Vec<i64>) -> Attrs {
        self.ints.retain(|(n, _)| n != name);
        self.ints.push((name.to_string(), v));
        self
    }
}
