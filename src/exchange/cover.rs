//! The tight cover: the event loop that schedules a pattern's flows over sender and receiver ports
//! (the `tight-cover` strategy and its variants, [`super::strategies`]).
//!
//! Contract: [`tight_cover`] takes a pattern, its overheads and [`CoverOptions`], and returns pieces
//! in the order of [`super::Schedule::pieces`], none of no words, that move every word of every
//! transfer with words to each of its destinations and keep the target's rules (module docs of
//! [`super`]): with `o.pairs` pieces may run wide, holding the mates of their ports too; without,
//! none does. A multicast goes out in as many groups of its destinations as its sender's slack below
//! the target pays for, when `split` allows and `whole` does not forbid it; a transfer marked in
//! `wide` runs wide in every piece. The target `H`, in cycles of the ports, starts at the busiest
//! port's load (with pairs, at `bound + switch - transit`) and only ever grows, as preempted pieces
//! need more switches. Deterministic: every choice breaks ties on port and flow numbers.
//!
//! The loop itself keeps, per port, what it runs until when and what it still owes; flows come from
//! [`super::flows`], pairs' flows from [`super::partners`], times from [`super::agenda`].

use super::agenda::{Agenda, Happening};
use super::flows::{Flow, Flows, Watched, flows_of, listed, multicast_groups, port_loads};
use super::partners::Partners;
use super::pieces::sorted;
use super::{Overheads, Pattern, Piece};
use std::cmp::Reverse;
use std::collections::VecDeque;

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
pub(super) struct CoverOptions<'a> {
    /// Multicasts split into as many groups as their sender's slack pays for.
    pub(super) split: bool,
    /// A run widens when its mate ports' flows fit the target if they run wide too (else, if they
    /// run narrow).
    pub(super) mates_wide: bool,
    /// `whole[i]`: transfer `i` stays whole.
    pub(super) whole: &'a [bool],
    /// `wide[i]`: transfer `i` runs wide throughout, its ports' mates among its ports.
    pub(super) wide: &'a [bool],
    /// With pairs, the pattern's lower bound, where the target starts.
    pub(super) bound: u32,
}

/// The pieces of a schedule of `pattern` by the tight cover, run as `options` says (module docs).
pub(super) fn tight_cover(pattern: &Pattern, o: Overheads, options: &CoverOptions) -> Vec<Piece> {
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
    let g = u64::from(o.switch);
    // Symmetric port loads, then split multicasts where the sender keeps within the busiest port's load.
    let load = port_loads(pattern, tiles, g);
    let always_wide = |i: usize| o.pairs && wide.get(i).copied().unwrap_or(false);
    // The target horizon `H` (module docs of `strategies`). With pairs the busiest ports must run
    // wide to meet the bound: aim at the bound itself.
    let target = if o.pairs {
        (u64::from(bound) + g).saturating_sub(u64::from(o.transit))
    } else {
        load.iter().copied().max().unwrap_or(0)
    };
    let groups = multicast_groups(pattern, load, target, g, split_multicast, whole);
    // The flows and what they sum to per port on one core; their index by pair, which follows from
    // the pattern and the groups alone, on the other.
    let (partners, flows) = rayon::join(
        || Partners::new(pattern, tiles, &groups, &always_wide),
        || flows_of(pattern, &groups, tiles, o, &always_wide),
    );
    let mut s = TightCover::new(o, mates_wide, tiles, target, partners, flows);
    s.run();
    // Runs stopped before a word was sent left pieces of no words.
    s.pieces.retain(|p| p.words > 0);
    sorted(s.pieces)
}

impl TightCover {
    /// The loop at time 0, every flow waiting: `flows` as [`flows_of`] builds them, `partners` their
    /// index by pair.
    fn new(
        o: Overheads,
        mates_wide: bool,
        tiles: u32,
        target: u64,
        partners: Partners,
        flows: Flows,
    ) -> TightCover {
        let Flows {
            flows,
            flow_ports,
            rem,
            multicasts,
            rest,
            rest_wide,
        } = flows;
        let ports = 2 * tiles as usize;
        let flow_count = flows.len();
        TightCover {
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
        }
    }

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
        self.stop_runs_on(f, &mut touched);
        self.start(f, false);
        self.flows[f as usize].covering = true;
        self.release(touched);
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
            self.stop_runs_on(f, &mut touched);
        }
        for &f in &path {
            self.start(f, false);
            self.flows[f as usize].covering = true;
        }
        self.release(touched);
    }

    /// Stops every run holding a port of flow `f`; the ports those runs held go to `touched`.
    fn stop_runs_on(&mut self, f: u32, touched: &mut Vec<u32>) {
        for i in 0..self.ports(f).len() {
            if let Some(r) = self.running[self.ports(f)[i] as usize] {
                touched.extend_from_slice(self.held(r));
                self.stop(r);
            }
        }
    }

    /// After runs were stopped: the horizon target rises to cover what `touched` ports still need,
    /// and those left free are queued.
    fn release(&mut self, touched: Vec<u32>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::Schedule;
    use crate::exchange::check::check;
    use crate::exchange::pieces::horizon;
    use crate::exchange::synthetic::{Rng, random_small};

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
