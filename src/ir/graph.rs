//! The graph: values and operations with dtypes and shapes, as imported from a workload spec. Every
//! value is a 2-D row-major tensor `[rows, cols]` (a bias is `[1, cols]`). Device values are f16 or
//! booleans (`DType::Bool`, held as f16 1 and 0, so every device operation takes either); the
//! element-wise operations (`Unary`, `Binary` with its comparisons, `Select`) broadcast their
//! operands over `[rows, cols]` as whole, one row, one column or one value.

pub use crate::elements::{BinaryFn, DType, Rect, ReduceFn, Strided, UnaryFn, for_each_pair};
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
    /// The tensor's shape as the model's user sees it (an ONNX shape, say): what `run` takes and
    /// writes. Its product is `rows · cols`; empty means `[rows, cols]`.
    #[serde(default)]
    pub shape: Vec<u32>,
}

impl Value {
    pub fn elements(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.cols)
    }
    pub fn bytes(&self) -> u64 {
        self.elements() * u64::from(self.dtype.bytes())
    }
    /// The user-facing shape: [`Value::shape`], or `[rows, cols]` when it is empty.
    pub fn user_shape(&self) -> Vec<u32> {
        if self.shape.is_empty() {
            vec![self.rows, self.cols]
        } else {
            self.shape.clone()
        }
    }
}

/// A block of elements moved from `x` into an [`OpKind::Assemble`]'s output: for every multi-index
/// `i` over `shape`, `out[to.offset + Σ i_k·to.strides_k] = x[from.offset + Σ i_k·from.strides_k]`,
/// both sides indexing their value's elements in row-major order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piece {
    pub x: ValueId,
    pub shape: Vec<u32>,
    pub from: Strided,
    pub to: Strided,
}

impl Piece {
    /// The elements it moves.
    pub fn elements(&self) -> u64 {
        self.shape.iter().map(|&n| u64::from(n)).product()
    }
}

/// An operation. The first ones run on the device; [`OpKind::Embed`], [`OpKind::MaskBias`] and
/// [`OpKind::MeanPool`] run on the host ([`OpKind::on_host`]), before the device (from the model's inputs
/// and weights) or after it (from its outputs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OpKind {
    /// `out = a · b`, `a: [m, k]`, `b: [k, n]`.
    MatMul { a: ValueId, b: ValueId },
    /// `out = x + bias` broadcast over rows, `bias: [1, n]`.
    AddBias { x: ValueId, bias: ValueId },
    /// `out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluTanh { x: ValueId },
    /// `out = 0.5 x (1 + erf(x / √2))`.
    GeluErf { x: ValueId },
    /// `out = a + b`, element by element, `a` and `b` of one shape (a residual connection).
    Add { a: ValueId, b: ValueId },
    /// Per row: `out = (x − mean) / √(variance + epsilon) · gamma + beta`, the variance biased (over
    /// `cols`), `gamma, beta: [1, cols]`.
    LayerNorm {
        x: ValueId,
        gamma: ValueId,
        beta: ValueId,
        epsilon: f32,
    },
    /// Per batch and head, `out = softmax(q · kᵀ · scale + mask) · v`. `q: [batch · queries, heads · d]`,
    /// `k, v: [batch · keys, heads · d]`; head `h` owns columns `h·d..(h+1)·d` (heads are split and
    /// merged by layout). `mask: [batch, keys]` is added to every score of its batch's keys. With
    /// `causal`, query `i` sees keys `0..=i` (top-left aligned).
    Attention {
        q: ValueId,
        k: ValueId,
        v: ValueId,
        batch: u32,
        heads: u32,
        causal: bool,
        /// `1/√d` unless the model says otherwise.
        scale: f32,
        mask: Option<ValueId>,
    },
    /// `out = f(x)` element by element, computed in f32 from f16 and rounded to f16.
    Unary { x: ValueId, function: UnaryFn },
    /// `out = f(a, b)` element by element in f32, rounded to f16. Each operand is `[rows, cols]` or
    /// broadcasts to the output: `[1, cols]` (one row for every row), `[rows, 1]` (one value per
    /// row) or `[1, 1]`. The output is `[max rows, max cols]`.
    Binary {
        a: ValueId,
        b: ValueId,
        function: BinaryFn,
    },
    /// `out = condition ≠ 0 ? x : y` element by element (ONNX `Where`): `x` or `y` as it is, in f16.
    /// Each operand is `[rows, cols]` or broadcasts to the output as a binary operation's do; the
    /// output is `[max rows, max cols]`. A boolean condition holds 1 or 0 (`DType::Bool`); any other
    /// holds where it is not 0.
    Select {
        condition: ValueId,
        x: ValueId,
        y: ValueId,
    },
    /// Per row, over the columns: `out[r, 0] = f(x[r, :])`; `out: [rows, 1]`. Accumulated in f32.
    Reduce { x: ValueId, function: ReduceFn },
    /// Per row: `out[r, :] = softmax(x[r, :])` (max subtracted, exp, sum, divide), in f32, rounded to
    /// f16.
    Softmax { x: ValueId },
    /// Data movement (a transpose, reshape, slice, concat, split, expand, gather of constant indices,
    /// patch extraction): the output (f16) assembled from pieces of its inputs, copied exactly;
    /// every output element is written by exactly one piece.
    Assemble { pieces: Vec<Piece> },
    /// Host: `out[r, :] = Σ_i table_i[indices_i[r], :]`, each `(table, indices)` pair a lookup of
    /// `indices` (`rows` integers, i64) in `table: [entries, cols]` (an embedding and its sum).
    Embed { lookups: Vec<(ValueId, ValueId)> },
    /// Host: `out = (1 − mask) · fill`, a key-padding mask (`[batch, keys]`, 1 for a real key and 0 for
    /// padding) made into the additive bias an attention takes; it saturates at the largest finite
    /// magnitude of `out`'s type (a fill of `f32::MIN` is −65504 in f16), so that a row whose keys are
    /// all padding still has a softmax.
    MaskBias { mask: ValueId, fill: f32 },
    /// Host: per batch `b`, `out[b, :] = Σ_r mask[b, r] · x[b·tokens + r, :] / max(Σ_r mask[b, r],
    /// min_count)`, the mean of the rows the mask keeps. `x: [batch · tokens, cols]`,
    /// `mask: [batch, tokens]`.
    MeanPool {
        x: ValueId,
        mask: ValueId,
        min_count: f32,
    },
}

