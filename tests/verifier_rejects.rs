//! Every phase's verifier rejects a damaged artifact, and says what is wrong and where. The small
//! presets are built once per test binary through the library's phases, and every verifier accepts
//! what they hold (`common::pipeline`); each test damages a copy of one artifact in one named way and
//! asserts that the verifier reports that damage, naming the tile, buffer, transfer or phase.

mod common;

use common::pipeline::{Built, small, small_attention};
use ipu_codegen::exchange::{Piece, Schedule};
use ipu_codegen::ids::{BufferId, StepId, TileId};
use ipu_codegen::ir::{
    AttentionPartition, BufferClass, ExchangeStorage, Grid, Mid, Operator, Package, Partition,
    Placement, Selected, TileCode,
};
use ipu_codegen::isa::{Instr, TileProgram};
use ipu_codegen::stages::{
    build_images, emit, lower_exchanges, place_storage, plan_exchange_storage, select_finalist,
};

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

// ---------------------------------------------------------------------------------------------------
// lower_mid: operators cover the graph, partitions cover their operators and fit the target.

fn lower_mid_errors(b: &Built, mid: &Mid) -> Vec<String> {
    mid.verify(&b.graph, &b.target)
}

/// The grid of operator `op` in the first finalist.
fn grid(mid: &mut Mid, op: usize) -> &mut Grid {
    match &mut mid.finalists[0].partitions[op] {
        Partition::Grid(g) => g,
        p => panic!("op{op} of the small MLP is partitioned as {p}"),
    }
}

fn matmul_shape(mid: &Mid, op: usize) -> (u32, u32, u32) {
    match &mid.operators[op] {
        Operator::MatMul(o) => (o.m, o.k, o.n),
        o => panic!("{} is not a matmul", o.id()),
    }
}

#[test]
fn lower_mid_verifier_rejects_an_operator_covering_no_operation() {
    let b = small();
    let mut mid = b.mid.clone();
    let Operator::MatMul(op) = &mut mid.operators[0] else {
        panic!("the small MLP's first operator is a matmul");
    };
    let orphans = std::mem::take(&mut op.covers);
    assert!(!orphans.is_empty());
    let errors = lower_mid_errors(b, &mid);
    for o in orphans {
        assert_rejects(
            &errors,
            &[&format!("{o}: covered by 0 operators, expected 1")],
        );
    }
}

#[test]
fn lower_mid_verifier_rejects_an_operation_covered_twice() {
    let b = small();
    let mut mid = b.mid.clone();
    let twin = mid.operators[1].clone();
    mid.operators.push(twin.clone());
    let errors = lower_mid_errors(b, &mid);
    for o in twin.covers() {
        assert_rejects(
            &errors,
            &[&format!("{o}: covered by 2 operators, expected 1")],
        );
    }
}

#[test]
fn lower_mid_verifier_rejects_a_mid_without_finalists() {
    let b = small();
    let mut mid = b.mid.clone();
    mid.finalists.clear();
    assert_rejects(&lower_mid_errors(b, &mid), &["no finalist"]);
}

#[test]
fn lower_mid_verifier_rejects_a_finalist_missing_a_partition() {
    let b = small();
    let mut mid = b.mid.clone();
    let last = mid.finalists.len() - 1;
    mid.finalists[last].partitions.pop();
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!("finalist {last}: partition count")],
    );
}

#[test]
fn lower_mid_verifier_rejects_row_blocks_short_of_the_output() {
    let b = small();
    let mut mid = b.mid.clone();
    let (m, _, _) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    assert!(g.row_blocks > 1, "{g:?}");
    g.row_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[
            "finalist 0 op0: row blocks",
            &format!("do not tile {m} rows"),
        ],
    );
}

