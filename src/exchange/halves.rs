//! A pattern cut into two halves in time, one core scheduling each ([`super::schedule::schedule`]
//! does so for patterns of more than [`super::schedule::HALVES_DESTINATIONS`] destinations).
//!
//! Contract: [`split`] puts every transfer whole into one of two patterns so that every port's load
//! (words plus a switch per transfer, as in the bound) comes out nearly even between them: then the
//! halves' bounds add up to about the pattern's. [`concatenate`] joins a schedule of each into one
//! of the whole pattern that passes the checker: the second half runs after the first, from the
//! earliest cycle the rules allow whatever the schedules are. Every half ends a little above its
//! own bound, so the whole ends a little further above its bound than one schedule of it would:
//! the price of half the time. [`in_halves`] does all three, each half scheduled whole by the
//! strategies ([`super::strategies`]) on a core of its own; its kind is `halves:` and the kinds of
//! the halves' schedules.

use super::pieces::{horizon, sorted};
use super::strategies::whole;
use super::{Overheads, Pattern, Piece, Schedule};

/// A schedule of `pattern` from schedules of its two halves (module docs), one on each core.
pub(super) fn in_halves(pattern: &Pattern, o: Overheads) -> Schedule {
    let (halves, lower_bound) = rayon::join(|| split(pattern, o), || pattern.lower_bound(o));
    let (a, b) = rayon::join(
        || whole(&halves[0].pattern, o),
        || whole(&halves[1].pattern, o),
    );
    let pieces = concatenate(&halves, [&a, &b], seam(a.horizon, o));
    Schedule {
        horizon: horizon(&pieces, o),
        pieces,
        lower_bound,
        kind: format!("halves:{}+{}", a.kind, b.kind),
        initial_horizon: seam(a.initial_horizon, o) + b.initial_horizon,
    }
}

/// One half of a pattern: its transfers, and the index of each in the whole pattern.
pub struct Half {
    pub pattern: Pattern,
    pub transfers: Vec<u32>,
}

/// Transfers fall into this many classes by size for [`split`].
const CLASSES: usize = 16;

