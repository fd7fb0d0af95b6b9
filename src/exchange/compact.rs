//! Pieces moved as early as their ports allow, in their order on every port.
//!
//! Why: the tight cover ([`super::cover`]) charges every piece a switch on both its ports, a
//! symmetric open shop, where only the receivers switch: a sender may send one piece right after
//! another to other receivers. Moved as early as the rules allow, such pieces close up.
//!
//! Contract: [`compacted`] takes pieces of a schedule of `pattern` that keeps the target's rules
//! (module docs of [`super`]) and returns the same pieces, each started at the earliest cycle at
//! which every port it holds (its sender and receivers, and their mates when wide) is free of the
//! pieces before it, taken in order of start: on every port the pieces keep their order, none
//! starts later than before, so the horizon never grows and the schedule keeps the rules; the
//! words of a transfer reach each destination in the same order. Returned in the order of
//! [`super::Schedule::pieces`].

use super::{Overheads, Pattern, Piece, mate};

/// `pieces`, each as early as its ports allow (module docs).
pub(super) fn compacted(pattern: &Pattern, o: Overheads, mut pieces: Vec<Piece>) -> Vec<Piece> {
    let tiles = pattern.tiles().next_multiple_of(2);
    // Per tile, the first cycle its sender is free and the first its receiver is free; a
    // receiver holds its port from `lead` cycles after a send until its last word arrives.
    let lead = i64::from(o.transit) - i64::from(o.switch);
    let mut send_free = vec![0i64; tiles];
    let mut receive_free = vec![i64::MIN / 2; tiles];
    let mut receivers: Vec<usize> = Vec::new();
    for p in &mut pieces {
        let t = &pattern.transfers[p.transfer as usize];
        let (a, b) = p.destinations.unwrap_or((0, t.destinations.len() as u32));
        receivers.clear();
        receivers.extend(
            t.destinations[a as usize..b as usize]
                .iter()
                .map(|&d| d as usize),
        );
        let mut senders = [t.source as usize; 2];
        if p.wide {
            senders[1] = mate(t.source) as usize;
            let n = receivers.len();
            for i in 0..n {
                receivers.push(mate(receivers[i] as u32) as usize);
            }
        }
        let earliest = (senders.iter().map(|&s| send_free[s]))
            .chain(receivers.iter().map(|&d| receive_free[d] - lead))
            .fold(0, i64::max);
        // Never later: the pieces before it on its ports end no later than they did.
        debug_assert!(earliest <= i64::from(p.start));
        let start = earliest.min(i64::from(p.start));
        let end = start + i64::from(p.cycles());
        for &s in &senders {
            send_free[s] = end;
        }
        for &d in &receivers {
            receive_free[d] = end + i64::from(o.transit);
        }
        p.start = start as u32;
    }
    pieces.sort_unstable();
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::PatternTransfer;
    use crate::exchange::check::check;
    use crate::exchange::pieces::horizon;
    use crate::exchange::schedule::schedule;

    /// Two senders of a supertile pair each send four multicasts of 8 words, each to its own
    /// two receivers: the pair's bus must run wide without a break, 32 cycles, to meet the bound.
    /// The cover charges each piece a switch at its sender too and ends 3 cycles above; closed
    /// up, the pieces meet the bound.
    #[test]
    fn a_senders_pieces_to_other_receivers_close_up() {
        let transfers = (0..2)
            .flat_map(|s| {
                (0..4).map(move |j| PatternTransfer {
                    source: s,
                    destinations: vec![4 * s + j, 4 * s + j + 8],
                    words: 8,
                })
            })
            .collect();
        let pattern = Pattern { transfers };
        let o = Overheads {
            switch: 1,
            transit: 10,
            pairs: true,
        };
        let s = schedule(&pattern, o);
        assert_eq!((s.lower_bound, s.horizon), (42, 42), "{}", s.kind);
        assert!(check(&pattern, o, &s).is_empty());
    }

    /// Closed up, random schedules keep the rules and never end later.
    #[test]
    fn compacted_schedules_pass_the_checker_and_never_end_later() {
        use crate::exchange::synthetic::{Rng, random_small};
        let mut rng = Rng(17);
        for case in 0..300 {
            let pattern = random_small(&mut rng, 1 + case % 4, 25);
            let o = Overheads {
                switch: [1, 3, 5][case as usize % 3],
                transit: [10, 4, 2][case as usize % 3],
                pairs: case % 2 == 0,
            };
            let mut s = schedule(&pattern, o);
            // A schedule spread out in time: every piece later by its place in the order.
            for (i, p) in s.pieces.iter_mut().enumerate() {
                p.start += 3 * i as u32;
            }
            let spread = horizon(&s.pieces, o);
            s.pieces = compacted(&pattern, o, s.pieces);
            s.horizon = horizon(&s.pieces, o);
            assert!(s.horizon <= spread, "case {case}");
            let errors = check(&pattern, o, &s);
            assert!(errors.is_empty(), "case {case}: {errors:?}\n{pattern:?}");
        }
    }
}
