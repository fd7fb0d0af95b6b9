//! `.safetensors` files, through the `safetensors` crate, which checks the header's length, its JSON and
//! every tensor's offsets against the bytes present. Tensors of types F16, F32, I64, I32 and BOOL are read,
//! in name order; any other type is an error naming the tensor.

use super::{ElementType, Elements, Tensor};
use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SafetensorsError {
    #[error("not a valid safetensors file: {0}")]
    Format(String),
    #[error("tensor {name:?} has element type {dtype}: use F16, F32, I64, I32 or BOOL")]
    DType { name: String, dtype: String },
}

fn element_type(dtype: Dtype) -> Option<ElementType> {
    match dtype {
        Dtype::F16 => Some(ElementType::F16),
        Dtype::F32 => Some(ElementType::F32),
        Dtype::I64 => Some(ElementType::I64),
        Dtype::I32 => Some(ElementType::I32),
        Dtype::BOOL => Some(ElementType::Bool),
        _ => None,
    }
}

/// Reads a `.safetensors` file's bytes: every tensor by name, in name order.
pub fn read(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, SafetensorsError> {
    let file =
        SafeTensors::deserialize(bytes).map_err(|e| SafetensorsError::Format(e.to_string()))?;
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for (name, view) in file.iter() {
        let kind = element_type(view.dtype()).ok_or_else(|| SafetensorsError::DType {
            name: name.to_string(),
            dtype: view.dtype().to_string(),
        })?;
        let data = view.data();
        if data.len() % kind.bytes() != 0 {
            return Err(SafetensorsError::Format(format!(
                "tensor {name:?} holds {} bytes, not a whole number of {} elements",
                data.len(),
                view.dtype()
            )));
        }
        tensors.push((
            name.to_string(),
            Tensor {
                shape: view.shape().iter().map(|&d| d as u64).collect(),
                elements: kind.decode(data),
            },
        ));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(tensors)
}

/// The `.safetensors` bytes of named tensors.
pub fn write(tensors: &[(String, Tensor)]) -> Result<Vec<u8>, SafetensorsError> {
    let bytes: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, t)| {
            let dtype = match t.elements {
                Elements::F16(_) => Dtype::F16,
                Elements::F32(_) => Dtype::F32,
                Elements::I64(_) => Dtype::I64,
                Elements::I32(_) => Dtype::I32,
                Elements::Bool(_) => Dtype::BOOL,
            };
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (name.as_str(), dtype, shape, t.elements.to_le_bytes())
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(name, dtype, shape, data)| {
            TensorView::new(*dtype, shape.clone(), data)
                .map(|v| (*name, v))
                .map_err(|e| SafetensorsError::Format(format!("tensor {name:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ::safetensors::serialize(views, None).map_err(|e| SafetensorsError::Format(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn tensors_round_trip_in_name_order() {
        let tensors = vec![
            (
                "a.weight".to_string(),
                Tensor {
                    shape: vec![2, 2],
                    elements: Elements::F16(vec![f16::ONE, f16::ZERO, f16::MAX, f16::MIN]),
                },
            ),
            (
                "b.ids".to_string(),
                Tensor {
                    shape: vec![3],
                    elements: Elements::I64(vec![0, 5, -3]),
                },
            ),
        ];
        let bytes = write(&tensors).unwrap();
        assert_eq!(read(&bytes).unwrap(), tensors);
    }
}
