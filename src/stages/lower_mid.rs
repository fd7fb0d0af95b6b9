//! `lower_mid`: graph + target -> `mid`.
//!
//! Lowers the graph's device operations to tileable operators (a matmul with its bias, GELU and
//! residual add fused into the epilogue, and the later matmuls of the same input it can run beside
//! joined as parts side by side; an attention as a flash attention; a layer norm over row
//! blocks; a unary, binary, select, reduce or softmax operation, and a bias add, GELU or add that no
//! matmul fuses, as a general vector operator over row blocks, its operands listed with their
//! spreads); the host's operations (`OpKind::on_host`) are left to the host. It enumerates candidate
//! partitions of every operator over the tiles (`partitions`): a matmul into row blocks x column
//! blocks of its output x depth blocks of its reduction (a multiple of the AMP block depth), in the
//! normal or the transposed operand form (the AMP's stationary dimension in blocks of a multiple of
//! its width), with its weights resident or gathered; an attention into batch-and-head groups of
//! query blocks x key blocks, with the key sub-block its online softmax steps by and its columns
//! paired where they fit. It costs each analytically with the target model (`estimate`: compute,
//! exchange, memory by region, resident bytes), shortlists each operator's candidates (once for
//! operators alike but for their names, ids and values: `alike`) and searches the whole program
//! jointly (`search`), keeping the best `finalists` plans.
//!
//! Invariants (checked by [`crate::ir::verify_mid`], which `select_finalist` runs on its input too):
//! every device operation of the graph is covered by exactly one operator, no host operation by any;
//! every partition covers its output and its reduction (`row_blocks * block_rows >= m`,
//! `col_blocks * block_cols >= n`, `depth_blocks * block_depth >= k`; query and key blocks likewise)
//! with no empty block, no column block of a matmul straddles two of its parts, and a partition uses
//! at most `target.tiles` tiles; every finalist reads each value in one
//! order, and its operators' estimated memory fits a tile beside every resident byte of the plan;
//! the repeated layers the mid records (`layers.rs`), if any, lie within its operators, and every
//! finalist plans each copy as the layer before it.

use crate::ids::{OpId, ValueId};
mod alike;
mod estimate;
mod layers;
mod partitions;
mod search;

use crate::ir::{
    AssembleOp, Attention, CODE_RESERVE_BYTES, Graph, LayerNorm, MatMul, MatMulPart, Mid, Op,
    OpKind, Operator, OperatorEstimate, Oversize, Partition, Plan, PlanEstimate, Resident,
    ValueRole, VectorOp, largest_values, verify_mid,
};
use crate::isa::{Activation, Spread, VectorFn};
use crate::target::Target;
use alike::alike_key;
use estimate::{
    assemble_estimate, attention_estimate, grid_estimate, layer_norm_estimate, vector_estimate,
};
use layers::repeated;
use partitions::{attention_partitions, grid_partitions, layer_norm_partitions, row_partitions};
use rayon::prelude::*;
pub use search::Candidate;
use search::{joint, shortlist};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LowerMidConfig {
    /// How many whole-program plans to keep for `select_finalist`.
    pub finalists: u32,
    /// The matmuls' operand forms the search may choose.
    pub form: FormChoice,
    /// Whether the matmuls' weights may stay resident where they are used.
    pub weights: WeightsChoice,
}

/// `--form`: which operand forms of a matmul the search considers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormChoice {
    /// Both, chosen by estimated cycles.
    Auto,
    /// Tokens are the AMP's rows, the weights its stationary operand.
    Normal,
    /// `outᵀ = bᵀ · aᵀ`: the weights' columns are the AMP's rows, the tokens its stationary operand.
    Transposed,
}

/// `--weight-panels`: where the matmuls' weight panels may live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightsChoice {
    /// Resident or gathered, chosen by estimated cycles within tile memory.
    Auto,
    /// Each tile's weight panel resident on it, streamed at `initialize`.
    Resident,
    /// Home pieces spread over the grid, gathered into panels at every run.
    Gathered,
}

