//! `select_finalist`: graph + mid + target -> `selected`.
//!
//! For every finalist plan and every tile mapping (grid cell to tile, row- or column-major), builds the
//! whole program: buffers on tiles with their lifetimes, supersteps (per operator an exchange phase then
//! a compute set, and a second pair when a matmul's depth or an attention's keys are split over tiles),
//! the exchange phases as transfer lists and the host streams; then costs it with the more exact model
//! (per-tile exchange load of the actual transfers, compute per tile) and keeps the cheapest.
//!
//! Storage layout: every buffer holds a rectangle of one value, row-major or transposed, every stored row
//! at the buffer's alignment (8 bytes; 16 for weight panels, probabilities and partials). Weights and
//! inputs live in *home* pieces spread over the grid (weights persist across runs); each operator
//! gathers its operands (a matmul's A and B panels, an attention's queries, keys and values) with
//! multicast transfers from wherever those rectangles live.
//!
//! Invariants (checked by [`verify`]): every transfer's rectangle lies inside its source buffer and every
//! destination buffer; every panel is covered exactly once by its incoming transfers; every buffer read
//! in a step was written in an earlier step (or by the host) and is live across its uses; AMP partials and
//! weight panels are marked interleaved.

use crate::exchange::Overheads;
use crate::ids::{BufferId, ExchangeId, OpId, StepId, TileId, ValueId};
use crate::ir::{
    Attention, AttentionPartition, Buffer, BufferClass, ComputeSet, DType, Destination,
    ExchangePhase, Graph, Grid, HostTransfer, Mapping, MatMul, Mid, Operand, Operator, Partition,
    Rect, Selected, SelectedEstimate, Step, Transfer, ValueRole, Vertex,
};
use crate::isa::{Accumulate, Amp, Combine, Epilogue, Mask, Softmax, VertexKind};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingChoice {
    /// Try every mapping, keep the one with the least estimated cycles.
    Auto,
    RowMajor,
    ColumnMajor,
}

impl MappingChoice {
    pub const ALL: [MappingChoice; 3] = [
        MappingChoice::Auto,
        MappingChoice::RowMajor,
        MappingChoice::ColumnMajor,
    ];

    /// The name in flags and stage records: `row-major`.
    pub fn name(self) -> &'static str {
        match self {
            MappingChoice::Auto => "auto",
            MappingChoice::RowMajor => "row-major",
            MappingChoice::ColumnMajor => "column-major",
        }
    }
}

impl std::str::FromStr for MappingChoice {
    type Err = String;

    fn from_str(name: &str) -> Result<MappingChoice, String> {
        MappingChoice::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                let names = MappingChoice::ALL.map(MappingChoice::name);
                format!("unknown mapping {name:?}; mappings: {}", names.join(", "))
            })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelectFinalistConfig {
    pub mapping: MappingChoice,
}

#[derive(Debug, thiserror::Error)]
pub enum SelectFinalistError {
    #[error("mid has no finalist")]
    NoFinalist,
    #[error("the mid does not fit its graph and target:\n{0}")]
    InvalidMid(String),
    #[error("select_finalist produced an invalid selection:\n{0}")]
    Invalid(String),
}

pub fn select_finalist(
    graph: &Graph,
    mid: &Mid,
    target: &Target,
    cfg: &SelectFinalistConfig,
) -> Result<Selected, SelectFinalistError> {
    let mappings: &[Mapping] = match cfg.mapping {
        MappingChoice::Auto => &[Mapping::RowMajor, Mapping::ColumnMajor],
        MappingChoice::RowMajor => &[Mapping::RowMajor],
        MappingChoice::ColumnMajor => &[Mapping::ColumnMajor],
    };
    let errors = crate::stages::lower_mid::verify(mid, graph, target);
    if !errors.is_empty() {
        return Err(SelectFinalistError::InvalidMid(errors.join("\n")));
    }
    let mut best: Option<Selected> = None;
    for (f, plan) in mid.finalists.iter().enumerate() {
        for &mapping in mappings {
            let s = build(graph, mid, &plan.partitions, f as u32, mapping, target);
            tracing::info!(
                finalist = f,
                mapping = ?mapping,
                analytical_cycles = plan.estimate.cycles,
                modelled_cycles = s.estimate.cycles,
                modelled_exchange_cycles = s.estimate.exchange_cycles,
                "modelled operator-plan finalist"
            );
            if best
                .as_ref()
                .is_none_or(|b| s.estimate.cycles < b.estimate.cycles)
            {
                best = Some(s);
            }
        }
    }
    let selected = best.ok_or(SelectFinalistError::NoFinalist)?;
    tracing::info!(
        selected = selected.finalist,
        mapping = ?selected.mapping,
        estimated_cycles = selected.estimate.cycles,
        estimated_exchange_cycles = selected.estimate.exchange_cycles,
        "selected operator-plan finalist"
    );
    let errors = verify(&selected, target);
    if !errors.is_empty() {
        return Err(SelectFinalistError::Invalid(errors.join("\n")));
    }
    Ok(selected)
}

