//! `build_images`' verifier: as many images as tile programs and placed tiles; every image at its
//! tile's code address, exactly its program's encoding, and within the space `place_storage` reserved
//! for it.
//!
//! The tests damage the package (and once the placement): an image truncated, undecodable, empty, with
//! bytes past it, of another tile, of a program missing a sync or sending from another address; an
//! image beyond its reservation, a reservation smaller than the code; an image lost or at another
//! address.

use crate::common::pipeline::{Built, small, small_attention};
use crate::{assert_rejects, exchange_instrs};
use ipu_codegen::ir::Package;
use ipu_codegen::isa::{Instr, Send};
use ipu_codegen::stages::build_images;

fn package_errors(b: &Built, package: &Package) -> Vec<String> {
    build_images::verify(package, &b.code, &b.placement)
}

/// A tile that runs more than syncs.
fn busy_tile(b: &Built) -> usize {
    b.code
        .tiles
        .iter()
        .position(|p| p.has_work())
        .expect("a tile with work")
}

#[test]
fn build_images_verifier_rejects_a_truncated_code_image() {
    let b = small();
    let mut package = b.package.clone();
    let t = busy_tile(b);
    let code = &mut package.tiles[t].code;
    code.truncate(code.len() / 2);
    assert_rejects(
        &package_errors(b, &package),
        &[&format!("tile{t}: code image is not its program")],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_that_does_not_decode() {
    let b = small();
    let mut package = b.package.clone();
    // 0xc1 is never used in MessagePack.
    package.tiles[3].code[0] = 0xc1;
    assert_rejects(
        &package_errors(b, &package),
        &["tile3: code image is not its program"],
    );
}

#[test]
fn build_images_verifier_rejects_an_empty_code_image() {
    let b = small_attention();
    let mut package = b.package.clone();
    package.tiles[11].code.clear();
    assert_rejects(
        &package_errors(b, &package),
        &["tile11: code image is not its program"],
    );
}

#[test]
fn build_images_verifier_rejects_the_code_image_of_another_tile() {
    let b = small();
    let mut package = b.package.clone();
    let t = busy_tile(b);
    package.tiles[t].code = package.tiles[t + 1].code.clone();
    assert_rejects(
        &package_errors(b, &package),
        &[&format!("tile{t}: code image is not its program")],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_missing_a_sync() {
    let b = small();
    let mut package = b.package.clone();
    let mut program = b.code.tiles[5].decode();
    let last = program
        .instrs
        .iter()
        .rposition(|i| matches!(i, Instr::Sync))
        .unwrap();
    program.instrs.remove(last);
    package.tiles[5].code = program.encode();
    assert_rejects(
        &package_errors(b, &package),
        &["tile5: code image is not its program"],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_sending_from_another_address() {
    let b = small();
    let mut package = b.package.clone();
    let s = &exchange_instrs(&b.code, true)[0];
    let mut program = b.code.tiles[s.tile].decode();
    let Instr::Send(Send { run, .. }) = &mut program.instrs[s.at] else {
        unreachable!()
    };
    run.offset += 8;
    package.tiles[s.tile].code = program.encode();
    assert_rejects(
        &package_errors(b, &package),
        &[&format!("tile{}: code image is not its program", s.tile)],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_beyond_its_reserved_space() {
    let b = small();
    let mut package = b.package.clone();
    let t = busy_tile(b);
    let reserved = b.placement.tiles[t].code_bytes;
    package.tiles[t].code.resize(reserved as usize + 1, 0);
    assert_rejects(
        &package_errors(b, &package),
        &[&format!(
            "tile{t}: code is {} bytes, {reserved} reserved",
            reserved + 1
        )],
    );
}

#[test]
fn build_images_verifier_rejects_a_reservation_smaller_than_the_code() {
    let b = small_attention();
    let mut placement = b.placement.clone();
    let t = busy_tile(b);
    let len = b.package.tiles[t].code.len() as u32;
    placement.tiles[t].code_bytes = len - 1;
    assert_rejects(
        &build_images::verify(&b.package, &b.code, &placement),
        &[&format!(
            "tile{t}: code is {len} bytes, {} reserved",
            len - 1
        )],
    );
}

#[test]
fn build_images_verifier_rejects_bytes_past_a_code_image() {
    let b = small();
    let mut package = b.package.clone();
    let t = busy_tile(b);
    package.tiles[t].code.push(0);
    assert_rejects(
        &package_errors(b, &package),
        &[&format!("tile{t}: code image is not its program")],
    );
}

#[test]
fn build_images_verifier_rejects_a_missing_tile_image() {
    let b = small();
    let mut package = b.package.clone();
    package.tiles.pop();
    let n = b.target.tiles;
    assert_rejects(
        &package_errors(b, &package),
        &[&format!(
            "{} tile images for {n} tile programs and {n} placed tiles",
            n - 1
        )],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_at_another_address() {
    let b = small();
    let mut package = b.package.clone();
    let t = busy_tile(b);
    package.tiles[t].code_address += 16;
    assert_rejects(
        &package_errors(b, &package),
        &[&format!("tile{t}: code image at"), "placed at"],
    );
}
