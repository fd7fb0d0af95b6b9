//! Named host tensors: what `run` binds to a package's inputs and weights and writes of its outputs.
//!
//! Contract: [`npy`], [`npz`] (a zip of `.npy` entries) and [`safetensors`] turn file bytes into
//! [`Tensor`]s and back, over bytes only (the CLI reads and writes the files); any byte string,
//! however damaged or crafted, gives a tensor or an error, never a panic, and sizes are checked
//! against the bytes present before anything is allocated. [`bind`] binds tensors to a graph's values
//! by name and fills the host data (one `Vec<f32>` per value, indexed by value id; the seeded
//! generator gives what no file binds), runs the host operations ([`crate::ir::OpKind::on_host`])
//! before and after the device, and makes the `.npy` files of the outputs. Accepted element types:
//! f16, f32, i64, i32, little-endian, and bool (one byte, nonzero true, as numpy reads it), C order.
//! Deterministic: tensors are kept in name order.

pub mod bind;
pub mod host_ops;
pub mod npy;
pub mod npz;
pub mod safetensors;

use half::f16;

/// A tensor's elements, in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub enum Elements {
    F16(Vec<f16>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
}

impl Elements {
    /// The element type's name: `f16`, `f32`, `i64`, `i32` or `bool`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Elements::F16(_) => "f16",
            Elements::F32(_) => "f32",
            Elements::I64(_) => "i64",
            Elements::I32(_) => "i32",
            Elements::Bool(_) => "bool",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Elements::F16(v) => v.len(),
            Elements::F32(v) => v.len(),
            Elements::I64(v) => v.len(),
            Elements::I32(v) => v.len(),
            Elements::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per element.
    pub fn element_bytes(&self) -> usize {
        match self {
            Elements::Bool(_) => 1,
            Elements::F16(_) => 2,
            Elements::F32(_) | Elements::I32(_) => 4,
            Elements::I64(_) => 8,
        }
    }

    /// The elements as little-endian bytes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Elements::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elements::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elements::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elements::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elements::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        }
    }
}

/// The element types a file may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    F16,
    F32,
    I64,
    I32,
    Bool,
}

impl ElementType {
    pub fn bytes(self) -> usize {
        match self {
            ElementType::Bool => 1,
            ElementType::F16 => 2,
            ElementType::F32 | ElementType::I32 => 4,
            ElementType::I64 => 8,
        }
    }

    /// Decodes little-endian bytes, a whole number of elements (the caller checked the length).
    pub fn decode(self, bytes: &[u8]) -> Elements {
        match self {
            ElementType::F16 => Elements::F16(
                bytes
                    .chunks_exact(2)
                    .map(|b| f16::from_le_bytes([b[0], b[1]]))
                    .collect(),
            ),
            ElementType::F32 => Elements::F32(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            ElementType::I32 => Elements::I32(
                bytes
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            ElementType::Bool => Elements::Bool(bytes.iter().map(|&b| b != 0).collect()),
            ElementType::I64 => Elements::I64(
                bytes
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect(),
            ),
        }
    }
}

/// A tensor: its shape and its elements (as many as the shape's product).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<u64>,
    pub elements: Elements,
}

/// The number of elements of a shape and their bytes, `None` when either overflows.
pub fn checked_size(shape: &[u64], element_bytes: usize) -> Option<(u64, u64)> {
    let count = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
    Some((count, count.checked_mul(element_bytes as u64)?))
}
