//! The compute vertices, each defined once, generic over its operand: a buffer view
//! (`crate::ir::Operand`) in the program, a [`Placed`] operand (address, row stride, element type) in
//! tile code. [`VertexKind::operands`] is the one operand visitor: the program's verifier reads buffer
//! lifetimes and windows from it, emit's verifier checks the placed extents; the lowering places
//! operands with [`VertexKind::map`]; the device and the text form read each kind's fields.
//!
//! A new vertex kind is a struct here, its arm in `operands`, `map`, `name` and `Display`, its
//! semantics in the device and its cost in the target; the phases that place, encode and check vertices
//! need no change.

mod assemble;
pub use assemble::{Assemble, CopyForm, CopyPiece};

use crate::elements::{BinaryFn, DType, ReduceFn, UnaryFn};
use serde::{Deserialize, Serialize};
use std::fmt;

/// An operand after placement: stored rows `stride` bytes apart from `address`, elements of `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub address: u32,
    pub stride: u32,
    pub dtype: DType,
}

/// A causal mask over a block of scoresᵀ: row `r` is key `first_key + r`, column `c` is query
/// `first_query + c`, and a key after its query is masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mask {
    pub first_key: u32,
    pub first_query: u32,
}

/// `partials = a · b` on the AMP: `a` is `rows x depth` f16, `b` is `depth x cols` f16 (128-bit weight
/// loads), `partials` `rows x cols` in the partials' type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amp<O> {
    pub a: O,
    pub b: O,
    pub partials: O,
    pub rows: u32,
    pub depth: u32,
    pub cols: u32,
}

/// The activation an epilogue applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Activation {
    /// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    GeluTanh,
    /// `0.5 x (1 + erf(x / √2))`.
    GeluErf,
}

/// `out = f16(activation?(Σ partials + bias?) + residual?)` on the vector unit
/// ([`crate::numerics::epilogue`]): the partials of every depth block, summed in f32 in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Epilogue<O> {
    pub partials: Vec<O>,
    /// `1 x cols` f16, added along every row; `1 x rows` when `bias_by_row`, one value per row.
    pub bias: Option<O>,
    pub bias_by_row: bool,
    /// `rows x cols` f16 added last.
    pub residual: Option<O>,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    pub activation: Option<Activation>,
    /// `out` is stored transposed: stored row `c` holds column `c` of the `rows x cols` result.
    pub transpose: bool,
}

/// Per row, in f32 ([`crate::numerics::layer_norm_row`]): `out = f16((x − mean) / √(variance +
/// epsilon) · gamma + beta)` over `cols` f16 elements, the variance biased; `gamma` and `beta` are
/// `1 x cols` f16.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerNorm<O> {
    pub x: O,
    pub gamma: O,
    pub beta: O,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    /// Epsilon as f32 bits.
    pub epsilon_bits: u32,
}

/// The first half of a layer norm whose rows are split into column blocks over tiles: per row of
/// the `rows x cols` f16 block `x`, its [`crate::numerics::row_moments`] in f32, written as the two
/// floats at columns 0 and 1 of that row of `moments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerNormMoments<O> {
    pub x: O,
    pub moments: O,
    pub rows: u32,
    pub cols: u32,
}

/// The second half: per row, every column block's moments (`moments`, one `rows x 2` f32 operand a
/// block, in block order, every block `cols` wide) combined in that order
/// ([`crate::numerics::combined_moments`]), then this tile's `rows x cols` block of `x` normalized
/// with gamma and beta (`1 x cols` f16, the block's share) as [`LayerNorm`] does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerNormApply<O> {
    pub x: O,
    pub moments: Vec<O>,
    pub gamma: O,
    pub beta: O,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    /// Epsilon as f32 bits.
    pub epsilon_bits: u32,
}

