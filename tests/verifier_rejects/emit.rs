//! `emit`'s verifier: a program per tile of the target, with a sync per superstep; each tile's vertices
//! per superstep as the program asks; exchange instructions only inside an exchange phase; every send
//! received and every receive naming bytes its sender sends in the phase; every run and operand in
//! tile memory.
//!
//! The tests damage the tile code: a sync lost or added, a tile program or a vertex lost, a vertex run twice or moved, a send or
//! receive run outside memory, a receive from a tile that sends nothing or of more bytes than sent, a
//! send lost, a send nobody receives, a send outside its exchange phase.

use crate::common::pipeline::{Built, small, small_attention};
use crate::{Located, assert_rejects, edit_program, exchange_instrs, instr};
use ipu_codegen::ir::TileCode;
use ipu_codegen::isa::{Instr, Receive, Send};
use ipu_codegen::stages::emit;

fn code_errors(b: &Built, code: &TileCode) -> Vec<String> {
    emit::verify(code, &b.selected, &b.target)
}

/// The bytes (skip, length) of the send or receive at `at`.
fn bytes_of(code: &TileCode, at: &Located) -> (u32, u32) {
    match instr(code, at.tile, at.at) {
        Instr::Send(Send { skip, bytes, .. }) | Instr::Receive(Receive { skip, bytes, .. }) => {
            (skip, bytes)
        }
        _ => unreachable!(),
    }
}

/// The receives of the bytes the send at `send` sends in its phase: (tile, index) of each.
fn receivers_of(code: &TileCode, send: &Located) -> Vec<(usize, usize)> {
    exchange_instrs(code, false)
        .into_iter()
        .filter(|r| {
            let Instr::Receive(Receive { from, .. }) = instr(code, r.tile, r.at) else {
                unreachable!()
            };
            r.phase == send.phase
                && from.index() == send.tile
                && bytes_of(code, r) == bytes_of(code, send)
        })
        .map(|r| (r.tile, r.at))
        .collect()
}

/// Whether the send at `send` is the only one of its tile sending its bytes in its phase.
fn alone(code: &TileCode, send: &Located) -> bool {
    exchange_instrs(code, true)
        .iter()
        .filter(|s| {
            (s.tile, s.phase) == (send.tile, send.phase)
                && bytes_of(code, s) == bytes_of(code, send)
        })
        .count()
        == 1
}

#[test]
fn emit_verifier_rejects_a_tile_missing_a_sync() {
    let b = small();
    let mut code = b.code.clone();
    edit_program(&mut code, 100, |instrs| {
        let last = instrs.iter().rposition(|i| matches!(i, Instr::Sync));
        instrs.remove(last.unwrap())
    });
    let steps = b.selected.steps.len();
    assert_rejects(
        &code_errors(b, &code),
        &[&format!(
            "tile100: {} syncs for {steps} supersteps",
            steps - 1
        )],
    );
}

#[test]
fn emit_verifier_rejects_a_tile_with_an_extra_sync() {
    let b = small_attention();
    let mut code = b.code.clone();
    edit_program(&mut code, 7, |instrs| instrs.insert(0, Instr::Sync));
    let steps = b.selected.steps.len();
    assert_rejects(
        &code_errors(b, &code),
        &[&format!(
            "tile7: {} syncs for {steps} supersteps",
            steps + 1
        )],
    );
}

#[test]
fn emit_verifier_rejects_a_missing_tile_program() {
    let b = small();
    let mut code = b.code.clone();
    code.tiles.pop();
    let tiles = b.target.tiles;
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("{} tile programs for {tiles} tiles", tiles - 1)],
    );
}

#[test]
fn emit_verifier_rejects_a_send_run_outside_memory() {
    let b = small();
    let mut code = b.code.clone();
    let s = &exchange_instrs(&code, true)[10];
    edit_program(&mut code, s.tile, |instrs| {
        let Instr::Send(Send { run, .. }) = &mut instrs[s.at] else {
            unreachable!()
        };
        run.offset = b.target.memory_end;
    });
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{}: `send", s.tile), "outside memory"],
    );
}

#[test]
fn emit_verifier_rejects_a_receive_run_outside_memory() {
    let b = small_attention();
    let mut code = b.code.clone();
    let r = &exchange_instrs(&code, false)[20];
    edit_program(&mut code, r.tile, |instrs| {
        let Instr::Receive(Receive { run, .. }) = &mut instrs[r.at] else {
            unreachable!()
        };
        // Below the tile's memory.
        run.offset = b.target.memory_base - 4;
    });
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{}: `receive", r.tile), "outside memory"],
    );
}

#[test]
fn emit_verifier_rejects_a_receive_from_a_tile_that_sends_nothing_or_lies_beyond_the_target() {
    let b = small();
    let r = &exchange_instrs(&b.code, false)[30];
    // The last tile sends nothing in the small preset; the other is no tile of the target.
    for from in [b.target.tiles - 1, b.target.tiles + 7].map(ipu_codegen::ids::TileId) {
        let mut code = b.code.clone();
        edit_program(&mut code, r.tile, |instrs| {
            let Instr::Receive(receive) = &mut instrs[r.at] else {
                unreachable!()
            };
            receive.from = from;
        });
        assert_rejects(
            &code_errors(b, &code),
            &[
                &format!("ex{} tile{}: receives bytes", r.phase, r.tile),
                &format!("from {from}, which sends no such thing"),
            ],
        );
    }
}