/// Home pieces of a value: (row block, column block, depth block, rectangle) on the operator's grid.
type HomePieces = Vec<(u32, u32, u32, Rect)>;

/// Transfers of a phase being built, grouped by (source buffer, rectangle).
type Groups = BTreeMap<(BufferId, Rect), Vec<Destination>>;

/// The program under construction.
struct Builder<'a> {
    graph: &'a Graph,
    target: &'a Target,
    mapping: Mapping,
    buffers: Vec<Buffer>,
    /// Buffers holding each value's data that transfers may read, by value.
    holders: BTreeMap<ValueId, Vec<BufferId>>,
    initialize: Vec<HostTransfer>,
    run_inputs: Vec<HostTransfer>,
    run_outputs: Vec<HostTransfer>,
    steps: Vec<Step>,
    exchanges: Vec<ExchangePhase>,
    compute_sets: Vec<ComputeSet>,
    last_step: u32,
}

impl Builder<'_> {
    #[allow(clippy::too_many_arguments)]
    fn buffer(
        &mut self,
        tile: TileId,
        value: ValueId,
        class: BufferClass,
        rect: Rect,
        dtype: DType,
        transposed: bool,
        [first, last]: [u32; 2],
    ) -> BufferId {
        let id = BufferId::from_index(self.buffers.len());
        let mut buffer = Buffer {
            id,
            tile,
            value,
            class,
            rect,
            dtype,
            transposed,
            stride: 0,
            first_step: StepId(first),
            last_step: StepId(last),
        };
        // Every row starts at the buffer's alignment, so row-by-row loads stay aligned.
        buffer.stride = buffer
            .storage_cols()
            .next_multiple_of(buffer.alignment() / dtype.bytes());
        self.buffers.push(buffer);
        id
    }

    /// A home piece of an input or weight, written by the host.
    fn home(&mut self, tile: TileId, value: ValueId, rect: Rect, transposed: bool) -> BufferId {
        let v = self.graph.value(value);
        let (class, last) = match v.role {
            ValueRole::Weight => (BufferClass::WeightHome, self.last_step),
            _ => (BufferClass::InputHome, 0),
        };
        let id = self.buffer(tile, value, class, rect, v.dtype, transposed, [0, last]);
        self.holders.entry(value).or_default().push(id);
        let t = HostTransfer {
            value,
            rect,
            tile,
            buffer: id,
        };
        if v.role == ValueRole::Weight {
            self.initialize.push(t)
        } else {
            self.run_inputs.push(t)
        }
        id
    }

    /// Transfers that fill `dest` (on `tile`) with `rect` of `value`, from every holder intersecting it.
    fn gather(&mut self, value: ValueId, rect: Rect, dest: BufferId, step: u32, out: &mut Groups) {
        let tile = self.buffers[dest.index()].tile;
        for &h in self.holders.get(&value).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(piece) = self.buffers[h.index()].rect.intersect(&rect) {
                out.entry((h, piece))
                    .or_default()
                    .push(Destination { tile, buffer: dest });
                let b = &mut self.buffers[h.index()];
                b.last_step = b.last_step.max(StepId(step));
            }
        }
    }

    /// Appends an exchange phase made of `groups` as the next step.
    fn exchange(&mut self, groups: Groups) {
        let id = ExchangeId::from_index(self.exchanges.len());
        let transfers: Vec<Transfer> = groups
            .into_iter()
            .map(|((h, rect), mut destinations)| {
                destinations.sort_by_key(|d| (d.tile, d.buffer));
                let src = &self.buffers[h.index()];
                Transfer {
                    source: src.tile,
                    source_buffer: h,
                    value: src.value,
                    rect,
                    destinations,
                    bytes: rect.rows() * rect.cols() * src.dtype.bytes(),
                }
            })
            .collect();
        let mut phase = ExchangePhase {
            id,
            step: StepId(self.steps.len() as u32),
            transfers,
            lower_bound: 0,
        };
        phase.lower_bound = phase
            .pattern(self.target)
            .lower_bound(Overheads::of(self.target));
        self.exchanges.push(phase);
        self.steps.push(Step::Exchange(id));
    }

    /// Appends a compute set as the next step.
    fn compute(&mut self, operator: OpId, name: &str, vertices: Vec<Vertex>) {
        self.steps
            .push(Step::Compute(self.compute_sets.len() as u32));
        self.compute_sets.push(ComputeSet {
            step: StepId(self.steps.len() as u32 - 1),
            operator,
            name: name.to_string(),
            vertices,
        });
    }

    /// Marks an operator's result buffers: they hold its value, and the host reads them when it is
    /// the graph's output.
    fn outputs(&mut self, value: ValueId, outputs: Vec<BufferId>) {
        if self.graph.value(value).role == ValueRole::Output {
            for &o in &outputs {
                let buf = &mut self.buffers[o.index()];
                buf.last_step = StepId(self.last_step);
                self.run_outputs.push(HostTransfer {
                    value,
                    rect: buf.rect,
                    tile: buf.tile,
                    buffer: o,
                });
            }
        }
        self.holders.insert(value, outputs);
    }

    /// Home pieces of a matmul's weights, bias and (first-read) input, spread over its grid.
    fn matmul_homes(&mut self, op: &MatMul, p: &Grid) {
        let db = p.depth_blocks;
        let mut homes: Vec<(ValueId, HomePieces)> = Vec::new();
        let bv = self.graph.value(op.b);
        if bv.role == ValueRole::Weight {
            let mut pieces = Vec::new();
            for cb in 0..p.col_blocks {
                let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                for (i, (r0, r1)) in chunks(op.k, p.row_blocks * db, 1).into_iter().enumerate() {
                    let i = i as u32;
                    pieces.push((i / db, cb, i % db, Rect::new(r0, r1, cols.0, cols.1)));
                }
            }
            homes.push((op.b, pieces));
        }
        if let Some(bias) = op.bias {
            let pieces = (0..p.col_blocks)
                .map(|cb| {
                    let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                    (0, cb, 0, Rect::new(0, 1, cols.0, cols.1))
                })
                .collect();
            homes.push((bias, pieces));
        }
        let av = self.graph.value(op.a);
        if av.role == ValueRole::Input && !self.holders.contains_key(&op.a) {
            let mut pieces = Vec::new();
            for rb in 0..p.row_blocks {
                let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                let width = self.target.amp_block_width;
                for (i, (c0, c1)) in chunks(op.k, p.col_blocks * db, width)
                    .into_iter()
                    .enumerate()
                {
                    let i = i as u32;
                    pieces.push((rb, i / db, i % db, Rect::new(rows.0, rows.1, c0, c1)));
                }
            }
            homes.push((op.a, pieces));
        }
        for (value, pieces) in homes {
            for (rb, cb, kb, rect) in pieces {
                let tile = self.mapping.tile(p, rb, cb, kb);
                self.home(tile, value, rect, false);
            }
        }
    }

    /// A matmul: an exchange gathering every tile's A and B panels (and bias), then the AMP and the
    /// epilogue. With a split depth, each tile multiplies its depth block; a second exchange sends
    /// each tile of an output block the others' partials for its share of the rows, and its epilogue
    /// sums them.
    fn matmul(&mut self, op: &MatMul, p: &Grid) {
        let target = self.target;
        let ex_step = self.steps.len() as u32;
        let cs_step = ex_step + 1;
        let split = p.depth_blocks > 1;
        let (reduce_ex, reduce_cs) = if split {
            (cs_step + 1, cs_step + 2)
        } else {
            (cs_step, cs_step)
        };
        let epilogue = op.has_epilogue(p.depth_blocks);
        let (ops_per, trans) = op.epilogue_ops(p.depth_blocks);
        let mut groups = Groups::new();
        let mut reductions = Groups::new();
        let mut vertices = Vec::new();
        let mut reduce_vertices = Vec::new();
        let mut outputs = Vec::new();
        for rb in 0..p.row_blocks {
            for cb in 0..p.col_blocks {
                let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                let (nr, nc) = (rows.1 - rows.0, cols.1 - cols.0);
                let out_rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                // Per depth block: its tile, partials and bias.
                let mut blocks = Vec::new();
                for kb in 0..p.depth_blocks {
                    let depth = (kb * p.block_depth, ((kb + 1) * p.block_depth).min(op.k));
                    if depth.0 >= depth.1 {
                        continue;
                    }
                    let tile = self.mapping.tile(p, rb, cb, kb);
                    let live = [ex_step, cs_step];
                    let a_rect = Rect::new(rows.0, rows.1, depth.0, depth.1);
                    let a = self.buffer(
                        tile,
                        op.a,
                        BufferClass::APanel,
                        a_rect,
                        DType::F16,
                        false,
                        live,
                    );
                    self.gather(op.a, a_rect, a, ex_step, &mut groups);
                    let b_rect = Rect::new(depth.0, depth.1, cols.0, cols.1);
                    let bp = self.buffer(
                        tile,
                        op.b,
                        BufferClass::BPanel,
                        b_rect,
                        DType::F16,
                        false,
                        live,
                    );
                    self.gather(op.b, b_rect, bp, ex_step, &mut groups);
                    let bias = op.bias.map(|bias| {
                        let rect = Rect::new(0, 1, cols.0, cols.1);
                        let id = self.buffer(
                            tile,
                            bias,
                            BufferClass::BiasPanel,
                            rect,
                            DType::F16,
                            false,
                            [ex_step, reduce_cs],
                        );
                        self.gather(bias, rect, id, ex_step, &mut groups);
                        id
                    });
                    let partials = self.buffer(
                        tile,
                        op.out,
                        BufferClass::Partials,
                        out_rect,
                        op.partials,
                        false,
                        [cs_step, reduce_cs],
                    );
                    let depth = depth.1 - depth.0;
                    vertices.push(Vertex {
                        tile,
                        estimated_cycles: target.amp_cycles(nr, depth, nc, op.partials),
                        kind: VertexKind::Amp(Amp {
                            a: Operand::whole(a),
                            b: Operand::whole(bp),
                            partials: Operand::whole(partials),
                            rows: nr,
                            depth,
                            cols: nc,
                        }),
                    });
                    blocks.push((tile, partials, bias));
                }
                if !epilogue {
                    outputs.push(blocks[0].1);
                    continue;
                }
                // Each depth block's tile finishes a share of the rows.
                let shares = chunks(nr, blocks.len() as u32, 1);
                for (&(tile, own, bias), &(r0, r1)) in blocks.iter().zip(&shares) {
                    let share = Rect::new(rows.0 + r0, rows.0 + r1, cols.0, cols.1);
                    let mut parts = vec![Operand {
                        buffer: own,
                        row: r0,
                        col: 0,
                    }];
                    for &(other, partials, _) in &blocks {
                        if other == tile {
                            continue;
                        }
                        let copy = self.buffer(
                            tile,
                            op.out,
                            BufferClass::PartialsShare,
                            share,
                            op.partials,
                            false,
                            [reduce_ex, reduce_cs],
                        );
                        reductions
                            .entry((partials, share))
                            .or_default()
                            .push(Destination { tile, buffer: copy });
                        parts.push(Operand::whole(copy));
                    }
                    let out = self.buffer(
                        tile,
                        op.out,
                        BufferClass::Output,
                        share,
                        DType::F16,
                        false,
                        [reduce_cs, reduce_cs],
                    );
                    let vertex = Vertex {
                        tile,
                        estimated_cycles: target.vector_cycles(
                            u64::from((r1 - r0) * nc),
                            DType::F16,
                            ops_per,
                            trans,
                        ),
                        kind: VertexKind::Epilogue(Epilogue {
                            partials: parts,
                            bias: bias.map(Operand::whole),
                            out: Operand::whole(out),
                            gelu: op.gelu,
                            rows: r1 - r0,
                            cols: nc,
                        }),
                    };
                    if split {
                        reduce_vertices.push(vertex);
                    } else {
                        vertices.push(vertex);
                    }
                    outputs.push(out);
                }
            }
        }
        self.exchange(groups);
        self.compute(op.id, &op.name, vertices);
        if split {
            self.exchange(reductions);
            self.compute(op.id, &format!("{}.reduce", op.name), reduce_vertices);
        }
        self.outputs(op.out, outputs);
    }

    /// A flash attention. Per batch-and-head group, tile (query block, key block):
    /// - exchange: gathers its queries (stored transposed, the AMP's weights), its keys and its values
    ///   (transposed) from home pieces spread over the group;
    /// - compute: per key sub-block, scoresᵀ = keys · queriesᵀ on the AMP, the online softmax (running
    ///   max, rescale, sum) writing probabilitiesᵀ, valuesᵀ · probabilitiesᵀ on the AMP, and the
    ///   rescaled accumulation into its flash state (accumulatorᵀ, max, sum);
    /// - with several key blocks, the query block's queries are shared out among its tiles, an exchange
    ///   sends each tile the other tiles' states for its share, and each merges its share into the
    ///   output (stored transposed).
    ///
    /// Under a causal mask, keys past a query block's last query are neither sent nor scored, and a tile
    /// whose keys are all masked does no work.
    fn attention(&mut self, a: &Attention, p: &AttentionPartition) {
        let (target, s) = (self.target, a.shape);
        let d = s.head_dim;
        let ex_step = self.steps.len() as u32;
        let cs_step = ex_step + 1;
        let merged = p.key_blocks > 1;
        let (merge_ex, merge_cs) = if merged {
            (cs_step + 1, cs_step + 2)
        } else {
            (cs_step, cs_step)
        };
        let query_range = |qb: u32| {
            (
                qb * p.block_queries,
                ((qb + 1) * p.block_queries).min(s.queries),
            )
        };
        // Keys no query sees are neither stored nor sent.
        let seen = s.seen_keys();
        let key_range = |kb: u32| (kb * p.block_keys, ((kb + 1) * p.block_keys).min(seen));
        let cells = self.mapping.attention_cells(p, &s);
        let tile_of =
            |g: u32, q: u32, k: u32| TileId(g * p.tiles_per_group + cells[q as usize][k as usize]);
        // Home pieces: the query block on its first tile; each key block's keys and values in chunks
        // over the tiles of its column.
        for g in 0..p.groups {
            let (batch, head) = (g / s.heads, g % s.heads);
            let cols = (head * d, (head + 1) * d);
            for qb in 0..p.query_blocks {
                let (q0, q1) = query_range(qb);
                let rect = Rect::new(
                    batch * s.queries + q0,
                    batch * s.queries + q1,
                    cols.0,
                    cols.1,
                );
                self.home(tile_of(g, qb, 0), a.q, rect, true);
            }
            for kb in 0..p.key_blocks {
                let (k0, k1) = key_range(kb);
                let column: Vec<u32> = (0..p.query_blocks)
                    .filter(|&q| (kb as usize) < cells[q as usize].len())
                    .collect();
                if k0 >= k1 || column.is_empty() {
                    continue;
                }
                for (&q, (r0, r1)) in column.iter().zip(chunks(k1 - k0, column.len() as u32, 1)) {
                    let tile = tile_of(g, q, kb);
                    let rows = (batch * s.keys + k0 + r0, batch * s.keys + k0 + r1);
                    let rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                    self.home(tile, a.k, rect, false);
                    self.home(tile, a.v, rect, true);
                }
            }
        }
        let mut groups = Groups::new();
        let mut merges = Groups::new();
        let mut vertices = Vec::new();
        let mut merge_vertices = Vec::new();
        let mut outputs = Vec::new();
        let scale_bits = a.scale().to_bits();
        for g in 0..p.groups {
            let (batch, head) = (g / s.heads, g % s.heads);
            let cols = (head * d, (head + 1) * d);
            for qb in 0..p.query_blocks {
                let (q0, q1) = query_range(qb);
                let nq = q1 - q0;
                let q_rect = Rect::new(
                    batch * s.queries + q0,
                    batch * s.queries + q1,
                    cols.0,
                    cols.1,
                );
                let mut states = Vec::new();
                for kb in 0..p.visible_blocks(&s, qb) {
                    let (k0, k1) = key_range(kb);
                    // Keys any query of the block sees.
                    let k1 = k1.min(s.visible_keys(q1 - 1));
                    if k0 >= k1 {
                        continue;
                    }
                    let nk = k1 - k0;
                    let tile = tile_of(g, qb, kb);
                    let live = [ex_step, cs_step];
                    let queries = self.buffer(
                        tile,
                        a.q,
                        BufferClass::BPanel,
                        q_rect,
                        DType::F16,
                        true,
                        live,
                    );
                    self.gather(a.q, q_rect, queries, ex_step, &mut groups);
                    let kv_rect =
                        Rect::new(batch * s.keys + k0, batch * s.keys + k1, cols.0, cols.1);
                    let keys = self.buffer(
                        tile,
                        a.k,
                        BufferClass::APanel,
                        kv_rect,
                        DType::F16,
                        false,
                        live,
                    );
                    self.gather(a.k, kv_rect, keys, ex_step, &mut groups);
                    let values = self.buffer(
                        tile,
                        a.v,
                        BufferClass::APanel,
                        kv_rect,
                        DType::F16,
                        true,
                        live,
                    );
                    self.gather(a.v, kv_rect, values, ex_step, &mut groups);
                    let here = [cs_step, cs_step];
                    let sub = p.sub_block.min(nk);
                    let scratch = |b: &mut Self, class, rows, dtype| {
                        b.buffer(
                            tile,
                            a.out,
                            class,
                            Rect::new(0, rows, 0, nq),
                            dtype,
                            false,
                            here,
                        )
                    };
                    let scores = scratch(self, BufferClass::Partials, sub, a.partials);
                    let probabilities = scratch(self, BufferClass::Probabilities, sub, DType::F16);
                    let weighted = scratch(self, BufferClass::Partials, d, a.partials);
                    let rescale = scratch(self, BufferClass::Rescale, 1, DType::F32);
                    let state_live = [cs_step, merge_cs];
                    let state = self.buffer(
                        tile,
                        a.out,
                        BufferClass::FlashState,
                        Rect::new(0, d + 2, 0, nq),
                        DType::F32,
                        false,
                        state_live,
                    );
                    for (i, j0) in (0..nk).step_by(sub as usize).enumerate() {
                        let nj = sub.min(nk - j0);
                        let first = i == 0;
                        vertices.push(Vertex {
                            tile,
                            estimated_cycles: target.amp_cycles(nj, d, nq, a.partials),
                            kind: VertexKind::Amp(Amp {
                                a: Operand {
                                    buffer: keys,
                                    row: j0,
                                    col: 0,
                                },
                                b: Operand::whole(queries),
                                partials: Operand::whole(scores),
                                rows: nj,
                                depth: d,
                                cols: nq,
                            }),
                        });
                        vertices.push(Vertex {
                            tile,
                            estimated_cycles: target.softmax_cycles(nj, nq, a.partials, s.causal),
                            kind: VertexKind::Softmax(Softmax {
                                scores: Operand::whole(scores),
                                probabilities: Operand::whole(probabilities),
                                state: Operand::whole(state),
                                rescale: Operand::whole(rescale),
                                keys: nj,
                                queries: nq,
                                head_dim: d,
                                mask: s.causal.then_some(Mask {
                                    first_key: k0 + j0,
                                    first_query: q0,
                                }),
                                first,
                                scale_bits,
                            }),
                        });
                        vertices.push(Vertex {
                            tile,
                            estimated_cycles: target.amp_cycles(d, nj, nq, a.partials),
                            kind: VertexKind::Amp(Amp {
                                a: Operand {
                                    buffer: values,
                                    row: 0,
                                    col: j0,
                                },
                                b: Operand::whole(probabilities),
                                partials: Operand::whole(weighted),
                                rows: d,
                                depth: nj,
                                cols: nq,
                            }),
                        });
                        vertices.push(Vertex {
                            tile,
                            estimated_cycles: target.accumulate_cycles(u64::from(d * nq), first),
                            kind: VertexKind::Accumulate(Accumulate {
                                partials: Operand::whole(weighted),
                                state: Operand::whole(state),
                                rescale: Operand::whole(rescale),
                                rows: d,
                                cols: nq,
                                first,
                            }),
                        });
                    }
                    states.push((tile, state));
                }
                // The block's queries are shared out among its tiles; each merges its share of
                // every tile's state (its own in place, the others' sent to it).
                // Shares of an even number of queries keep every f32 state operand 8-byte aligned.
                let shares = chunks(nq, states.len() as u32, 2);
                for (&(tile, own), &(c0, c1)) in states.iter().zip(&shares) {
                    let share = Rect::new(0, d + 2, c0, c1);
                    let mut parts = vec![Operand {
                        buffer: own,
                        row: 0,
                        col: c0,
                    }];
                    for &(other, state) in &states {
                        if other == tile {
                            continue;
                        }
                        let copy = self.buffer(
                            tile,
                            a.out,
                            BufferClass::FlashState,
                            share,
                            DType::F32,
                            false,
                            [merge_ex, merge_cs],
                        );
                        merges
                            .entry((state, share))
                            .or_default()
                            .push(Destination { tile, buffer: copy });
                        parts.push(Operand::whole(copy));
                    }
                    let rows = batch * s.queries + q0;
                    let out = self.buffer(
                        tile,
                        a.out,
                        BufferClass::Output,
                        Rect::new(rows + c0, rows + c1, cols.0, cols.1),
                        DType::F16,
                        true,
                        [merge_cs, merge_cs],
                    );
                    let combine = Vertex {
                        tile,
                        estimated_cycles: target.combine_cycles(
                            parts.len() as u32,
                            u64::from(d * (c1 - c0)),
                            c1 - c0,
                        ),
                        kind: VertexKind::Combine(Combine {
                            states: parts,
                            out: Operand::whole(out),
                            rows: d,
                            cols: c1 - c0,
                            scale_bits,
                        }),
                    };
                    if merged {
                        merge_vertices.push(combine);
                    } else {
                        vertices.push(combine);
                    }
                    outputs.push(out);
                }
            }
        }
        self.exchange(groups);
        self.compute(a.id, &a.name, vertices);
        if merged {
            self.exchange(merges);
            self.compute(a.id, &format!("{}.merge", a.name), merge_vertices);
        }
        self.outputs(a.out, outputs);
    }
}

