//! The data-movement planner: an assemble operator on row blocks of its output, one tile each.
//!
//! Contract: [`Builder::assemble_homes`] puts the home pieces of the operator's weights and
//! host-supplied sources that no buffer holds yet on its grid: each source's rows cut into as
//! many bands as the grid has row blocks, band `i` on row block `i`'s tile. [`Builder::assemble`]
//! appends two supersteps: an exchange gathering on every tile the rectangles of its sources that
//! its row block's pieces read (`AssembleOp::block`: a bounding rectangle per cluster of nearby
//! rows, never a whole source when a few of its rows serve), then one `Assemble` vertex per tile
//! copying the tile's pieces, restricted to its rows and rebased onto the gathered rectangles, into
//! its row block of the output, stored row by row (the order `ir::layout` has a data movement
//! write). Buffers are made per row block: the gathered rectangles in order, then the output.

use super::builder::{Builder, Work, chunks};
use crate::ir::{AssembleOp, BufferClass, DType, Grid, Operand, Rect, ValueRole, Vertex};
use crate::isa::{Assemble, VertexKind};

impl Builder<'_> {
    /// Home pieces of an assemble operator's weights and host-supplied sources, on its grid.
    pub(super) fn assemble_homes(&mut self, op: &AssembleOp, p: &Grid) {
        for value in op.sources() {
            let v = self.graph.value(value);
            let streamed = v.role == ValueRole::Weight || self.graph.host_provides(value);
            if !streamed || self.is_held(value) {
                continue;
            }
            let cols = v.cols;
            for (band, (r0, r1)) in chunks(v.rows, p.row_blocks, 1).into_iter().enumerate() {
                let tile = self.mapping.tile(p, band as u32, 0, 0);
                self.home(tile, value, Rect::new(r0, r1, 0, cols), false);
            }
        }
    }

    /// An assemble operator: an exchange gathering every tile's source rectangles, then its
    /// vertex.
    pub(super) fn assemble(&mut self, op: &AssembleOp, p: &Grid) {
        let steps = self.supersteps(false);
        let live = [steps.gather, steps.compute];
        let mut work = Work::new(false);
        for rb in 0..p.row_blocks {
            let (r0, r1) = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.rows));
            if r0 >= r1 {
                continue;
            }
            let tile = self.mapping.tile(p, rb, 0, 0);
            let block = op.block(self.graph, r0, r1);
            let sources = (block.gathers.iter())
                .map(|&(value, rect)| {
                    let id = self.buffer(
                        tile,
                        value,
                        BufferClass::APanel,
                        rect,
                        DType::F16,
                        false,
                        live,
                    );
                    self.gather(value, rect, id, steps.gather, &mut work.groups);
                    Operand::whole(id)
                })
                .collect();
            let rect = Rect::new(r0, r1, 0, op.cols);
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
                estimated_cycles: self.target.assemble_cycles(&block.pieces),
                kind: VertexKind::Assemble(Assemble {
                    sources,
                    extents: (block.gathers.iter())
                        .map(|(_, r)| (r.rows(), r.cols()))
                        .collect(),
                    out: Operand::whole(out),
                    rows: r1 - r0,
                    cols: op.cols,
                    pieces: block.pieces,
                }),
            });
            work.outputs.push(out);
        }
        self.finish(op.id, &op.name, "copy", &[op.out], work);
    }
}
