//! Exchange storage (`exchange_storage`): for every transfer of every exchange phase, the byte run it
//! reads in its source buffer and the run it writes in each destination, and per tile and phase the
//! receive buffers ("rows"); offsets within buffers, no addresses. Written by `plan_exchange_storage`.

use crate::ids::{BufferId, ExchangeId, TileId};
use crate::isa::Run;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
