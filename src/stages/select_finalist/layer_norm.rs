//! The layer-norm planner: a layer norm on row blocks, one tile each, whole rows per tile.
//!
//! Contract: [`Builder::layer_norm_homes`] puts the home pieces of gamma and beta on the first tiles
//! of the operator's grid, and of a host-supplied input its row blocks on their own tiles.
//! [`Builder::layer_norm`] appends two supersteps: an exchange gathering on every tile its rows (from
//! the input's holders, whichever blocks they are), gamma and beta; then one `LayerNorm` vertex per
//! tile. Buffers are made per row block: rows, gamma, beta, output.

use super::builder::{Builder, Work};
use crate::ir::{BufferClass, DType, Grid, LayerNorm, Operand, Rect, Vertex};
use crate::isa::VertexKind;

impl Builder<'_> {
    /// Home pieces of a layer norm's gamma and beta (and of a host-supplied input), on its grid.
    pub(super) fn layer_norm_homes(&mut self, op: &LayerNorm, p: &Grid) {
        let whole = Rect::new(0, 1, 0, op.cols);
        for (i, value) in [op.gamma, op.beta].into_iter().enumerate() {
            if !self.is_held(value) {
                let rb = (i as u32).min(p.row_blocks - 1);
                self.home(self.mapping.tile(p, rb, 0, 0), value, whole, false);
            }
        }
        if self.needs_home(op.x) {
            for rb in 0..p.row_blocks {
                let rect = self.row_block(op, p, rb);
                self.home(self.mapping.tile(p, rb, 0, 0), op.x, rect, false);
            }
        }
    }

    /// A layer norm: an exchange gathering every tile's rows, gamma and beta, then its vertex.
    pub(super) fn layer_norm(&mut self, op: &LayerNorm, p: &Grid) {
        let steps = self.supersteps(false);
        let live = [steps.gather, steps.compute];
        let mut work = Work::new(false);
        for rb in 0..p.row_blocks {
            let tile = self.mapping.tile(p, rb, 0, 0);
            let rect = self.row_block(op, p, rb);
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
            let whole = Rect::new(0, 1, 0, op.cols);
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
            let out = self.buffer(
                tile,
                op.out,
                BufferClass::Output,
                rect,
                DType::F16,
                false,
                [steps.compute, steps.compute],
            );
            work.vertices.push(Vertex {
                tile,
                estimated_cycles: self.target.layer_norm_cycles(rect.rows(), op.cols),
                kind: VertexKind::LayerNorm(crate::isa::LayerNorm {
                    x: Operand::whole(x),
                    gamma: Operand::whole(gamma),
                    beta: Operand::whole(beta),
                    out: Operand::whole(out),
                    rows: rect.rows(),
                    cols: op.cols,
                    epsilon_bits: op.epsilon_bits,
                }),
            });
            work.outputs.push(out);
        }
        self.finish(op.id, &op.name, "reduce", op.out, work);
    }

    /// The rows of row block `rb`, whole.
    fn row_block(&self, op: &LayerNorm, p: &Grid, rb: u32) -> Rect {
        let r0 = rb * p.block_rows;
        Rect::new(r0, ((rb + 1) * p.block_rows).min(op.rows), 0, op.cols)
    }
}
