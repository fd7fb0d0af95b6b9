//! The layer-norm planner: a layer norm on row blocks, whole rows per tile, or each row block split
//! into equal column blocks on tiles of their own.
//!
//! Contract: [`Builder::layer_norm_homes`] puts the home pieces of gamma and beta on the operator's
//! grid (column block `j` of each on the tiles of column block `j`), and of a host-supplied input its
//! blocks on their own tiles. [`Builder::layer_norm`] appends, with whole rows, two supersteps: an
//! exchange gathering on every tile its rows (from the input's holders, whichever blocks they are),
//! gamma and beta; then one `LayerNorm` vertex per tile. Split into column blocks, four: the
//! exchange gathering each tile's block of the rows, gamma and beta; a `LayerNormMoments` vertex per
//! tile writing its block's moments into its `Moments` buffer; an exchange sending each tile's
//! moments to a `MomentsShare` buffer on every other tile of its row block; a `LayerNormApply`
//! vertex per tile, reading all of them in block order. The moments' rectangles are in their own
//! coordinates, not the output's: the block's rows, and columns `2j..2j+2` for column block `j`.

use super::builder::{Builder, Work};
use crate::ids::{BufferId, TileId};
use crate::ir::{BufferClass, DType, Destination, Grid, LayerNorm, Operand, Rect, Vertex};
use crate::isa::{LayerNormApply, LayerNormMoments, VertexKind};

