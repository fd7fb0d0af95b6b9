//! The mid's data-movement operator: one `assemble` graph operation over row blocks of its output,
//! an `Assemble` vertex per tile. Its partition is a [`super::Grid`] of row blocks of the output,
//! one column block of the output's whole row, one depth block.
//!
//! Contract: [`AssembleOp::block`] gives, for a block of output rows, what its tile gathers and
//! copies: the graph's pieces restricted to those rows (split along their dimension of largest
//! output stride where a piece straddles the block's edge, the indices wholly inside kept as one
//! piece), the rectangles of its sources those pieces read (a piece whose source indices keep
//! within one row's columns reads its bounding rectangle of rows and columns, any other whole rows;
//! per source, rectangles whose rows lie close merged into their bounding rectangle), and the
//! pieces rebased onto those rectangles and the block (`isa::CopyPiece`). Both `lower_mid`'s
//! estimate and `select_finalist`'s planner read it, so the two agree on what a tile moves.

use crate::elements::{Rect, Strided};
use crate::ids::{OpId, ValueId};
use crate::ir::{Graph, Piece};
use crate::isa::CopyPiece;
use serde::{Deserialize, Serialize};

/// A data-movement operator: `out` (`rows x cols`, f16) assembled from `pieces`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssembleOp {
    pub id: OpId,
    pub name: String,
    pub pieces: Vec<Piece>,
    pub out: ValueId,
    pub rows: u32,
    pub cols: u32,
    /// The graph operation this operator implements.
    pub covers: Vec<OpId>,
}

/// What one block of output rows gathers and copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssembleBlock {
    /// The rectangles gathered, each of one source value; a piece's `source` indexes this list.
    pub gathers: Vec<(ValueId, Rect)>,
    /// The pieces restricted to the block, indexing the gathered rectangles and the block's
    /// `rows x cols` elements.
    pub pieces: Vec<CopyPiece>,
}

/// A restricted piece before rebasing: its source, shape, sides, and the rectangle it reads
/// (with whether its source indices keep within rows, so that it may be rebased onto any
/// rectangle containing it).
struct Part {
    x: ValueId,
    shape: Vec<u32>,
    from: Strided,
    to: Strided,
    rect: Rect,
    separable: bool,
}

impl AssembleOp {
    /// The distinct values the pieces read, in first-use order.
    pub fn sources(&self) -> Vec<ValueId> {
        let mut xs: Vec<ValueId> = Vec::new();
        for p in &self.pieces {
            if !xs.contains(&p.x) {
                xs.push(p.x);
            }
        }
        xs
    }

    /// What the block of output rows `row0..row1` gathers and copies (module docs).
    pub fn block(&self, graph: &Graph, row0: u32, row1: u32) -> AssembleBlock {
        let cols = u64::from(self.cols);
        let (lo, hi) = (
            i128::from(u64::from(row0) * cols),
            i128::from(u64::from(row1) * cols),
        );
        let mut parts = Vec::new();
        for p in &self.pieces {
            let x_cols = graph.value(p.x).cols;
            let mut restricted = Vec::new();
            restrict(&p.shape, &p.from, &p.to, (lo, hi), &mut restricted);
            parts.extend(restricted.into_iter().map(|(shape, from, to)| {
                let (rect, separable) = reads(&shape, &from, x_cols);
                Part {
                    x: p.x,
                    shape,
                    from,
                    to,
                    rect,
                    separable,
                }
            }));
        }
        let gathers = gathered(&self.sources(), &parts);
        let pieces = parts
            .into_iter()
            .map(|part| {
                let source = (gathers.iter())
                    .position(|&(x, r)| x == part.x && r.contains(&part.rect))
                    .unwrap_or(0);
                let rect = gathers[source].1;
                let x_cols = graph.value(part.x).cols;
                CopyPiece {
                    source: source as u32,
                    from: rebased(&part, rect, x_cols),
                    to: Strided {
                        offset: (i128::from(part.to.offset) - lo) as u64,
                        strides: part.to.strides,
                    },
                    shape: part.shape,
                }
            })
            .collect();
        AssembleBlock { gathers, pieces }
    }

    /// The dump's line: `op3 name: v7 = assemble(v5, v6) [24x40] pieces=2 covers=op3`.
    pub fn dump(&self, covers: &str) -> String {
        let sources: Vec<String> = self.sources().iter().map(|v| v.to_string()).collect();
        format!(
            "  {} {}: {} = assemble({}) [{}x{}] pieces={} covers={covers}",
            self.id,
            self.name,
            self.out,
            sources.join(", "),
            self.rows,
            self.cols,
            self.pieces.len()
        )
    }
}

