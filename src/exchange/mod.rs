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
//! Lower bound (overhead-inclusive, [`Pattern::lower_bound`]): every transfer needs at least one piece, so
//! a receiver needs its words plus one switch per transfer, except that its first switch overlaps the
//! first word's transit: `transit + max(max_s words(s), max_d (words(d) + switch·transfers(d)) - switch)`.

pub mod check;
pub mod schedule;
pub mod synthetic;

use crate::store::ContentHash;
use serde::{Deserialize, Serialize};

/// The exchange rules' overheads, in cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overheads {
    pub switch: u32,
    pub transit: u32,
}

impl Overheads {
    pub fn of(target: &crate::target::Target) -> Overheads {
        Overheads {
            switch: target.mux_switch_cycles,
            transit: target.exchange_transit_cycles,
        }
    }
    pub const ZERO: Overheads = Overheads {
        switch: 0,
        transit: 0,
    };
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

    /// Words each tile sends, and words plus one switch per transfer each tile receives.
    pub fn loads(&self, o: Overheads) -> (Vec<u64>, Vec<u64>) {
        let n = self.tiles();
        let (mut send, mut recv) = (vec![0u64; n], vec![0u64; n]);
        // A transfer of no words is never sent and costs nothing.
        for t in self.transfers.iter().filter(|t| t.words > 0) {
            send[t.source as usize] += u64::from(t.words);
            for &d in &t.destinations {
                recv[d as usize] += u64::from(t.words) + u64::from(o.switch);
            }
        }
        (send, recv)
    }

    /// The overhead-inclusive endpoint lower bound on the horizon (module docs).
    pub fn lower_bound(&self, o: Overheads) -> u32 {
        let (send, recv) = self.loads(o);
        let busiest = send
            .iter()
            .copied()
            .chain(
                recv.iter()
                    .filter(|&&r| r > 0)
                    .map(|r| r - u64::from(o.switch)),
            )
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
/// of the transfer (`destinations: None`) or to those with index `a..b` in its destination list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Piece {
    pub start: u32,
    pub transfer: u32,
    pub destinations: Option<(u32, u32)>,
    pub word: u32,
    pub words: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Sorted by start cycle, then transfer.
    pub pieces: Vec<Piece>,
    pub horizon: u32,
    pub lower_bound: u32,
    /// The strategy whose schedule was kept.
    pub kind: String,
    /// The horizon of the list schedule, for comparison; `None` when tight cover met the bound first
    /// and the list schedule stopped.
    pub list_horizon: Option<u32>,
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
