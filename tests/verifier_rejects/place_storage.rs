//! `place_storage`'s verifier: an address for every buffer and a placement for every tile of the
//! target; every buffer inside its tile's data memory, clear of the code, in interleaved memory when
//! the AMP reads it, aligned; no two buffers of a tile live at the same time overlapping, partials
//! sharing no memory element with them.
//!
//! The tests damage the placement: live buffers overlapping, partials sharing a memory element, a
//! buffer inside the code or past the end of memory, code grown over its buffers, AMP weights in
//! standard memory, a misaligned buffer, a lost address, too few tiles placed.

use crate::common::pipeline::{Built, small};
use crate::{assert_rejects, first_of};
use ipu_codegen::ids::BufferId;
use ipu_codegen::ir::{BufferClass, Placement};
use ipu_codegen::stages::place_storage;

fn placement_errors(b: &Built, p: &Placement) -> Vec<String> {
    place_storage::verify(p, &b.selected, &b.target)
}

/// Two buffers of one tile live at the same time, the second not AMP partials, and the first
/// satisfying `pick`.
fn live_together(b: &Built, pick: impl Fn(BufferId) -> bool) -> (BufferId, BufferId) {
    let sel = &b.selected;
    let mut by_tile: Vec<Vec<BufferId>> = vec![Vec::new(); b.target.tiles as usize];
    for buf in &sel.buffers {
        by_tile[buf.tile.index()].push(buf.id);
    }
    by_tile
        .iter()
        .flat_map(|list| {
            list.iter()
                .flat_map(move |&x| list.iter().map(move |&y| (x, y)))
        })
        .find(|&(x, y)| {
            let (a, c) = (&sel.buffers[x.index()], &sel.buffers[y.index()]);
            x != y
                && pick(x)
                && c.class != BufferClass::Partials
                && a.first_step <= c.last_step
                && c.first_step <= a.last_step
        })
        .expect("two buffers live together")
}

#[test]
fn place_storage_verifier_rejects_overlapping_live_buffers() {
    let b = small();
    let mut p = b.placement.clone();
    let (x, y) = live_together(b, |x| {
        b.selected.buffers[x.index()].class == BufferClass::APanel
    });
    p.addresses[y.index()] = p.addresses[x.index()];
    let tile = b.selected.buffers[x.index()].tile;
    let (lo, hi) = (x.min(y), x.max(y));
    assert_rejects(
        &placement_errors(b, &p),
        &[&format!("{tile}: {lo} and {hi} overlap while both live")],
    );
}

#[test]
fn place_storage_verifier_rejects_partials_sharing_a_memory_element() {
    let b = small();
    let mut p = b.placement.clone();
    let (x, y) = live_together(b, |x| {
        b.selected.buffers[x.index()].class == BufferClass::Partials
    });
    let (partials, other) = (
        &b.selected.buffers[x.index()],
        &b.selected.buffers[y.index()],
    );
    // Right after the partials' bytes, inside the memory element they own.
    let at = (p.addresses[x.index()] + partials.bytes()).next_multiple_of(16);
    let element = b.target.memory_element_bytes;
    assert_eq!(
        (at - b.target.memory_base) / element,
        (p.addresses[x.index()] - b.target.memory_base) / element
    );
    assert!(at + other.bytes() <= b.target.memory_end);
    p.addresses[y.index()] = at;
    let (lo, hi) = (x.min(y), x.max(y));
    assert_rejects(
        &placement_errors(b, &p),
        &[&format!(
            "{}: {lo} and {hi} overlap while both live",
            partials.tile
        )],
    );
}

#[test]
fn place_storage_verifier_rejects_a_buffer_inside_the_code() {
    let b = small();
    let mut p = b.placement.clone();
    let buf = &b.selected.buffers[first_of(&b.selected, BufferClass::InputHome).index()];
    let code = p.tiles[buf.tile.index()].code_address;
    p.addresses[buf.id.index()] = code;
    assert_rejects(
        &placement_errors(b, &p),
        &[
            &format!("{} {}: [{code:#x},", buf.tile, buf.id),
            "outside the tile's data memory",
        ],
    );
}

#[test]
fn place_storage_verifier_rejects_a_buffer_past_the_end_of_memory() {
    let b = small();
    let mut p = b.placement.clone();
    let buf = &b.selected.buffers[first_of(&b.selected, BufferClass::Output).index()];
    let at = b.target.memory_end - buf.bytes() + 8;
    p.addresses[buf.id.index()] = at;
    assert_rejects(
        &placement_errors(b, &p),
        &[
            &format!("{} {}: [{at:#x},", buf.tile, buf.id),
            "outside the tile's data memory",
        ],
    );
}

#[test]
fn place_storage_verifier_rejects_code_grown_over_its_buffers() {
    let b = small();
    let mut p = b.placement.clone();
    let buf = &b.selected.buffers[first_of(&b.selected, BufferClass::WeightHome).index()];
    let usage = &mut p.tiles[buf.tile.index()];
    usage.code_bytes = p.addresses[buf.id.index()] - usage.code_address + 16;
    assert_rejects(
        &placement_errors(b, &p),
        &[
            &format!("{} {}:", buf.tile, buf.id),
            "outside the tile's data memory",
        ],
    );
}

#[test]
fn place_storage_verifier_rejects_amp_weights_in_standard_memory() {
    let b = small();
    let mut p = b.placement.clone();
    let buf = &b.selected.buffers[first_of(&b.selected, BufferClass::BPanel).index()];
    let usage = &p.tiles[buf.tile.index()];
    let at = (usage.code_address + usage.code_bytes).next_multiple_of(16);
    assert!(at < b.target.interleaved_base);
    p.addresses[buf.id.index()] = at;
    assert_rejects(
        &placement_errors(b, &p),
        &[&format!(
            "{} {}: {at:#x} is not interleaved",
            buf.tile, buf.id
        )],
    );
}

#[test]
fn place_storage_verifier_rejects_a_misaligned_buffer() {
    let b = small();
    let mut p = b.placement.clone();
    let buf = &b.selected.buffers[first_of(&b.selected, BufferClass::BPanel).index()];
    p.addresses[buf.id.index()] += 8;
    let at = p.addresses[buf.id.index()];
    assert_rejects(
        &placement_errors(b, &p),
        &[&format!(
            "{} {}: {at:#x} is not 16-byte aligned",
            buf.tile, buf.id
        )],
    );
}

#[test]
fn place_storage_verifier_rejects_a_missing_address() {
    let b = small();
    let mut p = b.placement.clone();
    p.addresses.pop();
    assert_rejects(
        &placement_errors(b, &p),
        &["address count differs from buffer count"],
    );
}

#[test]
fn place_storage_verifier_rejects_a_placement_of_too_few_tiles() {
    let b = small();
    let mut p = b.placement.clone();
    p.tiles.truncate(10);
    assert_rejects(
        &placement_errors(b, &p),
        &[&format!(
            "10 tiles placed, the target has {}",
            b.target.tiles
        )],
    );
}
