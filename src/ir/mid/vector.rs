//! The mid's general vector operator: one unary, binary, select, reduce or softmax graph operation
//! (or a bias add, GELU or add that no matmul fuses) over row blocks of whole rows, a `Vector`
//! vertex per tile. Its partition is a [`super::Grid`] of row blocks of the output, one column
//! block of the output's whole row, one depth block.

use crate::ids::{OpId, ValueId};
use crate::isa::{Spread, VectorFn};
use serde::{Deserialize, Serialize};

/// A general vector operator: `out = function(operands…)` over `rows` rows of `cols` (the input's
/// row length for a reduction, whose output is `rows x 1`), each operand spread over the rows as it
/// says, in the order [`VectorFn::roles`] names them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorOp {
    pub id: OpId,
    pub name: String,
    pub function: VectorFn,
    pub operands: Vec<(ValueId, Spread)>,
    pub out: ValueId,
    pub rows: u32,
    pub cols: u32,
    /// The graph operation this operator implements.
    pub covers: Vec<OpId>,
}

impl VectorOp {
    /// The output's columns: 1 for a reduction, `cols` otherwise.
    pub fn out_cols(&self) -> u32 {
        match self.function {
            VectorFn::Reduce(_) => 1,
            _ => self.cols,
        }
    }

    /// The operands' spreads, in order.
    pub fn spreads(&self) -> Vec<Spread> {
        self.operands.iter().map(|&(_, s)| s).collect()
    }

    /// The dump's line: `op3 name: v7 = vector binary sub(v5 whole, v6 column) [24x40] covers=op3`.
    pub fn dump(&self, covers: &str) -> String {
        let operands: Vec<String> = (self.operands.iter())
            .map(|(v, s)| format!("{v} {}", s.name()))
            .collect();
        format!(
            "  {} {}: {} = vector {}({}) [{}x{}] covers={covers}",
            self.id,
            self.name,
            self.out,
            self.function.name(),
            operands.join(", "),
            self.rows,
            self.cols
        )
    }
}
