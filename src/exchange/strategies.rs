//! Scheduling an exchange pattern whole: several strategies, keep the shortest.
//!
//! Contract: [`whole`] returns a schedule of its pattern that passes the checker, with the pattern's
//! lower bound, the kind of the strategy kept and the horizon of the first one tried. Which
//! strategies run depends only on the pattern and the overheads, never on timing, and so does the
//! one kept; every strategy is a run of the tight cover ([`super::cover`]), over tiles or over
//! supertile pairs ([`super::pairs`]).
//!
//! - `tight-cover`: an event loop over sender and receiver ports (the critical-line method of the
//!   preemptive open shop). A multicast transfer is sent once per group of its destinations, in as
//!   many groups as the sender's slack below the target pays for (one group per destination
//!   at most); `-whole` variants keep every multicast whole, which suits gathers along the rows and
//!   columns of tile grids, where splitting costs more switches than it saves (patterns of more than
//!   [`EVERY_STRATEGY_TRANSFERS`] transfers skip them). Every piece occupies both its ports for
//!   `switch + words` cycles (a receiver's mux switch comes first), so the loop is a symmetric open
//!   shop with the target horizon `H` = the busiest port's load. Whenever both ends are free, a port
//!   starts a transfer with its free partner of most load (the least slack), of several the
//!   shortest; free partners come from bitsets, one per port
//!   ([`Partners`](super::partners::Partners)); a port that would otherwise miss `H` (its remaining
//!   load equals the time left: it is *tight*) takes a partner along an alternating path, preempting
//!   pieces of ports with slack. A preempted transfer needs one more switch later, so `H` may grow by
//!   that switch. With no overheads and no multicast the result is exactly the bound.
//! - Supertile pairs, four ways:
//!   - `narrow-cover`: tight cover with no wide piece. It meets the bound when no pair needs its bus
//!     doubled, as in shifted all-to-all phases.
//!   - `pair-cover`: tight cover over the pairs themselves ([`over_pairs`]): a pair is one port moving
//!     two words per cycle, and every piece is wide. Its bound charges each piece's switch to the whole
//!     pair where the pattern's bound charges it to one tile, so it meets the pattern's bound when
//!     transfers are few and large. `pair-cover-merged` keeps multicasts whole and first merges the
//!     pairs that receive exactly the same transfers into one port ([`merge_receivers`]): a gather's
//!     multicast to such pairs then has two ports, and alternating paths reach it, where otherwise it
//!     waits for every pair to be free and a receiving pair may idle; on small phases it often still
//!     loses to `pair-cover-whole`, so it runs only in the second pass.
//!   - `planned-cover`: tight cover over tiles where, at each receiving pair that cannot meet the
//!     bound narrow, the busier tile's largest unicast transfers run wide throughout, as many as
//!     the pair term of the bound takes ([`wide_plan`]). A planned transfer's ports include their
//!     mates, so the mates' loads count it from the start, and it costs `ceil(words/2) + switch`.
//!     Other flows may still run wide as in `tight-cover`.
//!   - `tight-cover` with wide runs: `H` starts at the pair-inclusive bound. A flow starts wide
//!     (`ceil(words/2) + switch` cycles, holding the mates of its ports too) when those mates are free
//!     and stay within `H` meanwhile; a port with nothing to start lends its bus to its mate, whose narrow
//!     run restarts wide when that saves more than the extra switch. Wide runs are not part of
//!     alternating paths; a tight port may stop them like multicast pieces. A run widens when its mate
//!     ports can still finish their flows, run narrow, within `H`; on patterns of at most
//!     [`SECOND_PASS_TRANSFERS`] transfers more than 1 % above the bound, a second pass counts the mates'
//!     flows run wide (`-mates-wide`), and runs `pair-cover-merged` when some pairs receive the same
//!     transfers and the bound over pairs lies below the best horizon so far, and
//!     `pair-cover-peeled` when some multicast has a lone end to peel off ([`peel`]): pair cover,
//!     multicasts whole, of the pattern with those ends sent apart, which suits gathers to ranges
//!     of tiles that share a pair with the next range, as a causal attention's key gathers do.
//!
//!   Of narrow and pair cover, the one whose own bound is lower runs; planned cover joins when that
//!   bound lies above the pattern's, and so does tight cover with wide runs on patterns of at most
//!   [`EVERY_STRATEGY_TRANSFERS`] transfers.
//!
//! Every strategy's pieces are closed up ([`compacted`]): the cover charges a switch to senders
//! too, where only receivers switch, so a sender's pieces to other receivers may follow each other
//! sooner. Strategies run in parallel; the kept schedule is the shortest, then the one with fewest
//! pieces, then the first in a fixed order. Deterministic: ties break on ids, no hashing, no timing.

