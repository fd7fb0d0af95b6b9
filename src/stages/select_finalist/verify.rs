//! The program's verifier.
//!
//! Contract: [`verify`] returns every problem found in a selection, each naming its place, in the
//! order of its families of checks: steps (every exchange phase and every compute set listed exactly
//! once, by an id that exists; each recorded at its position, an exchange phase under its own id; an
//! estimate for every step); buffers (tile, lifetime, rectangle, row alignment); transfers (each
//! rectangle inside its source and every destination, both stored in the same order, the source
//! written before and live at the phase, every destination born in it); coverage (every panel,
//! partials share, moments share and flash-state share covered exactly once by its incoming transfers); vertices (every operand on the
//! vertex's tile, live at its step and inside its buffer's storage; AMP partials and weight panels in
//! interleaved memory); assembles (every copy derived again from the graph's pieces); vectors (each
//! vertex its operator's function of its operator's operands, in order, with their spreads); host
//! streams (every home buffer written once by its stream with its own
//! rectangle, the output read whole and once, every buffer the host reads written on the device). The
//! later families read no step list, so they run whatever the steps hold. It reads only the selection
//! and the target.

use crate::ids::{ExchangeId, Grouped, StepId};
use crate::ir::for_each_pair;
use crate::ir::{
    Buffer, BufferClass, ExchangePhase, HostTransfer, Rect, Selected, Step, Transfer, ValueRole,
};
use crate::isa::VertexKind;
use crate::target::Target;
use crate::verify::Verifier;
use rayon::prelude::*;

/// Checks a selection; returns every problem found.
pub fn verify(s: &Selected, target: &Target) -> Vec<String> {
    type Check<'a> = Box<dyn Fn(&mut Verifier) + Sync + 'a>;
    let checks: [Check; 8] = [
        Box::new(|v| check_steps(v, s)),
        Box::new(|v| check_buffers(v, s, target)),
        // Liveness of sources and destinations, and coverage of every gathered buffer.
        Box::new(|v| check_transfers(v, s)),
        Box::new(|v| check_coverage(v, s)),
        Box::new(|v| check_vertices(v, s)),
        Box::new(|v| check_assembles(v, s)),
        Box::new(|v| check_vectors(v, s)),
        Box::new(|v| check_host_streams(v, s)),
    ];
    // The checks run side by side; their problems are listed in the checks' order.
    let found: Vec<Verifier> = (checks.par_iter())
        .map(|check| {
            let mut v = Verifier::default();
            check(&mut v);
            v
        })
        .collect();
    let mut v = Verifier::default();
    for f in found {
        v.append(f);
    }
    v.finish()
}

/// Every exchange phase and every compute set listed once in the steps, by an id that exists, each
/// recorded at its position and an exchange phase under its own id; an estimate for every step.
fn check_steps(v: &mut Verifier, s: &Selected) {
    let mut exchanges_listed = vec![0u32; s.exchanges.len()];
    let mut compute_sets_listed = vec![0u32; s.compute_sets.len()];
    for (i, &step) in s.steps.iter().enumerate() {
        let at = StepId::from_index(i);
        match step {
            Step::Exchange(id) => {
                let Some(ex) = s.exchanges.get(id.index()) else {
                    v.error(format!(
                        "{at}: {id} does not exist; there are {} exchange phases",
                        s.exchanges.len()
                    ));
                    continue;
                };
                exchanges_listed[id.index()] += 1;
                v.check(ex.id == id, || {
                    format!("{at}: {id} records the id {}", ex.id)
                });
                v.check(ex.step == at, || {
                    format!("{at}: {id} is recorded at {}", ex.step)
                });
            }
            Step::Compute(c) => {
                let Some(cs) = s.compute_sets.get(c as usize) else {
                    v.error(format!(
                        "{at}: compute set {c} does not exist; there are {} compute sets",
                        s.compute_sets.len()
                    ));
                    continue;
                };
                compute_sets_listed[c as usize] += 1;
                v.check(cs.step == at, || {
                    format!(
                        "{at}: compute set {c} ({}) is recorded at {}",
                        cs.name, cs.step
                    )
                });
            }
        }
    }
    for (i, &n) in exchanges_listed.iter().enumerate() {
        v.check(n == 1, || {
            format!("steps: {} is listed {n} times", ExchangeId::from_index(i))
        });
    }
    for (c, (cs, &n)) in s.compute_sets.iter().zip(&compute_sets_listed).enumerate() {
        v.check(n == 1, || {
            format!("steps: compute set {c} ({}) is listed {n} times", cs.name)
        });
    }
    v.check(s.estimate.steps.len() == s.steps.len(), || {
        format!(
            "estimate: {} step estimates for {} steps",
            s.estimate.steps.len(),
            s.steps.len()
        )
    });
}

