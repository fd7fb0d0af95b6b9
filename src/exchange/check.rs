//! The independent checker of a schedule against its pattern: it re-derives every port's occupancy from
//! the pieces alone, supertile pair mates included, and shares no code with the schedulers.
//!
//! Contract: [`check`] returns every problem of the schedule (through [`Verifier`], so the first ones and
//! a count of the rest), each naming transfer, tile or cycle, in a fixed order: the recorded lower
//! bound and horizon; pieces that cannot be read, in piece order; ports held twice at once, senders
//! then receivers, by tile; words that never arrive or arrive twice, by transfer and destination.
//!
//! Cost: a reused schedule costs what this check costs, so it is one pass over the pieces, in their
//! order, against a compact copy of the pattern's endpoints, keeping a few words per port and per
//! (transfer, destination). Pieces in start order hold each port in start order, so a port only keeps
//! where its first hold starts and its last ends: a hold that starts before that end may overlap or be
//! out of order, and only such ports have their holds collected again and sorted to name their
//! problems. Likewise each (transfer, destination) keeps which of its words arrived in order, and only
//! those that end short or see words out of order are collected again (a cover in order is exact:
//! each piece starts where the last ended, none is empty). What the pass keeps joins: the pieces are
//! cut in a part per thread, each part passed over on its own, and the passes joined in order give
//! what one pass over all would, on any number of threads.

use super::{Overheads, Pattern, Piece, Schedule};
use crate::verify::Verifier;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// A port held in cycles `[.0, .1)` for transfer `.2`. Cycles in u64: a damaged stored schedule must
/// not wrap around.
type Hold = (u64, u64, u32);

/// Words `[.0, .1)` of a transfer delivered to one destination.
type Delivery = (u32, u32);

/// Where the words arriving at a (transfer, destination) end once some came out of order.
const DISORDERED: u32 = u32::MAX;

/// Every problem of `schedule` for `pattern`, each naming transfer, tile or cycle.
pub fn check(pattern: &Pattern, o: Overheads, schedule: &Schedule) -> Vec<String> {
    // A part of the pieces per thread, none smaller than a chunk.
    let threads = rayon::current_num_threads();
    let part = schedule.pieces.len().div_ceil(threads).max(CHUNK);
    check_in_parts(pattern, o, schedule, part)
}

/// [`check`], passing over the pieces in parts of `part` pieces on their own, in parallel: the result
/// is the same for any `part`.
fn check_in_parts(
    pattern: &Pattern,
    o: Overheads,
    schedule: &Schedule,
    part: usize,
) -> Vec<String> {
    // The pattern's lower bound meanwhile, on another thread.
    let (bound, pieces) = rayon::join(
        || pattern.lower_bound(o),
        || schedule_problems(pattern, o, schedule, part),
    );
    // The schedule's own figures first, so a list cut short still names them.
    let mut v = Verifier::default();
    v.check(schedule.lower_bound == bound, || {
        format!(
            "records lower bound {}, the pattern's is {bound}",
            schedule.lower_bound
        )
    });
    v.check(schedule.horizon >= bound, || {
        format!("horizon {} below the lower bound {bound}", schedule.horizon)
    });
    v.append(pieces);
    v.finish()
}

/// The problems of the pieces, the ports and the deliveries, in that order.
fn schedule_problems(
    pattern: &Pattern,
    o: Overheads,
    schedule: &Schedule,
    part: usize,
) -> Verifier {
    let endpoints = Endpoints::of(pattern);
    // Each part passed over on its own; the passes join in order.
    let pass = schedule
        .pieces
        .par_chunks(part.max(1))
        .map(|pieces| Pass::over(&endpoints, o, schedule.horizon, pieces))
        .reduce_with(Pass::join)
        .unwrap_or_else(|| Pass::new(&endpoints, 0));
    let mut v = pass.v;
    let clashed: Vec<bool> = pass.ports.iter().map(|port| port.end == CLASHED).collect();
    for e in port_problems(o, &endpoints, schedule, &pass.reach, &clashed) {
        v.error(e);
    }
    for e in delivery_problems(&endpoints, &pass.destinations, schedule, &pass.reach) {
        v.error(e);
    }
    v
}

