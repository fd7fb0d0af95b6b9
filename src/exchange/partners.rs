//! The flows of exactly two ports, a sender and a receiver, indexed by port and by pair, for the
//! tight cover ([`super::cover`]).
//!
//! Contract: [`Partners::new`] indexes the flows [`flows_of`](super::flows::flows_of) builds from
//! the same pattern and groups, under the same numbers, leaving out flows of more than two ports
//! (groups of several destinations, and flows planned wide). A port's live partners
//! ([`Partners::live`]) are those it still has an unfinished flow with, as far as the cover has told
//! the index ([`Partners::finish`]); a pair's flows ([`Partners::flows`]) are listed finished or not,
//! the last added first. Sender ports are `0..tiles`, receiver ports `tiles..2·tiles`; `tiles` is a
//! multiple of 64 below 2^16.

use super::Pattern;
use super::flows::destination_groups;

/// The flows of exactly two ports, a sender and a receiver, indexed by port and partner: a free port
/// finds its free partners with a few word operations on bitsets (one bit per port of the other side)
/// instead of a scan of its flows, which would not stay in cache, and a pair's flows with one probe
/// of a hash table. Sender ports are `0..tiles`, receiver ports `tiles..2·tiles`, `tiles` a multiple
/// of 64, so a partner's bit is its index on its side.
pub(super) struct Partners {
    tiles: u32,
    /// Words per port: `tiles / 64`.
    pub(super) words: usize,
    /// `live[p·words + w]` bit `b`: port `p` has an unfinished flow with partner `64w + b`.
    pub(super) live: Vec<u64>,
    /// Open addressing, linear probing, at most three quarters full: the pair's [`Partners::key`],
    /// 0 when empty, and its first flow, with [`Partners::MORE`] set when `next` chains more. Eight
    /// bytes a slot, so that more of it stays in cache.
    table: Vec<(u32, u32)>,
    next: Vec<u32>,
    /// One bit per flow, set when its pair has other flows.
    shared: Vec<u64>,
}

impl Partners {
    const END: u32 = u32::MAX;
    const MORE: u32 = 1 << 31;

    /// The index of the flows of two ports among the flows [`flows_of`](super::flows::flows_of) builds
    /// from `pattern` and `groups`: those of one receiver that are not planned wide.
    pub(super) fn new(
        pattern: &Pattern,
        tiles: u32,
        groups: &[u64],
        always_wide: &impl Fn(usize) -> bool,
    ) -> Partners {
        let flows = groups.iter().sum::<u64>() as usize;
        // Keys of pairs are u32 (`Partners::key`); a tile target has a few thousand tiles.
        assert!(tiles.is_multiple_of(64) && tiles < 1 << 16 && flows < Self::MORE as usize);
        let words = tiles as usize / 64;
        let mut x = Partners {
            tiles,
            words,
            live: vec![0; 2 * tiles as usize * words],
            table: vec![(0, 0); flows + flows / 3 + 1],
            next: vec![Self::END; flows],
            shared: vec![0; flows.div_ceil(64)],
        };
        let mut f = 0u32;
        for (i, t) in pattern.transfers.iter().enumerate() {
            let two_ports = !always_wide(i);
            for (_, destinations) in destination_groups(t, groups[i]) {
                if let &[d] = destinations
                    && two_ports
                    && let Some(e) = x.add(x.key(t.source, tiles + d), f)
                {
                    for g in [e, f] {
                        x.shared[g as usize / 64] |= 1 << (g % 64);
                    }
                }
                f += 1;
            }
        }
        x
    }

    /// Whether flow `f` is the only one of its pair.
    pub(super) fn alone(&self, f: u32) -> bool {
        self.shared[f as usize / 64] & (1 << (f % 64)) == 0
    }

    /// Adds flow `f` of the pair with key `key`; returns the flow it goes before when the pair has
    /// one already.
    fn add(&mut self, key: u32, f: u32) -> Option<u32> {
        let slot = self.slot(key);
        let (held, first) = self.table[slot];
        self.table[slot] = (key, f | if held == 0 { 0 } else { Self::MORE });
        if held == 0 {
            let (s, r) = ((key - 1) >> 16, self.tiles + ((key - 1) & 0xFFFF));
            for (p, q) in [(s, r), (r, s)] {
                let i = self.index(q);
                self.live[p as usize * self.words + i / 64] |= 1 << (i % 64);
            }
            None
        } else {
            self.next[f as usize] = first & !Self::MORE;
            Some(first & !Self::MORE)
        }
    }

    /// The pair of sender `s` and receiver `r` as a number from 1: fewer than 2^16 tiles.
    fn key(&self, s: u32, r: u32) -> u32 {
        (s << 16 | self.index(r) as u32) + 1
    }