/// Every buffer on a tile of the target, with a lifetime, a rectangle and aligned rows.
fn check_buffers(v: &mut Verifier, s: &Selected, target: &Target) {
    for buf in &s.buffers {
        v.check(buf.tile.0 < target.tiles, || {
            format!(
                "{}: on {} beyond the {} tiles",
                buf.id, buf.tile, target.tiles
            )
        });
        v.check(buf.first_step <= buf.last_step, || {
            format!(
                "{}: lifetime {}..{} is empty",
                buf.id, buf.first_step, buf.last_step
            )
        });
        v.check(!buf.rect.is_empty(), || {
            format!("{}: empty rectangle", buf.id)
        });
        v.check(
            (buf.stride * buf.dtype.bytes()).is_multiple_of(buf.alignment())
                && buf.stride >= buf.storage_cols(),
            || {
                format!(
                    "{}: stride {} elements breaks its {}-byte row alignment",
                    buf.id,
                    buf.stride,
                    buf.alignment()
                )
            },
        );
    }
}

/// Every transfer's rectangle inside its source and every destination, both stored in the same
/// order, the source written before and live at the phase, every destination born in it (the
/// phases checked side by side, their problems listed in phase order).
fn check_transfers(v: &mut Verifier, s: &Selected) {
    let found: Vec<Verifier> = (s.exchanges.par_iter())
        .map(|ex| {
            let mut v = Verifier::default();
            for t in &ex.transfers {
                check_transfer(&mut v, s, ex, t);
            }
            v
        })
        .collect();
    for f in found {
        v.append(f);
    }
}

fn check_transfer(v: &mut Verifier, s: &Selected, ex: &ExchangePhase, t: &Transfer) {
    let src = &s.buffers[t.source_buffer.index()];
    v.check(
        src.tile == t.source && src.value == t.value && src.rect.contains(&t.rect),
        || {
            format!(
                "{} transfer from {} {}: {} {} not inside {}",
                ex.id, t.source, src.id, t.value, t.rect, src.rect
            )
        },
    );
    v.check(
        src.first_step < ex.step || src.first_step == StepId(0),
        || {
            format!(
                "{}: source {} is written in {} after it is sent",
                ex.id, src.id, src.first_step
            )
        },
    );
    v.check(src.last_step >= ex.step, || {
        format!(
            "{}: source {} dies at {} before it is sent",
            ex.id, src.id, src.last_step
        )
    });
    v.check(
        t.bytes == t.rect.rows() * t.rect.cols() * src.dtype.bytes(),
        || format!("{}: transfer bytes", ex.id),
    );
    for d in &t.destinations {
        let dst = &s.buffers[d.buffer.index()];
        v.check(dst.transposed == src.transposed, || {
            format!(
                "{} transfer {} -> {}: {} and {} are stored in different orders",
                ex.id, t.source, d.tile, src.id, dst.id
            )
        });
        v.check(
            dst.tile == d.tile && dst.value == t.value && dst.rect.contains(&t.rect),
            || {
                format!(
                    "{} transfer {} -> {} {}: {} not inside {}",
                    ex.id, t.source, d.tile, dst.id, t.rect, dst.rect
                )
            },
        );
        v.check(dst.first_step == ex.step, || {
            format!(
                "{}: destination {} is not born in this phase",
                ex.id, dst.id
            )
        });
    }
}

