//! The exchange schedule model, independent of phases and addresses.
//!
//! A [`Pattern`] is what an exchange phase moves: transfers of whole words from one source tile to one or
//! more destination tiles (multicast). A [`Schedule`] cuts each transfer into pieces with a send cycle.
//! The target's rules (DESIGN §4): a tile sends one word per cycle and receives one word per cycle; a
//! receiver switches its mux to a sender in `switch` cycles before the data arrives; a send reaches every
//! receiver listening to it; words arrive `transit` cycles after they leave. A piece of `n` words sent
//! from cycle `s` keeps its source busy in `[s, s+n)` and each of its receivers busy in
//! `[s+transit-switch, s+transit+n)`. The horizon is the last arrival.
//!
//! Supertile pairs (with [`Overheads::pairs`]): tiles `2k` and `2k+1` share a send bus and a receive bus
//! that move two words per cycle. A *wide* piece moves its `n` words in `c = ceil(n/2)` cycles: it keeps
//! its source and the source's mate busy sending in `[s, s+c)` (the mate sends nothing meanwhile), and
//! each receiver and each receiver's mate busy receiving in `[s+transit-switch, s+transit+c)`, where a
//! mate that is itself a receiver of the piece receives the same data at the same time.
//!
//! Lower bound (overhead-inclusive, [`Pattern::lower_bound`]). Every transfer needs at least one piece
//! at each receiver, and a receiver's port is busy for a switch before each piece, except that its
//! first switch overlaps the first word's transit; the last word leaves a sender `transit` cycles
//! before the horizon. Without pairs:
//! `H >= transit + max(max_s words(s), max_d (words(d) + switch·transfers(d)) - switch)`.
//! With pairs, a port moves at most two words per cycle and a pair's bus two words per cycle in all:
//! - senders, per pair `(a, b)`: `H >= transit + ceil((words(a) + words(b)) / 2)` (a tile's own
//!   `ceil(words/2)` is never more);
//! - receivers, per pair `(a, b)`: both ports are busy only within `[transit - switch, H)`, so each
//!   holds at most `P = H - transit + switch` port-cycles. A piece holds its receiver's port for a
//!   switch, then a cycle per word narrow or half a cycle per word wide; a wide piece holds the
//!   receiver's mate for as long, switch included (a mate that receives the piece too is not held
//!   twice). Say `a` takes `x` words of its transfers to `a` alone wide, in pieces of `k` of those
//!   transfers at least, and `b` nothing of its own wide (the other way round is symmetric; wide words
//!   on both sides only cancel). Then, with `S_a` the words of transfers to `a` alone, `S_ab` those of
//!   transfers to both, `n_a` the transfers to `a` (to both included), and so on:
//!   `P >= S_a - x/2 + S_ab/2 + switch·n_a` (port `a`) and
//!   `P >= S_b + x/2 + S_ab/2 + switch·(n_b + k)` (port `b`),
//!   where `x` is at most the words of `a`'s `k` largest transfers to it alone. The bound is the
//!   least `P` over every `k` and `x` (`PairIntake::cycles`), and `H >= transit - switch + P`. It
//!   implies a tile's own `ceil(words/2) + switch·transfers` and the pair's
//!   `(words(a ∪ b) + switch·(n_a + n_b)) / 2`.
//!
//! A destination named twice in one transfer is received twice: its port takes one word per cycle
//! into one place in memory, so each name takes its own pieces at their own cycles, each with its
//! switch, and the sender sends the words once per name. The bound is that of the pattern with such
//! transfers cut apart (`apart`), one transfer per copy.
//!
//! The checker ([`check`]) re-derives every port's occupancy from the pieces, pair mates included.

mod agenda;
mod apart;
pub mod check;
mod compact;
mod cover;
mod flows;
mod halves;
mod packed;
mod pairs;
mod partners;
mod peel;
mod pieces;
pub mod schedule;
mod strategies;
pub mod synthetic;

use crate::store::ContentHash;
use serde::{Deserialize, Serialize};
use std::collections::BinaryHeap;

/// The exchange rules' overheads, in cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overheads {
    pub switch: u32,
    pub transit: u32,
    /// Wide pieces over the supertile pairs' shared buses (module docs).
    pub pairs: bool,
}

impl Overheads {
    /// The target's overheads; its supertile pairs move two words per cycle.
    pub fn of(target: &crate::target::Target) -> Overheads {
        Overheads {
            switch: target.mux_switch_cycles,
            transit: target.exchange_transit_cycles,
            pairs: true,
        }
    }
    pub const ZERO: Overheads = Overheads {
        switch: 0,
        transit: 0,
        pairs: false,
    };
}

