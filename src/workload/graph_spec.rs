//! The `graph` workload kind: a graph written out value by value and op by op (what `ipu-codegen import`
//! writes from an ONNX model), with its weights in a safetensors file beside it.
//!
//! ```toml
//! kind = "graph"
//! name = "encoder"
//! partials = "f32"
//! weights = "encoder.safetensors"   # relative to this file's folder
//! weights_blake3 = "9f3c…"           # optional: the weights file's blake3, checked when it is read
//! parameters = [["model", "encoder"], ["layers", "2"]]
//! [[values]]
//! name = "x"; dtype = "f16"; role = "input"; rows = 24; cols = 64; shape = [1, 24, 64]
//! [[ops]]
//! name = "fc"; kind = "matmul"; inputs = ["x", "w"]; output = "y"
//! ```
//!
//! A value's `dtype` is `f16`, `f32`, `i64` or `bool` (a boolean, held as f16 1 and 0 on the
//! device; an input or output of it is bound and written as bool). An op's `inputs` follow
//! [`OpKind::inputs`] (an embedding's `(table, indices)` pairs in turn, an attention's `q, k, v`
//! then its mask); its attributes are `batch`, `heads`, `causal`, `scale` (attention), `epsilon`
//! (layer_norm), `fill` (mask_bias), `min_count` (mean_pool), `function` (unary: neg, abs, sqrt,
//! reciprocal, exp, erf, tanh, sigmoid, relu, gelu_erf, gelu_tanh, is_nan, is_inf or pow; binary:
//! add, sub, mul, div, pow, max, min, equal, not_equal, less, less_equal, greater or greater_equal;
//! reduce: sum, mean or max) and `exponent` (unary pow only): `name = "cube"; kind = "unary";
//! function = "pow"; exponent = 3.0; inputs = ["x"]; output = "y"`. `softmax` and `select` (`inputs
//! = ["condition", "x", "y"]`) take no attribute. `assemble` (data movement, `OpKind::Assemble`)
//! takes `pieces`, each an inline table naming one of its `inputs` (the distinct `x`s in first-use
//! order): `pieces = [{ x = "x", shape = [2, 8, 6], from = { offset = 0, strides = [48, 1, 8] }, to
//! = { offset = 0, strides = [48, 6, 1] } }]`.
//!
//! Loading validates everything: names unique, references resolved, values produced once and before
//! use, each op's shapes and dtypes consistent with its semantics, sizes below 2^31 elements; every
//! error names the file and the value or op. Writing ([`to_toml`], [`safetensors_bytes`]) is
//! deterministic: the same graph gives the same bytes.

use super::WorkloadError;
use crate::ids::{OpId, ValueId};
use crate::ir::{
    BinaryFn, DType, Graph, Op, OpKind, Piece, ReduceFn, Strided, UnaryFn, Value, ValueRole,
};
use crate::onnx::WeightData;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A loaded, validated graph workload.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphSpec {
    pub name: String,
    pub graph: Graph,
    /// The weights file as written in the spec (relative to [`GraphSpec::folder`]).
    pub weights: String,
    /// The blake3 the weights file must hash to, when the spec records it.
    pub weights_blake3: Option<blake3::Hash>,
    /// The folder of the spec's file, which `weights` is relative to.
    pub folder: PathBuf,
    /// The seed of the data `run` draws for what no file binds; no part of the graph.
    pub seed: u64,
}

// Every float attribute is checked finite on load, so equality is an equivalence.
impl Eq for GraphSpec {}

/// A graph spec's file. Required keys: `kind`, `name`, `partials`, `weights`, `values`, `ops`; `seed`
/// and `parameters` have the defaults their docs give (the README's table lists them).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphFile {
    /// Always `graph`. Required.
    kind: String,
    /// The build's name, the id's first word. Required.
    name: String,
    /// The type the AMP accumulates in: f16 or f32. Required.
    partials: DType,
    /// The seed of the data `run` draws for what no file binds; no part of the build. Default 1.
    #[serde(default = "super::defaults::seed")]
    seed: u64,
    /// The weights' safetensors file, relative to this file's folder. Required.
    weights: String,
    /// The blake3 of the weights file (64 hex digits), which `run` checks before binding the file
    /// when no `--weights` is given; `import` writes it. Default none (not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weights_blake3: Option<String>,
    /// Free-form `[key, value]` pairs the summary line repeats. Default none.
    #[serde(default)]
    parameters: Vec<(String, String)>,
    /// Every value, in order. Required.
    values: Vec<ValueEntry>,
    /// Every op, in order. Required.
    ops: Vec<OpEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueEntry {
    name: String,
    dtype: DType,
    role: ValueRole,
    rows: u32,
    cols: u32,
    #[serde(default)]
    shape: Vec<u32>,
    #[serde(default)]
    fan_in: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpEntry {
    name: String,
    kind: String,
    inputs: Vec<String>,
    output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heads: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    causal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "short_float")]
    scale: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "short_float")]
    epsilon: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "short_float")]
    fill: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "short_float")]
    min_count: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "short_float")]
    exponent: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pieces: Option<Vec<PieceEntry>>,
}

