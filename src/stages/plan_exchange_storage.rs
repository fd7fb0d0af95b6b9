//! `plan_exchange_storage`: selected -> `exchange_storage`.
//!
//! Lays out what every exchange phase moves in memory, independent of addresses: for every transfer, the
//! byte run it reads in its source buffer and the run it writes in each destination buffer (offsets
//! within the buffer); and per tile and phase, the receive buffers ("rows") with the bytes that land in
//! them.
//!
//! Invariants (checked by [`verify`]): every run lies inside its buffer and moves exactly the transfer's
//! bytes; within a phase no two transfers write the same byte of a row; every (tile, buffer) that
//! runs land in has its row, and every row receives exactly the bytes of its buffer's rectangle.
//!
//! A phase's landings (tens of thousands in a large model) are grouped by tile with a counting sort,
//! then by buffer within each tile.

use crate::ids::{BufferId, TileId};
use crate::ir::{ExchangePhase, ExchangeStorage, PhaseStorage, Row, Selected, TransferStorage};
use crate::isa::Run;
use crate::verify::Verifier;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanExchangeStorageConfig {}

#[derive(Debug, thiserror::Error)]
pub enum PlanExchangeStorageError {
    #[error("plan_exchange_storage produced invalid storage:\n{0}")]
    Invalid(String),
}

pub fn plan_exchange_storage(
    sel: &Selected,
    _cfg: &PlanExchangeStorageConfig,
) -> Result<ExchangeStorage, PlanExchangeStorageError> {
    let phases = sel
        .exchanges
        .par_iter()
        .map(|ex| {
            let transfers: Vec<TransferStorage> = ex
                .transfers
                .iter()
                .map(|t| TransferStorage {
                    source: sel.buffers[t.source_buffer.index()].run(&t.rect),
                    destinations: t
                        .destinations
                        .iter()
                        .map(|d| sel.buffers[d.buffer.index()].run(&t.rect))
                        .collect(),
                })
                .collect();
            // What lands where, by tile (a counting sort) and then by buffer: a row per (tile,
            // buffer), with its bytes and its transfers.
            let mut landing = ByTile::new(
                (ex.transfers.iter())
                    .flat_map(|t| (t.destinations.iter()).map(|d| (d.tile, (d.buffer, t.bytes))))
                    .collect(),
            );
            let mut rows: Vec<Row> = Vec::new();
            for (tile, lands) in landing.tiles() {
                lands.sort_unstable();
                rows.extend(lands.chunk_by(|a, b| a.0 == b.0).map(|lands| Row {
                    tile,
                    buffer: lands[0].0,
                    bytes: lands.iter().map(|l| l.1).sum(),
                    transfers: lands.len() as u32,
                }));
            }
            let max_row_bytes = (rows.chunk_by(|a, b| a.tile == b.tile))
                .map(|tile| tile.iter().map(|row| row.bytes).sum::<u32>())
                .max()
                .unwrap_or(0);
            PhaseStorage {
                id: ex.id,
                transfers,
                rows,
                max_row_bytes,
            }
        })
        .collect();
    let storage = ExchangeStorage { phases };
    let errors = verify(&storage, sel);
    if !errors.is_empty() {
        return Err(PlanExchangeStorageError::Invalid(errors.join("\n")));
    }
    Ok(storage)
}

pub fn verify(storage: &ExchangeStorage, sel: &Selected) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(storage.phases.len() == sel.exchanges.len(), || {
        "phase count differs from the selection".to_string()
    });
    // Each phase checked on its own, in parallel; the results joined in phase order.
    let phases: Vec<Verifier> = (storage.phases.par_iter())
        .zip(&sel.exchanges)
        .map(|(ps, ex)| phase_errors(ps, ex, sel))
        .collect();
    for p in phases {
        v.append(p);
    }
    v.finish()
}