/// The pair mate of `tile`: tiles (2k, 2k+1) form a supertile pair.
pub fn mate(tile: u32) -> u32 {
    tile ^ 1
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternTransfer {
    pub source: u32,
    pub destinations: Vec<u32>,
    pub words: u32,
}

/// The transfer pattern of an exchange phase: endpoints and sizes only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    pub transfers: Vec<PatternTransfer>,
}

impl Pattern {
    /// One past the highest tile the pattern names. On both cores: each transfer's destinations
    /// lie apart in memory.
    pub fn tiles(&self) -> usize {
        use rayon::prelude::*;
        (self.transfers.par_iter())
            .map(|t| t.destinations.iter().fold(t.source, |m, &d| m.max(d)))
            .max()
            .map_or(0, |m| m as usize + 1)
    }

    /// The key a schedule of this pattern is stored under: the pattern, the overheads, and `salt` (the
    /// scheduler's version and config), so a stored schedule is exactly what scheduling would produce.
    pub fn key(&self, overheads: Overheads, salt: &[u8]) -> ContentHash {
        let bytes = rmp_serde::to_vec(&(self, overheads)).expect("patterns serialise");
        let mut h = blake3::Hasher::new_derive_key("ipu-codegen exchange pattern v1");
        h.update(salt);
        h.update(&bytes);
        ContentHash(*h.finalize().as_bytes())
    }

    /// The overhead-inclusive lower bound on the horizon (module docs).
    pub fn lower_bound(&self, o: Overheads) -> u32 {
        self.lower_bounds(o).bound
    }

    /// [`Pattern::lower_bound`] with `o`, with `o` but no pairs, and that of the pattern over
    /// supertile pairs with `o` but no pairs: in one pass over the transfers, in two halves at once.
    pub fn lower_bounds(&self, o: Overheads) -> LowerBounds {
        // A tile named twice by a transfer receives it twice: the bounds of the cut pattern.
        if let Some(cut) = apart::apart(self) {
            return cut.pattern.lower_bounds(o);
        }
        let n = self.tiles().next_multiple_of(2);
        let (first, second) = self.transfers.split_at(self.transfers.len() / 2);
        let (mut tally, later) = rayon::join(
            || Tally::of(first, n, o.pairs),
            || Tally::of(second, n, o.pairs),
        );
        tally.add(later);
        let g = u64::from(o.switch);
        let bound = |busiest: Option<u64>| match busiest.unwrap_or(0) {
            0 => 0,
            busiest => (busiest + u64::from(o.transit)) as u32,
        };
        // The first switch of a receiver overlaps the first word's transit.
        let unpaired = |send: &[u64], recv: &[u64], count: &[u64]| {
            bound(
                (send.iter().copied())
                    .chain(
                        (0..recv.len())
                            .filter(|&d| count[d] > 0)
                            .map(|d| recv[d] + g * count[d] - g),
                    )
                    .max(),
            )
        };
        let over_pairs = unpaired(&tally.pair_send, &tally.pair_recv, &tally.pair_count);
        let narrow = unpaired(&tally.send, &tally.recv, &tally.count);
        let bound = if o.pairs {
            let senders =
                (0..n / 2).map(|k| (tally.send[2 * k] + tally.send[2 * k + 1]).div_ceil(2));
            let receivers = tally
                .busiest_intake(g)
                .map(|cycles| cycles.saturating_sub(g));
            bound(senders.max().max(receivers))
        } else {
            narrow
        };
        LowerBounds {
            bound,
            narrow,
            over_pairs,
        }
    }
}

/// The bounds of [`Pattern::lower_bounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerBounds {
    /// [`Pattern::lower_bound`].
    pub bound: u32,
    /// The bound without pairs.
    pub narrow: u32,
    /// The bound without pairs of the pattern over supertile pairs: pair `k` a tile, a transfer of
    /// `w` words one of `ceil(w/2)` words to the distinct pairs of its destinations.
    pub over_pairs: u32,
}

/// What the transfers of a pattern send and receive, per tile and per supertile pair.
struct Tally {
    /// Per tile: words sent; words and transfers received.
    send: Vec<u64>,
    recv: Vec<u64>,
    count: Vec<u64>,
    /// With pairs, what each pair receives: (tile, words) of each transfer to one mate alone, and per
    /// pair the words and number of transfers to both.
    alone: Vec<(u32, u32)>,
    both_words: Vec<u64>,
    both: Vec<u64>,
    /// Per pair, of the pattern over pairs: double words sent; double words and transfers received.
    pair_send: Vec<u64>,
    pair_recv: Vec<u64>,
    pair_count: Vec<u64>,
}

