//! `plan_exchange_storage`: selected -> `exchange_storage`.
//!
//! Lays out, address-free, the receive buffers ("rows") of every exchange phase: per tile, each
//! buffer transfers land in, with the bytes and the number of transfers that land in it, and the
//! most bytes any one tile receives. The byte run each transfer reads and writes is its rectangle's
//! run in its buffer (`Buffer::run`); the lowering works it out where it binds the transfers, so it
//! is not stored here.
//!
//! Invariants (checked by [`verify`]): one storage per exchange phase, in order; each phase's rows in
//! strictly increasing (tile, buffer) order, each naming a buffer on its tile and receiving exactly
//! the bytes of the buffer's rectangle; every landing of the phase in one of its rows, each row
//! receiving the bytes and the count of the transfers that land in it; the largest receiving tile's
//! bytes recorded. That the landings of a buffer do not overlap is `select_finalist`'s check (every
//! gathered buffer covered exactly once).
//!
//! A phase's landings (tens of thousands in a large model) are grouped by tile with a counting sort,
//! then by buffer within each tile.

use crate::ids::{BufferId, Grouped, TileId};
use crate::ir::{ExchangePhase, ExchangeStorage, PhaseStorage, Row, Selected};
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
    // Tiles are grouped up to the last any buffer is on (a landing beyond is left without a row,
    // which the verifier names).
    let tiles = (sel.buffers.iter().map(|b| b.tile.index() + 1).max()).unwrap_or(0);
    let phases = sel
        .exchanges
        .par_iter()
        .map(|ex| {
            // What lands where, by tile (a counting sort) and then by buffer: a row per (tile,
            // buffer), with its bytes and its transfers.
            let mut landing = Grouped::new(tiles, || {
                (ex.transfers.iter()).flat_map(|t| {
                    (t.destinations.iter()).map(|d| (d.tile.index(), (d.buffer, t.bytes)))
                })
            });
            let mut rows: Vec<Row> = Vec::new();
            for (tile, lands) in landing.groups_mut() {
                let tile = TileId::from_index(tile);
                lands.sort_unstable();
                rows.extend(lands.chunk_by(|a, b| a.0 == b.0).map(|lands| Row {
                    tile,
                    buffer: lands[0].0,
                    bytes: lands.iter().map(|l| l.1).sum(),
                    transfers: lands.len() as u32,
                }));
            }
            PhaseStorage {
                id: ex.id,
                max_row_bytes: max_row_bytes(&rows),
                rows,
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

/// The most bytes one tile receives: its rows' bytes summed (rows in tile order).
fn max_row_bytes(rows: &[Row]) -> u32 {
    (rows.chunk_by(|a, b| a.tile == b.tile))
        .map(|tile| tile.iter().map(|row| u64::from(row.bytes)).sum::<u64>())
        .max()
        .map_or(0, |bytes| u32::try_from(bytes).unwrap_or(u32::MAX))
}

pub fn verify(storage: &ExchangeStorage, sel: &Selected) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(storage.phases.len() == sel.exchanges.len(), || {
        "phase count differs from the selection".to_string()
    });
    // Each phase checked on its own, in parallel, with a scratch row index per buffer; the results
    // joined in phase order.
    let phases: Vec<Verifier> = (storage.phases.par_iter())
        .zip(&sel.exchanges)
        .map_init(
            || vec![NO_ROW; sel.buffers.len()],
            |row_of, (ps, ex)| phase_errors(ps, ex, sel, row_of),
        )
        .collect();
    for p in phases {
        v.append(p);
    }
    v.finish()
}

/// A buffer with no row in the phase being checked.
const NO_ROW: u32 = u32::MAX;

/// One phase's errors: its rows against its buffers and against what lands in them. `row_of` (one
/// entry a buffer, all [`NO_ROW`]) indexes the phase's rows by buffer while it is checked and is
/// left as it was found.
fn phase_errors(
    ps: &PhaseStorage,
    ex: &ExchangePhase,
    sel: &Selected,
    row_of: &mut [u32],
) -> Verifier {
    let mut v = Verifier::default();
    v.check(ps.id == ex.id, || {
        format!("the storage of {} stands where {} is", ps.id, ex.id)
    });
    for (i, row) in ps.rows.iter().enumerate() {
        let at = format!("{} {} on {}", ex.id, row.buffer, row.tile);
        if i > 0 {
            let before = &ps.rows[i - 1];
            v.check(
                (before.tile, before.buffer) < (row.tile, row.buffer),
                || format!("{at}: a row out of (tile, buffer) order"),
            );
        }
        let Some(buf) = sel.buffers.get(row.buffer.index()) else {
            v.error(format!("{at}: no such buffer"));
            continue;
        };
        v.check(buf.tile == row.tile, || {
            format!("{at}: the buffer is on {}", buf.tile)
        });
        let expected = buf.rect.elements() * u64::from(buf.dtype.bytes());
        v.check(u64::from(row.bytes) == expected, || {
            format!(
                "{at}: receives {} bytes, its rectangle holds {expected}",
                row.bytes
            )
        });
        if row_of[row.buffer.index()] == NO_ROW {
            row_of[row.buffer.index()] = i as u32;
        }
    }
    // Every landing in its buffer's row, on the row's tile; per row, the bytes and transfers that
    // land in it.
    let mut landed = vec![(0u64, 0u32); ps.rows.len()];
    let mut missing: Vec<(TileId, BufferId)> = Vec::new();
    for t in &ex.transfers {
        for d in &t.destinations {
            match row_of.get(d.buffer.index()) {
                Some(&r) if r != NO_ROW && ps.rows[r as usize].tile == d.tile => {
                    let l = &mut landed[r as usize];
                    *l = (l.0 + u64::from(t.bytes), l.1 + 1);
                }
                _ => missing.push((d.tile, d.buffer)),
            }
        }
    }
    missing.sort_unstable();
    missing.dedup();
    for (tile, buffer) in missing {
        v.error(format!(
            "{} {buffer} on {tile}: receives with no row",
            ex.id
        ));
    }
    for (row, &(bytes, transfers)) in ps.rows.iter().zip(&landed) {
        v.check(
            u64::from(row.bytes) == bytes && row.transfers == transfers,
            || {
                format!(
                    "{} {} on {}: a row of {} bytes from {} transfers, where {bytes} bytes land \
                     from {transfers}",
                    ex.id, row.buffer, row.tile, row.bytes, row.transfers
                )
            },
        );
    }
    v.check(ps.max_row_bytes == max_row_bytes(&ps.rows), || {
        format!(
            "{}: the largest tile receives {} bytes, not {}",
            ex.id,
            max_row_bytes(&ps.rows),
            ps.max_row_bytes
        )
    });
    for row in &ps.rows {
        if let Some(slot) = row_of.get_mut(row.buffer.index()) {
            *slot = NO_ROW;
        }
    }
    v
}
