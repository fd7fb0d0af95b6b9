//! `plan_exchange_storage`: selected -> `exchange_storage`.
//!
//! Lays out what every exchange phase moves in memory, independent of addresses: for every transfer, the
//! byte run it reads in its source buffer and the run it writes in each destination buffer (offsets
//! within the buffer); and per tile and phase, the receive buffers ("rows") with the bytes that land in
//! them.
//!
//! Invariants (checked by [`verify`]): every run lies inside its buffer and moves exactly the transfer's
//! bytes; within a phase no two transfers write the same byte of a row; every row receives exactly the
//! bytes of its buffer's rectangle.

use crate::ids::{BufferId, TileId};
use crate::ir::{ExchangePhase, ExchangeStorage, PhaseStorage, Row, Selected, TransferStorage};
use crate::verify::Verifier;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
            let mut rows: BTreeMap<(TileId, BufferId), (u32, u32)> = BTreeMap::new();
            for t in &ex.transfers {
                for d in &t.destinations {
                    let e = rows.entry((d.tile, d.buffer)).or_default();
                    e.0 += t.bytes;
                    e.1 += 1;
                }
            }
            let mut per_tile: BTreeMap<TileId, u32> = BTreeMap::new();
            for ((tile, _), (bytes, _)) in &rows {
                *per_tile.entry(*tile).or_default() += bytes;
            }
            PhaseStorage {
                id: ex.id,
                transfers,
                rows: rows
                    .into_iter()
                    .map(|((tile, buffer), (bytes, transfers))| Row {
                        tile,
                        buffer,
                        bytes,
                        transfers,
                    })
                    .collect(),
                max_row_bytes: per_tile.values().copied().max().unwrap_or(0),
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
    let mut written: BTreeMap<BufferId, Vec<(u32, u32)>> = BTreeMap::new();
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
            written.entry(d.buffer).or_default().extend(run.pieces());
        }
    }
    for row in &ps.rows {
        let mut pieces = written.remove(&row.buffer).unwrap_or_default();
        pieces.sort_unstable();
        for w in pieces.windows(2) {
            v.check(w[0].0 + w[0].1 <= w[1].0, || {
                format!(
                    "{} {} on {}: receives overlap at byte {}",
                    ex.id, row.buffer, row.tile, w[1].0
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
    for buffer in written.keys() {
        let tile = sel.buffers[buffer.index()].tile;
        v.error(format!(
            "{} {buffer} on {tile}: receives with no row",
            ex.id
        ));
    }
    v
}
