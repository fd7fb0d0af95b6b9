//! The flash-attention planner: an attention's home pieces, tiles and supersteps.
//!
//! Contract: [`Builder::attention`] gives each batch-and-head group a tile per visible (query block,
//! key block) cell, placed by the mapping's [`crate::ir::Mapping::attention_cells`], and appends:
//! - an exchange gathering on each tile its queries (stored transposed, the AMP's weights), its keys
//!   and its values (transposed) from home pieces spread over the group: the query block on its first
//!   tile, each key block's keys and values in chunks over the tiles of its column;
//! - a compute set stepping through the tile's keys in sub-blocks: scoresᵀ = keys · queriesᵀ on the
//!   AMP, the online softmax (running max, rescale, sum) writing probabilitiesᵀ, valuesᵀ ·
//!   probabilitiesᵀ on the AMP, and the rescaled accumulation into its flash state (accumulatorᵀ,
//!   max, sum); with float partials the first sub-block's AMP writes the accumulator itself (the
//!   state then stored as AMP partials are: interleaved, in memory elements of its own);
//! - with several key blocks, an exchange sending each tile the other tiles' states for its share of
//!   the query block's queries, and a compute set where each merges its share into the output
//!   (stored transposed); with one, the merge ends the first compute set.
//!
//! With a key mask, each tile gathers its batch's mask for its keys and its softmax adds it to the
//! scaled scores. Keys no query sees are neither stored nor sent; under a causal mask, keys past a query block's last
//! query are neither sent nor scored, and a tile whose keys are all masked does no work. Buffers are
//! made per group, query block and key block: queries, keys, values, then the scratch (scores,
//! probabilities, rescale factors), the flash state and the weighted values (none for a tile of one
//! sub-block whose AMP writes the accumulator); then, per share, the copies of the others' states
//! and the output.

use super::builder::{Builder, Groups, Supersteps, Work, chunks};
use crate::ids::{BufferId, TileId};
use crate::ir::{
    Attention, AttentionPartition, AttentionShape, BufferClass, DType, Destination, Operand, Rect,
    Vertex,
};
use crate::isa::{Accumulate, Amp, Combine, Mask, Softmax, VertexKind};
use crate::target::Target;

/// An attention as it is laid out over its tiles: where its blocks lie, each cell's tile, its
/// supersteps and its score scale.
struct Layout<'a> {
    a: &'a Attention,
    p: &'a AttentionPartition,
    shape: AttentionShape,
    /// Keys some query sees: those past them are neither stored nor sent.
    seen: u32,
    /// Each visible cell's place among its group's tiles, `[query block][key block]`.
    cells: Vec<Vec<u32>>,
    steps: Supersteps,
    scale_bits: u32,
}

/// One query block of a batch-and-head group.
struct QueryBlock {
    batch: u32,
    /// The head's columns of the values.
    cols: (u32, u32),
    /// The block's queries within its batch.
    q0: u32,
    q1: u32,
    /// The block's queries in the query value.
    rect: Rect,
}

/// One cell's tile: its first query and key, its extents, its gathered operands, its scratch and
/// its flash state.
struct FlashTile {
    tile: TileId,
    q0: u32,
    nq: u32,
    k0: u32,
    nk: u32,
    /// Keys per sub-block.
    sub: u32,
    queries: BufferId,
    keys: BufferId,
    values: BufferId,
    scores: BufferId,
    probabilities: BufferId,
    /// A sub-block's weighted values before they are accumulated; the flash state itself when the
    /// tile's one sub-block writes the accumulator.
    weighted: BufferId,
    rescale: BufferId,
    state: BufferId,
    /// The additive mask of the tile's keys.
    key_bias: Option<BufferId>,
}

