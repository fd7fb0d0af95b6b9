//! Property tests of the exchange scheduler: random small patterns, with and without multicast and
//! supertile pairs, always pass the independent checker; without overheads and pairs, unicast patterns
//! are scheduled exactly at the lower bound, and so are even ones over supertile pairs; a large
//! multicast phase is scheduled in halves within 1 % of its bound.

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
        for (switch, transit, pairs) in [
            (0, 0, false),
            (0, 0, true),
            (1, 10, false),
            (1, 10, true),
            (3, 4, false),
            (3, 4, true),
            // A switch longer than the transit: receivers switch before the sender starts.
            (5, 2, false),
            (5, 2, true),
        ] {
            let o = Overheads {
                switch,
                transit,
                pairs,
            };
            let s = schedule(&pattern, o);
            let errors = check(&pattern, o, &s);
            assert!(
                errors.is_empty(),
                "case {case} {o:?}: {errors:?}\n{pattern:?}\n{s:?}"
            );
        }
    }
}

/// The bounds of one pass are the bounds asked for one at a time: with pairs, the narrow one is not
/// disturbed by what pairs receive, and the bound over pairs is that of the pattern over pairs.
#[test]
fn the_bounds_of_one_pass_are_the_bounds_one_at_a_time() {
    let mut rng = Rng(11);
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };
    let narrow = Overheads { pairs: false, ..o };
    for case in 0..300 {
        let pattern = random_pattern(&mut rng, case % 2 == 0);
        let bounds = pattern.lower_bounds(o);
        assert_eq!(bounds.narrow, pattern.lower_bound(narrow), "case {case}");
        let over_pairs = Pattern {
            transfers: (pattern.transfers.iter())
                .map(|t| {
                    let mut destinations = Vec::new();
                    for d in t.destinations.iter().map(|d| d / 2) {
                        if !destinations.contains(&d) {
                            destinations.push(d);
                        }
                    }
                    PatternTransfer {
                        source: t.source / 2,
                        destinations,
                        words: t.words.div_ceil(2),
                    }
                })
                .collect(),
        };
        assert_eq!(
            bounds.over_pairs,
            over_pairs.lower_bound(narrow),
            "case {case}"
        );
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

/// Over supertile pairs a pair moves two words per cycle; with no overheads and even transfers the
/// pair bound is exactly reachable (an open shop over pairs), and the scheduler reaches it.
#[test]
fn unicast_over_pairs_without_overheads_meets_the_pair_bound_exactly() {
    let mut rng = Rng(9);
    let o = Overheads {
        pairs: true,
        ..Overheads::ZERO
    };
    for case in 0..600 {
        let mut pattern = random_pattern(&mut rng, false);
        for t in &mut pattern.transfers {
            t.words *= 2;
        }
        let s = schedule(&pattern, o);
        assert_eq!(s.horizon, s.lower_bound, "case {case}: {pattern:?}\n{s:?}");
        assert!(check(&pattern, o, &s).is_empty(), "case {case}");
    }
}

#[test]
fn the_checker_sees_collisions_gaps_and_late_arrivals() {
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: false,
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
        wide: false,
    };
    let broken = |pieces: Vec<Piece>, horizon| Schedule {
        pieces,
        horizon,
        lower_bound: good.lower_bound,
        kind: "t".into(),
        initial_horizon: 0,
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

/// A block gathered into two buffers of its own tile (a vertex reading `x · x`): the transfer
/// names the tile twice. Its receive port takes one word per cycle into one place, so the two copies
/// are two receptions; one piece reaching both names is refused by the checker (as by the device),
/// and the scheduler sends each copy apart, each with its switch, within a bound that counts both.
#[test]
fn a_tile_named_twice_by_a_transfer_receives_each_copy_apart() {
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };
    let pattern = Pattern {
        transfers: (0..3)
            .map(|t| PatternTransfer {
                source: t,
                destinations: vec![t, t],
                words: 2,
            })
            .collect(),
    };
    assert_eq!(pattern.lower_bound(o), 15);
    // One piece to both names: the tile receives two copies in the same cycles.
    let both = Schedule {
        pieces: (0..3)
            .map(|t| Piece {
                start: 0,
                transfer: t,
                destinations: None,
                word: 0,
                words: 2,
                wide: false,
            })
            .collect(),
        horizon: 15,
        lower_bound: 15,
        kind: "t".into(),
        initial_horizon: 0,
    };
    let e = check(&pattern, o, &both);
    for t in 0..3 {
        let named = format!("tile{t} receives transfers {t} and {t} in the same cycle 9");
        assert!(e.iter().any(|e| e.contains(&named)), "{named}: {e:?}");
    }
    let s = schedule(&pattern, o);
    assert_eq!(check(&pattern, o, &s), Vec::<String>::new(), "{s:?}");
    assert!(
        s.pieces
            .iter()
            .all(|p| matches!(p.destinations, Some((a, b)) if b == a + 1)),
        "{s:?}"
    );
    // A wide piece reaching a tile and its mate holds each once: no problem.
    let mates = Pattern {
        transfers: vec![PatternTransfer {
            source: 0,
            destinations: vec![3, 2],
            words: 4,
        }],
    };
    let s = schedule(&mates, o);
    assert_eq!(check(&mates, o, &s), Vec::<String>::new(), "{s:?}");
}

/// Random patterns whose transfers may name a tile twice, their own source among them, pass the
/// checker.
#[test]
fn random_patterns_naming_a_tile_twice_pass_the_checker() {
    let mut rng = Rng(17);
    for case in 0..300 {
        let mut pattern = random_pattern(&mut rng, true);
        for t in &mut pattern.transfers {
            match rng.below(4) {
                0 => t.destinations.push(t.destinations[0]),
                1 => t.destinations.insert(0, t.source),
                2 => t.destinations.extend([t.source, t.source]),
                _ => {}
            }
        }
        for (switch, transit, pairs) in [(1, 10, false), (1, 10, true), (3, 4, true)] {
            let o = Overheads {
                switch,
                transit,
                pairs,
            };
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
fn the_checker_does_not_wrap_around_or_trust_a_recorded_bound() {
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: false,
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
            wide: false,
        },
        Piece {
            start: u32::MAX - 10,
            transfer: 0,
            destinations: None,
            word: 2,
            words: 2,
            wide: false,
        },
    ];
    let forged = Schedule {
        pieces,
        horizon: 12,
        lower_bound: 12,
        kind: "forged".into(),
        initial_horizon: 0,
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

#[test]
fn the_checker_sees_wide_pieces_against_their_pair_mates() {
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };
    // tile0 -> tile2 (8 words) and tile1 -> tile4 (4 words): tile1 is tile0's mate.
    let pattern = Pattern {
        transfers: vec![
            PatternTransfer {
                source: 0,
                destinations: vec![2],
                words: 8,
            },
            PatternTransfer {
                source: 1,
                destinations: vec![4],
                words: 4,
            },
            PatternTransfer {
                source: 6,
                destinations: vec![3],
                words: 4,
            },
        ],
    };
    let good = schedule(&pattern, o);
    assert!(check(&pattern, o, &good).is_empty(), "{good:?}");
    let piece = |start, transfer, words, wide| Piece {
        start,
        transfer,
        destinations: None,
        word: 0,
        words,
        wide,
    };
    let with = |pieces: Vec<Piece>| Schedule {
        pieces,
        horizon: 100,
        lower_bound: good.lower_bound,
        kind: "t".into(),
        initial_horizon: 0,
    };
    // A wide send from tile0 while its mate tile1 sends.
    let e = check(
        &pattern,
        o,
        &with(vec![
            piece(0, 0, 8, true),
            piece(2, 1, 4, false),
            piece(20, 2, 4, false),
        ]),
    );
    assert!(e.iter().any(|e| e.contains("tile1 sends")), "{e:?}");
    // A wide receive at tile2 while its mate tile3 receives other data.
    let e = check(
        &pattern,
        o,
        &with(vec![
            piece(0, 0, 8, true),
            piece(20, 1, 4, false),
            piece(1, 2, 4, false),
        ]),
    );
    assert!(e.iter().any(|e| e.contains("tile3 receives")), "{e:?}");
    // Apart in time, both are fine; wide pieces need pairs.
    let apart = with(vec![
        piece(0, 0, 8, true),
        piece(20, 1, 4, false),
        piece(20, 2, 4, false),
    ]);
    assert!(check(&pattern, o, &apart).is_empty());
    let narrow = Overheads { pairs: false, ..o };
    let e = check(&pattern, narrow, &apart);
    assert!(
        e.iter().any(|e| e.contains("without supertile pairs")),
        "{e:?}"
    );
}

#[test]
fn a_multicast_to_both_mates_goes_wide_at_the_pair_bound() {
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };
    let pattern = Pattern {
        transfers: vec![PatternTransfer {
            source: 0,
            destinations: vec![2, 3],
            words: 256,
        }],
    };
    let s = schedule(&pattern, o);
    assert!(check(&pattern, o, &s).is_empty());
    assert_eq!(s.lower_bound, 10 + 128);
    assert_eq!(s.horizon, s.lower_bound, "{s:?}");
    assert!(s.pieces.iter().all(|p| p.wide));
}

/// Tile 0 receives four transfers of 4 words, its mate tile 1 one. The pair's ports hold 14 cycles
/// each at best: tile 0's wide pieces hold tile 1's port too, switch included. Counting each
/// switch once for the pair would allow 13; a schedule meets 14.
#[test]
fn a_hot_tiles_wide_pieces_cost_its_mate_their_switches() {
    let o = Overheads {
        switch: 1,
        transit: 1,
        pairs: true,
    };
    let unicast = |source, destination| PatternTransfer {
        source,
        destinations: vec![destination],
        words: 4,
    };
    let pattern = Pattern {
        transfers: vec![
            unicast(2, 0),
            unicast(4, 0),
            unicast(6, 0),
            unicast(8, 0),
            unicast(10, 1),
        ],
    };
    assert_eq!(pattern.lower_bound(o), 14);
    // Tile 0 and tile 1 take one transfer each narrow, side by side; then tile 0 the rest wide.
    let piece = |start, transfer, wide| Piece {
        start,
        transfer,
        destinations: None,
        word: 0,
        words: 4,
        wide,
    };
    let hand = Schedule {
        pieces: vec![
            piece(0, 0, false),
            piece(0, 4, false),
            piece(5, 1, true),
            piece(8, 2, true),
            piece(11, 3, true),
        ],
        horizon: 14,
        lower_bound: 14,
        kind: "hand".into(),
        initial_horizon: 14,
    };
    assert_eq!(check(&pattern, o, &hand), Vec::<String>::new());
    let s = schedule(&pattern, o);
    assert!(check(&pattern, o, &s).is_empty(), "{s:?}");
    assert_eq!(s.horizon, 14, "{s:?}");
}

/// The seed's large phase with every transfer to one to four receivers names more destinations than
/// one core schedules quickly: it is scheduled in two halves, which pass the checker and end within
/// 1 % of the pattern's bound.
#[test]
fn a_large_multicast_phase_is_scheduled_in_halves_within_one_percent() {
    use ipu_codegen::exchange::synthetic::{Family, pattern};
    let p = pattern(Family::MulticastHeavy, 1472, 155_880, 81, 1);
    let o = Overheads {
        switch: 1,
        transit: 10,
        pairs: true,
    };
    let s = schedule(&p, o);
    assert!(s.kind.starts_with("halves:"), "{}", s.kind);
    assert_eq!(check(&p, o, &s), Vec::<String>::new());
    assert!(
        s.horizon - s.lower_bound <= s.lower_bound / 100,
        "{} of {}",
        s.horizon,
        s.lower_bound
    );
}

/// The key and value gather of SigLIP's attention under a causal mask. Each range of query tiles
/// receives the key blocks its queries see, and a range that ends on an even tile shares that
/// tile's supertile pair with the next range's first tile, which receives other transfers: the
/// end tile must take most of its range's gathers wide while its mate takes its own. Sent whole,
/// those gathers end 7 % above the bound; with the lone end tile sent its copy apart
/// (`pair-cover-peeled`), within 1 %.
#[test]
fn a_causal_attention_gather_is_scheduled_within_one_percent_of_its_bound() {
    use ipu_codegen::driver::PhaseConfigs;
    use ipu_codegen::stages::{lower_mid, select_finalist};
    use ipu_codegen::target::Target;
    use ipu_codegen::workload::{WorkloadSpec, preset_text};
    let text = preset_text("attention-flash")
        .expect("preset")
        .replace("causal = false", "causal = true");
    let spec = WorkloadSpec::parse(&text, "causal attention").expect("spec");
    let graph = spec.import().expect("graph");
    let target = Target::preset("mk2-1500").expect("target");
    let c = PhaseConfigs::default();
    let mid = lower_mid::lower_mid(&graph, &target, &c.lower_mid).expect("lower_mid");
    let selected = select_finalist::select_finalist(&graph, &mid, &target, &c.select_finalist)
        .expect("select_finalist");
    let pattern = selected.exchanges[0].pattern(&target);
    let o = Overheads::of(&target);
    let s = schedule(&pattern, o);
    assert!(check(&pattern, o, &s).is_empty());
    assert!(
        s.horizon - s.lower_bound <= s.lower_bound / 100,
        "{} above the bound {} ({})",
        s.horizon - s.lower_bound,
        s.lower_bound,
        s.kind
    );
}
