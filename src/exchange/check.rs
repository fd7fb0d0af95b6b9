//! The independent checker of a schedule against its pattern: it re-derives every port's occupancy from
//! the pieces alone, supertile pair mates included, and shares no code with the schedulers.
//!
//! Contract: [`check`] returns every problem of the schedule (through [`Verifier`], so the first ones and
//! a count of the rest), each naming transfer, tile or cycle, in a fixed order: pieces that cannot be
//! read, in piece order; ports held twice at once, senders then receivers, by tile; words that never
//! arrive or arrive twice, by transfer and destination; then the recorded lower bound and horizon.
//!
//! Cost: a reused schedule costs what this check costs, so it is one pass over the pieces, in their
//! order, against a compact copy of the pattern's endpoints, then a scan of every port's holds (sorted
//! already when the pieces are), in parallel with the results collected in port order. Deliveries are
//! not collected: each (transfer, destination) keeps how many of its words have arrived in order, and
//! only those that end short or see words out of order are re-collected and sorted to name their
//! problems (a cover in order is exact: each piece starts where the last ended, none is empty).

use super::{Overheads, Pattern, Piece, Schedule};
use crate::verify::Verifier;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// A port held in cycles `[.0, .1)` for transfer `.2`. Cycles in u64: a damaged stored schedule must
/// not wrap around.
type Hold = (u64, u64, u32);

/// Words `[.0, .1)` of a transfer delivered to one destination.
type Delivery = (u32, u32);

/// The arrival state of a (transfer, destination) that saw words out of order.
const DISORDERED: u32 = u32::MAX;

/// Every problem of `schedule` for `pattern`, each naming transfer, tile or cycle.
pub fn check(pattern: &Pattern, o: Overheads, schedule: &Schedule) -> Vec<String> {
    // The pattern's lower bound meanwhile, on another thread.
    let (bound, mut v) = rayon::join(
        || pattern.lower_bound(o),
        || schedule_problems(pattern, o, schedule),
    );
    v.check(schedule.lower_bound == bound, || {
        format!(
            "records lower bound {}, the pattern's is {bound}",
            schedule.lower_bound
        )
    });
    v.check(schedule.horizon >= bound, || {
        format!("horizon {} below the lower bound {bound}", schedule.horizon)
    });
    v.finish()
}

/// The problems of the pieces, the ports and the deliveries, in that order.
fn schedule_problems(pattern: &Pattern, o: Overheads, schedule: &Schedule) -> Verifier {
    let mut v = Verifier::default();
    let mut endpoints = Endpoints::of(pattern);
    // Every piece's transfer, looked up in a pass of independent loads (the pieces name transfers in no
    // order, so each is a cache miss; here they overlap).
    let named: Vec<Option<Transfer>> = schedule
        .pieces
        .iter()
        .map(|p| endpoints.transfers.get(p.transfer as usize).copied())
        .collect();
    let tiles = endpoints.tiles;
    let mut reach = Vec::with_capacity(schedule.pieces.len());
    // The tiles every piece reaches, piece after piece, gathered with the arrivals (again a cache miss
    // each) so that the walk over the ports reads them in order.
    let mut reached_tiles = Vec::with_capacity(schedule.pieces.len());
    for (p, t) in schedule.pieces.iter().zip(&named) {
        let r = read_piece(
            t.as_ref(),
            endpoints.transfers.len(),
            o,
            schedule.horizon,
            p,
            &mut v,
        );
        if let (Some(t), Reach::Everything) = (t, r) {
            arrive(p, t, &mut endpoints.destinations, &mut reached_tiles);
        }
        reach.push(r);
    }
    let mut walk = Walk::new(o, tiles);
    let mut reached_tiles = reached_tiles.as_slice();
    let read = schedule.pieces.iter().zip(&named).zip(&reach);
    for (i, ((p, t), &r)) in read.enumerate() {
        if let (Some(t), Reach::Senders | Reach::Everything) = (t, r) {
            walk.piece(i, p, t, r, &mut reached_tiles);
        }
    }
    for e in port_problems(&mut walk.holds, tiles) {
        v.error(e);
    }
    for e in delivery_problems(&endpoints, schedule, &reach) {
        v.error(e);
    }
    v
}

