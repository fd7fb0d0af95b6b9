//! The matmul planner: a fused matmul (per part, `out = f16(activation?(a · b + bias?) +
//! residual?)`) on its grid of tiles, in either operand form. Each column block lies inside one
//! part: its weight and bias panels are that part's, its output that part's output, written in that
//! output's order.
//!
//! Contract: [`Builder::matmul_homes`] lays down a matmul's weights and bias (resident: each tile's
//! own panels; otherwise home pieces spread over the grid) and the home pieces of its first-read
//! input and residual, each in the order the plan stores the value. [`Builder::matmul`] appends its
//! supersteps: an exchange gathering every tile's activation panel (and its weight panel and bias
//! unless resident), then the AMP and the epilogue. In the normal form the AMP computes a block of
//! `a · b` with the activation panel as its rows; in the transposed form it computes `(a · b)ᵀ`
//! with the weights' columns as its rows and the activation panel (transposed) as its stationary
//! operand, so partials, partial shares and the residual are transposed too and the bias runs down
//! the rows. With a split depth, each tile multiplies its depth block; a second exchange sends each
//! tile of an output block the others' partials for its share of the AMP's rows, and its epilogue
//! sums them (its own first, then the others in depth order). The epilogue writes the output in the
//! value's order, transposing when that differs from the partials'. Without an epilogue the
//! partials are the output. Buffers are made in the order output block, depth block, then the
//! activation panel, the weight panel, the bias panel (unless resident), the partials; then, per
//! share, the copies of the others' partials, the residual and the output.

use super::builder::{Builder, Supersteps, Work, chunks};
use crate::ids::{BufferId, TileId, ValueId};
use crate::ir::{
    BufferClass, DType, Destination, Grid, MatMul, MatMulPart, Operand, Rect, ValueRole, Vertex,
};
use crate::isa::{Amp, Epilogue, VertexKind};

/// Home pieces of a value: (row block, column block, depth block, rectangle) on the operator's grid.
type HomePieces = Vec<(u32, u32, u32, Rect)>;

/// One depth block of an output block: its tile, its partials and its bias panel.
type DepthBlock = (TileId, BufferId, Option<BufferId>);

