//! Flows: the units the tight cover ([`super::cover`]) schedules, built from a pattern.
//!
//! Contract: [`multicast_groups`] chooses how many groups of its destinations each transfer goes out
//! in, from the ports' loads ([`port_loads`]) and the target; [`flows_of`] turns each transfer with
//! words into `groups[i]` flows, one per group of its destinations ([`destination_groups`]:
//! consecutive ranges of the destination list, in order), numbered in order of transfer, then of
//! group. Each [`Flow`] lists its ports: the sender port (`0..tiles`) first, then its receiver ports
//! (`tiles + d`), then, with pairs, the pair mates (`p ^ 1`) of those that are not ports themselves,
//! which a wide run holds too; a flow planned wide counts its mates among its ports. [`Flows`] also
//! holds what the flows sum to per port, narrow and wide, and each port's flows of more than two
//! ports ([`Watched`]). The flows of exactly two ports are indexed by pair apart
//! ([`super::partners`]), from the same pattern and groups.

use super::{Overheads, Pattern, PatternTransfer};

/// A unit of scheduling: a transfer, or one destination of a split multicast transfer. One cache
/// line, its ports within when they are few: starting a flow touches nothing else of it.
#[repr(align(64))]
pub(super) struct Flow {
    /// Its list of ports: the sender port first, then receiver ports, then the pair mates of those
    /// ports that are not ports themselves, which a wide run holds too. Here when at most four,
    /// else at `TightCover::flow_ports[inline[0]..]`.
    pub(super) inline: [u32; 4],
    /// How many of the list are ports, and how long the list is.
    pub(super) ports: u32,
    pub(super) listed: u32,
    pub(super) transfer: u32,
    pub(super) destinations: Option<(u32, u32)>,
    pub(super) done: u32,
    pub(super) rem: u32,
    /// When the current run started, and its piece in `TightCover::pieces`.
    pub(super) start: u32,
    pub(super) piece: u32,
    pub(super) version: u32,
    /// Whether the flow always runs wide: its ports include their mates.
    pub(super) planned: bool,
    pub(super) running: bool,
    /// Whether the current run is wide.
    pub(super) wide: bool,
    /// Whether the current run was started by a cover, for a tight port.
    pub(super) covering: bool,
}

const _: () = assert!(
    std::mem::size_of::<Flow>() == 64,
    "a flow is one cache line"
);

/// Flow `flow`'s list of ports (`Flow::inline`), the first `ports` of them.
pub(super) fn listed<'a>(flow: &'a Flow, flow_ports: &'a [u32], ports: u32) -> &'a [u32] {
    if flow.listed as usize <= flow.inline.len() {
        &flow.inline[..ports as usize]
    } else {
        &flow_ports[flow.inline[0] as usize..][..ports as usize]
    }
}

impl Flow {
    /// What the rest of the flow holds each of its ports for: a switch, then its words, run wide if
    /// planned so.
    pub(super) fn cost(&self, g: u64) -> u64 {
        if self.planned {
            self.wide_cost(g)
        } else {
            u64::from(self.rem) + g
        }
    }

    /// The same, run wide.
    pub(super) fn wide_cost(&self, g: u64) -> u64 {
        u64::from(self.rem.div_ceil(2)) + g
    }
}

/// A flow of more than two ports in a port's list.
#[derive(Clone, Copy)]
pub(super) struct Watched {
    pub(super) flow: u32,
    /// A port of the flow last seen busy (any port at first), so that the scan rejects the flow
    /// without looking at its ports while that port stays busy.
    pub(super) watched: u32,
}

/// The symmetric load of each of the `2·tiles` ports: a switch and the words of each transfer it
/// sends or receives, summed over the two halves of the transfers on both cores.
pub(super) fn port_loads(pattern: &Pattern, tiles: u32, g: u64) -> Vec<u64> {
    let ports = 2 * tiles as usize;
    let loads = |transfers: &[PatternTransfer]| {
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
    load
}

/// Groups per transfer: a multicast goes out once per group of destinations, as many groups as the
/// sender's slack below the target pays for (with `split_multicast`, unless `whole` keeps it whole);
/// one group for any other transfer with words, none for a transfer of no words. Multicasts take
/// the slack of `load` in order of most words, then of transfer.
pub(super) fn multicast_groups(
    pattern: &Pattern,
    mut load: Vec<u64>,
    target: u64,
    g: u64,
    split_multicast: bool,
    whole: &[bool],
) -> Vec<u64> {
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
    groups
}

/// The flows of a pattern and what they sum to per port, as
/// [`TightCover`](super::cover) starts with them: a multicast goes out once per group of
/// destinations, `groups[i]` groups for transfer `i`, none when it has no words.
pub(super) struct Flows {
    pub(super) flows: Vec<Flow>,
    pub(super) flow_ports: Vec<u32>,
    pub(super) rem: Vec<u32>,
    pub(super) multicasts: Vec<Vec<Watched>>,
    pub(super) rest: Vec<u64>,
    pub(super) rest_wide: Vec<u64>,
}

pub(super) fn flows_of(
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
            let flow_ports = &mut x.flow_ports;
            let (inline, ports, length) =
                port_list(flow_ports, t.source, receivers, tiles, planned, pairs);
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

/// The list of ports of a flow from sender `s` to `receivers` ([`Flow::inline`]): inline when it is
/// at most four long, else appended to `flow_ports`, where it starts at `inline[0]`. With the list,
/// how many of it are ports and how long it is.
fn port_list(
    flow_ports: &mut Vec<u32>,
    s: u32,
    receivers: &[u32],
    tiles: u32,
    planned: bool,
    pairs: bool,
) -> ([u32; 4], u32, u32) {
    if let &[d] = receivers {
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
    }
}

/// The `groups` groups of destinations transfer `t` goes out to, in order: each group's range of
/// indices in its destination list (none when the transfer goes whole), and its destinations.
pub(super) fn destination_groups(
    t: &PatternTransfer,
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
