//! The matmul planner: a fused matmul (`out = f16(activation?(a · b + bias?) + residual?)`) on its
//! grid of tiles.
//!
//! Contract: [`Builder::matmul_homes`] spreads the home pieces of a matmul's weights, bias and
//! first-read input over its grid. [`Builder::matmul`] appends its supersteps: an exchange gathering
//! every tile's A and B panels (and bias), then the AMP and the epilogue. With a split depth, each
//! tile multiplies its depth block; a second exchange sends each tile of an output block the others'
//! partials for its share of the rows, and its epilogue sums them (its own first, then the others in
//! depth order). A residual is gathered for each epilogue's share in the first exchange. Without an
//! epilogue the partials are the output. Buffers are made in the order output block, depth block,
//! then A panel, B panel, bias panel, partials; then, per share of the rows, the copies of the others'
//! partials, the residual and the output.

use super::builder::{Builder, Supersteps, Work, chunks};
use crate::ids::{BufferId, TileId, ValueId};
use crate::ir::{BufferClass, DType, Destination, Grid, MatMul, Operand, Rect, ValueRole, Vertex};
use crate::isa::{Amp, Epilogue, VertexKind};

/// Home pieces of a value: (row block, column block, depth block, rectangle) on the operator's grid.
type HomePieces = Vec<(u32, u32, u32, Rect)>;

/// One depth block of an output block: its tile, its partials and its bias panel.
type DepthBlock = (TileId, BufferId, Option<BufferId>);

impl Builder<'_> {
    /// Home pieces of a matmul's weights, bias and (first-read) input, spread over its grid.
    pub(super) fn matmul_homes(&mut self, op: &MatMul, p: &Grid) {
        let db = p.depth_blocks;
        let mut homes: Vec<(ValueId, HomePieces)> = Vec::new();
        let bv = self.graph.value(op.b);
        // A weight two matmuls share has its homes on the grid of the first.
        if bv.role == ValueRole::Weight && !self.is_held(op.b) {
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
        if let Some(bias) = op.bias.filter(|&b| !self.is_held(b)) {
            let pieces = (0..p.col_blocks)
                .map(|cb| {
                    let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                    (0, cb, 0, Rect::new(0, 1, cols.0, cols.1))
                })
                .collect();
            homes.push((bias, pieces));
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
                    let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                    pieces.push((rb, cb, 0, Rect::new(rows.0, rows.1, cols.0, cols.1)));
                }
            }
            homes.push((r, pieces));
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
    pub(super) fn matmul(&mut self, op: &MatMul, p: &Grid) {
        let steps = self.supersteps(p.depth_blocks > 1);
        let epilogue = op.has_epilogue(p.depth_blocks);
        let mut work = Work::new(steps.split);
        for rb in 0..p.row_blocks {
            for cb in 0..p.col_blocks {
                let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                let out_rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                // Per depth block: its tile, partials and bias.
                let mut blocks = Vec::new();
                for kb in 0..p.depth_blocks {
                    let depth = (kb * p.block_depth, ((kb + 1) * p.block_depth).min(op.k));
                    if depth.0 >= depth.1 {
                        continue;
                    }
                    let tile = self.mapping.tile(p, rb, cb, kb);
                    blocks.push(self.depth_block(op, tile, out_rect, depth, steps, &mut work));
                }
                if !epilogue {
                    work.outputs.push(blocks[0].1);
                    continue;
                }
                self.epilogues(op, p, out_rect, &blocks, steps, &mut work);
            }
        }
        self.finish(op.id, &op.name, "reduce", op.out, work);
    }

    /// One depth block (`depth` of k) of the output block `out_rect` on `tile`: its panels gathered,
    /// its partials, and the AMP vertex.
    fn depth_block(
        &mut self,
        op: &MatMul,
        tile: TileId,
        out_rect: Rect,
        depth: (u32, u32),
        steps: Supersteps,
        work: &mut Work,
    ) -> DepthBlock {
        let (ex_step, cs_step) = (steps.gather, steps.compute);
        let (nr, nc) = (out_rect.rows(), out_rect.cols());
        let live = [ex_step, cs_step];
        let a_rect = Rect::new(out_rect.row0, out_rect.row1, depth.0, depth.1);
        let a = self.buffer(
            tile,
            op.a,
            BufferClass::APanel,
            a_rect,
            DType::F16,
            false,
            live,
        );
        self.gather(op.a, a_rect, a, ex_step, &mut work.groups);
        let b_rect = Rect::new(depth.0, depth.1, out_rect.col0, out_rect.col1);
        let bp = self.buffer(
            tile,
            op.b,
            BufferClass::BPanel,
            b_rect,
            DType::F16,
            false,
            live,
        );
        self.gather(op.b, b_rect, bp, ex_step, &mut work.groups);
        let bias = op.bias.map(|bias| {
            let rect = Rect::new(0, 1, out_rect.col0, out_rect.col1);
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
            op.out,
            BufferClass::Partials,
            out_rect,
            op.partials,
            false,
            [cs_step, steps.reduce],
        );
        let depth = depth.1 - depth.0;
        work.vertices.push(Vertex {
            tile,
            estimated_cycles: self.target.amp_cycles(nr, depth, nc, op.partials),
            kind: VertexKind::Amp(Amp {
                a: Operand::whole(a),
                b: Operand::whole(bp),
                partials: Operand::whole(partials),
                rows: nr,
                depth,
                cols: nc,
            }),
        });
        (tile, partials, bias)
    }

    /// The epilogues of the output block `out_rect`: each depth block's tile finishes a share of the
    /// rows, from its own partials and copies of the others' for those rows.
    fn epilogues(
        &mut self,
        op: &MatMul,
        p: &Grid,
        out_rect: Rect,
        blocks: &[DepthBlock],
        steps: Supersteps,
        work: &mut Work,
    ) {
        let (nr, nc) = (out_rect.rows(), out_rect.cols());
        let shares = chunks(nr, blocks.len() as u32, 1);
        for (&(tile, own, bias), &(r0, r1)) in blocks.iter().zip(&shares) {
            let share = Rect::new(
                out_rect.row0 + r0,
                out_rect.row0 + r1,
                out_rect.col0,
                out_rect.col1,
            );
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
                    op.out,
                    BufferClass::PartialsShare,
                    share,
                    op.partials,
                    false,
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
                    false,
                    [steps.gather, steps.reduce],
                );
                self.gather(r, share, id, steps.gather, &mut work.groups);
                Operand::whole(id)
            });
            let out = self.buffer(
                tile,
                op.out,
                BufferClass::Output,
                share,
                DType::F16,
                op.transposed_out,
                [steps.reduce, steps.reduce],
            );
            work.finishing(Vertex {
                tile,
                estimated_cycles: op.epilogue_cycles(self.target, r1 - r0, nc, p.depth_blocks),
                kind: VertexKind::Epilogue(Epilogue {
                    partials: parts,
                    bias: bias.map(Operand::whole),
                    residual,
                    out: Operand::whole(out),
                    activation: op.activation,
                    transpose: op.transposed_out,
                    rows: r1 - r0,
                    cols: nc,
                }),
            });
            work.outputs.push(out);
        }
    }
}