#[test]
fn lower_mid_verifier_rejects_column_blocks_short_of_the_output() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, _, n) = matmul_shape(&mid, 1);
    let g = grid(&mut mid, 1);
    assert!(g.col_blocks > 1, "{g:?}");
    g.col_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[
            "finalist 0 op1: column blocks",
            &format!("do not tile {n} columns"),
        ],
    );
}

#[test]
fn lower_mid_verifier_rejects_depth_blocks_short_of_the_reduction() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, k, _) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    assert!(g.depth_blocks > 1, "{g:?}");
    g.depth_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: depth blocks", &format!("do not tile {k}")],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_block_width_off_the_amp_block() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, _, n) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    // Still covering the columns, one short of the AMP's width.
    g.block_cols -= 1;
    g.col_blocks = n.div_ceil(g.block_cols);
    let width = g.block_cols;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!(
            "finalist 0 op0: block width {width} is not a multiple of {}",
            b.target.amp_block_width
        )],
    );
}

#[test]
fn lower_mid_verifier_rejects_an_estimate_beyond_tile_memory() {
    let b = small();
    let mut mid = b.mid.clone();
    mid.finalists[0].operators[2].interleaved_bytes =
        u64::from(b.target.memory_end - b.target.memory_base);
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0: estimated memory does not fit"],
    );
}

fn attention_partition(mid: &mut Mid) -> &mut AttentionPartition {
    match &mut mid.finalists[0].partitions[0] {
        Partition::Attention(p) => p,
        p => panic!("the small attention is partitioned as {p}"),
    }
}

#[test]
fn lower_mid_verifier_rejects_an_empty_key_sub_block() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    attention_partition(&mut mid).sub_block = 0;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: key sub-block 0"],
    );
}

#[test]
fn lower_mid_verifier_rejects_miscounted_attention_cells() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    attention_partition(&mut mid).tiles_per_group += 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0:", "miscounts its cells"],
    );
}

#[test]
fn lower_mid_verifier_rejects_query_blocks_short_of_the_queries() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    let p = attention_partition(&mut mid);
    assert!(p.query_blocks > 1, "{p:?}");
    p.query_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0:", "does not tile"],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_partition_over_more_tiles_than_the_target() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    let p = attention_partition(&mut mid);
    p.groups = b.target.tiles / p.tiles_per_group + 1;
    let tiles = p.tiles();
    assert!(tiles > b.target.tiles);
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!("finalist 0 op0: {tiles} tiles")],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_partition_of_another_kind() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    mid.finalists[0].partitions[0] = small().mid.finalists[0].partitions[0];
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: partition of another kind"],
    );
}

// ---------------------------------------------------------------------------------------------------
// select_finalist: buffers, lifetimes, transfers and the panels they fill.

fn select_errors(b: &Built, sel: &Selected) -> Vec<String> {
    select_finalist::verify(sel, &b.target)
}

/// The first buffer of `class`.
fn first_of(sel: &Selected, class: BufferClass) -> BufferId {
    sel.buffers
        .iter()
        .find(|b| b.class == class)
        .unwrap_or_else(|| panic!("no {class:?} buffer"))
        .id
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
    buf.class = BufferClass::APanel;
    let (tile, read) = (buf.tile, buf.last_step);
    assert_rejects(
        &select_errors(b, &sel),
        &[&format!(
            "{read}: AMP on {tile} has operands outside interleaved memory"
        )],
    );
}

// ---------------------------------------------------------------------------------------------------
// plan_exchange_storage: runs inside their buffers, rows written once and whole.

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

// ---------------------------------------------------------------------------------------------------
// lower_exchanges: the schedule checker re-derives every port's occupancy and every word's arrival.

/// Phase 0 of the small MLP: multicast transfers, scheduled narrow, ending above the lower bound.
fn schedule0(b: &Built) -> Schedule {
    let s = b.exchanges.phases[0].schedule.clone();
    assert!(s.pieces.iter().all(|p| !p.wide), "{}", s.kind);
    assert!(s.horizon > s.lower_bound);
    s
}

