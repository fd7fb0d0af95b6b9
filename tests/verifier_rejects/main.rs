//! Every phase's verifier rejects a damaged artifact, and says what is wrong and where. The small
//! presets are built once per test binary through the library's phases, and every verifier accepts
//! what they hold (`common::pipeline`); each test damages a copy of one artifact in one named way and
//! asserts that the verifier reports that damage, naming the tile, buffer, transfer or phase.
//!
//! One module per phase, in pipeline order; each opens with what its verifier guarantees and what its
//! tests damage. Tests are named `<phase>_verifier_rejects_<damage>`. Here: how a test asserts a
//! rejection, and the fixtures more than one phase uses.

#[path = "../common/mod.rs"]
mod common;

mod build_images;
mod emit;
mod lower_exchanges;
mod lower_mid;
mod place_storage;
mod plan_exchange_storage;
mod select_finalist;

use ipu_codegen::ids::BufferId;
use ipu_codegen::ir::{BufferClass, Selected, TileCode};
use ipu_codegen::isa::{EncodedProgram, Instr};

/// Whether `needle` occurs in `haystack` as a whole token: not inside a longer word on its left,
/// and not followed by a digit (so `tile1` does not match `tile12`).
fn names(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// The verifier found something, and one of its errors names every part of `parts`.
#[track_caller]
fn assert_rejects(errors: &[String], parts: &[&str]) {
    assert!(
        !errors.is_empty(),
        "the verifier accepted the damaged artifact"
    );
    assert!(
        errors.iter().any(|e| parts.iter().all(|p| names(e, p))),
        "no error names all of {parts:?}; the errors:\n{}",
        errors.join("\n")
    );
}

/// The first buffer of `class`.
fn first_of(sel: &Selected, class: BufferClass) -> BufferId {
    sel.buffers
        .iter()
        .find(|b| b.class == class)
        .unwrap_or_else(|| panic!("no {class:?} buffer"))
        .id
}

/// An exchange instruction of a tile program with the phase it belongs to.
struct Located {
    tile: usize,
    at: usize,
    phase: u32,
}

/// Every send (`sends`) or receive (otherwise) of the code, with its phase.
fn exchange_instrs(code: &TileCode, sends: bool) -> Vec<Located> {
    let mut out = Vec::new();
    for (tile, p) in code.tiles.iter().enumerate() {
        let mut phase = None;
        for (at, i) in p.instrs().enumerate() {
            match i {
                Instr::Exchange { phase: id, .. } => phase = Some(id.0),
                Instr::Sync => phase = None,
                Instr::Send(_) if sends => out.push(Located {
                    tile,
                    at,
                    phase: phase.expect("sends follow an exchange marker"),
                }),
                Instr::Receive(_) if !sends => out.push(Located {
                    tile,
                    at,
                    phase: phase.expect("receives follow an exchange marker"),
                }),
                _ => {}
            }
        }
    }
    out
}

/// The instruction at `at` of tile `tile`'s program.
fn instr(code: &TileCode, tile: usize, at: usize) -> Instr {
    code.tiles[tile]
        .instrs()
        .nth(at)
        .expect("an instruction there")
}

/// Tile `tile`'s program decoded, changed by `edit`, and encoded back.
fn edit_program<R>(code: &mut TileCode, tile: usize, edit: impl FnOnce(&mut Vec<Instr>) -> R) -> R {
    let mut program = code.tiles[tile].decode();
    let out = edit(&mut program.instrs);
    code.tiles[tile] = EncodedProgram::from(&program);
    out
}