/// One step of the online softmax over `keys x queries` scoresᵀ (vector unit,
/// [`crate::numerics::softmax_block`]): per query, the new running max in the state, the rescale factor
/// of the old one, `probabilities = f16(exp(scale · (score - max)))` and the rescaled running sum. The
/// state's rows `head_dim` and `head_dim + 1` hold the running max and sum; `first` reads neither.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Softmax<O> {
    pub scores: O,
    pub probabilities: O,
    pub state: O,
    pub rescale: O,
    pub keys: u32,
    pub queries: u32,
    /// Accumulator rows of the state; the max and the sum follow.
    pub head_dim: u32,
    pub mask: Option<Mask>,
    /// `1 x keys` f16, added to each key's scaled scores (an additive key mask).
    pub key_bias: Option<O>,
    pub first: bool,
    /// The score scale (`1/√head_dim` unless the model says otherwise) as f32 bits.
    pub scale_bits: u32,
}

/// `state[r][c] = state[r][c] · rescale[c] + partials[r][c]` in f32 over the state's `rows` accumulator
/// rows (vector unit); `first` writes the partials alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accumulate<O> {
    pub partials: O,
    pub state: O,
    pub rescale: O,
    pub rows: u32,
    pub cols: u32,
    pub first: bool,
}

/// Merges flash states (`rows` accumulator rows, the max and the sum) into the f16 output (vector unit,
/// [`crate::numerics::combine`]): per query, each state weighted by `exp(scale · (max_i - max))`
/// divided by the weighted sums, and the accumulators' weighted sum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Combine<O> {
    pub states: Vec<O>,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    pub scale_bits: u32,
    /// `out` is stored transposed: stored row `c` holds column `c` (one query) of the `rows x cols`
    /// result, the attention's output in row-major order.
    pub transpose: bool,
}

/// What a [`Vector`] vertex computes over its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VectorFn {
    /// `out = f(x)` element by element.
    Unary(UnaryFn),
    /// `out = f(a, b)` element by element, each operand spread over the output as it says.
    Binary(BinaryFn),
    /// `out[r] = f(x[r, :])`: one value per row.
    Reduce(ReduceFn),
    /// `out[r, :] = softmax(x[r, :])`.
    Softmax,
    /// `out = condition ≠ 0 ? x : y` element by element, each operand spread over the output as it
    /// says (ONNX `Where`, popops' `Select`).
    Select,
}

impl VectorFn {
    /// The name in dumps: `binary sub`.
    pub fn name(&self) -> String {
        match self {
            VectorFn::Unary(UnaryFn::Pow { exponent }) => format!("unary pow {exponent:e}"),
            VectorFn::Unary(f) => format!("unary {}", f.name()),
            VectorFn::Binary(f) => format!("binary {}", f.name()),
            VectorFn::Reduce(f) => format!("reduce {}", f.name()),
            VectorFn::Softmax => "softmax".to_string(),
            VectorFn::Select => "select".to_string(),
        }
    }

    /// Its operands' roles, in order: as many as it takes.
    pub fn roles(&self) -> &'static [&'static str] {
        match self {
            VectorFn::Unary(_) | VectorFn::Reduce(_) | VectorFn::Softmax => &["x"],
            VectorFn::Binary(_) => &["a", "b"],
            VectorFn::Select => &["condition", "x", "y"],
        }
    }

    /// Whether its operands may be spread over the output (element-wise functions of several
    /// operands); a function of one operand takes it whole.
    pub fn spreads(&self) -> bool {
        self.roles().len() > 1
    }
}

/// How an operand of a [`Vector`] vertex spreads over its `rows x cols` output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Spread {
    /// `rows x cols`, one element per output element.
    Whole,
    /// `1 x cols`, the same row for every row.
    OneRow,
    /// `rows x 1`, one value per row.
    OneColumn,
    /// `1 x 1`, one value for every element.
    OneValue,
}

impl Spread {
    /// How an operand of `rows x cols` spreads over an output of `out_rows x out_cols`; `None` when
    /// it does not broadcast to it.
    pub fn of((rows, cols): (u32, u32), (out_rows, out_cols): (u32, u32)) -> Option<Spread> {
        match (rows == out_rows, cols == out_cols, rows == 1, cols == 1) {
            (true, true, _, _) => Some(Spread::Whole),
            (false, true, true, _) => Some(Spread::OneRow),
            (true, false, _, true) => Some(Spread::OneColumn),
            (_, _, true, true) => Some(Spread::OneValue),
            _ => None,
        }
    }

