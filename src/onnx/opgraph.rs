//! The op-level graph the front end's passes rewrite: ONNX nodes in topological order over named
//! tensors, each tensor either a constant (initializers, Constant nodes, everything folded) or computed
//! with a known shape and element kind once the graph inputs' shapes are fixed.
//!
//! Contract: [`OpGraph::load`] takes a decoded model and the import's fixed input shapes; every node
//! keeps the index it had in the model's node list, which errors name (a node a pass writes takes the
//! index of the node it replaces). Passes keep the node list topological; a tensor is produced by at
//! most one node. Graph inputs are float, int64, int32 or bool; any other element type is refused
//! naming the input.

use super::OnnxError;
use super::imported::ImportConfig;
use super::proto::{GraphProto, ModelProto, TensorProto, data_type};
use super::tensor::{self, Attrs, Tensor};
use std::collections::BTreeMap;
use std::rc::Rc;

/// One operator application.
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's index in the model's node list.
    pub index: usize,
    pub name: String,
    pub op: String,
    /// Input tensor names; `""` for an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Attrs,
}

impl Node {
    /// The node's input `i`, when given.
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }
    pub fn output(&self) -> &str {
        self.outputs.first().map_or("", String::as_str)
    }
    /// An error about this node.
    pub fn error(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            index: self.index,
            name: self.name.clone(),
            op_type: self.op.clone(),
            message: message.into(),
        }
    }
}

/// A computed tensor's element kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Float,
    Int,
    Bool,
}

impl Elem {
    /// The kind of ONNX element type `code`.
    pub fn of_type(code: i32) -> Elem {
        match code {
            data_type::BOOL => Elem::Bool,
            c if tensor::is_float_type(c) => Elem::Float,
            _ => Elem::Int,
        }
    }
    /// The kind of a constant.
    pub fn of(t: &Tensor) -> Elem {
        if t.is_float() { Elem::Float } else { Elem::Int }
    }
}

/// A computed tensor's shape and element kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub shape: Vec<usize>,
    pub elem: Elem,
}

/// The graph under rewriting.
#[derive(Clone, Debug)]
pub struct OpGraph {
    pub opset: i64,
    pub nodes: Vec<Node>,
    /// Constant tensors by name.
    pub consts: BTreeMap<String, Rc<Tensor>>,
    /// Computed tensors (graph inputs included) by name.
    pub infos: BTreeMap<String, Info>,
    /// The graph inputs with their fixed shapes and ONNX element types, in the model's order.
    pub inputs: Vec<(String, Vec<usize>, i32)>,
    pub outputs: Vec<String>,
    /// Initializers of integer type (weight-only quantisation), by name: element type and count.
    pub quantized: BTreeMap<String, (String, usize)>,
    fresh: usize,
}

impl OpGraph {
    /// The model's graph with its inputs at the fixed shapes `config` gives.
    pub fn load(model: &ModelProto, config: &ImportConfig) -> Result<OpGraph, OnnxError> {
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
        let mut g = OpGraph {
            opset,
            nodes: Vec::new(),
            consts: BTreeMap::new(),
            infos: BTreeMap::new(),
            inputs: Vec::new(),
            outputs: graph.output.iter().map(|o| o.name.clone()).collect(),
            quantized: BTreeMap::new(),
            fresh: 0,
        };
        for t in &graph.initializer {
            let resolved;
            let t = if t.data_location == 1 {
                resolved = external(t, config)
                    .map_err(|m| OnnxError::Model(format!("initializer `{}`: {m}", t.name)))?;
                &resolved
            } else {
                t
            };
            let tensor = Tensor::from_proto(t)
                .map_err(|m| OnnxError::Model(format!("initializer `{}`: {m}", t.name)))?;
            if matches!(t.data_type, data_type::INT8 | data_type::UINT8) {
                g.quantized.insert(
                    t.name.clone(),
                    (tensor::element_name(t.data_type), tensor.len()),
                );
            }
            g.consts.insert(t.name.clone(), Rc::new(tensor));
        }
        g.load_inputs(graph, config)?;
        for (index, n) in graph.node.iter().enumerate() {
            let node = |message: String| OnnxError::Node {
                index,
                name: n.name.clone(),
                op_type: n.op_type.clone(),
                message,
            };
            if !(n.domain.is_empty() || n.domain == "ai.onnx") {
                return Err(node(format!(
                    "operator domain `{}` is not supported",
                    n.domain
                )));
            }
            if n.output.is_empty() {
                return Err(node("the node has no output".to_string()));
            }
            let attrs = Attrs::of(n).map_err(node)?;
            if n.op_type == "Constant" {
                let value = constant(&attrs).map_err(node)?;
                g.consts.insert(n.output[0].clone(), Rc::new(value));
                continue;
            }
            g.nodes.push(Node {
                index,
                name: if n.name.is_empty() {
                    n.output[0].clone()
                } else {
                    n.name.clone()
                },
                op: n.op_type.clone(),
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                attrs,
            });
        }
        Ok(g)
    }