impl OpKind {
    /// Whether the host runs this operation rather than the device.
    pub fn on_host(&self) -> bool {
        matches!(
            self,
            OpKind::Embed { .. } | OpKind::MaskBias { .. } | OpKind::MeanPool { .. }
        )
    }

    /// The operation's inputs, in the order its fields name them.
    pub fn inputs(&self) -> Vec<ValueId> {
        match self {
            OpKind::MatMul { a, b } | OpKind::Add { a, b } | OpKind::Binary { a, b, .. } => {
                vec![*a, *b]
            }
            OpKind::Unary { x, .. } | OpKind::Reduce { x, .. } | OpKind::Softmax { x } => vec![*x],
            OpKind::Select { condition, x, y } => vec![*condition, *x, *y],
            OpKind::AddBias { x, bias } => vec![*x, *bias],
            OpKind::GeluTanh { x } | OpKind::GeluErf { x } => vec![*x],
            OpKind::LayerNorm { x, gamma, beta, .. } => vec![*x, *gamma, *beta],
            OpKind::Attention { q, k, v, mask, .. } => {
                let mut i = vec![*q, *k, *v];
                i.extend(mask);
                i
            }
            OpKind::Embed { lookups } => lookups.iter().flat_map(|&(t, i)| [t, i]).collect(),
            OpKind::MaskBias { mask, .. } => vec![*mask],
            OpKind::MeanPool { x, mask, .. } => vec![*x, *mask],
            OpKind::Assemble { pieces } => {
                let mut xs: Vec<ValueId> = Vec::new();
                for p in pieces {
                    if !xs.contains(&p.x) {
                        xs.push(p.x);
                    }
                }
                xs
            }
        }
    }

    /// The operation's name in dumps and errors.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::MatMul { .. } => "matmul",
            OpKind::AddBias { .. } => "add_bias",
            OpKind::GeluTanh { .. } => "gelu_tanh",
            OpKind::GeluErf { .. } => "gelu_erf",
            OpKind::Add { .. } => "add",
            OpKind::LayerNorm { .. } => "layer_norm",
            OpKind::Attention { .. } => "attention",
            OpKind::Unary { .. } => "unary",
            OpKind::Binary { .. } => "binary",
            OpKind::Select { .. } => "select",
            OpKind::Reduce { .. } => "reduce",
            OpKind::Softmax { .. } => "softmax",
            OpKind::Assemble { .. } => "assemble",
            OpKind::Embed { .. } => "embed",
            OpKind::MaskBias { .. } => "mask_bias",
            OpKind::MeanPool { .. } => "mean_pool",
        }
    }
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub id: OpId,
    pub name: String,
    pub kind: OpKind,
    pub out: ValueId,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub workload: String,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    /// The partials type the AMP accumulates in.
    pub partials: DType,
    /// The workload's parameters as `key=value` pairs, in the order the run summary prints them.
    pub parameters: Vec<(String, String)>,
}

