//! `lower_exchanges`: selected + exchange_storage + target -> `exchanges`.
//!
//! Schedules every exchange phase on the target's exchange model (`crate::exchange`): per transfer, the
//! pieces it is cut into and the cycle each piece is sent. A schedule depends only on the phase's transfer
//! pattern (endpoints and word counts), never on addresses, so `place_storage` can move buffers freely and
//! `emit` binds the schedule to the relocated rows.
//!
//! Each pattern scheduled here (not reused) is reported to the caller's `Progress` as it is done.
//!
//! Reuse: schedules are keyed by their pattern (plus the overheads, the compiler version and this
//! phase's config). The caller passes the schedules it already knows by key; a known schedule is
//! validated against the pattern by the independent checker before it is used. Because the key covers
//! everything the scheduler reads, a reused schedule is byte-identical to a recomputed one.
//!
//! Invariants (checked by [`verify`]): one schedule per exchange phase of the selection, in order, each
//! passing the independent checker (`crate::exchange::check`) against its phase's pattern: no tile
//! sends or receives two words in one cycle, mux switches and supertile pair mates' wide pieces
//! included; every word of every transfer arrives exactly once at every destination; the horizon
//! covers every arrival and is at least the lower bound. The phase runs the checker on every schedule
//! it returns, reused or computed; the exchange storage must have as many phases as the selection.

use crate::exchange::check::check;
use crate::exchange::schedule::schedule;
use crate::exchange::{Overheads, Pattern, Schedule};
use crate::ir::{ExchangeStorage, Exchanges, PhaseSchedule, Selected};
use crate::progress::Progress;
use crate::store::{COMPILER_VERSION, ContentHash};
use crate::target::Target;
use crate::verify::Verifier;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LowerExchangesConfig {}

#[derive(Debug, thiserror::Error)]
pub enum LowerExchangesError {
    #[error(
        "exchange storage has {storage} phases, the selection {selected}: they come from different builds"
    )]
    Mismatch { storage: usize, selected: usize },
    #[error("lower_exchanges produced an invalid schedule for ex{phase}:\n{errors}")]
    Invalid { phase: u32, errors: String },
}

/// The keys of the selection's phase patterns, in phase order: what the caller looks up for reuse.
pub fn pattern_keys(
    sel: &Selected,
    target: &Target,
    cfg: &LowerExchangesConfig,
) -> Vec<ContentHash> {
    let salt = salt(cfg);
    sel.exchanges
        .par_iter()
        .map(|ex| ex.pattern(target).key(Overheads::of(target), &salt))
        .collect()
}

fn salt(cfg: &LowerExchangesConfig) -> Vec<u8> {
    let mut salt = COMPILER_VERSION.as_bytes().to_vec();
    salt.extend(rmp_serde::to_vec(cfg).expect("configs serialise"));
    salt
}