    fn load_inputs(&mut self, graph: &GraphProto, config: &ImportConfig) -> Result<(), OnnxError> {
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
            if self.consts.contains_key(&input.name) {
                continue; // An initializer listed as an input (IR version 3).
            }
            let tensor_type = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
            let declared = tensor_type.and_then(|t| t.shape.as_ref()).map(|s| &s.dim);
            let dims = |d: &[super::proto::Dimension]| {
                d.iter()
                    .map(|d| {
                        d.dim_value.map_or_else(
                            || d.dim_param.clone().unwrap_or("?".into()),
                            |v| v.to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let shape = config
                .shapes
                .iter()
                .find(|(n, _)| n == &input.name)
                .map(|(_, s)| s.iter().map(|&d| d as usize).collect::<Vec<_>>())
                .ok_or_else(|| {
                    OnnxError::Model(format!(
                        "graph input `{}` [{}] has no fixed shape: give --shape {}=AxB",
                        input.name,
                        declared.map_or("?".to_string(), |d| dims(d)),
                        input.name
                    ))
                })?;
            if let Some(d) = declared {
                let fits = d.len() == shape.len()
                    && d.iter()
                        .zip(&shape)
                        .all(|(d, &s)| d.dim_value.is_none_or(|v| v == s as i64));
                if !fits {
                    return Err(OnnxError::Model(format!(
                        "--shape {}={} does not fit the model's declared shape [{}] of that input",
                        input.name,
                        shape
                            .iter()
                            .map(usize::to_string)
                            .collect::<Vec<_>>()
                            .join("x"),
                        dims(d)
                    )));
                }
            }
            let code = tensor_type.map_or(0, |t| t.elem_type);
            let elem = match code {
                data_type::INT64 | data_type::INT32 => Elem::Int,
                data_type::BOOL => Elem::Bool,
                c if tensor::is_float_type(c) => Elem::Float,
                c => {
                    return Err(OnnxError::Model(format!(
                        "graph input `{}` has element type {}; int64, int32, float and bool inputs are supported",
                        input.name,
                        tensor::element_name(c)
                    )));
                }
            };
            self.infos.insert(
                input.name.clone(),
                Info {
                    shape: shape.clone(),
                    elem,
                },
            );
            self.inputs.push((input.name.clone(), shape, code));
        }
        Ok(())
    }

    /// A new tensor name, unused in the graph, starting with `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        loop {
            self.fresh += 1;
            let name = format!("{base}/canonical_{}", self.fresh);
            if !self.consts.contains_key(&name) && !self.infos.contains_key(&name) {
                return name;
            }
        }
    }

    /// A new constant tensor named after `base`.
    pub fn constant(&mut self, base: &str, t: Tensor) -> String {
        let name = self.fresh(base);
        self.consts.insert(name.clone(), Rc::new(t));
        name
    }

    /// A new float scalar constant named after `base`.
    pub fn scalar_const(&mut self, base: &str, v: f32) -> String {
        self.constant(base, Tensor::scalar_f32(v))
    }

    /// The index in `nodes` of the node producing `tensor`.
    pub fn producer(&self, tensor: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.outputs.iter().any(|o| o == tensor))
    }

    /// How many node inputs and graph outputs read `tensor`.
    pub fn uses(&self, tensor: &str) -> usize {
        self.nodes
            .iter()
            .flat_map(|n| &n.inputs)
            .chain(&self.outputs)
            .filter(|i| *i == tensor)
            .count()
    }

    /// The node producing `tensor`, when it is an `op` node.
    pub fn produced_by(&self, tensor: &str, op: &str) -> Option<&Node> {
        self.producer(tensor)
            .map(|i| &self.nodes[i])
            .filter(|n| n.op == op)
    }