    /// The operand's stored rows and elements per row under an output of `rows x cols`.
    pub fn extent(self, rows: u32, cols: u32) -> (u32, u32) {
        match self {
            Spread::Whole => (rows, cols),
            Spread::OneRow => (1, cols),
            Spread::OneColumn => (rows, 1),
            Spread::OneValue => (1, 1),
        }
    }

    /// The operand's element for output element `(r, c)`, as an index into its `extent`.
    pub fn index(self, r: usize, c: usize, cols: usize) -> usize {
        match self {
            Spread::Whole => r * cols + c,
            Spread::OneRow => c,
            Spread::OneColumn => r,
            Spread::OneValue => 0,
        }
    }

    /// The name in dumps.
    pub fn name(self) -> &'static str {
        match self {
            Spread::Whole => "whole",
            Spread::OneRow => "row",
            Spread::OneColumn => "column",
            Spread::OneValue => "value",
        }
    }
}

/// A general vector operation over `rows` rows of `cols` f16 elements (vector unit,
/// [`crate::numerics::unary_f32`] and siblings): computed in f32, each result rounded once to f16.
/// `operands` are the function's, in the order [`VectorFn::roles`] names them, each with the way it
/// spreads over the rows (always `Whole` for a function of one operand). The output is
/// `rows x cols`, or `rows x 1` for a reduction; stored transposed when `transpose`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vector<O> {
    pub function: VectorFn,
    pub operands: Vec<(O, Spread)>,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    pub transpose: bool,
}

impl<O> Vector<O> {
    /// The output's rows and columns: `rows x 1` for a reduction, `rows x cols` otherwise.
    pub fn out_shape(&self) -> (u32, u32) {
        match self.function {
            VectorFn::Reduce(_) => (self.rows, 1),
            _ => (self.rows, self.cols),
        }
    }

    /// The operands' spreads, in order.
    pub fn spreads(&self) -> Vec<Spread> {
        self.operands.iter().map(|&(_, s)| s).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VertexKind<O> {
    Amp(Amp<O>),
    Epilogue(Epilogue<O>),
    Softmax(Softmax<O>),
    Accumulate(Accumulate<O>),
    Combine(Combine<O>),
    LayerNorm(LayerNorm<O>),
    LayerNormMoments(LayerNormMoments<O>),
    LayerNormApply(LayerNormApply<O>),
    Vector(Vector<O>),
    Assemble(Assemble<O>),
}

/// How a vertex uses an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Read, then written.
    Update,
}

impl Access {
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

/// One operand of a vertex: its role (for messages), how it is used, and the stored rows and the
/// elements of each row it spans from the operand on.
#[derive(Clone, Copy, Debug)]
pub struct Use<'a, O> {
    pub role: &'static str,
    pub access: Access,
    pub rows: u32,
    pub cols: u32,
    pub operand: &'a O,
}

impl<O> VertexKind<O> {
    /// The name in dumps and counts.
    pub fn name(&self) -> &'static str {
        match self {
            VertexKind::Amp(_) => "amp",
            VertexKind::Epilogue(_) => "epilogue",
            VertexKind::Softmax(_) => "softmax",
            VertexKind::Accumulate(_) => "accumulate",
            VertexKind::Combine(_) => "combine",
            VertexKind::LayerNorm(_) => "layer_norm",
            VertexKind::LayerNormMoments(_) => "layer_norm_moments",
            VertexKind::LayerNormApply(_) => "layer_norm_apply",
            VertexKind::Vector(_) => "vector",
            VertexKind::Assemble(_) => "assemble",
        }
    }