/// Every gathered buffer covered exactly once by its incoming rectangles (in phase, transfer and
/// destination order: grouped by buffer with a counting sort, not a list per buffer); the buffers
/// checked in parallel runs, their problems listed in buffer order.
fn check_coverage(v: &mut Verifier, s: &Selected) {
    let incoming = Grouped::new(s.buffers.len(), || {
        (s.exchanges.iter()).flat_map(|ex| {
            (ex.transfers.iter()).flat_map(|t| {
                t.destinations
                    .iter()
                    .map(move |d| (d.buffer.index(), &t.rect))
            })
        })
    });
    let found: Vec<Verifier> = (s.buffers.par_chunks(1 << 12))
        .map(|buffers| {
            let mut v = Verifier::default();
            let (mut rects, mut cells) = (Vec::new(), Cells::default());
            for buf in buffers {
                let b = buf.id.index();
                rects.clear();
                rects.extend(incoming.group(b).iter().copied().copied());
                covered_once(&mut v, buf, &rects, &mut cells);
            }
            v
        })
        .collect();
    for f in found {
        v.append(f);
    }
}

/// A gathered buffer covered exactly once by `rects`; any other buffer is left alone.
fn covered_once(v: &mut Verifier, buf: &Buffer, rects: &[Rect], cells: &mut Cells) {
    if !matches!(
        buf.class,
        BufferClass::APanel
            | BufferClass::BPanel
            | BufferClass::BiasPanel
            | BufferClass::Residual
            | BufferClass::PartialsShare
            | BufferClass::MomentsShare
            | BufferClass::FlashStateShare
    ) {
        return;
    }
    let covered: u64 = rects.iter().map(Rect::elements).sum();
    v.check(covered == buf.rect.elements(), || {
        format!(
            "{} on {}: incoming transfers cover {covered} of {} elements",
            buf.id,
            buf.tile,
            buf.rect.elements()
        )
    });
    if let Some((a, b)) = first_overlap(rects, cells) {
        let (a, b) = (rects[a], rects[b]);
        v.error(format!(
            "{} on {}: transfers {a} and {b} overlap",
            buf.id, buf.tile
        ));
    }
}

/// The first two of `rects` (by the second's index) that overlap: their row and column edges cut
/// the plane into cells, each rectangle covers whole cells, and two rectangles overlap where they
/// cover the same cell. Pieces of panels line up, so the cells are about as many as the pieces;
/// pieces whose edges do not line up, so that the cells would be far more, are compared pair by
/// pair instead.
fn first_overlap(rects: &[Rect], cells: &mut Cells) -> Option<(usize, usize)> {
    if rects.len() < 2 {
        return None;
    }
    let Cells { rows, cols, owner } = cells;
    let edges = |e: &mut Vec<u32>, ends: fn(&Rect) -> [u32; 2]| {
        e.clear();
        e.extend(rects.iter().flat_map(ends));
        e.sort_unstable();
        e.dedup();
    };
    edges(rows, |r| [r.row0, r.row1]);
    edges(cols, |r| [r.col0, r.col1]);
    let width = cols.len().saturating_sub(1);
    let cells = rows.len().saturating_sub(1).saturating_mul(width);
    if cells > 64 * rects.len() + 1024 {
        return (1..rects.len()).find_map(|b| {
            let a = rects[..b]
                .iter()
                .position(|a| a.intersect(&rects[b]).is_some())?;
            Some((a, b))
        });
    }
    owner.clear();
    owner.resize(cells, usize::MAX);
    // Every edge is in its list, so each search finds it.
    let at = |edges: &[u32], x: u32| edges.partition_point(|&e| e < x);
    for (i, r) in rects.iter().enumerate() {
        for row in at(rows, r.row0)..at(rows, r.row1) {
            for col in at(cols, r.col0)..at(cols, r.col1) {
                let cell = &mut owner[row * width + col];
                if *cell != usize::MAX {
                    return Some((*cell, i));
                }
                *cell = i;
            }
        }
    }
    None
}

/// What [`first_overlap`] works in, reused from buffer to buffer: the edges and each cell's owner.
#[derive(Default)]
struct Cells {
    rows: Vec<u32>,
    cols: Vec<u32>,
    owner: Vec<usize>,
}

