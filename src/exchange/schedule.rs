//! Scheduling an exchange pattern: several strategies, keep the shortest.
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
//!   shortest; free partners come from bitsets, one per port ([`Partners`]); a port that would otherwise
//!   miss `H` (its remaining load equals the time left: it is *tight*) takes a partner along an
//!   alternating path, preempting pieces of ports with slack. A preempted transfer needs one more
//!   switch later, so `H` may grow by that switch. With no overheads and no multicast the result is
//!   exactly the bound.
//! - Supertile pairs, four ways:
//!   - `narrow-cover`: tight cover with no wide piece. It meets the bound when no pair needs its bus
//!     doubled, as in shifted all-to-all phases.
//!   - `pair-cover`: tight cover over the pairs themselves ([`over_pairs`]): a pair is one port moving
//!     two words per cycle, and every piece is wide. Its bound charges each piece's switch to the whole
//!     pair where the pattern's bound charges it to one tile, so it meets the pattern's bound when
//!     transfers are few and large.
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
//!     flows run wide (`-mates-wide`).
//!
//!   Of narrow and pair cover, the one whose own bound is lower runs; planned cover joins when that
//!   bound lies above the pattern's, and so does tight cover with wide runs on patterns of at most
//!   [`EVERY_STRATEGY_TRANSFERS`] transfers.
//!
//! Strategies run in parallel; the kept schedule is the shortest, then the one with fewest pieces, then
//! the first in a fixed order. Deterministic: ties break on ids, no hashing, no timing.
//!
//! A pattern of more than [`HALVES_DESTINATIONS`] destinations is scheduled in two halves, one after
//! the other in time, one on each core ([`super::halves`]); its kind is `halves:` and the kinds of
//! the halves' schedules.

use super::{LowerBounds, Overheads, Pattern, Piece, Schedule};
use std::cmp::Reverse;
use std::collections::VecDeque;

/// A flow of more than two ports in a port's list.
#[derive(Clone, Copy)]
struct Watched {
    flow: u32,
    /// A port of the flow last seen busy (any port at first), so that the scan rejects the flow
    /// without looking at its ports while that port stays busy.
    watched: u32,
}

/// The flows of exactly two ports, a sender and a receiver, indexed by port and partner: a free port
/// finds its free partners with a few word operations on bitsets (one bit per port of the other side)
/// instead of a scan of its flows, which would not stay in cache, and a pair's flows with one probe
/// of a hash table. Sender ports are `0..tiles`, receiver ports `tiles..2·tiles`, `tiles` a multiple
/// of 64, so a partner's bit is its index on its side.
struct Partners {
    tiles: u32,
    /// Words per port: `tiles / 64`.
    words: usize,
    /// `live[p·words + w]` bit `b`: port `p` has an unfinished flow with partner `64w + b`.
    live: Vec<u64>,
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

    /// The index of the flows of two ports among the flows [`flows_of`] builds from `pattern` and
    /// `groups`: those of one receiver that are not planned wide.
    fn new(
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
    fn alone(&self, f: u32) -> bool {
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
    fn first(&self, p: u32, q: u32) -> (u32, bool) {
        let (s, r) = if p < q { (p, q) } else { (q, p) };
        let (_, first) = self.table[self.slot(self.key(s, r))];
        (first & !Self::MORE, first & Self::MORE != 0)
    }

    /// The flows of ports `p` and `q`, finished or not, the last added first.
    fn flows(&self, p: u32, q: u32) -> impl Iterator<Item = u32> + '_ {
        let (first, more) = self.first(p, q);
        std::iter::successors(Some(first), move |&f| {
            more.then(|| self.next[f as usize])
                .filter(|&n| n != Self::END)
        })
    }

    /// The partners of `p` with unfinished flows.
    fn live(&self, p: u32) -> impl Iterator<Item = u32> + '_ {
        let other = if p < self.tiles { self.tiles } else { 0 };
        let words = &self.live[p as usize * self.words..][..self.words];
        words.iter().enumerate().flat_map(move |(w, &bits)| {
            std::iter::successors(Some(bits), |&m| Some(m & m.wrapping_sub(1)))
                .take_while(|&m| m != 0)
                .map(move |m| other + 64 * w as u32 + m.trailing_zeros())
        })
    }

    /// Marks the pair of sender `s` and receiver `r` done.
    fn finish(&mut self, s: u32, r: u32) {
        for (p, q) in [(s, r), (r, s)] {
            let i = self.index(q);
            self.live[p as usize * self.words + i / 64] &= !(1 << (i % 64));
        }
    }
}

/// Patterns naming more destinations than this are scheduled in two halves, one on each core
/// ([`super::halves`]): the event loop takes about a microsecond per flow on one core, and flows
/// are about as many as destinations, so one core alone would take most of half a second.
pub(super) const HALVES_DESTINATIONS: usize = 200_000;

/// Patterns up to this many transfers get the mates-wide pass (`schedule`).
const SECOND_PASS_TRANSFERS: usize = 20_000;

/// Patterns up to this many transfers try every strategy that may win (`schedule`); larger ones skip
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
    /// Tight cover over tiles, no piece wide.
    NarrowCover { split: bool },
    /// Tight cover over tiles, the transfers of [`wide_plan`] always wide.
    PlannedCover,
}

/// A pattern to schedule, its overheads, its bounds, and its pattern over supertile pairs, built once
/// when a strategy first asks for it.
struct Instance<'a> {
    pattern: &'a Pattern,
    o: Overheads,
    bounds: LowerBounds,
    over_pairs: std::sync::OnceLock<(Pattern, Vec<bool>)>,
}

