//! Binding named tensors to a graph's values, and the `.npy` files of its outputs.
//!
//! Contract: [`bind`] gives the host data of every input and weight (one `Vec<f32>` per value,
//! indexed by value id, empty for the others). A weights file binds weights by name: every tensor in it
//! must name a weight, and it must hold every weight. `--input NAME=FILE` binds one input. What no file
//! binds comes from the seeded generator. A bound tensor has exactly its value's user shape
//! ([`crate::ir::Value::user_shape`]) and an accepted type: f16 or f32 for an f16 value (f32 rounds to
//! the nearest f16), f32 for f32, i64 or i32 for i64 (integers below 2^24 in magnitude, which f32
//! holds exactly), bool for bool (held as 1 and 0). Every error names the tensor, the file and what
//! was expected. [`output_files`] gives each output's `.npy` file name and bytes in the value's type
//! and user shape (a boolean output is true where the device's value is not 0).

use super::{Elements, Tensor, npy};
use crate::device::host_data;
use crate::ir::{DType, Graph, Signature, SignatureTensor, Value};
use half::f16;
use std::collections::BTreeMap;

/// The largest integer magnitude an i64 value may hold (f32 holds every integer below it exactly).
pub const INTEGER_LIMIT: i64 = 1 << 24;

/// Tensors read from one file, with the file's name for errors.
#[derive(Clone, Debug)]
pub struct TensorFile {
    pub file: String,
    pub tensors: Vec<(String, Tensor)>,
}

/// What a run binds: a weights file (all weights) and input files (one input each, by name).
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    pub weights: Option<TensorFile>,
    /// `(input name, file, tensor)`, in the order given.
    pub inputs: Vec<(String, String, Tensor)>,
    /// Whether an input no file binds is an error (an imported model's, unless `--random-inputs`)
    /// rather than data drawn from the seed.
    pub inputs_required: bool,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("{file}: tensor {name:?} is not a weight of the package{hint}")]
    NotAWeight {
        file: String,
        name: String,
        hint: String,
    },
    #[error(
        "{file}: the weights file lacks weight {name:?} ({expected}); it must hold every weight"
    )]
    MissingWeight {
        file: String,
        name: String,
        expected: String,
    },
    #[error("{file}: the package takes no input {name:?} (its inputs: {inputs}){hint}")]
    NotAnInput {
        name: String,
        file: String,
        inputs: String,
        /// The closest input's name, as `; did you mean …?`, or nothing.
        hint: String,
    },
    #[error(
        "input {name:?} ({expected}) is not bound: give --input {name}=FILE.npy or an entry {name}.npy \
         in --inputs FILE.npz, or --random-inputs to draw it from the seed"
    )]
    Unbound { name: String, expected: String },
    #[error("--input {name}: given twice ({first} and {second})")]
    Twice {
        name: String,
        first: String,
        second: String,
    },
    #[error("{file}: tensor {name:?} has shape {actual:?}; the package takes {expected}")]
    Shape {
        file: String,
        name: String,
        actual: Vec<u64>,
        expected: String,
    },
    #[error("{file}: tensor {name:?} holds {actual}; the package takes {expected} ({accepted})")]
    Type {
        file: String,
        name: String,
        actual: &'static str,
        expected: String,
        accepted: &'static str,
    },
    #[error(
        "{file}: tensor {name:?} holds {value} at element {position}, beyond the 2^24 in magnitude an \
         integer value may hold"
    )]
    IntegerRange {
        file: String,
        name: String,
        position: usize,
        value: i64,
    },
}

/// `[1, 21, 40] f16`.
fn expected(t: &SignatureTensor) -> String {
    format!("{:?} {}", t.shape, t.dtype)
}

