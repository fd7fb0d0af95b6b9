//! Synthetic 1472-tile exchange patterns shaped like the seed system's three phases, for the benchmark
//! and the property tests. Seeded, so every run sees the same instances.

use super::{Pattern, PatternTransfer};

/// How a synthetic pattern is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Random pairs, sizes uniform around the mean.
    Uniform,
    /// Heavy-tailed sizes and 64 hot receivers taking an eighth of the transfers.
    Skewed,
    /// Equal sizes, tile `s` sends to `s+1, s+2, ...` (mod tiles).
    ShiftedAllToAll,
    /// Every transfer goes to 1..=4 receivers.
    MulticastHeavy,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::Uniform,
        Family::Skewed,
        Family::ShiftedAllToAll,
        Family::MulticastHeavy,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Family::Uniform => "uniform",
            Family::Skewed => "skewed",
            Family::ShiftedAllToAll => "shifted-all-to-all",
            Family::MulticastHeavy => "multicast-heavy",
        }
    }
}

pub use crate::rng::SplitMix64 as Rng;

/// A pattern of `transfers` transfers over `tiles` tiles with mean size `mean_words`. Transfers come
/// in rounds: in each round every tile sends one transfer and (but for the hot receivers of `Skewed`)
/// receives one, so ports are balanced and many are critical, as in the seed's phases.
pub fn pattern(
    family: Family,
    tiles: u32,
    transfers: usize,
    mean_words: u32,
    seed: u64,
) -> Pattern {
    let mut rng = Rng(seed ^ ((family as u64) << 32));
    let n = u64::from(tiles);
    let mean = u64::from(mean_words);
    let mut permutation: Vec<u32> = (0..tiles).collect();
    let mut transfers_out = Vec::with_capacity(transfers);
    for i in 0..transfers {
        let (round, source) = ((i as u64 / n), (i as u64 % n) as u32);
        if source == 0 {
            // A fresh random permutation per round (Fisher-Yates).
            for k in (1..permutation.len()).rev() {
                permutation.swap(k, rng.below(k as u64 + 1) as usize);
            }
        }
        let partner = permutation[source as usize];
        let t = match family {
            Family::Uniform => PatternTransfer {
                source,
                destinations: vec![partner],
                words: (1 + rng.below(2 * mean - 1)) as u32,
            },
            Family::Skewed => {
                let d = if rng.below(8) == 0 {
                    rng.below(64) * (n / 64)
                } else {
                    u64::from(partner)
                };
                // Product of two uniforms: many small, a few large.
                let w = (rng.below(2 * mean) * rng.below(2 * mean) / mean).max(1);
                PatternTransfer {
                    source,
                    destinations: vec![d as u32],
                    words: w as u32,
                }
            }
            Family::ShiftedAllToAll => PatternTransfer {
                source,
                destinations: vec![((u64::from(source) + round + 1) % n) as u32],
                words: mean_words,
            },
            Family::MulticastHeavy => {
                let fanout = 1 + rng.below(4);
                let mut destinations: Vec<u32> = (0..fanout)
                    .map(|k| permutation[((u64::from(source) + k * 97) % n) as usize])
                    .collect();
                destinations.sort_unstable();
                destinations.dedup();
                PatternTransfer {
                    source,
                    destinations,
                    words: (1 + rng.below(2 * mean - 1)) as u32,
                }
            }
        };
        transfers_out.push(t);
    }
    Pattern {
        transfers: transfers_out,
    }
}

/// A small random pattern for property tests: up to 11 tiles and 30 transfers of fewer than
/// `words` words (some of none), each to 1..=`fanout` distinct destinations in no order, so that pair
/// mates are not next to each other.
pub fn random_small(rng: &mut Rng, fanout: u64, words: u64) -> Pattern {
    let tiles = 2 + rng.below(10);
    let transfers = (0..1 + rng.below(30))
        .map(|_| {
            let mut destinations: Vec<u32> = Vec::new();
            for _ in 0..1 + rng.below(fanout) {
                let d = rng.below(tiles) as u32;
                if !destinations.contains(&d) {
                    destinations.push(d);
                }
            }
            PatternTransfer {
                source: rng.below(tiles) as u32,
                destinations,
                words: rng.below(words) as u32,
            }
        })
        .collect();
    Pattern { transfers }
}

/// The seed system's three phase shapes: (name, transfers, mean words per transfer).
pub const SEED_PHASES: [(&str, usize, u32); 3] = [
    ("phase1", 12_105, 580),
    ("phase2", 4_200, 8_600),
    ("phase3", 155_880, 81),
];
