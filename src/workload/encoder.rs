//! The `encoder` workload kind: a BERT-style transformer encoder over embeddings the host supplies.
//!
//! Contract: [`encoder_graph`] builds `layers` encoder layers after a layer norm of the input
//! embeddings: per layer, Q, K and V projections (matmul + bias), attention over `heads` heads with
//! the `1/√head_dim` scale and, with `mask`, an additive key mask input (`[batch, tokens]`), the
//! output projection with its residual add and layer norm, and the feed-forward block (matmul + bias,
//! erf- or tanh-GELU, matmul + bias, residual add, layer norm). The last layer norm is the output.
//! Values and operations are numbered in order of creation.

use super::defaults;
use crate::ids::{OpId, ValueId};
use crate::ir::{DType, Graph, Op, OpKind, Value, ValueRole};
use serde::{Deserialize, Serialize};

/// A transformer encoder's parameters, as its TOML gives them.
///
/// Required keys: `kind`, `name`, `tokens`, `hidden`, `heads`, `intermediate`; every other key has the
/// default its doc gives (the README's table lists them all).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderSpec {
    /// Always `encoder`. Required.
    pub kind: String,
    /// The build's name, the id's first word. Required.
    pub name: String,
    /// Sequences in the batch. Default 1.
    #[serde(default = "defaults::one")]
    pub batch: u32,
    /// Tokens per sequence. Required.
    pub tokens: u32,
    /// The hidden size (the model dimension), a multiple of `heads`. Required.
    pub hidden: u32,
    /// Attention heads. Required.
    pub heads: u32,
    /// The feed-forward (intermediate) size. Required.
    pub intermediate: u32,
    /// Encoder layers. Default 1.
    #[serde(default = "defaults::one")]
    pub layers: u32,
    /// The feed-forward block's GELU: `erf` or `tanh`. Default `erf`.
    #[serde(default = "defaults::gelu")]
    pub gelu: String,
    /// Whether an additive key mask (`[batch, tokens]`) is an input. Default false.
    #[serde(default)]
    pub mask: bool,
    /// The layer norms' epsilon. Default 1e-12.
    #[serde(default = "defaults::epsilon")]
    pub epsilon: f32,
    /// The element type of activations and weights; only f16 is built. Default f16.
    #[serde(default = "defaults::f16")]
    pub dtype: DType,
    /// The type the AMP accumulates in: f16 or f32. Default f16.
    #[serde(default = "defaults::f16")]
    pub partials: DType,
    /// The seed of the data `run` draws for what no file binds; no part of the build. Default 1.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
}

impl EncoderSpec {
    pub fn head_dim(&self) -> u32 {
        self.hidden / self.heads.max(1)
    }
}

/// The encoder's graph over `batch · tokens` rows.
pub(super) fn encoder_graph(workload: String, e: &EncoderSpec) -> Graph {
    let rows = e.batch * e.tokens;
    let parameters: &[(&str, String)] = &[
        ("benchmark", format!("{}-{}", e.name, e.dtype)),
        ("batch", e.batch.to_string()),
        ("tokens", e.tokens.to_string()),
        ("hidden", e.hidden.to_string()),
        ("heads", e.heads.to_string()),
        ("intermediate", e.intermediate.to_string()),
        ("layers", e.layers.to_string()),
        ("gelu", e.gelu.clone()),
        ("partials", e.partials.to_string()),
    ];
    let mut b = Builder {
        e,
        rows,
        g: Graph::empty(workload, e.partials, parameters),
    };
    let x = b.value("embeddings", rows, e.hidden, ValueRole::Input, 0);
    let mask = e
        .mask
        .then(|| b.value("mask", e.batch, e.tokens, ValueRole::Input, 0));
    let mut h = b.layer_norm("embeddings.norm", x);
    for l in 0..e.layers {
        h = b.layer(l, h, mask);
    }
    b.g.values[h.index()].role = ValueRole::Output;
    b.g
}

struct Builder<'a> {
    e: &'a EncoderSpec,
    rows: u32,
    g: Graph,
}

impl Builder<'_> {
    fn value(&mut self, name: &str, rows: u32, cols: u32, role: ValueRole, fan_in: u32) -> ValueId {
        let id = ValueId::from_index(self.g.values.len());
        self.g.values.push(Value {
            id,
            name: name.to_string(),
            rows,
            cols,
            dtype: self.e.dtype,
            role,
            fan_in,
            shape: Vec::new(),
        });
        id
    }

    /// `kind` named `name`, into a new `rows x cols` intermediate value of the same name.
    fn op(&mut self, name: &str, kind: OpKind, cols: u32) -> ValueId {
        let out = self.value(name, self.rows, cols, ValueRole::Intermediate, 0);
        let id = OpId::from_index(self.g.ops.len());
        self.g.ops.push(Op {
            id,
            name: name.to_string(),
            kind,
            out,
        });
        out
    }

    /// `x · W + bias` with `W: [in, out]`.
    fn linear(&mut self, name: &str, x: ValueId, cols: u32) -> ValueId {
        let fan_in = self.g.values[x.index()].cols;
        let w = self.value(
            &format!("{name}.weight"),
            fan_in,
            cols,
            ValueRole::Weight,
            fan_in,
        );
        let bias = self.value(&format!("{name}.bias"), 1, cols, ValueRole::Weight, fan_in);
        let y = self.op(
            &format!("{name}.matmul"),
            OpKind::MatMul { a: x, b: w },
            cols,
        );
        self.op(name, OpKind::AddBias { x: y, bias }, cols)
    }

    fn layer_norm(&mut self, name: &str, x: ValueId) -> ValueId {
        let cols = self.e.hidden;
        let gamma = self.value(&format!("{name}.gamma"), 1, cols, ValueRole::Weight, 1);
        let beta = self.value(&format!("{name}.beta"), 1, cols, ValueRole::Weight, 1);
        let kind = OpKind::LayerNorm {
            x,
            gamma,
            beta,
            epsilon: self.e.epsilon,
        };
        self.op(name, kind, cols)
    }

    /// One encoder layer over `h`; returns its output.
    fn layer(&mut self, l: u32, h: ValueId, mask: Option<ValueId>) -> ValueId {
        let e = self.e;
        let name = |part: &str| format!("layer{l}.{part}");
        let [q, k, v] = ["query", "key", "value"].map(|p| self.linear(&name(p), h, e.hidden));
        let attention = OpKind::Attention {
            q,
            k,
            v,
            batch: e.batch,
            heads: e.heads,
            causal: false,
            scale: 1.0 / (e.head_dim() as f32).sqrt(),
            mask,
        };
        let a = self.op(&name("attention"), attention, e.hidden);
        let o = self.linear(&name("attention.output"), a, e.hidden);
        let o = self.op(
            &name("attention.residual"),
            OpKind::Add { a: o, b: h },
            e.hidden,
        );
        let h1 = self.layer_norm(&name("attention.norm"), o);
        let f = self.linear(&name("intermediate"), h1, e.intermediate);
        let gelu = if e.gelu == "tanh" {
            OpKind::GeluTanh { x: f }
        } else {
            OpKind::GeluErf { x: f }
        };
        let f = self.op(&name("intermediate.gelu"), gelu, e.intermediate);
        let f = self.linear(&name("output"), f, e.hidden);
        let f = self.op(
            &name("output.residual"),
            OpKind::Add { a: f, b: h1 },
            e.hidden,
        );
        self.layer_norm(&name("output.norm"), f)
    }
}