#[test]
fn emit_verifier_rejects_a_receive_of_more_bytes_than_sent() {
    let b = small();
    let mut code = b.code.clone();
    let r = &exchange_instrs(&code, false)[40];
    let (from, skip, end) = edit_program(&mut code, r.tile, |instrs| {
        let Instr::Receive(Receive {
            from, skip, bytes, ..
        }) = &mut instrs[r.at]
        else {
            unreachable!()
        };
        *bytes += 4;
        (*from, *skip, *skip + *bytes)
    });
    assert_rejects(
        &code_errors(b, &code),
        &[
            &format!("ex{} tile{}: receives bytes", r.phase, r.tile),
            &format!("bytes {skip}..{end} from {from}, which sends no such thing"),
        ],
    );
}

#[test]
fn emit_verifier_rejects_a_missing_send() {
    let b = small();
    let mut code = b.code.clone();
    // A send with few receivers, so that every one of their problems is listed, and the only one of
    // its tile sending its bytes in its phase.
    let (s, receivers) = exchange_instrs(&code, true)
        .into_iter()
        .skip(50)
        .filter(|s| alone(&code, s))
        .map(|s| {
            let r = receivers_of(&code, &s);
            (s, r)
        })
        .find(|(_, r)| (1..=10).contains(&r.len()))
        .expect("a send with at most ten receivers");
    edit_program(&mut code, s.tile, |instrs| instrs.remove(s.at));
    let errors = code_errors(b, &code);
    for (tile, _) in receivers {
        assert_rejects(
            &errors,
            &[
                &format!("ex{} tile{tile}: receives bytes", s.phase),
                &format!("from tile{}", s.tile),
                "which sends no such thing",
            ],
        );
    }
}

#[test]
fn emit_verifier_rejects_a_send_nobody_receives() {
    let b = small();
    let mut code = b.code.clone();
    let s = exchange_instrs(&code, true)
        .into_iter()
        .skip(60)
        .find(|s| alone(&code, s))
        .expect("a send alone in sending its bytes");
    let (skip, bytes) = bytes_of(&code, &s);
    let mut receivers = receivers_of(&code, &s);
    assert!(!receivers.is_empty());
    // Removed from the back, so earlier indices stay put.
    receivers.sort_unstable();
    for (tile, at) in receivers.into_iter().rev() {
        edit_program(&mut code, tile, |instrs| instrs.remove(at));
    }
    assert_rejects(
        &code_errors(b, &code),
        &[&format!(
            "ex{} tile{}: its send of bytes {skip}..{} has no receiver",
            s.phase,
            s.tile,
            skip + bytes
        )],
    );
}

/// The first tile with a compute vertex: its index, the vertex's position and its superstep.
fn first_vertex(code: &TileCode) -> (usize, usize, usize) {
    code.tiles
        .iter()
        .enumerate()
        .find_map(|(t, p)| {
            let instrs: Vec<Instr> = p.instrs().collect();
            let at = instrs.iter().position(|i| matches!(i, Instr::Vertex(_)))?;
            let step = instrs[..at]
                .iter()
                .filter(|i| matches!(i, Instr::Sync))
                .count();
            Some((t, at, step))
        })
        .expect("a tile with a vertex")
}

#[test]
fn emit_verifier_rejects_a_missing_vertex() {
    let b = small();
    let mut code = b.code.clone();
    let (t, at, step) = first_vertex(&code);
    edit_program(&mut code, t, |instrs| instrs.remove(at));
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{t} step{step}: vertices")],
    );
}

#[test]
fn emit_verifier_rejects_a_vertex_run_twice_or_moved_to_the_next_superstep() {
    let b = small();
    let (t, at, step) = first_vertex(&b.code);
    let mut twice = b.code.clone();
    edit_program(&mut twice, t, |instrs| {
        instrs.insert(at, instrs[at].clone())
    });
    assert_rejects(
        &code_errors(b, &twice),
        &[&format!("tile{t} step{step}: vertices")],
    );
    // Moved past the sync that ends its superstep: missing from one, extra in the next.
    let mut moved = b.code.clone();
    edit_program(&mut moved, t, |instrs| {
        let vertex = instrs.remove(at);
        let sync = at
            + instrs[at..]
                .iter()
                .position(|i| matches!(i, Instr::Sync))
                .unwrap();
        instrs.insert(sync + 1, vertex);
    });
    let errors = code_errors(b, &moved);
    assert_rejects(&errors, &[&format!("tile{t} step{step}: vertices")]);
    assert_rejects(&errors, &[&format!("tile{t} step{}: vertices", step + 1)]);
}

#[test]
fn emit_verifier_rejects_a_send_outside_an_exchange_phase() {
    let b = small();
    let mut code = b.code.clone();
    let (t, at, step) = code
        .tiles
        .iter()
        .enumerate()
        .find_map(|(t, p)| {
            let instrs: Vec<Instr> = p.instrs().collect();
            let at = instrs
                .iter()
                .position(|i| matches!(i, Instr::Exchange { .. }))?;
            matches!(instrs.get(at + 1), Some(Instr::Send(_))).then(|| {
                let step = instrs[..at]
                    .iter()
                    .filter(|i| matches!(i, Instr::Sync))
                    .count();
                (t, at, step)
            })
        })
        .expect("a tile whose exchange phase opens with a send");
    edit_program(&mut code, t, |instrs| instrs.remove(at));
    assert_rejects(
        &code_errors(b, &code),
        &[
            &format!("tile{t} step{step}: `send"),
            "outside an exchange phase",
        ],
    );
}
