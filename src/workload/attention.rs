//! The `attention` workload kind: `o = softmax(q · kᵀ / √head_dim) · v` per batch and head.
//!
//! Contract: [`attention_graph`] builds one attention operation over the inputs `q` (`batch · tokens`
//! rows), `k` and `v` (`batch · key_tokens` rows), each `heads · head_dim` wide, with the
//! `1/√head_dim` scale; its result `o` is the output.

use super::defaults;
use crate::ids::{OpId, ValueId};
use crate::ir::{DType, Graph, Op, OpKind, Value, ValueRole};
use serde::{Deserialize, Serialize};

/// `o = softmax(q · kᵀ / √head_dim) · v` per batch and head, with an online (flash) softmax.
///
/// Required keys: `kind`, `name`, `tokens`, `heads`, `head_dim`; every other key has the default its
/// doc gives (the README's table lists them all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionSpec {
    /// Always `attention`. Required.
    pub kind: String,
    /// The build's name, the id's first word. Required.
    pub name: String,
    /// Sequences in the batch. Default 1.
    #[serde(default = "defaults::one")]
    pub batch: u32,
    /// Query length. Required.
    pub tokens: u32,
    /// Key and value length. Default: the query length (`tokens`).
    #[serde(default)]
    pub key_tokens: Option<u32>,
    /// Heads. Required.
    pub heads: u32,
    /// The dimension of each head. Required.
    pub head_dim: u32,
    /// Whether query `i` sees only keys `0..=i`. Default false.
    #[serde(default)]
    pub causal: bool,
    /// The element type of q, k, v and o; only f16 is built. Default f16.
    #[serde(default = "defaults::f16")]
    pub dtype: DType,
    /// The type scores and partial sums accumulate in: f16 or f32. Default f16.
    #[serde(default = "defaults::f16")]
    pub partials: DType,
    /// The seed of the data `run` draws for what no file binds; no part of the build. Default 1.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
}

impl AttentionSpec {
    pub fn keys(&self) -> u32 {
        self.key_tokens.unwrap_or(self.tokens)
    }
}

pub(super) fn attention_graph(workload: String, a: &AttentionSpec) -> Graph {
    let parameters: &[(&str, String)] = &[
        ("benchmark", format!("{}-{}", a.name, a.dtype)),
        ("batch", a.batch.to_string()),
        ("tokens", a.tokens.to_string()),
        ("keyTokens", a.keys().to_string()),
        ("heads", a.heads.to_string()),
        ("headDimension", a.head_dim.to_string()),
        ("causal", a.causal.to_string()),
        ("partials", a.partials.to_string()),
    ];
    let cols = a.heads * a.head_dim;
    let value = |id: usize, name: &str, rows: u32, role: ValueRole| Value {
        id: ValueId::from_index(id),
        name: name.to_string(),
        rows,
        cols,
        dtype: a.dtype,
        role,
        fan_in: 0,
        shape: Vec::new(),
    };
    let (queries, keys) = (a.batch * a.tokens, a.batch * a.keys());
    Graph {
        values: vec![
            value(0, "q", queries, ValueRole::Input),
            value(1, "k", keys, ValueRole::Input),
            value(2, "v", keys, ValueRole::Input),
            value(3, "o", queries, ValueRole::Output),
        ],
        ops: vec![Op {
            id: OpId::from_index(0),
            name: "attention".to_string(),
            kind: OpKind::Attention {
                q: ValueId::from_index(0),
                k: ValueId::from_index(1),
                v: ValueId::from_index(2),
                batch: a.batch,
                heads: a.heads,
                causal: a.causal,
                scale: 1.0 / (a.head_dim as f32).sqrt(),
                mask: None,
            },
            out: ValueId::from_index(3),
        }],
        ..Graph::empty(workload, a.partials, parameters)
    }
}
