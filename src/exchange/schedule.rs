//! Scheduling an exchange pattern: two strategies, keep the shorter.
//!
//! - `list`: earliest-fit list scheduling, largest transfers first, one piece per transfer; narrow only,
//!   so it runs only without supertile pairs.
//! - `tight-cover`: an event loop over sender and receiver ports (the critical-line method of the
//!   preemptive open shop). A multicast transfer is sent once per group of its destinations, in as many
//!   groups as the sender's slack pays for without raising the bound (one group per destination at most);
//!   `tight-cover-whole` keeps every multicast whole, which suits gathers along the rows and columns of
//!   tile grids, where splitting costs more switches than it saves. Every piece occupies both its ports for
//!   `switch + words` cycles (a receiver's mux switch comes first), so the loop is a symmetric open shop
//!   with the target horizon `H` = the busiest port's load. Ports start the transfer with the most critical
//!   partner whenever both ends are free; a port that would otherwise miss `H` (its remaining load equals
//!   the time left: it is *tight*) takes a partner along an alternating path, preempting pieces of ports
//!   with slack. A preempted transfer needs one more switch later, so `H` may grow by that switch. With no
//!   overheads and no multicast the result is exactly the bound.
//! - Supertile pairs: `H` starts at the pair-inclusive bound. A flow starts wide (`ceil(words/2) + switch`
//!   cycles, holding the mates of its ports too) when those mates are free and stay within `H`
//!   meanwhile; a port with nothing to start lends its bus to its mate, whose narrow run restarts wide
//!   when that saves more than the extra switch. Wide runs are not part of alternating paths; a tight
//!   port may stop them like multicast pieces. A run widens when its mate ports can still finish
//!   their flows, run narrow, within `H`; on patterns of at most [`SECOND_PASS_TRANSFERS`] transfers
//!   more than 1 % above the bound, a second pass counts the mates' flows run wide (they may widen in turn), and
//!   the shorter schedule is kept.
//!
//! Deterministic: ties break on ids, no hashing.

use super::{Overheads, Pattern, Piece, Schedule};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

/// A flow in a port's list, kept compact for the scan in `try_start`.
#[derive(Clone, Copy)]
struct PortFlow {
    flow: u32,
    /// Unicast: the partner port. Multicast: a port of the flow last seen busy (any port at first), so
    /// the scan rejects the flow without looking at its ports while that port stays busy.
    other: u32,
    /// Multicast: the flow's ports, `TightCover::multicast_ports[a..b]`, so that checking them touches
    /// one small run of memory. Unicast: empty.
    ports: (u32, u32),
}

impl PortFlow {
    fn multicast(&self) -> bool {
        self.ports.0 < self.ports.1
    }
}

/// Patterns up to this many transfers get the second tight-cover pass (`schedule`).
const SECOND_PASS_TRANSFERS: usize = 20_000;