/// Every vertex's operands on its tile, live at its step and inside their storage; the AMP's
/// partials and weights in interleaved memory, its partials in memory elements of their own.
fn check_vertices(v: &mut Verifier, s: &Selected) {
    for cs in &s.compute_sets {
        for vx in &cs.vertices {
            for u in vx.kind.operands() {
                let (o, buf) = (u.operand, &s.buffers[u.operand.buffer.index()]);
                v.check(buf.tile == vx.tile, || {
                    format!(
                        "{}: vertex on {} uses {} on {}",
                        cs.step, vx.tile, buf.id, buf.tile
                    )
                });
                v.check(
                    buf.first_step <= cs.step && buf.last_step >= cs.step,
                    || {
                        format!(
                            "{}: vertex on {} uses {} outside its lifetime {}..{}",
                            cs.step, vx.tile, buf.id, buf.first_step, buf.last_step
                        )
                    },
                );
                // Every operand window lies inside its buffer's storage.
                let (r, c) = (u.rows, u.cols);
                v.check(
                    o.row + r <= buf.storage_rows() && o.col + c <= buf.storage_cols(),
                    || {
                        format!(
                            "{}: {} {} on {} takes {r}x{c} from ({}, {}) of {}, stored {}x{}",
                            cs.step,
                            vx.kind.name(),
                            u.role,
                            vx.tile,
                            o.row,
                            o.col,
                            buf.id,
                            buf.storage_rows(),
                            buf.storage_cols()
                        )
                    },
                );
            }
            if let VertexKind::Amp(amp) = &vx.kind {
                v.check(
                    s.buffers[amp.partials.buffer.index()].needs_interleaved()
                        && s.buffers[amp.b.buffer.index()].needs_interleaved(),
                    || {
                        format!(
                            "{}: AMP on {} has operands outside interleaved memory",
                            cs.step, vx.tile
                        )
                    },
                );
                v.check(
                    s.buffers[amp.partials.buffer.index()].owns_elements(),
                    || {
                        format!(
                            "{}: AMP on {} writes partials that do not own their memory elements",
                            cs.step, vx.tile
                        )
                    },
                );
            }
        }
    }
}

/// Every vertex of a vector operator computes the operator's function of the operator's operands in
/// the operator's order: as many as the function's roles, each a buffer of the value the operator
/// names at that place, spread as the operator spreads it.
fn check_vectors(v: &mut Verifier, s: &Selected) {
    for cs in &s.compute_sets {
        let Some(crate::ir::Operator::Vector(op)) =
            s.operators.iter().find(|o| o.id() == cs.operator)
        else {
            continue;
        };
        let roles = op.function.roles();
        v.check(op.operands.len() == roles.len(), || {
            format!(
                "{}: vector operator {} ({}) takes {} operands; its function takes {}",
                cs.step,
                op.id,
                op.function.name(),
                op.operands.len(),
                roles.len()
            )
        });
        for vx in &cs.vertices {
            let VertexKind::Vector(vector) = &vx.kind else {
                v.check(false, || {
                    format!(
                        "{}: vector operator {} has a {} vertex on {}",
                        cs.step,
                        op.id,
                        vx.kind.name(),
                        vx.tile
                    )
                });
                continue;
            };
            v.check(
                vector.function == op.function && vector.operands.len() == op.operands.len(),
                || {
                    format!(
                        "{}: vector vertex on {} computes {} of {} operands; its operator {} \
                         computes {} of {}",
                        cs.step,
                        vx.tile,
                        vector.function.name(),
                        vector.operands.len(),
                        op.id,
                        op.function.name(),
                        op.operands.len()
                    )
                },
            );
            for (k, ((o, spread), &(value, want))) in
                vector.operands.iter().zip(&op.operands).enumerate()
            {
                let buf = &s.buffers[o.buffer.index()];
                let role = roles.get(k).copied().unwrap_or("operand");
                v.check(buf.value == value && *spread == want, || {
                    format!(
                        "{}: vector {} on {} takes {} of {} ({}) as its {role}; operator {} names \
                         {value} ({})",
                        cs.step,
                        vector.function.name(),
                        vx.tile,
                        buf.id,
                        buf.value,
                        spread.name(),
                        op.id,
                        want.name()
                    )
                });
            }
        }
    }
}

