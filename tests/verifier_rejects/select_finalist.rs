//! `select_finalist`'s verifier: the steps list every exchange phase and compute set once, each
//! recorded at its position and an exchange phase under its own id, with an estimate per step; every
//! buffer on a tile of the target with a lifetime, a rectangle and aligned rows; every transfer inside
//! its source and its destinations, both stored in the same order, its source written before and live
//! at the phase and every destination born in it; every panel covered exactly once by its incoming
//! transfers; every vertex's operands on its tile, live at its step, the AMP's in interleaved memory;
//! every home buffer streamed once with its own rectangle, the output read whole and once and written
//! on the device.
//!
//! The tests damage the selection: two steps swapped, a compute set listed twice, an exchange phase
//! left out of the steps, a step naming no exchange phase or compute set, an exchange phase under
//! another id, an estimate a step short; a buffer beyond the tiles, with an empty lifetime or rectangle
//! or a stride off its alignment; a transfer reading a dead or unwritten source, outside it or of the
//! wrong size; a panel left short or filled twice; a destination stored in another order or born early;
//! an operand read after it dies, AMP weights outside interleaved memory, AMP partials sharing their
//! memory elements; a host stream lost or into
//! another rectangle, an output read in part or never written.

use crate::common::pipeline::{Built, small};
use crate::{assert_rejects, first_of};
use ipu_codegen::ids::{ExchangeId, StepId, TileId};
use ipu_codegen::ir::{BufferClass, Selected, Step, Transfer};
use ipu_codegen::stages::select_finalist;

fn select_errors(b: &Built, sel: &Selected) -> Vec<String> {
    select_finalist::verify(sel, &b.target)
}

/// (exchange phase, transfer) of the first transfer, in an exchange phase after step 0, that `pick`
/// accepts.
fn later_transfer(sel: &Selected, pick: impl Fn(usize, usize) -> bool) -> (usize, usize) {
    sel.exchanges
        .iter()
        .enumerate()
        .filter(|(_, ex)| ex.step > StepId(0))
        .flat_map(|(e, ex)| (0..ex.transfers.len()).map(move |t| (e, t)))
        .find(|&(e, t)| pick(e, t))
        .expect("a transfer to damage")
}

/// The position of `step` in the steps.
fn position(sel: &Selected, step: Step) -> usize {
    (sel.steps.iter())
        .position(|&s| s == step)
        .unwrap_or_else(|| panic!("{step:?} is not a step"))
}

