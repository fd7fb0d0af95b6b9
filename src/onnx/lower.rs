//! Lowering an ONNX graph onto the graph IR, one node at a time in the file's (topological) order.
//!
//! Every ONNX tensor gets a [`Sym`]: a constant (initializers, Constant nodes and every node whose inputs
//! are constant, folded by [`Tensor::fold`]; `Shape` of any tensor folds, its shape being known once
//! the inputs' shapes are fixed), a graph value, or a step of a pattern under way (an embedding sum,
//! the mask chain, query/key/value heads, attention scores, an erf-GELU, masked pooling). A pattern
//! emits its operation when its last node arrives; a node that fits no pattern is an error naming it.
//! The patterns are in [`super::patterns`].
//!
//! Contract: values are 2-D `[rows, cols]` with the ONNX shape in `shape` (leading dimensions flattened
//! into rows); device float values are f16, weights f16 (their data kept as f32), embedding tables f32,
//! ids and masks i64, mean pooling's output f32; host operations are `Embed`, `MaskBias` and `MeanPool`.
//! Graph outputs that are graph inputs passed through (`Identity`) are dropped and noted.

use super::OnnxError;
use super::imported::{ImportConfig, Imported};
use super::patterns::{Ctx, Sym};
use super::proto::{GraphProto, ModelProto, data_type};
use super::tensor::{self, Attrs, Tensor};
use crate::ids::ValueId;
use crate::ir::{DType, ValueRole};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Node types the folder evaluates when all their inputs are constant.
const FOLDABLE: [&str; 18] = [
    "Identity",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Equal",
    "Sqrt",
    "Cast",
    "Shape",
    "ConstantOfShape",
    "Unsqueeze",
    "Squeeze",
    "Reshape",
    "Expand",
    "Where",
    "Gather",
    "Concat",
    "Slice",
];

