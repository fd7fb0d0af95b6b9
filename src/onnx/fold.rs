//! The first pass: shape inference over the whole graph and folding of everything constant once the
//! input shapes are fixed. A node whose inputs are all constant is evaluated ([`super::eval`]) and
//! leaves the graph; `Shape` and `Size` of a computed tensor fold from its inferred shape; every other
//! node gets its outputs' shapes and element kinds ([`super::infer`]). Nodes nothing reads are dropped.
//!
//! Input: an [`OpGraph`] as loaded. Output: the same graph with only computed nodes left, every
//! computed tensor in `infos`; the count of folded nodes. Errors name the node.

use super::OnnxError;
use super::eval::{eval, foldable, shape_slice};
use super::infer::{Operand, infer};
use super::opgraph::OpGraph;
use super::tensor::{self, Data, Tensor};
use std::rc::Rc;

/// Folds what is constant and infers the rest; returns how many nodes folded.
pub fn fold(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut folded = 0;
    let nodes = std::mem::take(&mut g.nodes);
    let mut kept = Vec::with_capacity(nodes.len());
    for node in nodes {
        let consts: Option<Vec<Option<&Tensor>>> = node
            .inputs
            .iter()
            .map(|i| match i.as_str() {
                "" => Some(None),
                i => g.consts.get(i).map(|t| Some(t.as_ref())),
            })
            .collect();
        let shape_of = match node.op.as_str() {
            "Shape" | "Size" => node.input(0).and_then(|i| g.shape(i)),
            _ => None,
        };
        let values = if let Some(shape) = shape_of {
            Some(vec![if node.op == "Shape" {
                tensor::shape_tensor(&shape_slice(&shape, &node.attrs))
            } else {
                Tensor {
                    shape: Vec::new(),
                    data: Data::I64(vec![shape.iter().product::<usize>() as i64]),
                }
            }])
        } else if let Some(consts) =
            consts.filter(|c| foldable(&node.op) && !is_lookup(&node.op, c))
        {
            Some(eval(&node.op, &consts, &node.attrs, g.opset).map_err(|m| node.error(m))?)
        } else {
            None
        };
        if let Some(values) = values {
            folded += 1;
            for (name, t) in node.outputs.iter().zip(values) {
                g.consts.insert(name.clone(), Rc::new(t));
            }
            continue;
        }
        let operands: Vec<Option<Operand>> = node
            .inputs
            .iter()
            .map(|i| match i.as_str() {
                "" => Ok(None),
                i => g
                    .consts
                    .get(i)
                    .map(|t| Operand::Const(t))
                    .or_else(|| g.infos.get(i).map(Operand::Computed))
                    .map(Some)
                    .ok_or_else(|| {
                        node.error(format!("input `{i}` is not defined before this node"))
                    }),
            })
            .collect::<Result<_, _>>()?;
        let infos = infer(&node, &operands, g.opset).map_err(|m| node.error(m))?;
        for (name, info) in node.outputs.iter().zip(infos) {
            if !name.is_empty() {
                g.infos.insert(name.clone(), info);
            }
        }
        kept.push(node);
    }
    g.nodes = kept;
    g.prune();
    Ok(folded)
}

/// A Gather from a float table (an embedding lookup, even of constant indices): it stays a lookup,
/// which the host makes, rather than a folded `[tokens, dim]` constant.
fn is_lookup(op: &str, inputs: &[Option<&Tensor>]) -> bool {
    op == "Gather"
        && inputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|t| t.is_float() && t.shape.len() == 2)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::onnx::imported::ImportConfig;
    use crate::onnx::proto::*;

    pub(crate) fn model(
        nodes: Vec<NodeProto>,
        inputs: &[(&str, i32)],
        outputs: &[&str],
        inits: Vec<TensorProto>,
    ) -> ModelProto {
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            producer_name: String::new(),
            producer_version: String::new(),
            graph: Some(GraphProto {
                node: nodes,
                name: "g".into(),
                initializer: inits,
                input: inputs
                    .iter()
                    .map(|(n, t)| ValueInfoProto {
                        name: n.to_string(),
                        r#type: Some(TypeProto {
                            tensor_type: Some(TensorTypeProto {
                                elem_type: *t,
                                shape: None,
                            }),
                        }),
                    })
                    .collect(),
                output: outputs
                    .iter()
                    .map(|n| ValueInfoProto {
                        name: n.to_string(),
                        r#type: None,
                    })
                    .collect(),
            }),
        }
    }

    pub(crate) fn n(op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_string()],
            name: output.to_string(),
            op_type: op.to_string(),
            domain: String::new(),
            attribute: Vec::new(),
        }
    }

    #[test]
    fn shape_arithmetic_over_a_computed_tensor_folds_and_the_rest_is_inferred() {
        // y = Reshape(x, Concat(Shape(x)[0:1], [-1])) + Range(0, Shape(x)[1], 1) cast to float.
        let nodes = vec![
            n("Shape", &["x"], "s"),
            n("Gather", &["s", "one"], "cols"),
            n("Range", &["zero", "cols", "one"], "r"),
            NodeProto {
                attribute: vec![AttributeProto {
                    name: "to".into(),
                    r#type: 2,
                    i: 1,
                    ..Default::default()
                }],
                ..n("Cast", &["r"], "rf")
            },
            n("Add", &["x", "rf"], "y"),
        ];
        let scalar = |name: &str, v: i64| TensorProto {
            dims: vec![],
            data_type: data_type::INT64,
            int64_data: vec![v],
            name: name.into(),
            ..Default::default()
        };
        let m = model(
            nodes,
            &[("x", data_type::FLOAT)],
            &["y"],
            vec![scalar("zero", 0), scalar("one", 1)],
        );
        let config = ImportConfig {
            name: "t".into(),
            model: "t".into(),
            shapes: vec![("x".into(), vec![2, 3])],
            external: Default::default(),
        };
        let mut g = OpGraph::load(&m, &config).unwrap();
        assert_eq!(fold(&mut g).unwrap(), 4);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.consts["rf"].floats(), vec![0.0, 1.0, 2.0]);
        assert_eq!(g.infos["y"].shape, vec![2, 3]);
    }
}