impl<'a> Instance<'a> {
    fn new(pattern: &'a Pattern, o: Overheads) -> Instance<'a> {
        Instance {
            pattern,
            o,
            bounds: pattern.lower_bounds(o),
            over_pairs: std::sync::OnceLock::new(),
        }
    }

    /// [`over_pairs`] of the pattern.
    fn over_pairs(&self) -> &(Pattern, Vec<bool>) {
        self.over_pairs.get_or_init(|| over_pairs(self.pattern))
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
            Strategy::PairCover { split } => (
                pair_cover(x, split),
                if split {
                    "pair-cover"
                } else {
                    "pair-cover-whole"
                },
            ),
        };
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

/// A schedule of `pattern` (module docs): in halves when it names more than
/// [`HALVES_DESTINATIONS`] destinations, else whole.
pub fn schedule(pattern: &Pattern, o: Overheads) -> Schedule {
    let destinations: usize = pattern.transfers.iter().map(|t| t.destinations.len()).sum();
    if destinations > HALVES_DESTINATIONS {
        return in_halves(pattern, o);
    }
    whole(pattern, o)
}

/// A schedule of `pattern` from schedules of its two halves ([`super::halves`]), one on each core.
pub(super) fn in_halves(pattern: &Pattern, o: Overheads) -> Schedule {
    use super::halves::{concatenate, seam, split};
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

/// A schedule of `pattern` by the strategies that suit it (module docs).
fn whole(pattern: &Pattern, o: Overheads) -> Schedule {
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
            let second = run_all(&x, &variants(mates_wide));
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

fn horizon(pieces: &[Piece], o: Overheads) -> u32 {
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

/// What happens at a time of [`TightCover`]: a run ends (unless its flow has moved on to another
/// version since), or a port's deadline comes: it must start work to finish within the target.
enum Happening {
    End { flow: u32, version: u32 },
    Deadline(u32),
}

/// Happenings by time: a calendar, times being small integers. Happenings are only ever added
/// after the current time, so the lists of past times are used again ([`Agenda::recycle`]).
#[derive(Default)]
struct Agenda {
    slots: Vec<Vec<Happening>>,
    pending: usize,
    spare: Vec<Vec<Happening>>,
}

impl Agenda {
    fn push(&mut self, t: u64, h: Happening) {
        let t = t as usize;
        if t >= self.slots.len() {
            self.slots.resize_with(t + 1, Vec::new);
        }
        let slot = &mut self.slots[t];
        if slot.capacity() == 0
            && let Some(spare) = self.spare.pop()
        {
            *slot = spare;
        }
        slot.push(h);
        self.pending += 1;
    }

    /// Takes back the list [`Agenda::next`] gave.
    fn recycle(&mut self, mut happenings: Vec<Happening>) {
        happenings.clear();
        self.spare.push(happenings);
    }

    /// The first time after `t` with happenings, and them.
    fn next(&mut self, t: u64) -> Option<(u64, Vec<Happening>)> {
        if self.pending == 0 {
            return None;
        }
        let next = (t as usize + 1..self.slots.len()).find(|&s| !self.slots[s].is_empty())?;
        let happenings = std::mem::take(&mut self.slots[next]);
        self.pending -= happenings.len();
        Some((next as u64, happenings))
    }
}

/// A unit of scheduling: a transfer, or one destination of a split multicast transfer. One cache
/// line, its ports within when they are few: starting a flow touches nothing else of it.
#[repr(align(64))]
struct Flow {
    /// Its list of ports: the sender port first, then receiver ports, then the pair mates of those
    /// ports that are not ports themselves, which a wide run holds too. Here when at most four,
    /// else at `TightCover::flow_ports[inline[0]..]`.
    inline: [u32; 4],
    /// How many of the list are ports, and how long the list is.
    ports: u32,
    listed: u32,
    transfer: u32,
    destinations: Option<(u32, u32)>,
    done: u32,
    rem: u32,
    /// When the current run started, and its piece in `TightCover::pieces`.
    start: u32,
    piece: u32,
    version: u32,
    /// Whether the flow always runs wide: its ports include their mates.
    planned: bool,
    running: bool,
    /// Whether the current run is wide.
    wide: bool,
    /// Whether the current run was started by a cover, for a tight port.
    covering: bool,
}

const _: () = assert!(
    std::mem::size_of::<Flow>() == 64,
    "a flow is one cache line"
);

/// Flow `flow`'s list of ports (`Flow::inline`), the first `ports` of them.
fn listed<'a>(flow: &'a Flow, flow_ports: &'a [u32], ports: u32) -> &'a [u32] {
    if flow.listed as usize <= flow.inline.len() {
        &flow.inline[..ports as usize]
    } else {
        &flow_ports[flow.inline[0] as usize..][..ports as usize]
    }
}

impl Flow {
    /// What the rest of the flow holds each of its ports for: a switch, then its words, run wide if
    /// planned so.
    fn cost(&self, g: u64) -> u64 {
        if self.planned {
            self.wide_cost(g)
        } else {
            u64::from(self.rem) + g
        }
    }

    /// The same, run wide.
    fn wide_cost(&self, g: u64) -> u64 {
        u64::from(self.rem.div_ceil(2)) + g
    }
}

struct TightCover {
    o: Overheads,
    mates_wide: bool,
    tiles: u32,
    flows: Vec<Flow>,
    /// The flows of two ports, by port and partner.
    partners: Partners,
    /// The flows of more than two ports of each port.
    multicasts: Vec<Vec<Watched>>,
    /// The lists of ports of flows with more than four (`Flow::inline`), one after another.
    flow_ports: Vec<u32>,
    /// Words left of each flow (0 when finished), apart from `flows` for the same reason.
    rem: Vec<u32>,
    /// One bit per flow, set when it has finished: small enough to stay in cache for the scans.
    finished: Vec<u64>,
    running: Vec<Option<u32>>,
    /// One bit per port, set while `running` holds a flow: a small copy for the scans of `try_start`.
    busy: Vec<u64>,
    end: Vec<u64>,
    /// Cost of the port's flows that are not running.
    rest: Vec<u64>,
    /// The same if every one of those flows ran wide: what a pair mate needs at best.
    rest_wide: Vec<u64>,
    target: u64,
    t: u64,
    agenda: Agenda,
    /// The last deadline queued for each port, so that the same one is not queued twice.
    deadline: Vec<u64>,
    pieces: Vec<Piece>,
    /// Ports freed by a cover at the current time, still to be looked at.
    freed: Vec<u32>,
    stamp: Vec<u32>,
    stamp_now: u32,
    stamp_time: u64,
    parent: Vec<(u32, u32)>,
}

/// How [`tight_cover`] runs.
#[derive(Default)]
struct CoverOptions<'a> {
    /// Multicasts split into as many groups as their sender's slack pays for.
    split: bool,
    /// A run widens when its mate ports' flows fit the target if they run wide too (else, if they
    /// run narrow).
    mates_wide: bool,
    /// `whole[i]`: transfer `i` stays whole.
    whole: &'a [bool],
    /// `wide[i]`: transfer `i` runs wide throughout, its ports' mates among its ports.
    wide: &'a [bool],
    /// With pairs, the pattern's lower bound, where the target starts.
    bound: u32,
}

fn tight_cover(pattern: &Pattern, o: Overheads, options: &CoverOptions) -> Vec<Piece> {
    let CoverOptions {
        split: split_multicast,
        mates_wide,
        whole,
        wide,
        bound,
    } = *options;
    // Every tile with its pair mate, so the mate of port `p` is `p ^ 1`, and whole words of
    // `Partners` bits.
    let tiles = pattern.tiles().next_multiple_of(64) as u32;
    let ports = 2 * tiles as usize;
    let g = u64::from(o.switch);
    // Symmetric port loads, then split multicasts where the sender keeps within the busiest port's load.
    let loads = |transfers: &[super::PatternTransfer]| {
        let mut load = vec![0u64; ports];
        // A transfer of no words is never sent and costs nothing.
        for t in transfers.iter().filter(|t| t.words > 0) {
            let c = u64::from(t.words) + g;
            load[t.source as usize] += c;
            for &d in &t.destinations {
                load[(tiles + d) as usize] += c;
            }
        }
        load
    };
    let (first, second) = pattern.transfers.split_at(pattern.transfers.len() / 2);
    let (mut load, later) = rayon::join(|| loads(first), || loads(second));
    for (l, m) in load.iter_mut().zip(later) {
        *l += m;
    }
    let always_wide = |i: usize| o.pairs && wide.get(i).copied().unwrap_or(false);
    // The target horizon `H` (module docs). With pairs the busiest ports must run wide to meet the
    // bound: aim at the bound itself.
    let target = if o.pairs {
        (u64::from(bound) + g).saturating_sub(u64::from(o.transit))
    } else {
        load.iter().copied().max().unwrap_or(0)
    };
    // Groups per transfer: a multicast goes out once per group of destinations, as many groups as the
    // sender's slack below the target pays for.
    let mut groups: Vec<u64> = (pattern.transfers.iter())
        .map(|t| u64::from(t.words > 0))
        .collect();
    // The most words first, then the first transfer: as plain integers, to sort fast.
    let mut order: Vec<u64> = (pattern.transfers.iter().enumerate())
        .filter(|(_, t)| t.words > 0 && t.destinations.len() > 1)
        .map(|(i, t)| u64::from(!t.words) << 32 | i as u64)
        .collect();
    order.sort_unstable();
    for i in order.into_iter().map(|k| k as u32 as usize) {
        let t = &pattern.transfers[i];
        let cost = u64::from(t.words) + g;
        let affordable = if split_multicast && !whole.get(i).copied().unwrap_or(false) {
            target.saturating_sub(load[t.source as usize]) / cost.max(1)
        } else {
            0
        };
        groups[i] = (1 + affordable).min(t.destinations.len() as u64);
        load[t.source as usize] += (groups[i] - 1) * cost;
    }
    // The flows and what they sum to per port on one core; their index by pair, which follows from
    // the pattern and the groups alone, on the other.
    let (
        partners,
        Flows {
            flows,
            flow_ports,
            rem,
            multicasts,
            rest,
            rest_wide,
        },
    ) = rayon::join(
        || Partners::new(pattern, tiles, &groups, &always_wide),
        || flows_of(pattern, &groups, tiles, o, &always_wide),
    );
    let flow_count = flows.len();
    let mut s = TightCover {
        o,
        mates_wide,
        tiles,
        partners,
        flows,
        multicasts,
        finished: vec![0; flow_count.div_ceil(64)],
        flow_ports,
        rem,
        running: vec![None; ports],
        busy: vec![0; ports.div_ceil(64)],
        end: vec![0; ports],
        rest,
        rest_wide,
        target,
        t: 0,
        agenda: Agenda::default(),
        deadline: vec![0; ports],
        pieces: Vec::with_capacity(flow_count),
        freed: Vec::new(),
        stamp: vec![0; ports],
        stamp_now: 0,
        stamp_time: u64::MAX,
        parent: vec![(0, 0); ports],
    };
    s.run();
    // Runs stopped before a word was sent left pieces of no words.
    s.pieces.retain(|p| p.words > 0);
    sorted(s.pieces)
}

/// The flows of a pattern and what they sum to per port, as [`TightCover`] starts with them: a
/// multicast goes out once per group of destinations, `groups[i]` groups for transfer `i`, none when
/// it has no words.
struct Flows {
    flows: Vec<Flow>,
    flow_ports: Vec<u32>,
    rem: Vec<u32>,
    multicasts: Vec<Vec<Watched>>,
    rest: Vec<u64>,
    rest_wide: Vec<u64>,
}

fn flows_of(
    pattern: &Pattern,
    groups: &[u64],
    tiles: u32,
    o: Overheads,
    always_wide: &(impl Fn(usize) -> bool + Sync),
) -> Flows {
    let (pairs, g) = (o.pairs, u64::from(o.switch));
    let ports = 2 * tiles as usize;
    let count = groups.iter().sum::<u64>() as usize;
    let mut x = Flows {
        flows: Vec::with_capacity(count),
        flow_ports: Vec::new(),
        rem: Vec::with_capacity(count),
        multicasts: vec![Vec::new(); ports],
        rest: vec![0; ports],
        rest_wide: vec![0; ports],
    };
    for i in (0..groups.len()).filter(|&i| groups[i] > 0) {
        let t = &pattern.transfers[i];
        let planned = always_wide(i);
        let mut flow = |destinations: Option<(u32, u32)>, receivers: &[u32]| {
            let s = t.source;
            let flow_ports = &mut x.flow_ports;
            let (inline, ports, length) = if let &[d] = receivers {
                // One receiver: the list is inline, the mates of both ports (different tiles, as
                // the sides differ) after them when pairs are on.
                let r = tiles + d;
                match (planned, pairs) {
                    (true, _) => ([s, r, s ^ 1, r ^ 1], 4, 4),
                    (false, true) => ([s, r, s ^ 1, r ^ 1], 2, 4),
                    (false, false) => ([s, r, 0, 0], 2, 2),
                }
            } else {
                let a = flow_ports.len();
                flow_ports.push(s);
                flow_ports.extend(receivers.iter().map(|&d| tiles + d));
                // The mates of the ports from `a` up to `b` that are not listed yet.
                let add_mates = |flow_ports: &mut Vec<u32>, b: usize| {
                    for k in a..b {
                        let m = flow_ports[k] ^ 1;
                        if !flow_ports[a..].contains(&m) {
                            flow_ports.push(m);
                        }
                    }
                };
                if planned {
                    add_mates(flow_ports, flow_ports.len());
                }
                let b = flow_ports.len();
                if pairs && !planned {
                    add_mates(flow_ports, b);
                    flow_ports[b..].sort_unstable();
                }
                let length = flow_ports.len() - a;
                let mut inline = [a as u32, 0, 0, 0];
                if length <= inline.len() {
                    inline[..length].copy_from_slice(&flow_ports[a..]);
                    flow_ports.truncate(a);
                }
                (inline, (b - a) as u32, length as u32)
            };
            let flow = Flow {
                inline,
                ports,
                listed: length,
                transfer: i as u32,
                destinations,
                done: 0,
                rem: t.words,
                start: 0,
                piece: 0,
                version: 0,
                planned,
                running: false,
                wide: false,
                covering: false,
            };
            let f = x.flows.len() as u32;
            let (cost, wide_cost) = (flow.cost(g), flow.wide_cost(g));
            let own = listed(&flow, flow_ports, ports);
            for &p in own {
                if own.len() > 2 {
                    x.multicasts[p as usize].push(Watched {
                        flow: f,
                        watched: p,
                    });
                }
                x.rest[p as usize] += cost;
                x.rest_wide[p as usize] += wide_cost;
            }
            x.rem.push(t.words);
            x.flows.push(flow);
        };
        for (range, destinations) in destination_groups(t, groups[i]) {
            flow(range, destinations);
        }
    }
    x
}

/// The `groups` groups of destinations transfer `t` goes out to, in order: each group's range of
/// indices in its destination list (none when the transfer goes whole), and its destinations.
fn destination_groups(
    t: &super::PatternTransfer,
    groups: u64,
) -> impl Iterator<Item = (Option<(u32, u32)>, &[u32])> {
    let n = t.destinations.len() as u64;
    (0..groups).map(move |k| {
        if groups == 1 {
            return (None, &t.destinations[..]);
        }
        let (a, b) = ((k * n / groups) as usize, ((k + 1) * n / groups) as usize);
        (Some((a as u32, b as u32)), &t.destinations[a..b])
    })
}

impl TightCover {
    fn g(&self) -> u64 {
        u64::from(self.o.switch)
    }

    fn cost(&self, f: u32) -> u64 {
        self.flows[f as usize].cost(self.g())
    }

    fn wide_cost(&self, f: u32) -> u64 {
        self.flows[f as usize].wide_cost(self.g())
    }

    /// Remaining load of a port at the current time.
    fn remaining(&self, p: u32) -> u64 {
        let p = p as usize;
        self.rest[p]
            + if self.running[p].is_some() {
                self.end[p] - self.t
            } else {
                0
            }
    }

    /// The time port `p` still needs at best: with pairs, half its load, and half its pair's.
    fn needed(&self, p: u32) -> u64 {
        if self.o.pairs {
            (self.remaining(p) + self.remaining(p ^ 1)).div_ceil(2)
        } else {
            self.remaining(p)
        }
    }

    fn free(&self, p: u32) -> bool {
        self.busy[p as usize / 64] & (1 << (p % 64)) == 0
    }

    /// The ports a running flow holds: its own, and its mates' when wide.
    fn held(&self, f: u32) -> &[u32] {
        let flow = &self.flows[f as usize];
        listed(
            flow,
            &self.flow_ports,
            if flow.wide { flow.listed } else { flow.ports },
        )
    }

    /// The ports of flow `f`.
    fn ports(&self, f: u32) -> &[u32] {
        let flow = &self.flows[f as usize];
        listed(flow, &self.flow_ports, flow.ports)
    }

    /// The mates of flow `f`'s ports that are not its ports.
    fn mates(&self, f: u32) -> &[u32] {
        let flow = &self.flows[f as usize];
        &listed(flow, &self.flow_ports, flow.listed)[flow.ports as usize..]
    }

    /// Marks the ports `f` holds as running `holder` (until `end`).
    fn hold(&mut self, f: u32, holder: Option<u32>, end: u64) {
        let flow = &self.flows[f as usize];
        let held = if flow.wide { flow.listed } else { flow.ports };
        for &p in listed(flow, &self.flow_ports, held) {
            self.running[p as usize] = holder;
            self.end[p as usize] = end;
            if holder.is_some() {
                self.busy[p as usize / 64] |= 1 << (p % 64);
            } else {
                self.busy[p as usize / 64] &= !(1 << (p % 64));
            }
        }
    }

    /// What free mate port `m` still needs (`mates_wide`: if all its flows ran wide).
    fn mate_needs(&self, m: u32) -> u64 {
        if self.mates_wide {
            self.rest_wide[m as usize]
        } else {
            self.rest[m as usize]
        }
    }

    /// Whether `f` may run wide now: every mate port is free and stays within the target meanwhile.
    fn can_widen(&self, f: u32) -> bool {
        let flow = &self.flows[f as usize];
        let cost = self.wide_cost(f);
        self.o.pairs
            && flow.rem >= 2
            && self
                .mates(f)
                .iter()
                .all(|&m| self.free(m) && self.mate_needs(m) + self.t + cost <= self.target)
    }

    fn start(&mut self, f: u32, wide: bool) {
        let wide = wide || self.flows[f as usize].planned;
        let narrow = self.cost(f);
        let cost = if wide { self.wide_cost(f) } else { narrow };
        let t = self.t;
        let flow = &mut self.flows[f as usize];
        flow.running = true;
        flow.covering = false;
        flow.wide = wide;
        flow.start = t as u32;
        flow.version += 1;
        let version = flow.version;
        // Runs start in order of time: so do their pieces.
        flow.piece = self.pieces.len() as u32;
        self.pieces.push(Piece {
            start: flow.start,
            transfer: flow.transfer,
            destinations: flow.destinations,
            word: flow.done,
            words: 0,
            wide,
        });
        let narrow_wide = self.wide_cost(f);
        let flow = &self.flows[f as usize];
        for &p in listed(flow, &self.flow_ports, flow.ports) {
            self.rest[p as usize] -= narrow;
            self.rest_wide[p as usize] -= narrow_wide;
        }
        self.hold(f, Some(f), t + cost);
        self.agenda
            .push(t + cost, Happening::End { flow: f, version });
    }

    /// Ends the running piece of `f` at the current time: its piece gets the words sent.
    fn stop(&mut self, f: u32) {
        let (t, g) = (self.t, self.g());
        self.hold(f, None, t);
        let flow = &mut self.flows[f as usize];
        let cycles = t.saturating_sub(u64::from(flow.start) + g);
        let sent = (cycles << u32::from(flow.wide)).min(u64::from(flow.rem)) as u32;
        self.pieces[flow.piece as usize].words = sent;
        flow.done += sent;
        flow.rem -= sent;
        self.rem[f as usize] = flow.rem;
        if flow.rem == 0 {
            self.finished[f as usize / 64] |= 1 << (f % 64);
        }
        flow.running = false;
        flow.wide = false;
        flow.version += 1;
        let (rem_cost, rem_wide_cost) = if flow.rem > 0 {
            (flow.cost(g), flow.wide_cost(g))
        } else {
            (0, 0)
        };
        let flow = &self.flows[f as usize];
        let ports = listed(flow, &self.flow_ports, flow.ports);
        for &p in ports {
            self.rest[p as usize] += rem_cost;
            self.rest_wide[p as usize] += rem_wide_cost;
        }
        if let &[s, r] = ports
            && rem_cost == 0
            && (self.partners.alone(f)
                || self.partners.flows(s, r).all(|e| self.rem[e as usize] == 0))
        {
            self.partners.finish(s, r);
        }
    }

    /// Starts the startable flow of free port `p` whose partners have the most load: they have the
    /// least slack. Of a partner's flows, the shortest goes first. Finished flows leave `p`'s list
    /// of multicasts; one whose watched port is busy is passed over without looking further.
    fn try_start(&mut self, p: u32) -> bool {
        debug_assert!(self.free(p));
        // `p` is free, so none of its flows with its partner runs.
        let unicast = self.heaviest_free_partner(p).map(|q| {
            let f = match self.partners.first(p, q) {
                (f, false) => f,
                (_, true) => (self.partners.flows(p, q))
                    .filter(|&f| self.rem[f as usize] > 0)
                    .min_by_key(|&f| (self.rem[f as usize], f))
                    .expect("a live partner has an unfinished flow"),
            };
            (q, f)
        });
        let mut best: Option<(u64, Reverse<u32>, Reverse<u32>)> = None;
        let mut list = std::mem::take(&mut self.multicasts[p as usize]);
        let mut i = 0;
        while i < list.len() {
            let Watched { flow: f, watched } = list[i];
            if self.finished[f as usize / 64] & (1 << (f % 64)) != 0 {
                list.swap_remove(i);
                continue;
            }
            i += 1;
            // A running flow holds its ports: a busy watched port rules the flow out.
            if !self.free(watched) {
                continue;
            }
            let ports = self.ports(f);
            if let Some(&busy) = ports.iter().find(|&&q| !self.free(q)) {
                list[i - 1].watched = busy;
                continue;
            }
            let critical = ports
                .iter()
                .filter(|&&q| q != p)
                .map(|&q| self.rest[q as usize])
                .max()
                .unwrap_or(0);
            let key = (critical, Reverse(self.rem[f as usize]), Reverse(f));
            if best.is_none_or(|b| key > b) {
                best = Some(key);
            }
        }
        self.multicasts[p as usize] = list;
        // The words left of the pair's flow are read only to weigh it against a multicast.
        let chosen = match (unicast, best) {
            (Some((_, f)), None) => Some(f),
            (Some((q, f)), Some(b)) => {
                let key = (
                    self.rest[q as usize],
                    Reverse(self.rem[f as usize]),
                    Reverse(f),
                );
                Some(key.max(b).2.0)
            }
            (None, b) => b.map(|(_, _, Reverse(f))| f),
        };
        match chosen {
            Some(f) => {
                self.start(f, self.can_widen(f));
                true
            }
            None => false,
        }
    }

    /// The free partner of port `p` with unfinished flows and the most load, the first of equals.
    fn heaviest_free_partner(&self, p: u32) -> Option<u32> {
        let x = &self.partners;
        let (words, other) = (x.words, if p < self.tiles { x.words } else { 0 });
        let live = &x.live[p as usize * words..][..words];
        let busy = &self.busy[other..][..words];
        let mut best: Option<(u64, u32)> = None;
        for (w, (&live, &busy)) in live.iter().zip(busy).enumerate() {
            let mut m = live & !busy;
            while m != 0 {
                let q = (64 * (other + w) + m.trailing_zeros() as usize) as u32;
                m &= m - 1;
                let load = self.rest[q as usize];
                if best.is_none_or(|(most, _)| load > most) {
                    best = Some((load, q));
                }
            }
        }
        best.map(|(_, q)| q)
    }

    /// Idle port `p` lends its pair's bus: the narrow run holding its mate goes on wide when every
    /// mate port of the flow is free and can wait, and the wide run saves more than the restart's switch.
    fn widen_mate(&mut self, p: u32) -> bool {
        let Some(f) = self.running[(p ^ 1) as usize] else {
            return false;
        };
        let (g, flow) = (self.g(), &self.flows[f as usize]);
        // A run started now is not restarted at once: cover may have just stopped it.
        if !self.o.pairs || flow.wide || u64::from(flow.start) == self.t {
            return false;
        }
        let sent = self.t.saturating_sub(u64::from(flow.start) + g);
        let rem = u64::from(flow.rem).saturating_sub(sent);
        let cost = rem.div_ceil(2) + g;
        let widen = rem / 2 > 2 * g
            && self
                .mates(f)
                .iter()
                .all(|&m| self.free(m) && self.mate_needs(m) + self.t + cost <= self.target);
        if widen {
            self.stop(f);
            self.start(f, true);
        }
        widen
    }

    /// Whether a cover may stop running flow `f`. At the cycle it started, stopping it costs nothing,
    /// unless a cover started it for another tight port: the two could take it from each other
    /// forever. Later, only once it has moved a word: covers could trade flows that are still
    /// switching forever too.
    fn preemptible(&self, f: u32) -> bool {
        let flow = &self.flows[f as usize];
        if u64::from(flow.start) == self.t {
            !flow.covering
        } else {
            self.t > u64::from(flow.start) + self.g()
        }
    }

    fn is_tight(&self, p: u32) -> bool {
        self.remaining(p) + self.t >= self.target
    }

    /// Makes tight port `v` busy along an alternating path of unicast flows: `v - x1 = b1 - x2 = ... - xk`
    /// where `xk` is free or its partner has slack to stop.
    ///
    /// Ports a failed search visited stay marked until the time or the matching changes: no path
    /// through them exists until then (as in Hopcroft-Karp), so failures cost O(edges) per event in all.
    fn cover(&mut self, v: u32) -> bool {
        if self.stamp_time != self.t {
            self.stamp_time = self.t;
            self.stamp_now += 1;
        }
        let now = self.stamp_now;
        if self.stamp[v as usize] == now {
            return false;
        }
        self.stamp[v as usize] = now;
        let mut queue = VecDeque::from([v]);
        while let Some(a) = queue.pop_front() {
            // Partners from the last, a pair's flows from the first: on the real phases of the
            // SigLIP MLP the search then meets the bound, where the opposite order ends 8 % above.
            let flows: Vec<(u32, u32)> = (self.partners.live(a))
                .flat_map(|x| self.partners.flows(a, x).map(move |f| (f, x)))
                .collect();
            for (f, x) in flows.into_iter().rev() {
                if self.rem[f as usize] == 0 || self.flows[f as usize].running {
                    continue;
                }
                if self.stamp[x as usize] == now {
                    continue;
                }
                self.stamp[x as usize] = now;
                self.parent[x as usize] = (a, f);
                let Some(busy) = self.running[x as usize] else {
                    self.augment(v, x);
                    return true;
                };
                if !self.preemptible(busy) {
                    continue;
                }
                let &[p0, p1] = self.ports(busy) else {
                    continue;
                };
                if self.flows[busy as usize].wide {
                    continue;
                }
                let b = if p0 == x { p1 } else { p0 };
                if self.remaining(b) + self.g() + self.t < self.target {
                    self.augment(v, x);
                    return true;
                }
                if self.stamp[b as usize] != now {
                    self.stamp[b as usize] = now;
                    self.parent[b as usize] = (x, u32::MAX);
                    queue.push_back(b);
                }
            }
        }
        false
    }

    /// Makes tight port `v` busy with one of its multicast flows, stopping the pieces that hold the flow's
    /// other ports when every port of those pieces can afford one more switch.
    fn cover_multicast(&mut self, v: u32) -> bool {
        let g = self.g();
        let mut chosen: Option<(u32, u32)> = None;
        for entry in &self.multicasts[v as usize] {
            let f = entry.flow;
            let flow = &self.flows[f as usize];
            if self.rem[f as usize] == 0 || flow.running {
                continue;
            }
            let affordable = self.ports(f).iter().filter(|&&q| q != v).all(|&q| {
                match self.running[q as usize] {
                    None => true,
                    Some(r) => {
                        self.preemptible(r)
                            && self.ports(r).iter().all(|&u| {
                                let after = self.remaining(u) + g + self.t;
                                if u == q {
                                    after <= self.target
                                } else {
                                    after < self.target
                                }
                            })
                    }
                }
            });
            if affordable && chosen.is_none_or(|(_, rem)| self.rem[f as usize] > rem) {
                chosen = Some((f, self.rem[f as usize]));
            }
        }
        let Some((f, _)) = chosen else { return false };
        self.stamp_now += 1;
        let mut touched = Vec::new();
        for i in 0..self.ports(f).len() {
            if let Some(r) = self.running[self.ports(f)[i] as usize] {
                touched.extend_from_slice(self.held(r));
                self.stop(r);
            }
        }
        self.start(f, false);
        self.flows[f as usize].covering = true;
        for p in touched {
            self.target = self.target.max(self.t + self.needed(p));
            if self.free(p) {
                self.freed.push(p);
            }
        }
        true
    }

    fn augment(&mut self, v: u32, end: u32) {
        // The matching changes: earlier failed searches may succeed now.
        self.stamp_now += 1;
        let mut path = Vec::new();
        let mut x = end;
        loop {
            let (a, f) = self.parent[x as usize];
            path.push(f);
            if a == v {
                break;
            }
            x = self.parent[a as usize].0;
        }
        let mut touched = Vec::new();
        for &f in &path {
            for i in 0..self.ports(f).len() {
                if let Some(r) = self.running[self.ports(f)[i] as usize] {
                    touched.extend_from_slice(self.held(r));
                    self.stop(r);
                }
            }
        }
        for &f in &path {
            self.start(f, false);
            self.flows[f as usize].covering = true;
        }
        for p in touched {
            self.target = self.target.max(self.t + self.needed(p));
            if self.free(p) {
                self.freed.push(p);
            }
        }
    }

    fn run(&mut self) {
        let ports = 2 * self.tiles;
        let mut candidates: Vec<u32> = (0..ports).filter(|&p| self.rest[p as usize] > 0).collect();
        let mut queue = VecDeque::new();
        // The time each port was last a candidate, so that it is one once per time.
        let mut listed = vec![u64::MAX; ports as usize];
        // Candidates keyed for a sort of plain integers: the most remaining load first, then the
        // lowest port.
        let mut keyed: Vec<u64> = Vec::new();
        let mut ended = Vec::new();
        loop {
            keyed.extend(
                candidates
                    .drain(..)
                    .filter(|&p| std::mem::replace(&mut listed[p as usize], self.t) != self.t)
                    .map(|p| u64::from(!(self.remaining(p) as u32)) << 32 | u64::from(p)),
            );
            keyed.sort_unstable();
            queue.extend(keyed.drain(..).map(|k| k as u32));
            while let Some(p) = queue.pop_front() {
                if !self.free(p) {
                    continue;
                }
                if self.rest[p as usize] == 0 {
                    self.widen_mate(p);
                    continue;
                }
                if self.try_start(p) || self.widen_mate(p) {
                    continue;
                }
                if self.is_tight(p) {
                    self.target = self.target.max(self.t + self.needed(p));
                    if self.cover(p) || self.cover_multicast(p) {
                        queue.extend(self.freed.drain(..));
                        continue;
                    }
                }
                let deadline = self.target.saturating_sub(self.remaining(p));
                if deadline > self.t && self.deadline[p as usize] != deadline {
                    self.deadline[p as usize] = deadline;
                    self.agenda.push(deadline, Happening::Deadline(p));
                }
            }
            let Some((t, happenings)) = self.agenda.next(self.t) else {
                break;
            };
            self.t = t;
            // Runs end before ports look for work; the order among them does not matter. Which
            // runs end is read first, in one sweep of independent loads.
            ended.extend(happenings.iter().filter_map(|h| match *h {
                Happening::End { flow: f, version } => {
                    let flow = &self.flows[f as usize];
                    (flow.version == version && flow.running).then_some(f)
                }
                Happening::Deadline(_) => None,
            }));
            for f in ended.drain(..) {
                candidates.extend(self.held(f));
                self.stop(f);
            }
            candidates.extend(happenings.iter().filter_map(|h| match *h {
                Happening::Deadline(p) => Some(p),
                Happening::End { .. } => None,
            }));
            self.agenda.recycle(happenings);
        }
        debug_assert!(self.flows.iter().all(|f| f.rem == 0), "every flow finishes");
    }
}

/// The pattern over supertile pairs: pair `k` is tile `k`, and a transfer of `w` words becomes one of
/// `ceil(w/2)` double words from its source's pair to the distinct pairs of its destinations, in order
/// of first appearance. Every piece of a schedule of it runs wide ([`widen_pieces`]). Also returns which
/// transfers must stay whole: those whose destinations' mates are not next to each other, so that a
/// group of pairs is no range of destinations.
fn over_pairs(pattern: &Pattern) -> (Pattern, Vec<bool>) {
    let mut whole = Vec::with_capacity(pattern.transfers.len());
    let transfers = pattern
        .transfers
        .iter()
        .map(|t| {
            let mut destinations: Vec<u32> = Vec::with_capacity(t.destinations.len());
            let mut runs = 0;
            for (i, &d) in t.destinations.iter().enumerate() {
                if i == 0 || t.destinations[i - 1] / 2 != d / 2 {
                    runs += 1;
                }
                if !destinations.contains(&(d / 2)) {
                    destinations.push(d / 2);
                }
            }
            whole.push(runs != destinations.len());
            super::PatternTransfer {
                source: t.source / 2,
                destinations,
                words: t.words.div_ceil(2),
            }
        })
        .collect();
    (Pattern { transfers }, whole)
}

/// The wide pieces of `pattern` for a schedule of `over_pairs(pattern)`.
fn widen_pieces(pattern: &Pattern, pieces: Vec<Piece>) -> Vec<Piece> {
    pieces
        .into_iter()
        .map(|p| {
            let t = &pattern.transfers[p.transfer as usize];
            // Destination ranges: the collapsed index `j` is the `j`-th run of mates.
            let destinations = p.destinations.map(|(a, b)| {
                let mut starts = (0..t.destinations.len())
                    .filter(|&i| i == 0 || t.destinations[i - 1] / 2 != t.destinations[i] / 2)
                    .map(|i| i as u32)
                    .chain(std::iter::once(t.destinations.len() as u32));
                let first = starts.clone().nth(a as usize).expect("a run per pair");
                let last = starts.nth(b as usize).expect("a run per pair");
                (first, last)
            });
            let word = 2 * p.word;
            Piece {
                start: p.start,
                transfer: p.transfer,
                destinations,
                word,
                words: (2 * p.words).min(t.words - word),
                wide: true,
            }
        })
        .collect()
}

/// The unicast transfers that run wide throughout in `planned-cover`: at each receiving pair whose
/// busier tile would miss the bound receiving narrow, the number of that tile's largest transfers
/// to it alone that leaves the less to its busier port. Every such transfer runs wide, holding the
/// mate's port too (the pair term of [`Pattern::lower_bound`]).
fn wide_plan(pattern: &Pattern, o: Overheads, bound: u32) -> Vec<bool> {
    let mut wide = vec![false; pattern.transfers.len()];
    if !o.pairs {
        return wide;
    }
    let g = u64::from(o.switch);
    let tiles = pattern.tiles().next_multiple_of(2);
    // What each receive port holds with every transfer narrow, and its unicast transfers.
    let mut need = vec![0u64; tiles];
    let mut alone: Vec<Vec<(u32, usize)>> = vec![Vec::new(); tiles];
    for (i, t) in pattern.transfers.iter().enumerate() {
        if t.words == 0 {
            continue;
        }
        for &d in &t.destinations {
            need[d as usize] += u64::from(t.words) + g;
        }
        if let &[d] = t.destinations.as_slice() {
            alone[d as usize].push((t.words, i));
        }
    }
    let bound = (u64::from(bound) + g).saturating_sub(u64::from(o.transit));
    for pair in 0..tiles / 2 {
        let (a, b) = (2 * pair, 2 * pair + 1);
        let (m, other) = if need[a] >= need[b] { (a, b) } else { (b, a) };
        if need[m] <= bound {
            continue;
        }
        let mut largest = std::mem::take(&mut alone[m]);
        largest.sort_unstable_by_key(|&(w, i)| (Reverse(w), i));
        let (mut busy, mut mate) = (need[m], need[other]);
        let (mut best, mut best_k) = (busy.max(mate), 0);
        for (k, &(w, _)) in largest.iter().enumerate() {
            busy -= u64::from(w / 2);
            mate += u64::from(w.div_ceil(2)) + g;
            if busy.max(mate) < best {
                (best, best_k) = (busy.max(mate), k + 1);
            }
        }
        for &(_, i) in &largest[..best_k] {
            wide[i] = true;
        }
    }
    wide
}

/// Tight cover over supertile pairs, every piece wide.
fn pair_cover(x: &Instance, split_multicast: bool) -> Vec<Piece> {
    let (pairs, whole) = x.over_pairs();
    let narrow = Overheads {
        pairs: false,
        ..x.o
    };
    sorted(widen_pieces(
        x.pattern,
        tight_cover(
            pairs,
            narrow,
            &CoverOptions {
                split: split_multicast,
                whole,
                ..CoverOptions::default()
            },
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::PatternTransfer;
    use crate::exchange::check::check;
    use crate::exchange::synthetic::{Rng, random_small};

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

    /// Transfers planned wide run wide in every piece, holding their mates, and the schedule passes
    /// the checker; with every transfer planned so, multicasts included.
    #[test]
    fn planned_wide_transfers_run_wide_and_pass_the_checker() {
        let mut rng = Rng(7);
        for case in 0..300 {
            let pattern = random_small(&mut rng, 1 + case % 4, 25);
            let o = Overheads {
                switch: 1 + case as u32 % 3,
                transit: 10,
                pairs: true,
            };
            let wide: Vec<bool> = (0..pattern.transfers.len())
                .map(|i| i % 2 == case as usize % 2)
                .collect();
            let options = CoverOptions {
                split: case % 3 != 0,
                wide: &wide,
                bound: pattern.lower_bound(o),
                ..CoverOptions::default()
            };
            let pieces = tight_cover(&pattern, o, &options);
            assert!(pieces.iter().all(|p| !wide[p.transfer as usize] || p.wide));
            let horizon = horizon(&pieces, o);
            let s = Schedule {
                pieces,
                horizon,
                lower_bound: pattern.lower_bound(o),
                kind: "planned".to_string(),
                initial_horizon: horizon,
            };
            let errors = check(&pattern, o, &s);
            assert!(errors.is_empty(), "case {case}: {errors:?}\n{pattern:?}");
        }
    }
}