/// A tensor's elements as host data for `value`, checked against its user shape and type.
fn convert(
    file: &str,
    name: &str,
    value: &SignatureTensor,
    tensor: &Tensor,
) -> Result<Vec<f32>, BindError> {
    let shape_matches = tensor.shape.len() == value.shape.len()
        && tensor
            .shape
            .iter()
            .zip(&value.shape)
            .all(|(&a, &b)| a == u64::from(b));
    if !shape_matches {
        return Err(BindError::Shape {
            file: file.to_string(),
            name: name.to_string(),
            actual: tensor.shape.clone(),
            expected: expected(value),
        });
    }
    let integers = |it: &mut dyn Iterator<Item = i64>| {
        it.enumerate()
            .map(|(position, x)| {
                if x.unsigned_abs() < INTEGER_LIMIT as u64 {
                    Ok(x as f32)
                } else {
                    Err(BindError::IntegerRange {
                        file: file.to_string(),
                        name: name.to_string(),
                        position,
                        value: x,
                    })
                }
            })
            .collect()
    };
    match (value.dtype, &tensor.elements) {
        (DType::F16, Elements::F16(v)) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        (DType::F16, Elements::F32(v)) => {
            Ok(v.iter().map(|&x| f16::from_f32(x).to_f32()).collect())
        }
        (DType::F32, Elements::F32(v)) => Ok(v.clone()),
        (DType::I64, Elements::I64(v)) => integers(&mut v.iter().copied()),
        (DType::I64, Elements::I32(v)) => integers(&mut v.iter().map(|&x| i64::from(x))),
        (DType::Bool, Elements::Bool(v)) => Ok(v.iter().map(|&x| f32::from(u8::from(x))).collect()),
        (dtype, elements) => Err(BindError::Type {
            file: file.to_string(),
            name: name.to_string(),
            actual: elements.type_name(),
            expected: expected(value),
            accepted: match dtype {
                DType::F16 => "f16 or f32 data",
                DType::F32 => "f32 data",
                DType::I64 => "i64 or i32 data",
                DType::Bool => "bool data",
            },
        }),
    }
}

/// The host data of every input and weight of `graph`: the bound tensors, and the seeded generator's
/// data (from `seed`) for the rest.
pub fn bind(graph: &Graph, seed: u64, bindings: &Bindings) -> Result<Vec<Vec<f32>>, BindError> {
    let signature = Signature::of(graph);
    let mut host = host_data(graph, seed);
    if let Some(weights) = &bindings.weights {
        let by_name: BTreeMap<&str, &SignatureTensor> = signature
            .weights
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let given: BTreeMap<&str, &Tensor> = weights
            .tensors
            .iter()
            .map(|(n, t)| (n.as_str(), t))
            .collect();
        for (name, tensor) in &given {
            let Some(value) = by_name.get(name) else {
                let role = signature.tensors().find(|t| t.name == *name);
                return Err(BindError::NotAWeight {
                    file: weights.file.clone(),
                    name: name.to_string(),
                    hint: match role {
                        Some(t) if t.role == crate::ir::ValueRole::Input => {
                            "; it is an input: bind it with --input NAME=FILE.npy".to_string()
                        }
                        Some(_) => "; it is an output".to_string(),
                        None => String::new(),
                    },
                });
            };
            host[value.value.index()] = convert(&weights.file, name, value, tensor)?;
        }
        if let Some(missing) = signature
            .weights
            .iter()
            .find(|w| !given.contains_key(w.name.as_str()))
        {
            return Err(BindError::MissingWeight {
                file: weights.file.clone(),
                name: missing.name.clone(),
                expected: expected(missing),
            });
        }
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, file, _) in &bindings.inputs {
        if let Some(first) = seen.insert(name, file) {
            return Err(BindError::Twice {
                name: name.clone(),
                first: first.to_string(),
                second: file.clone(),
            });
        }
    }
    for (name, file, tensor) in &bindings.inputs {
        let Some(value) = signature.inputs.iter().find(|t| t.name == *name) else {
            let inputs: Vec<&str> = signature.inputs.iter().map(|t| t.name.as_str()).collect();
            return Err(BindError::NotAnInput {
                name: name.clone(),
                file: file.clone(),
                hint: crate::suggest::did_you_mean(name, inputs.iter().copied()),
                inputs: inputs.join(", "),
            });
        };
        host[value.value.index()] = convert(file, name, value, tensor)?;
    }
    if bindings.inputs_required
        && let Some(missing) = signature
            .inputs
            .iter()
            .find(|t| !seen.contains_key(t.name.as_str()))
    {
        return Err(BindError::Unbound {
            name: missing.name.clone(),
            expected: expected(missing),
        });
    }
    Ok(host)
}

/// A tensor of a value's data (f32 holding values of its type) in its user shape and type.
pub fn value_tensor(value: &Value, data: &[f32]) -> Tensor {
    Tensor {
        shape: value.user_shape().iter().map(|&d| u64::from(d)).collect(),
        elements: match value.dtype {
            DType::F16 => Elements::F16(data.iter().map(|&x| f16::from_f32(x)).collect()),
            DType::F32 => Elements::F32(data.to_vec()),
            DType::I64 => Elements::I64(data.iter().map(|&x| x as i64).collect()),
            DType::Bool => Elements::Bool(data.iter().map(|&x| x != 0.0).collect()),
        },
    }
}