    /// Every operand, reads before writes within a kind's listing order.
    pub fn operands(&self) -> Vec<Use<'_, O>> {
        use Access::*;
        let at = |role, access, (rows, cols), operand| Use {
            role,
            access,
            rows,
            cols,
            operand,
        };
        match self {
            VertexKind::Amp(v) => vec![
                at("a", Read, (v.rows, v.depth), &v.a),
                at("b", Read, (v.depth, v.cols), &v.b),
                at("partials", Write, (v.rows, v.cols), &v.partials),
            ],
            VertexKind::Epilogue(v) => (v.partials.iter())
                .map(|p| at("partials", Read, (v.rows, v.cols), p))
                .chain(v.bias.iter().map(|b| {
                    let len = if v.bias_by_row { v.rows } else { v.cols };
                    at("bias", Read, (1, len), b)
                }))
                .chain(
                    v.residual
                        .iter()
                        .map(|r| at("residual", Read, (v.rows, v.cols), r)),
                )
                .chain([at(
                    "out",
                    Write,
                    extent(v.rows, v.cols, v.transpose),
                    &v.out,
                )])
                .collect(),
            VertexKind::Softmax(v) => {
                let state = if v.first { Write } else { Update };
                (v.key_bias.iter())
                    .map(|b| at("key_bias", Read, (1, v.keys), b))
                    .chain([
                        at("scores", Read, (v.keys, v.queries), &v.scores),
                        at(
                            "probabilities",
                            Write,
                            (v.keys, v.queries),
                            &v.probabilities,
                        ),
                        at("state", state, (v.head_dim + 2, v.queries), &v.state),
                        at("rescale", Write, (1, v.queries), &v.rescale),
                    ])
                    .collect()
            }
            VertexKind::Accumulate(v) => vec![
                at("partials", Read, (v.rows, v.cols), &v.partials),
                at("rescale", Read, (1, v.cols), &v.rescale),
                at("state", Update, (v.rows, v.cols), &v.state),
            ],
            VertexKind::Combine(v) => (v.states.iter())
                .map(|s| at("states", Read, (v.rows + 2, v.cols), s))
                .chain([at(
                    "out",
                    Write,
                    extent(v.rows, v.cols, v.transpose),
                    &v.out,
                )])
                .collect(),
            VertexKind::LayerNorm(v) => vec![
                at("x", Read, (v.rows, v.cols), &v.x),
                at("gamma", Read, (1, v.cols), &v.gamma),
                at("beta", Read, (1, v.cols), &v.beta),
                at("out", Write, (v.rows, v.cols), &v.out),
            ],
            VertexKind::LayerNormMoments(v) => vec![
                at("x", Read, (v.rows, v.cols), &v.x),
                at("moments", Write, (v.rows, 2), &v.moments),
            ],
            VertexKind::LayerNormApply(v) => [at("x", Read, (v.rows, v.cols), &v.x)]
                .into_iter()
                .chain(
                    v.moments
                        .iter()
                        .map(|m| at("moments", Read, (v.rows, 2), m)),
                )
                .chain([
                    at("gamma", Read, (1, v.cols), &v.gamma),
                    at("beta", Read, (1, v.cols), &v.beta),
                    at("out", Write, (v.rows, v.cols), &v.out),
                ])
                .collect(),
            VertexKind::Vector(v) => {
                let (out_rows, out_cols) = v.out_shape();
                let roles = v.function.roles();
                (v.operands.iter().enumerate())
                    .map(|(i, (o, spread))| {
                        let role = roles.get(i).copied().unwrap_or("operand");
                        at(role, Read, spread.extent(v.rows, v.cols), o)
                    })
                    .chain([at(
                        "out",
                        Write,
                        extent(out_rows, out_cols, v.transpose),
                        &v.out,
                    )])
                    .collect()
            }
            VertexKind::Assemble(v) => (v.sources.iter().zip(&v.extents))
                .map(|(s, &extent)| at("source", Read, extent, s))
                .chain([at("out", Write, (v.rows, v.cols), &v.out)])
                .collect(),
        }
    }

    /// The same vertex with every operand replaced by `f` of it.
    pub fn map<P>(&self, mut f: impl FnMut(&O) -> P) -> VertexKind<P> {
        match self {
            VertexKind::Amp(v) => VertexKind::Amp(Amp {
                a: f(&v.a),
                b: f(&v.b),
                partials: f(&v.partials),
                rows: v.rows,
                depth: v.depth,
                cols: v.cols,
            }),
            VertexKind::Epilogue(v) => VertexKind::Epilogue(Epilogue {
                partials: v.partials.iter().map(&mut f).collect(),
                bias: v.bias.as_ref().map(&mut f),
                bias_by_row: v.bias_by_row,
                residual: v.residual.as_ref().map(&mut f),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                activation: v.activation,
                transpose: v.transpose,
            }),
            VertexKind::Softmax(v) => VertexKind::Softmax(Softmax {
                key_bias: v.key_bias.as_ref().map(&mut f),
                scores: f(&v.scores),
                probabilities: f(&v.probabilities),
                state: f(&v.state),
                rescale: f(&v.rescale),
                keys: v.keys,
                queries: v.queries,
                head_dim: v.head_dim,
                mask: v.mask,
                first: v.first,
                scale_bits: v.scale_bits,
            }),
            VertexKind::Accumulate(v) => VertexKind::Accumulate(Accumulate {
                partials: f(&v.partials),
                state: f(&v.state),
                rescale: f(&v.rescale),
                rows: v.rows,
                cols: v.cols,
                first: v.first,
            }),
            VertexKind::Combine(v) => VertexKind::Combine(Combine {
                states: v.states.iter().map(&mut f).collect(),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                scale_bits: v.scale_bits,
                transpose: v.transpose,
            }),
            VertexKind::LayerNorm(v) => VertexKind::LayerNorm(LayerNorm {
                x: f(&v.x),
                gamma: f(&v.gamma),
                beta: f(&v.beta),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                epsilon_bits: v.epsilon_bits,
            }),
            VertexKind::LayerNormMoments(v) => VertexKind::LayerNormMoments(LayerNormMoments {
                x: f(&v.x),
                moments: f(&v.moments),
                rows: v.rows,
                cols: v.cols,
            }),
            VertexKind::LayerNormApply(v) => VertexKind::LayerNormApply(LayerNormApply {
                x: f(&v.x),
                moments: v.moments.iter().map(&mut f).collect(),
                gamma: f(&v.gamma),
                beta: f(&v.beta),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                epsilon_bits: v.epsilon_bits,
            }),
            VertexKind::Vector(v) => VertexKind::Vector(Vector {
                function: v.function,
                operands: (v.operands.iter()).map(|(o, s)| (f(o), *s)).collect(),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                transpose: v.transpose,
            }),
            VertexKind::Assemble(v) => VertexKind::Assemble(Assemble {
                sources: v.sources.iter().map(&mut f).collect(),
                extents: v.extents.clone(),
                out: f(&v.out),
                rows: v.rows,
                cols: v.cols,
                pieces: v.pieces.clone(),
            }),
        }
    }
}

