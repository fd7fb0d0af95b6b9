//! The ONNX front end: reads a `.onnx` model, fixes its input shapes, folds what is constant and lowers
//! the rest onto the graph IR ([`crate::ir::Graph`]) with its weights' data.
//!
//! Input: the model's bytes and an [`ImportConfig`] (the workload's name, a shape for every graph input).
//! Output: [`Imported`] (the graph, every weight's data by value name, the count of folded nodes and the
//! import's notes) or an [`OnnxError`] naming the node (its index in the node list, its name and its op
//! type). It does no I/O; the CLI reads the model and writes the graph spec (`crate::graph_spec`).
//!
//! Modules: `imported` (what goes in and comes out), `proto` (the messages of onnx.proto the importer reads, as prost structs), `tensor` (constants
//! and the constant evaluator), `lower` (the pass over the nodes), `patterns` and `blocks` (what each
//! node becomes).

mod blocks;
mod imported;
mod lower;
mod patterns;
pub mod proto;
pub mod tensor;

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

/// Decodes `bytes` as an ONNX model and lowers it onto the graph.
pub fn import(bytes: &[u8], config: &ImportConfig) -> Result<Imported, OnnxError> {
    use prost::Message;
    let model = proto::ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    if model.graph.is_none() {
        return Err(OnnxError::Decode("the file holds no graph".to_string()));
    }
    lower::lower(&model, config)
}