impl Layout<'_> {
    /// The queries of query block `qb` within a batch.
    fn queries(&self, qb: u32) -> (u32, u32) {
        (
            qb * self.p.block_queries,
            ((qb + 1) * self.p.block_queries).min(self.shape.queries),
        )
    }

    /// The keys of key block `kb` within a batch.
    fn keys(&self, kb: u32) -> (u32, u32) {
        (
            kb * self.p.block_keys,
            ((kb + 1) * self.p.block_keys).min(self.seen),
        )
    }

    /// The tile of cell (query block `q`, key block `k`) of group `g`.
    fn tile(&self, g: u32, q: u32, k: u32) -> TileId {
        TileId(g * self.p.tiles_per_group + self.cells[q as usize][k as usize])
    }

    /// The batch of group `g` and its head's columns.
    fn group(&self, g: u32) -> (u32, (u32, u32)) {
        let s = &self.shape;
        let (batch, head) = (g / s.heads, g % s.heads);
        (batch, (head * s.head_dim, (head + 1) * s.head_dim))
    }

    fn query_block(&self, g: u32, qb: u32) -> QueryBlock {
        let s = &self.shape;
        let (batch, cols) = self.group(g);
        let (q0, q1) = self.queries(qb);
        let rect = Rect::new(
            batch * s.queries + q0,
            batch * s.queries + q1,
            cols.0,
            cols.1,
        );
        QueryBlock {
            batch,
            cols,
            q0,
            q1,
            rect,
        }
    }
}