impl Tally {
    /// The tally of `transfers` over `n` tiles (even).
    fn of(transfers: &[PatternTransfer], n: usize, pairs: bool) -> Tally {
        let mut x = Tally {
            send: vec![0; n],
            recv: vec![0; n],
            count: vec![0; n],
            alone: Vec::new(),
            both_words: vec![0; if pairs { n / 2 } else { 0 }],
            both: vec![0; if pairs { n / 2 } else { 0 }],
            pair_send: vec![0; n / 2],
            pair_recv: vec![0; n / 2],
            pair_count: vec![0; n / 2],
        };
        let mut receivers: Vec<u32> = Vec::new();
        // A transfer of no words is never sent and costs nothing.
        for t in transfers.iter().filter(|t| t.words > 0) {
            let (w, half) = (u64::from(t.words), u64::from(t.words.div_ceil(2)));
            x.send[t.source as usize] += w;
            x.pair_send[t.source as usize / 2] += half;
            receivers.clear();
            receivers.extend(&t.destinations);
            receivers.sort_unstable();
            receivers.dedup();
            for (i, &d) in receivers.iter().enumerate() {
                x.recv[d as usize] += w;
                x.count[d as usize] += 1;
                // Sorted: a mate of `d` in the list is next to it.
                let mate_too = [i.wrapping_sub(1), i + 1]
                    .iter()
                    .any(|&j| receivers.get(j) == Some(&mate(d)));
                if !mate_too || d % 2 == 0 {
                    x.pair_recv[d as usize / 2] += half;
                    x.pair_count[d as usize / 2] += 1;
                }
                if pairs {
                    if !mate_too {
                        x.alone.push((d, t.words));
                    } else if d % 2 == 0 {
                        x.both_words[d as usize / 2] += w;
                        x.both[d as usize / 2] += 1;
                    }
                }
            }
        }
        x
    }

    /// Adds the tally of later transfers.
    fn add(&mut self, later: Tally) {
        let columns = [
            (&mut self.send, later.send),
            (&mut self.recv, later.recv),
            (&mut self.count, later.count),
            (&mut self.pair_send, later.pair_send),
            (&mut self.pair_recv, later.pair_recv),
            (&mut self.pair_count, later.pair_count),
            (&mut self.both_words, later.both_words),
            (&mut self.both, later.both),
        ];
        for (sum, more) in columns {
            for (a, b) in sum.iter_mut().zip(more) {
                *a += b;
            }
        }
        self.alone.extend(later.alone);
    }

    /// The most port-cycles any pair's receive ports must hold ([`PairIntake::cycles`]), with
    /// pairs. The words of transfers to one mate alone are grouped by tile (a counting sort); the
    /// pairs are weighed on both cores.
    fn busiest_intake(&self, g: u64) -> Option<u64> {
        let tiles = 2 * self.both.len();
        let mut starts = vec![0usize; tiles + 1];
        for &(d, _) in &self.alone {
            starts[d as usize + 1] += 1;
        }
        for d in 0..tiles {
            starts[d + 1] += starts[d];
        }
        let mut at = starts.clone();
        let mut words = vec![0u32; self.alone.len()];
        for &(d, w) in &self.alone {
            words[at[d as usize]] = w;
            at[d as usize] += 1;
        }
        use rayon::prelude::*;
        (0..self.both.len())
            .into_par_iter()
            .map(|k| {
                let alone = [2 * k, 2 * k + 1].map(|d| &words[starts[d]..starts[d + 1]]);
                let (both_words, both) = (self.both_words[k], self.both[k]);
                PairIntake {
                    alone,
                    both_words,
                    both,
                }
                .cycles(g)
            })
            .max()
    }
}

/// What a supertile pair receives: the words of each transfer to one mate alone, per mate, and the
/// words and number of transfers to both.
#[derive(Clone, Copy, Default)]
struct PairIntake<'a> {
    alone: [&'a [u32]; 2],
    both_words: u64,
    both: u64,
}