/// The file name of an output: its name with every character outside `[A-Za-z0-9._-]` made `_`, then
/// `.npy` (`onnx::Shape_422` → `onnx__Shape_422.npy`).
pub fn output_file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.npy")
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    #[error("outputs {first:?} and {second:?} would both be written to {file}")]
    Collision {
        first: String,
        second: String,
        file: String,
    },
    #[error(
        "output {name:?}: the run produced {actual} elements, the value has {expected}; nothing written"
    )]
    Length {
        name: String,
        actual: usize,
        expected: u64,
    },
}

/// Every output's name and tensor (in its user shape and type), in value order; `data` is the host
/// data after the run.
pub fn output_tensors(
    graph: &Graph,
    data: &[Vec<f32>],
) -> Result<Vec<(String, Tensor)>, OutputError> {
    let mut tensors = Vec::new();
    for out in Signature::of(graph).outputs {
        let value = graph.value(out.value);
        let values = data.get(out.value.index()).map_or(&[][..], Vec::as_slice);
        if values.len() as u64 != value.elements() {
            return Err(OutputError::Length {
                name: out.name,
                actual: values.len(),
                expected: value.elements(),
            });
        }
        tensors.push((out.name, value_tensor(value, values)));
    }
    Ok(tensors)
}

/// Every output's `.npy` file name and bytes, in value order; `data` is the host data after the run.
pub fn output_files(
    graph: &Graph,
    data: &[Vec<f32>],
) -> Result<Vec<(String, Vec<u8>)>, OutputError> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut files = Vec::new();
    for (name, tensor) in output_tensors(graph, data)? {
        let file = output_file_name(&name);
        if let Some(first) = names.insert(file.clone(), name.clone()) {
            return Err(OutputError::Collision {
                first,
                second: name,
                file,
            });
        }
        files.push((file, npy::write(&tensor)));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(output_file_name("onnx::Shape_422"), "onnx__Shape_422.npy");
        assert_eq!(output_file_name("a/b c.d-e"), "a_b_c.d-e.npy");
    }
}

#[cfg(test)]
mod more_tests {
    use super::*;
    use crate::ir::ValueRole;

    fn graph() -> Graph {
        let text = crate::workload::preset_text("siglip-mlp-small").unwrap();
        let mut g = crate::workload::WorkloadSpec::parse(&text, "p")
            .unwrap()
            .import()
            .unwrap();
        g.values[0].dtype = DType::I64;
        g
    }

    #[test]
    fn an_unbound_input_is_an_error_naming_it_only_when_inputs_are_required() {
        let g = graph();
        let none = |inputs_required| Bindings {
            weights: None,
            inputs: Vec::new(),
            inputs_required,
        };
        let e = bind(&g, 1, &none(true)).unwrap_err();
        assert!(
            matches!(&e, BindError::Unbound { name, .. } if name == "x"),
            "{e}"
        );
        assert!(e.to_string().contains("--random-inputs"), "{e}");
        assert!(bind(&g, 1, &none(false)).is_ok());
    }

    #[test]
    fn integers_beyond_two_to_the_24_are_refused() {
        let g = graph();
        let ids = |x: i64| Bindings {
            weights: None,
            inputs: vec![(
                "x".to_string(),
                "ids.npy".to_string(),
                Tensor {
                    shape: vec![21, 40],
                    elements: Elements::I64((0..840).map(|i| if i == 9 { x } else { i }).collect()),
                },
            )],
            inputs_required: true,
        };
        let host = bind(&g, 1, &ids(-(INTEGER_LIMIT - 1))).unwrap();
        assert_eq!(host[0][9], -16_777_215.0);
        let e = bind(&g, 1, &ids(INTEGER_LIMIT)).unwrap_err();
        assert!(
            matches!(&e, BindError::IntegerRange { name, position: 9, .. } if name == "x"),
            "{e}"
        );
        assert!(e.to_string().contains("ids.npy"), "{e}");
    }

    #[test]
    fn two_outputs_with_one_file_name_are_refused() {
        let mut g = graph();
        let n = g.values.len();
        g.values[n - 2].role = ValueRole::Output;
        g.values[n - 2].name = "a:b".to_string();
        g.values[n - 1].name = "a/b".to_string();
        let data: Vec<Vec<f32>> = g
            .values
            .iter()
            .map(|v| vec![0.0; v.elements() as usize])
            .collect();
        assert_eq!(
            output_files(&g, &data).unwrap_err().to_string(),
            "outputs \"a:b\" and \"a/b\" would both be written to a_b.npy"
        );
    }
}