impl FormChoice {
    pub const ALL: [FormChoice; 3] = [FormChoice::Auto, FormChoice::Normal, FormChoice::Transposed];

    /// The name in flags and stage records: `transposed`.
    pub fn name(self) -> &'static str {
        match self {
            FormChoice::Auto => "auto",
            FormChoice::Normal => "normal",
            FormChoice::Transposed => "transposed",
        }
    }

    fn allows(self, transposed: bool) -> bool {
        match self {
            FormChoice::Auto => true,
            FormChoice::Normal => !transposed,
            FormChoice::Transposed => transposed,
        }
    }
}

impl WeightsChoice {
    pub const ALL: [WeightsChoice; 3] = [
        WeightsChoice::Auto,
        WeightsChoice::Resident,
        WeightsChoice::Gathered,
    ];

    /// The name in flags and stage records: `resident`.
    pub fn name(self) -> &'static str {
        match self {
            WeightsChoice::Auto => "auto",
            WeightsChoice::Resident => "resident",
            WeightsChoice::Gathered => "gathered",
        }
    }

    fn allows(self, resident: bool) -> bool {
        match self {
            WeightsChoice::Auto => true,
            WeightsChoice::Resident => resident,
            WeightsChoice::Gathered => !resident,
        }
    }
}

impl Default for LowerMidConfig {
    /// What `ipu-codegen build` passes without options.
    fn default() -> LowerMidConfig {
        LowerMidConfig {
            finalists: 4,
            form: FormChoice::Auto,
            weights: WeightsChoice::Auto,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LowerMidError {
    #[error(
        "{name} ({shape}) does not fit in tile memory: its leanest partition ({partition}) needs \
         {needed} bytes on its busiest tile (tile0 and every tile of its grid alike), {over} bytes over the \
         {capacity} bytes a tile has; its largest values: {values}"
    )]
    DoesNotFit {
        name: String,
        shape: String,
        partition: String,
        needed: u64,
        over: u64,
        capacity: u64,
        /// The operator's values, largest first ([`largest_values`]).
        values: String,
        what: Oversize,
    },
    #[error(
        "the {held} need {weight_bytes} bytes: {per_tile} bytes on each of the {tiles} tiles with \
         room for uneven pieces, before any operator's working memory, where a tile has {capacity}; \
         the largest: {largest}"
    )]
    WeightsDoNotFit {
        /// What is held in home pieces: "weights", or "weights and matmul operands" when some
        /// operand kept that way is not a weight.
        held: &'static str,
        weight_bytes: u64,
        tiles: u32,
        per_tile: u64,
        capacity: u64,
        /// The largest of what is held ([`largest_values`]).
        largest: String,
    },
    #[error(
        "{name}: no partition fits the target's {tiles} tiles (more batch-and-head groups than tiles)"
    )]
    NoPartition { name: String, tiles: u32 },
    #[error("no whole-program plan: {0}")]
    NoPlan(String),
    #[error("lower_mid produced an invalid mid:\n{0}")]
    Invalid(String),
}

impl LowerMidError {
    /// What was too large, when the error is that something does not fit: what the advice a
    /// workload gives ([`crate::ir::Oversize`]) is chosen by.
    pub fn oversize(&self) -> Option<Oversize> {
        match self {
            LowerMidError::DoesNotFit { what, .. } => Some(*what),
            LowerMidError::WeightsDoNotFit { .. } => Some(Oversize::Weights),
            _ => None,
        }
    }
}

