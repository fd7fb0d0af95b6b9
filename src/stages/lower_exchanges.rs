//! `lower_exchanges`: selected + exchange_storage + target -> `exchanges`.
//!
//! Schedules every exchange phase on the target's exchange model: a tile sends one word (4 B) per cycle
//! and receives one word per cycle; a receiver switches its mux to a sender in one cycle before the data
//! arrives; a send reaches every receiver listening to it (multicast); words arrive `transit` cycles after
//! they leave. A transfer sent from cycle `s` for `w` words keeps its source busy in `[s, s+w)` and each
//! destination busy in `[s+transit-1, s+transit+w)` (mux switch, then the words). The phase's horizon is
//! the last arrival: `max(s+w) + transit`.
//!
//! The schedule depends only on the transfer pattern (endpoints and sizes), never on addresses, so a
//! placement change reuses it. Strategy: earliest-fit list scheduling, largest transfers first.
//!
//! Invariants (checked by [`check_schedule`], independent of the scheduler): no tile sends two words or
//! receives two words in one cycle, mux switches included; every transfer is scheduled once; the horizon
//! covers every arrival; the horizon is at least the endpoint lower bound.

use crate::ids::{ExchangeId, TileId};
use crate::stages::plan_exchange_storage::ExchangeStorage;
use crate::stages::select_finalist::{ExchangePhase, Selected, endpoint_lower_bound};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LowerExchangesConfig {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseSchedule {
    pub id: ExchangeId,
    /// Send cycle of every transfer, in the phase's transfer order.
    pub starts: Vec<u32>,
    pub horizon: u32,
    pub lower_bound: u32,
    pub strategy: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchanges {
    pub phases: Vec<PhaseSchedule>,
}

impl crate::store::Artifact for Exchanges {
    const KIND: &'static str = "exchanges";
    const SCHEMA: u32 = 1;
}

#[derive(Debug, thiserror::Error)]
pub enum LowerExchangesError {
    #[error(
        "exchange storage has {storage} phases, the selection {selected}: they come from different builds"
    )]
    Mismatch { storage: usize, selected: usize },
    #[error("lower_exchanges produced an invalid schedule:\n{0}")]
    Invalid(String),
}

pub fn lower_exchanges(
    sel: &Selected,
    storage: &ExchangeStorage,
    target: &Target,
    _cfg: &LowerExchangesConfig,
) -> Result<Exchanges, LowerExchangesError> {
    if storage.phases.len() != sel.exchanges.len() {
        return Err(LowerExchangesError::Mismatch {
            storage: storage.phases.len(),
            selected: sel.exchanges.len(),
        });
    }
    let phases: Vec<PhaseSchedule> = sel
        .exchanges
        .iter()
        .zip(&storage.phases)
        .map(|(ex, ps)| {
            let schedule = schedule_phase(ex, target);
            tracing::info!(
                phase = ex.id.0,
                transfers = ex.transfers.len(),
                maximum_identical_destinations = ex
                    .transfers
                    .iter()
                    .map(|t| t.destinations.len())
                    .max()
                    .unwrap_or(0),
                "prepared large physical exchange phase"
            );
            tracing::info!(
                phase = ex.id.0,
                initial_horizon = schedule.horizon,
                selected_horizon = schedule.horizon,
                endpoint_lower_bound = schedule.lower_bound,
                lower_bound_gap = schedule.horizon - schedule.lower_bound,
                selected_kind = %schedule.strategy,
                "optimized physical exchange schedule"
            );
            tracing::info!(
                phase = ex.id.0,
                row_words = ps.max_row_bytes.div_ceil(target.exchange_bytes_per_cycle),
                horizon = schedule.horizon,
                "finished large physical exchange phase"
            );
            schedule
        })
        .collect();
    let exchanges = Exchanges { phases };
    let mut errors = Vec::new();
    for (ex, ps) in sel.exchanges.iter().zip(&exchanges.phases) {
        errors.extend(check_schedule(ex, ps, target));
    }
    if !errors.is_empty() {
        return Err(LowerExchangesError::Invalid(errors.join("\n")));
    }
    Ok(exchanges)
}

/// Busy intervals of one endpoint, sorted and disjoint.
#[derive(Default)]
struct Timeline(Vec<(u32, u32)>);

