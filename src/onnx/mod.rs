//! The ONNX front end: reads a `.onnx` model, fixes its input shapes, folds what is constant and lowers
//! the rest onto the graph IR ([`crate::ir::Graph`]) with its weights' data.
//!
//! Input: the model's bytes and an [`ImportConfig`] (the workload's name, a shape for every graph input).
//! Output: [`Imported`] (the graph, every weight's data by value name, the count of folded nodes and the
//! import's notes) or an [`OnnxError`] naming the node (its index in the node list, its name and its op
//! type). It does no I/O; the CLI reads the model and writes the graph spec (`crate::graph_spec`).
//!
//! The passes, in order (tract's `declutter`, onnx-mlir's canonicalisation):
//!
//! 1. `opgraph`: load the model into an op-level graph at the fixed input shapes.
//! 2. `fold`: shape inference (`infer`) over the whole graph and folding of every node whose inputs are
//!    constant (`eval`, ONNX's own semantics); `Shape` of a computed tensor folds from its shape.
//! 3. `canonical`, `spellings` and `axes`: one pass per family of equivalent spellings (Gemm, the
//!    split LayerNorm, the GELUs, fused QKV slices, attention scaling on Q or K, boolean masks, an
//!    operator over an axis other than the last), folding again after each that rewrote.
//! 4. `lower`, `patterns` and `blocks`: each remaining node onto the graph IR, by the patterns a
//!    transformer's export has; `vector`: what no pattern fuses, op by op onto general vector operations;
//!    `logic`: comparisons, logic, `Where` and `Cast` of computed tensors onto the same (booleans as
//!    f16 1 and 0); `movement`: data movement of computed tensors, composed lazily and assembled where
//!    read.
//!
//! Other modules: `imported` (what goes in and comes out), `proto` (the messages of onnx.proto the
//! importer reads, as prost structs), `tensor` (constants, their decoding and the shape rules).

mod axes;
mod blocks;
mod canonical;
pub mod eval;
mod fold;
mod imported;
mod infer;
mod logic;
mod lower;
mod movement;
mod opgraph;
mod patches;
mod patterns;
pub mod proto;
mod spellings;
pub mod tensor;
mod vector;

pub use imported::{ImportConfig, Imported, WeightData};

/// Why a model does not import.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("not a readable ONNX model: {0}")]
    Decode(String),
    #[error("{0}")]
    Model(String),
    #[error("node {index} `{name}` ({op_type}): {message}")]
    Node {
        index: usize,
        name: String,
        op_type: String,
        message: String,
    },
}

/// The files a model's initializers keep their data in (`data_location` external), in order, each
/// once: relative paths the caller checks stay inside the model's folder before reading them.
pub fn external_locations(bytes: &[u8]) -> Result<Vec<String>, OnnxError> {
    use prost::Message;
    let model = proto::ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let mut out: Vec<String> = Vec::new();
    for t in model.graph.iter().flat_map(|g| &g.initializer) {
        if t.data_location == 1 {
            let location = opgraph::external_field(t, "location").ok_or_else(|| {
                OnnxError::Model(format!(
                    "initializer `{}`: external data names no location",
                    t.name
                ))
            })?;
            if !out.contains(&location) {
                out.push(location);
            }
        }
    }
    Ok(out)
}

/// Decodes `bytes` as an ONNX model and lowers it onto the graph.
pub fn import(bytes: &[u8], config: &ImportConfig) -> Result<Imported, OnnxError> {
    use prost::Message;
    let model = proto::ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    if model.graph.is_none() {
        return Err(OnnxError::Decode("the file holds no graph".to_string()));
    }
    lower::lower(&model, config)
}