impl PairIntake<'_> {
    /// The fewest port-cycles `P` each of the pair's receive ports must hold (module docs), or 0 if
    /// the pair receives nothing.
    fn cycles(&self, g: u64) -> u64 {
        // In half cycles: what each port needs with nothing wide.
        let narrow = |m: usize| {
            let words: u64 = self.alone[m].iter().map(|&w| u64::from(w)).sum();
            let transfers = self.alone[m].len() as u64 + self.both;
            2 * (words + g * transfers) + self.both_words
        };
        let need = [narrow(0), narrow(1)];
        if need == [0, 0] {
            return 0;
        }
        let mut least = u64::MAX;
        for (m, alone) in self.alone.iter().enumerate() {
            // Mate `m` takes its `k` largest transfers to it alone wide, `x` words of them: its port
            // needs `need[m] - x` half cycles, its mate's `need[1 - m] + x + 2·g·k`. The least of the
            // larger over `x` in `[0, top]` is the largest of three terms, two rising with `k` and
            // one falling: once a rising one is the largest, no larger `k` does better. The largest
            // transfers come off a heap one by one, as far as that.
            let mut largest = None;
            let mut top = 0;
            for k in 0.. {
                let (a, b) = (need[m], need[1 - m] + 2 * g * k);
                let rising = (a + b).div_ceil(2).max(b);
                least = least.min(rising.max(a.saturating_sub(top)).div_ceil(2));
                if rising >= a.saturating_sub(top) {
                    break;
                }
                let heap = largest.get_or_insert_with(|| BinaryHeap::from(alone.to_vec()));
                let Some(words) = heap.pop() else { break };
                top += u64::from(words);
            }
        }
        least
    }
}

/// A piece of a transfer: `words` words from word `word`, sent from cycle `start`, to every destination
/// of the transfer (`destinations: None`) or to those with index `a..b` in its destination list; `wide`
/// over the supertile pairs' buses (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Piece {
    pub start: u32,
    pub transfer: u32,
    pub destinations: Option<(u32, u32)>,
    pub word: u32,
    pub words: u32,
    pub wide: bool,
}

impl Piece {
    /// Cycles the piece holds its ports for its words (not counting the receivers' switch).
    pub fn cycles(&self) -> u32 {
        if self.wide {
            self.words.div_ceil(2)
        } else {
            self.words
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Sorted by start cycle, then transfer. Stored packed in columns (`packed`).
    #[serde(with = "packed")]
    pub pieces: Vec<Piece>,
    pub horizon: u32,
    pub lower_bound: u32,
    /// The strategy whose schedule was kept.
    pub kind: String,
    /// The horizon of the first strategy tried, for comparison.
    pub initial_horizon: u32,
}

impl Schedule {
    pub fn pieces_per_transfer(&self, transfers: usize) -> f64 {
        if transfers == 0 {
            0.0
        } else {
            self.pieces.len() as f64 / transfers as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::synthetic::Rng;

    /// The least port-cycles by trying every split of every transfer into wide and narrow words, on
    /// both mates at once (the module docs' per-port terms).
    fn least_by_trying_all(pair: &PairIntake, g: u64) -> u64 {
        let transfers: Vec<(usize, u64)> = (0..2)
            .flat_map(|m| pair.alone[m].iter().map(move |&w| (m, u64::from(w))))
            .collect();
        let mut least = u64::MAX;
        let mut wide = vec![0u64; transfers.len()];
        loop {
            // In half cycles, per port: its own words, narrow or wide, its mate's wide words and
            // their switches, the transfers to both wide.
            let mut need = [0u64; 2];
            for (&(m, w), &x) in transfers.iter().zip(&wide) {
                need[m] += 2 * (w - x) + x + 2 * g;
                if x > 0 {
                    need[1 - m] += x + 2 * g;
                }
            }
            for n in &mut need {
                *n += pair.both_words + 2 * g * pair.both;
            }
            least = least.min(need[0].max(need[1]).div_ceil(2));
            // The next split, as a mixed-radix counter.
            let Some(i) = (0..wide.len()).find(|&i| wide[i] < transfers[i].1) else {
                break;
            };
            wide[i] += 1;
            wide[..i].fill(0);
        }
        least
    }

    #[test]
    fn the_pair_term_is_the_least_over_every_split() {
        let mut rng = Rng(5);
        for case in 0..2000 {
            let alone: [Vec<u32>; 2] =
                [(); 2].map(|_| (0..rng.below(4)).map(|_| 1 + rng.below(6) as u32).collect());
            let mut pair = PairIntake {
                alone: [&alone[0], &alone[1]],
                ..PairIntake::default()
            };
            pair.both = rng.below(2);
            pair.both_words = pair.both * (1 + rng.below(6));
            if pair.alone[0].is_empty() && pair.alone[1].is_empty() && pair.both == 0 {
                continue;
            }
            let g = rng.below(3);
            let expected = least_by_trying_all(&pair, g);
            assert_eq!(
                pair.cycles(g),
                expected,
                "case {case}: g {g}, {:?} {:?} both {} of {}",
                pair.alone[0],
                pair.alone[1],
                pair.both,
                pair.both_words
            );
        }
    }
}
