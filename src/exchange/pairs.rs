//! Supertile pairs in the tight cover: the pattern over pairs, its receivers merged, and the plan of
//! transfers run wide.
//!
//! Contract: [`over_pairs`] maps a pattern onto its supertile pairs (pair `k` as tile `k`, double
//! words), and [`pair_cover`] schedules that with the tight cover ([`super::cover`]) and maps the
//! pieces back ([`widen_pieces`]): every piece wide, each group of pairs a range of the transfer's
//! destinations, so that the pieces are a schedule of the original pattern; with multicasts whole,
//! the pattern over pairs may have its identical receivers merged first ([`merge_receivers`]: the
//! same transfers, numbers and senders, so whole pieces map back alike). [`wide_plan`] marks,
//! per receiving pair that would miss the bound receiving narrow, the unicast transfers that run
//! wide throughout in `planned-cover` (none without pairs). Each depends on its arguments alone.

use super::cover::{CoverOptions, tight_cover};
use super::pieces::sorted;
use super::{Overheads, Pattern, PatternTransfer, Piece};
use std::cmp::Reverse;

/// The pattern over supertile pairs: pair `k` is tile `k`, and a transfer of `w` words becomes one of
/// `ceil(w/2)` double words from its source's pair to the distinct pairs of its destinations, in order
/// of first appearance. Every piece of a schedule of it runs wide ([`widen_pieces`]). Also returns which
/// transfers must stay whole: those whose destinations' mates are not next to each other, so that a
/// group of pairs is no range of destinations.
pub(super) fn over_pairs(pattern: &Pattern) -> (Pattern, Vec<bool>) {
    let mut whole = Vec::with_capacity(pattern.transfers.len());
    let transfers = pattern
        .transfers
        .iter()
        .map(|t| {
            let mut destinations: Vec<u32> = Vec::with_capacity(t.destinations.len());
            let mut runs = 0;
            for (i, &d) in t.destinations.iter().enumerate() {
                if i == 0 || t.destinations[i - 1] / 2 != d / 2 {
                    runs += 1;
                }
                if !destinations.contains(&(d / 2)) {
                    destinations.push(d / 2);
                }
            }
            whole.push(runs != destinations.len());
            PatternTransfer {
                source: t.source / 2,
                destinations,
                words: t.words.div_ceil(2),
            }
        })
        .collect();
    (Pattern { transfers }, whole)
}

/// The wide pieces of `pattern` for a schedule of `over_pairs(pattern)`.
fn widen_pieces(pattern: &Pattern, pieces: Vec<Piece>) -> Vec<Piece> {
    pieces
        .into_iter()
        .map(|p| {
            let t = &pattern.transfers[p.transfer as usize];
            // Destination ranges: the collapsed index `j` is the `j`-th run of mates.
            let destinations = p.destinations.map(|(a, b)| {
                let mut starts = (0..t.destinations.len())
                    .filter(|&i| i == 0 || t.destinations[i - 1] / 2 != t.destinations[i] / 2)
                    .map(|i| i as u32)
                    .chain(std::iter::once(t.destinations.len() as u32));
                let first = starts.clone().nth(a as usize).expect("a run per pair");
                let last = starts.nth(b as usize).expect("a run per pair");
                (first, last)
            });
            let word = 2 * p.word;
            Piece {
                start: p.start,
                transfer: p.transfer,
                destinations,
                word,
                words: (2 * p.words).min(t.words - word),
                wide: true,
            }
        })
        .collect()
}

/// The unicast transfers that run wide throughout in `planned-cover`: at each receiving pair whose
/// busier tile would miss the bound receiving narrow, the number of that tile's largest transfers
/// to it alone that leaves the less to its busier port. Every such transfer runs wide, holding the
/// mate's port too (the pair term of [`Pattern::lower_bound`]).
pub(super) fn wide_plan(pattern: &Pattern, o: Overheads, bound: u32) -> Vec<bool> {
    let mut wide = vec![false; pattern.transfers.len()];
    if !o.pairs {
        return wide;
    }
    let g = u64::from(o.switch);
    let tiles = pattern.tiles().next_multiple_of(2);
    // What each receive port holds with every transfer narrow, and its unicast transfers.
    let mut need = vec![0u64; tiles];
    let mut alone: Vec<Vec<(u32, usize)>> = vec![Vec::new(); tiles];
    for (i, t) in pattern.transfers.iter().enumerate() {
        if t.words == 0 {
            continue;
        }
        for &d in &t.destinations {
            need[d as usize] += u64::from(t.words) + g;
        }
        if let &[d] = t.destinations.as_slice() {
            alone[d as usize].push((t.words, i));
        }
    }
    let bound = (u64::from(bound) + g).saturating_sub(u64::from(o.transit));
    for pair in 0..tiles / 2 {
        let (a, b) = (2 * pair, 2 * pair + 1);
        let (m, other) = if need[a] >= need[b] { (a, b) } else { (b, a) };
        if need[m] <= bound {
            continue;
        }
        let mut largest = std::mem::take(&mut alone[m]);
        largest.sort_unstable_by_key(|&(w, i)| (Reverse(w), i));
        let (mut busy, mut mate) = (need[m], need[other]);
        let (mut best, mut best_k) = (busy.max(mate), 0);
        for (k, &(w, _)) in largest.iter().enumerate() {
            busy -= u64::from(w / 2);
            mate += u64::from(w.div_ceil(2)) + g;
            if busy.max(mate) < best {
                (best, best_k) = (busy.max(mate), k + 1);
            }
        }
        for &(_, i) in &largest[..best_k] {
            wide[i] = true;
        }
    }
    wide
}

