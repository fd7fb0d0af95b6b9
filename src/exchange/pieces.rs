//! Pieces in the order of a schedule, and the horizon they reach.
//!
//! Contract: [`sorted`] takes pieces already in order of start cycle (as the schedulers emit them)
//! and returns them in the full order of [`Piece`] ([`super::Schedule::pieces`]), sorting only the
//! pieces of each start. [`horizon`] is the last cycle a piece's last word arrives (0 for none).
//! Neither looks at a pattern; both are shared by the strategies and by the halves. [`Cut`] is a
//! pattern whose transfers' destination lists were cut into runs (by `peel` and by `apart`), and
//! maps the pieces of a schedule of it back to the pattern it came from.

use super::{Overheads, Pattern, Piece};

/// A pattern whose transfers are runs of another's destination lists, and where each comes from.
#[derive(Clone, Debug)]
pub(super) struct Cut {
    pub(super) pattern: Pattern,
    /// Per transfer of `pattern`: the original transfer, the index of its first destination in
    /// the original list, and whether it is the original whole.
    pub(super) origin: Vec<(u32, u32, bool)>,
}

impl Cut {
    /// The pieces of the original pattern for `pieces` of a schedule of the cut one, in order: each
    /// to its transfer, its destinations the same tiles as a range of the original list.
    pub(super) fn pieces(&self, pieces: Vec<Piece>) -> Vec<Piece> {
        let mut mapped: Vec<Piece> = pieces
            .into_iter()
            .map(|p| {
                let (transfer, first, whole) = self.origin[p.transfer as usize];
                let len = self.pattern.transfers[p.transfer as usize]
                    .destinations
                    .len() as u32;
                let destinations = match p.destinations {
                    None if whole => None,
                    None => Some((first, first + len)),
                    Some((a, b)) => Some((first + a, first + b)),
                };
                Piece {
                    transfer,
                    destinations,
                    ..p
                }
            })
            .collect();
        mapped.sort_by_key(|p| p.start);
        sorted(mapped)
    }
}

/// The horizon of `pieces`: the cycle their last word arrives, `transit` after it leaves.
pub(super) fn horizon(pieces: &[Piece], o: Overheads) -> u32 {
    pieces
        .iter()
        .map(|p| p.start + p.cycles() + o.transit)
        .max()
        .unwrap_or(0)
}

/// Pieces in order, given pieces in order of start: each start's pieces sorted. No two are equal
/// (each covers other words of its transfer), so the order is total.
pub(super) fn sorted(mut pieces: Vec<Piece>) -> Vec<Piece> {
    debug_assert!(pieces.is_sorted_by_key(|p| p.start));
    use rayon::prelude::*;
    pieces
        .par_chunk_by_mut(|a, b| a.start == b.start)
        .for_each(|group| group.sort_unstable());
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::synthetic::Rng;

    /// Sorting each start's pieces gives the order of a comparison sort.
    #[test]
    fn sorted_pieces_are_in_full_order() {
        let mut rng = Rng(5);
        let pieces: Vec<Piece> = (0..2000)
            .map(|i| Piece {
                start: rng.below(40) as u32,
                transfer: rng.below(30) as u32,
                destinations: (rng.below(2) == 0).then(|| (rng.below(3) as u32, 3)),
                word: i,
                words: 1 + rng.below(9) as u32,
                wide: rng.below(2) == 0,
            })
            .collect();
        let mut expected = pieces.clone();
        expected.sort_unstable();
        let mut by_start = pieces;
        by_start.sort_by_key(|p| p.start);
        assert_eq!(sorted(by_start), expected);
        assert!(sorted(Vec::new()).is_empty());
    }
}