/// A transfer's endpoints and size, compact: looked up once per piece, in the pieces' order.
#[derive(Clone, Copy)]
struct Transfer {
    source: u32,
    words: u32,
    /// Its destinations are `Endpoints::destinations[first..first + count]`; the same numbers name
    /// its (transfer, destination)s.
    first: usize,
    count: usize,
}

/// A destination of a transfer, with how many of the transfer's words have arrived there in order, or
/// [`DISORDERED`].
#[derive(Clone, Copy)]
struct Destination {
    tile: u32,
    arrived: u32,
}

/// The pattern's transfers, compact.
struct Endpoints {
    transfers: Vec<Transfer>,
    destinations: Vec<Destination>,
    /// Every tile the pattern names, with its pair mate.
    tiles: usize,
}

impl Endpoints {
    fn of(pattern: &Pattern) -> Endpoints {
        let mut destinations = Vec::new();
        let transfers = pattern
            .transfers
            .iter()
            .map(|t| {
                let first = destinations.len();
                destinations.extend(
                    t.destinations
                        .iter()
                        .map(|&tile| Destination { tile, arrived: 0 }),
                );
                Transfer {
                    source: t.source,
                    words: t.words,
                    first,
                    count: t.destinations.len(),
                }
            })
            .collect();
        Endpoints {
            transfers,
            destinations,
            tiles: pattern.tiles().next_multiple_of(2),
        }
    }
}

/// What a piece reaches, as far as it can be read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// It names no transfer or words outside it, or is wide without pairs: it holds nothing.
    Nothing,
    /// It names destinations its transfer lacks: it holds its senders only.
    Senders,
    /// It holds its senders and receivers and delivers its words.
    Everything,
}

/// What a piece reaches; its problems, if any.
fn read_piece(
    t: Option<&Transfer>,
    transfers: usize,
    o: Overheads,
    horizon: u32,
    p: &Piece,
    v: &mut Verifier,
) -> Reach {
    let Some(t) = t else {
        v.error(format!(
            "piece at cycle {} names transfer {} of {transfers}",
            p.start, p.transfer
        ));
        return Reach::Nothing;
    };
    let (start, word, words) = (u64::from(p.start), u64::from(p.word), u64::from(p.words));
    if words == 0 || word + words > u64::from(t.words) {
        v.error(format!(
            "transfer {}: piece of words {}..{} outside its {} words",
            p.transfer,
            p.word,
            word + words,
            t.words
        ));
        return Reach::Nothing;
    }
    if p.wide && !o.pairs {
        v.error(format!(
            "transfer {}: wide piece at cycle {} without supertile pairs",
            p.transfer, p.start
        ));
        return Reach::Nothing;
    }
    let end = start + cycles(p) + u64::from(o.transit);
    v.check(end <= u64::from(horizon), || {
        format!(
            "transfer {}: piece at cycle {} arrives until {end}, after the horizon {horizon}",
            p.transfer, p.start
        )
    });
    match p.destinations {
        Some((a, b)) if a >= b || b as usize > t.count => {
            v.error(format!(
                "transfer {}: piece for destinations {a}..{b} of {}",
                p.transfer, t.count
            ));
            Reach::Senders
        }
        _ => Reach::Everything,
    }
}

/// Cycles a piece holds its ports for its words: a wide piece moves two words per cycle.
fn cycles(p: &Piece) -> u64 {
    let words = u64::from(p.words);
    if p.wide { words.div_ceil(2) } else { words }
}

/// The destinations, as (transfer, destination) numbers, a readable piece delivers to.
fn reached(t: &Transfer, p: &Piece) -> std::ops::Range<usize> {
    match p.destinations {
        None => t.first..t.first + t.count,
        Some((a, b)) => t.first + a as usize..t.first + b as usize,
    }
}

