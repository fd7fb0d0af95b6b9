//! Transfers that name a destination tile twice, cut so that each part names every tile once.
//!
//! Why: a planner may gather the same block into two buffers of one tile (a vertex whose two
//! operands are the same block), so one transfer names that tile twice. Its receive port takes one
//! word per cycle into one place in memory: the two copies are two receptions at different cycles,
//! each with its own switch, and the sender sends the words twice. One piece cannot reach both.
//!
//! Contract: [`apart`] returns `None` when no transfer names a tile twice; otherwise a pattern of
//! the same transfers in order, each one that names a tile twice cut into consecutive runs of its
//! destination list, a new run starting at each destination its run already names, so no part
//! names a tile twice. [`Apart::pieces`] maps pieces of a schedule of that pattern to pieces of the
//! original: each to its transfer, its destinations the same tiles, as a range of the original
//! list. A schedule of the cut pattern that passes the checker therefore maps to one of the
//! original with the same horizon, holding the same ports at the same cycles. The lower bound of a
//! pattern is that of its cut form ([`super::Pattern::lower_bounds`]), which counts each copy.

use super::pieces::Cut;
use super::{Pattern, PatternTransfer};
use rayon::prelude::*;

/// The cut pattern and where each of its transfers comes from.
pub(super) type Apart = Cut;

/// Whether `destinations` names a tile twice.
fn names_a_tile_twice(destinations: &[u32]) -> bool {
    match destinations.len() {
        0 | 1 => false,
        n if n <= 16 => (1..n).any(|i| destinations[..i].contains(&destinations[i])),
        _ => {
            let mut sorted = destinations.to_vec();
            sorted.sort_unstable();
            sorted.windows(2).any(|w| w[0] == w[1])
        }
    }
}

/// `pattern` with every transfer that names a tile twice cut apart (module docs), or `None`.
pub(super) fn apart(pattern: &Pattern) -> Option<Apart> {
    let twice = |t: &PatternTransfer| names_a_tile_twice(&t.destinations);
    if !pattern.transfers.par_iter().any(twice) {
        return None;
    }
    let mut transfers = Vec::with_capacity(pattern.transfers.len());
    let mut origin = Vec::with_capacity(pattern.transfers.len());
    let mut run: Vec<u32> = Vec::new();
    for (i, t) in pattern.transfers.iter().enumerate() {
        let n = t.destinations.len();
        if !twice(t) {
            transfers.push(t.clone());
            origin.push((i as u32, 0, true));
            continue;
        }
        let mut from = 0;
        run.clear();
        for (k, &d) in t.destinations.iter().enumerate() {
            if run.contains(&d) {
                transfers.push(PatternTransfer {
                    source: t.source,
                    destinations: t.destinations[from..k].to_vec(),
                    words: t.words,
                });
                origin.push((i as u32, from as u32, false));
                (from, run) = (k, Vec::new());
            }
            run.push(d);
        }
        transfers.push(PatternTransfer {
            source: t.source,
            destinations: t.destinations[from..n].to_vec(),
            words: t.words,
        });
        origin.push((i as u32, from as u32, false));
    }
    Some(Apart {
        pattern: Pattern { transfers },
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::Overheads;
    use crate::exchange::check::check;
    use crate::exchange::schedule::schedule;

    fn transfer(source: u32, destinations: &[u32], words: u32) -> PatternTransfer {
        PatternTransfer {
            source,
            destinations: destinations.to_vec(),
            words,
        }
    }

    #[test]
    fn a_tile_named_twice_is_cut_into_runs() {
        let pattern = Pattern {
            transfers: vec![
                transfer(0, &[1, 2], 3),
                transfer(0, &[0, 0], 2),
                transfer(1, &[2, 3, 2, 4, 3, 2], 1),
            ],
        };
        let a = apart(&pattern).expect("two transfers name a tile twice");
        let cut: Vec<&[u32]> = a
            .pattern
            .transfers
            .iter()
            .map(|t| t.destinations.as_slice())
            .collect();
        assert_eq!(cut, [&[1, 2][..], &[0], &[0], &[2, 3], &[2, 4, 3], &[2]]);
        assert_eq!(
            a.origin,
            [
                (0, 0, true),
                (1, 0, false),
                (1, 1, false),
                (2, 0, false),
                (2, 2, false),
                (2, 5, false)
            ]
        );
        assert!(
            apart(&Pattern {
                transfers: vec![transfer(0, &[1, 2], 3), transfer(0, &[0], 2)]
            })
            .is_none()
        );
    }

    /// A block gathered into two buffers of its own tile (a vertex reading `x · x`): the tile
    /// receives it twice, one reception after the other, and the bound counts both.
    #[test]
    fn a_block_gathered_twice_onto_its_own_tile_is_received_twice() {
        let o = Overheads {
            switch: 1,
            transit: 10,
            pairs: true,
        };
        let pattern = Pattern {
            transfers: (0..3).map(|t| transfer(t, &[t, t], 2)).collect(),
        };
        // Per tile: 4 words sent, 2·2 words and 2 switches received, the first switch hidden.
        assert_eq!(pattern.lower_bound(o), 10 + 5);
        let s = schedule(&pattern, o);
        assert_eq!(check(&pattern, o, &s), Vec::<String>::new());
        // Each copy by a piece of its own: none reaches both names.
        for p in &s.pieces {
            assert!(
                matches!(p.destinations, Some((a, b)) if b == a + 1),
                "{s:?}"
            );
        }
    }
}