impl Builder<'_> {
    /// A flash attention: per batch-and-head group, tile (query block, key block), the gathering
    /// exchange, the compute set of its key sub-blocks and, with several key blocks, the merge of
    /// the tiles' states (module docs).
    pub(super) fn attention(&mut self, a: &Attention, p: &AttentionPartition) {
        let s = a.shape;
        let l = Layout {
            a,
            p,
            shape: s,
            seen: s.seen_keys(),
            cells: self.mapping.attention_cells(p, &s),
            steps: self.supersteps(p.key_blocks > 1),
            scale_bits: a.scale().to_bits(),
        };
        self.attention_homes(&l);
        let mut work = Work::new(l.steps.split);
        for g in 0..p.groups {
            for qb in 0..p.query_blocks {
                let q = l.query_block(g, qb);
                let mut states = Vec::new();
                for kb in 0..p.visible_blocks(&s, qb) {
                    // Keys any query of the block sees.
                    let (k0, nk) = (kb * p.block_keys, p.cell_keys(&s, qb, kb));
                    if nk == 0 {
                        continue;
                    }
                    let tile = l.tile(g, qb, kb);
                    let flash = self.flash_tile(&l, tile, &q, (k0, k0 + nk), &mut work.groups);
                    flash.sub_blocks(self.target, &l, &mut work.vertices);
                    states.push((tile, flash.state));
                }
                self.combine(&l, &q, &states, &mut work);
            }
        }
        self.finish(a.id, &a.name, "merge", &[a.out], work);
    }

    /// Home pieces of what the host supplies: the query block on its first tile; each key block's
    /// keys and values in chunks over the tiles of its column; a batch's key mask on its first
    /// group's first tile.
    fn attention_homes(&mut self, l: &Layout) {
        let (a, p, s) = (l.a, l.p, &l.shape);
        let [home_q, home_k, home_v] = [a.q, a.k, a.v].map(|v| self.needs_home(v));
        if let Some(m) = a.mask.filter(|&m| self.needs_home(m)) {
            for batch in 0..s.batch {
                let rect = Rect::new(batch, batch + 1, 0, s.keys);
                self.home(l.tile(batch * s.heads, 0, 0), m, rect, false);
            }
        }
        for g in 0..p.groups {
            for qb in 0..p.query_blocks {
                if home_q {
                    self.home(l.tile(g, qb, 0), a.q, l.query_block(g, qb).rect, true);
                }
            }
            let (batch, cols) = l.group(g);
            for kb in 0..p.key_blocks {
                let (k0, k1) = l.keys(kb);
                let column: Vec<u32> = (0..p.query_blocks)
                    .filter(|&q| (kb as usize) < l.cells[q as usize].len())
                    .collect();
                if k0 >= k1 || column.is_empty() {
                    continue;
                }
                for (&q, (r0, r1)) in column.iter().zip(chunks(k1 - k0, column.len() as u32, 1)) {
                    let tile = l.tile(g, q, kb);
                    let rows = (batch * s.keys + k0 + r0, batch * s.keys + k0 + r1);
                    let rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                    if home_k {
                        self.home(tile, a.k, rect, false);
                    }
                    if home_v {
                        self.home(tile, a.v, rect, true);
                    }
                }
            }
        }
    }

    /// Keys `k0..k1` of query block `q` on `tile`: its queries, keys and values gathered, its
    /// scratch and its flash state.
    fn flash_tile(
        &mut self,
        l: &Layout,
        tile: TileId,
        q: &QueryBlock,
        (k0, k1): (u32, u32),
        groups: &mut Groups,
    ) -> FlashTile {
        let (a, s, d) = (l.a, &l.shape, l.shape.head_dim);
        let (ex_step, cs_step) = (l.steps.gather, l.steps.compute);
        let (nq, nk) = (q.q1 - q.q0, k1 - k0);
        let live = [ex_step, cs_step];
        let queries = self.buffer(
            tile,
            a.q,
            BufferClass::BPanel,
            q.rect,
            DType::F16,
            true,
            live,
        );
        self.gather(a.q, q.rect, queries, ex_step, groups);
        let kv_rect = Rect::new(
            q.batch * s.keys + k0,
            q.batch * s.keys + k1,
            q.cols.0,
            q.cols.1,
        );
        let keys = self.buffer(
            tile,
            a.k,
            BufferClass::APanel,
            kv_rect,
            DType::F16,
            false,
            live,
        );
        self.gather(a.k, kv_rect, keys, ex_step, groups);
        let values = self.buffer(
            tile,
            a.v,
            BufferClass::APanel,
            kv_rect,
            DType::F16,
            true,
            live,
        );
        self.gather(a.v, kv_rect, values, ex_step, groups);
        let key_bias = a.mask.map(|m| {
            let rect = Rect::new(q.batch, q.batch + 1, k0, k1);
            let id = self.buffer(
                tile,
                m,
                BufferClass::BiasPanel,
                rect,
                DType::F16,
                false,
                live,
            );
            self.gather(m, rect, id, ex_step, groups);
            id
        });
        let here = [cs_step, cs_step];
        let sub = l.p.sub_block.min(nk);
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
        let rescale = scratch(self, BufferClass::Rescale, 1, DType::F32);
        let state = self.buffer(
            tile,
            a.out,
            BufferClass::FlashState,
            Rect::new(0, d + 2, 0, nq),
            DType::F32,
            false,
            [cs_step, l.steps.reduce],
        );
        // With float partials the AMP writes the first sub-block into the accumulator, which is
        // then stored as its partials are; a tile of one sub-block needs no weighted values.
        if a.partials_are_accumulator() {
            self.interleave(state);
        }
        let weighted = if a.partials_are_accumulator() && nk <= sub {
            state
        } else {
            scratch(self, BufferClass::Partials, d, a.partials)
        };
        FlashTile {
            tile,
            q0: q.q0,
            nq,
            k0,
            nk,
            sub,
            queries,
            keys,
            values,
            scores,
            probabilities,
            weighted,
            rescale,
            state,
            key_bias,
        }
    }

    /// The query block's queries are shared out among its tiles (`states`); each merges its share of
    /// every tile's state (its own in place, the others' sent to it) into its part of the output.
    fn combine(
        &mut self,
        l: &Layout,
        q: &QueryBlock,
        states: &[(TileId, BufferId)],
        work: &mut Work,
    ) {
        let (a, s, d) = (l.a, &l.shape, l.shape.head_dim);
        let (merge_ex, merge_cs) = (l.steps.reduce_exchange, l.steps.reduce);
        let nq = q.q1 - q.q0;
        // Shares of an even number of queries keep every f32 state operand 8-byte aligned.
        let shares = chunks(nq, states.len() as u32, 2);
        for (&(tile, own), &(c0, c1)) in states.iter().zip(&shares) {
            let share = Rect::new(0, d + 2, c0, c1);
            let mut parts = vec![Operand {
                buffer: own,
                row: 0,
                col: c0,
            }];
            for &(other, state) in states {
                if other == tile {
                    continue;
                }
                let copy = self.buffer(
                    tile,
                    a.out,
                    BufferClass::FlashStateShare,
                    share,
                    DType::F32,
                    false,
                    [merge_ex, merge_cs],
                );
                work.reductions
                    .send(state, share, Destination { tile, buffer: copy });
                parts.push(Operand::whole(copy));
            }
            let rows = q.batch * s.queries + q.q0;
            let out = self.buffer(
                tile,
                a.out,
                BufferClass::Output,
                Rect::new(rows + c0, rows + c1, q.cols.0, q.cols.1),
                DType::F16,
                a.transposed_out,
                [merge_cs, merge_cs],
            );
            // The states' rows are the head dimension, so a query-major output stores them transposed.
            let transpose = !a.transposed_out;
            work.finishing(Vertex {
                tile,
                estimated_cycles: self.target.combine_cycles(
                    parts.len() as u32,
                    d,
                    c1 - c0,
                    transpose,
                ),
                kind: VertexKind::Combine(Combine {
                    states: parts,
                    out: Operand::whole(out),
                    rows: d,
                    cols: c1 - c0,
                    scale_bits: l.scale_bits,
                    transpose,
                }),
            });
            work.outputs.push(out);
        }
    }
}

