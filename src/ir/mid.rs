//! The mid-level program (`mid`): the graph's device operations lowered to tileable operators (a
//! matmul with its fused epilogue, a flash attention, a layer norm, a general vector operation (its
//! operands a list, as many as its function takes: a select's three included), a data movement), their candidate partitions over the tiles and the best whole-program
//! plans with their estimates, and the operators that repeat one layer ([`Layers`]), which every
//! plan plans alike. Written by `lower_mid`, read by `select_finalist`.

mod assemble;
mod matmul;
mod vector;
pub use assemble::{AssembleBlock, AssembleOp};
pub use matmul::{MatMul, MatMulPart};
pub use vector::VectorOp;

use crate::ids::{OpId, ValueId};
use crate::ir::{AttentionShape, DType, Graph};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// A tileable operator: a matmul with its fused epilogue, a flash attention, a layer norm, a
/// general vector operation or a data movement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    MatMul(MatMul),
    Attention(Attention),
    LayerNorm(LayerNorm),
    Vector(VectorOp),
    Assemble(AssembleOp),
}

impl Operator {
    pub fn id(&self) -> OpId {
        match self {
            Operator::MatMul(o) => o.id,
            Operator::Attention(o) => o.id,
            Operator::LayerNorm(o) => o.id,
            Operator::Vector(o) => o.id,
            Operator::Assemble(o) => o.id,
        }
    }
    pub fn name(&self) -> &str {
        match self {
            Operator::MatMul(o) => &o.name,
            Operator::Attention(o) => &o.name,
            Operator::LayerNorm(o) => &o.name,
            Operator::Vector(o) => &o.name,
            Operator::Assemble(o) => &o.name,
        }
    }
    /// The values it writes: a matmul's one per part, every other operator's one.
    pub fn outs(&self) -> impl Iterator<Item = ValueId> + '_ {
        let (parts, single): (&[MatMulPart], Option<ValueId>) = match self {
            Operator::MatMul(o) => (&o.parts, None),
            Operator::Attention(o) => (&[], Some(o.out)),
            Operator::LayerNorm(o) => (&[], Some(o.out)),
            Operator::Vector(o) => (&[], Some(o.out)),
            Operator::Assemble(o) => (&[], Some(o.out)),
        };
        parts.iter().map(|p| p.out).chain(single)
    }
    /// The graph operations this operator implements.
    pub fn covers(&self) -> &[OpId] {
        match self {
            Operator::MatMul(o) => &o.covers,
            Operator::Attention(o) => &o.covers,
            Operator::LayerNorm(o) => &o.covers,
            Operator::Vector(o) => &o.covers,
            Operator::Assemble(o) => &o.covers,
        }
    }
}

/// Flash attention of one graph operation: per batch and head, `out = softmax(q · kᵀ · scale + mask)
/// · v`, the mask (`[batch, keys]`) added to every score of its batch's keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    pub id: OpId,
    pub name: String,
    pub q: ValueId,
    pub k: ValueId,
    pub v: ValueId,
    pub out: ValueId,
    pub shape: AttentionShape,
    /// The score scale as f32 bits.
    pub scale_bits: u32,
    pub mask: Option<ValueId>,
    /// The output is stored transposed (one stored row per head dimension), as when only the host
    /// reads it; row-major when a device operator reads it.
    pub transposed_out: bool,
    pub partials: DType,
    /// The graph operation this operator implements.
    pub covers: Vec<OpId>,
}

impl Attention {
    /// Batch-and-head groups, each partitioned over its own tiles.
    pub fn groups(&self) -> u32 {
        self.shape.batch * self.shape.heads
    }
    /// The score scale, as the device computes with it.
    pub fn scale(&self) -> f32 {
        f32::from_bits(self.scale_bits)
    }
    /// Float partials are the flash accumulator's own type, so a tile's first key sub-block has its
    /// weighted values written by the AMP straight into the accumulator, with nothing to accumulate.
    pub fn partials_are_accumulator(&self) -> bool {
        self.partials == DType::F32
    }
}

/// A layer norm of one graph operation over the rows of `x: [rows, cols]`. Its partition is a
/// [`Grid`] of row blocks with one column block (the whole row) and one depth block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerNorm {
    pub id: OpId,
    pub name: String,
    pub x: ValueId,
    pub gamma: ValueId,
    pub beta: ValueId,
    pub out: ValueId,
    pub rows: u32,
    pub cols: u32,
    /// Epsilon as f32 bits.
    pub epsilon_bits: u32,
    /// The graph operation this operator implements.
    pub covers: Vec<OpId>,
}