/// Tight cover over supertile pairs, every piece wide: `pairs` is [`over_pairs`] of `pattern`, or
/// that with its identical receivers merged ([`merge_receivers`]) when `split_multicast` is off, and
/// `whole` marks the transfers that stay whole.
pub(super) fn pair_cover(
    pattern: &Pattern,
    pairs: &Pattern,
    whole: &[bool],
    o: Overheads,
    split_multicast: bool,
) -> Vec<Piece> {
    debug_assert!(pairs.transfers.len() == pattern.transfers.len());
    let narrow = Overheads { pairs: false, ..o };
    sorted(widen_pieces(
        pattern,
        tight_cover(
            pairs,
            narrow,
            &CoverOptions {
                split: split_multicast,
                whole,
                ..CoverOptions::default()
            },
        ),
    ))
}

/// `pattern` with every set of receivers that receive exactly the same transfers (of words) merged
/// into one, the lowest of them; `None` when no two do (as in any pattern of unicasts). Transfers
/// keep their numbers, senders and words. A schedule of whole transfers of the merged pattern is one
/// of `pattern`: a merged receiver is busy exactly when each of its receivers would be. A gather's
/// multicast to such receivers, which the tight cover starts only when all its ports are free,
/// becomes a flow of two ports, which its alternating paths reach.
pub(super) fn merge_receivers(pattern: &Pattern) -> Option<Pattern> {
    let tiles = pattern.tiles();
    let mut received: Vec<Vec<u32>> = vec![Vec::new(); tiles];
    for (i, t) in pattern.transfers.iter().enumerate() {
        for &d in t.destinations.iter().filter(|_| t.words > 0) {
            if received[d as usize].last() != Some(&(i as u32)) {
                received[d as usize].push(i as u32);
            }
        }
    }
    // Receivers in order of what they receive, then of tile: equal ones are next to each other.
    let mut order: Vec<u32> = (0..tiles as u32)
        .filter(|&d| !received[d as usize].is_empty())
        .collect();
    order.sort_unstable_by(|&a, &b| {
        received[a as usize]
            .cmp(&received[b as usize])
            .then(a.cmp(&b))
    });
    let mut merged_into: Vec<u32> = (0..tiles as u32).collect();
    let mut merged = false;
    for w in order.windows(2) {
        if received[w[0] as usize] == received[w[1] as usize] {
            merged_into[w[1] as usize] = merged_into[w[0] as usize];
            merged = true;
        }
    }
    let transfers = (pattern.transfers.iter())
        .map(|t| {
            let mut destinations: Vec<u32> = Vec::with_capacity(t.destinations.len());
            for d in t.destinations.iter().map(|&d| merged_into[d as usize]) {
                if !destinations.contains(&d) {
                    destinations.push(d);
                }
            }
            PatternTransfer {
                source: t.source,
                destinations,
                words: t.words,
            }
        })
        .collect();
    merged.then_some(Pattern { transfers })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receivers of the same transfers merge into the lowest; one that receives more, or none of
    /// words, stays apart; transfers keep their order, senders and words.
    #[test]
    fn receivers_of_the_same_transfers_merge() {
        let t = |source, destinations: &[u32], words| PatternTransfer {
            source,
            destinations: destinations.to_vec(),
            words,
        };
        let pattern = Pattern {
            transfers: vec![t(0, &[3, 1, 2], 5), t(4, &[1, 2, 3], 6), t(5, &[2, 4], 0)],
        };
        let merged = merge_receivers(&pattern).expect("1, 2 and 3 receive the same");
        let expected = [t(0, &[1], 5), t(4, &[1], 6), t(5, &[1, 4], 0)];
        assert_eq!(merged.transfers, expected);
        let unicasts = Pattern {
            transfers: vec![t(0, &[1], 5), t(1, &[2], 5)],
        };
        assert_eq!(merge_receivers(&unicasts), None);
    }
}