/// Pushes onto `out` the piece `(shape, from, to)` restricted to the output elements `lo..hi`: whole
/// when inside, nothing when outside, else split along its dimension of largest output stride,
/// the indices wholly inside kept together and each straddling one restricted in turn.
fn restrict(
    shape: &[u32],
    from: &Strided,
    to: &Strided,
    (lo, hi): (i128, i128),
    out: &mut Vec<(Vec<u32>, Strided, Strided)>,
) {
    let Some((first, last)) = to.span(shape) else {
        return;
    };
    if last < lo || first >= hi {
        return;
    }
    if first >= lo && last < hi {
        out.push((shape.to_vec(), from.clone(), to.clone()));
        return;
    }
    // Some element lies outside, so some extent is above 1.
    let Some(k) = (0..shape.len()).filter(|&k| shape[k] > 1).max_by_key(|&k| {
        let s = to.strides.get(k).copied().unwrap_or(0);
        (s.unsigned_abs(), std::cmp::Reverse(k))
    }) else {
        return;
    };
    let stride = |s: &Strided| i128::from(s.strides.get(k).copied().unwrap_or(0));
    let (sf, st) = (stride(from), stride(to));
    let mut unit = shape.to_vec();
    unit[k] = 1;
    let Some((rest_first, rest_last)) = to.span(&unit) else {
        return;
    };
    let at = |s: &Strided, stride: i128, i: i128| Strided {
        offset: (i128::from(s.offset) + stride * i) as u64,
        strides: s.strides.clone(),
    };
    let mut run: Option<(u32, u32)> = None;
    let flush = |run: &mut Option<(u32, u32)>, out: &mut Vec<_>| {
        if let Some((i0, n)) = run.take() {
            let mut s = shape.to_vec();
            s[k] = n;
            let i0 = i128::from(i0);
            out.push((s, at(from, sf, i0), at(to, st, i0)));
        }
    };
    for i in 0..shape[k] {
        let (a, b) = (
            rest_first + st * i128::from(i),
            rest_last + st * i128::from(i),
        );
        if a >= lo && b < hi {
            run = match run {
                Some((i0, n)) => Some((i0, n + 1)),
                None => Some((i, 1)),
            };
            continue;
        }
        flush(&mut run, out);
        if b >= lo && a < hi {
            let i = i128::from(i);
            restrict(&unit, &at(from, sf, i), &at(to, st, i), (lo, hi), out);
        }
    }
    flush(&mut run, out);
}

/// The rectangle of its source (of `x_cols` columns) a piece reads, and whether its indices keep
/// within rows: every dimension's stride a whole number of rows or, together, moving within the
/// columns of its first element's row.
fn reads(shape: &[u32], from: &Strided, x_cols: u32) -> (Rect, bool) {
    let c = i128::from(x_cols);
    let (row, col) = (i128::from(from.offset) / c, i128::from(from.offset) % c);
    let (mut rows, mut cols) = ((row, row), (col, col));
    for (&n, &s) in shape.iter().zip(&from.strides) {
        let s = i128::from(s);
        let reach = |span: &mut (i128, i128), step: i128| {
            let r = step * (i128::from(n) - 1);
            if r < 0 { span.0 += r } else { span.1 += r }
        };
        if s % c == 0 {
            reach(&mut rows, s / c);
        } else {
            reach(&mut cols, s);
        }
    }
    let (first, last) = from.span(shape).unwrap_or((0, 0));
    if cols.0 >= 0 && cols.1 < c {
        let rect = Rect::new(
            rows.0 as u32,
            rows.1 as u32 + 1,
            cols.0 as u32,
            cols.1 as u32 + 1,
        );
        (rect, true)
    } else {
        let rect = Rect::new((first / c) as u32, (last / c) as u32 + 1, 0, x_cols);
        (rect, false)
    }
}

/// The rectangles gathered: per source in first-use order, the parts' rectangles by first row,
/// each merged into the one before when its rows start no further past that one's end than the
/// larger of the two's rows.
fn gathered(sources: &[ValueId], parts: &[Part]) -> Vec<(ValueId, Rect)> {
    let mut gathers = Vec::new();
    for &x in sources {
        let mut rects: Vec<Rect> = (parts.iter())
            .filter(|p| p.x == x)
            .map(|p| p.rect)
            .collect();
        rects.sort();
        let mut merged: Vec<Rect> = Vec::new();
        for r in rects {
            match merged.last_mut() {
                Some(m) if r.row0 <= m.row1 + m.rows().max(r.rows()) => {
                    *m = Rect::new(
                        m.row0.min(r.row0),
                        m.row1.max(r.row1),
                        m.col0.min(r.col0),
                        m.col1.max(r.col1),
                    );
                }
                _ => merged.push(r),
            }
        }
        gathers.extend(merged.into_iter().map(|r| (x, r)));
    }
    gathers
}

/// A part's source side over the elements of `rect` (row-major, `rect.cols()` a row): a part
/// whose indices keep within rows moves a row of its source to a row of the rectangle; any other
/// reads whole rows, so only its first row moves.
fn rebased(part: &Part, rect: Rect, x_cols: u32) -> Strided {
    let c = i64::from(x_cols);
    let offset = part.from.offset as i64;
    if !part.separable {
        return Strided {
            offset: (offset - i64::from(rect.row0) * c) as u64,
            strides: part.from.strides.clone(),
        };
    }
    let w = i64::from(rect.cols());
    let (row, col) = (offset / c, offset % c);
    Strided {
        offset: ((row - i64::from(rect.row0)) * w + col - i64::from(rect.col0)) as u64,
        strides: (part.from.strides.iter())
            .map(|&s| if s % c == 0 { s / c * w } else { s })
            .collect(),
    }
}