pub fn schedule(pattern: &Pattern, o: Overheads) -> Schedule {
    let lower_bound = pattern.lower_bound(o);
    let at_bound = |pieces: &[Piece]| horizon(pieces, o) == lower_bound;
    let better = |a: &[Piece], b: &[Piece]| (horizon(a, o), a.len()) <= (horizon(b, o), b.len());
    // With pairs, the strategies run at once: with multicast both tight covers (the list schedule,
    // narrow only, never competes), else tight cover and the list schedule, which stops early when
    // tight cover meets the bound. Without pairs, tight cover with multicast split by the senders'
    // slack runs first: it meets the bound on most patterns. Otherwise tight cover with whole
    // multicasts and the list schedule run at once, the list stopping early as above.
    let multicast = pattern.transfers.iter().any(|t| t.destinations.len() > 1);
    let (split, whole, list) = if o.pairs && multicast {
        let (split, whole) = rayon::join(
            || tight_cover(pattern, o, true, false),
            || tight_cover(pattern, o, false, false),
        );
        (split, Some(whole), None)
    } else if o.pairs {
        let stop = AtomicBool::new(false);
        let (list, split) = rayon::join(
            || list_schedule(pattern, o, &stop),
            || {
                let split = tight_cover(pattern, o, true, false);
                if at_bound(&split) {
                    stop.store(true, Ordering::Relaxed);
                }
                split
            },
        );
        let list = list.filter(|_| !at_bound(&split));
        (split, None, list)
    } else {
        let split = tight_cover(pattern, o, true, false);
        if at_bound(&split) {
            (split, None, None)
        } else {
            let stop = AtomicBool::new(false);
            let (list, whole) = rayon::join(
                || list_schedule(pattern, o, &stop),
                || {
                    let whole = tight_cover(pattern, o, false, false);
                    if at_bound(&whole) {
                        stop.store(true, Ordering::Relaxed);
                    }
                    whole
                },
            );
            // When a tight cover meets the bound the list schedule is dropped whether or not it
            // finished, so the result never depends on timing.
            let list = list.filter(|_| !at_bound(&whole));
            (split, Some(whole), list)
        }
    };
    let (tight, kind) = match whole {
        Some(whole) if better(&whole, &split) => (whole, "tight-cover-whole"),
        _ => (split, "tight-cover"),
    };
    let tight_horizon = horizon(&tight, o);
    let list_horizon = list.as_ref().map(|l| horizon(l, o));
    // Pieces cost code and compile time: the list schedule (one piece per transfer) is kept unless
    // tight cover is shorter by more than a thousandth.
    let (pieces, horizon, kind) = match (list, list_horizon) {
        (Some(list), Some(h))
            if h <= tight_horizon
                || (list.len() < tight.len() && h - tight_horizon <= tight_horizon / 1000) =>
        {
            (list, h, "list")
        }
        _ => (tight, tight_horizon, kind),
    };
    // A second pass for patterns more than 1 % above the bound and small enough that it costs little:
    // runs widen when their mates' flows fit the target running wide too, which suits phases where a
    // pair's two tiles send one after the other (the kept schedule is the shorter, then the one with
    // fewer pieces, the first on ties).
    let (pieces, horizon, kind) = if o.pairs
        && horizon - lower_bound > lower_bound / 100
        && pattern.transfers.len() <= SECOND_PASS_TRANSFERS
    {
        let (split, whole) = rayon::join(
            || tight_cover(pattern, o, true, true),
            || multicast.then(|| tight_cover(pattern, o, false, true)),
        );
        let (second, second_kind) = match whole {
            Some(whole) if better(&whole, &split) => (whole, "tight-cover-whole-mates-wide"),
            _ => (split, "tight-cover-mates-wide"),
        };
        let h = self::horizon(&second, o);
        if (h, second.len()) < (horizon, pieces.len()) {
            (second, h, second_kind)
        } else {
            (pieces, horizon, kind)
        }
    } else {
        (pieces, horizon, kind)
    };
    Schedule {
        pieces,
        horizon,
        lower_bound,
        kind: kind.to_string(),
        list_horizon,
    }
}

fn horizon(pieces: &[Piece], o: Overheads) -> u32 {
    pieces
        .iter()
        .map(|p| p.start + p.cycles() + o.transit)
        .max()
        .unwrap_or(0)
}

fn sorted(mut pieces: Vec<Piece>) -> Vec<Piece> {
    pieces.sort();
    pieces
}

/// Busy intervals of one port, sorted and disjoint.
#[derive(Default)]
struct Timeline(Vec<(u32, u32)>);

impl Timeline {
    /// `from` when `[from + lead, from + lead + len)` is free, else the first start past the conflict.
    fn first_free(&self, from: u32, lead: u32, len: u32) -> u32 {
        let (a, b) = (from + lead, from + lead + len);
        let i = self.0.partition_point(|&(_, end)| end <= a);
        match self.0.get(i) {
            Some(&(start, end)) if start < b => end - lead,
            _ => from,
        }
    }
    fn insert(&mut self, a: u32, b: u32) {
        let i = self.0.partition_point(|&(start, _)| start < a);
        self.0.insert(i, (a, b));
    }
}

