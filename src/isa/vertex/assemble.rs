//! The data-movement vertex (`Assemble`): f16 elements copied exactly from its sources into its
//! output block, piece by piece, and the shape of each piece's copy ([`CopyPiece::form`]) that both
//! the device's timing and the compiler's estimate charge by.
//!
//! Contract: a source is a `rows x cols` rectangle of a value stored row by row (`rows` stored
//! rows of `cols` elements, an operand's row stride apart); the output is `rows x cols` stored row
//! by row. A piece's indices name a source's elements, and the output's, in row-major order of
//! their rectangles (`r · cols + c`), as the graph's pieces name their values' elements.

use crate::elements::Strided;
use serde::{Deserialize, Serialize};

/// A piece of an [`Assemble`] vertex: for every multi-index `i` over `shape`,
/// `out[to.offset + Σ i_k·to.strides_k] = sources[source][from.offset + Σ i_k·from.strides_k]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CopyPiece {
    pub source: u32,
    pub shape: Vec<u32>,
    pub from: Strided,
    pub to: Strided,
}

/// How a piece copies, once its unit extents are dropped, its dimensions ordered by their output
/// strides (largest first) and those contiguous on both sides merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyForm {
    /// `count` runs of `len` elements contiguous in both the source and the output (a single
    /// element is a run of one; a piece contiguous on neither side is runs of one).
    Runs { count: u64, len: u64 },
    /// `count` 2-D transposes: each reads `rows x cols` with its columns contiguous in the source
    /// and writes them as `cols` contiguous output runs of `rows`.
    Transposes { count: u64, rows: u64, cols: u64 },
}

impl CopyPiece {
    /// The elements it copies.
    pub fn elements(&self) -> u64 {
        self.shape.iter().map(|&n| u64::from(n)).product()
    }

    /// The piece's dimensions as (extent, from stride, to stride), unit extents dropped, ordered by
    /// output stride (largest first) and merged where contiguous on both sides.
    pub fn dimensions(&self) -> Vec<(u64, i64, i64)> {
        let mut dims: Vec<(u64, i64, i64)> = (self.shape.iter().enumerate())
            .filter(|&(_, &n)| n != 1)
            .map(|(k, &n)| {
                let stride = |s: &Strided| s.strides.get(k).copied().unwrap_or(0);
                (u64::from(n), stride(&self.from), stride(&self.to))
            })
            .collect();
        dims.sort_by_key(|&(_, _, to)| std::cmp::Reverse(to.unsigned_abs()));
        let mut merged: Vec<(u64, i64, i64)> = Vec::new();
        for d in dims {
            match merged.last_mut() {
                Some(last)
                    if i128::from(last.1) == i128::from(d.1) * i128::from(d.0)
                        && i128::from(last.2) == i128::from(d.2) * i128::from(d.0) =>
                {
                    *last = (last.0.saturating_mul(d.0), d.1, d.2);
                }
                _ => merged.push(d),
            }
        }
        merged
    }

    /// How the piece copies (see [`CopyForm`]).
    pub fn form(&self) -> CopyForm {
        let dims = self.dimensions();
        let elements = self.elements();
        match dims.split_last() {
            None => CopyForm::Runs {
                count: elements.min(1),
                len: 1,
            },
            Some((&(n, 1, 1), _)) => CopyForm::Runs {
                count: elements / n.max(1),
                len: n,
            },
            Some((&(rows, _, 1), rest)) => match rest.iter().position(|d| d.1 == 1) {
                Some(k) => CopyForm::Transposes {
                    count: elements / (rows * rest[k].0).max(1),
                    rows,
                    cols: rest[k].0,
                },
                None => CopyForm::Runs {
                    count: elements,
                    len: 1,
                },
            },
            Some(_) => CopyForm::Runs {
                count: elements,
                len: 1,
            },
        }
    }
}

/// Data movement on one tile: every piece's elements copied exactly from its source into the
/// `rows x cols` f16 output block (see the module's contract). `extents` are the sources' rows and
/// columns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assemble<O> {
    pub sources: Vec<O>,
    pub extents: Vec<(u32, u32)>,
    pub out: O,
    pub rows: u32,
    pub cols: u32,
    pub pieces: Vec<CopyPiece>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(shape: &[u32], from: &[i64], to: &[i64]) -> CopyPiece {
        let strided = |s: &[i64]| Strided {
            offset: 0,
            strides: s.to_vec(),
        };
        CopyPiece {
            source: 0,
            shape: shape.to_vec(),
            from: strided(from),
            to: strided(to),
        }
    }

    #[test]
    fn forms_of_the_usual_moves() {
        // A 3-D transpose [2, 6, 8] -> [2, 8, 6]: two 6x8 transposes.
        assert_eq!(
            piece(&[2, 8, 6], &[48, 1, 8], &[48, 6, 1]).form(),
            CopyForm::Transposes {
                count: 2,
                rows: 6,
                cols: 8
            }
        );
        // A head transpose [1, 4, 3, 8] -> [1, 3, 4, 8]: runs of the head dimension.
        assert_eq!(
            piece(&[1, 3, 4, 8], &[96, 8, 24, 1], &[96, 32, 8, 1]).form(),
            CopyForm::Runs { count: 12, len: 8 }
        );
        // Whole rows of a slice with step 2 along rows: runs of a row; contiguous rows merge.
        assert_eq!(
            piece(&[3, 5], &[10, 1], &[5, 1]).form(),
            CopyForm::Runs { count: 3, len: 5 }
        );
        assert_eq!(
            piece(&[3, 5], &[5, 1], &[5, 1]).form(),
            CopyForm::Runs { count: 1, len: 15 }
        );
        // Every other column: runs of one.
        assert_eq!(
            piece(&[3, 4], &[8, 2], &[4, 1]).form(),
            CopyForm::Runs { count: 12, len: 1 }
        );
        // An expand of a row: runs of the row.
        assert_eq!(
            piece(&[4, 6], &[0, 1], &[6, 1]).form(),
            CopyForm::Runs { count: 4, len: 6 }
        );
    }
}