use super::compact::compacted;
use super::cover::{CoverOptions, tight_cover};
use super::pairs::{merge_receivers, over_pairs, pair_cover, wide_plan};
use super::peel::{Peeled, peel};
use super::pieces::horizon;
use super::{LowerBounds, Overheads, Pattern, Piece, Schedule};

/// Patterns up to this many transfers get the mates-wide pass (`whole`).
const SECOND_PASS_TRANSFERS: usize = 20_000;

/// Patterns up to this many transfers try every strategy that may win (`whole`); larger ones skip
/// whole multicasts, tight cover with wide runs, and pair cover unless it can meet the bound: on the
/// seed's large phases those never beat planned cover by more than 0.05 %, and each costs as much.
const EVERY_STRATEGY_TRANSFERS: usize = 50_000;

/// One way to schedule a pattern.
#[derive(Clone, Copy, Debug)]
enum Strategy {
    /// Tight cover over tiles; `split`: multicasts split by the sender's slack; `mates_wide`: a run
    /// widens when its mates' flows fit the target running wide.
    Cover { split: bool, mates_wide: bool },
    /// Tight cover over supertile pairs, every piece wide.
    PairCover { split: bool },
    /// The same, multicasts whole, over pairs with identical receivers merged.
    MergedPairCover,
    /// The same, multicasts whole, of the pattern with its multicasts' lone ends peeled off.
    PeeledPairCover,
    /// Tight cover over tiles, no piece wide.
    NarrowCover { split: bool },
    /// Tight cover over tiles, the transfers of [`wide_plan`] always wide.
    PlannedCover,
}

/// A pattern to schedule, its overheads, its bounds, and its pattern over supertile pairs (and that
/// with identical receivers merged), each built once when a strategy first asks for it.
struct Instance<'a> {
    pattern: &'a Pattern,
    o: Overheads,
    bounds: LowerBounds,
    over_pairs: std::sync::OnceLock<(Pattern, Vec<bool>)>,
    merged_pairs: std::sync::OnceLock<Option<Pattern>>,
    peeled: std::sync::OnceLock<Option<Peeled>>,
}

