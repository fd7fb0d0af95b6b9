//! The semantics of the data-movement vertex (`isa::Assemble`): its sources loaded as f16, every
//! piece's elements copied exactly into the `rows x cols` output block, which every element of is
//! written by exactly one piece, then stored row by row. A piece naming a source it does not have,
//! an element outside its source or the block, an element written twice or one left unwritten is a
//! fault. Timed by `timing::assemble`.

use super::super::memory::{Matrix, TileMemory};
use super::super::timing;
use super::expect;
use crate::ir::DType;
use crate::ir::for_each_pair;
use crate::isa::{Assemble, Placed};
use crate::target::Target;

/// Executes an assemble vertex; returns its cycles.
pub(super) fn assemble(
    target: &Target,
    memory: &mut TileMemory,
    v: &Assemble<Placed>,
    step: u32,
) -> Result<u64, String> {
    if v.sources.len() != v.extents.len() {
        return Err(format!(
            "assemble: {} sources with {} extents",
            v.sources.len(),
            v.extents.len()
        ));
    }
    let sources = (v.sources.iter().zip(&v.extents))
        .map(|(s, &(rows, cols))| {
            let m = Matrix {
                addr: expect(s, DType::F16, "assemble source")?,
                stride: s.stride,
                rows,
                cols,
                dtype: DType::F16,
            };
            memory.load(&m, "assemble source")
        })
        .collect::<Result<Vec<_>, String>>()?;
    let out_len = v.rows as usize * v.cols as usize;
    let mut out = vec![0f32; out_len];
    let mut written = vec![false; out_len];
    for (k, p) in v.pieces.iter().enumerate() {
        let Some(source) = sources.get(p.source as usize) else {
            return Err(format!(
                "assemble piece {k}: source {} of {}",
                p.source,
                sources.len()
            ));
        };
        let mut wrong = None;
        for_each_pair(&p.shape, &p.from, &p.to, |f, t| {
            let (Ok(f), Ok(t)) = (usize::try_from(f), usize::try_from(t)) else {
                wrong = Some(format!("element {f} of its source or {t} of the output"));
                return false;
            };
            match (source.get(f), written.get(t)) {
                (Some(&x), Some(false)) => {
                    out[t] = x;
                    written[t] = true;
                    true
                }
                (None, _) => {
                    wrong = Some(format!("element {f} of a source of {}", source.len()));
                    false
                }
                (_, None) => {
                    wrong = Some(format!("element {t} of an output of {out_len}"));
                    false
                }
                (_, Some(true)) => {
                    wrong = Some(format!("output element {t} a second time"));
                    false
                }
            }
        });
        if let Some(w) = wrong {
            return Err(format!("assemble piece {k} copies {w}"));
        }
    }
    if let Some(t) = written.iter().position(|&w| !w) {
        return Err(format!("assemble leaves output element {t} unwritten"));
    }
    let m = Matrix {
        addr: expect(&v.out, DType::F16, "assemble output")?,
        stride: v.out.stride,
        rows: v.rows,
        cols: v.cols,
        dtype: DType::F16,
    };
    memory.store(&m, &out, step, "assemble output")?;
    Ok(timing::assemble(target, v))
}
