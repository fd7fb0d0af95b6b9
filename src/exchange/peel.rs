//! Multicasts with their lone ends peeled off: a gather whose destination range ends on a tile
//! whose pair mate is not a destination, sent to that tile on its own.
//!
//! Why: a whole multicast runs wide only by holding the mate of each of its destinations, and over
//! supertile pairs it waits for every destination pair to be free. Where a range of tiles receives
//! the same key blocks, as a causal attention's query blocks do, a range that starts or ends on an
//! odd boundary shares a pair with the next range: that pair's two tiles receive different
//! transfers, and its tile of the heavier range must take most of them wide. Sent on its own, the
//! end tile's copy is a transfer of one receiver, which the cover fits to the pair on its own.
//!
//! Contract: [`peel`] returns a pattern of the same transfers in order, each multicast (transfer
//! of words to more than one destination) cut into at most three: its first destination alone,
//! the range between, its last destination alone, where an end is peeled only when it is *lone*
//! (named once, its mate not named) and its sender's pair still sends within `bound` (the sender
//! term of [`Pattern::lower_bound`]), so the peeled pattern has the same lower bound as the
//! original; `None` when no end is peeled. [`Peeled::pieces`] maps pieces of a schedule of the
//! peeled pattern to pieces of the original: each to its transfer, its destinations the same
//! tiles, as a range of the original list. A schedule of the peeled pattern that passes the
//! checker therefore maps to one of the original with the same horizon: the same ports are held
//! at the same cycles and every destination gets every word once.

use super::pieces::Cut;
use super::{Overheads, Pattern, PatternTransfer, mate};

/// The cut pattern and where each of its transfers comes from.
pub(super) type Peeled = Cut;

/// `pattern` with the lone ends of its multicasts peeled off (module docs), or `None`.
pub(super) fn peel(pattern: &Pattern, o: Overheads, bound: u32) -> Option<Peeled> {
    let tiles = pattern.tiles().next_multiple_of(2);
    // Words each sender pair sends, and what the bound lets it send.
    let mut pair_send = vec![0u64; tiles / 2];
    for t in &pattern.transfers {
        pair_send[t.source as usize / 2] += u64::from(t.words);
    }
    let most = 2 * u64::from(bound.saturating_sub(o.transit));
    let mut transfers = Vec::with_capacity(pattern.transfers.len());
    let mut origin = Vec::with_capacity(pattern.transfers.len());
    let mut peeled_any = false;
    for (i, t) in pattern.transfers.iter().enumerate() {
        let n = t.destinations.len();
        let lone = |k: usize| {
            let d = t.destinations[k];
            t.destinations
                .iter()
                .filter(|&&e| e == d || e == mate(d))
                .count()
                == 1
        };
        let send = &mut pair_send[t.source as usize / 2];
        let afford = |send: &mut u64| {
            let ok = *send + u64::from(t.words) <= most;
            if ok {
                *send += u64::from(t.words);
            }
            ok
        };
        let multicast = t.words > 0 && n > 1;
        let first = multicast && lone(0) && afford(send);
        let (a, b) = (usize::from(first), n);
        let last = multicast && b - a > 1 && lone(n - 1) && afford(send);
        let b = b - usize::from(last);
        let mut push = |from: usize, to: usize| {
            transfers.push(PatternTransfer {
                source: t.source,
                destinations: t.destinations[from..to].to_vec(),
                words: t.words,
            });
            origin.push((i as u32, from as u32, to - from == n));
        };
        if first {
            push(0, 1);
        }
        push(a, b);
        if last {
            push(n - 1, n);
        }
        peeled_any |= first || last;
    }
    peeled_any.then_some(Peeled {
        pattern: Pattern { transfers },
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(source: u32, destinations: &[u32], words: u32) -> PatternTransfer {
        PatternTransfer {
            source,
            destinations: destinations.to_vec(),
            words,
        }
    }

    const O: Overheads = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };

    /// Lone ends come off, ends whose mates are destinations and ends named twice stay; the
    /// peeled pattern keeps the bound.
    #[test]
    fn lone_ends_are_peeled_and_the_bound_kept() {
        let pattern = Pattern {
            transfers: vec![
                // 5 and 9 are lone: both ends come off.
                transfer(0, &[5, 6, 7, 9], 8),
                // 2's mate 3 is named, and 4 is named twice: nothing comes off.
                transfer(1, &[2, 3, 4, 6, 7, 4], 8),
                // Two destinations: the first comes off, the rest is one already.
                transfer(2, &[1, 9], 8),
                // Tile 7 takes most of the bound, which leaves the senders slack.
                transfer(3, &[7], 40),
            ],
        };
        let bound = pattern.lower_bound(O);
        assert_eq!(bound, 40);
        let peeled = peel(&pattern, O, bound).expect("lone ends");
        let lists: Vec<&[u32]> = (peeled.pattern.transfers.iter())
            .map(|t| t.destinations.as_slice())
            .collect();
        assert_eq!(
            lists,
            [
                &[5][..],
                &[6, 7],
                &[9],
                &[2, 3, 4, 6, 7, 4],
                &[1],
                &[9],
                &[7]
            ]
        );
        assert_eq!(peeled.pattern.lower_bound(O), bound);
        assert!(
            peel(
                &Pattern {
                    transfers: vec![transfer(0, &[2, 3], 8)]
                },
                O,
                100
            )
            .is_none()
        );
    }

    /// On random patterns the peeled one keeps the bound, and maps back to the same tiles.
    #[test]
    fn random_peeled_patterns_keep_the_bound() {
        let mut rng = crate::exchange::synthetic::Rng(3);
        for case in 0..500 {
            let pattern = crate::exchange::synthetic::random_small(&mut rng, 5, 25);
            let bound = pattern.lower_bound(O);
            let Some(peeled) = peel(&pattern, O, bound) else {
                continue;
            };
            assert_eq!(peeled.pattern.lower_bound(O), bound, "case {case}");
            for (t, &(i, first, whole)) in peeled.pattern.transfers.iter().zip(&peeled.origin) {
                let original = &pattern.transfers[i as usize].destinations;
                let first = first as usize;
                assert_eq!(
                    &original[first..first + t.destinations.len()],
                    t.destinations
                );
                assert_eq!(whole, t.destinations.len() == original.len());
            }
        }
    }

    /// An end is peeled only while its sender's pair sends within the bound.
    #[test]
    fn a_sender_without_slack_peels_nothing() {
        let pattern = Pattern {
            transfers: vec![transfer(0, &[2, 4, 6], 40), transfer(1, &[8], 40)],
        };
        let bound = pattern.lower_bound(O);
        // The pair (0, 1) sends 80 words, all that the bound lets it send.
        assert_eq!(bound, 10 + 80 / 2);
        assert!(peel(&pattern, O, bound).is_none());
        // With slack for 40 more words, one end comes off.
        let peeled = peel(&pattern, O, bound + 20).expect("slack for one end");
        let lists: Vec<&[u32]> = (peeled.pattern.transfers.iter())
            .map(|t| t.destinations.as_slice())
            .collect();
        assert_eq!(lists, [&[2][..], &[4, 6], &[8]]);
    }
}