/// One phase's errors: its runs against its transfers and buffers, its rows against what lands in
/// them.
fn phase_errors(ps: &PhaseStorage, ex: &ExchangePhase, sel: &Selected) -> Verifier {
    let mut v = Verifier::default();
    v.check(ps.transfers.len() == ex.transfers.len(), || {
        format!("{}: transfer count", ex.id)
    });
    // Every destination run, with the tile and buffer it writes.
    let mut written: Vec<(TileId, (BufferId, &Run))> = Vec::new();
    for (i, (ts, t)) in ps.transfers.iter().zip(&ex.transfers).enumerate() {
        let src = &sel.buffers[t.source_buffer.index()];
        v.check(
            ts.source.total() == Some(t.bytes)
                && ts.source.end().is_some_and(|end| end <= src.bytes()),
            || {
                format!(
                    "{} transfer {i}: source run {:?} vs {} bytes in {} of {} bytes",
                    ex.id,
                    ts.source,
                    t.bytes,
                    src.id,
                    src.bytes()
                )
            },
        );
        v.check(ts.destinations.len() == t.destinations.len(), || {
            format!(
                "{} transfer {i}: {} destination runs for {} destinations",
                ex.id,
                ts.destinations.len(),
                t.destinations.len()
            )
        });
        for (run, d) in ts.destinations.iter().zip(&t.destinations) {
            let dst = &sel.buffers[d.buffer.index()];
            v.check(
                run.total() == Some(t.bytes) && run.end().is_some_and(|end| end <= dst.bytes()),
                || {
                    format!(
                        "{} transfer {i}: destination run {run:?} outside {} on {} ({} bytes)",
                        ex.id,
                        dst.id,
                        d.tile,
                        dst.bytes()
                    )
                },
            );
            written.push((d.tile, (d.buffer, run)));
        }
    }
    // The runs by tile and then buffer, (tile, buffer) in order.
    let mut written = ByTile::new(written);
    let mut by_buffer: Vec<(TileId, &[(BufferId, &Run)])> = Vec::new();
    for (tile, runs) in written.tiles() {
        runs.sort_unstable_by_key(|&(buffer, _)| buffer);
        by_buffer.extend(runs.chunk_by(|a, b| a.0 == b.0).map(|runs| (tile, runs)));
    }
    // Each (tile, buffer)'s runs go to the first row that names it.
    let mut taken = vec![false; by_buffer.len()];
    let mut pieces = Vec::new();
    for row in &ps.rows {
        pieces.clear();
        let found = by_buffer
            .binary_search_by_key(&(row.tile, row.buffer), |(tile, runs)| (*tile, runs[0].0));
        if let Ok(at) = found
            && !taken[at]
        {
            taken[at] = true;
            pieces.extend(by_buffer[at].1.iter().flat_map(|(_, run)| run.pieces()));
            pieces.sort_unstable();
        }
        for w in pieces.windows(2) {
            let (w0, w1) = (w[0], w[1]);
            v.check(w0.0 + w0.1 <= w1.0, || {
                format!(
                    "{} {} on {}: receives overlap at byte {}",
                    ex.id, row.buffer, row.tile, w1.0
                )
            });
        }
        let Some(buf) = sel.buffers.get(row.buffer.index()) else {
            v.error(format!(
                "{} {} on {}: no such buffer",
                ex.id, row.buffer, row.tile
            ));
            continue;
        };
        let expected = buf.rect.elements() as u32 * buf.dtype.bytes();
        v.check(row.bytes == expected, || {
            format!(
                "{} {} on {}: receives {} bytes, its rectangle holds {expected}",
                ex.id, row.buffer, row.tile, row.bytes
            )
        });
    }
    for ((tile, runs), _) in by_buffer.iter().zip(taken).filter(|&(_, taken)| !taken) {
        let buffer = runs[0].0;
        v.error(format!(
            "{} {buffer} on {tile}: receives with no row",
            ex.id
        ));
    }
    v
}

/// Items by tile, in tile order, each tile's in the order given (a counting sort: a phase's
/// landings are tens of thousands, its tiles a few thousand).
struct ByTile<T> {
    /// Tile `t`'s items are `items[starts[t]..starts[t + 1]]`.
    starts: Vec<usize>,
    items: Vec<T>,
}

impl<T: Copy> ByTile<T> {
    fn new(items: Vec<(TileId, T)>) -> ByTile<T> {
        let mut starts = vec![0usize];
        for (tile, _) in &items {
            let end = tile.index() + 1;
            if starts.len() <= end {
                starts.resize(end + 1, 0);
            }
            starts[end] += 1;
        }
        for t in 1..starts.len() {
            starts[t] += starts[t - 1];
        }
        let mut next = starts.clone();
        // Every slot is overwritten below.
        let mut sorted = match items.first() {
            Some(&(_, first)) => vec![first; items.len()],
            None => Vec::new(),
        };
        for (tile, item) in items {
            let at = &mut next[tile.index()];
            sorted[*at] = item;
            *at += 1;
        }
        ByTile {
            starts,
            items: sorted,
        }
    }

    /// Each tile that has items, with them, in tile order.
    fn tiles(&mut self) -> impl Iterator<Item = (TileId, &mut [T])> {
        let mut rest = &mut self.items[..];
        (self.starts.windows(2).enumerate()).filter_map(move |(t, w)| {
            let (here, after) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            rest = after;
            (!here.is_empty()).then(|| (TileId::from_index(t), here))
        })
    }
}