/// Every port's holds, piece by piece.
struct Walk {
    o: Overheads,
    tiles: usize,
    /// Ports `0..tiles` send, `tiles..2·tiles` receive; each port's holds in piece order.
    holds: Vec<Vec<Hold>>,
    /// The piece (numbered from 1) that last held each receiver, so that no piece holds one twice.
    held_by: Vec<usize>,
}

impl Walk {
    fn new(o: Overheads, tiles: usize) -> Walk {
        Walk {
            o,
            tiles,
            holds: vec![Vec::new(); 2 * tiles],
            held_by: vec![0; tiles],
        }
    }

    /// Piece `i` holds its source (and the source's mate if wide) from its start, and each receiver
    /// (and each receiver's mate if wide; a mate that receives the piece itself once) from its switch.
    /// `tiles` starts with the tiles it reaches; they are taken off.
    fn piece(&mut self, i: usize, p: &Piece, t: &Transfer, reach: Reach, tiles: &mut &[u32]) {
        let (start, cycles) = (u64::from(p.start), cycles(p));
        let sending = (start, start + cycles, p.transfer);
        self.holds[t.source as usize].push(sending);
        if p.wide {
            self.holds[t.source as usize ^ 1].push(sending);
        }
        if reach == Reach::Senders {
            return;
        }
        let arrival = start + u64::from(self.o.transit);
        let listen = arrival.saturating_sub(u64::from(self.o.switch));
        let receiving = (listen, arrival + cycles, p.transfer);
        let (reached, rest) = tiles.split_at(reached(t, p).len());
        *tiles = rest;
        for &d in reached {
            let d = d as usize;
            for r in [d, d ^ 1].into_iter().take(if p.wide { 2 } else { 1 }) {
                if self.held_by[r] != i + 1 {
                    self.held_by[r] = i + 1;
                    self.holds[self.tiles + r].push(receiving);
                }
            }
        }
    }
}

/// The words of piece `p` arrive at each destination of transfer `t` it reaches, whose tiles are
/// pushed to `tiles`.
fn arrive(p: &Piece, t: &Transfer, destinations: &mut [Destination], tiles: &mut Vec<u32>) {
    for d in &mut destinations[reached(t, p)] {
        tiles.push(d.tile);
        d.arrived = if d.arrived == p.word {
            p.word + p.words
        } else {
            DISORDERED
        };
    }
}

