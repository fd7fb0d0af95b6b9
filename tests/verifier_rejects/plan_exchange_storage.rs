//! `plan_exchange_storage`'s verifier: the rows of every exchange phase of the selection, in order;
//! each phase's rows in (tile, buffer) order, each naming a buffer on its tile and receiving exactly
//! the bytes of its rectangle, and exactly what lands in it; every landing in a row; the largest
//! receiving tile's bytes.
//!
//! The tests damage the exchange storage: a phase or a row lost; phases swapped; rows out of order or
//! twice; a row of the wrong size, on the wrong tile, naming no buffer or counting a transfer too many;
//! the largest tile's bytes misstated.

use crate::assert_rejects;
use crate::common::pipeline::{Built, small, small_attention};
use ipu_codegen::ids::{BufferId, TileId};
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
fn plan_exchange_storage_verifier_rejects_swapped_phases() {
    let b = small();
    let mut storage = b.storage.clone();
    storage.phases.swap(0, 1);
    assert_rejects(
        &storage_errors(b, &storage),
        &["the storage of ex1 stands where ex0 is"],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_rows_out_of_order() {
    let b = small();
    let mut storage = b.storage.clone();
    let rows = &mut storage.phases[0].rows;
    rows.swap(0, 1);
    let (buffer, tile) = (rows[1].buffer, rows[1].tile);
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex0 {buffer} on {tile}: a row out of (tile, buffer) order"
        )],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_row_listed_twice() {
    let b = small();
    let mut storage = b.storage.clone();
    let rows = &mut storage.phases[1].rows;
    let row = rows[3].clone();
    rows.insert(3, row.clone());
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex1 {} on {}: a row out of (tile, buffer) order",
            row.buffer, row.tile
        )],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_row_naming_no_buffer() {
    let b = small();
    let mut storage = b.storage.clone();
    let row = storage.phases[0].rows.last_mut().expect("a row");
    row.buffer = BufferId(b.selected.buffers.len() as u32);
    let (buffer, tile) = (row.buffer, row.tile);
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!("ex0 {buffer} on {tile}: no such buffer")],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_row_counting_a_transfer_too_many() {
    let b = small();
    let mut storage = b.storage.clone();
    let row = &mut storage.phases[2].rows[5];
    row.transfers += 1;
    let (buffer, tile, bytes, transfers) = (row.buffer, row.tile, row.bytes, row.transfers);
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex2 {buffer} on {tile}: a row of {bytes} bytes from {transfers} transfers, where \
             {bytes} bytes land from {}",
            transfers - 1
        )],
    );
}

#[test]
fn plan_exchange_storage_verifier_rejects_a_misstated_largest_tile() {
    let b = small_attention();
    let mut storage = b.storage.clone();
    let phase = &mut storage.phases[0];
    let (right, wrong) = (phase.max_row_bytes, phase.max_row_bytes - 2);
    phase.max_row_bytes = wrong;
    assert_rejects(
        &storage_errors(b, &storage),
        &[&format!(
            "ex0: the largest tile receives {right} bytes, not {wrong}"
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
    let other = TileId(tile.0 + 1);
    row.tile = other;
    let errors = storage_errors(b, &storage);
    assert_rejects(
        &errors,
        &[&format!("ex0 {buffer} on {other}: the buffer is on {tile}")],
    );
    assert_rejects(
        &errors,
        &[&format!("ex0 {buffer} on {tile}: receives with no row")],
    );
}
