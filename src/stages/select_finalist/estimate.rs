//! The program's cost by the more exact model, which ranks the finalists.
//!
//! Contract: [`estimate`] charges every exchange phase its lower bound (the per-tile exchange load
//! of its actual transfers), every compute set its busiest tile's summed vertex estimates, and every
//! step one sync; it reads only its arguments.

use crate::ids::TileId;
use crate::ir::{ComputeSet, ExchangePhase, SelectedEstimate, Step};
use crate::target::Target;
use std::collections::BTreeMap;

pub(super) fn estimate(
    steps: &[Step],
    exchanges: &[ExchangePhase],
    compute_sets: &[ComputeSet],
    target: &Target,
) -> SelectedEstimate {
    let mut per_step = Vec::new();
    let (mut compute, mut exchange) = (0, 0);
    for step in steps {
        let cycles = match step {
            Step::Exchange(id) => {
                let c = u64::from(exchanges[id.index()].lower_bound);
                exchange += c;
                c
            }
            Step::Compute(i) => {
                let mut per_tile: BTreeMap<TileId, u64> = BTreeMap::new();
                for v in &compute_sets[*i as usize].vertices {
                    *per_tile.entry(v.tile).or_default() += v.estimated_cycles;
                }
                let c = per_tile.values().copied().max().unwrap_or(0);
                compute += c;
                c
            }
        };
        per_step.push(cycles);
    }
    let sync = steps.len() as u64 * target.sync_cycles;
    SelectedEstimate {
        cycles: compute + exchange + sync,
        compute_cycles: compute,
        exchange_cycles: exchange,
        sync_cycles: sync,
        steps: per_step,
    }
}