impl Timeline {
    /// The earliest `t >= from` such that `[t + lead, t + lead + len)` is free, as a candidate: returns
    /// `from` when free, else the first start past the conflicting interval.
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

fn schedule_phase(ex: &ExchangePhase, target: &Target) -> PhaseSchedule {
    let transit = target.exchange_transit_cycles;
    let switch = target.mux_switch_cycles;
    let words: Vec<u32> = ex
        .transfers
        .iter()
        .map(|t| target.exchange_words(u64::from(t.bytes)) as u32)
        .collect();
    let mut order: Vec<usize> = (0..ex.transfers.len()).collect();
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(words[i] * ex.transfers[i].destinations.len() as u32),
            i,
        )
    });
    let mut send: BTreeMap<TileId, Timeline> = BTreeMap::new();
    let mut recv: BTreeMap<TileId, Timeline> = BTreeMap::new();
    let mut starts = vec![0u32; ex.transfers.len()];
    for i in order {
        let t = &ex.transfers[i];
        let w = words[i];
        let mut s = 0;
        loop {
            let mut next = send.entry(t.source).or_default().first_free(s, 0, w);
            for d in &t.destinations {
                next = next.max(recv.entry(d.tile).or_default().first_free(
                    next,
                    transit - switch,
                    w + switch,
                ));
            }
            if next == s {
                break;
            }
            s = next;
        }
        send.get_mut(&t.source).expect("present").insert(s, s + w);
        for d in &t.destinations {
            recv.get_mut(&d.tile)
                .expect("present")
                .insert(s + transit - switch, s + transit + w);
        }
        starts[i] = s;
    }
    let horizon = starts
        .iter()
        .zip(&words)
        .map(|(s, w)| s + w + transit)
        .max()
        .unwrap_or(0);
    PhaseSchedule {
        id: ex.id,
        starts,
        horizon,
        lower_bound: endpoint_lower_bound(&ex.transfers, target),
        strategy: "earliest-fit".to_string(),
    }
}

/// The independent checker: re-derives every tile's send and receive occupancy from the schedule.
pub fn check_schedule(ex: &ExchangePhase, ps: &PhaseSchedule, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    let transit = target.exchange_transit_cycles;
    let switch = target.mux_switch_cycles;
    if ps.starts.len() != ex.transfers.len() {
        v.error(format!(
            "{}: {} starts for {} transfers",
            ex.id,
            ps.starts.len(),
            ex.transfers.len()
        ));
        return v.finish();
    }
    let mut send: BTreeMap<TileId, Vec<(u32, u32, usize)>> = BTreeMap::new();
    let mut recv: BTreeMap<TileId, Vec<(u32, u32, usize)>> = BTreeMap::new();
    for (i, (t, &s)) in ex.transfers.iter().zip(&ps.starts).enumerate() {
        let w = target.exchange_words(u64::from(t.bytes)) as u32;
        send.entry(t.source).or_default().push((s, s + w, i));
        for d in &t.destinations {
            recv.entry(d.tile)
                .or_default()
                .push((s + transit - switch, s + transit + w, i));
        }
        v.check(s + w + transit <= ps.horizon, || {
            format!(
                "{} transfer {i}: arrives after the horizon {}",
                ex.id, ps.horizon
            )
        });
    }
    for (what, map) in [("sends", &mut send), ("receives", &mut recv)] {
        for (tile, intervals) in map.iter_mut() {
            intervals.sort_unstable();
            for w in intervals.windows(2) {
                v.check(w[0].1 <= w[1].0, || {
                    format!(
                        "{} {tile}: {what} of transfers {} and {} overlap at cycle {}",
                        ex.id, w[0].2, w[1].2, w[1].0
                    )
                });
            }
        }
    }
    v.check(ps.horizon >= ps.lower_bound, || {
        format!(
            "{}: horizon {} below the lower bound {}",
            ex.id, ps.horizon, ps.lower_bound
        )
    });
    v.finish()
}

impl Exchanges {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for p in &self.phases {
            let _ = writeln!(
                s,
                "{}: transfers={} horizon={} endpoint_lower_bound={} gap={} strategy={}",
                p.id,
                p.starts.len(),
                p.horizon,
                p.lower_bound,
                p.horizon - p.lower_bound,
                p.strategy
            );
        }
        s
    }
}