/// What a build found too large for the device, so that an error can say which of the workload's
/// sizes to make smaller: an operator of a kind whose leanest partition overflows a tile, the weights
/// as a whole, or a tile's live buffers when storage is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    MatMul,
    LayerNorm,
    Attention,
    /// A general vector operation's rows.
    Vector,
    /// A data movement's rows.
    Assemble,
    Weights,
    LiveBuffers,
}

/// Values by name with their bytes, the `n` largest, largest first (by name among equals):
/// `` `w` (1024 bytes), `x` (512 bytes) ``; what a "does not fit" error names.
pub fn largest_values(mut values: Vec<(String, u64)>, n: usize) -> String {
    values.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    values.dedup();
    values
        .iter()
        .take(n)
        .map(|(name, bytes)| format!("`{name}` ({bytes} bytes)"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl crate::store::Artifact for Graph {
    const KIND: &'static str = "graph";
    const SCHEMA: u32 = 1;
}

impl Graph {
    /// A graph with no values or operations yet: its workload, the partials type and the parameters
    /// the run summary prints, in order.
    pub fn empty(workload: String, partials: DType, parameters: &[(&str, String)]) -> Graph {
        Graph {
            workload,
            values: Vec::new(),
            ops: Vec::new(),
            partials,
            parameters: parameters
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The operation computing `v`, if any (none for inputs and weights).
    pub fn producer(&self, v: ValueId) -> Option<&Op> {
        self.ops.iter().find(|op| op.out == v)
    }

    /// Whether the host supplies `v` to the device: an input, or the result of a host operation. (Weights
    /// the device reads are streamed once, at `initialize`.)
    pub fn host_provides(&self, v: ValueId) -> bool {
        self.value(v).role == ValueRole::Input
            || self.producer(v).is_some_and(|op| op.kind.on_host())
    }

    /// Whether the host reads `v` back from the device: a device result that is an output or that a
    /// host operation reads.
    pub fn host_reads(&self, v: ValueId) -> bool {
        self.producer(v).is_some_and(|op| !op.kind.on_host())
            && (self.value(v).role == ValueRole::Output
                || self
                    .ops
                    .iter()
                    .any(|op| op.kind.on_host() && op.kind.inputs().contains(&v)))
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
        let _ = writeln!(s, "graph {} partials={}", self.workload, self.partials);
        for v in &self.values {
            let _ = write!(
                s,
                "  {} {:?} {} [{}, {}] {}",
                v.id, v.role, v.name, v.rows, v.cols, v.dtype
            );
            if !v.shape.is_empty() {
                let _ = write!(s, " shape={:?}", v.shape);
            }
            let _ = writeln!(s);
        }
        for op in &self.ops {
            let inputs: Vec<String> = op.kind.inputs().iter().map(|v| v.to_string()).collect();
            let attributes = match &op.kind {
                OpKind::Attention {
                    batch,
                    heads,
                    causal,
                    scale,
                    ..
                } => format!(" batch={batch} heads={heads} causal={causal} scale={scale}"),
                OpKind::LayerNorm { epsilon, .. } => format!(" epsilon={epsilon:e}"),
                OpKind::MaskBias { fill, .. } => format!(" fill={fill:e}"),
                OpKind::MeanPool { min_count, .. } => format!(" min_count={min_count:e}"),
                OpKind::Unary {
                    function: UnaryFn::Pow { exponent },
                    ..
                } => format!(" function=pow exponent={exponent:e}"),
                OpKind::Unary { function, .. } => format!(" function={}", function.name()),
                OpKind::Binary { function, .. } => format!(" function={}", function.name()),
                OpKind::Reduce { function, .. } => format!(" function={}", function.name()),
                OpKind::Assemble { pieces } => {
                    let pieces: Vec<String> = (pieces.iter())
                        .map(|p| {
                            format!(
                                "{} {:?} from {}{:?} to {}{:?}",
                                p.x,
                                p.shape,
                                p.from.offset,
                                p.from.strides,
                                p.to.offset,
                                p.to.strides
                            )
                        })
                        .collect();
                    format!(" pieces=[{}]", pieces.join("; "))
                }
                _ => String::new(),
            };
            let unit = if op.kind.on_host() { "host " } else { "" };
            let _ = writeln!(
                s,
                "  {} {} = {unit}{} {}{attributes} ({})",
                op.id,
                op.out,
                op.kind.name(),
                inputs.join(" "),
                op.name
            );
        }
        s
    }
}
