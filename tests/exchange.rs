//! Property tests of the exchange scheduler: random small patterns always pass the independent checker;
//! without overheads, unicast patterns are scheduled exactly at the lower bound.

use ipu_codegen::exchange::check::check;
use ipu_codegen::exchange::schedule::schedule;
use ipu_codegen::exchange::synthetic::Rng;
use ipu_codegen::exchange::{Overheads, Pattern, PatternTransfer, Piece, Schedule};

fn random_pattern(rng: &mut Rng, multicast: bool) -> Pattern {
    let tiles = 2 + rng.below(10);
    let transfers = (0..1 + rng.below(40))
        .map(|_| {
            let fanout = if multicast { 1 + rng.below(4) } else { 1 };
            let mut destinations: Vec<u32> = (0..fanout).map(|_| rng.below(tiles) as u32).collect();
            destinations.sort_unstable();
            destinations.dedup();
            PatternTransfer {
                source: rng.below(tiles) as u32,
                destinations,
                words: 1 + rng.below(30) as u32,
            }
        })
        .collect();
    Pattern { transfers }
}

#[test]
fn random_patterns_pass_the_checker() {
    let mut rng = Rng(42);
    for case in 0..600 {
        let multicast = case % 2 == 1;
        let pattern = random_pattern(&mut rng, multicast);
        for o in [
            Overheads::ZERO,
            Overheads {
                switch: 1,
                transit: 10,
            },
            Overheads {
                switch: 3,
                transit: 4,
            },
        ] {
            let s = schedule(&pattern, o);
            let errors = check(&pattern, o, &s);
            assert!(
                errors.is_empty(),
                "case {case} {o:?}: {errors:?}\n{pattern:?}\n{s:?}"
            );
        }
    }
}

#[test]
fn unicast_without_overheads_meets_the_bound_exactly() {
    let mut rng = Rng(7);
    for case in 0..600 {
        let pattern = random_pattern(&mut rng, false);
        let s = schedule(&pattern, Overheads::ZERO);
        assert_eq!(s.horizon, s.lower_bound, "case {case}: {pattern:?}\n{s:?}");
    }
}

#[test]
fn the_checker_sees_collisions_gaps_and_late_arrivals() {
    let o = Overheads {
        switch: 1,
        transit: 10,
    };
    let pattern = Pattern {
        transfers: vec![
            PatternTransfer {
                source: 0,
                destinations: vec![2],
                words: 5,
            },
            PatternTransfer {
                source: 1,
                destinations: vec![2],
                words: 5,
            },
        ],
    };
    let good = schedule(&pattern, o);
    assert!(check(&pattern, o, &good).is_empty());
    let piece = |start, transfer| Piece {
        start,
        transfer,
        destinations: None,
        word: 0,
        words: 5,
    };
    let broken = |pieces: Vec<Piece>, horizon| Schedule {
        pieces,
        horizon,
        lower_bound: good.lower_bound,
        kind: "t".into(),
        list_horizon: None,
    };
    // Two senders reach tile2 at once.
    let e = check(&pattern, o, &broken(vec![piece(0, 0), piece(0, 1)], 100));
    assert!(e.iter().any(|e| e.contains("tile2 receives")), "{e:?}");
    // Back to back without the mux switch cycle.
    let e = check(&pattern, o, &broken(vec![piece(0, 0), piece(5, 1)], 100));
    assert!(e.iter().any(|e| e.contains("tile2 receives")), "{e:?}");
    // A transfer never sent.
    let e = check(&pattern, o, &broken(vec![piece(0, 0)], 100));
    assert!(e.iter().any(|e| e.contains("never arrive")), "{e:?}");
    // Arrival after the horizon.
    let e = check(&pattern, o, &broken(vec![piece(0, 0), piece(6, 1)], 20));
    assert!(e.iter().any(|e| e.contains("after the horizon")), "{e:?}");
}

#[test]
fn the_checker_does_not_wrap_around_or_trust_a_recorded_bound() {
    let o = Overheads {
        switch: 1,
        transit: 10,
    };
    let pattern = Pattern {
        transfers: vec![PatternTransfer {
            source: 0,
            destinations: vec![1],
            words: 4,
        }],
    };
    let pieces = vec![
        Piece {
            start: 0,
            transfer: 0,
            destinations: None,
            word: 0,
            words: 2,
        },
        Piece {
            start: u32::MAX - 10,
            transfer: 0,
            destinations: None,
            word: 2,
            words: 2,
        },
    ];
    let forged = Schedule {
        pieces,
        horizon: 12,
        lower_bound: 12,
        kind: "forged".into(),
        list_horizon: None,
    };
    let errors = check(&pattern, o, &forged);
    assert!(
        errors.iter().any(|e| e.contains("after the horizon")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("the pattern's is 14")),
        "{errors:?}"
    );
}
