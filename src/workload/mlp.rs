//! The `mlp` workload kind: `y = W2 · gelu_tanh(W1 · x + b1) + b2`, repeated `blocks` times.
//!
//! Contract: [`mlp_graph`] builds, over `batch · tokens` rows, per block the fc1 matmul (with its
//! bias when `biases`), the tanh-GELU and the fc2 matmul (with its bias); the last block's result is
//! the output. Values and operations are numbered in order of creation: per block the fc1 and fc2
//! weights, then each operation's bias and result.

use super::defaults;
use crate::ids::{OpId, ValueId};
use crate::ir::{DType, Graph, Op, OpKind, Value, ValueRole};
use serde::{Deserialize, Serialize};

/// `y = W2 · gelu_tanh(W1 · x + b1) + b2`, repeated `blocks` times, over `batch · tokens` rows.
///
/// Required keys: `kind`, `name`, `tokens`, `dimension`, `hidden`; every other key has the default its
/// doc gives (the README's table lists them all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlpSpec {
    /// Always `mlp`. Required.
    pub kind: String,
    /// The build's name, the id's first word. Required.
    pub name: String,
    /// Sequences in the batch. Default 1.
    #[serde(default = "defaults::one")]
    pub batch: u32,
    /// Tokens per sequence. Required.
    pub tokens: u32,
    /// The model dimension: the input's and output's width. Required.
    pub dimension: u32,
    /// The hidden (feed-forward) dimension. Required.
    pub hidden: u32,
    /// Blocks in sequence. Default 1.
    #[serde(default = "defaults::one")]
    pub blocks: u32,
    /// Whether each matmul adds a bias. Default false.
    #[serde(default)]
    pub biases: bool,
    /// The element type of inputs, weights and outputs; only f16 is built. Default f16.
    #[serde(default = "defaults::f16")]
    pub dtype: DType,
    /// The type the AMP accumulates in: f16 or f32. Default f16.
    #[serde(default = "defaults::f16")]
    pub partials: DType,
    /// The seed of the data `run` draws for what no file binds; no part of the build. Default 1.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
}

pub(super) fn mlp_graph(workload: String, m: &MlpSpec, rows: u32) -> Graph {
    let parameters: &[(&str, String)] = &[
        ("benchmark", format!("{}-{}", m.name, m.dtype)),
        ("batch", m.batch.to_string()),
        ("tokens", m.tokens.to_string()),
        ("rows", rows.to_string()),
        ("dimension", m.dimension.to_string()),
        ("hiddenDimension", m.hidden.to_string()),
        ("blocks", m.blocks.to_string()),
        ("biases", m.biases.to_string()),
        ("partials", m.partials.to_string()),
    ];
    let mut mlp = MlpGraph {
        m,
        rows,
        g: Graph::empty(workload, m.partials, parameters),
    };
    let mut x = mlp.value("x".into(), rows, m.dimension, ValueRole::Input, 0);
    for b in 0..m.blocks {
        x = mlp.block(b, x);
    }
    mlp.g
}

/// An MLP's graph under construction: values and operations numbered in order of creation.
struct MlpGraph<'a> {
    m: &'a MlpSpec,
    rows: u32,
    g: Graph,
}

impl MlpGraph<'_> {
    fn value(
        &mut self,
        name: String,
        rows: u32,
        cols: u32,
        role: ValueRole,
        fan_in: u32,
    ) -> ValueId {
        let id = ValueId::from_index(self.g.values.len());
        self.g.values.push(Value {
            id,
            name,
            rows,
            cols,
            dtype: self.m.dtype,
            role,
            fan_in,
            shape: Vec::new(),
        });
        id
    }

    fn op(&mut self, name: String, kind: OpKind, out: ValueId) {
        let id = OpId::from_index(self.g.ops.len());
        self.g.ops.push(Op {
            id,
            name,
            kind,
            out,
        });
    }

    /// Block `b` over its input `x`: `fc2(gelu(fc1(x) + bias?)) + bias?`; returns its output. Its
    /// values come in the order fc1 and fc2 weights, then each operation's bias and result.
    fn block(&mut self, b: u32, x: ValueId) -> ValueId {
        let (m, rows) = (self.m, self.rows);
        let last = b + 1 == m.blocks;
        let w1 = self.value(
            format!("block{b}.fc1.weight"),
            m.dimension,
            m.hidden,
            ValueRole::Weight,
            m.dimension,
        );
        let w2 = self.value(
            format!("block{b}.fc2.weight"),
            m.hidden,
            m.dimension,
            ValueRole::Weight,
            m.hidden,
        );
        let z = self.value(
            format!("block{b}.fc1"),
            rows,
            m.hidden,
            ValueRole::Intermediate,
            0,
        );
        self.op(format!("block{b}.fc1"), OpKind::MatMul { a: x, b: w1 }, z);
        let mut pre = z;
        if m.biases {
            pre = self.bias(
                &format!("block{b}.fc1"),
                z,
                m.hidden,
                m.dimension,
                ValueRole::Intermediate,
            );
        }
        let h = self.value(
            format!("block{b}.gelu"),
            rows,
            m.hidden,
            ValueRole::Intermediate,
            0,
        );
        self.op(format!("block{b}.gelu"), OpKind::GeluTanh { x: pre }, h);
        let role = if last && !m.biases {
            ValueRole::Output
        } else {
            ValueRole::Intermediate
        };
        let y = self.value(format!("block{b}.fc2"), rows, m.dimension, role, 0);
        self.op(format!("block{b}.fc2"), OpKind::MatMul { a: h, b: w2 }, y);
        if !m.biases {
            return y;
        }
        let role = if last {
            ValueRole::Output
        } else {
            ValueRole::Intermediate
        };
        self.bias(&format!("block{b}.fc2"), y, m.dimension, m.hidden, role)
    }

    /// The bias of `layer` (a `1 x cols` weight with `fan_in`) added to its result `x`; returns the
    /// biased value, of `role`.
    fn bias(
        &mut self,
        layer: &str,
        x: ValueId,
        cols: u32,
        fan_in: u32,
        role: ValueRole,
    ) -> ValueId {
        let bias = self.value(format!("{layer}.bias"), 1, cols, ValueRole::Weight, fan_in);
        let biased = self.value(format!("{layer}.biased"), self.rows, cols, role, 0);
        self.op(format!("{layer}.bias"), OpKind::AddBias { x, bias }, biased);
        biased
    }
}