pub fn lower_mid(
    graph: &Graph,
    target: &Target,
    cfg: &LowerMidConfig,
) -> Result<Mid, LowerMidError> {
    let (operators, shortlists) = shortlists(graph, target, cfg)?;
    let search = |layers| {
        let finalists = cfg.finalists as usize;
        joint(graph, &operators, &shortlists, layers, target, finalists)
    };
    // Layers planned alike when some plan of the whole program does so, else each on its own.
    let layers = repeated(graph, &operators, &shortlists);
    let (layers, choices) = match search(layers) {
        Ok(choices) => (layers, choices),
        Err(why) if layers.is_some() => {
            tracing::info!(%why, "no plan plans the repeated layers alike: each planned on its own");
            (None, search(None).map_err(LowerMidError::NoPlan)?)
        }
        Err(why) => return Err(LowerMidError::NoPlan(why)),
    };
    let mid = Mid {
        workload: graph.workload.clone(),
        operators,
        layers,
        finalists: choices.iter().map(|choice| plan(choice)).collect(),
    };
    let errors = verify_mid(&mid, graph, target);
    if !errors.is_empty() {
        return Err(LowerMidError::Invalid(errors.join("\n")));
    }
    Ok(mid)
}

/// A candidate per grid partition, costed by `estimate` (no transposing form).
fn grids(
    partitions: Vec<crate::ir::Grid>,
    estimate: impl Fn(&crate::ir::Grid) -> OperatorEstimate,
) -> Vec<Candidate> {
    partitions
        .into_iter()
        .map(|p| Candidate {
            estimate: estimate(&p),
            partition: Partition::Grid(p),
            transposing: None,
        })
        .collect()
}

/// The graph's operators, each with the candidates the joint search chooses among, fastest first
/// (what `ipu-codegen plans` shows).
pub fn shortlists(
    graph: &Graph,
    target: &Target,
    cfg: &LowerMidConfig,
) -> Result<(Vec<Operator>, Vec<Vec<Candidate>>), LowerMidError> {
    let operators = lower_operators(graph)?;
    let weights: Vec<ValueId> = operators
        .iter()
        .flat_map(|o| {
            let weight = |x: &ValueId| graph.value(*x).role == ValueRole::Weight;
            match o {
                Operator::MatMul(o) => (o.parts.iter())
                    .flat_map(|p| [Some(p.b), p.bias])
                    .flatten()
                    .collect(),
                Operator::LayerNorm(o) => vec![o.gamma, o.beta],
                Operator::Attention(_) => Vec::new(),
                // A vector operator's and a data movement's constants: its operands that are
                // weights.
                Operator::Vector(v) => (v.operands.iter())
                    .map(|&(x, _)| x)
                    .filter(weight)
                    .collect::<Vec<_>>(),
                Operator::Assemble(a) => a.sources().into_iter().filter(weight).collect(),
            }
        })
        .collect();
    let weight_bytes: u64 = weights.iter().map(|&w| graph.value(w).bytes()).sum();
    // Home pieces of the weights (and of any other operand kept the same way), spread over the tiles,
    // with room for uneven pieces.
    let homes = 2 * weight_bytes.div_ceil(u64::from(target.tiles)) + 1024;
    let capacity = u64::from(target.memory_end - target.memory_base);
    if homes + CODE_RESERVE_BYTES > capacity {
        let all_weights = weights
            .iter()
            .all(|&w| graph.value(w).role == ValueRole::Weight);
        return Err(LowerMidError::WeightsDoNotFit {
            held: if all_weights {
                "weights"
            } else {
                "weights and matmul operands"
            },
            weight_bytes,
            tiles: target.tiles,
            per_tile: homes,
            capacity,
            largest: named_bytes(graph, &weights),
        });
    }
    // Each operator's shortlist on its own, side by side, once for operators alike (a model's
    // repeated layers: `alike`); the first in order that fits nothing is the error (operators alike
    // come after the first of them, which is the one costed).
    let keys: Vec<Option<Vec<u8>>> = (operators.par_iter())
        .map(|op| alike_key(op, graph))
        .collect();
    let mut first_alike = std::collections::HashMap::new();
    let costed_as: Vec<usize> = (keys.iter().enumerate())
        .map(|(i, key)| {
            key.as_ref()
                .map_or(i, |k| *first_alike.entry(k).or_insert(i))
        })
        .collect();
    let costed: Vec<Option<Result<Vec<Candidate>, LowerMidError>>> = (operators.par_iter())
        .enumerate()
        .map(|(i, op)| (costed_as[i] == i).then(|| candidates(graph, op, target, cfg, homes)))
        .collect();
    let mut shortlists: Vec<Vec<Candidate>> = Vec::with_capacity(operators.len());
    for (i, result) in costed.into_iter().enumerate() {
        shortlists.push(match result {
            Some(result) => result?,
            None => shortlists[costed_as[i]].clone(),
        });
    }
    Ok((operators, shortlists))
}