impl Builder<'_> {
    /// A matmul's weights and bias (resident panels, or home pieces spread over its grid) and the
    /// home pieces of its (first-read) input and residual.
    pub(super) fn matmul_homes(&mut self, op: &MatMul, p: &Grid) {
        let db = p.depth_blocks;
        let mut homes: Vec<(ValueId, HomePieces)> = Vec::new();
        // A weight two matmuls share has its homes on the grid of the first.
        let weights: Vec<bool> = (op.parts.iter())
            .map(|part| self.graph.value(part.b).role == ValueRole::Weight && !self.is_held(part.b))
            .collect();
        let biases: Vec<Option<ValueId>> = (op.parts.iter())
            .map(|part| part.bias.filter(|&b| !self.is_held(b)))
            .collect();
        if p.resident {
            for (rb, cb, kb) in cells(p) {
                let tile = self.mapping.tile(p, rb, cb, kb);
                let (i, (c0, c1)) = block_part(op, p, cb);
                let part = &op.parts[i];
                let (d0, d1) = (kb * p.block_depth, ((kb + 1) * p.block_depth).min(op.k));
                // The first row block's panels tile the weights once: they are what another
                // operator reading these weights gathers from.
                if weights[i] && d0 < d1 {
                    let rect = Rect::new(d0, d1, c0, c1);
                    let flags = [p.transposed, !p.transposed, rb == 0];
                    self.resident_panel(tile, part.b, rect, flags);
                }
                if let Some(bias) = biases[i] {
                    let flags = [false, false, rb == 0 && kb == 0];
                    self.resident_panel(tile, bias, Rect::new(0, 1, c0, c1), flags);
                }
            }
        } else {
            // Part `i`'s column blocks, each with its columns within the part.
            let blocks_of = |i: usize| {
                (0..p.col_blocks).filter_map(move |cb| {
                    let (j, cols) = block_part(op, p, cb);
                    (j == i).then_some((cb, cols))
                })
            };
            let depths = chunks(op.k, p.row_blocks * db, 1);
            for (i, part) in op.parts.iter().enumerate().filter(|&(i, _)| weights[i]) {
                let pieces = blocks_of(i)
                    .flat_map(|(cb, (c0, c1))| {
                        (depths.iter().enumerate()).map(move |(j, &(r0, r1))| {
                            let j = j as u32;
                            (j / db, cb, j % db, Rect::new(r0, r1, c0, c1))
                        })
                    })
                    .collect();
                homes.push((part.b, pieces));
            }
            for (i, bias) in biases.iter().enumerate() {
                if let Some(bias) = *bias {
                    let pieces = blocks_of(i)
                        .map(|(cb, (c0, c1))| (0, cb, 0, Rect::new(0, 1, c0, c1)))
                        .collect();
                    homes.push((bias, pieces));
                }
            }
        }
        if self.needs_home(op.a) {
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
        if let Some(r) = op.residual.filter(|&r| self.needs_home(r)) {
            let mut pieces = Vec::new();
            for rb in 0..p.row_blocks {
                for cb in 0..p.col_blocks {
                    let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                    let cols = block_cols(op, p, cb);
                    pieces.push((rb, cb, 0, Rect::new(rows.0, rows.1, cols.0, cols.1)));
                }
            }
            homes.push((r, pieces));
        }
        for (value, pieces) in homes {
            let transposed = self.transposed(value);
            for (rb, cb, kb, rect) in pieces {
                let tile = self.mapping.tile(p, rb, cb, kb);
                self.home(tile, value, rect, transposed);
            }
        }
    }

    /// A matmul: an exchange gathering every tile's panels, then the AMP and the epilogue. With a
    /// split depth, each tile multiplies its depth block; a second exchange sends each tile of an
    /// output block the others' partials for its share of the AMP's rows, and its epilogue sums them.
    pub(super) fn matmul(&mut self, op: &MatMul, p: &Grid) {
        let steps = self.supersteps(p.depth_blocks > 1);
        let mut work = Work::new(steps.split);
        for row_block in 0..p.row_blocks {
            for col_block in 0..p.col_blocks {
                let rows = (
                    row_block * p.block_rows,
                    ((row_block + 1) * p.block_rows).min(op.m),
                );
                let (i, cols) = block_part(op, p, col_block);
                let part = &op.parts[i];
                let transpose = self.orders.matmul_output(part.out, p.transposed) != p.transposed;
                let out_rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                // Per depth block: its tile, partials and bias.
                let mut blocks = Vec::new();
                for kb in 0..p.depth_blocks {
                    let depth = (kb * p.block_depth, ((kb + 1) * p.block_depth).min(op.k));
                    if depth.0 >= depth.1 {
                        continue;
                    }
                    let tile = self.mapping.tile(p, row_block, col_block, kb);
                    let block =
                        self.depth_block(op, part, p, tile, out_rect, depth, steps, &mut work);
                    blocks.push(block);
                }
                if !op.has_epilogue(p.depth_blocks, transpose) {
                    work.outputs.push(blocks[0].1);
                    continue;
                }
                self.epilogues(op, part, p, out_rect, &blocks, transpose, steps, &mut work);
            }
        }
        let outs: Vec<ValueId> = op.outs().collect();
        self.finish(op.id, &op.name, "reduce", &outs, work);
    }

    /// One depth block (`depth` of k) of an output block on `tile`: its panels (gathered unless
    /// resident), its partials, and the AMP vertex.
    #[allow(clippy::too_many_arguments)]
    fn depth_block(
        &mut self,
        op: &MatMul,
        part: &MatMulPart,
        p: &Grid,
        tile: TileId,
        out_rect: Rect,
        depth: (u32, u32),
        steps: Supersteps,
        work: &mut Work,
    ) -> DepthBlock {
        let (ex_step, cs_step) = (steps.gather, steps.compute);
        let (nr, nc) = (out_rect.rows(), out_rect.cols());
        let t = p.transposed;
        let live = [ex_step, cs_step];
        // The AMP's rows and its stationary operand: the activation panel and the weight panel in
        // the normal form, the other way round in the transposed form.
        let (rows_class, stationary_class) = (BufferClass::APanel, BufferClass::BPanel);
        let (act_class, weight_class) = if t {
            (stationary_class, rows_class)
        } else {
            (rows_class, stationary_class)
        };
        let a_rect = Rect::new(out_rect.row0, out_rect.row1, depth.0, depth.1);
        let act = self.buffer(tile, op.a, act_class, a_rect, DType::F16, t, live);
        self.gather(op.a, a_rect, act, ex_step, &mut work.groups);
        let b_rect = Rect::new(depth.0, depth.1, out_rect.col0, out_rect.col1);
        let weights = match self.resident_on(part.b, tile, b_rect) {
            Some(id) => id,
            None => {
                let id = self.buffer(tile, part.b, weight_class, b_rect, DType::F16, t, live);
                self.gather(part.b, b_rect, id, ex_step, &mut work.groups);
                id
            }
        };
        let bias = part.bias.map(|bias| {
            let rect = Rect::new(0, 1, out_rect.col0, out_rect.col1);
            if let Some(id) = self.resident_on(bias, tile, rect) {
                return id;
            }
            let id = self.buffer(
                tile,
                bias,
                BufferClass::BiasPanel,
                rect,
                DType::F16,
                false,
                [ex_step, steps.reduce],
            );
            self.gather(bias, rect, id, ex_step, &mut work.groups);
            id
        });
        let partials = self.buffer(
            tile,
            part.out,
            BufferClass::Partials,
            out_rect,
            op.partials,
            t,
            [cs_step, steps.reduce],
        );
        let depth = depth.1 - depth.0;
        let (a, b, rows, cols) = if t {
            (weights, act, nc, nr)
        } else {
            (act, weights, nr, nc)
        };
        work.vertices.push(Vertex {
            tile,
            estimated_cycles: self.target.amp_cycles(rows, depth, cols, op.partials),
            kind: VertexKind::Amp(Amp {
                a: Operand::whole(a),
                b: Operand::whole(b),
                partials: Operand::whole(partials),
                rows,
                depth,
                cols,
            }),
        });
        (tile, partials, bias)
    }

    /// The epilogues of an output block: each depth block's tile finishes a share of the AMP's rows
    /// (the block's rows in the normal form, its columns in the transposed form), from its own
    /// partials and copies of the others' for those rows.
    #[allow(clippy::too_many_arguments)]
    fn epilogues(
        &mut self,
        op: &MatMul,
        part: &MatMulPart,
        p: &Grid,
        out_rect: Rect,
        blocks: &[DepthBlock],
        transpose: bool,
        steps: Supersteps,
        work: &mut Work,
    ) {
        let t = p.transposed;
        let (amp_rows, amp_cols) = if t {
            (out_rect.cols(), out_rect.rows())
        } else {
            (out_rect.rows(), out_rect.cols())
        };
        let shares = chunks(amp_rows, blocks.len() as u32, 1);
        for (&(tile, own, bias), &(r0, r1)) in blocks.iter().zip(&shares) {
            let share = if t {
                let c0 = out_rect.col0;
                Rect::new(out_rect.row0, out_rect.row1, c0 + r0, c0 + r1)
            } else {
                let row0 = out_rect.row0;
                Rect::new(row0 + r0, row0 + r1, out_rect.col0, out_rect.col1)
            };
            let mut parts = vec![Operand {
                buffer: own,
                row: r0,
                col: 0,
            }];
            for &(other, partials, _) in blocks {
                if other == tile {
                    continue;
                }
                let copy = self.buffer(
                    tile,
                    part.out,
                    BufferClass::PartialsShare,
                    share,
                    op.partials,
                    t,
                    [steps.reduce_exchange, steps.reduce],
                );
                work.reductions
                    .send(partials, share, Destination { tile, buffer: copy });
                parts.push(Operand::whole(copy));
            }
            let residual = op.residual.map(|r| {
                let id = self.buffer(
                    tile,
                    r,
                    BufferClass::Residual,
                    share,
                    DType::F16,
                    t,
                    [steps.gather, steps.reduce],
                );
                self.gather(r, share, id, steps.gather, &mut work.groups);
                Operand::whole(id)
            });
            let out = self.buffer(
                tile,
                part.out,
                BufferClass::Output,
                share,
                DType::F16,
                t != transpose,
                [steps.reduce, steps.reduce],
            );
            // In the transposed form the bias runs down the AMP's rows: the share's part of it.
            let bias = bias.map(|b| Operand {
                buffer: b,
                row: 0,
                col: if t { r0 } else { 0 },
            });
            work.finishing(Vertex {
                tile,
                estimated_cycles: op.epilogue_cycles(self.target, r1 - r0, amp_cols, p, transpose),
                kind: VertexKind::Epilogue(Epilogue {
                    partials: parts,
                    bias,
                    bias_by_row: t,
                    residual,
                    out: Operand::whole(out),
                    activation: op.activation,
                    transpose,
                    rows: r1 - r0,
                    cols: amp_cols,
                }),
            });
            work.outputs.push(out);
        }
    }
}

/// Column block `cb`'s columns of the whole product.
fn block_cols(op: &MatMul, p: &Grid, cb: u32) -> (u32, u32) {
    (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n))
}

/// Column block `cb`'s part and its columns within the part (the mid's verifier has checked that
/// every column block lies inside one).
fn block_part(op: &MatMul, p: &Grid, cb: u32) -> (usize, (u32, u32)) {
    op.part_of(block_cols(op, p, cb))
        .expect("column blocks lie inside parts")
}

/// Every cell of a grid: (row block, column block, depth block).
fn cells(p: &Grid) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
    (0..p.row_blocks).flat_map(move |rb| {
        (0..p.col_blocks).flat_map(move |cb| (0..p.depth_blocks).map(move |kb| (rb, cb, kb)))
    })
}