    /// A key spread over 64 bits (Fibonacci hashing); its top bits choose the slot.
    fn hash(key: u32) -> u64 {
        u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The slot of the pair with key `key`, or the empty slot where it goes: from the slot the hash
    /// gives (rising with the hash), the first that holds the key or none.
    fn slot(&self, key: u32) -> usize {
        let mut slot = ((u128::from(Self::hash(key)) * self.table.len() as u128) >> 64) as usize;
        while self.table[slot].0 != key && self.table[slot].0 != 0 {
            slot += 1;
            if slot == self.table.len() {
                slot = 0;
            }
        }
        slot
    }

    /// The index of port `q` on its side.
    fn index(&self, q: u32) -> usize {
        (if q < self.tiles { q } else { q - self.tiles }) as usize
    }

    /// The first flow of ports `p` and `q`, and whether more follow in `next`.
    pub(super) fn first(&self, p: u32, q: u32) -> (u32, bool) {
        let (s, r) = if p < q { (p, q) } else { (q, p) };
        let (_, first) = self.table[self.slot(self.key(s, r))];
        (first & !Self::MORE, first & Self::MORE != 0)
    }

    /// The flows of ports `p` and `q`, finished or not, the last added first.
    pub(super) fn flows(&self, p: u32, q: u32) -> impl Iterator<Item = u32> + '_ {
        let (first, more) = self.first(p, q);
        std::iter::successors(Some(first), move |&f| {
            more.then(|| self.next[f as usize])
                .filter(|&n| n != Self::END)
        })
    }

    /// The partners of `p` with unfinished flows.
    pub(super) fn live(&self, p: u32) -> impl Iterator<Item = u32> + '_ {
        let other = if p < self.tiles { self.tiles } else { 0 };
        let words = &self.live[p as usize * self.words..][..self.words];
        words.iter().enumerate().flat_map(move |(w, &bits)| {
            std::iter::successors(Some(bits), |&m| Some(m & m.wrapping_sub(1)))
                .take_while(|&m| m != 0)
                .map(move |m| other + 64 * w as u32 + m.trailing_zeros())
        })
    }

    /// Marks the pair of sender `s` and receiver `r` done.
    pub(super) fn finish(&mut self, s: u32, r: u32) {
        for (p, q) in [(s, r), (r, s)] {
            let i = self.index(q);
            self.live[p as usize * self.words + i / 64] &= !(1 << (i % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::flows::{flows_of, listed};
    use crate::exchange::synthetic::{Rng, random_small};
    use crate::exchange::{Overheads, PatternTransfer};

    /// The index finds a port's partners and a pair's flows from either end, leaves multicasts
    /// out, and forgets a pair once it is finished.
    #[test]
    fn partners_index_pairs_and_forget_finished_ones() {
        let transfer = |source, destinations: &[u32], words| PatternTransfer {
            source,
            destinations: destinations.to_vec(),
            words,
        };
        let pattern = Pattern {
            transfers: vec![
                transfer(0, &[1], 3),
                transfer(0, &[1], 4),
                transfer(0, &[2], 5),
                transfer(1, &[0, 2], 6),
            ],
        };
        let tiles = 64;
        let mut x = Partners::new(&pattern, tiles, &[1; 4], &|_| false);
        let live = |x: &Partners, p| x.live(p).collect::<Vec<u32>>();
        // Receiver ports are `tiles + d`.
        assert_eq!(live(&x, 0), [65, 66]);
        assert_eq!(live(&x, 65), [0]);
        assert_eq!(live(&x, 66), [0]);
        assert!(
            live(&x, 1).is_empty(),
            "the multicast of tile 1 is not a pair's"
        );
        assert_eq!(x.flows(0, 65).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(x.flows(65, 0).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(x.flows(66, 0).collect::<Vec<_>>(), [2]);
        assert!(!x.alone(0) && !x.alone(1) && x.alone(2));
        x.finish(0, 65);
        assert_eq!(live(&x, 0), [66]);
        assert!(live(&x, 65).is_empty());
    }

    /// The index, built from the pattern, lists exactly the flows of two ports that `flows_of` builds,
    /// with multicasts split into groups and some transfers planned wide.
    #[test]
    fn partners_index_the_flows_of_two_ports() {
        let mut rng = Rng(11);
        for _ in 0..200 {
            let pattern = random_small(&mut rng, 4, 9);
            let groups: Vec<u64> = (pattern.transfers.iter())
                .map(|t| match t.words {
                    0 => 0,
                    _ => 1 + rng.below(t.destinations.len() as u64),
                })
                .collect();
            let wide: Vec<bool> = groups.iter().map(|_| rng.below(3) == 0).collect();
            let pairs = rng.below(2) == 0;
            let always_wide = |i: usize| pairs && wide[i];
            let o = Overheads {
                switch: 1,
                transit: 0,
                pairs,
            };
            let tiles = 64;
            let built = flows_of(&pattern, &groups, tiles, o, &always_wide);
            let x = Partners::new(&pattern, tiles, &groups, &always_wide);
            let mut indexed = 0;
            for s in 0..tiles {
                for r in tiles..2 * tiles {
                    if !x.live(s).any(|q| q == r) {
                        continue;
                    }
                    for f in x.flows(s, r) {
                        let flow = &built.flows[f as usize];
                        assert_eq!(listed(flow, &built.flow_ports, flow.ports), [s, r]);
                        indexed += 1;
                    }
                }
            }
            let two_ports = (built.flows.iter()).filter(|flow| flow.ports == 2).count();
            assert_eq!(indexed, two_ports);
        }
    }
}
