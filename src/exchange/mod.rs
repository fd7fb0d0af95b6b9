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
//! - receivers, per tile: `H >= transit + ceil(words(d)/2) + switch·transfers(d) - switch`;
//! - receivers, per pair `(a, b)`: both ports are busy only within `[transit - switch, H)`, each piece
//!   holds its receiver's port for its switch, and every word that reaches the pair holds at least one
//!   port-cycle (a wide piece two ports for two words, shared when both mates receive it), so
//!   `2·(H - transit + switch) >= words(a ∪ b) + switch·(transfers(a) + transfers(b))`, where
//!   `words(a ∪ b)` counts a transfer to both once.
//!
//! The checker ([`check`]) re-derives every port's occupancy from the pieces, pair mates included.

pub mod check;
mod packed;
pub mod schedule;
pub mod synthetic;

use crate::store::ContentHash;
use serde::{Deserialize, Serialize};

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
    /// One past the highest tile the pattern names.
    pub fn tiles(&self) -> usize {
        self.transfers
            .iter()
            .flat_map(|t| std::iter::once(t.source).chain(t.destinations.iter().copied()))
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
        // Per tile: words sent; words received and transfers received. Per pair: words received by
        // either tile (a transfer counted once), for the shared receive bus.
        let n = self.tiles().next_multiple_of(2);
        let (mut send, mut recv, mut count) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
        let mut pair_recv = vec![0u64; n / 2];
        // A transfer of no words is never sent and costs nothing.
        for t in self.transfers.iter().filter(|t| t.words > 0) {
            let w = u64::from(t.words);
            send[t.source as usize] += w;
            for (i, &d) in t.destinations.iter().enumerate() {
                recv[d as usize] += w;
                count[d as usize] += 1;
                let counted = t.destinations[..i].iter().any(|&e| e / 2 == d / 2);
                if !counted {
                    pair_recv[d as usize / 2] += w;
                }
            }
        }
        let g = u64::from(o.switch);
        // Cycles a port needs for `words` words: one word per cycle, two over a pair's bus.
        let cycles = |words: u64| if o.pairs { words.div_ceil(2) } else { words };
        let senders = if o.pairs {
            (0..n / 2)
                .map(|k| cycles(send[2 * k] + send[2 * k + 1]))
                .max()
        } else {
            send.iter().copied().max()
        };
        // The first switch of a receiver overlaps the first word's transit.
        let receivers = (0..n)
            .filter(|&d| count[d] > 0)
            .map(|d| cycles(recv[d]) + g * count[d] - g);
        let pairs = (0..n / 2)
            .filter(|&k| o.pairs && pair_recv[k] > 0)
            .map(|k| {
                (pair_recv[k] + g * (count[2 * k] + count[2 * k + 1]))
                    .div_ceil(2)
                    .saturating_sub(g)
            });
        let busiest = senders
            .into_iter()
            .chain(receivers)
            .chain(pairs)
            .max()
            .unwrap_or(0);
        if busiest == 0 {
            0
        } else {
            (busiest + u64::from(o.transit)) as u32
        }
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