/// An operator's shortlist: every candidate partition costed, those that fit a tile (with `homes`
/// bytes of weight pieces beside them), fastest first.
fn candidates(
    graph: &Graph,
    op: &Operator,
    target: &Target,
    cfg: &LowerMidConfig,
    homes: u64,
) -> Result<Vec<Candidate>, LowerMidError> {
    let all: Vec<Candidate> = match op {
        Operator::MatMul(o) => {
            let weights = (o.parts.iter()).all(|p| graph.value(p.b).role == ValueRole::Weight);
            grid_partitions(o, weights, target)
                .into_iter()
                .filter(|p| cfg.form.allows(p.transposed) && cfg.weights.allows(p.resident))
                .map(|p| {
                    let [estimate, transposing] =
                        [false, true].map(|t| grid_estimate(o, &p, target, homes, t));
                    Candidate {
                        partition: Partition::Grid(p),
                        estimate,
                        transposing: Some(transposing),
                    }
                })
                .collect()
        }
        Operator::Attention(a) => attention_partitions(a, target)
            .into_iter()
            .map(|p| Candidate {
                partition: Partition::Attention(p),
                estimate: attention_estimate(a, &p, target),
                transposing: None,
            })
            .collect(),
        Operator::LayerNorm(o) => grids(layer_norm_partitions(o.rows, o.cols, target), |p| {
            layer_norm_estimate(o, p, target, homes)
        }),
        Operator::Vector(o) => grids(row_partitions(o.rows, o.out_cols(), target), |p| {
            vector_estimate(o, p, target, homes)
        }),
        Operator::Assemble(o) => grids(row_partitions(o.rows, o.cols, target), |p| {
            assemble_estimate(graph, o, p, target, homes)
        }),
    };
    let (fitting, too_big): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|c| c.estimate.fits_beside(&c.estimate.resident, target));
    if fitting.is_empty() {
        return Err(does_not_fit(graph, op, too_big, target));
    }
    Ok(shortlist(fitting))
}

/// The error for an operator none of whose candidates fits a tile, naming its leanest and its values.
fn does_not_fit(
    graph: &Graph,
    op: &Operator,
    too_big: Vec<Candidate>,
    target: &Target,
) -> LowerMidError {
    let capacity = u64::from(target.memory_end - target.memory_base);
    let Some(c) = too_big
        .into_iter()
        .min_by_key(|c| (c.estimate.total_bytes(), c.partition))
    else {
        return LowerMidError::NoPartition {
            name: op.name().to_string(),
            tiles: target.tiles,
        };
    };
    let needed = c.estimate.total_bytes() + CODE_RESERVE_BYTES;
    let (shape, what, values) = match op {
        Operator::MatMul(o) => (
            format!("{}x{} times {}x{}", o.m, o.k, o.k, o.n),
            Oversize::MatMul,
            (o.parts.iter())
                .flat_map(|p| [Some(p.b), Some(p.out), p.bias])
                .chain([Some(o.a), o.residual])
                .collect(),
        ),
        Operator::LayerNorm(o) => (
            format!("{} rows of {}", o.rows, o.cols),
            Oversize::LayerNorm,
            [Some(o.x), Some(o.out), Some(o.gamma), Some(o.beta)].to_vec(),
        ),
        Operator::Vector(o) => (
            format!("{} rows of {}", o.rows, o.cols),
            Oversize::Vector,
            (o.operands.iter().map(|&(x, _)| x).chain([o.out]).map(Some)).collect(),
        ),
        Operator::Assemble(o) => (
            format!("{} rows of {}", o.rows, o.cols),
            Oversize::Assemble,
            (o.sources().into_iter().chain([o.out]).map(Some)).collect(),
        ),
        Operator::Attention(a) => (
            format!(
                "{} queries x {} keys, head dimension {}",
                a.shape.queries, a.shape.keys, a.shape.head_dim
            ),
            Oversize::Attention,
            [Some(a.q), Some(a.k), Some(a.v), Some(a.out), a.mask].to_vec(),
        ),
    };
    let values: Vec<ValueId> = values.into_iter().flatten().collect();
    LowerMidError::DoesNotFit {
        name: op.name().to_string(),
        shape,
        partition: c.partition.to_string(),
        needed,
        over: needed.saturating_sub(capacity),
        capacity,
        values: named_bytes(graph, &values),
        what,
    }
}