/// One piece of an `assemble`: its source by name, its shape and both sides' offsets and strides.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PieceEntry {
    x: String,
    shape: Vec<u32>,
    from: Strided,
    to: Strided,
}

/// f32 attributes written with their shortest decimal form (`0.17677669`, not `0.1767766922712326`).
mod short_float {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_f64(v.to_string().parse::<f64>().unwrap_or(f64::from(*v))),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map(|v| v as f32))
    }
}

/// The kinds, their names as [`OpKind::name`] gives them.
const KINDS: [&str; 16] = [
    "matmul",
    "add_bias",
    "gelu_tanh",
    "gelu_erf",
    "add",
    "layer_norm",
    "attention",
    "embed",
    "mask_bias",
    "mean_pool",
    "unary",
    "binary",
    "select",
    "reduce",
    "softmax",
    "assemble",
];

/// The graph spec's text for `graph`, its weights in `weights` (relative to the spec's folder).
pub fn to_toml(graph: &Graph, weights: &str) -> String {
    to_toml_pinned(graph, weights, None)
}

/// [`to_toml`], recording the blake3 the weights file must hash to.
pub fn to_toml_pinned(graph: &Graph, weights: &str, blake3: Option<&blake3::Hash>) -> String {
    let name = |id: ValueId| graph.value(id).name.clone();
    let file = GraphFile {
        kind: "graph".to_string(),
        name: graph.workload.clone(),
        partials: graph.partials,
        seed: super::defaults::seed(),
        weights: weights.to_string(),
        weights_blake3: blake3.map(|h| h.to_hex().to_string()),
        parameters: graph.parameters.clone(),
        values: graph
            .values
            .iter()
            .map(|v| ValueEntry {
                name: v.name.clone(),
                dtype: v.dtype,
                role: v.role,
                rows: v.rows,
                cols: v.cols,
                shape: v.shape.clone(),
                fan_in: v.fan_in,
            })
            .collect(),
        ops: graph
            .ops
            .iter()
            .map(|op| {
                let mut e = OpEntry {
                    name: op.name.clone(),
                    kind: op.kind.name().to_string(),
                    inputs: op.kind.inputs().into_iter().map(name).collect(),
                    output: name(op.out),
                    batch: None,
                    heads: None,
                    causal: None,
                    scale: None,
                    epsilon: None,
                    fill: None,
                    min_count: None,
                    function: None,
                    exponent: None,
                    pieces: None,
                };
                match op.kind {
                    OpKind::Attention {
                        batch,
                        heads,
                        causal,
                        scale,
                        ..
                    } => {
                        (e.batch, e.heads, e.causal, e.scale) =
                            (Some(batch), Some(heads), Some(causal), Some(scale));
                    }
                    OpKind::LayerNorm { epsilon, .. } => e.epsilon = Some(epsilon),
                    OpKind::MaskBias { fill, .. } => e.fill = Some(fill),
                    OpKind::MeanPool { min_count, .. } => e.min_count = Some(min_count),
                    OpKind::Unary { function, .. } => {
                        e.function = Some(function.name().to_string());
                        if let UnaryFn::Pow { exponent } = function {
                            e.exponent = Some(exponent);
                        }
                    }
                    OpKind::Binary { function, .. } => {
                        e.function = Some(function.name().to_string())
                    }
                    OpKind::Reduce { function, .. } => {
                        e.function = Some(function.name().to_string())
                    }
                    OpKind::Assemble { ref pieces } => {
                        e.pieces = Some(
                            (pieces.iter())
                                .map(|p| PieceEntry {
                                    x: name(p.x),
                                    shape: p.shape.clone(),
                                    from: p.from.clone(),
                                    to: p.to.clone(),
                                })
                                .collect(),
                        )
                    }
                    _ => {}
                }
                e
            })
            .collect(),
    };
    toml::to_string(&file).expect("a graph file serializes to TOML")
}