#[test]
fn select_finalist_verifier_rejects_two_steps_swapped() {
    let b = small();
    let mut sel = b.selected.clone();
    // ex1 gathers op0's partials, compute set 1 reduces them.
    let (i, j) = (
        position(&sel, Step::Exchange(ExchangeId(1))),
        position(&sel, Step::Compute(1)),
    );
    sel.steps.swap(i, j);
    let name = &sel.compute_sets[1].name;
    let errors = select_errors(b, &sel);
    assert_rejects(
        &errors,
        &[&format!(
            "{}: ex1 is recorded at {}",
            StepId::from_index(j),
            StepId::from_index(i)
        )],
    );
    assert_rejects(
        &errors,
        &[&format!(
            "{}: compute set 1 ({name}) is recorded at {}",
            StepId::from_index(i),
            StepId::from_index(j)
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_compute_set_listed_twice() {
    let b = small();
    let mut sel = b.selected.clone();
    // Compute set 0 again where compute set 1 stands.
    let (first, twin) = (
        position(&sel, Step::Compute(0)),
        position(&sel, Step::Compute(1)),
    );
    sel.steps[twin] = Step::Compute(0);
    let (name, lost) = (&sel.compute_sets[0].name, &sel.compute_sets[1].name);
    let errors = select_errors(b, &sel);
    assert_rejects(
        &errors,
        &[&format!("steps: compute set 0 ({name}) is listed 2 times")],
    );
    assert_rejects(
        &errors,
        &[&format!(
            "{}: compute set 0 ({name}) is recorded at {}",
            StepId::from_index(twin),
            StepId::from_index(first)
        )],
    );
    assert_rejects(
        &errors,
        &[&format!("steps: compute set 1 ({lost}) is listed 0 times")],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_exchange_phase_missing_from_the_steps() {
    let b = small();
    let mut sel = b.selected.clone();
    let last = ExchangeId::from_index(sel.exchanges.len() - 1);
    let at = position(&sel, Step::Exchange(last));
    sel.steps.remove(at);
    let errors = select_errors(b, &sel);
    assert_rejects(&errors, &[&format!("steps: {last} is listed 0 times")]);
    // The step after it moves up one.
    let Step::Compute(c) = sel.steps[at] else {
        panic!("a compute set follows {last}");
    };
    assert_rejects(
        &errors,
        &[
            &format!("{}: compute set {c}", StepId::from_index(at)),
            &format!("is recorded at {}", StepId::from_index(at + 1)),
        ],
    );
    let n = sel.steps.len();
    assert_rejects(
        &errors,
        &[&format!("estimate: {} step estimates for {n} steps", n + 1)],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_step_naming_no_exchange_phase() {
    let b = small();
    let mut sel = b.selected.clone();
    let n = sel.exchanges.len();
    sel.steps[0] = Step::Exchange(ExchangeId::from_index(n));
    let errors = select_errors(b, &sel);
    assert_rejects(
        &errors,
        &[&format!(
            "step0: ex{n} does not exist; there are {n} exchange phases"
        )],
    );
    assert_rejects(&errors, &["steps: ex0 is listed 0 times"]);
}

#[test]
fn select_finalist_verifier_rejects_a_step_naming_no_compute_set() {
    let b = small();
    let mut sel = b.selected.clone();
    let at = position(&sel, Step::Compute(0));
    let n = sel.compute_sets.len();
    sel.steps[at] = Step::Compute(u32::MAX);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{}: compute set {} does not exist; there are {n} compute sets",
            StepId::from_index(at),
            u32::MAX
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_exchange_phase_under_another_id() {
    let b = small();
    let mut sel = b.selected.clone();
    sel.exchanges[2].id = ExchangeId(3);
    let at = StepId::from_index(position(&sel, Step::Exchange(ExchangeId(2))));
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!("{at}: ex2 records the id ex3")],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_estimate_one_step_short() {
    let b = small();
    let mut sel = b.selected.clone();
    sel.estimate.steps.pop();
    let n = sel.steps.len();
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!("estimate: {} step estimates for {n} steps", n - 1)],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_buffer_beyond_the_tiles() {
    let b = small();
    let mut sel = b.selected.clone();
    let id = first_of(&sel, BufferClass::WeightHome);
    let beyond = TileId(b.target.tiles);
    sel.buffers[id.index()].tile = beyond;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{id}: on {beyond} beyond the {} tiles",
            b.target.tiles
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_empty_lifetime() {
    let b = small();
    let mut sel = b.selected.clone();
    let id = first_of(&sel, BufferClass::Output);
    let buf = &mut sel.buffers[id.index()];
    buf.first_step = StepId(buf.last_step.0 + 1);
    let (first, last) = (buf.first_step, buf.last_step);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!("{id}: lifetime {first}..{last} is empty")],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_empty_rectangle() {
    let b = small();
    let mut sel = b.selected.clone();
    let id = first_of(&sel, BufferClass::InputHome);
    let rect = &mut sel.buffers[id.index()].rect;
    rect.row1 = rect.row0;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!("{id}: empty rectangle")],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_stride_off_the_row_alignment() {
    let b = small();
    let mut sel = b.selected.clone();
    let id = first_of(&sel, BufferClass::BPanel);
    sel.buffers[id.index()].stride += 1;
    let stride = sel.buffers[id.index()].stride;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{id}: stride {stride} elements breaks its 16-byte row alignment"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_transfer_reading_a_dead_buffer() {
    let b = small();
    let mut sel = b.selected.clone();
    let (e, t) = later_transfer(&sel, |_, _| true);
    let ex = &sel.exchanges[e];
    let (id, step, source) = (ex.id, ex.step, ex.transfers[t].source_buffer);
    let src = &mut sel.buffers[source.index()];
    assert!(src.first_step < step);
    src.last_step = StepId(step.0 - 1);
    let dead = src.last_step;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{id}: source {source} dies at {dead} before it is sent"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_transfer_sending_before_its_source_is_written() {
    let b = small();
    let mut sel = b.selected.clone();
    let (e, t) = later_transfer(&sel, |_, _| true);
    let ex = &sel.exchanges[e];
    let (id, step, source) = (ex.id, ex.step, ex.transfers[t].source_buffer);
    sel.buffers[source.index()].first_step = step;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{id}: source {source} is written in {step} after it is sent"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_panel_its_transfers_do_not_cover() {
    let b = small();
    let mut sel = b.selected.clone();
    let t = &mut sel.exchanges[0].transfers[0];
    let lost = t.destinations.remove(0);
    let buf = &sel.buffers[lost.buffer.index()];
    assert!(matches!(
        buf.class,
        BufferClass::APanel | BufferClass::BPanel | BufferClass::BiasPanel
    ));
    assert_rejects(
        &select_errors(b, &sel),
        &[
            &format!("{} on {}: incoming transfers cover", lost.buffer, lost.tile),
            &format!("of {} elements", buf.rect.elements()),
        ],
    );
}

#[test]
fn select_finalist_verifier_rejects_two_transfers_filling_the_same_part_of_a_panel() {
    let b = small();
    let mut sel = b.selected.clone();
    let twin = sel.exchanges[0].transfers[0].clone();
    sel.exchanges[0].transfers.push(twin.clone());
    // Problems are listed by buffer: the destination buffer first in order shows.
    let d = *twin.destinations.iter().min_by_key(|d| d.buffer).unwrap();
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{} on {}: transfers {} and {} overlap",
            d.buffer, d.tile, twin.rect, twin.rect
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_panel_no_transfer_fills() {
    let b = small();
    let mut sel = b.selected.clone();
    let lost = sel.exchanges[0].transfers[0].destinations[0];
    for t in sel.exchanges.iter_mut().flat_map(|ex| &mut ex.transfers) {
        t.destinations.retain(|d| d.buffer != lost.buffer);
    }
    let elements = sel.buffers[lost.buffer.index()].rect.elements();
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{} on {}: incoming transfers cover 0 of {elements} elements",
            lost.buffer, lost.tile
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_panel_filled_again_in_a_later_phase() {
    let b = small();
    let mut sel = b.selected.clone();
    let twin = sel.exchanges[0].transfers[0].clone();
    let d = twin.destinations[0];
    let again = Transfer {
        destinations: vec![d],
        ..twin.clone()
    };
    sel.exchanges[1].transfers.push(again);
    // The rectangles of both phases are checked together.
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{} on {}: transfers {} and {} overlap",
            d.buffer, d.tile, twin.rect, twin.rect
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_transfer_outside_its_source() {
    let b = small();
    let mut sel = b.selected.clone();
    let t = &sel.exchanges[0].transfers[0];
    let src = sel.buffers[t.source_buffer.index()].clone();
    let t = &mut sel.exchanges[0].transfers[0];
    t.rect.col1 = src.rect.col1 + 1;
    let source = t.source;
    assert_rejects(
        &select_errors(b, &sel),
        &[
            &format!("ex0 transfer from {source} {}:", src.id),
            &format!("not inside {}", src.rect),
        ],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_transfer_of_the_wrong_size() {
    let b = small();
    let mut sel = b.selected.clone();
    sel.exchanges[2].transfers[3].bytes += 2;
    assert_rejects(&select_errors(b, &sel), &["ex2: transfer bytes"]);
}

#[test]
fn select_finalist_verifier_rejects_a_destination_stored_in_another_order() {
    let b = small();
    let mut sel = b.selected.clone();
    let t = sel.exchanges[0].transfers[0].clone();
    let d = t.destinations[0];
    let dst = &mut sel.buffers[d.buffer.index()];
    dst.transposed = !dst.transposed;
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "ex0 transfer {} -> {}: {} and {} are stored in different orders",
            t.source, d.tile, t.source_buffer, d.buffer
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_destination_born_before_its_phase() {
    let b = small();
    let mut sel = b.selected.clone();
    let (e, t) = later_transfer(&sel, |_, _| true);
    let ex = &sel.exchanges[e];
    let (id, step, d) = (ex.id, ex.step, ex.transfers[t].destinations[0]);
    sel.buffers[d.buffer.index()].first_step = StepId(step.0 - 1);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{id}: destination {} is not born in this phase",
            d.buffer
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_operand_read_after_it_dies() {
    let b = small();
    let mut sel = b.selected.clone();
    // An A panel lives from its exchange phase to the compute step that reads it.
    let id = first_of(&sel, BufferClass::APanel);
    let buf = &mut sel.buffers[id.index()];
    assert!(buf.first_step < buf.last_step);
    let read = buf.last_step;
    buf.last_step = buf.first_step;
    let (tile, born) = (buf.tile, buf.first_step);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{read}: vertex on {tile} uses {id} outside its lifetime {born}..{born}"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_amp_weights_outside_interleaved_memory() {
    let b = small();
    let mut sel = b.selected.clone();
    let id = first_of(&sel, BufferClass::BPanel);
    let buf = &mut sel.buffers[id.index()];
    buf.interleaved = false;
    let (tile, read) = (buf.tile, buf.last_step);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{read}: AMP on {tile} has operands outside interleaved memory"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_amp_partials_sharing_their_memory_elements() {
    let b = small();
    let mut sel = b.selected.clone();
    // Interleaved still, but of a kind that owns no memory elements of its own.
    let id = first_of(&sel, BufferClass::Partials);
    let buf = &mut sel.buffers[id.index()];
    buf.class = BufferClass::Probabilities;
    let (tile, written) = (buf.tile, buf.first_step);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{written}: AMP on {tile} writes partials that do not own their memory elements"
        )],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_input_piece_the_host_never_streams() {
    let b = small();
    let mut sel = b.selected.clone();
    let lost = sel.run_inputs.remove(0).buffer;
    assert_rejects(
        &select_errors(b, &sel),
        &["run inputs:", &lost.to_string(), "is streamed 0 times"],
    );
}

#[test]
fn select_finalist_verifier_rejects_a_weight_streamed_into_another_rectangle() {
    let b = small();
    let mut sel = b.selected.clone();
    let t = &mut sel.initialize[0];
    t.rect.row1 += 1;
    let buffer = t.buffer;
    assert_rejects(
        &select_errors(b, &sel),
        &["initialize:", &format!("into {buffer}")],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_output_the_host_reads_in_part() {
    let b = small();
    let mut sel = b.selected.clone();
    let value = sel.run_outputs.pop().expect("an output").value;
    assert_rejects(
        &select_errors(b, &sel),
        &["run outputs:", &value.to_string(), "is not covered once"],
    );
}

#[test]
fn select_finalist_verifier_rejects_an_output_never_written_on_the_device() {
    let b = small();
    let mut sel = b.selected.clone();
    let out = sel.run_outputs[0].buffer;
    for cs in &mut sel.compute_sets {
        cs.vertices.retain(|vx| {
            !vx.kind
                .operands()
                .iter()
                .any(|u| u.access.writes() && u.operand.buffer == out)
        });
    }
    assert_rejects(
        &select_errors(b, &sel),
        &[
            "run outputs:",
            &out.to_string(),
            "is never written on the device",
        ],
    );
}