/// How an operator is spread over tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Partition {
    Grid(Grid),
    Attention(AttentionPartition),
}

impl Partition {
    pub fn tiles(&self) -> u32 {
        match self {
            Partition::Grid(g) => g.tiles(),
            Partition::Attention(a) => a.tiles(),
        }
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Partition::Grid(p) => {
                write!(
                    f,
                    "{}x{} blocks of {}x{}",
                    p.row_blocks, p.col_blocks, p.block_rows, p.block_cols
                )?;
                if p.depth_blocks > 1 {
                    write!(
                        f,
                        ", depth in {} blocks of {}",
                        p.depth_blocks, p.block_depth
                    )?;
                }
                if p.transposed {
                    write!(f, ", transposed")?;
                }
                if p.resident {
                    write!(f, ", weights resident")?;
                }
                Ok(())
            }
            Partition::Attention(p) => {
                write!(
                    f,
                    "{} groups of {} tiles: {} query blocks of {} x {} key blocks of {}, key sub-blocks of {}",
                    p.groups,
                    p.tiles_per_group,
                    p.query_blocks,
                    p.block_queries,
                    p.key_blocks,
                    p.block_keys,
                    p.sub_block
                )?;
                if p.paired_columns {
                    write!(f, ", paired columns")?;
                }
                Ok(())
            }
        }
    }
}

/// A partition of a matmul over `row_blocks x col_blocks x depth_blocks` tiles: blocks of the output,
/// and of the reduction dimension when `depth_blocks > 1` (each tile then multiplies one depth block
/// and the tiles of an output block sum their partials, each a share of its rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Grid {
    pub row_blocks: u32,
    pub block_rows: u32,
    pub col_blocks: u32,
    pub block_cols: u32,
    pub depth_blocks: u32,
    /// A multiple of the AMP block depth unless it is the whole depth.
    pub block_depth: u32,
    /// A matmul's operand form: in the normal form (`false`) a block's rows of `a` are the AMP's rows
    /// and its weights `b` the stationary operand, so `block_cols` is a multiple of the AMP block
    /// width; in the transposed form (`true`) the AMP computes `outᵀ = bᵀ · aᵀ`: the weights'
    /// columns are its rows and a block of `a`'s rows (tokens) its stationary operand, so
    /// `block_rows` is a multiple of the AMP block width. Always `false` for a layer norm.
    pub transposed: bool,
    /// A matmul's weights (and bias) are kept on every tile that uses them, each tile its own panel
    /// streamed at `initialize`, instead of being gathered at every run from home pieces spread over
    /// the grid.
    pub resident: bool,
}

impl Grid {
    pub fn tiles(&self) -> u32 {
        self.row_blocks * self.col_blocks * self.depth_blocks
    }
}

/// A partition of an attention: every batch-and-head group gets one tile per (query block, key block)
/// cell its queries see (all `query_blocks x key_blocks` cells, or under a causal mask those at or
/// below the diagonal); the tile scores its queries against its keys with an online softmax over key
/// sub-blocks of `sub_block` keys, and the key blocks of a query block are merged at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AttentionPartition {
    pub groups: u32,
    pub query_blocks: u32,
    pub block_queries: u32,
    pub key_blocks: u32,
    pub block_keys: u32,
    pub sub_block: u32,
    /// Each key block's column of cells takes an even number of tiles (a tile left idle after an odd
    /// count) under the column-major mapping, so that every supertile pair lies inside one column and
    /// receives its keys and values together at two words a cycle. Set whenever the padded columns
    /// fit the group's tiles.
    pub paired_columns: bool,
    /// The tiles of a group: its visible cells, and the idle tiles of paired columns.
    pub tiles_per_group: u32,
}

impl AttentionPartition {
    pub fn tiles(&self) -> u32 {
        self.groups * self.tiles_per_group
    }

    /// Key blocks query block `q` sees: all, or under a causal mask those starting at or before its
    /// last query.
    pub fn visible_blocks(&self, shape: &AttentionShape, q: u32) -> u32 {
        shape
            .visible_keys(self.last_query(shape, q))
            .div_ceil(self.block_keys)
            .min(self.key_blocks)
    }

    /// The fewest tiles any key block's column has (those of the query blocks that see it).
    pub fn smallest_column(&self, shape: &AttentionShape) -> u32 {
        (0..self.key_blocks)
            .map(|k| self.column_cells(shape, k))
            .min()
            .unwrap_or(1)
            .max(1)
    }

