//! `lower_exchanges`' verifier: a schedule per exchange phase of the selection, in phase order, each
//! passing the independent checker, which re-derives every port's occupancy and every word's arrival
//! from the phase's pattern: every piece within its transfer's words and destinations, no tile sending
//! or receiving two pieces in one cycle, every word arriving once at every destination by the
//! horizon, the horizon at least the lower bound and the lower bound the pattern's own.
//!
//! The tests damage the schedules: one lost or two swapped; a piece of an unknown transfer, past its
//! words or for destinations its transfer lacks; a piece lost or doubled; two pieces on one sender or
//! one receiver at once; a horizon before the last arrival or below the lower bound; a misrecorded lower
//! bound; the schedule of another phase.

use crate::assert_rejects;
use crate::common::pipeline::{Built, small, small_attention};
use ipu_codegen::exchange::{Piece, Schedule};
use ipu_codegen::ids::TileId;
use ipu_codegen::stages::lower_exchanges;

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
    // The attention's gathering phase ends at its bound: its pieces arriving last are problems too,
    // listed after the schedule's own figures (a verifier lists 20 problems).
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
    // The schedule of a phase with more transfers than another, in that other's place.
    let count = |e: usize| b.selected.exchanges[e].transfers.len();
    let phases = b.selected.exchanges.len();
    let (from, to) = (0..phases)
        .flat_map(|a| (0..phases).map(move |z| (a, z)))
        .find(|&(a, z)| count(a) > count(z))
        .expect("two phases of different transfer counts");
    let s = b.exchanges.phases[from].schedule.clone();
    let n = count(to);
    assert_rejects(
        &b.check_schedule(to, &s),
        &["names transfer", &format!("of {n}")],
    );
}