/// The three largest of `values` by name and bytes ([`largest_values`]).
fn named_bytes(graph: &Graph, values: &[ValueId]) -> String {
    let named = values
        .iter()
        .map(|&v| (graph.value(v).name.clone(), graph.value(v).bytes()))
        .collect();
    largest_values(named, 3)
}

/// A whole plan from its operators' choices; its memory peaks count every resident byte.
fn plan(chosen: &[(Partition, OperatorEstimate)]) -> Plan {
    let operators: Vec<OperatorEstimate> = chosen.iter().map(|(_, e)| e.clone()).collect();
    let resident = Resident::of(&operators);
    let most = |f: &dyn Fn(&OperatorEstimate) -> u64| operators.iter().map(f).max().unwrap_or(0);
    let estimate = PlanEstimate {
        cycles: operators.iter().map(|e| e.cycles).sum(),
        exchange_cycles: operators.iter().map(|e| e.exchange_cycles).sum(),
        exchange_row_bytes: most(&|e| e.receive_bytes),
        peak_standard_bytes: most(&|e| e.standard_bytes()) + resident.either,
        peak_interleaved_bytes: most(&|e| e.interleaved_bytes) + resident.interleaved,
        peak_total_bytes: most(&|e| e.panel_bytes + e.other_bytes + e.interleaved_bytes)
            + resident.either
            + resident.interleaved,
        active_tiles: chosen.iter().map(|(p, _)| p.tiles()).max().unwrap_or(0),
    };
    Plan {
        partitions: chosen.iter().map(|(p, _)| *p).collect(),
        operators,
        estimate,
    }
}

/// A matmul's epilogue: the bias add, the GELU and the residual add that follow it, each the only
/// reader of what came before; `out` is the last one's output.
#[derive(Clone)]
struct Chain {
    covers: Vec<OpId>,
    out: ValueId,
    bias: Option<ValueId>,
    activation: Option<Activation>,
    residual: Option<ValueId>,
}

/// The operations reading `v`.
fn consumers(graph: &Graph, v: ValueId) -> impl Iterator<Item = &Op> {
    (graph.ops.iter()).filter(move |op| op.kind.inputs().contains(&v))
}