/// At most `parts` chunks of `0..len`, each a multiple of `multiple` long but the last.
fn chunks(len: u32, parts: u32, multiple: u32) -> Vec<(u32, u32)> {
    let width = len.div_ceil(parts).next_multiple_of(multiple).max(multiple);
    (0..parts)
        .map(|i| (i * width, ((i + 1) * width).min(len)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// Supersteps an operator takes under a partition.
fn steps_of(p: &Partition) -> u32 {
    match p {
        Partition::Attention(a) if a.key_blocks > 1 => 4,
        Partition::Grid(g) if g.depth_blocks > 1 => 4,
        _ => 2,
    }
}

fn build(
    graph: &Graph,
    mid: &Mid,
    partitions: &[Partition],
    finalist: u32,
    mapping: Mapping,
    target: &Target,
) -> Selected {
    let mut b = Builder {
        graph,
        target,
        mapping,
        buffers: Vec::new(),
        holders: BTreeMap::new(),
        initialize: Vec::new(),
        run_inputs: Vec::new(),
        run_outputs: Vec::new(),
        steps: Vec::new(),
        exchanges: Vec::new(),
        compute_sets: Vec::new(),
        last_step: partitions.iter().map(steps_of).sum::<u32>() - 1,
    };
    // Home pieces of weights and inputs, on the grid of the matmul that first reads them.
    for (op, p) in mid.operators.iter().zip(partitions) {
        if let (Operator::MatMul(op), Partition::Grid(p)) = (op, p) {
            b.matmul_homes(op, p);
        }
    }
    for (op, p) in mid.operators.iter().zip(partitions) {
        match (op, p) {
            (Operator::MatMul(op), Partition::Grid(p)) => b.matmul(op, p),
            (Operator::Attention(a), Partition::Attention(p)) => b.attention(a, p),
            // lower_mid's verifier pairs every operator with a partition of its kind.
            _ => unreachable!("{}: partition of another kind", op.id()),
        }
    }
    let estimate = estimate(&b.steps, &b.exchanges, &b.compute_sets, target);
    Selected {
        workload: graph.workload.clone(),
        graph: graph.clone(),
        operators: mid.operators.clone(),
        finalist,
        mapping,
        partitions: partitions.to_vec(),
        buffers: b.buffers,
        steps: b.steps,
        exchanges: b.exchanges,
        compute_sets: b.compute_sets,
        initialize: b.initialize,
        run_inputs: b.run_inputs,
        run_outputs: b.run_outputs,
        estimate,
    }
}

fn estimate(
    steps: &[Step],
    exchanges: &[ExchangePhase],
    compute_sets: &[ComputeSet],
    target: &Target,
) -> SelectedEstimate {
    let mut per_step = Vec::new();
    let (mut compute, mut exchange) = (0, 0);
    for step in steps {
        let cycles = match step {
            Step::Exchange(id) => {
                let c = u64::from(exchanges[id.index()].lower_bound);
                exchange += c;
                c
            }
            Step::Compute(i) => {
                let mut per_tile: BTreeMap<TileId, u64> = BTreeMap::new();
                for v in &compute_sets[*i as usize].vertices {
                    *per_tile.entry(v.tile).or_default() += v.estimated_cycles;
                }
                let c = per_tile.values().copied().max().unwrap_or(0);
                compute += c;
                c
            }
        };
        per_step.push(cycles);
    }
    let sync = steps.len() as u64 * target.sync_cycles;
    SelectedEstimate {
        cycles: compute + exchange + sync,
        compute_cycles: compute,
        exchange_cycles: exchange,
        sync_cycles: sync,
        steps: per_step,
    }
}

/// Checks a selection; returns every problem found.
pub fn verify(s: &Selected, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    for buf in &s.buffers {
        v.check(buf.tile.0 < target.tiles, || {
            format!(
                "{}: on {} beyond the {} tiles",
                buf.id, buf.tile, target.tiles
            )
        });
        v.check(buf.first_step <= buf.last_step, || {
            format!(
                "{}: lifetime {}..{} is empty",
                buf.id, buf.first_step, buf.last_step
            )
        });
        v.check(!buf.rect.is_empty(), || {
            format!("{}: empty rectangle", buf.id)
        });
        v.check(
            (buf.stride * buf.dtype.bytes()).is_multiple_of(buf.alignment())
                && buf.stride >= buf.storage_cols(),
            || {
                format!(
                    "{}: stride {} elements breaks its {}-byte row alignment",
                    buf.id,
                    buf.stride,
                    buf.alignment()
                )
            },
        );
    }
    // Coverage of every gathered buffer, and liveness of sources and destinations.
    let mut incoming: Vec<Vec<Rect>> = vec![Vec::new(); s.buffers.len()];
    for ex in &s.exchanges {
        for t in &ex.transfers {
            let src = &s.buffers[t.source_buffer.index()];
            v.check(
                src.tile == t.source && src.value == t.value && src.rect.contains(&t.rect),
                || {
                    format!(
                        "{} transfer from {} {}: {} {} not inside {}",
                        ex.id, t.source, src.id, t.value, t.rect, src.rect
                    )
                },
            );
            v.check(
                src.first_step < ex.step || src.first_step == StepId(0),
                || {
                    format!(
                        "{}: source {} is written in {} after it is sent",
                        ex.id, src.id, src.first_step
                    )
                },
            );
            v.check(src.last_step >= ex.step, || {
                format!(
                    "{}: source {} dies at {} before it is sent",
                    ex.id, src.id, src.last_step
                )
            });
            v.check(
                t.bytes == t.rect.rows() * t.rect.cols() * src.dtype.bytes(),
                || format!("{}: transfer bytes", ex.id),
            );
            for d in &t.destinations {
                let dst = &s.buffers[d.buffer.index()];
                v.check(dst.transposed == src.transposed, || {
                    format!(
                        "{} transfer {} -> {}: {} and {} are stored in different orders",
                        ex.id, t.source, d.tile, src.id, dst.id
                    )
                });
                v.check(
                    dst.tile == d.tile && dst.value == t.value && dst.rect.contains(&t.rect),
                    || {
                        format!(
                            "{} transfer {} -> {} {}: {} not inside {}",
                            ex.id, t.source, d.tile, dst.id, t.rect, dst.rect
                        )
                    },
                );
                v.check(dst.first_step == ex.step, || {
                    format!(
                        "{}: destination {} is not born in this phase",
                        ex.id, dst.id
                    )
                });
                incoming[d.buffer.index()].push(t.rect);
            }
        }
    }
    for buf in &s.buffers {
        if !matches!(
            buf.class,
            BufferClass::APanel
                | BufferClass::BPanel
                | BufferClass::BiasPanel
                | BufferClass::PartialsShare
        ) {
            continue;
        }
        let rects = &incoming[buf.id.index()];
        let covered: u64 = rects.iter().map(Rect::elements).sum();
        v.check(covered == buf.rect.elements(), || {
            format!(
                "{} on {}: incoming transfers cover {covered} of {} elements",
                buf.id,
                buf.tile,
                buf.rect.elements()
            )
        });
        for (i, a) in rects.iter().enumerate() {
            for b in &rects[i + 1..] {
                v.check(a.intersect(b).is_none(), || {
                    format!("{} on {}: transfers {a} and {b} overlap", buf.id, buf.tile)
                });
            }
        }
    }
    for cs in &s.compute_sets {
        for vx in &cs.vertices {
            for u in vx.kind.operands() {
                let (o, buf) = (u.operand, &s.buffers[u.operand.buffer.index()]);
                v.check(buf.tile == vx.tile, || {
                    format!(
                        "{}: vertex on {} uses {} on {}",
                        cs.step, vx.tile, buf.id, buf.tile
                    )
                });
                v.check(
                    buf.first_step <= cs.step && buf.last_step >= cs.step,
                    || {
                        format!(
                            "{}: vertex on {} uses {} outside its lifetime {}..{}",
                            cs.step, vx.tile, buf.id, buf.first_step, buf.last_step
                        )
                    },
                );
                // Every operand window lies inside its buffer's storage.
                let (r, c) = (u.rows, u.cols);
                v.check(
                    o.row + r <= buf.storage_rows() && o.col + c <= buf.storage_cols(),
                    || {
                        format!(
                            "{}: {} {} on {} takes {r}x{c} from ({}, {}) of {}, stored {}x{}",
                            cs.step,
                            vx.kind.name(),
                            u.role,
                            vx.tile,
                            o.row,
                            o.col,
                            buf.id,
                            buf.storage_rows(),
                            buf.storage_cols()
                        )
                    },
                );
            }
            if let VertexKind::Amp(amp) = &vx.kind {
                v.check(
                    s.buffers[amp.partials.buffer.index()].needs_interleaved()
                        && s.buffers[amp.b.buffer.index()].needs_interleaved(),
                    || {
                        format!(
                            "{}: AMP on {} has operands outside interleaved memory",
                            cs.step, vx.tile
                        )
                    },
                );
            }
        }
    }
    v.finish()
}