    pub fn cells(&self, shape: &AttentionShape) -> u32 {
        (0..self.query_blocks)
            .map(|q| self.visible_blocks(shape, q))
            .sum()
    }

    /// The last query of query block `q`.
    fn last_query(&self, shape: &AttentionShape, q: u32) -> u32 {
        ((q + 1) * self.block_queries).min(shape.queries) - 1
    }

    /// The keys of key block `k` that query block `q` sees (none past the last a query sees).
    pub fn cell_keys(&self, shape: &AttentionShape, q: u32, k: u32) -> u32 {
        let end = ((k + 1) * self.block_keys)
            .min(shape.seen_keys())
            .min(shape.visible_keys(self.last_query(shape, q)));
        end.saturating_sub(k * self.block_keys)
    }

    /// The visible cells of key block `k`'s column: the query blocks that see it.
    pub fn column_cells(&self, shape: &AttentionShape, k: u32) -> u32 {
        (0..self.query_blocks)
            .filter(|&q| self.visible_blocks(shape, q) > k)
            .count() as u32
    }

    /// The tiles a group takes: its cells, each column rounded up to an even count when paired.
    pub fn group_tiles(&self, shape: &AttentionShape) -> u32 {
        if !self.paired_columns {
            return self.cells(shape);
        }
        (0..self.key_blocks)
            .map(|k| self.column_cells(shape, k).next_multiple_of(2))
            .sum()
    }
}

/// Analytical figures of one operator under one partition, for its busiest tile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEstimate {
    pub compute_cycles: u64,
    /// Of the compute, the vector unit's: the epilogue, the layer norm, the softmax and the merge.
    pub vector_cycles: u64,
    pub exchange_cycles: u64,
    pub receive_bytes: u64,
    /// The A panel: one contiguous buffer, in either region.
    pub panel_bytes: u64,
    /// Output, resident weight pieces: small buffers, in either region.
    pub other_bytes: u64,
    /// Weight panel, partials and what else the AMP writes: interleaved only.
    pub interleaved_bytes: u64,
    /// What the operator keeps on its busiest tile for the whole program.
    pub resident: Resident,
    pub cycles: u64,
}

/// Bytes kept on a tile for the whole program (resident weight panels): the AMP's stationary operand
/// in interleaved memory, the rest in either region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resident {
    pub interleaved: u64,
    pub either: u64,
}

impl Resident {
    /// The sum over a plan's operators, as if every operator's busiest tile were the same one.
    pub fn of(operators: &[OperatorEstimate]) -> Resident {
        operators
            .iter()
            .fold(Resident::default(), |a, e| a.plus(e.resident))
    }
    pub fn plus(self, other: Resident) -> Resident {
        Resident {
            interleaved: self.interleaved + other.interleaved,
            either: self.either + other.either,
        }
    }
}