/// Pieces read at a time: enough that the cache misses of their lookups overlap, few enough that
/// what those bring stays in cache until the chunk is done.
const CHUNK: usize = 64;

/// The pass over a run of consecutive pieces: their problems, what each reaches, and where the holds
/// of each port and the words arriving at each (transfer, destination) begin and end. The passes over
/// two consecutive runs join into the pass over both.
struct Pass {
    v: Verifier,
    reach: Vec<Reach>,
    /// Ports `0..tiles` send, `tiles..2·tiles` receive.
    ports: Vec<Port>,
    /// By (transfer, destination) number.
    destinations: Vec<Destination>,
}

impl Pass {
    fn new(endpoints: &Endpoints, pieces: usize) -> Pass {
        Pass {
            v: Verifier::default(),
            reach: Vec::with_capacity(pieces),
            ports: vec![Port::default(); 2 * endpoints.tiles],
            destinations: endpoints.destinations.clone(),
        }
    }

    fn over(endpoints: &Endpoints, o: Overheads, horizon: u32, pieces: &[Piece]) -> Pass {
        let mut pass = Pass::new(endpoints, pieces.len());
        let transfers = &endpoints.transfers;
        let mut named = Vec::with_capacity(CHUNK);
        for (c, chunk) in pieces.chunks(CHUNK).enumerate() {
            // The chunk's transfers, in a loop of independent loads: the pieces name transfers in
            // no order, so each is a cache miss, and here they overlap. Its arrivals likewise, after
            // which the holds find the transfers and their destinations in cache.
            named.clear();
            named.extend(
                chunk
                    .iter()
                    .map(|p| transfers.get(p.transfer as usize).copied()),
            );
            for (p, t) in chunk.iter().zip(&named) {
                let r = read_piece(t.as_ref(), transfers.len(), o, horizon, p, &mut pass.v);
                pass.reach.push(r);
            }
            let read = chunk.iter().zip(&named).zip(&pass.reach[c * CHUNK..]);
            for ((p, t), &r) in read.clone() {
                if let (Some(t), Reach::Everything) = (t, r) {
                    for d in &mut pass.destinations[reached(t, p)] {
                        d.arrive(p.word, p.word + p.words);
                    }
                }
            }
            for (k, ((p, t), &r)) in read.enumerate() {
                let (Some(t), Reach::Senders | Reach::Everything) = (t, r) else {
                    continue;
                };
                // Numbered from 1 within the run.
                let i = c * CHUNK + k + 1;
                let ports = &mut pass.ports;
                let hold = |port: usize, (start, end, _): Hold, named: bool| {
                    let port = &mut ports[port];
                    if port.piece != i {
                        (port.piece, port.named) = (i, named);
                        port.hold(start, end);
                    } else if named && port.named {
                        // A tile named twice: the second copy clashes with the first.
                        port.hold(start, end);
                    } else {
                        port.named |= named;
                    }
                };
                holds(o, endpoints.tiles, &pass.destinations, p, t, r, hold);
            }
        }
        pass
    }

    /// The pass over this run and then `next`.
    fn join(mut self, next: Pass) -> Pass {
        self.v.append(next.v);
        self.reach.extend(next.reach);
        for (port, next) in self.ports.iter_mut().zip(&next.ports) {
            if next.first != next.end {
                port.hold(next.first, next.end);
            }
        }
        let destinations = self.destinations.par_iter_mut().zip(&next.destinations);
        destinations.for_each(|(d, next)| {
            if next.first != next.end {
                d.arrive(next.first, next.end);
            }
        });
        self
    }
}

/// A port in a pass: cycles `[first, end)` from the start of its first hold to the end of its last,
/// none while `first == end`; the piece that held it last, so that a mate's hold is not counted
/// again, and whether that piece names it (a destination named twice holds it twice).
#[derive(Clone, Copy, Default)]
struct Port {
    first: u64,
    end: u64,
    piece: usize,
    named: bool,
}

/// Where a port's holds end once one started before the one before it ended: the two may overlap,
/// or came out of order. Ports never leave this state.
const CLASHED: u64 = u64::MAX;

