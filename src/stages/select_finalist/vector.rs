//! The vector planner: a general vector operator on row blocks of its output, one tile each.
//!
//! Contract: [`Builder::vector_homes`] puts the home pieces of the operator's weights and
//! host-supplied operands that no buffer holds yet on its grid: a whole operand's row blocks on
//! their own tiles, a spread one's row, column blocks or value likewise (a row or a value whole on
//! the first tiles). [`Builder::vector`] appends two supersteps: an exchange gathering on every tile
//! its row block of each whole operand, the whole row of a `[1, cols]` operand, its rows of a
//! `[rows, 1]` operand and the one value of a `[1, 1]` operand; then one `Vector` vertex per tile,
//! writing its row block of the output in the order the output's device readers read it (row by
//! row when only the host reads it). Buffers are made per row block: each operand (the first one's
//! row block the tile's panel, the others' whole blocks residual-like, spread ones small panels),
//! the output.

use super::builder::{Builder, Work};
use crate::ids::ValueId;
use crate::ir::{BufferClass, DType, Grid, Operand, Rect, ValueRole, VectorOp, Vertex};
use crate::isa::{Spread, VertexKind};

impl Builder<'_> {
    /// Home pieces of a vector operator's weights and host-supplied operands, on its grid.
    pub(super) fn vector_homes(&mut self, op: &VectorOp, p: &Grid) {
        for (i, &(value, spread)) in op.operands.iter().enumerate() {
            let streamed = self.graph.value(value).role == ValueRole::Weight
                || self.graph.host_provides(value);
            if !streamed || self.is_held(value) {
                continue;
            }
            match spread {
                Spread::Whole | Spread::OneColumn => {
                    for rb in 0..p.row_blocks {
                        let rect = operand_rect(op, p, rb, spread);
                        self.home(self.mapping.tile(p, rb, 0, 0), value, rect, false);
                    }
                }
                Spread::OneRow | Spread::OneValue => {
                    let rb = (i as u32).min(p.row_blocks - 1);
                    let rect = operand_rect(op, p, rb, spread);
                    self.home(self.mapping.tile(p, rb, 0, 0), value, rect, false);
                }
            }
        }
    }

    /// A vector operator: an exchange gathering every tile's operands, then its vertex.
    pub(super) fn vector(&mut self, op: &VectorOp, p: &Grid) {
        let steps = self.supersteps(false);
        let live = [steps.gather, steps.compute];
        let transpose = self.transposed(op.out);
        let mut work = Work::new(false);
        for rb in 0..p.row_blocks {
            let tile = self.mapping.tile(p, rb, 0, 0);
            let mut gathered = |b: &mut Builder<'_>, value: ValueId, spread: Spread, class| {
                let rect = operand_rect(op, p, rb, spread);
                let id = b.buffer(tile, value, class, rect, DType::F16, false, live);
                b.gather(value, rect, id, steps.gather, &mut work.groups);
                id
            };
            // The first operand's row block is the tile's panel; a spread operand is a small panel.
            let operands: Vec<(Operand, Spread)> = (op.operands.iter().enumerate())
                .map(|(i, &(value, spread))| {
                    let class = match (spread, i) {
                        (Spread::Whole, 0) => BufferClass::APanel,
                        (Spread::Whole, _) => BufferClass::Residual,
                        _ => BufferClass::BiasPanel,
                    };
                    (Operand::whole(gathered(self, value, spread, class)), spread)
                })
                .collect();
            let rect = operand_rect(op, p, rb, Spread::Whole);
            let rect = Rect::new(rect.row0, rect.row1, 0, op.out_cols());
            let out = self.buffer(
                tile,
                op.out,
                BufferClass::Output,
                rect,
                DType::F16,
                transpose,
                [steps.compute, steps.compute],
            );
            work.vertices.push(Vertex {
                tile,
                estimated_cycles: self.target.vector_op_cycles(
                    op.function,
                    rect.rows(),
                    op.cols,
                    &op.spreads(),
                ),
                kind: VertexKind::Vector(crate::isa::Vector {
                    function: op.function,
                    operands,
                    out: Operand::whole(out),
                    rows: rect.rows(),
                    cols: op.cols,
                    transpose,
                }),
            });
            work.outputs.push(out);
        }
        self.finish(op.id, &op.name, "reduce", &[op.out], work);
    }
}

/// The rectangle of an operand spread as `spread` that row block `rb` reads: its rows of a whole
/// operand or of a column, the one row, the one value.
fn operand_rect(op: &VectorOp, p: &Grid, rb: u32, spread: Spread) -> Rect {
    let (r0, r1) = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.rows));
    match spread {
        Spread::Whole => Rect::new(r0, r1, 0, op.cols),
        Spread::OneColumn => Rect::new(r0, r1, 0, 1),
        Spread::OneRow => Rect::new(0, 1, 0, op.cols),
        Spread::OneValue => Rect::new(0, 1, 0, 1),
    }
}