impl OperatorEstimate {
    pub fn standard_bytes(&self) -> u64 {
        self.panel_bytes + self.other_bytes
    }
    pub fn total_bytes(&self) -> u64 {
        self.panel_bytes
            + self.other_bytes
            + self.interleaved_bytes
            + self.resident.interleaved
            + self.resident.either
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEstimate {
    pub cycles: u64,
    pub exchange_cycles: u64,
    pub exchange_row_bytes: u64,
    pub peak_standard_bytes: u64,
    pub peak_interleaved_bytes: u64,
    pub peak_total_bytes: u64,
    /// The most tiles an operator spans, an attention's idle tiles of paired columns included.
    pub active_tiles: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub partitions: Vec<Partition>,
    pub operators: Vec<OperatorEstimate>,
    pub estimate: PlanEstimate,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mid {
    pub workload: String,
    pub operators: Vec<Operator>,
    /// The operators that repeat one layer, which every finalist plans alike.
    pub layers: Option<Layers>,
    pub finalists: Vec<Plan>,
}

/// Schema 8: the repeated layers (`Layers`).
impl crate::store::Artifact for Mid {
    const KIND: &'static str = "mid";
    const SCHEMA: u32 = 8;
}

/// Operators `start .. start + period * count` are `count` copies of one layer of `period`
/// operators: each has the candidates of the operator `period` before it and reads what the
/// operators the same distance before them produce. Every finalist gives each the partition of
/// the one `period` before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    pub start: u32,
    pub period: u32,
    pub count: u32,
}

impl Layers {
    /// The operator after the last layer.
    pub fn end(&self) -> usize {
        (self.start as usize)
            .saturating_add((self.period as usize).saturating_mul(self.count as usize))
    }

    /// The operator whose plan operator `i` repeats: the one a layer before it, from the second
    /// layer on.
    pub fn copies(&self, i: usize) -> Option<usize> {
        let first = (self.start as usize).saturating_add(self.period as usize);
        (i >= first && i < self.end()).then(|| i - self.period as usize)
    }
}

impl Mid {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "mid {}", self.workload);
        for o in &self.operators {
            let covers: Vec<String> = o.covers().iter().map(|c| c.to_string()).collect();
            let o = match o {
                Operator::MatMul(o) => o,
                Operator::Vector(v) => {
                    let _ = writeln!(s, "{}", v.dump(&covers.join(",")));
                    continue;
                }
                Operator::Assemble(a) => {
                    let _ = writeln!(s, "{}", a.dump(&covers.join(",")));
                    continue;
                }
                Operator::LayerNorm(l) => {
                    let _ = writeln!(
                        s,
                        "  {} {}: {} = layer_norm({}, {}, {}) [{}x{}] epsilon={:e} covers={}",
                        l.id,
                        l.name,
                        l.out,
                        l.x,
                        l.gamma,
                        l.beta,
                        l.rows,
                        l.cols,
                        f32::from_bits(l.epsilon_bits),
                        covers.join(",")
                    );
                    continue;
                }
                Operator::Attention(a) => {
                    let shape = a.shape;
                    let _ = writeln!(
                        s,
                        "  {} {}: {} = attention({}, {}, {}) batch={} heads={} queries={} keys={} \
                         head_dim={} causal={}{} partials={} covers={}",
                        a.id,
                        a.name,
                        a.out,
                        a.q,
                        a.k,
                        a.v,
                        shape.batch,
                        shape.heads,
                        shape.queries,
                        shape.keys,
                        shape.head_dim,
                        shape.causal,
                        attention_extras(a),
                        a.partials,
                        covers.join(",")
                    );
                    continue;
                }
            };
            let _ = writeln!(s, "{}", o.dump(&covers.join(",")));
        }
        if let Some(l) = self.layers {
            let _ = writeln!(
                s,
                "  layers: operators {}..{} are {} copies of {} operators, planned alike",
                l.start,
                l.end(),
                l.count,
                l.period
            );
        }
        for (f, plan) in self.finalists.iter().enumerate() {
            let e = &plan.estimate;
            let _ = writeln!(
                s,
                "  finalist {f}: estimated_cycles={} estimated_exchange_cycles={} exchange_row_bytes={} \
                 peak_standard_bytes={} peak_interleaved_bytes={} active_tiles={}",
                e.cycles,
                e.exchange_cycles,
                e.exchange_row_bytes,
                e.peak_standard_bytes,
                e.peak_interleaved_bytes,
                e.active_tiles
            );
            for ((o, p), oe) in self
                .operators
                .iter()
                .zip(&plan.partitions)
                .zip(&plan.operators)
            {
                let _ = writeln!(
                    s,
                    "    {}: {p} compute={} exchange={} cycles={}",
                    o.id(),
                    oe.compute_cycles,
                    oe.exchange_cycles,
                    oe.cycles
                );
            }
        }
        s
    }
}

/// The dump's words for an attention's scale and mask, when they are not the default.
fn attention_extras(a: &Attention) -> String {
    let mut s = String::new();
    if a.scale_bits != (1.0 / (a.shape.head_dim as f32).sqrt()).to_bits() {
        let _ = write!(s, " scale={}", a.scale());
    }
    if let Some(m) = a.mask {
        let _ = write!(s, " mask={m}");
    }
    if !a.transposed_out {
        s.push_str(" row_major_out");
    }
    s
}

/// Bytes each tile keeps for code and exchange tables in the analytical model (`place_storage` sizes the
/// real code).
pub const CODE_RESERVE_BYTES: u64 = 24 * 1024;