/// The safetensors bytes of every weight value's data, by value name: f32 for float weights, i64 for
/// index tables, each of the value's user-facing shape.
pub fn safetensors_bytes(
    graph: &Graph,
    weights: &BTreeMap<String, WeightData>,
) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    for v in graph.values.iter().filter(|v| v.role == ValueRole::Weight) {
        let (dtype, bytes) = match weights.get(&v.name) {
            Some(WeightData::F32(x)) => (
                safetensors::Dtype::F32,
                x.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>(),
            ),
            Some(WeightData::I64(x)) => (
                safetensors::Dtype::I64,
                x.iter().flat_map(|i| i.to_le_bytes()).collect(),
            ),
            None => return Err(format!("weight `{}` has no data", v.name)),
        };
        if bytes.len() as u64
            != v.elements()
                * if dtype == safetensors::Dtype::F32 {
                    4
                } else {
                    8
                }
        {
            return Err(format!("weight `{}` has data of the wrong length", v.name));
        }
        data.push((
            v.name.clone(),
            dtype,
            v.user_shape()
                .iter()
                .map(|&d| d as usize)
                .collect::<Vec<_>>(),
            bytes,
        ));
    }
    let views = data
        .iter()
        .map(|(n, dtype, shape, bytes)| {
            safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
                .map(|view| (n.clone(), view))
                .map_err(|e| format!("weight `{n}`: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize(views, None).map_err(|e| e.to_string())
}

impl GraphSpec {
    /// Parses and validates a graph spec; `origin` is the file's path (its folder anchors `weights`).
    pub fn parse(text: &str, origin: &str) -> Result<GraphSpec, WorkloadError> {
        let error = |message: String| WorkloadError::Parse {
            origin: origin.to_string(),
            message,
        };
        let file: GraphFile =
            toml::from_str(text).map_err(|e| error(e.to_string().trim_end().to_string()))?;
        let graph = build(&file).map_err(error)?;
        let weights_blake3 = match &file.weights_blake3 {
            None => None,
            Some(hex) => Some(
                (hex.len() == 64 && !hex.bytes().any(|b| b.is_ascii_uppercase()))
                    .then(|| blake3::Hash::from_hex(hex).ok())
                    .flatten()
                    .ok_or_else(|| {
                        error(format!(
                            "weights_blake3 {hex:?} is not 64 lowercase hex digits"
                        ))
                    })?,
            ),
        };
        let folder = Path::new(origin)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(GraphSpec {
            name: file.name,
            graph,
            weights: file.weights,
            weights_blake3,
            folder,
            seed: file.seed,
        })
    }

    /// The build id: the name and a short hash of the graph.
    pub fn id(&self) -> String {
        let bytes = rmp_serde::to_vec(&self.graph).expect("a graph encodes");
        format!("{}-{}", self.name, &blake3::hash(&bytes).to_hex()[..10])
    }

    /// The weights file, resolved against the spec's folder.
    pub fn weights_path(&self) -> PathBuf {
        self.folder.join(&self.weights)
    }

    /// `--seed` and `--partials` apply; the other overrides are an error.
    pub fn apply(&mut self, o: &super::Overrides) -> Result<(), WorkloadError> {
        let foreign = [
            ("batch", o.batch.is_some()),
            ("tokens", o.tokens.is_some()),
            ("dimension", o.dimension.is_some()),
            ("hidden", o.hidden.is_some()),
            ("blocks", o.blocks.is_some()),
            ("biases", o.biases.is_some()),
            ("key-tokens", o.key_tokens.is_some()),
            ("heads", o.heads.is_some()),
            ("head-dim", o.head_dim.is_some()),
            ("causal", o.causal.is_some()),
        ];
        if let Some((flag, _)) = foreign.iter().find(|(_, given)| *given) {
            return Err(WorkloadError::Inapplicable {
                id: self.id(),
                flag,
                kind: "graph",
            });
        }
        self.seed = o.seed.unwrap_or(self.seed);
        if let Some(p) = o.partials {
            if !p.is_partials() {
                return Err(WorkloadError::DType {
                    id: self.id(),
                    dtype: p,
                });
            }
            self.graph.partials = p;
            for (k, v) in &mut self.graph.parameters {
                if k == "partials" {
                    *v = p.to_string();
                }
            }
        }
        Ok(())
    }
}

/// The graph a file describes, or what is wrong with it.
fn build(file: &GraphFile) -> Result<Graph, String> {
    if file.kind != "graph" {
        return Err(format!("kind is {:?}, not \"graph\"", file.kind));
    }
    let safe = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !safe(&file.name) {
        return Err(format!(
            "name {:?} must be letters, digits, '.', '_' or '-' (it names the build folder)",
            file.name
        ));
    }
    if file.weights.is_empty() || Path::new(&file.weights).is_absolute() {
        return Err(format!(
            "weights {:?} must be a path relative to this file",
            file.weights
        ));
    }
    if !file.partials.is_partials() {
        return Err("partials must be f16 or f32".to_string());
    }
    let mut by_name = BTreeMap::new();
    let mut values = Vec::new();
    for (i, v) in file.values.iter().enumerate() {
        let what = format!("value `{}`", v.name);
        if v.name.is_empty()
            || by_name
                .insert(v.name.as_str(), ValueId::from_index(i))
                .is_some()
        {
            return Err(format!("{what}: names must be unique and non-empty"));
        }
        values.push(Value {
            id: ValueId::from_index(i),
            name: v.name.clone(),
            rows: v.rows,
            cols: v.cols,
            dtype: v.dtype,
            role: v.role,
            fan_in: v.fan_in,
            shape: v.shape.clone(),
        });
    }
    let mut op_names = std::collections::BTreeSet::new();
    let mut ops = Vec::new();
    for (i, e) in file.ops.iter().enumerate() {
        let what = format!("op `{}` ({})", e.name, e.kind);
        if e.name.is_empty() || !op_names.insert(e.name.as_str()) {
            return Err(format!("{what}: op names must be unique and non-empty"));
        }
        let resolve = |n: &str| {
            by_name
                .get(n)
                .copied()
                .ok_or_else(|| format!("{what}: no value named `{n}`"))
        };
        let inputs = e
            .inputs
            .iter()
            .map(|n| resolve(n))
            .collect::<Result<Vec<_>, _>>()?;
        let out = resolve(&e.output)?;
        let pieces = (e.pieces.iter().flatten())
            .map(|p| {
                Ok(Piece {
                    x: resolve(&p.x)?,
                    shape: p.shape.clone(),
                    from: p.from.clone(),
                    to: p.to.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let kind = op_kind(e, &inputs, pieces).map_err(|m| format!("{what}: {m}"))?;
        ops.push(Op {
            id: OpId::from_index(i),
            name: e.name.clone(),
            kind,
            out,
        });
    }
    let graph = Graph {
        workload: file.name.clone(),
        values,
        ops,
        partials: file.partials,
        parameters: file.parameters.clone(),
    };
    graph.check()?;
    Ok(graph)
}

/// The function of `all` named `name`, or an error listing the names.
fn one_of<F: Copy>(name: &str, all: &[F], name_of: fn(F) -> &'static str) -> Result<F, String> {
    all.iter()
        .copied()
        .find(|&f| name_of(f) == name)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&f| name_of(f)).collect();
            let pow = if names.len() == UnaryFn::PLAIN.len() {
                ", pow"
            } else {
                ""
            };
            format!(
                "unknown function {name:?}; functions: {}{pow}",
                names.join(", ")
            )
        })
}

/// The op's kind from its entry: the right number of inputs and exactly its attributes (whose values
/// [`Graph::check`] judges).
fn op_kind(e: &OpEntry, i: &[ValueId], pieces: Vec<Piece>) -> Result<OpKind, String> {
    fn given<T>(name: &str, v: Option<T>) -> Result<T, String> {
        v.ok_or(format!("attribute {name} is missing"))
    }
    let arity = |n: usize| {
        if i.len() == n {
            Ok(())
        } else {
            Err(format!("takes {n} inputs, got {}", i.len()))
        }
    };
    let attrs = [
        ("batch", e.batch.is_some()),
        ("heads", e.heads.is_some()),
        ("causal", e.causal.is_some()),
        ("scale", e.scale.is_some()),
        ("epsilon", e.epsilon.is_some()),
        ("fill", e.fill.is_some()),
        ("min_count", e.min_count.is_some()),
        ("function", e.function.is_some()),
        ("exponent", e.exponent.is_some()),
        ("pieces", e.pieces.is_some()),
    ];
    let allowed: &[&str] = match e.kind.as_str() {
        "attention" => &["batch", "heads", "causal", "scale"],
        "layer_norm" => &["epsilon"],
        "mask_bias" => &["fill"],
        "mean_pool" => &["min_count"],
        "unary" => &["function", "exponent"],
        "binary" | "reduce" => &["function"],
        "assemble" => &["pieces"],
        k if KINDS.contains(&k) => &[],
        k => return Err(format!("unknown kind {k:?}; kinds: {}", KINDS.join(", "))),
    };
    if let Some((a, _)) = attrs
        .iter()
        .find(|(a, given)| *given && !allowed.contains(a))
    {
        return Err(format!("attribute {a} does not apply to {}", e.kind));
    }
    Ok(match e.kind.as_str() {
        "matmul" => arity(2).map(|_| OpKind::MatMul { a: i[0], b: i[1] })?,
        "add_bias" => arity(2).map(|_| OpKind::AddBias {
            x: i[0],
            bias: i[1],
        })?,
        "gelu_tanh" => arity(1).map(|_| OpKind::GeluTanh { x: i[0] })?,
        "gelu_erf" => arity(1).map(|_| OpKind::GeluErf { x: i[0] })?,
        "add" => arity(2).map(|_| OpKind::Add { a: i[0], b: i[1] })?,
        "layer_norm" => {
            arity(3)?;
            let epsilon = given("epsilon", e.epsilon)?;
            OpKind::LayerNorm {
                x: i[0],
                gamma: i[1],
                beta: i[2],
                epsilon,
            }
        }
        "attention" => {
            if !(i.len() == 3 || i.len() == 4) {
                return Err(format!(
                    "takes q, k, v and an optional mask, got {} inputs",
                    i.len()
                ));
            }
            OpKind::Attention {
                q: i[0],
                k: i[1],
                v: i[2],
                batch: given("batch", e.batch)?,
                heads: given("heads", e.heads)?,
                causal: given("causal", e.causal)?,
                scale: given("scale", e.scale)?,
                mask: i.get(3).copied(),
            }
        }
        "embed" => {
            if i.is_empty() || !i.len().is_multiple_of(2) {
                return Err(format!(
                    "takes (table, indices) pairs, got {} inputs",
                    i.len()
                ));
            }
            OpKind::Embed {
                lookups: i.chunks(2).map(|p| (p[0], p[1])).collect(),
            }
        }
        "unary" => {
            arity(1)?;
            let name = given("function", e.function.as_deref())?;
            let function = if name == "pow" {
                UnaryFn::Pow {
                    exponent: given("exponent", e.exponent)?,
                }
            } else {
                if e.exponent.is_some() {
                    return Err(format!("attribute exponent does not apply to {name}"));
                }
                one_of(name, &UnaryFn::PLAIN, |f| f.name())?
            };
            OpKind::Unary { x: i[0], function }
        }
        "binary" => {
            arity(2)?;
            let name = given("function", e.function.as_deref())?;
            OpKind::Binary {
                a: i[0],
                b: i[1],
                function: one_of(name, &BinaryFn::ALL, |f| f.name())?,
            }
        }
        "reduce" => {
            arity(1)?;
            let name = given("function", e.function.as_deref())?;
            OpKind::Reduce {
                x: i[0],
                function: one_of(name, &ReduceFn::ALL, |f| f.name())?,
            }
        }
        "select" => arity(3).map(|_| OpKind::Select {
            condition: i[0],
            x: i[1],
            y: i[2],
        })?,
        "softmax" => arity(1).map(|_| OpKind::Softmax { x: i[0] })?,
        "assemble" => {
            given("pieces", e.pieces.as_ref())?;
            let kind = OpKind::Assemble { pieces };
            if kind.inputs() != i {
                return Err(format!(
                    "inputs must be the pieces' values, each once, in the order the pieces first \
                     name them ({} given, {} named)",
                    i.len(),
                    kind.inputs().len()
                ));
            }
            kind
        }
        "mask_bias" => arity(1)
            .and(given("fill", e.fill))
            .map(|fill| OpKind::MaskBias { mask: i[0], fill })?,
        _ => {
            arity(2)?;
            OpKind::MeanPool {
                x: i[0],
                mask: i[1],
                min_count: given("min_count", e.min_count)?,
            }
        }
    })
}