pub fn lower_exchanges(
    sel: &Selected,
    storage: &ExchangeStorage,
    target: &Target,
    cfg: &LowerExchangesConfig,
    known: &BTreeMap<ContentHash, Schedule>,
    progress: &dyn Progress,
) -> Result<Exchanges, LowerExchangesError> {
    if storage.phases.len() != sel.exchanges.len() {
        return Err(LowerExchangesError::Mismatch {
            storage: storage.phases.len(),
            selected: sel.exchanges.len(),
        });
    }
    let o = Overheads::of(target);
    let salt = salt(cfg);
    let patterns: Vec<(Pattern, ContentHash)> = sel
        .exchanges
        .par_iter()
        .map(|ex| {
            let p = ex.pattern(target);
            let key = p.key(o, &salt);
            (p, key)
        })
        .collect();
    // Each distinct pattern once: reuse what is known and valid, schedule the rest (and check each
    // new schedule), side by side.
    let mut distinct: BTreeMap<ContentHash, &Pattern> = BTreeMap::new();
    for (p, key) in &patterns {
        distinct.entry(*key).or_insert(p);
    }
    let (valid, todo): (Vec<_>, Vec<_>) = distinct.into_par_iter().partition_map(|(key, p)| {
        match known.get(&key).filter(|s| check(p, o, s).is_empty()) {
            Some(s) => rayon::iter::Either::Left((key, s)),
            None => rayon::iter::Either::Right((key, p)),
        }
    });
    let valid: BTreeMap<ContentHash, &Schedule> = valid.into_iter().collect();
    if !todo.is_empty() {
        progress.start("exchange patterns scheduled", todo.len() as u64);
    }
    let computed: BTreeMap<ContentHash, (Schedule, Vec<String>)> = todo
        .into_par_iter()
        .map(|(key, p)| {
            let s = schedule(p, o);
            let errors = check(p, o, &s);
            progress.advance(1);
            (key, (s, errors))
        })
        .collect();
    if !computed.is_empty() {
        progress.finish();
    }
    let mut phases = Vec::with_capacity(patterns.len());
    let mut scheduled_here = std::collections::BTreeSet::new();
    for ((_, key), (ex, ps)) in patterns
        .iter()
        .zip(sel.exchanges.iter().zip(&storage.phases))
    {
        let multicast = ex
            .transfers
            .iter()
            .map(|t| t.destinations.len())
            .max()
            .unwrap_or(0);
        tracing::info!(
            phase = ex.id.0,
            transfers = ex.transfers.len(),
            maximum_identical_destinations = multicast,
            "prepared large physical exchange phase"
        );
        let schedule = match (valid.get(key).copied(), computed.get(key)) {
            (Some(s), _) => {
                tracing::info!(phase = ex.id.0, pattern = %key.short(), "reused exchange optimization after validating the pattern");
                s.clone()
            }
            (None, Some((s, _))) if !scheduled_here.insert(*key) => {
                tracing::info!(phase = ex.id.0, pattern = %key.short(), "reused exchange optimization after validating the pattern");
                s.clone()
            }
            (None, Some((s, errors))) => {
                if !errors.is_empty() {
                    return Err(LowerExchangesError::Invalid {
                        phase: ex.id.0,
                        errors: errors.join("\n"),
                    });
                }
                s.clone()
            }
            (None, None) => unreachable!("every pattern is known or computed"),
        };
        tracing::info!(
            phase = ex.id.0,
            initial_horizon = schedule.initial_horizon,
            selected_horizon = schedule.horizon,
            endpoint_lower_bound = schedule.lower_bound,
            lower_bound_gap = schedule.horizon - schedule.lower_bound,
            selected_kind = %schedule.kind,
            pieces = schedule.pieces.len(),
            "optimized physical exchange schedule"
        );
        tracing::info!(
            phase = ex.id.0,
            row_words = ps.max_row_bytes.div_ceil(target.exchange_bytes_per_cycle),
            horizon = schedule.horizon,
            "finished large physical exchange phase"
        );
        phases.push(PhaseSchedule {
            id: ex.id,
            pattern: *key,
            schedule,
        });
    }
    Ok(Exchanges { phases })
}

/// Checks schedules against the selection: one per exchange phase, in order, each passing the
/// independent checker (`crate::exchange::check`) against its phase's pattern; returns every problem
/// found, each with its phase.
pub fn verify(exchanges: &Exchanges, sel: &Selected, target: &Target) -> Vec<String> {
    let o = Overheads::of(target);
    let mut v = Verifier::default();
    v.check(sel.exchanges.len() == exchanges.phases.len(), || {
        format!(
            "{} schedules for the selection's {} exchange phases",
            exchanges.phases.len(),
            sel.exchanges.len()
        )
    });
    for (phase, ps) in sel.exchanges.iter().zip(&exchanges.phases) {
        v.check(ps.id == phase.id, || {
            format!("the schedule of {} stands where {} is", ps.id, phase.id)
        });
        for e in check(&phase.pattern(target), o, &ps.schedule) {
            v.error(format!("{}: {e}", phase.id));
        }
    }
    v.finish()
}