/// The epilogue of the matmul `op`, the graph's operation `index`.
fn epilogue_chain(graph: &Graph, op: &Op, index: usize) -> Chain {
    let single = |v: ValueId| {
        let mut it = consumers(graph, v);
        match (it.next(), it.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    };
    let mut chain = Chain {
        covers: vec![op.id],
        out: op.out,
        bias: None,
        activation: None,
        residual: None,
    };
    if let Some(next) = single(chain.out)
        && let OpKind::AddBias { x, bias } = next.kind
        && x == chain.out
    {
        chain.bias = Some(bias);
        chain.covers.push(next.id);
        chain.out = next.out;
    }
    if let Some(next) = single(chain.out) {
        chain.activation = match next.kind {
            OpKind::GeluTanh { .. } => Some(Activation::GeluTanh),
            OpKind::GeluErf { .. } => Some(Activation::GeluErf),
            _ => None,
        };
        if chain.activation.is_some() {
            chain.covers.push(next.id);
            chain.out = next.out;
        }
    }
    if let Some(next) = single(chain.out)
        && let OpKind::Add { a: x, b: y } = next.kind
    {
        let other = if x == chain.out { y } else { x };
        // The residual must exist before the matmul runs.
        let earlier = graph.producer(other).is_none_or(|p| p.id.index() < index);
        if other != chain.out && earlier {
            chain.residual = Some(other);
            chain.covers.push(next.id);
            chain.out = next.out;
        }
    }
    chain
}

/// Fuses each matmul with the bias add, the GELU and the residual add that follow it, and with the
/// later matmuls of the same input it can run beside (Q, K and V as one); an attention, a layer
/// norm and a general vector operation are operators of their own, and so is a bias add, GELU or
/// add no matmul fuses (a vector operator); host operations are no operator's.
fn lower_operators(graph: &Graph) -> Result<Vec<Operator>, LowerMidError> {
    let mut covered: Vec<bool> = graph.ops.iter().map(|op| op.kind.on_host()).collect();
    let mut operators = Vec::new();
    for (index, op) in graph.ops.iter().enumerate() {
        let id = OpId::from_index(operators.len());
        match op.kind {
            OpKind::Assemble { ref pieces } => {
                covered[op.id.index()] = true;
                let out = graph.value(op.out);
                operators.push(Operator::Assemble(AssembleOp {
                    id,
                    name: op.name.clone(),
                    pieces: pieces.clone(),
                    out: op.out,
                    rows: out.rows,
                    cols: out.cols,
                    covers: vec![op.id],
                }));
                continue;
            }
            OpKind::Attention {
                q,
                k,
                v,
                scale,
                mask,
                ..
            } => {
                let Some(shape) = graph.attention_shape(op) else {
                    continue;
                };
                covered[op.id.index()] = true;
                operators.push(Operator::Attention(Attention {
                    id,
                    name: op.name.clone(),
                    q,
                    k,
                    v,
                    out: op.out,
                    shape,
                    scale_bits: scale.to_bits(),
                    mask,
                    transposed_out: !consumers(graph, op.out).any(|c| !c.kind.on_host()),
                    partials: graph.partials,
                    covers: vec![op.id],
                }));
                continue;
            }
            OpKind::LayerNorm {
                x,
                gamma,
                beta,
                epsilon,
            } => {
                covered[op.id.index()] = true;
                let xv = graph.value(x);
                operators.push(Operator::LayerNorm(LayerNorm {
                    id,
                    name: op.name.clone(),
                    x,
                    gamma,
                    beta,
                    out: op.out,
                    rows: xv.rows,
                    cols: xv.cols,
                    epsilon_bits: epsilon.to_bits(),
                    covers: vec![op.id],
                }));
                continue;
            }
            _ if op.kind.on_host() || covered[op.id.index()] => continue,
            OpKind::MatMul { .. } => {}
            _ => {
                covered[op.id.index()] = true;
                operators.push(Operator::Vector(vector_operator(graph, op, id)?));
                continue;
            }
        }
        let OpKind::MatMul { a, b } = op.kind else {
            continue;
        };
        let first = epilogue_chain(graph, op, index);
        // Later matmuls of the same input by weights of the same depth, each with the same
        // activation and bias or none and no residual (Q, K and V), join as parts side by side.
        let weight = |v: ValueId| graph.value(v).role == ValueRole::Weight;
        // A part runs where the first does: its bias must exist by then.
        let joins = |chain: &Chain| {
            chain.residual.is_none()
                && chain.activation == first.activation
                && chain.bias.is_some() == first.bias.is_some()
                && (chain.bias.and_then(|b| graph.producer(b))).is_none_or(|p| p.id.index() < index)
        };
        let mut chains = vec![(b, first.clone())];
        if weight(b) && first.residual.is_none() {
            for (later, other) in graph.ops.iter().enumerate().skip(index + 1) {
                if let OpKind::MatMul { a: oa, b: ob } = other.kind
                    && oa == a
                    && weight(ob)
                    && graph.value(ob).rows == graph.value(b).rows
                    && !covered[later]
                    && chains.iter().all(|(joined, _)| *joined != ob)
                {
                    let chain = epilogue_chain(graph, other, later);
                    let own_bias =
                        (chains.iter()).all(|(_, c)| c.bias.is_none() || c.bias != chain.bias);
                    if joins(&chain) && own_bias {
                        chains.push((ob, chain));
                    }
                }
            }
        }
        let (mut covers, mut parts, mut names): (Vec<OpId>, _, Vec<&str>) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut start = 0;
        for (b, chain) in &chains {
            let cols = graph.value(*b).cols;
            parts.push(MatMulPart {
                b: *b,
                bias: chain.bias,
                out: chain.out,
                start,
                cols,
            });
            start += cols;
            covers.extend(&chain.covers);
            names.push(graph.ops[chain.covers[0].index()].name.as_str());
        }
        for c in &covers {
            covered[c.index()] = true;
        }
        let (first, av) = (&chains[0].1, graph.value(a));
        operators.push(Operator::MatMul(MatMul {
            id,
            name: names.join("+"),
            a,
            parts,
            activation: first.activation,
            residual: first.residual,
            m: av.rows,
            k: av.cols,
            n: start,
            partials: graph.partials,
            covers,
        }));
    }
    Ok(operators)
}

/// The vector operator of one graph operation that no other operator covers: an element-wise
/// (select included), row-wise or softmax operation, or a bias add, GELU or add outside a matmul's epilogue.
fn vector_operator(graph: &Graph, op: &Op, id: OpId) -> Result<VectorOp, LowerMidError> {
    let dims = |v: ValueId| (graph.value(v).rows, graph.value(v).cols);
    let out = dims(op.out);
    let (function, inputs) = match op.kind {
        OpKind::Unary { x, function } => (VectorFn::Unary(function), vec![x]),
        OpKind::GeluTanh { x } => (VectorFn::Unary(crate::ir::UnaryFn::GeluTanh), vec![x]),
        OpKind::GeluErf { x } => (VectorFn::Unary(crate::ir::UnaryFn::GeluErf), vec![x]),
        OpKind::Binary { a, b, function } => (VectorFn::Binary(function), vec![a, b]),
        OpKind::Select { condition, x, y } => (VectorFn::Select, vec![condition, x, y]),
        OpKind::Add { a, b } => (VectorFn::Binary(crate::ir::BinaryFn::Add), vec![a, b]),
        OpKind::AddBias { x, bias } => (VectorFn::Binary(crate::ir::BinaryFn::Add), vec![x, bias]),
        OpKind::Reduce { x, function } => (VectorFn::Reduce(function), vec![x]),
        OpKind::Softmax { x } => (VectorFn::Softmax, vec![x]),
        _ => {
            return Err(LowerMidError::Invalid(format!(
                "{} ({}): operation {} has no vector operator",
                op.id,
                op.name,
                op.kind.name()
            )));
        }
    };
    // A reduction runs over its input's rows; everything else over its output's.
    let (rows, cols) = match function {
        VectorFn::Reduce(_) => dims(inputs[0]),
        _ => out,
    };
    let spread = |v: ValueId| {
        Spread::of(dims(v), (rows, cols)).ok_or_else(|| {
            LowerMidError::Invalid(format!(
                "{} ({}): `{}` does not broadcast to [{rows}, {cols}]",
                op.id,
                op.name,
                graph.value(v).name
            ))
        })
    };
    Ok(VectorOp {
        id,
        name: op.name.clone(),
        function,
        operands: (inputs.into_iter())
            .map(|v| Ok((v, spread(v)?)))
            .collect::<Result<_, LowerMidError>>()?,
        out: op.out,
        rows,
        cols,
        covers: vec![op.id],
    })
}