impl FlashTile {
    /// The tile's vertices, key sub-block by key sub-block.
    fn sub_blocks(&self, target: &Target, l: &Layout, out: &mut Vec<Vertex>) {
        for (i, j0) in (0..self.nk).step_by(self.sub as usize).enumerate() {
            let nj = self.sub.min(self.nk - j0);
            out.extend(self.sub_block(target, l, j0, nj, i == 0));
        }
    }

    /// Keys `j0..j0 + nj` of the tile: scoresᵀ on the AMP, the online softmax, valuesᵀ ·
    /// probabilitiesᵀ on the AMP, and the rescaled accumulation into the flash state; the first
    /// sub-block's float partials are written by the AMP into the accumulator itself.
    fn sub_block(&self, target: &Target, l: &Layout, j0: u32, nj: u32, first: bool) -> Vec<Vertex> {
        let (a, s, d) = (l.a, &l.shape, l.shape.head_dim);
        let (tile, nq) = (self.tile, self.nq);
        let weighted = if first && a.partials_are_accumulator() {
            self.state
        } else {
            self.weighted
        };
        let mut vertices = vec![
            Vertex {
                tile,
                estimated_cycles: target.amp_cycles(nj, d, nq, a.partials),
                kind: VertexKind::Amp(Amp {
                    a: Operand {
                        buffer: self.keys,
                        row: j0,
                        col: 0,
                    },
                    b: Operand::whole(self.queries),
                    partials: Operand::whole(self.scores),
                    rows: nj,
                    depth: d,
                    cols: nq,
                }),
            },
            Vertex {
                tile,
                estimated_cycles: target.softmax_cycles(
                    nj,
                    nq,
                    a.partials,
                    s.causal,
                    self.key_bias.is_some(),
                    first,
                ),
                kind: VertexKind::Softmax(Softmax {
                    scores: Operand::whole(self.scores),
                    probabilities: Operand::whole(self.probabilities),
                    state: Operand::whole(self.state),
                    rescale: Operand::whole(self.rescale),
                    keys: nj,
                    queries: nq,
                    head_dim: d,
                    mask: s.causal.then_some(Mask {
                        first_key: self.k0 + j0,
                        first_query: self.q0,
                    }),
                    key_bias: self.key_bias.map(|buffer| Operand {
                        buffer,
                        row: 0,
                        col: j0,
                    }),
                    first,
                    scale_bits: l.scale_bits,
                }),
            },
            Vertex {
                tile,
                estimated_cycles: target.amp_cycles(d, nj, nq, a.partials),
                kind: VertexKind::Amp(Amp {
                    a: Operand {
                        buffer: self.values,
                        row: 0,
                        col: j0,
                    },
                    b: Operand::whole(self.probabilities),
                    partials: Operand::whole(weighted),
                    rows: d,
                    depth: nj,
                    cols: nq,
                }),
            },
        ];
        if weighted == self.state {
            return vertices;
        }
        vertices.push(Vertex {
            tile,
            estimated_cycles: target.accumulate_cycles(d, nq, first, a.partials),
            kind: VertexKind::Accumulate(Accumulate {
                partials: Operand::whole(weighted),
                state: Operand::whole(self.state),
                rescale: Operand::whole(self.rescale),
                rows: d,
                cols: nq,
                first,
            }),
        });
        vertices
    }
}