/// The pattern's transfers in two halves. Classes of larger transfers go first, each class in order
/// of transfers; a transfer goes to the half that keeps the most uneven of its ports least uneven
/// (its source's sending port and its destinations' receiving ports), the first half when both do
/// equally. A port is as uneven as its load in the first half differs from its load in the second.
pub fn split(pattern: &Pattern, o: Overheads) -> [Half; 2] {
    let tiles = pattern.tiles() as u32;
    let g = i64::from(o.switch);
    let most = u64::from(pattern.transfers.iter().map(|t| t.words).max().unwrap_or(0));
    let class = |words: u32| ((most - u64::from(words)) * CLASSES as u64 / (most + 1)) as usize;
    // Each transfer's ports, one list after another, and its cost, read in order once: each
    // transfer's destinations lie apart in memory.
    let n = pattern.transfers.len();
    let (mut ports, mut ends, mut costs) =
        (Vec::new(), Vec::with_capacity(n), Vec::with_capacity(n));
    let mut sizes = [0; CLASSES + 1];
    for t in &pattern.transfers {
        ports.push(t.source);
        ports.extend(t.destinations.iter().map(|&d| tiles + d));
        ends.push(ports.len());
        // A transfer of no words is never sent and costs nothing.
        costs.push(if t.words == 0 {
            0
        } else {
            i64::from(t.words) + g
        });
        sizes[class(t.words) + 1] += 1;
    }
    // The transfers by class, in order within each (a counting sort).
    for c in 0..CLASSES {
        sizes[c + 1] += sizes[c];
    }
    let mut order = vec![0u32; n];
    for (i, t) in pattern.transfers.iter().enumerate() {
        let at = &mut sizes[class(t.words)];
        order[*at] = i as u32;
        *at += 1;
    }
    let mut uneven = vec![0i64; 2 * tiles as usize];
    let mut first = vec![false; n];
    for i in order.into_iter().map(|i| i as usize) {
        let own = &ports[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
        let worst = |change: i64| {
            (own.iter())
                .map(|&p| (uneven[p as usize] + change).abs())
                .max()
                .unwrap_or(0)
        };
        first[i] = worst(costs[i]) <= worst(-costs[i]);
        let change = if first[i] { costs[i] } else { -costs[i] };
        for &p in own {
            uneven[p as usize] += change;
        }
    }
    let half = |which: bool| {
        let transfers: Vec<u32> = (0..first.len() as u32)
            .filter(|&i| first[i as usize] == which)
            .collect();
        let pattern = Pattern {
            transfers: (transfers.iter())
                .map(|&i| pattern.transfers[i as usize].clone())
                .collect(),
        };
        Half { pattern, transfers }
    };
    let (a, b) = rayon::join(|| half(true), || half(false));
    [a, b]
}

/// The cycle the second half's schedule starts from, after a first half ending at `horizon`: its
/// sends start once the first half's last send has left (`horizon - transit`), and its receivers
/// switch once the first half's last word has arrived (`horizon`), a switch before its first word.
pub fn seam(horizon: u32, o: Overheads) -> u32 {
    match horizon {
        0 => 0,
        h => h - o.transit + o.switch,
    }
}

/// The pieces of a schedule of the whole pattern from schedules of its halves, the second moved to
/// start at `start`: in the order of [`Schedule::pieces`].
pub fn concatenate(halves: &[Half; 2], schedules: [&Schedule; 2], start: u32) -> Vec<Piece> {
    let moved = |k: usize, by: u32| {
        schedules[k].pieces.iter().map(move |p| Piece {
            start: p.start + by,
            transfer: halves[k].transfers[p.transfer as usize],
            ..*p
        })
    };
    let pieces: Vec<Piece> = moved(0, 0).chain(moved(1, start)).collect();
    sorted(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::PatternTransfer;
    use crate::exchange::check::check;
    use crate::exchange::synthetic::{Family, Rng, pattern, random_small};

    /// Every transfer goes to one half, and on a pattern shaped like the seed's phases every port's
    /// load is nearly even: each half's bound is within 1 % of half the pattern's, and together they
    /// make the pattern's within 0.1 %.
    #[test]
    fn halves_take_every_transfer_once_and_balance_every_port() {
        let o = Overheads {
            switch: 1,
            transit: 10,
            pairs: true,
        };
        for family in Family::ALL {
            let whole = pattern(family, 256, 30_000, 81, 3);
            let halves = split(&whole, o);
            let mut taken: Vec<u32> = halves.iter().flat_map(|h| h.transfers.clone()).collect();
            taken.sort_unstable();
            assert!(taken.iter().copied().eq(0..whole.transfers.len() as u32));
            for h in &halves {
                for (j, &i) in h.transfers.iter().enumerate() {
                    assert_eq!(h.pattern.transfers[j], whole.transfers[i as usize]);
                }
            }
            let bound = whole.lower_bound(o);
            let [a, b] = [0, 1].map(|k| halves[k].pattern.lower_bound(o));
            let name = family.name();
            for half in [a, b] {
                assert!(half <= bound / 2 + bound / 200, "{name}: {half} of {bound}");
            }
            let together = seam(a, o) + b;
            assert!(
                together <= bound + bound / 1000,
                "{name}: {a} + {b}, {bound}"
            );
        }
    }

    /// Schedules in halves pass the checker, with and without multicasts and pairs.
    #[test]
    fn schedules_in_halves_pass_the_checker() {
        let mut rng = Rng(13);
        for case in 0..300 {
            let pattern = random_small(&mut rng, 1 + case % 4, 25);
            let switch = case as u32 % 3;
            let o = Overheads {
                switch,
                transit: switch + [0, 1, 9][case as usize / 3 % 3],
                pairs: case % 2 == 0,
            };
            let s = in_halves(&pattern, o);
            let errors = check(&pattern, o, &s);
            assert!(
                errors.is_empty(),
                "case {case} {o:?}: {errors:?}\n{pattern:?}"
            );
        }
    }

    /// The seam is the earliest start: a cycle earlier, the second half's receiver switches while the
    /// first half's last word is still arriving; without a switch, the two halves' sends overlap.
    #[test]
    fn a_cycle_before_the_seam_fails_the_checker() {
        let pattern = Pattern {
            transfers: [5, 5]
                .map(|words| PatternTransfer {
                    source: 0,
                    destinations: vec![2],
                    words,
                })
                .to_vec(),
        };
        for switch in [0, 1, 3] {
            let o = Overheads {
                switch,
                transit: 10,
                pairs: false,
            };
            let mut s = in_halves(&pattern, o);
            assert!(check(&pattern, o, &s).is_empty());
            // The first half's piece sends in cycles [0, 5), its words arrive until 15; the second
            // half's receiver switches from 15, so it sends from 5 + switch. A cycle earlier:
            let second = s.pieces.last_mut().expect("two pieces");
            assert_eq!(second.start, 5 + switch);
            second.start -= 1;
            assert!(!check(&pattern, o, &s).is_empty(), "switch {switch}");
        }
    }
}