/// Two holds of one port that overlap, by port then cycle.
fn port_problems(holds: &mut [Vec<Hold>], tiles: usize) -> Vec<String> {
    holds
        .par_iter_mut()
        .enumerate()
        .flat_map_iter(|(port, holds)| {
            // In piece order, so already sorted unless two pieces start in one cycle.
            if !holds.is_sorted() {
                holds.sort_unstable();
            }
            let (what, tile) = if port < tiles {
                ("sends", port)
            } else {
                ("receives", port - tiles)
            };
            let clashes = holds.windows(2).filter(|w| w[0].1 > w[1].0);
            clashes
                .map(|w| {
                    format!(
                        "tile{tile} {what} transfers {} and {} in the same cycle {}",
                        w[0].2, w[1].2, w[1].0
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Words of a transfer that never reach a destination or reach it twice, by transfer then destination.
/// Only the (transfer, destination)s whose words did not all arrive in order are looked at again.
fn delivery_problems(endpoints: &Endpoints, schedule: &Schedule, reach: &[Reach]) -> Vec<String> {
    // The words each unsure (transfer, destination) received, by (transfer, destination) number.
    let mut received: BTreeMap<usize, (usize, Vec<Delivery>)> = BTreeMap::new();
    for (i, t) in endpoints.transfers.iter().enumerate() {
        for slot in t.first..t.first + t.count {
            if endpoints.destinations[slot].arrived != t.words || t.words == DISORDERED {
                received.insert(slot, (i, Vec::new()));
            }
        }
    }
    if received.is_empty() {
        return Vec::new();
    }
    let read = schedule.pieces.iter().zip(reach);
    for (p, _) in read.filter(|(_, r)| **r == Reach::Everything) {
        for slot in reached(&endpoints.transfers[p.transfer as usize], p) {
            if let Some((_, words)) = received.get_mut(&slot) {
                words.push((p.word, p.word + p.words));
            }
        }
    }
    let mut problems = Vec::new();
    for (slot, (i, words)) in &mut received {
        let (tile, total) = (
            endpoints.destinations[*slot].tile,
            endpoints.transfers[*i].words,
        );
        words.sort_unstable();
        let mut next = 0;
        for &(a, b) in words.iter() {
            if a != next {
                let what = if a > next {
                    "never arrive"
                } else {
                    "arrive twice"
                };
                problems.push(format!(
                    "transfer {i} to tile{tile}: words {next}..{a} {what}"
                ));
            }
            next = next.max(b);
        }
        if next != total {
            problems.push(format!(
                "transfer {i} to tile{tile}: words {next}..{total} never arrive"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::schedule::schedule;
    use crate::exchange::synthetic::{Rng, random_small};

    /// The checker as first written, one port at a time with nested vectors: the definition the fast
    /// one must agree with message for message.
    fn reference(pattern: &Pattern, o: Overheads, schedule: &Schedule) -> Vec<String> {
        let mut v = Verifier::default();
        // Every tile with its pair mate.
        let n = pattern.tiles().next_multiple_of(2);
        // Cycles in u64: a damaged stored schedule must not wrap around.
        let mut send: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); n];
        let mut recv: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); n];
        // Words delivered per (transfer, destination index).
        let mut delivered: Vec<Vec<Vec<(u64, u64)>>> = pattern
            .transfers
            .iter()
            .map(|t| vec![Vec::new(); t.destinations.len()])
            .collect();
        for p in &schedule.pieces {
            let Some(t) = pattern.transfers.get(p.transfer as usize) else {
                v.error(format!(
                    "piece at cycle {} names transfer {} of {}",
                    p.start,
                    p.transfer,
                    pattern.transfers.len()
                ));
                continue;
            };
            let (start, word, words) = (u64::from(p.start), u64::from(p.word), u64::from(p.words));
            if words == 0 || word + words > u64::from(t.words) {
                v.error(format!(
                    "transfer {}: piece of words {}..{} outside its {} words",
                    p.transfer,
                    p.word,
                    p.word + p.words,
                    t.words
                ));
                continue;
            }
            if p.wide && !o.pairs {
                v.error(format!(
                    "transfer {}: wide piece at cycle {} without supertile pairs",
                    p.transfer, p.start
                ));
                continue;
            }
            // A wide piece moves two words per cycle and holds the pair mates' ports too.
            let cycles = if p.wide { words.div_ceil(2) } else { words };
            let end = start + cycles + u64::from(o.transit);
            v.check(end <= u64::from(schedule.horizon), || {
                format!(
                    "transfer {}: piece at cycle {} arrives until {end}, after the horizon {}",
                    p.transfer, p.start, schedule.horizon
                )
            });
            let mut senders = vec![t.source as usize];
            if p.wide {
                senders.push(t.source as usize ^ 1);
            }
            for s in senders {
                send[s].push((start, start + cycles, p.transfer));
            }
            let destinations: Vec<usize> = match p.destinations {
                None => (0..t.destinations.len()).collect(),
                Some((a, b)) if a < b && (b as usize) <= t.destinations.len() => {
                    (a as usize..b as usize).collect()
                }
                Some((a, b)) => {
                    v.error(format!(
                        "transfer {}: piece for destinations {a}..{b} of {}",
                        p.transfer,
                        t.destinations.len()
                    ));
                    continue;
                }
            };
            let listen = (start + u64::from(o.transit)).saturating_sub(u64::from(o.switch));
            let mut receivers: Vec<usize> = Vec::new();
            for k in destinations {
                let d = t.destinations[k] as usize;
                receivers.push(d);
                if p.wide {
                    receivers.push(d ^ 1);
                }
                delivered[p.transfer as usize][k].push((word, word + words));
            }
            // A mate that receives the piece itself is held once.
            receivers.sort_unstable();
            receivers.dedup();
            for d in receivers {
                recv[d].push((listen, start + u64::from(o.transit) + cycles, p.transfer));
            }
        }
        for (what, ports) in [("sends", &mut send), ("receives", &mut recv)] {
            for (tile, intervals) in ports.iter_mut().enumerate() {
                intervals.sort_unstable();
                for w in intervals.windows(2) {
                    v.check(w[0].1 <= w[1].0, || {
                        format!(
                            "tile{tile} {what} transfers {} and {} in the same cycle {}",
                            w[0].2, w[1].2, w[1].0
                        )
                    });
                }
            }
        }
        for (i, (t, per_destination)) in pattern.transfers.iter().zip(&mut delivered).enumerate() {
            for (k, words) in per_destination.iter_mut().enumerate() {
                words.sort_unstable();
                let mut next = 0;
                for &(a, b) in words.iter() {
                    v.check(a == next, || {
                        format!(
                            "transfer {i} to tile{}: words {next}..{a} {}",
                            t.destinations[k],
                            if a > next {
                                "never arrive"
                            } else {
                                "arrive twice"
                            }
                        )
                    });
                    next = next.max(b);
                }
                v.check(next == u64::from(t.words), || {
                    format!(
                        "transfer {i} to tile{}: words {next}..{} never arrive",
                        t.destinations[k], t.words
                    )
                });
            }
        }
        let bound = pattern.lower_bound(o);
        v.check(schedule.lower_bound == bound, || {
            format!(
                "records lower bound {}, the pattern's is {bound}",
                schedule.lower_bound
            )
        });
        v.check(schedule.horizon >= bound, || {
            format!("horizon {} below the lower bound {bound}", schedule.horizon)
        });
        v.finish()
    }

    /// `s` with a few random faults: pieces moved, dropped, doubled, resized, widened or narrowed,
    /// sent to other destinations or naming other transfers; horizon and bound misrecorded.
    fn damage(rng: &mut Rng, s: &mut Schedule, transfers: u32) {
        for _ in 0..rng.below(4) {
            if s.pieces.is_empty() {
                break;
            }
            let i = rng.below(s.pieces.len() as u64) as usize;
            let p = &mut s.pieces[i];
            match rng.below(9) {
                0 => p.start = p.start.saturating_add(rng.below(4) as u32),
                1 => p.start = p.start.saturating_sub(rng.below(4) as u32),
                2 => {
                    s.pieces.remove(i);
                }
                3 => {
                    let copy = *p;
                    s.pieces.push(copy);
                }
                4 => p.words = rng.below(6) as u32,
                5 => p.word = rng.below(6) as u32,
                6 => p.wide = !p.wide,
                7 => p.destinations = Some((rng.below(4) as u32, rng.below(5) as u32)),
                _ => p.transfer = rng.below(u64::from(transfers) + 1) as u32,
            }
        }
        match rng.below(4) {
            0 => s.horizon = s.horizon.saturating_sub(rng.below(3) as u32),
            1 => s.lower_bound += 1,
            _ => {}
        }
    }

    #[test]
    fn agrees_with_the_reference_on_damaged_schedules() {
        let mut rng = Rng(7);
        for case in 0..1000 {
            let pattern = random_small(&mut rng, 4, 20);
            let o = Overheads {
                switch: rng.below(3) as u32,
                transit: 2 + rng.below(10) as u32,
                pairs: case % 3 != 0,
            };
            let mut s = schedule(&pattern, o);
            // Wide pieces checked without pairs, too.
            let o = if case % 7 == 0 {
                Overheads { pairs: false, ..o }
            } else {
                o
            };
            if case % 5 != 0 {
                damage(&mut rng, &mut s, pattern.transfers.len() as u32);
            }
            // A destination named twice (the scheduler never sees one): a piece holds it once.
            let mut pattern = pattern;
            if case % 4 == 0 {
                let t = &mut pattern.transfers[0];
                t.destinations.push(t.destinations[0]);
            }
            assert_eq!(
                check(&pattern, o, &s),
                reference(&pattern, o, &s),
                "case {case}: {pattern:?}\n{s:?}"
            );
        }
    }
}
