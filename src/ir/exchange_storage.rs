//! Exchange storage (`exchange_storage`): per tile and exchange phase, the receive buffers ("rows")
//! and the bytes and transfers that land in each. Written by `plan_exchange_storage`.
//!
//! The byte runs a transfer reads and writes are not stored: each is its rectangle's run in its
//! buffer (`Buffer::run`), which the lowering works out where it binds transfers to addresses.

use crate::ids::{BufferId, ExchangeId, TileId};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
    /// In (tile, buffer) order.
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
    const SCHEMA: u32 = 2;

    fn encode_body(&self, out: &mut crate::store::Encoded) {
        let ExchangeStorage { phases } = self;
        out.array_len(1);
        out.list(phases);
    }
}

impl ExchangeStorage {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for p in &self.phases {
            let landings: u64 = p.rows.iter().map(|r| u64::from(r.transfers)).sum();
            let row_bytes: u64 = p.rows.iter().map(|r| u64::from(r.bytes)).sum();
            let tiles: std::collections::BTreeSet<TileId> = p.rows.iter().map(|r| r.tile).collect();
            let _ = writeln!(
                s,
                "{}: landings={} rows={} receiving_tiles={} row_bytes={} max_row_bytes={}",
                p.id,
                landings,
                p.rows.len(),
                tiles.len(),
                row_bytes,
                p.max_row_bytes
            );
        }
        s
    }
}