/// Earliest-fit list scheduling, largest (words × destinations) first, one piece per transfer.
fn list_schedule(pattern: &Pattern, o: Overheads, stop: &AtomicBool) -> Option<Vec<Piece>> {
    let n = pattern.tiles();
    let lead = o.transit - o.switch.min(o.transit);
    let mut send: Vec<Timeline> = (0..n).map(|_| Timeline::default()).collect();
    let mut recv: Vec<Timeline> = (0..n).map(|_| Timeline::default()).collect();
    let mut order: Vec<usize> = (0..pattern.transfers.len()).collect();
    let weight = |i: usize| {
        u64::from(pattern.transfers[i].words) * pattern.transfers[i].destinations.len() as u64
    };
    order.sort_by_key(|&i| (Reverse(weight(i)), i));
    let mut pieces = Vec::with_capacity(order.len());
    for (n, i) in order.into_iter().enumerate() {
        if n % 1024 == 0 && stop.load(Ordering::Relaxed) {
            return None;
        }
        let t = &pattern.transfers[i];
        if t.words == 0 {
            continue;
        }
        let mut s = 0;
        loop {
            let mut next = send[t.source as usize].first_free(s, 0, t.words);
            for &d in &t.destinations {
                next = next.max(recv[d as usize].first_free(next, lead, t.words + o.switch));
            }
            if next == s {
                break;
            }
            s = next;
        }
        send[t.source as usize].insert(s, s + t.words);
        for &d in &t.destinations {
            recv[d as usize].insert(s + lead, s + lead + t.words + o.switch);
        }
        pieces.push(Piece {
            start: s,
            transfer: i as u32,
            destinations: None,
            word: 0,
            words: t.words,
            wide: false,
        });
    }
    Some(sorted(pieces))
}

/// A unit of scheduling: a transfer, or one destination of a split multicast transfer.
struct Flow {
    transfer: u32,
    destinations: Option<(u32, u32)>,
    /// Ports: the sender port first, then receiver ports.
    ports: Vec<u32>,
    /// The pair mates of the ports that are not ports themselves: a wide run holds them too.
    mates: Vec<u32>,
    done: u32,
    rem: u32,
    running: bool,
    /// Whether the current run is wide.
    wide: bool,
    start: u64,
    version: u32,
}

struct TightCover {
    o: Overheads,
    mates_wide: bool,
    tiles: u32,
    flows: Vec<Flow>,
    /// Flows of each port (sender ports `0..tiles`, receiver ports `tiles..2·tiles`).
    port_flows: Vec<Vec<PortFlow>>,
    /// The ports of every multicast flow, one after another (`PortFlow::ports`).
    multicast_ports: Vec<u32>,
    /// Words left of each flow (0 when finished), apart from `flows` for the same reason.
    rem: Vec<u32>,
    /// One bit per flow, set when it has finished: small enough to stay in cache for the scan.
    finished: Vec<u64>,
    running: Vec<Option<u32>>,
    end: Vec<u64>,
    /// Cost of the port's flows that are not running.
    rest: Vec<u64>,
    /// The same if every one of those flows ran wide: what a pair mate needs at best.
    rest_wide: Vec<u64>,
    target: u64,
    t: u64,
    events: BinaryHeap<Reverse<(u64, u32, u32)>>,
    deadlines: BinaryHeap<Reverse<(u64, u32)>>,
    pieces: Vec<Piece>,
    /// Ports freed by a cover at the current time, still to be looked at.
    freed: Vec<u32>,
    stamp: Vec<u32>,
    stamp_now: u32,
    stamp_time: u64,
    parent: Vec<(u32, u32)>,
}