impl OperatorEstimate {
    /// Whether the working set fits a tile beside `resident`, what the plan keeps on it (this
    /// operator's own resident bytes included): the interleaved-only buffers in interleaved memory,
    /// the A panel whole in one region, the rest in what is left of both.
    pub fn fits_beside(&self, resident: &Resident, target: &Target) -> bool {
        let e = &OperatorEstimate {
            interleaved_bytes: self.interleaved_bytes + resident.interleaved,
            other_bytes: self.other_bytes + resident.either,
            ..self.clone()
        };
        let standard = u64::from(target.interleaved_base - target.memory_base)
            .saturating_sub(CODE_RESERVE_BYTES);
        let Some(interleaved) =
            u64::from(target.memory_end - target.interleaved_base).checked_sub(e.interleaved_bytes)
        else {
            return false;
        };
        let in_standard =
            e.panel_bytes <= standard && e.other_bytes <= standard - e.panel_bytes + interleaved;
        let in_interleaved =
            e.panel_bytes <= interleaved && e.other_bytes <= standard + interleaved - e.panel_bytes;
        in_standard || in_interleaved
    }
}

/// Whether `blocks` blocks of `size` cover `len` with none empty.
fn tiles_exactly(blocks: u32, size: u32, len: u32) -> bool {
    let (blocks, size, len) = (u64::from(blocks), u64::from(size), u64::from(len));
    blocks > 0 && blocks * size >= len && (blocks - 1) * size < len
}

/// Whether `p` tiles `rows` rows of `cols` in row blocks of whole rows: one column block, one depth
/// block, the normal form and nothing resident (a layer norm's, a vector operator's and a data
/// movement's partitions).
fn whole_rows(p: &Grid, rows: u32, cols: u32) -> bool {
    tiles_exactly(p.row_blocks, p.block_rows, rows)
        && p.col_blocks == 1
        && p.block_cols == cols
        && p.depth_blocks == 1
        && !p.transposed
        && !p.resident
}

/// Whether `p` tiles a layer norm's `rows x cols` in row blocks, each split into `depth_blocks`
/// equal column blocks (the row's reduction split over tiles; one block is whole rows).
fn layer_norm_blocks(p: &Grid, rows: u32, cols: u32) -> bool {
    let whole = Grid {
        depth_blocks: 1,
        block_depth: p.block_cols,
        ..*p
    };
    whole_rows(&whole, rows, cols)
        && p.depth_blocks > 0
        && u64::from(p.depth_blocks) * u64::from(p.block_depth) == u64::from(cols)
}