/// The stored rows and the elements of each of a `rows x cols` result, stored transposed or not.
fn extent(rows: u32, cols: u32, transpose: bool) -> (u32, u32) {
    if transpose {
        (cols, rows)
    } else {
        (rows, cols)
    }
}

/// `address/stride`, the text form of a placed operand.
struct At<'a>(&'a Placed);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}/{}", self.0.address, self.0.stride)
    }
}

fn list(operands: &[Placed]) -> String {
    let parts: Vec<String> = operands.iter().map(|o| At(o).to_string()).collect();
    parts.join(",")
}

/// The element type of the first of `operands`, or `-` when there is none.
fn dtype_of(operands: &[Placed]) -> String {
    operands
        .first()
        .map_or_else(|| "-".to_string(), |o| o.dtype.to_string())
}

impl fmt::Display for VertexKind<Placed> {
    /// The stable text form used in dumps.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VertexKind::Amp(v) => write!(
                f,
                "amp {}x{}x{} a={} b={} partials={} {}",
                v.rows,
                v.depth,
                v.cols,
                At(&v.a),
                At(&v.b),
                At(&v.partials),
                v.partials.dtype
            ),
            VertexKind::Epilogue(v) => {
                let parts = match v.partials.as_slice() {
                    [one] => At(one).to_string(),
                    many => format!("[{}]", list(many)),
                };
                let dtype = dtype_of(&v.partials);
                write!(f, "epilogue {}x{} partials={parts} {dtype}", v.rows, v.cols)?;
                if let Some(b) = &v.bias {
                    let by_row = if v.bias_by_row { " by_row" } else { "" };
                    write!(f, " bias={:#x}{by_row}", b.address)?;
                }
                if let Some(r) = &v.residual {
                    write!(f, " residual={}", At(r))?;
                }
                let activation = match v.activation {
                    None => "",
                    Some(Activation::GeluTanh) => " gelu",
                    Some(Activation::GeluErf) => " gelu_erf",
                };
                write!(f, " out={}{activation}", At(&v.out))?;
                if v.transpose {
                    write!(f, " transposed")?;
                }
                Ok(())
            }
            VertexKind::Softmax(v) => {
                write!(
                    f,
                    "softmax {}x{} scores={} {} probabilities={} state={}+{} rescale={:#x} scale={}",
                    v.keys,
                    v.queries,
                    At(&v.scores),
                    v.scores.dtype,
                    At(&v.probabilities),
                    At(&v.state),
                    v.head_dim,
                    v.rescale.address,
                    f32::from_bits(v.scale_bits)
                )?;
                if let Some(m) = v.mask {
                    write!(f, " causal(key{}, query{})", m.first_key, m.first_query)?;
                }
                if let Some(b) = &v.key_bias {
                    write!(f, " key_bias={:#x}", b.address)?;
                }
                if v.first {
                    write!(f, " first")?;
                }
                Ok(())
            }
            VertexKind::Accumulate(v) => write!(
                f,
                "accumulate {}x{} partials={} {} state={} rescale={:#x}{}",
                v.rows,
                v.cols,
                At(&v.partials),
                v.partials.dtype,
                At(&v.state),
                v.rescale.address,
                if v.first { " first" } else { "" }
            ),
            VertexKind::Combine(v) => write!(
                f,
                "combine {}x{} states=[{}] out={} scale={}{}",
                v.rows,
                v.cols,
                list(&v.states),
                At(&v.out),
                f32::from_bits(v.scale_bits),
                if v.transpose { " transposed" } else { "" }
            ),
            VertexKind::LayerNorm(v) => write!(
                f,
                "layer_norm {}x{} x={} gamma={:#x} beta={:#x} out={} epsilon={:e}",
                v.rows,
                v.cols,
                At(&v.x),
                v.gamma.address,
                v.beta.address,
                At(&v.out),
                f32::from_bits(v.epsilon_bits)
            ),
            VertexKind::LayerNormMoments(v) => write!(
                f,
                "layer_norm_moments {}x{} x={} moments={}",
                v.rows,
                v.cols,
                At(&v.x),
                At(&v.moments)
            ),
            VertexKind::LayerNormApply(v) => write!(
                f,
                "layer_norm_apply {}x{} x={} moments=[{}] gamma={:#x} beta={:#x} out={} epsilon={:e}",
                v.rows,
                v.cols,
                At(&v.x),
                list(&v.moments),
                v.gamma.address,
                v.beta.address,
                At(&v.out),
                f32::from_bits(v.epsilon_bits)
            ),
            VertexKind::Vector(v) => {
                write!(f, "vector {} {}x{}", v.function.name(), v.rows, v.cols)?;
                let roles = v.function.roles();
                for (i, (o, spread)) in v.operands.iter().enumerate() {
                    let role = roles.get(i).copied().unwrap_or("operand");
                    write!(f, " {role}={} {}", At(o), spread.name())?;
                }
                write!(f, " out={}", At(&v.out))?;
                if v.transpose {
                    write!(f, " transposed")?;
                }
                Ok(())
            }
            VertexKind::Assemble(v) => {
                let sources: Vec<String> = (v.sources.iter().zip(&v.extents))
                    .map(|(s, (r, c))| format!("{} {r}x{c}", At(s)))
                    .collect();
                write!(
                    f,
                    "assemble {}x{} sources=[{}] out={} pieces={}",
                    v.rows,
                    v.cols,
                    sources.join(","),
                    At(&v.out),
                    v.pieces.len()
                )
            }
        }
    }
}