impl<'a> Instance<'a> {
    fn new(pattern: &'a Pattern, o: Overheads) -> Instance<'a> {
        Instance {
            pattern,
            o,
            bounds: pattern.lower_bounds(o),
            over_pairs: std::sync::OnceLock::new(),
            merged_pairs: std::sync::OnceLock::new(),
            peeled: std::sync::OnceLock::new(),
        }
    }

    /// [`over_pairs`] of the pattern.
    fn over_pairs(&self) -> &(Pattern, Vec<bool>) {
        self.over_pairs.get_or_init(|| over_pairs(self.pattern))
    }

    /// [`merge_receivers`] of [`over_pairs`] of the pattern.
    fn merged_pairs(&self) -> Option<&Pattern> {
        (self.merged_pairs)
            .get_or_init(|| merge_receivers(&self.over_pairs().0))
            .as_ref()
    }

    /// [`peel`] of the pattern.
    fn peeled(&self) -> Option<&Peeled> {
        (self.peeled)
            .get_or_init(|| peel(self.pattern, self.o, self.bounds.bound))
            .as_ref()
    }
}

impl Strategy {
    fn run(self, x: &Instance) -> Candidate {
        let (pattern, o, bound) = (x.pattern, x.o, x.bounds.bound);
        let (pieces, kind) = match self {
            Strategy::Cover { split, mates_wide } => (
                tight_cover(
                    pattern,
                    o,
                    &CoverOptions {
                        split,
                        mates_wide,
                        bound,
                        ..CoverOptions::default()
                    },
                ),
                match (split, mates_wide) {
                    (true, false) => "tight-cover",
                    (false, false) => "tight-cover-whole",
                    (true, true) => "tight-cover-mates-wide",
                    (false, true) => "tight-cover-whole-mates-wide",
                },
            ),
            Strategy::NarrowCover { split } => (
                tight_cover(
                    pattern,
                    Overheads { pairs: false, ..o },
                    &CoverOptions {
                        split,
                        ..CoverOptions::default()
                    },
                ),
                if split {
                    "narrow-cover"
                } else {
                    "narrow-cover-whole"
                },
            ),
            Strategy::PlannedCover => (
                tight_cover(
                    pattern,
                    o,
                    &CoverOptions {
                        split: true,
                        wide: &wide_plan(pattern, o, bound),
                        bound,
                        ..CoverOptions::default()
                    },
                ),
                "planned-cover",
            ),
            Strategy::PairCover { split } => {
                let (pairs, whole) = x.over_pairs();
                (
                    pair_cover(x.pattern, pairs, whole, x.o, split),
                    if split {
                        "pair-cover"
                    } else {
                        "pair-cover-whole"
                    },
                )
            }
            Strategy::MergedPairCover => {
                let pairs = x.merged_pairs().unwrap_or(&x.over_pairs().0);
                (
                    pair_cover(x.pattern, pairs, &x.over_pairs().1, x.o, false),
                    "pair-cover-merged",
                )
            }
            Strategy::PeeledPairCover => match x.peeled() {
                Some(peeled) => {
                    let (pairs, whole) = over_pairs(&peeled.pattern);
                    let pieces = pair_cover(&peeled.pattern, &pairs, &whole, x.o, false);
                    (peeled.pieces(pieces), "pair-cover-peeled")
                }
                None => return Strategy::PairCover { split: false }.run(x),
            },
        };
        // The cover charges senders a switch too: every candidate closes up before it is weighed.
        let pieces = compacted(pattern, o, pieces);
        Candidate {
            horizon: horizon(&pieces, o),
            pieces,
            kind,
        }
    }
}

struct Candidate {
    pieces: Vec<Piece>,
    horizon: u32,
    kind: &'static str,
}

/// Runs `strategies` in parallel, results in the same order.
fn run_all(x: &Instance, strategies: &[Strategy]) -> Vec<Candidate> {
    use rayon::prelude::*;
    strategies
        .par_iter()
        .map(|s| {
            let started = std::time::Instant::now();
            let c = s.run(x);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::debug!(
                kind = c.kind,
                horizon = c.horizon,
                ms,
                "exchange strategy finished"
            );
            c
        })
        .collect()
}

/// The best candidate: the shortest, then the one with fewest pieces, then the first. Never the one
/// that happened to finish first.
fn best(candidates: impl IntoIterator<Item = Candidate>) -> Candidate {
    candidates
        .into_iter()
        .reduce(|a, b| {
            if (b.horizon, b.pieces.len()) < (a.horizon, a.pieces.len()) {
                b
            } else {
                a
            }
        })
        .expect("at least one strategy")
}

/// A schedule of `pattern` by the strategies that suit it (module docs).
pub(super) fn whole(pattern: &Pattern, o: Overheads) -> Schedule {
    let x = Instance::new(pattern, o);
    let lower_bound = x.bounds.bound;
    let multicast = pattern.transfers.iter().any(|t| t.destinations.len() > 1);
    // Splitting multicasts suits scattered destinations; whole multicasts suit gathers along the
    // rows and columns of tile grids, whose phases have few transfers: large phases skip them.
    let large = pattern.transfers.len() > EVERY_STRATEGY_TRANSFERS;
    let whole_too = multicast && !large;
    let variants = |make: fn(bool) -> Strategy| {
        let mut v = vec![make(true)];
        if whole_too {
            v.push(make(false));
        }
        v
    };
    let cover = |split| Strategy::Cover {
        split,
        mates_wide: false,
    };
    let (initial_horizon, best) = if o.pairs {
        // Tight cover without wide pieces and tight cover over pairs meet their own bounds on most
        // patterns, and each bound is at least the pattern's: the one with the lower bound runs.
        // When that bound lies above the pattern's, tight cover over tiles with planned wide
        // transfers runs too, and on patterns that are not large, tight cover with wide runs.
        let (narrow_bound, pair_bound) = (x.bounds.narrow, x.bounds.over_pairs);
        let reachable = narrow_bound.min(pair_bound) == lower_bound;
        let mut strategies = Vec::new();
        if narrow_bound <= pair_bound {
            strategies.extend(variants(|split| Strategy::NarrowCover { split }));
        } else if reachable || !large {
            strategies.extend(variants(|split| Strategy::PairCover { split }));
        }
        if !reachable {
            strategies.push(Strategy::PlannedCover);
            if !large {
                strategies.extend(variants(cover));
            }
        }
        let first = run_all(&x, &strategies);
        let initial = first[0].horizon;
        let mut best = self::best(first);
        // A second pass for patterns more than 1 % above the bound and small enough that it costs
        // little: runs widen when their mates' flows fit the target running wide too, which suits
        // phases where a pair's two tiles send one after the other.
        if best.horizon - lower_bound > lower_bound / 100
            && pattern.transfers.len() <= SECOND_PASS_TRANSFERS
        {
            let mates_wide = |split| Strategy::Cover {
                split,
                mates_wide: true,
            };
            let mut second = variants(mates_wide);
            // Merged receivers need multicasts, which `whole_too` implies.
            if whole_too && x.bounds.over_pairs < best.horizon && x.merged_pairs().is_some() {
                second.push(Strategy::MergedPairCover);
            }
            if whole_too && x.peeled().is_some() {
                second.push(Strategy::PeeledPairCover);
            }
            let second = run_all(&x, &second);
            best = self::best(std::iter::once(best).chain(second));
        }
        (initial, best)
    } else {
        // Without pairs, tight cover with multicasts split meets the bound on most patterns.
        let split = cover(true).run(&x);
        let initial = split.horizon;
        if split.horizon > lower_bound && whole_too {
            (initial, best([split, cover(false).run(&x)]))
        } else {
            (initial, split)
        }
    };
    Schedule {
        pieces: best.pieces,
        horizon: best.horizon,
        lower_bound,
        kind: best.kind.to_string(),
        initial_horizon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::PatternTransfer;
    use crate::exchange::check::check;
    use crate::exchange::synthetic::{Rng, random_small};

    /// Every strategy, kept or not, passes the checker, also when a multicast's destinations are in
    /// no order, so that mates are not next to each other.
    #[test]
    fn every_strategy_passes_the_checker_on_unordered_multicasts() {
        let mut rng = Rng(11);
        let strategies = [true, false].into_iter().flat_map(|split| {
            [
                Strategy::Cover {
                    split,
                    mates_wide: false,
                },
                Strategy::Cover {
                    split,
                    mates_wide: true,
                },
                Strategy::PairCover { split },
                Strategy::NarrowCover { split },
                Strategy::PlannedCover,
                Strategy::MergedPairCover,
                Strategy::PeeledPairCover,
            ]
        });
        let strategies: Vec<Strategy> = strategies.collect();
        for case in 0..300 {
            let pattern = random_small(&mut rng, 5, 25);
            let o = Overheads {
                switch: 1 + case as u32 % 3,
                transit: 10,
                pairs: true,
            };
            for &strategy in &strategies {
                let c = strategy.run(&Instance::new(&pattern, o));
                let s = Schedule {
                    pieces: c.pieces,
                    horizon: c.horizon,
                    lower_bound: pattern.lower_bound(o),
                    kind: c.kind.to_string(),
                    initial_horizon: c.horizon,
                };
                let errors = check(&pattern, o, &s);
                assert!(
                    errors.is_empty(),
                    "case {case} {strategy:?}: {errors:?}\n{pattern:?}"
                );
            }
        }
    }

    /// An activation gather: each two receiving pairs (tiles `4g..4g+4`) take the same multicasts
    /// from a few senders. Over pairs, each multicast has three ports and waits for all of them, so
    /// `pair-cover-whole` ends 7 cycles above the bound; with the receiving pairs merged it has two,
    /// the cover's alternating paths reach it, and the schedule meets the bound.
    #[test]
    fn merged_receivers_let_a_gather_meet_the_bound() {
        let gather = |source, g: u32, words| PatternTransfer {
            source,
            destinations: (4 * g..4 * g + 4).collect(),
            words,
        };
        let pattern = Pattern {
            transfers: vec![
                gather(11, 0, 38),
                gather(12, 0, 14),
                gather(12, 1, 2),
                gather(8, 1, 16),
                gather(12, 1, 34),
            ],
        };
        let o = Overheads {
            switch: 1,
            transit: 10,
            pairs: true,
        };
        let x = Instance::new(&pattern, o);
        assert_eq!(x.bounds.bound, 38);
        assert_eq!(Strategy::PairCover { split: false }.run(&x).horizon, 45);
        let s = whole(&pattern, o);
        assert_eq!((s.horizon, s.kind.as_str()), (38, "pair-cover-merged"));
        assert!(check(&pattern, o, &s).is_empty());
    }
}