/// `mates_wide`: a run widens when its mate ports' flows fit the target if they run wide too (else, if
/// they run narrow).
fn tight_cover(
    pattern: &Pattern,
    o: Overheads,
    split_multicast: bool,
    mates_wide: bool,
) -> Vec<Piece> {
    // Every tile with its pair mate, so the mate of port `p` is `p ^ 1`.
    let tiles = pattern.tiles().next_multiple_of(2) as u32;
    let ports = 2 * tiles as usize;
    let g = u64::from(o.switch);
    // Symmetric port loads, then split multicasts where the sender keeps within the busiest port's load.
    let mut load = vec![0u64; ports];
    for t in &pattern.transfers {
        let c = u64::from(t.words) + g;
        load[t.source as usize] += c;
        for &d in &t.destinations {
            load[(tiles + d) as usize] += c;
        }
    }
    let bound = load.iter().copied().max().unwrap_or(0);
    // Groups per transfer: a multicast goes out once per group of destinations, as many groups as the
    // sender's slack pays for.
    let mut groups = vec![1u64; pattern.transfers.len()];
    let mut order: Vec<usize> = (0..pattern.transfers.len())
        .filter(|&i| pattern.transfers[i].destinations.len() > 1)
        .collect();
    order.sort_by_key(|&i| (Reverse(pattern.transfers[i].words), i));
    for i in order {
        let t = &pattern.transfers[i];
        let cost = u64::from(t.words) + g;
        let affordable = if split_multicast {
            (bound - load[t.source as usize]) / cost.max(1)
        } else {
            0
        };
        groups[i] = (1 + affordable).min(t.destinations.len() as u64);
        load[t.source as usize] += (groups[i] - 1) * cost;
    }
    let mut flows = Vec::new();
    for (i, t) in pattern.transfers.iter().enumerate() {
        if t.words == 0 {
            continue;
        }
        let flow = |destination: Option<(u32, u32)>, ports: Vec<u32>| {
            let mut mates: Vec<u32> = if o.pairs {
                ports
                    .iter()
                    .map(|&p| p ^ 1)
                    .filter(|m| !ports.contains(m))
                    .collect()
            } else {
                Vec::new()
            };
            mates.sort_unstable();
            mates.dedup();
            Flow {
                transfer: i as u32,
                destinations: destination,
                ports,
                mates,
                done: 0,
                rem: t.words,
                running: false,
                wide: false,
                start: 0,
                version: 0,
            }
        };
        let n = t.destinations.len() as u64;
        if groups[i] == 1 {
            let ports = std::iter::once(t.source)
                .chain(t.destinations.iter().map(|&d| tiles + d))
                .collect();
            flows.push(flow(None, ports));
        } else {
            for k in 0..groups[i] {
                let (a, b) = (
                    (k * n / groups[i]) as usize,
                    ((k + 1) * n / groups[i]) as usize,
                );
                let ports = std::iter::once(t.source)
                    .chain(t.destinations[a..b].iter().map(|&d| tiles + d))
                    .collect();
                flows.push(flow(Some((a as u32, b as u32)), ports));
            }
        }
    }
    let mut port_flows = vec![Vec::new(); ports];
    let mut multicast_ports = Vec::new();
    let mut rest = vec![0u64; ports];
    let mut rest_wide = vec![0u64; ports];
    for (f, flow) in flows.iter().enumerate() {
        let at = multicast_ports.len() as u32;
        if flow.ports.len() != 2 {
            multicast_ports.extend(&flow.ports);
        }
        for &p in &flow.ports {
            let entry = match flow.ports[..] {
                [a, b] => PortFlow {
                    flow: f as u32,
                    other: if a == p { b } else { a },
                    ports: (0, 0),
                },
                _ => PortFlow {
                    flow: f as u32,
                    other: p,
                    ports: (at, at + flow.ports.len() as u32),
                },
            };
            port_flows[p as usize].push(entry);
            rest[p as usize] += u64::from(flow.rem) + g;
            rest_wide[p as usize] += u64::from(flow.rem.div_ceil(2)) + g;
        }
    }
    let rem = flows.iter().map(|f| f.rem).collect();
    let flow_count = flows.len();
    // With pairs the busiest ports must run wide to meet the bound: aim at the bound itself.
    let target = if o.pairs {
        let bound = u64::from(pattern.lower_bound(o));
        (bound + g).saturating_sub(u64::from(o.transit))
    } else {
        rest.iter().copied().max().unwrap_or(0)
    };
    let mut s = TightCover {
        o,
        mates_wide,
        tiles,
        flows,
        port_flows,
        finished: vec![0; flow_count.div_ceil(64)],
        multicast_ports,
        rem,
        running: vec![None; ports],
        end: vec![0; ports],
        rest,
        rest_wide,
        target,
        t: 0,
        events: BinaryHeap::new(),
        deadlines: BinaryHeap::new(),
        pieces: Vec::new(),
        freed: Vec::new(),
        stamp: vec![0; ports],
        stamp_now: 0,
        stamp_time: u64::MAX,
        parent: vec![(0, 0); ports],
    };
    s.run();
    sorted(s.pieces)
}

impl TightCover {
    fn g(&self) -> u64 {
        u64::from(self.o.switch)
    }

    fn cost(&self, f: u32) -> u64 {
        u64::from(self.flows[f as usize].rem) + self.g()
    }

    fn wide_cost(&self, f: u32) -> u64 {
        u64::from(self.flows[f as usize].rem.div_ceil(2)) + self.g()
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
        self.running[p as usize].is_none()
    }