impl Port {
    /// The port is held in `[start, end)` after its holds so far (`start < end`).
    fn hold(&mut self, start: u64, end: u64) {
        if self.first == self.end {
            (self.first, self.end) = (start, end);
        } else {
            self.end = if self.end > start { CLASHED } else { end };
        }
    }
}

/// A transfer's endpoints and size, compact: looked up once per piece, in the pieces' order.
#[derive(Clone, Copy)]
struct Transfer {
    source: u32,
    words: u32,
    /// Its destinations are `Endpoints::destinations[first..first + count]`; the same numbers name
    /// its (transfer, destination)s.
    first: u32,
    count: u32,
}

impl Transfer {
    /// Its (transfer, destination) numbers.
    fn slots(&self) -> std::ops::Range<usize> {
        self.first as usize..self.first as usize + self.count as usize
    }
}

/// A destination of a transfer, with the words `[first, end)` that arrived there in order (none
/// while `first == end`), or `end` [`DISORDERED`].
#[derive(Clone, Copy)]
struct Destination {
    tile: u32,
    first: u32,
    end: u32,
}

impl Destination {
    /// Words `[word, end)` arrive after those so far (`word < end`).
    fn arrive(&mut self, word: u32, end: u32) {
        if self.first == self.end {
            (self.first, self.end) = (word, end);
        } else {
            self.end = if self.end == word { end } else { DISORDERED };
        }
    }

    /// Whether exactly the words `0..words` arrived, in order.
    fn complete(&self, words: u32) -> bool {
        self.first == 0 && self.end == words && words != DISORDERED
    }
}

/// The pattern's transfers, compact.
struct Endpoints {
    transfers: Vec<Transfer>,
    /// By (transfer, destination) number, none arrived yet.
    destinations: Vec<Destination>,
    /// Every tile the pattern names, with its pair mate.
    tiles: usize,
}

