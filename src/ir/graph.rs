//! The graph: values and operations with dtypes and shapes, as imported from a workload spec. Every
//! value is a 2-D row-major tensor `[rows, cols]` (a bias is `[1, cols]`).

pub use crate::elements::{DType, Rect};
use crate::ids::{OpId, ValueId};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Where a value comes from and goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueRole {
    /// Streamed in by the host at every `run`.
    Input,
    /// Streamed in by the host once, at `initialize`.
    Weight,
    /// Produced and consumed on the device.
    Intermediate,
    /// Produced on the device, streamed out at the end of `run`.
    Output,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Value {
    pub id: ValueId,
    pub name: String,
    pub rows: u32,
    pub cols: u32,
    pub dtype: DType,
    pub role: ValueRole,
    /// For weights: the fan-in the seeded generator scales by (1/sqrt(fan_in)).
    pub fan_in: u32,
}

impl Value {
    pub fn elements(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.cols)
    }
    pub fn bytes(&self) -> u64 {
        self.elements() * u64::from(self.dtype.bytes())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// `out = a · b`, `a: [m, k]`, `b: [k, n]`.
    MatMul { a: ValueId, b: ValueId },
    /// `out = x + bias` broadcast over rows, `bias: [1, n]`.
    AddBias { x: ValueId, bias: ValueId },
    /// `out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluTanh { x: ValueId },
    /// Per batch and head, `out = softmax(q · kᵀ / √d) · v`. `q: [batch · queries, heads · d]`,
    /// `k, v: [batch · keys, heads · d]`; head `h` owns columns `h·d..(h+1)·d`. With `causal`, query `i`
    /// sees keys `0..=i` (top-left aligned).
    Attention {
        q: ValueId,
        k: ValueId,
        v: ValueId,
        batch: u32,
        heads: u32,
        causal: bool,
    },
}

/// The shape of an attention operation, derived from its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttentionShape {
    pub batch: u32,
    pub heads: u32,
    pub queries: u32,
    pub keys: u32,
    pub head_dim: u32,
    pub causal: bool,
}

impl AttentionShape {
    /// Keys query `i` sees.
    pub fn visible_keys(&self, i: u32) -> u32 {
        if self.causal {
            (i + 1).min(self.keys)
        } else {
            self.keys
        }
    }
    /// Keys some query sees: under a causal mask none past the last query.
    pub fn seen_keys(&self) -> u32 {
        self.visible_keys(self.queries - 1)
    }
    /// (query, key) pairs scored per batch and head, masked pairs excluded.
    pub fn pairs(&self) -> u64 {
        if self.causal {
            (0..self.queries)
                .map(|i| u64::from(self.visible_keys(i)))
                .sum()
        } else {
            u64::from(self.queries) * u64::from(self.keys)
        }
    }
    /// Useful flops: `2·d` for the score and `2·d` for the weighted sum of every unmasked pair.
    pub fn flops(&self) -> u64 {
        4 * u64::from(self.batch) * u64::from(self.heads) * u64::from(self.head_dim) * self.pairs()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub id: OpId,
    pub name: String,
    pub kind: OpKind,
    pub out: ValueId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    pub workload: String,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    /// The partials type the AMP accumulates in.
    pub partials: DType,
    /// Seed of the generator that makes inputs and weights.
    pub seed: u64,
    /// The workload's parameters as `key=value` pairs, in the order the run summary prints them.
    pub parameters: Vec<(String, String)>,
}

impl crate::store::Artifact for Graph {
    const KIND: &'static str = "graph";
    const SCHEMA: u32 = 1;
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// Useful flops, what effective TFLOPs and efficiency count: `2·m·k·n` per matmul and
    /// [`AttentionShape::flops`] per attention; bias, GELU and softmax count nothing.
    pub fn useful_flops(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op.kind {
                OpKind::MatMul { a, b } => {
                    2 * u64::from(self.value(a).rows)
                        * u64::from(self.value(a).cols)
                        * u64::from(self.value(b).cols)
                }
                OpKind::Attention { .. } => self.attention_shape(op).map_or(0, |a| a.flops()),
                _ => 0,
            })
            .sum()
    }

    /// The shape of an attention operation; `None` for other kinds.
    pub fn attention_shape(&self, op: &Op) -> Option<AttentionShape> {
        let OpKind::Attention {
            q,
            k,
            batch,
            heads,
            causal,
            ..
        } = op.kind
        else {
            return None;
        };
        let (q, k) = (self.value(q), self.value(k));
        Some(AttentionShape {
            batch,
            heads,
            queries: q.rows / batch.max(1),
            keys: k.rows / batch.max(1),
            head_dim: q.cols / heads.max(1),
            causal,
        })
    }

    /// The stable text dump.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "graph {} partials={} seed={}",
            self.workload, self.partials, self.seed
        );
        for v in &self.values {
            let _ = writeln!(
                s,
                "  {} {:?} {} [{}, {}] {}",
                v.id, v.role, v.name, v.rows, v.cols, v.dtype
            );
        }
        for op in &self.ops {
            let args = match &op.kind {
                OpKind::MatMul { a, b } => format!("matmul {a} {b}"),
                OpKind::AddBias { x, bias } => format!("add_bias {x} {bias}"),
                OpKind::GeluTanh { x } => format!("gelu_tanh {x}"),
                OpKind::Attention {
                    q,
                    k,
                    v,
                    batch,
                    heads,
                    causal,
                } => format!("attention {q} {k} {v} batch={batch} heads={heads} causal={causal}"),
            };
            let _ = writeln!(s, "  {} {} = {} ({})", op.id, op.out, args, op.name);
        }
        s
    }
}