/// Every assemble vertex copies what its graph operation says, derived again from the graph's
/// pieces: each element of its output block once, from the element of the source value the pieces
/// name (its source buffers' rectangles locate the vertex's source indices in their values).
fn check_assembles(v: &mut Verifier, s: &Selected) {
    for cs in &s.compute_sets {
        let Some(crate::ir::Operator::Assemble(op)) =
            s.operators.iter().find(|o| o.id() == cs.operator)
        else {
            continue;
        };
        let cols = u64::from(op.cols);
        let mut expected = vec![None; (u64::from(op.rows) * cols) as usize];
        for p in &op.pieces {
            for_each_pair(&p.shape, &p.from, &p.to, |f, t| {
                if let Some(e) = expected.get_mut(t as usize) {
                    *e = Some((p.x, f));
                }
                true
            });
        }
        for vx in &cs.vertices {
            let VertexKind::Assemble(a) = &vx.kind else {
                continue;
            };
            let base = u64::from(s.buffers[a.out.buffer.index()].rect.row0) * cols;
            let len = u64::from(a.rows) * u64::from(a.cols);
            let mut seen = vec![false; len as usize];
            let mut wrong: Option<String> = None;
            for (k, p) in a.pieces.iter().enumerate() {
                let Some(src) = a.sources.get(p.source as usize) else {
                    wrong = Some(format!("piece {k} names source {}", p.source));
                    break;
                };
                let buf = &s.buffers[src.buffer.index()];
                let (rect, x_cols) = (buf.rect, s.graph.value(buf.value).cols);
                let w = i128::from(rect.cols().max(1));
                for_each_pair(&p.shape, &p.from, &p.to, |f, t| {
                    let global = (i128::from(rect.row0) + f / w) * i128::from(x_cols)
                        + i128::from(rect.col0)
                        + f % w;
                    let fits =
                        f >= 0 && f < i128::from(rect.elements()) && t >= 0 && t < i128::from(len);
                    let right = fits
                        && !seen[t as usize]
                        && expected
                            .get((i128::from(base) + t) as usize)
                            .copied()
                            .flatten()
                            == Some((buf.value, global));
                    if !right {
                        wrong = Some(format!(
                            "piece {k} copies source element {f} to block element {t}, not what \
                             the graph's pieces put there (or twice)"
                        ));
                        return false;
                    }
                    seen[t as usize] = true;
                    true
                });
                if wrong.is_some() {
                    break;
                }
            }
            if wrong.is_none()
                && let Some(t) = seen.iter().position(|&x| !x)
            {
                wrong = Some(format!("leaves block element {t} unwritten"));
            }
            if let Some(w) = wrong {
                v.error(format!("{}: assemble on {}: {w}", cs.step, vx.tile));
            }
        }
    }
}

