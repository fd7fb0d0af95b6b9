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

use crate::ids::{BufferId, ExchangeId, TileId};
use crate::ir::Rect;
use crate::stages::select_finalist::{Buffer, Selected};
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanExchangeStorageConfig {}

/// `count` pieces of `bytes` bytes, `stride` bytes apart, from `offset`. Contiguous when `count == 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub offset: u32,
    pub bytes: u32,
    pub count: u32,
    pub stride: u32,
}

impl Run {
    /// The run of `rect` inside `buffer`, merged into one piece when the rows are contiguous.
    /// A transposed buffer stores the rectangle's columns as rows, so its run goes column by column.
    pub fn of(buffer: &Buffer, rect: &Rect) -> Run {
        let elem = buffer.dtype.bytes();
        let (rows, cols) = if buffer.transposed {
            (rect.cols(), rect.rows())
        } else {
            (rect.rows(), rect.cols())
        };
        let bytes = cols * elem;
        let stride = buffer.stride * elem;
        let offset = buffer.offset(rect.row0, rect.col0);
        if bytes == stride || rows == 1 {
            Run {
                offset,
                bytes: bytes * rows,
                count: 1,
                stride: 0,
            }
        } else {
            Run {
                offset,
                bytes,
                count: rows,
                stride,
            }
        }
    }
    pub fn total(&self) -> u32 {
        self.bytes * self.count
    }
    /// One past the last byte touched, relative to the buffer.
    pub fn end(&self) -> u32 {
        self.offset + self.stride * (self.count - 1) + self.bytes
    }
    pub fn pieces(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.count).map(|i| (self.offset + i * self.stride, self.bytes))
    }
    /// The pieces holding bytes `skip..skip+len` of the run's stream.
    pub fn window(&self, skip: u32, len: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let end = skip + len;
        self.pieces()
            .enumerate()
            .filter_map(move |(i, (at, bytes))| {
                let (a, b) = (i as u32 * self.bytes, i as u32 * self.bytes + bytes);
                let (lo, hi) = (a.max(skip), b.min(end));
                (lo < hi).then_some((at + lo - a, hi - lo))
            })
    }
    pub fn shifted(&self, base: u32) -> Run {
        Run {
            offset: base + self.offset,
            ..*self
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferStorage {
    pub source: Run,
    /// One run per destination, in the transfer's destination order.
    pub destinations: Vec<Run>,
}

/// A receive buffer of one tile in one phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub tile: TileId,
    pub buffer: BufferId,
    pub bytes: u32,
    pub transfers: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseStorage {
    pub id: ExchangeId,
    pub transfers: Vec<TransferStorage>,
    pub rows: Vec<Row>,
    /// The most bytes any one tile receives in this phase.
    pub max_row_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeStorage {
    pub phases: Vec<PhaseStorage>,
}

impl crate::store::Artifact for ExchangeStorage {
    const KIND: &'static str = "exchange_storage";
    const SCHEMA: u32 = 1;
}

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
        .iter()
        .map(|ex| {
            let transfers: Vec<TransferStorage> = ex
                .transfers
                .iter()
                .map(|t| TransferStorage {
                    source: Run::of(&sel.buffers[t.source_buffer.index()], &t.rect),
                    destinations: t
                        .destinations
                        .iter()
                        .map(|d| Run::of(&sel.buffers[d.buffer.index()], &t.rect))
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
    for (ps, ex) in storage.phases.iter().zip(&sel.exchanges) {
        v.check(ps.transfers.len() == ex.transfers.len(), || {
            format!("{}: transfer count", ex.id)
        });
        let mut written: BTreeMap<BufferId, Vec<(u32, u32)>> = BTreeMap::new();
        for (i, (ts, t)) in ps.transfers.iter().zip(&ex.transfers).enumerate() {
            let src = &sel.buffers[t.source_buffer.index()];
            v.check(
                ts.source.total() == t.bytes && ts.source.end() <= src.bytes(),
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
            for (run, d) in ts.destinations.iter().zip(&t.destinations) {
                let dst = &sel.buffers[d.buffer.index()];
                v.check(run.total() == t.bytes && run.end() <= dst.bytes(), || {
                    format!(
                        "{} transfer {i}: destination run {run:?} outside {} on {} ({} bytes)",
                        ex.id,
                        dst.id,
                        d.tile,
                        dst.bytes()
                    )
                });
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
            let buf = &sel.buffers[row.buffer.index()];
            let expected = buf.rect.elements() as u32 * buf.dtype.bytes();
            v.check(row.bytes == expected, || {
                format!(
                    "{} {} on {}: receives {} bytes, its rectangle holds {expected}",
                    ex.id, row.buffer, row.tile, row.bytes
                )
            });
        }
    }
    v.finish()
}

impl ExchangeStorage {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for p in &self.phases {
            let strided = p.transfers.iter().filter(|t| t.source.count > 1).count();
            let row_bytes: u64 = p.rows.iter().map(|r| u64::from(r.bytes)).sum();
            let tiles: std::collections::BTreeSet<TileId> = p.rows.iter().map(|r| r.tile).collect();
            let _ = writeln!(
                s,
                "{}: transfers={} strided_sources={} rows={} receiving_tiles={} row_bytes={} max_row_bytes={}",
                p.id,
                p.transfers.len(),
                strided,
                p.rows.len(),
                tiles.len(),
                row_bytes,
                p.max_row_bytes
            );
        }
        s
    }
}