    /// The single element of constant `tensor`.
    pub fn scalar(&self, tensor: &str) -> Option<f32> {
        self.consts.get(tensor).and_then(|t| t.scalar())
    }

    /// The node's input `i` when it is a computed tensor, with its shape.
    pub fn computed_input(&self, node: &Node, i: usize) -> Option<(String, Vec<usize>)> {
        let x = node.input(i)?;
        self.infos
            .get(x)
            .map(|info| (x.to_string(), info.shape.clone()))
    }

    /// A tensor's shape, constant or computed.
    pub fn shape(&self, tensor: &str) -> Option<Vec<usize>> {
        self.consts
            .get(tensor)
            .map(|t| t.shape.clone())
            .or_else(|| self.infos.get(tensor).map(|i| i.shape.clone()))
    }

    /// Drops nodes none of whose outputs is read, repeatedly; returns how many were dropped.
    pub fn prune(&mut self) -> usize {
        let before = self.nodes.len();
        loop {
            let mut read: std::collections::BTreeSet<&str> =
                self.outputs.iter().map(String::as_str).collect();
            read.extend(
                self.nodes
                    .iter()
                    .flat_map(|n| n.inputs.iter().map(String::as_str)),
            );
            let keep: Vec<bool> = self
                .nodes
                .iter()
                .map(|n| n.outputs.iter().any(|o| read.contains(o.as_str())))
                .collect();
            if keep.iter().all(|&k| k) {
                break;
            }
            let mut k = keep.into_iter();
            self.nodes.retain(|_| k.next().unwrap_or(true));
        }
        before - self.nodes.len()
    }

    /// Replaces the node at `at` by `nodes` (in order), the last of which computes the replaced node's
    /// output under its name and takes its node name; the nodes the old one read are left to
    /// [`OpGraph::prune`].
    pub fn replace(&mut self, at: usize, mut nodes: Vec<Node>) {
        if let Some(last) = nodes.last_mut() {
            last.outputs = self.nodes[at].outputs.clone();
            last.name = self.nodes[at].name.clone();
        }
        self.replace_each(at, nodes);
    }

    /// Replaces the node at `at` by `nodes`, each giving the outputs it names (a node of several
    /// outputs made one node a part), all with the old node's index; returns how many went in.
    pub fn replace_each(&mut self, at: usize, mut nodes: Vec<Node>) -> usize {
        let old = self.nodes.remove(at);
        for n in &mut nodes {
            n.index = old.index;
        }
        let added = nodes.len();
        self.nodes.splice(at..at, nodes);
        added
    }

    /// A node of `op` over `inputs` giving a fresh tensor named after `base`, with the computed
    /// tensor's `info`: for the rewrites that add a step.
    pub fn step(
        &mut self,
        base: &str,
        op: &str,
        inputs: Vec<String>,
        attrs: Attrs,
        info: Info,
    ) -> Node {
        let out = self.fresh(base);
        self.infos.insert(out.clone(), info);
        Node {
            index: 0,
            name: out.clone(),
            op: op.to_string(),
            inputs,
            outputs: vec![out],
            attrs,
        }
    }
}

/// The value of `key` among a tensor's external data entries.
pub fn external_field(t: &TensorProto, key: &str) -> Option<String> {
    t.external_data
        .iter()
        .find(|e| e.key == key)
        .map(|e| e.value.clone())
}

/// An initializer whose data lives in a file, with that data read from the files `config` holds:
/// `offset` and `length` (the rest of the file when absent) checked against the file.
fn external(t: &TensorProto, config: &ImportConfig) -> Result<TensorProto, String> {
    let location = external_field(t, "location").ok_or("external data names no location")?;
    let file = config
        .external
        .get(&location)
        .ok_or_else(|| format!("external data file `{location}` was not read"))?;
    let number = |key: &str| -> Result<Option<usize>, String> {
        external_field(t, key)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| format!("external data {key} `{v}` is not a number"))
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let length = number("length")?.unwrap_or(file.len().saturating_sub(offset));
    let end = offset.checked_add(length).filter(|&e| e <= file.len()).ok_or_else(|| {
        format!("external data `{location}` holds {} bytes; the tensor asks for {length} from {offset}", file.len())
    })?;
    Ok(TensorProto {
        raw_data: file[offset..end].to_vec(),
        data_location: 0,
        external_data: Vec::new(),
        ..t.clone()
    })
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
