//! `plan_exchange_storage`'s verifier: a storage plan per exchange phase and per transfer of the
//! selection, with a destination run per destination; every run inside its buffer and moving exactly
//! its transfer's bytes; every received buffer with its row, no two transfers of a phase writing the
//! same byte of a row, and every row receiving exactly the bytes of its buffer's rectangle.
//!
//! The tests damage the exchange storage: a phase, transfer, destination run or row lost; a source run
//! past its buffer or short of its transfer; a destination run past its buffer; two transfers writing
//! over each other in a row; a row of the wrong size or on the wrong tile.

use crate::assert_rejects;
use crate::common::pipeline::{Built, small, small_attention};
use ipu_codegen::ids::TileId;
use ipu_codegen::ir::ExchangeStorage;
use ipu_codegen::stages::plan_exchange_storage;

fn storage_errors(b: &Built, storage: &ExchangeStorage) -> Vec<String> {
    plan_exchange_storage::verify(storage, &b.selected)
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_missing_phase() {
    let b = small();
    let mut storage = b.storage.clone();
    storage.phases.pop();
    assert_rejects(
        &storage_errors(b, &storage),
        &["phase count differs from the selection"],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_missing_transfer() {
    let b = small();
    let mut storage = b.storage.clone();
    storage.phases[3].transfers.pop();
    assert_rejects(&storage_errors(b, &storage), &["ex3: transfer count"]);
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_source_run_past_its_buffer() {
    let b = small();
    let mut storage = b.storage.clone();
    let t = &b.selected.exchanges[0].transfers[5];
    let src = &b.selected.buffers[t.source_buffer.index()];
    storage.phases[0].transfers[5].source.offset = src.bytes();
    assert_rejects(
        &storage_errors(b, &storage),
        &[
            "ex0 transfer 5: source run",
            &format!(
                "vs {} bytes in {} of {} bytes",
                t.bytes,
                src.id,
                src.bytes()
            ),
        ],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_source_run_short_of_its_transfer() {
    let b = small_attention();
    let mut storage = b.storage.clone();
    // A strided run: one stored row fewer.
    let (i, ts) = storage.phases[0]
        .transfers
        .iter_mut()
        .enumerate()
        .find(|(_, ts)| ts.source.count > 1)
        .expect("the small attention gathers strided runs");
    ts.source.count -= 1;
    let t = &b.selected.exchanges[0].transfers[i];
    assert_rejects(
        &storage_errors(b, &storage),
        &[
            &format!("ex0 transfer {i}: source run"),
            &format!("vs {} bytes in {}", t.bytes, t.source_buffer),
        ],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_destination_run_past_its_buffer() {
    let b = small();
    let mut storage = b.storage.clone();
    let t = &b.selected.exchanges[1].transfers[2];
    let d = t.destinations[0];
    let dst = &b.selected.buffers[d.buffer.index()];
    storage.phases[1].transfers[2].destinations[0].offset += dst.bytes();
    assert_rejects(
        &storage_errors(b, &storage),
        &[
            "ex1 transfer 2: destination run",
            &format!("outside {} on {} ({} bytes)", d.buffer, d.tile, dst.bytes()),
        ],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_two_transfers_writing_the_same_byte_of_a_row() {
    let b = small();
    let mut storage = b.storage.clone();
    // A row that two transfers fill, each its own part.
    let (e, row) = storage
        .phases
        .iter()
        .enumerate()
        .find_map(|(e, p)| {
            p.rows
                .iter()
                .find(|r| r.transfers >= 2)
                .map(|r| (e, r.clone()))
        })
        .expect("a row filled by two transfers");
    let ex = &b.selected.exchanges[e];
    let writers: Vec<(usize, usize)> = ex
        .transfers
        .iter()
        .enumerate()
        .flat_map(|(t, tr)| {
            tr.destinations
                .iter()
                .enumerate()
                .filter(|(_, d)| d.buffer == row.buffer)
                .map(move |(k, _)| (t, k))
        })
        .collect();
    let [(t1, k1), (t2, k2), ..] = writers[..] else {
        panic!("{row:?} has fewer than two writers");
    };
    let first = storage.phases[e].transfers[t1].destinations[k1];
    let second = &mut storage.phases[e].transfers[t2].destinations[k2];
    // The second writes over the first.
    second.offset = first.offset;
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "{} {} on {}: receives overlap at byte",
            ex.id, row.buffer, row.tile
        )],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_row_of_the_wrong_size() {
    let b = small();
    let mut storage = b.storage.clone();
    let row = &mut storage.phases[2].rows[7];
    let expected = row.bytes;
    row.bytes += 4;
    let (buffer, tile, bytes) = (row.buffer, row.tile, row.bytes);
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex2 {buffer} on {tile}: receives {bytes} bytes, its rectangle holds {expected}"
        )],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_missing_row() {
    let b = small();
    let mut storage = b.storage.clone();
    let row = storage.phases[0].rows.remove(0);
    assert_rejects(
        &storage_errors(b, &storage),
        &[
            &format!("ex0 {} on {}", row.buffer, row.tile),
            "receives with no row",
        ],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_row_on_the_wrong_tile() {
    let b = small();
    let mut storage = b.storage.clone();
    let row = &mut storage.phases[0].rows[0];
    let (buffer, tile) = (row.buffer, row.tile);
    // The row names its buffer, but on the next tile: what lands on its own tile has no row.
    row.tile = TileId(tile.0 + 1);
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!("ex0 {buffer} on {tile}: receives with no row")],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_missing_destination_run() {
    let b = small();
    let mut storage = b.storage.clone();
    let runs = &mut storage.phases[0].transfers[0].destinations;
    runs.pop();
    let n = runs.len();
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex0 transfer 0: {n} destination runs for {} destinations",
            n + 1
        )],
    );
}