pub fn lower(model: &ModelProto, config: &ImportConfig) -> Result<Imported, OnnxError> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Model("the model has no graph".to_string()))?;
    let opset = model
        .opset_import
        .iter()
        .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .max()
        .unwrap_or(1);
    let mut cx = Ctx::new(opset);
    let mut syms: BTreeMap<String, Sym> = BTreeMap::new();
    for t in &graph.initializer {
        let tensor = Tensor::from_proto(t)
            .map_err(|m| OnnxError::Model(format!("initializer `{}`: {m}", t.name)))?;
        syms.insert(t.name.clone(), Sym::Const(t.name.clone(), Rc::new(tensor)));
    }
    inputs(graph, config, &mut cx, &mut syms)?;
    let mut folded = 0;
    for (index, node) in graph.node.iter().enumerate() {
        let err = |message: String| OnnxError::Node {
            index,
            name: node.name.clone(),
            op_type: node.op_type.clone(),
            message,
        };
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(err(format!(
                "operator domain `{}` is not supported",
                node.domain
            )));
        }
        let attrs = Attrs::of(node).map_err(err)?;
        let ins = node
            .input
            .iter()
            .map(|n| match n.as_str() {
                "" => Ok(None),
                n => syms
                    .get(n)
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| err(format!("input `{n}` is not defined before this node"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out_name = node
            .output
            .first()
            .ok_or_else(|| err("the node has no output".to_string()))?;
        let sym = if node.op_type == "Constant" {
            folded += 1;
            Sym::Const(out_name.clone(), Rc::new(constant(&attrs).map_err(err)?))
        } else if node.op_type == "Shape" && ins.first().is_some_and(Option::is_some) {
            folded += 1;
            let shape = ins[0].as_ref().expect("checked").shape();
            let rank = shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let (start, end) = (
                clamp(attrs.i("start").unwrap_or(0)),
                clamp(attrs.i("end").unwrap_or(rank)),
            );
            let dims = shape.get(start..end.max(start)).unwrap_or_default();
            Sym::Const(out_name.clone(), Rc::new(tensor::shape_tensor(dims)))
        } else if let Some(consts) = all_const(&ins)
            && FOLDABLE.contains(&node.op_type.as_str())
            && !(node.op_type == "Gather"
                && consts
                    .first()
                    .is_some_and(|t| t.is_some_and(Tensor::is_float)))
        {
            folded += 1;
            let t = Tensor::fold(&node.op_type, &consts, &attrs).map_err(err)?;
            Sym::Const(out_name.clone(), Rc::new(t))
        } else {
            cx.node(node, &ins, &attrs).map_err(err)?
        };
        syms.insert(out_name.clone(), sym);
    }
    let mut notes = Vec::new();
    for o in &graph.output {
        match syms.get(&o.name) {
            Some(Sym::Value { id, .. }) => {
                // The value takes the output's name, which `run` reads and writes it by.
                if cx.values.iter().any(|v| v.name == o.name && v.id != *id) {
                    return Err(OnnxError::Model(format!(
                        "graph output `{}` names another value too",
                        o.name
                    )));
                }
                let v = &mut cx.values[id.index()];
                if v.role == ValueRole::Output && v.name != o.name {
                    return Err(OnnxError::Model(format!(
                        "graph outputs `{}` and `{}` are one tensor",
                        v.name, o.name
                    )));
                }
                v.role = ValueRole::Output;
                v.name = o.name.clone();
            }
            Some(Sym::Host {
                id, shape, base, ..
            }) if shape == base => notes.push(format!(
                "output `{}` is the input `{}` passed through: dropped from the graph",
                o.name,
                cx.values[id.index()].name
            )),
            Some(_) => {
                return Err(OnnxError::Model(format!(
                    "graph output `{}` is not a computed tensor the graph can stream out",
                    o.name
                )));
            }
            None => {
                return Err(OnnxError::Model(format!(
                    "graph output `{}` is produced by no node",
                    o.name
                )));
            }
        }
    }
    if !cx.values.iter().any(|v| v.role == ValueRole::Output) {
        return Err(OnnxError::Model("the graph computes no output".to_string()));
    }
    let (graph, weights) = cx.finish(config);
    Ok(Imported {
        graph,
        weights,
        folded,
        notes,
    })
}

/// The graph inputs, each with its `--shape`, as i64 (or f16) input values.
fn inputs(
    graph: &GraphProto,
    config: &ImportConfig,
    cx: &mut Ctx,
    syms: &mut BTreeMap<String, Sym>,
) -> Result<(), OnnxError> {
    for (name, _) in &config.shapes {
        if !graph.input.iter().any(|i| &i.name == name) {
            let names: Vec<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
            return Err(OnnxError::Model(format!(
                "--shape names `{name}`, which is not a graph input (inputs: {})",
                names.join(", ")
            )));
        }
    }
    for input in &graph.input {
        if syms.contains_key(&input.name) {
            continue; // An initializer listed as an input (IR version 3).
        }
        let tensor_type = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        let declared = tensor_type.and_then(|t| t.shape.as_ref()).map(|s| &s.dim);
        let shape = config
            .shapes
            .iter()
            .find(|(n, _)| n == &input.name)
            .map(|(_, s)| s.iter().map(|&d| d as usize).collect::<Vec<_>>())
            .ok_or_else(|| {
                let dims = declared.map_or("?".to_string(), |d| {
                    d.iter()
                        .map(|d| {
                            d.dim_value.map_or_else(
                                || d.dim_param.clone().unwrap_or("?".into()),
                                |v| v.to_string(),
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                OnnxError::Model(format!(
                    "graph input `{}` [{dims}] has no fixed shape: give --shape {}=AxB",
                    input.name, input.name
                ))
            })?;
        if let Some(dims) = declared {
            let fits = dims.len() == shape.len()
                && dims
                    .iter()
                    .zip(&shape)
                    .all(|(d, &s)| d.dim_value.is_none_or(|v| v == s as i64));
            if !fits {
                return Err(OnnxError::Model(format!(
                    "--shape {}={:?} does not fit the model's declared shape of that input",
                    input.name, shape
                )));
            }
        }
        let dtype = match tensor_type.map(|t| t.elem_type) {
            Some(data_type::INT64) | Some(data_type::INT32) => DType::I64,
            Some(data_type::FLOAT) => DType::F16,
            other => {
                return Err(OnnxError::Model(format!(
                    "graph input `{}` has element type {other:?}; int64 and float are supported",
                    input.name
                )));
            }
        };
        let id: ValueId = cx
            .value(&input.name, &shape, dtype, ValueRole::Input, 0)
            .map_err(|m| OnnxError::Model(format!("graph input `{}`: {m}", input.name)))?;
        let sym = if dtype == DType::I64 {
            Sym::Host {
                id,
                base: shape.clone(),
                shape,
                float: false,
            }
        } else {
            Sym::Value { id, shape }
        };
        syms.insert(input.name.clone(), sym);
    }
    Ok(())
}

/// The present inputs as constants, when every one is.
fn all_const(ins: &[Option<Sym>]) -> Option<Vec<Option<&Tensor>>> {
    ins.iter()
        .map(|s| match s {
            None => Some(None),
            Some(Sym::Const(_, t)) => Some(Some(t.as_ref())),
            Some(_) => None,
        })
        .collect()
}

/// A Constant node's value: `value`, `value_float(s)` or `value_int(s)`.
fn constant(attrs: &Attrs) -> Result<Tensor, String> {
    use tensor::Data;
    if let Some(t) = attrs.t("value") {
        return Ok(t.clone());
    }
    if let Some(f) = attrs.f("value_float") {
        return Ok(Tensor::scalar_f32(f));
    }
    if let Some(i) = attrs.i("value_int") {
        return Ok(Tensor {
            shape: Vec::new(),
            data: Data::I64(vec![i]),
        });
    }
    if let Some(v) = attrs.ints("value_ints") {
        return Ok(Tensor {
            shape: vec![v.len()],
            data: Data::I64(v),
        });
    }
    Err("a Constant needs a value, value_float, value_int or value_ints attribute".to_string())
}
