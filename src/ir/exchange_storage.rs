//! Exchange storage (`exchange_storage`): for every transfer of every exchange phase, the byte run it
//! reads in its source buffer and the run it writes in each destination, and per tile and phase the
//! receive buffers ("rows"); offsets within buffers, no addresses. Written by `plan_exchange_storage`.

use crate::ids::{BufferId, ExchangeId, TileId};
use crate::ir::{Buffer, Rect};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