impl Endpoints {
    fn of(pattern: &Pattern) -> Endpoints {
        let count = pattern.transfers.iter().map(|t| t.destinations.len()).sum();
        let mut destinations = Vec::with_capacity(count);
        // One past the highest tile named.
        let mut tiles = 0;
        let transfers = pattern
            .transfers
            .iter()
            .map(|t| {
                let first =
                    u32::try_from(destinations.len()).expect("fewer than 2^32 destinations");
                let named = t.destinations.iter().map(|&d| d as usize + 1);
                tiles = named.fold(tiles.max(t.source as usize + 1), usize::max);
                destinations.extend(t.destinations.iter().map(|&tile| Destination {
                    tile,
                    first: 0,
                    end: 0,
                }));
                Transfer {
                    source: t.source,
                    words: t.words,
                    first,
                    count: t.destinations.len() as u32,
                }
            })
            .collect();
        Endpoints {
            transfers,
            destinations,
            tiles: tiles.next_multiple_of(2),
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
        Some((a, b)) if a >= b || b > t.count => {
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
        None => t.slots(),
        Some((a, b)) => t.first as usize + a as usize..t.first as usize + b as usize,
    }
}

/// Calls `hold` with every port piece `p` (of transfer `t`, reaching `reach`) holds: its source (and
/// the source's mate if wide) from its start, and each receiver (and each receiver's mate if wide)
/// from its switch, with whether the piece names the port's tile (its source or a destination) or
/// holds it as a mate. Ports `0..tiles` send, `tiles..2·tiles` receive. A receiver may come twice: a
/// mate that receives the piece itself is held once (callers skip a mate's hold of a port the piece
/// holds already, and a named hold of a port it holds only as a mate); a destination named twice is
/// held twice, as its port receives each copy on its own and cannot take both at once.
fn holds(
    o: Overheads,
    tiles: usize,
    destinations: &[Destination],
    p: &Piece,
    t: &Transfer,
    reach: Reach,
    mut hold: impl FnMut(usize, Hold, bool),
) {
    let (start, cycles) = (u64::from(p.start), cycles(p));
    let sending = (start, start + cycles, p.transfer);
    hold(t.source as usize, sending, true);
    if p.wide {
        hold(t.source as usize ^ 1, sending, false);
    }
    if reach == Reach::Senders {
        return;
    }
    let arrival = start + u64::from(o.transit);
    let listen = arrival.saturating_sub(u64::from(o.switch));
    let receiving = (listen, arrival + cycles, p.transfer);
    for d in &destinations[reached(t, p)] {
        let d = d.tile as usize;
        hold(tiles + d, receiving, true);
        if p.wide {
            hold(tiles + (d ^ 1), receiving, false);
        }
    }
}

/// Two holds of one port that overlap, by port then cycle. Only the `clashed` ports are looked at
/// again.
fn port_problems(
    o: Overheads,
    endpoints: &Endpoints,
    schedule: &Schedule,
    reach: &[Reach],
    clashed: &[bool],
) -> Vec<String> {
    if !clashed.contains(&true) {
        return Vec::new();
    }
    let mut holds_of = vec![Vec::new(); clashed.len()];
    let mut held_by = vec![(0, false); clashed.len()];
    let tiles = endpoints.tiles;
    let read = schedule.pieces.iter().zip(reach).enumerate();
    for (i, (p, &r)) in read.filter(|(_, (_, r))| **r != Reach::Nothing) {
        let t = &endpoints.transfers[p.transfer as usize];
        holds(
            o,
            tiles,
            &endpoints.destinations,
            p,
            t,
            r,
            |port, hold, named| {
                if !clashed[port] {
                    return;
                }
                let (piece, by_name) = &mut held_by[port];
                if *piece != i + 1 || (named && *by_name) {
                    // A destination named twice is held twice.
                    holds_of[port].push(hold);
                }
                if *piece != i + 1 {
                    (*piece, *by_name) = (i + 1, named);
                } else {
                    *by_name |= named;
                }
            },
        );
    }
    let mut problems = Vec::new();
    for (port, holds) in holds_of.iter_mut().enumerate() {
        holds.sort_unstable();
        let (what, tile) = if port < endpoints.tiles {
            ("sends", port)
        } else {
            ("receives", port - endpoints.tiles)
        };
        for w in holds.windows(2).filter(|w| w[0].1 > w[1].0) {
            problems.push(format!(
                "tile{tile} {what} transfers {} and {} in the same cycle {}",
                w[0].2, w[1].2, w[1].0
            ));
        }
    }
    problems
}

/// Words of a transfer that never reach a destination or reach it twice, by transfer then destination.
/// Only the (transfer, destination)s whose words did not all arrive in order are looked at again.
fn delivery_problems(
    endpoints: &Endpoints,
    arrived: &[Destination],
    schedule: &Schedule,
    reach: &[Reach],
) -> Vec<String> {
    // The words each unsure (transfer, destination) received, by (transfer, destination) number.
    let mut received: BTreeMap<usize, (usize, Vec<Delivery>)> = BTreeMap::new();
    for (i, t) in endpoints.transfers.iter().enumerate() {
        for slot in t.slots() {
            if !arrived[slot].complete(t.words) {
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
            let mut mates: Vec<usize> = Vec::new();
            for k in destinations {
                let d = t.destinations[k] as usize;
                receivers.push(d);
                if p.wide {
                    mates.push(d ^ 1);
                }
                delivered[p.transfer as usize][k].push((word, word + words));
            }
            // A mate that receives the piece itself is held once; a destination named twice twice.
            mates.sort_unstable();
            mates.dedup();
            mates.retain(|m| !receivers.contains(m));
            receivers.extend(mates);
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
            // A destination named twice after scheduling: a piece reaching both names holds it twice.
            let mut pattern = pattern;
            if case % 4 == 0 {
                let t = &mut pattern.transfers[0];
                t.destinations.push(t.destinations[0]);
            }
            let expected = reference(&pattern, o, &s);
            assert_eq!(
                check(&pattern, o, &s),
                expected,
                "case {case}: {pattern:?}\n{s:?}"
            );
            // Passes over parts joined as one.
            let part = 1 + case % 3;
            let in_parts = check_in_parts(&pattern, o, &s, part);
            assert_eq!(in_parts, expected, "case {case} in parts of {part}");
        }
    }
}