impl Mid {
    /// Checks the mid against its graph and target; returns every problem found: every device
    /// operation of the graph covered by exactly one operator and no host operation by any, every
    /// finalist with a partition per operator that tiles its output and reduction on at most the
    /// target's tiles, every estimate fitting a tile; the layers, if any, within the operators, and
    /// every finalist giving each copy the partition of the operator a layer before it.
    pub fn verify(&self, graph: &Graph, target: &Target) -> Vec<String> {
        let mid = self;
        let mut v = Verifier::default();
        let mut covered = vec![0u32; graph.ops.len()];
        for o in &mid.operators {
            if let Operator::Assemble(a) = o {
                let op = (a.covers.first()).and_then(|c| graph.ops.get(c.index()));
                let same = op.is_some_and(|op| {
                    let out = graph.value(op.out);
                    matches!(&op.kind, crate::ir::OpKind::Assemble { pieces } if *pieces == a.pieces)
                        && (op.out, out.rows, out.cols) == (a.out, a.rows, a.cols)
                        && a.covers.len() == 1
                });
                v.check(same, || {
                    format!(
                        "{}: not the pieces, output and shape of the assemble it covers",
                        a.id
                    )
                });
            }
            if let Operator::MatMul(m) = o {
                let values = |p: &crate::ir::MatMulPart| {
                    Some((
                        graph.values.get(p.b.index())?,
                        graph.values.get(p.out.index())?,
                    ))
                };
                let shaped = m.parts.iter().all(|p| {
                    values(p).is_some_and(|(b, out)| {
                        (b.rows, b.cols, out.rows, out.cols) == (m.k, p.cols, m.m, p.cols)
                    })
                });
                v.check(m.parts_are_consistent() && shaped, || {
                    format!(
                        "{}: parts not side by side, of one bias, or not their values' shapes",
                        m.id
                    )
                });
            }
            for c in o.covers() {
                match covered.get_mut(c.index()) {
                    Some(n) => *n += 1,
                    None => v.error(format!("{}: covers {c}, which the graph lacks", o.id())),
                }
            }
        }
        for ((i, n), op) in covered.iter().enumerate().zip(&graph.ops) {
            let expected = u32::from(!op.kind.on_host());
            v.check(*n == expected, || {
                format!("op{i}: covered by {n} operators, expected {expected}")
            });
        }
        v.check(!mid.finalists.is_empty(), || "no finalist".to_string());
        if let Some(l) = mid.layers {
            v.check(
                l.period > 0 && l.count > 1 && l.end() <= mid.operators.len(),
                || format!("layers {l:?} of {} operators", mid.operators.len()),
            );
            for (f, plan) in mid.finalists.iter().enumerate() {
                for i in (0..plan.partitions.len()).filter(|&i| l.copies(i).is_some()) {
                    let j = i - l.period as usize;
                    v.check(plan.partitions[i] == plan.partitions[j], || {
                        format!("finalist {f} op{i}: not planned as op{j}, a layer before it")
                    });
                }
            }
        }
        for (f, plan) in mid.finalists.iter().enumerate() {
            v.check(plan.partitions.len() == mid.operators.len(), || {
                format!("finalist {f}: partition count")
            });
            for (o, p) in mid.operators.iter().zip(&plan.partitions) {
                let id = o.id();
                v.check(p.tiles() <= target.tiles, || {
                    format!("finalist {f} {id}: {} tiles", p.tiles())
                });
                match (o, p) {
                    (Operator::MatMul(o), Partition::Grid(p)) => {
                        v.check(tiles_exactly(p.row_blocks, p.block_rows, o.m), || {
                            format!(
                                "finalist {f} {id}: row blocks {p:?} do not tile {} rows",
                                o.m
                            )
                        });
                        v.check(tiles_exactly(p.col_blocks, p.block_cols, o.n), || {
                            format!(
                                "finalist {f} {id}: column blocks {p:?} do not tile {} columns",
                                o.n
                            )
                        });
                        v.check(o.tiles_parts(p.block_cols), || {
                            format!("finalist {f} {id}: column blocks {p:?} straddle its parts")
                        });
                        let (stationary, what) = if p.transposed {
                            (p.block_rows, "block height")
                        } else {
                            (p.block_cols, "block width")
                        };
                        v.check(stationary % target.amp_block_width == 0, || {
                            format!(
                                "finalist {f} {id}: {what} {stationary} is not a multiple of {}",
                                target.amp_block_width
                            )
                        });
                        v.check(
                            tiles_exactly(p.depth_blocks, p.block_depth, o.k)
                                && (p.depth_blocks == 1
                                    || p.block_depth % target.amp_block_depth == 0),
                            || format!("finalist {f} {id}: depth blocks {p:?} do not tile {}", o.k),
                        );
                    }
                    (Operator::LayerNorm(o), Partition::Grid(p)) => {
                        v.check(layer_norm_blocks(p, o.rows, o.cols), || {
                            format!(
                                "finalist {f} {id}: {p:?} is not row blocks of {} equal column blocks",
                                o.cols
                            )
                        });
                    }
                    (Operator::Vector(o), Partition::Grid(p)) => {
                        v.check(whole_rows(p, o.rows, o.out_cols()), || {
                            format!("finalist {f} {id}: {p:?} is not whole rows of {}", o.cols)
                        });
                    }
                    (Operator::Assemble(o), Partition::Grid(p)) => {
                        v.check(whole_rows(p, o.rows, o.cols), || {
                            format!("finalist {f} {id}: {p:?} is not whole rows of {}", o.cols)
                        });
                    }
                    (Operator::Attention(a), Partition::Attention(p)) => {
                        let s = a.shape;
                        v.check(
                            p.groups == a.groups()
                                && tiles_exactly(p.query_blocks, p.block_queries, s.queries)
                                && tiles_exactly(p.key_blocks, p.block_keys, s.seen_keys()),
                            || format!("finalist {f} {id}: {p:?} does not tile {s:?}"),
                        );
                        v.check(p.tiles_per_group == p.group_tiles(&s), || {
                            format!("finalist {f} {id}: {p:?} miscounts its tiles")
                        });
                        v.check(
                            p.sub_block > 0
                                && p.sub_block <= p.block_keys
                                && (p.sub_block == p.block_keys
                                    || p.sub_block % target.amp_block_depth == 0),
                            || format!("finalist {f} {id}: key sub-block {}", p.sub_block),
                        );
                    }
                    _ => v.error(format!("finalist {f} {id}: partition of another kind")),
                }
            }
            let resident = Resident::of(&plan.operators);
            for e in &plan.operators {
                v.check(e.fits_beside(&resident, target), || {
                    format!("finalist {f}: estimated memory does not fit")
                });
            }
        }
        v.finish()
    }
}