    /// The ports a running flow holds: its own, and its mates' when wide.
    fn held(&self, f: u32) -> Vec<u32> {
        let flow = &self.flows[f as usize];
        let mut held = flow.ports.clone();
        if flow.wide {
            held.extend(&flow.mates);
        }
        held
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
            && flow
                .mates
                .iter()
                .all(|&m| self.free(m) && self.mate_needs(m) + self.t + cost <= self.target)
    }

    fn start(&mut self, f: u32, wide: bool) {
        let narrow = self.cost(f);
        let cost = if wide { self.wide_cost(f) } else { narrow };
        let t = self.t;
        let flow = &mut self.flows[f as usize];
        flow.running = true;
        flow.wide = wide;
        flow.start = t;
        flow.version += 1;
        let version = flow.version;
        let narrow_wide = self.wide_cost(f);
        for &p in &self.flows[f as usize].ports {
            self.rest[p as usize] -= narrow;
            self.rest_wide[p as usize] -= narrow_wide;
        }
        for p in self.held(f) {
            self.running[p as usize] = Some(f);
            self.end[p as usize] = t + cost;
        }
        self.events.push(Reverse((t + cost, f, version)));
    }

    /// Ends the running piece of `f` at the current time; what was sent becomes a piece.
    fn stop(&mut self, f: u32) {
        let (t, g) = (self.t, self.g());
        let held = self.held(f);
        let flow = &mut self.flows[f as usize];
        let cycles = t.saturating_sub(flow.start + g);
        let sent = (cycles << u32::from(flow.wide)).min(u64::from(flow.rem)) as u32;
        if sent > 0 {
            self.pieces.push(Piece {
                start: flow.start as u32,
                transfer: flow.transfer,
                destinations: flow.destinations,
                word: flow.done,
                words: sent,
                wide: flow.wide,
            });
        }
        flow.done += sent;
        flow.rem -= sent;
        self.rem[f as usize] = flow.rem;
        if flow.rem == 0 {
            self.finished[f as usize / 64] |= 1 << (f % 64);
        }
        flow.running = false;
        flow.wide = false;
        flow.version += 1;
        let rem_cost = if flow.rem > 0 {
            u64::from(flow.rem) + g
        } else {
            0
        };
        let rem_wide_cost = if flow.rem > 0 {
            u64::from(flow.rem.div_ceil(2)) + g
        } else {
            0
        };
        for &p in &self.flows[f as usize].ports {
            self.rest[p as usize] += rem_cost;
            self.rest_wide[p as usize] += rem_wide_cost;
        }
        for p in held {
            self.running[p as usize] = None;
        }
    }

    /// Starts the startable flow of free port `p` with the most critical partner. Finished flows leave
    /// `p`'s list. A flow whose partner (or watched port) is busy is passed over without looking further,
    /// which keeps the scan within `p`'s list and a few small arrays.
    fn try_start(&mut self, p: u32) -> bool {
        debug_assert!(self.free(p));
        let mut best: Option<(u64, u32, Reverse<u32>)> = None;
        let mut list = std::mem::take(&mut self.port_flows[p as usize]);
        let mut i = 0;
        while i < list.len() {
            let entry = list[i];
            let (f, other) = (entry.flow, entry.other);
            if self.finished[f as usize / 64] & (1 << (f % 64)) != 0 {
                list.swap_remove(i);
                continue;
            }
            i += 1;
            // A running flow holds its ports: a busy partner or watched port rules the flow out.
            if !self.free(other) {
                continue;
            }
            let rem = self.rem[f as usize];
            let critical = if entry.multicast() {
                let ports = &self.multicast_ports[entry.ports.0 as usize..entry.ports.1 as usize];
                if let Some(&busy) = ports.iter().find(|&&q| !self.free(q)) {
                    list[i - 1].other = busy;
                    continue;
                }
                ports
                    .iter()
                    .filter(|&&q| q != p)
                    .map(|&q| self.remaining(q))
                    .max()
                    .unwrap_or(0)
            } else {
                self.remaining(other)
            };
            let key = (critical, rem, Reverse(f));
            if best.is_none_or(|b| key > b) {
                best = Some(key);
            }
        }
        self.port_flows[p as usize] = list;
        match best {
            Some((_, _, Reverse(f))) => {
                self.start(f, self.can_widen(f));
                true
            }
            None => false,
        }
    }

