//! What the import takes besides the model's bytes, and what it gives back: the graph, its weights'
//! data by value name, and what the import did.

use crate::ir::Graph;
use std::collections::BTreeMap;

/// What the import needs besides the model's bytes.
#[derive(Clone, Debug)]
pub struct ImportConfig {
    /// The workload's name.
    pub name: String,
    /// The model's name for the parameters (its file stem, say).
    pub model: String,
    /// A fixed shape for every graph input, by name.
    pub shapes: Vec<(String, Vec<u32>)>,
    /// The files external tensor data lives in, by the location the model names (relative to its
    /// folder), as [`super::external_locations`] lists them; the caller reads them.
    pub external: BTreeMap<String, Vec<u8>>,
}

/// A weight's data, by value name, as written to the weights file.
#[derive(Clone, Debug, PartialEq)]
pub enum WeightData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// The imported graph with its weights and what the import did.
#[derive(Clone, Debug)]
pub struct Imported {
    pub graph: Graph,
    /// Every weight value's data, by value name.
    pub weights: BTreeMap<String, WeightData>,
    /// Nodes evaluated to constants (Constant nodes included).
    pub folded: usize,
    /// Lines for the import log: what the passes rewrote, weights dequantised.
    pub notes: Vec<String>,
    /// What the import left out that the model has: outputs that pass an integer input through.
    pub warnings: Vec<String>,
}