impl Builder<'_> {
    /// Home pieces of a layer norm's gamma and beta (and of a host-supplied input), on its grid.
    pub(super) fn layer_norm_homes(&mut self, op: &LayerNorm, p: &Grid) {
        for (i, value) in [op.gamma, op.beta].into_iter().enumerate() {
            if !self.is_held(value) {
                let rb = (i as u32).min(p.row_blocks - 1);
                for db in 0..p.depth_blocks {
                    let rect = Rect::new(0, 1, db * p.block_depth, (db + 1) * p.block_depth);
                    self.home(self.mapping.tile(p, rb, 0, db), value, rect, false);
                }
            }
        }
        if self.needs_home(op.x) {
            for rb in 0..p.row_blocks {
                for db in 0..p.depth_blocks {
                    let rect = self.block(op, p, rb, db);
                    self.home(self.mapping.tile(p, rb, 0, db), op.x, rect, false);
                }
            }
        }
    }

    /// A layer norm: an exchange gathering every tile's rows, gamma and beta, then its vertex; split,
    /// the moments, their exchange and the normalization.
    pub(super) fn layer_norm(&mut self, op: &LayerNorm, p: &Grid) {
        let split = p.depth_blocks > 1;
        let steps = self.supersteps(split);
        let mut work = Work::new(split);
        let mut blocks: Vec<Block> = Vec::new();
        for rb in 0..p.row_blocks {
            for db in 0..p.depth_blocks {
                let tile = self.mapping.tile(p, rb, 0, db);
                let rect = self.block(op, p, rb, db);
                let live = [steps.gather, steps.reduce];
                let x = self.buffer(
                    tile,
                    op.x,
                    BufferClass::APanel,
                    rect,
                    DType::F16,
                    false,
                    live,
                );
                self.gather(op.x, rect, x, steps.gather, &mut work.groups);
                let whole = Rect::new(0, 1, rect.col0, rect.col1);
                let [gamma, beta] = [op.gamma, op.beta].map(|value| {
                    let id = self.buffer(
                        tile,
                        value,
                        BufferClass::BiasPanel,
                        whole,
                        DType::F16,
                        false,
                        live,
                    );
                    self.gather(value, whole, id, steps.gather, &mut work.groups);
                    id
                });
                let moments = split.then(|| {
                    let rect = moments_rect(rect, db);
                    let live = [steps.compute, steps.reduce];
                    self.buffer(
                        tile,
                        op.out,
                        BufferClass::Moments,
                        rect,
                        DType::F32,
                        false,
                        live,
                    )
                });
                let out = self.buffer(
                    tile,
                    op.out,
                    BufferClass::Output,
                    rect,
                    DType::F16,
                    false,
                    [steps.reduce, steps.reduce],
                );
                blocks.push(Block {
                    tile,
                    rect,
                    x,
                    gamma,
                    beta,
                    moments,
                    out,
                });
            }
        }
        for (i, b) in blocks.iter().enumerate() {
            let db = i as u32 % p.depth_blocks;
            let (rows, cols) = (b.rect.rows(), b.rect.cols());
            let Some(moments) = b.moments else {
                work.vertices.push(Vertex {
                    tile: b.tile,
                    estimated_cycles: self.target.layer_norm_cycles(rows, cols),
                    kind: VertexKind::LayerNorm(crate::isa::LayerNorm {
                        x: Operand::whole(b.x),
                        gamma: Operand::whole(b.gamma),
                        beta: Operand::whole(b.beta),
                        out: Operand::whole(b.out),
                        rows,
                        cols,
                        epsilon_bits: op.epsilon_bits,
                    }),
                });
                work.outputs.push(b.out);
                continue;
            };
            work.vertices.push(Vertex {
                tile: b.tile,
                estimated_cycles: self.target.layer_norm_moments_cycles(rows, cols),
                kind: VertexKind::LayerNormMoments(LayerNormMoments {
                    x: Operand::whole(b.x),
                    moments: Operand::whole(moments),
                    rows,
                    cols,
                }),
            });
            // Every block's moments of these rows, in block order: this tile's own, the others'
            // received from their tiles.
            let row_block = (i as u32 / p.depth_blocks * p.depth_blocks) as usize;
            let mut shares = Vec::new();
            for (j, other) in blocks[row_block..][..p.depth_blocks as usize]
                .iter()
                .enumerate()
            {
                let (j, Some(from)) = (j as u32, other.moments) else {
                    continue;
                };
                if j == db {
                    shares.push(Operand::whole(moments));
                    continue;
                }
                let rect = moments_rect(b.rect, j);
                let live = [steps.reduce_exchange, steps.reduce];
                let class = BufferClass::MomentsShare;
                let share = self.buffer(b.tile, op.out, class, rect, DType::F32, false, live);
                let destination = Destination {
                    tile: b.tile,
                    buffer: share,
                };
                work.reductions.send(from, rect, destination);
                shares.push(Operand::whole(share));
            }
            work.finishing(Vertex {
                tile: b.tile,
                estimated_cycles: self
                    .target
                    .layer_norm_apply_cycles(rows, cols, p.depth_blocks),
                kind: VertexKind::LayerNormApply(LayerNormApply {
                    x: Operand::whole(b.x),
                    moments: shares,
                    gamma: Operand::whole(b.gamma),
                    beta: Operand::whole(b.beta),
                    out: Operand::whole(b.out),
                    rows,
                    cols,
                    epsilon_bits: op.epsilon_bits,
                }),
            });
            work.outputs.push(b.out);
        }
        self.finish(op.id, &op.name, "normalize", &[op.out], work);
    }

    /// Column block `db` of the rows of row block `rb`.
    fn block(&self, op: &LayerNorm, p: &Grid, rb: u32, db: u32) -> Rect {
        let r0 = rb * p.block_rows;
        let c0 = db * p.block_depth;
        Rect::new(
            r0,
            ((rb + 1) * p.block_rows).min(op.rows),
            c0,
            c0 + p.block_depth,
        )
    }
}

/// Where column block `db`'s moments of `block`'s rows sit, in the moments' own coordinates.
fn moments_rect(block: Rect, db: u32) -> Rect {
    Rect::new(block.row0, block.row1, 2 * db, 2 * db + 2)
}

/// One tile's buffers of a layer norm.
struct Block {
    tile: TileId,
    rect: Rect,
    x: BufferId,
    gamma: BufferId,
    beta: BufferId,
    moments: Option<BufferId>,
    out: BufferId,
}