    /// Idle port `p` lends its pair's bus: the narrow run holding its mate goes on wide when every
    /// mate port of the flow is free and can wait, and the wide run saves more than the restart's switch.
    fn widen_mate(&mut self, p: u32) -> bool {
        let Some(f) = self.running[(p ^ 1) as usize] else {
            return false;
        };
        let (g, flow) = (self.g(), &self.flows[f as usize]);
        // A run started now is not restarted at once: cover may have just stopped it.
        if !self.o.pairs || flow.wide || flow.start == self.t {
            return false;
        }
        let sent = self.t.saturating_sub(flow.start + g);
        let rem = u64::from(flow.rem).saturating_sub(sent);
        let cost = rem.div_ceil(2) + g;
        let widen = rem / 2 > 2 * g
            && flow
                .mates
                .iter()
                .all(|&m| self.free(m) && self.mate_needs(m) + self.t + cost <= self.target);
        if widen {
            self.stop(f);
            self.start(f, true);
        }
        widen
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
            for i in 0..self.port_flows[a as usize].len() {
                let entry = self.port_flows[a as usize][i];
                let (f, x) = (entry.flow, entry.other);
                if entry.multicast() || self.rem[f as usize] == 0 || self.flows[f as usize].running
                {
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
                let other = &self.flows[busy as usize];
                if other.ports.len() != 2 || other.wide {
                    continue;
                }
                let b = if other.ports[0] == x {
                    other.ports[1]
                } else {
                    other.ports[0]
                };
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
        for entry in &self.port_flows[v as usize] {
            let f = entry.flow;
            let flow = &self.flows[f as usize];
            if !entry.multicast() || self.rem[f as usize] == 0 || flow.running {
                continue;
            }
            let affordable =
                flow.ports
                    .iter()
                    .filter(|&&q| q != v)
                    .all(|&q| match self.running[q as usize] {
                        None => true,
                        Some(r) => self.flows[r as usize].ports.iter().all(|&u| {
                            let after = self.remaining(u) + g + self.t;
                            if u == q {
                                after <= self.target
                            } else {
                                after < self.target
                            }
                        }),
                    });
            if affordable && chosen.is_none_or(|(_, rem)| self.rem[f as usize] > rem) {
                chosen = Some((f, self.rem[f as usize]));
            }
        }
        let Some((f, _)) = chosen else { return false };
        self.stamp_now += 1;
        let mut touched = Vec::new();
        for q in self.flows[f as usize].ports.clone() {
            if let Some(r) = self.running[q as usize] {
                touched.extend(self.held(r));
                self.stop(r);
            }
        }
        self.start(f, false);
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
            let ports = self.flows[f as usize].ports.clone();
            for p in ports {
                if let Some(r) = self.running[p as usize] {
                    touched.extend(self.held(r));
                    self.stop(r);
                }
            }
        }
        for &f in &path {
            self.start(f, false);
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
        loop {
            candidates.sort_by_key(|&p| (Reverse(self.remaining(p)), p));
            candidates.dedup();
            let mut queue: VecDeque<u32> = candidates.drain(..).collect();
            while let Some(p) = queue.pop_front() {
                queue.extend(self.freed.drain(..));
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
                if deadline > self.t {
                    self.deadlines.push(Reverse((deadline, p)));
                }
            }
            candidates.clear();
            let next_event = self.events.peek().map(|Reverse((t, _, _))| *t);
            let next_deadline = self.deadlines.peek().map(|Reverse((t, _))| *t);
            let Some(t) = [next_event, next_deadline].into_iter().flatten().min() else {
                break;
            };
            self.t = t;
            while let Some(&Reverse((te, f, version))) = self.events.peek() {
                if te != t {
                    break;
                }
                self.events.pop();
                if self.flows[f as usize].version != version || !self.flows[f as usize].running {
                    continue;
                }
                candidates.extend(self.held(f));
                self.stop(f);
            }
            while let Some(&Reverse((td, p))) = self.deadlines.peek() {
                if td != t {
                    break;
                }
                self.deadlines.pop();
                candidates.push(p);
            }
        }
        debug_assert!(self.flows.iter().all(|f| f.rem == 0), "every flow finishes");
    }
}
