//! The compiler's estimate of the data-movement vertex (`isa::Assemble`), in closed form: its runs
//! as one copy codelet (a launch and a fixed cost per worker, each worker's share of the runs at
//! the dearest run's cost: a call, a cycle per 4 bytes and 5 per odd half; the runs are dealt in
//! piece order, so a worker's share is one piece's runs but for the few that straddle two), each piece of 2-D transposes as one
//! supervisor vertex (a launch, then per worker its share of the transposes at a cost per grain
//! row of 4x4 grains). `device::timing` times the same vertex from poplibs' estimators and
//! `calibrate` holds the two within ±3 %.

use super::Target;
use crate::isa::{CopyForm, CopyPiece};

impl Target {
    /// The estimate of one assemble vertex copying `pieces` (module docs).
    pub fn assemble_cycles(&self, pieces: &[CopyPiece]) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let (mut runs, mut dearest, mut cycles) = (0u64, 0u64, 0u64);
        for p in pieces {
            match p.form() {
                CopyForm::Runs { count, len } => {
                    let bytes = 2 * len;
                    runs += count;
                    dearest = dearest.max(35 + bytes / 4 + bytes % 4 * 5);
                }
                CopyForm::Transposes { count, rows, cols } => {
                    let (row_grains, col_grains) = (rows.div_ceil(4), cols.div_ceil(4));
                    let each = 18 + row_grains * (4 * col_grains + 4);
                    cycles += 7 + workers * (29 + count.div_ceil(workers) * each);
                }
            }
        }
        if runs > 0 {
            cycles += workers * (12 + runs.div_ceil(workers) * dearest);
        }
        cycles
    }
}