/// The destination tiles a piece of phase `e` reaches.
fn reached(b: &Built, e: usize, p: &Piece) -> Vec<TileId> {
    let t = &b.selected.exchanges[e].transfers[p.transfer as usize];
    let d = &t.destinations;
    let (a, z) = p
        .destinations
        .map_or((0, d.len()), |(a, z)| (a as usize, z as usize));
    d[a..z].iter().map(|d| d.tile).collect()
}

#[test]
fn lower_exchanges_verifier_rejects_a_piece_of_an_unknown_transfer() {
    let b = small();
    let mut s = schedule0(b);
    let n = b.selected.exchanges[0].transfers.len() as u32;
    s.pieces[4].transfer = n;
    let start = s.pieces[4].start;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!("piece at cycle {start} names transfer {n} of {n}")],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_piece_past_its_transfer_words() {
    let b = small();
    let mut s = schedule0(b);
    let p = &mut s.pieces[9];
    let words = b.selected.exchanges[0].pattern(&b.target).transfers[p.transfer as usize].words;
    p.words = words - p.word + 1;
    let (t, word, end) = (p.transfer, p.word, p.word + p.words);
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!(
            "transfer {t}: piece of words {word}..{end} outside its {words} words"
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_missing_piece_so_words_never_arrive() {
    let b = small();
    let mut s = schedule0(b);
    let p = s.pieces.remove(17);
    // Problems are listed by transfer and destination: the piece's first destination comes first.
    let tile = reached(b, 0, &p)[0];
    assert_rejects(
        &b.check_schedule(0, &s),
        &[
            &format!("transfer {} to {tile}: words", p.transfer),
            "never arrive",
        ],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_doubled_piece_so_words_arrive_twice() {
    let b = small();
    let mut s = schedule0(b);
    let p = s.pieces[23];
    s.pieces.insert(24, p);
    let tile = reached(b, 0, &p)[0];
    let errors = b.check_schedule(0, &s);
    assert_rejects(
        &errors,
        &[
            &format!("transfer {} to {tile}: words", p.transfer),
            "arrive twice",
        ],
    );
    let source = b.selected.exchanges[0].transfers[p.transfer as usize].source;
    assert_rejects(
        &errors,
        &[&format!(
            "{source} sends transfers {t} and {t} in the same cycle {}",
            p.start,
            t = p.transfer
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_two_pieces_on_one_sender_at_once() {
    let b = small();
    let mut s = schedule0(b);
    let ex = &b.selected.exchanges[0];
    let source = |i: usize| ex.transfers[s.pieces[i].transfer as usize].source;
    let (i, j) = (0..s.pieces.len())
        .flat_map(|i| (i + 1..s.pieces.len()).map(move |j| (i, j)))
        .find(|&(i, j)| source(i) == source(j) && s.pieces[i].start != s.pieces[j].start)
        .expect("a tile that sends two pieces");
    let tile = source(i);
    // The later piece moves onto the earlier one's cycle.
    let start = s.pieces[i].start;
    s.pieces[j].start = start;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[
            &format!("{tile} sends transfers"),
            &format!("in the same cycle {start}"),
        ],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_two_pieces_on_one_receiver_at_once() {
    let b = small();
    let mut s = schedule0(b);
    let ex = &b.selected.exchanges[0];
    let source = |i: usize| ex.transfers[s.pieces[i].transfer as usize].source;
    // Two pieces from different senders into one tile.
    let (i, j, tile) = (0..s.pieces.len())
        .flat_map(|i| (i + 1..s.pieces.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| source(i) != source(j) && s.pieces[i].start != s.pieces[j].start)
        .find_map(|(i, j)| {
            let to_j = reached(b, 0, &s.pieces[j]);
            reached(b, 0, &s.pieces[i])
                .into_iter()
                .find(|t| to_j.contains(t))
                .map(|t| (i, j, t))
        })
        .expect("a tile that receives from two senders");
    s.pieces[j].start = s.pieces[i].start;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!("{tile} receives transfers"), "in the same cycle"],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_piece_for_destinations_its_transfer_lacks() {
    let b = small();
    let mut s = schedule0(b);
    let p = &mut s.pieces[31];
    let n = b.selected.exchanges[0].transfers[p.transfer as usize]
        .destinations
        .len() as u32;
    p.destinations = Some((0, n + 1));
    let t = p.transfer;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!(
            "transfer {t}: piece for destinations 0..{} of {n}",
            n + 1
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_horizon_before_the_last_arrival() {
    let b = small();
    let mut s = schedule0(b);
    s.horizon -= 1;
    let horizon = s.horizon;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!("after the horizon {horizon}")],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_horizon_below_the_lower_bound() {
    // The attention's gathering phase ends at its bound with few pieces arriving last, so the
    // problem is listed after theirs (a verifier lists 20 problems).
    let b = small_attention();
    let mut s = b.exchanges.phases[0].schedule.clone();
    let bound = s.lower_bound;
    s.horizon = bound - 1;
    assert_rejects(
        &b.check_schedule(0, &s),
        &[&format!(
            "horizon {} below the lower bound {bound}",
            bound - 1
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_a_misrecorded_lower_bound() {
    let b = small();
    let mut s = b.exchanges.phases[1].schedule.clone();
    let bound = s.lower_bound;
    s.lower_bound += 1;
    assert_rejects(
        &b.check_schedule(1, &s),
        &[&format!(
            "records lower bound {}, the pattern's is {bound}",
            bound + 1
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_the_schedule_of_another_phase() {
    let b = small();
    // Phase 1 sends the partials of op0's depth blocks; phase 0 gathers its panels.
    let s = b.exchanges.phases[0].schedule.clone();
    let n = b.selected.exchanges[1].transfers.len();
    assert!(b.selected.exchanges[0].transfers.len() > n);
    assert_rejects(
        &b.check_schedule(1, &s),
        &["names transfer", &format!("of {n}")],
    );
}

// ---------------------------------------------------------------------------------------------------
// place_storage: every buffer in tile memory, in its region, aligned, apart from those live with it.

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

// ---------------------------------------------------------------------------------------------------
// emit: a sync per superstep on every tile, sends and receives that match, runs in tile memory.

fn code_errors(b: &Built, code: &TileCode) -> Vec<String> {
    emit::verify(code, &b.selected, &b.target)
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
        for (at, i) in p.instrs.iter().enumerate() {
            match i {
                Instr::Exchange { phase: id, .. } => phase = Some(id.0),
                Instr::Sync => phase = None,
                Instr::Send { .. } if sends => out.push(Located {
                    tile,
                    at,
                    phase: phase.expect("sends follow an exchange marker"),
                }),
                Instr::Receive { .. } if !sends => out.push(Located {
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

/// The receives of the send at `send`: (tile, index) of each.
fn receivers_of(code: &TileCode, send: &Located) -> Vec<(usize, usize)> {
    let Instr::Send { start, .. } = code.tiles[send.tile].instrs[send.at] else {
        unreachable!()
    };
    exchange_instrs(code, false)
        .into_iter()
        .filter(|r| {
            let Instr::Receive { from, sent, .. } = code.tiles[r.tile].instrs[r.at] else {
                unreachable!()
            };
            r.phase == send.phase && from.index() == send.tile && sent == start
        })
        .map(|r| (r.tile, r.at))
        .collect()
}

#[test]
fn emit_verifier_rejects_a_tile_missing_a_sync() {
    let b = small();
    let mut code = b.code.clone();
    let p = &mut code.tiles[100];
    let last = p
        .instrs
        .iter()
        .rposition(|i| matches!(i, Instr::Sync))
        .unwrap();
    p.instrs.remove(last);
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
    code.tiles[7].instrs.insert(0, Instr::Sync);
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
    let Instr::Send { run, .. } = &mut code.tiles[s.tile].instrs[s.at] else {
        unreachable!()
    };
    run.offset = b.target.memory_end;
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{}: send run", s.tile), "outside memory"],
    );
}

#[test]
fn emit_verifier_rejects_a_receive_run_outside_memory() {
    let b = small_attention();
    let mut code = b.code.clone();
    let r = &exchange_instrs(&code, false)[20];
    let Instr::Receive { run, .. } = &mut code.tiles[r.tile].instrs[r.at] else {
        unreachable!()
    };
    // Below the tile's memory.
    run.offset = b.target.memory_base - 4;
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{}: receive run", r.tile), "outside memory"],
    );
}

#[test]
fn emit_verifier_rejects_a_receive_of_a_cycle_nothing_is_sent() {
    let b = small();
    let mut code = b.code.clone();
    let r = &exchange_instrs(&code, false)[30];
    let Instr::Receive { from, sent, .. } = &mut code.tiles[r.tile].instrs[r.at] else {
        unreachable!()
    };
    *sent += 1;
    let (from, sent) = (*from, *sent);
    assert_rejects(
        &code_errors(b, &code),
        &[
            &format!("ex{} tile{}: receives bytes", r.phase, r.tile),
            &format!("from {from} sent at cycle {sent}, which sends no such thing"),
        ],
    );
}

#[test]
fn emit_verifier_rejects_a_receive_of_more_bytes_than_sent() {
    let b = small();
    let mut code = b.code.clone();
    let r = &exchange_instrs(&code, false)[40];
    let Instr::Receive {
        from,
        sent,
        skip,
        bytes,
        ..
    } = &mut code.tiles[r.tile].instrs[r.at]
    else {
        unreachable!()
    };
    *bytes += 4;
    let (from, sent, skip, end) = (*from, *sent, *skip, *skip + *bytes);
    assert_rejects(
        &code_errors(b, &code),
        &[
            &format!("ex{} tile{}: receives bytes", r.phase, r.tile),
            &format!(
                "bytes {skip}..{end} from {from} sent at cycle {sent}, which sends no such thing"
            ),
        ],
    );
}

#[test]
fn emit_verifier_rejects_a_missing_send() {
    let b = small();
    let mut code = b.code.clone();
    // A send with few receivers, so that every one of their problems is listed.
    let (s, receivers) = exchange_instrs(&code, true)
        .into_iter()
        .skip(50)
        .map(|s| {
            let r = receivers_of(&code, &s);
            (s, r)
        })
        .find(|(_, r)| (1..=10).contains(&r.len()))
        .expect("a send with at most ten receivers");
    code.tiles[s.tile].instrs.remove(s.at);
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
    let s = exchange_instrs(&code, true).swap_remove(60);
    let Instr::Send { start, .. } = code.tiles[s.tile].instrs[s.at] else {
        unreachable!()
    };
    let mut receivers = receivers_of(&code, &s);
    assert!(!receivers.is_empty());
    // Removed from the back, so earlier indices stay put.
    receivers.sort_unstable();
    for (tile, at) in receivers.into_iter().rev() {
        code.tiles[tile].instrs.remove(at);
    }
    assert_rejects(
        &code_errors(b, &code),
        &[&format!(
            "ex{} tile{}: send at cycle {start} has no receiver",
            s.phase, s.tile
        )],
    );
}

// ---------------------------------------------------------------------------------------------------
// build_images: every code image decodes to its program and fits the space reserved for it.

fn package_errors(b: &Built, package: &Package) -> Vec<String> {
    build_images::verify(package, &b.code, &b.placement)
}

/// A tile that runs more than syncs.
fn busy_tile(b: &Built) -> usize {
    b.code
        .tiles
        .iter()
        .position(|p| p.instrs.len() > p.syncs())
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
        &[&format!(
            "tile{t}: code image does not decode to its program"
        )],
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
        &["tile3: code image does not decode to its program"],
    );
}

#[test]
fn build_images_verifier_rejects_an_empty_code_image() {
    let b = small_attention();
    let mut package = b.package.clone();
    package.tiles[11].code.clear();
    assert_rejects(
        &package_errors(b, &package),
        &["tile11: code image does not decode to its program"],
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
        &[&format!(
            "tile{t}: code image does not decode to its program"
        )],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_missing_a_sync() {
    let b = small();
    let mut package = b.package.clone();
    let mut program: TileProgram = b.code.tiles[5].clone();
    let last = program
        .instrs
        .iter()
        .rposition(|i| matches!(i, Instr::Sync))
        .unwrap();
    program.instrs.remove(last);
    package.tiles[5].code = program.encode();
    assert_rejects(
        &package_errors(b, &package),
        &["tile5: code image does not decode to its program"],
    );
}

#[test]
fn build_images_verifier_rejects_a_code_image_sending_from_another_address() {
    let b = small();
    let mut package = b.package.clone();
    let s = &exchange_instrs(&b.code, true)[0];
    let mut program = b.code.tiles[s.tile].clone();
    let Instr::Send { run, .. } = &mut program.instrs[s.at] else {
        unreachable!()
    };
    run.offset += 8;
    package.tiles[s.tile].code = program.encode();
    assert_rejects(
        &package_errors(b, &package),
        &[&format!(
            "tile{}: code image does not decode to its program",
            s.tile
        )],
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
fn lower_exchanges_verifier_rejects_a_missing_schedule() {
    let b = small();
    let mut exchanges = b.exchanges.clone();
    exchanges.phases.pop();
    let errors = lower_exchanges::verify(&exchanges, &b.selected, &b.target);
    let n = b.selected.exchanges.len();
    assert_rejects(
        &errors,
        &[&format!(
            "{} schedules for the selection's {n} exchange phases",
            n - 1
        )],
    );
}

#[test]
fn lower_exchanges_verifier_rejects_schedules_out_of_phase_order() {
    let b = small();
    let mut exchanges = b.exchanges.clone();
    exchanges.phases.swap(0, 1);
    let errors = lower_exchanges::verify(&exchanges, &b.selected, &b.target);
    assert_rejects(&errors, &["the schedule of ex1 stands where ex0 is"]);
}

// ---------------------------------------------------------------------------------------------------
// Damage the verifiers once let through: host streams, rows, tile counts, vertices, images.

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

/// The first tile with a compute vertex: its index, the vertex's position and its superstep.
fn first_vertex(code: &TileCode) -> (usize, usize, usize) {
    code.tiles
        .iter()
        .enumerate()
        .find_map(|(t, p)| {
            let at = p
                .instrs
                .iter()
                .position(|i| matches!(i, Instr::Vertex(_)))?;
            let step = p.instrs[..at]
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
    code.tiles[t].instrs.remove(at);
    assert_rejects(
        &code_errors(b, &code),
        &[&format!("tile{t} step{step}: vertices")],
    );
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
            let at = p
                .instrs
                .iter()
                .position(|i| matches!(i, Instr::Exchange { .. }))?;
            matches!(p.instrs.get(at + 1), Some(Instr::Send { .. })).then(|| {
                let step = p.instrs[..at]
                    .iter()
                    .filter(|i| matches!(i, Instr::Sync))
                    .count();
                (t, at, step)
            })
        })
        .expect("a tile whose exchange phase opens with a send");
    code.tiles[t].instrs.remove(at);
    assert_rejects(
        &code_errors(b, &code),
        &[
            &format!("tile{t} step{step}: send at cycle"),
            "outside an exchange phase",
        ],
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
        &[&format!(
            "tile{t}: code image does not decode to its program"
        )],
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
