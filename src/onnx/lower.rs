//! The front end's pipeline and its last pass: the model is loaded into an [`OpGraph`] at the fixed
//! input shapes, folded ([`fold`]), canonicalised ([`canonical`]) and then lowered onto the graph IR,
//! one node at a time in topological order.
//!
//! Every ONNX tensor gets a [`Sym`]: a constant, a graph value, or a step of a pattern under way (an
//! embedding sum, the mask chain, query/key/value heads, attention scores, masked pooling). A pattern
//! emits its operation when its last node arrives; a node that fits no pattern is an error naming it.
//! The patterns are in [`super::patterns`].
//!
//! Contract: values are 2-D `[rows, cols]` with the ONNX shape in `shape` (leading dimensions flattened
//! into rows); device float values are f16, boolean ones bool (f16 1 and 0 on the device; a device
//! output takes the element type the model declares for it), weights f16 (their data kept as f32),
//! embedding tables f32, ids and masks i64, mean pooling's output f32; host operations are `Embed`,
//! `MaskBias` and `MeanPool`. Graph outputs that are integer graph inputs passed through are
//! skipped, with a warning.

use super::OnnxError;
use super::imported::{ImportConfig, Imported};
use super::opgraph::{Elem, OpGraph};
use super::patterns::{Ctx, Sym, iota, is_whole};
use super::proto::ModelProto;
use super::{canonical, fold};
use crate::ids::ValueId;
use crate::ir::{DType, ValueRole};
use std::collections::BTreeMap;

pub fn lower(model: &ModelProto, config: &ImportConfig) -> Result<Imported, OnnxError> {
    let mut g = OpGraph::load(model, config)?;
    let positions = positions(&g);
    let too_long = |e: OnnxError| match positions {
        Some((ref table, p, t)) => OnnxError::Model(format!(
            "the model has {p} positions (`{table}`); the inputs ask for {t} tokens: give --shape with at most {p} ({e})"
        )),
        None => e,
    };
    let folded = fold::fold(&mut g).map_err(too_long)?;
    let rewrites = canonical::canonicalise(&mut g).map_err(too_long)?;
    let mut notes: Vec<String> = rewrites
        .iter()
        .map(|(pass, n)| format!("canonicalised: {pass} rewrote {n} time(s)"))
        .collect();
    if !g.quantized.is_empty() {
        let elements: usize = g.quantized.values().map(|(_, n)| n).sum();
        let types: std::collections::BTreeSet<&str> =
            g.quantized.values().map(|(t, _)| t.as_str()).collect();
        notes.push(format!(
            "dequantised {} {} weight(s) ({elements} elements) to f16 at import",
            g.quantized.len(),
            types.into_iter().collect::<Vec<_>>().join("/")
        ));
    }
    let mut cx = Ctx::new(g.opset);
    let mut syms: BTreeMap<String, Sym> = g
        .consts
        .iter()
        .map(|(n, t)| (n.clone(), Sym::Const(n.clone(), t.clone())))
        .collect();
    inputs(&g, &mut cx, &mut syms)?;
    for node in &g.nodes {
        let ins = node
            .inputs
            .iter()
            .map(|n| match n.as_str() {
                "" => Ok(None),
                n => syms.get(n).cloned().map(Some).ok_or_else(|| {
                    node.error(format!("input `{n}` is not defined before this node"))
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sym = cx.node(node, &ins).map_err(|m| node.error(m))?;
        syms.insert(node.output().to_string(), sym);
    }
    let mut warnings = Vec::new();
    for name in &g.outputs {
        let o = Output { name: name.clone() };
        // A view of moved elements is assembled to be streamed out.
        // An input passed through as a float or boolean output is copied, so that the device writes it.
        if let Some(Sym::Value { id, shape }) = syms.get(name).cloned()
            && cx.values[id.index()].role == ValueRole::Input
        {
            let copy = Sym::View {
                sources: vec![id],
                index: super::movement::iota(&shape, 0),
            };
            syms.insert(name.clone(), copy);
        }
        if let Some(view @ (Sym::View { .. } | Sym::Heads { .. })) = syms.get(name).cloned() {
            let (id, shape) = cx
                .materialize(&view)
                .map_err(|m| OnnxError::Model(format!("graph output `{name}`: {m}")))?;
            syms.insert(name.clone(), Sym::Value { id, shape });
        }
        match syms.get(&o.name) {
            Some(Sym::Value { id, shape }) => {
                // The value takes the output's name, which `run` reads and writes it by, and the
                // output's shape (a Reshape that keeps the rows is no operation of its own).
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
                // A device output is written as the model declares it: a boolean or a float.
                if v.dtype.held_as_f16() {
                    let boolean = g.infos.get(name).is_some_and(|i| i.elem == Elem::Bool);
                    v.dtype = if boolean { DType::Bool } else { DType::F16 };
                }
                if shape.iter().product::<usize>() as u64 == v.elements() {
                    v.shape = shape.iter().map(|&d| d as u32).collect();
                }
            }
            Some(Sym::Host {
                id, index, base, ..
            }) if is_whole(index, base) => warnings.push(format!(
                "output `{}` is skipped: it is the integer input `{}` passed through, which `run` does not write",
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
        warnings,
    })
}

/// The graph inputs at their fixed shapes: integer inputs as i64 host values, float ones as f16,
/// boolean ones as booleans (on the device, f16 1 and 0).
fn inputs(g: &OpGraph, cx: &mut Ctx, syms: &mut BTreeMap<String, Sym>) -> Result<(), OnnxError> {
    for (name, shape, _) in &g.inputs {
        let dtype = match g.infos.get(name).map(|i| i.elem) {
            Some(Elem::Float) => DType::F16,
            Some(Elem::Bool) => DType::Bool,
            _ => DType::I64,
        };
        let id: ValueId = cx
            .value(name, shape, dtype, ValueRole::Input, 0)
            .map_err(|m| OnnxError::Model(format!("graph input `{name}`: {m}")))?;
        let sym = if dtype != DType::I64 {
            Sym::Value {
                id,
                shape: shape.clone(),
            }
        } else {
            Sym::Host {
                id,
                base: shape.clone(),
                index: iota(shape),
                float: false,
            }
        };
        syms.insert(name.clone(), sym);
    }
    Ok(())
}

/// When an integer input is longer than the model's position table: the table's name, its positions
/// and the tokens asked for. A position table is a `position_ids` buffer (`[1, P]` holding `0..P`) or a float `[P, d]` initializer whose name says it holds position embeddings.
fn positions(g: &OpGraph) -> Option<(String, usize, usize)> {
    let tokens = g
        .inputs
        .iter()
        .filter(|(n, _, _)| g.infos.get(n).is_some_and(|i| i.elem != Elem::Float))
        .filter_map(|(_, s, _)| s.last().copied())
        .max()?;
    g.consts
        .iter()
        .filter_map(|(name, t)| {
            let arange = !t.is_float()
                && t.shape.len() == 2
                && t.shape[0] == 1
                && t.len() > 1
                && t.ints().iter().enumerate().all(|(i, &v)| v == i as i64);
            let table =
                t.is_float() && t.shape.len() == 2 && name.to_lowercase().contains("position");
            (arange || table).then(|| (name.clone(), if arange { t.len() } else { t.shape[0] }))
        })
        .filter(|&(_, p)| p < tokens)
        .min_by_key(|&(_, p)| p)
        .map(|(name, p)| (name, p, tokens))
}

/// A graph output by name.
struct Output {
    name: String,
}
