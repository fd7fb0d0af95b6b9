//! The program's cost by the more exact model, which ranks the finalists.
//!
//! Contract: [`estimate`] charges every exchange phase its lower bound (the per-tile exchange load
//! of its actual transfers), every compute set its busiest tile's summed vertex estimates, and every
//! step one sync; [`overflow`] finds the first tile and step whose live buffers cannot fit beside the
//! code reserve (all of them in the tile, the interleaved-only ones in interleaved memory); both read
//! only their arguments.

use crate::ids::TileId;
use crate::ir::{Buffer, CODE_RESERVE_BYTES, ComputeSet, ExchangePhase, SelectedEstimate, Step};
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
    let sync = target.sync_estimate(steps.len() as u64);
    SelectedEstimate {
        cycles: compute + exchange + sync,
        compute_cycles: compute,
        exchange_cycles: exchange,
        sync_cycles: sync,
        steps: per_step,
    }
}

/// The first (tile, step) whose live buffers overflow tile memory with the code reserve, or whose
/// interleaved-only buffers overflow interleaved memory, with the bytes live there and what the tile
/// holds, or none when every step of every tile fits. What the AMP writes counts as the whole memory
/// elements it owns (`Buffer::owns_elements`; `place_storage` gives it whole elements).
pub(super) fn overflow(
    buffers: &[Buffer],
    steps: usize,
    target: &Target,
) -> Option<(TileId, usize, u64, u64)> {
    let whole = u64::from(target.memory_end - target.memory_base) - CODE_RESERVE_BYTES;
    let interleaved = u64::from(target.memory_end - target.interleaved_base);
    let tiles = target.tiles as usize;
    // Per tile and step: the change in bytes live at that step, and of them the interleaved-only
    // ones (added at a buffer's first step, taken off after its last); then their running sums.
    let mut live = vec![(0i64, 0i64); tiles * steps];
    let element = target.memory_element_bytes;
    for b in buffers {
        let bytes = if b.owns_elements() {
            i64::from(b.bytes().next_multiple_of(element))
        } else {
            i64::from(b.bytes())
        };
        let only = if b.needs_interleaved() { bytes } else { 0 };
        let (first, last) = (
            b.first_step.0 as usize,
            (b.last_step.0 as usize).min(steps.saturating_sub(1)),
        );
        if first > last || first >= steps || b.tile.index() >= tiles {
            continue;
        }
        let at = b.tile.index() * steps;
        live[at + first].0 += bytes;
        live[at + first].1 += only;
        if last + 1 < steps {
            live[at + last + 1].0 -= bytes;
            live[at + last + 1].1 -= only;
        }
    }
    for tile in live.chunks_mut(steps.max(1)) {
        let mut sum = (0, 0);
        for slot in tile {
            sum = (sum.0 + slot.0, sum.1 + slot.1);
            *slot = sum;
        }
    }
    let (whole, interleaved) = (whole as i64, interleaved as i64);
    live.iter().enumerate().find_map(|(i, &(all, only))| {
        let (tile, step) = (TileId((i / steps) as u32), i % steps);
        if all > whole {
            Some((tile, step, all as u64, whole as u64))
        } else if only > interleaved {
            Some((tile, step, only as u64, interleaved as u64))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{BufferId, StepId, ValueId};
    use crate::ir::{BufferClass, DType, Rect};

    /// A buffer of `kib` KiB on `tile`, live over `steps`.
    fn buffer(tile: u32, kib: u32, interleaved: bool, steps: [u32; 2]) -> Buffer {
        Buffer {
            id: BufferId::from_index(0),
            tile: TileId(tile),
            value: ValueId::from_index(0),
            class: BufferClass::Output,
            rect: Rect::new(0, kib, 0, 512),
            dtype: DType::F16,
            transposed: false,
            interleaved,
            stride: 512,
            first_step: StepId(steps[0]),
            last_step: StepId(steps[1]),
        }
    }

    #[test]
    fn a_tile_overflows_at_the_step_its_buffers_are_live_together() {
        let target = Target::preset("mk2-1500").unwrap();
        let apart = [buffer(3, 301, false, [0, 1]), buffer(3, 301, false, [2, 2])];
        assert_eq!(overflow(&apart, 3, &target), None);
        // 600 KiB fit beside the 24 KiB code reserve; one KiB more does not.
        let whole = 624 * 1024 - CODE_RESERVE_BYTES;
        let exactly = [buffer(3, 300, false, [0, 1]), buffer(3, 300, false, [1, 2])];
        assert_eq!(overflow(&exactly, 3, &target), None);
        let together = [buffer(3, 301, false, [0, 1]), buffer(3, 300, false, [1, 2])];
        assert_eq!(
            overflow(&together, 3, &target),
            Some((TileId(3), 1, 601 * 1024, whole))
        );
        // 500 KiB fit the tile, but not in its 416 KiB of interleaved memory.
        let interleaved = [buffer(5, 250, true, [0, 0]), buffer(5, 250, true, [0, 0])];
        assert_eq!(
            overflow(&interleaved, 1, &target),
            Some((TileId(5), 0, 500 * 1024, 416 * 1024))
        );
        let mixed = [buffer(5, 250, true, [0, 0]), buffer(5, 250, false, [0, 0])];
        assert_eq!(overflow(&mixed, 1, &target), None);
        // 25 partials of one KiB each own a 16 KiB element: 400 KiB, which with 17 KiB more
        // interleaved overflows the 416 KiB.
        let partials = |n: u32| {
            (0..n).map(|_| Buffer {
                class: BufferClass::Partials,
                ..buffer(7, 1, true, [0, 0])
            })
        };
        let fits: Vec<Buffer> = partials(25).chain([buffer(7, 16, true, [0, 0])]).collect();
        assert_eq!(overflow(&fits, 1, &target), None);
        let over: Vec<Buffer> = partials(25).chain([buffer(7, 17, true, [0, 0])]).collect();
        assert_eq!(
            overflow(&over, 1, &target),
            Some((TileId(7), 0, 417 * 1024, 416 * 1024))
        );
    }
}