/// Every home buffer written once by its stream, exactly its rectangle of its value (weights at
/// `initialize`, what the host supplies at every `run`: parts of an input no tile uses are never
/// streamed), every value the host reads back read whole and once (`run` outputs), and every buffer
/// the host reads written on the device.
fn check_host_streams(v: &mut Verifier, s: &Selected) {
    for (stream, transfers, class) in [
        ("initialize", &s.initialize, BufferClass::WeightHome),
        ("run inputs", &s.run_inputs, BufferClass::InputHome),
    ] {
        let mut streamed = vec![0u32; s.buffers.len()];
        for t in transfers.iter() {
            let Some(buf) = s.buffers.get(t.buffer.index()) else {
                v.error(format!("{stream}: {} does not exist", t.buffer));
                continue;
            };
            streamed[t.buffer.index()] += 1;
            v.check(
                buf.class == class
                    && buf.value == t.value
                    && buf.rect == t.rect
                    && buf.tile == t.tile,
                || {
                    format!(
                        "{stream}: {} {} for {} goes into {} on {}",
                        t.value,
                        t.rect,
                        t.tile,
                        buf.describe(),
                        buf.tile
                    )
                },
            );
        }
        for (buf, &n) in s.buffers.iter().zip(&streamed) {
            if buf.class != class {
                continue;
            }
            let Some(value) = s.graph.values.get(buf.value.index()) else {
                v.error(format!(
                    "{stream}: {} holds no value of the graph",
                    buf.describe()
                ));
                continue;
            };
            let streamable = match class {
                BufferClass::WeightHome => value.role == ValueRole::Weight,
                _ => s.graph.host_provides(value.id),
            };
            v.check(streamable, || {
                format!(
                    "{stream}: {} is not a value the host supplies there",
                    buf.describe()
                )
            });
            v.check(n == 1, || {
                format!("{stream}: {} is streamed {n} times", buf.describe())
            });
        }
    }
    for value in s.graph.values.iter().filter(|x| s.graph.host_reads(x.id)) {
        let rects: Vec<Rect> = (s.run_outputs.iter())
            .filter(|t| t.value == value.id)
            .map(|t| t.rect)
            .collect();
        let whole = Rect::new(0, value.rows, 0, value.cols);
        let inside = rects.iter().all(|r| r.intersect(&whole) == Some(*r));
        let elements: u64 = rects.iter().map(Rect::elements).sum();
        let disjoint = (0..rects.len()).all(|i| {
            rects[i + 1..]
                .iter()
                .all(|r| rects[i].intersect(r).is_none())
        });
        v.check(inside && disjoint && elements == whole.elements(), || {
            format!(
                "run outputs: {} ({}) is not covered once by its {} rectangles",
                value.id,
                value.name,
                rects.len()
            )
        });
    }
    // Every buffer a vertex writes or a transfer fills, by index.
    let mut written = vec![false; s.buffers.len()];
    let writes = (s.compute_sets.iter())
        .flat_map(|cs| &cs.vertices)
        .flat_map(|vx| vx.kind.operands())
        .filter(|u| u.access.writes())
        .map(|u| u.operand.buffer)
        .chain(s.exchanges.iter().flat_map(|ex| {
            (ex.transfers.iter()).flat_map(|t| t.destinations.iter().map(|d| d.buffer))
        }));
    for b in writes {
        if let Some(w) = written.get_mut(b.index()) {
            *w = true;
        }
    }
    for t in &s.run_outputs {
        let HostTransfer { value, buffer, .. } = t;
        v.check(written.get(buffer.index()) == Some(&true), || {
            format!("run outputs: {buffer} of {value} is never written on the device")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{Cells, first_overlap};
    use crate::elements::Rect;

    #[test]
    fn pieces_that_tile_a_panel_do_not_overlap_and_any_shared_cell_does() {
        // One scratch for every call, as the verifier reuses it from buffer to buffer: what an
        // earlier call left in it never shows as an overlap.
        let mut cells = Cells::default();
        // A 4x3 grid of pieces of unequal sizes, out of order, edges touching.
        let (rows, cols) = ([0, 5, 16, 17, 40], [0, 7, 8, 64]);
        let mut grid: Vec<Rect> = (0..4)
            .flat_map(|r| {
                (0..3).map(move |c| Rect::new(rows[r], rows[r + 1], cols[c], cols[c + 1]))
            })
            .collect();
        grid.reverse();
        assert_eq!(first_overlap(&grid, &mut cells), None);
        assert_eq!(first_overlap(&grid[1..], &mut cells), None);
        // A piece straddling two others, a piece inside another, and a twin.
        for extra in [Rect::new(3, 6, 6, 9), Rect::new(20, 21, 8, 9), grid[4]] {
            let mut rects = grid.clone();
            rects.push(extra);
            let (a, b) = first_overlap(&rects, &mut cells).expect("an overlap");
            assert_eq!(b, rects.len() - 1, "{extra}");
            assert!(
                rects[a].intersect(&extra).is_some(),
                "{extra} and {}",
                rects[a]
            );
        }
        // Staggered pieces, whose edges cut many more cells than there are pieces.
        let bricks: Vec<Rect> = (0..64)
            .map(|i| Rect::new(2 * i, 2 * i + 2, i, i + 200))
            .collect();
        assert_eq!(first_overlap(&bricks, &mut cells), None);
        let mut rects = bricks.clone();
        rects.push(Rect::new(60, 62, 100, 101));
        let (a, b) = first_overlap(&rects, &mut cells).expect("an overlap");
        assert_eq!((a, b), (30, 64));
        // Empty pieces never overlap; no pieces, nothing.
        assert_eq!(
            first_overlap(&[Rect::new(3, 3, 0, 9), Rect::new(0, 9, 4, 4)], &mut cells),
            None
        );
        assert_eq!(first_overlap(&[], &mut cells), None);
    }
}
