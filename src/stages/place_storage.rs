//! `place_storage`: selected + exchanges (for code sizes) + target -> `placement`.
//!
//! Gives every buffer of every tile an address. Each tile's code sits at the base of memory, sized by
//! encoding its program with placeholder addresses (never shorter than the real code). Buffers are placed
//! first-fit: the AMP's stationary operands and partials, an attention's probabilities and a flash
//! state the AMP writes in interleaved memory (16-byte aligned; what the AMP writes owns whole
//! memory elements, `Buffer::owns_elements`, so an AMP's input and output never share one), placed
//! first; everything else, the shares of others' partials an
//! epilogue sums among them, in standard memory when it fits, else interleaved. Buffers whose
//! lifetimes are disjoint share memory.
//! Buffers go in the configured order; a tile whose memory that order fragments goes in the other.
//!
//! Invariants (checked by [`verify`]): every buffer lies in tile memory, in interleaved memory when it
//! needs to, aligned; no two buffers of a tile with overlapping lifetimes overlap in memory, nor any buffer
//! the code; a buffer that owns its memory elements shares none with a buffer live at the same time.

use crate::ids::{BufferId, TileId, ValueId};
use crate::ir::{
    Buffer, Exchanges, Graph, Oversize, Placement, Selected, TileUsage, largest_values,
};
use crate::lowering::code_bytes;
use crate::target::Target;
use crate::verify::Verifier;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementOrder {
    /// Place buffers in order of birth, larger first among equals.
    Lifetime,
    /// Place the largest buffers first.
    Size,
}

impl PlacementOrder {
    pub const ALL: [PlacementOrder; 2] = [PlacementOrder::Lifetime, PlacementOrder::Size];

    /// The name in flags and stage records: `lifetime`.
    pub fn name(self) -> &'static str {
        match self {
            PlacementOrder::Lifetime => "lifetime",
            PlacementOrder::Size => "size",
        }
    }
}

impl PlacementOrder {
    fn other(self) -> PlacementOrder {
        match self {
            PlacementOrder::Lifetime => PlacementOrder::Size,
            PlacementOrder::Size => PlacementOrder::Lifetime,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlaceStorageConfig {
    pub order: PlacementOrder,
}

#[derive(Debug, thiserror::Error)]
pub enum PlaceStorageError {
    #[error(transparent)]
    Lowering(#[from] crate::lowering::LoweringError),
    #[error(
        "{tile}: {buffer} ({what}, {bytes} bytes) does not fit: {live} bytes are live at {step} with code, \
         {over} bytes over the tile's {capacity} bytes; the values with the most bytes live there: {values}"
    )]
    DoesNotFit {
        tile: TileId,
        buffer: BufferId,
        what: String,
        bytes: u32,
        step: String,
        live: u64,
        over: u64,
        capacity: u64,
        /// The values of the buffers live on the tile then, by their bytes there, largest first.
        values: String,
    },
    #[error(
        "{tile}: {buffer} ({what}, {bytes} bytes) does not fit: {free} bytes of the tile are free while it is live, \
         but no hole of the regions it may use ({regions}) is large enough"
    )]
    Fragmented {
        tile: TileId,
        buffer: BufferId,
        what: String,
        bytes: u32,
        free: u64,
        regions: &'static str,
    },
    #[error("place_storage produced an invalid placement:\n{0}")]
    Invalid(String),
}

impl PlaceStorageError {
    /// Whether the error is that a buffer does not fit its tile (live bytes or holes).
    pub fn does_not_fit(&self) -> bool {
        matches!(
            self,
            PlaceStorageError::DoesNotFit { .. } | PlaceStorageError::Fragmented { .. }
        )
    }

    /// [`Oversize::LiveBuffers`] when a tile's live buffers do not fit: what the advice a workload
    /// gives is chosen by.
    pub fn oversize(&self) -> Option<Oversize> {
        match self {
            PlaceStorageError::DoesNotFit { .. } => Some(Oversize::LiveBuffers),
            _ => None,
        }
    }
}

pub fn place_storage(
    sel: &Selected,
    exchanges: &Exchanges,
    target: &Target,
    cfg: &PlaceStorageConfig,
) -> Result<Placement, PlaceStorageError> {
    let code_bytes: Vec<u32> = (code_bytes(sel, exchanges, target)?.into_iter())
        .map(|b| {
            u32::try_from(b)
                .unwrap_or(u32::MAX - 15)
                .next_multiple_of(16)
        })
        .collect();
    let mut by_tile: Vec<Vec<&Buffer>> = vec![Vec::new(); target.tiles as usize];
    for b in &sel.buffers {
        by_tile[b.tile.index()].push(b);
    }
    let placed: Vec<Result<TilePlacement, PlaceStorageError>> = by_tile
        .par_iter()
        .enumerate()
        .map(|(t, buffers)| {
            let tile = TileId::from_index(t);
            let place = |order| place_tile(&sel.graph, tile, buffers, code_bytes[t], target, order);
            place(cfg.order).or_else(|e| match e {
                PlaceStorageError::Fragmented { .. } => place(cfg.order.other()).map_err(|_| e),
                e => Err(e),
            })
        })
        .collect();
    let mut addresses = vec![0u32; sel.buffers.len()];
    let mut tiles = Vec::with_capacity(placed.len());
    for r in placed {
        let (list, usage) = r?;
        for (b, a) in list {
            addresses[b.index()] = a;
        }
        tiles.push(usage);
    }
    let placement = Placement { addresses, tiles };
    let errors = verify(&placement, sel, target);
    if !errors.is_empty() {
        return Err(PlaceStorageError::Invalid(errors.join("\n")));
    }
    Ok(placement)
}

/// One tile's buffer addresses and usage.
type TilePlacement = (Vec<(BufferId, u32)>, TileUsage);

/// The memory a buffer claims: whole elements for one that owns them (`Buffer::owns_elements`).
fn footprint(b: &Buffer, address: u32, target: &Target) -> (u32, u32) {
    if b.owns_elements() {
        let e = target.memory_element_bytes;
        let start = address - (address - target.memory_base) % e;
        let end =
            (address + b.bytes() - target.memory_base).next_multiple_of(e) + target.memory_base;
        (start, end)
    } else {
        (address, address + b.bytes())
    }
}

fn lifetimes_overlap(a: &Buffer, b: &Buffer) -> bool {
    a.first_step <= b.last_step && b.first_step <= a.last_step
}

fn place_tile(
    graph: &Graph,
    tile: TileId,
    buffers: &[&Buffer],
    code_bytes: u32,
    target: &Target,
    order: PlacementOrder,
) -> Result<TilePlacement, PlaceStorageError> {
    let mut sorted: Vec<&Buffer> = buffers.to_vec();
    // Buffers that must be interleaved go first: the others can fall back to either region.
    match order {
        PlacementOrder::Lifetime => sorted.sort_by_key(|b| {
            (
                !b.needs_interleaved(),
                b.first_step,
                std::cmp::Reverse(b.bytes()),
                b.id,
            )
        }),
        PlacementOrder::Size => sorted.sort_by_key(|b| {
            (
                !b.needs_interleaved(),
                std::cmp::Reverse(b.bytes()),
                b.first_step,
                b.id,
            )
        }),
    }
    let code_address = target.memory_base;
    let code_end = code_address + code_bytes;
    let mut placed: Vec<(&Buffer, u32)> = Vec::with_capacity(sorted.len());
    let mut live = LiveIndex::new(buffers);
    // Scratch reused from buffer to buffer.
    let (mut short, mut conflicts) = (Vec::new(), Vec::new());
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for b in sorted {
        let regions: &[(u32, u32)] = if b.needs_interleaved() {
            &[(target.interleaved_base, target.memory_end)]
        } else {
            &[
                (code_end, target.interleaved_base),
                (target.interleaved_base, target.memory_end),
            ]
        };
        let align = if b.owns_elements() {
            target.memory_element_bytes
        } else {
            b.alignment()
        };
        // The memory of every placed buffer live with `b`, by start (the long-lived ones are kept
        // in that order, the others sorted here, and the two merged).
        short.clear();
        short.extend(live.short_overlapping(b, &placed));
        short.extend_from_slice(&live.always);
        short.sort_unstable();
        conflicts.clear();
        merge_sorted(&short, live.long_overlapping(b, &placed), &mut conflicts);
        // Their union, as runs of memory held: conflicts overlapping (not merely touching) merge.
        runs.clear();
        for &(start, end) in &conflicts {
            match runs.last_mut() {
                Some(run) if start < run.1 => run.1 = run.1.max(end),
                _ => runs.push((start, end)),
            }
        }
        // First fit: the lowest of the region's start and the runs' ends where `b` fits. [s, e)
        // meets a conflict when the last run starting before e ends after s (for a buffer of no
        // bytes: when s lies inside a run). Then every address below that run's end meets it too,
        // and aligning any later end below it gives that end's address or one that meets it: so
        // that end is the next candidate.
        let mut found = None;
        'regions: for &(lo, hi) in regions {
            let mut candidate = lo.max(code_end);
            loop {
                let addr = aligned(candidate, align, target.memory_base);
                let (s, e) = footprint(b, addr, target);
                if e > hi {
                    break;
                }
                let before = runs.partition_point(|r| r.0 < e);
                match before.checked_sub(1).map(|r| runs[r].1) {
                    Some(held) if held > s => candidate = held,
                    _ => {
                        found = Some(addr);
                        break 'regions;
                    }
                }
            }
        }
        match found {
            Some(addr) => {
                live.insert(b, placed.len(), footprint(b, addr, target));
                placed.push((b, addr));
            }
            None => return Err(no_fit(graph, tile, b, &placed, code_bytes, target)),
        }
    }
    let (mut standard_end, mut interleaved_end) = (code_end, target.interleaved_base);
    for (b, a) in &placed {
        let end = footprint(b, *a, target).1;
        if *a < target.interleaved_base {
            standard_end = standard_end.max(end);
        } else {
            interleaved_end = interleaved_end.max(end);
        }
    }
    // The most bytes live at once, at some buffer's first step: every buffer's bytes added at its
    // first step and taken off after its last, in step order.
    let mut changes: BTreeMap<u32, i64> = BTreeMap::new();
    for (b, _) in &placed {
        *changes.entry(b.first_step.0).or_default() += i64::from(b.bytes());
        *changes.entry(b.last_step.0.saturating_add(1)).or_default() -= i64::from(b.bytes());
    }
    // Between two first steps only buffers end, so the running total's largest value is one at a
    // first step.
    let most = (changes.into_values())
        .scan(0i64, |bytes, change| {
            *bytes += change;
            Some(*bytes)
        })
        .max()
        .unwrap_or(0);
    let peak = most.unsigned_abs() + u64::from(code_bytes);
    let usage = TileUsage {
        code_address,
        code_bytes,
        standard_end,
        interleaved_end,
        peak_bytes: peak as u32,
    };
    Ok((placed.into_iter().map(|(b, a)| (b.id, a)).collect(), usage))
}

/// The memory a placed buffer claims, from its start to its end ([`footprint`]).
type Footprint = (u32, u32);

/// The placed buffers of a tile by lifetime, to find those live with a buffer without visiting
/// every one: buffers living at most [`LiveIndex::SHORT`] steps by their first step (looked back
/// over only as far as the longest of their lives, `reach`: one that began earlier has ended before
/// any later step); those live through every step of the tile's buffers (resident weights) as the
/// runs of memory they hold, touching ones joined, so that a tile's many resident panels cost each
/// later buffer a run or two; the others with their footprints in address order. Joining touching
/// runs moves no buffer of a byte or more: one placed at the boundary of two would overlap the
/// upper.
struct LiveIndex {
    short: BTreeMap<u32, Vec<(usize, Footprint)>>,
    /// The most steps from first to last of a buffer in `short`.
    reach: u32,
    long: Vec<(Footprint, usize)>,
    /// The steps every buffer of the tile lies within.
    span: (u32, u32),
    /// The memory held by the buffers live through all of `span`, as disjoint runs by address.
    always: Vec<Footprint>,
}

impl LiveIndex {
    const SHORT: u32 = 32;

    fn new(buffers: &[&Buffer]) -> LiveIndex {
        let first = buffers.iter().map(|b| b.first_step.0).min().unwrap_or(0);
        let last = buffers.iter().map(|b| b.last_step.0).max().unwrap_or(0);
        LiveIndex {
            short: BTreeMap::new(),
            reach: 0,
            long: Vec::new(),
            span: (first, last),
            always: Vec::new(),
        }
    }

    /// Adds `placed[index]`, `b`, whose memory is `footprint`.
    fn insert(&mut self, b: &Buffer, index: usize, footprint: (u32, u32)) {
        if b.first_step.0 <= self.span.0 && b.last_step.0 >= self.span.1 && b.bytes() > 0 {
            // The runs that touch or overlap `footprint` become one.
            let from = self.always.partition_point(|r| r.1 < footprint.0);
            let to = self.always.partition_point(|r| r.0 <= footprint.1);
            let joined = (self.always[from..to].iter())
                .fold(footprint, |(s, e), r| (s.min(r.0), e.max(r.1)));
            self.always.splice(from..to, [joined]);
        } else if b.last_step.0 - b.first_step.0 <= Self::SHORT {
            self.reach = self.reach.max(b.last_step.0 - b.first_step.0);
            (self.short.entry(b.first_step.0).or_default()).push((index, footprint));
        } else {
            let at = self.long.partition_point(|l| *l <= (footprint, index));
            self.long.insert(at, (footprint, index));
        }
    }

    /// The footprints of the short-lived buffers whose lifetimes overlap `b`'s.
    fn short_overlapping<'a>(
        &'a self,
        b: &'a Buffer,
        placed: &'a [(&Buffer, u32)],
    ) -> impl Iterator<Item = (u32, u32)> + 'a {
        let from = b.first_step.0.saturating_sub(self.reach);
        (self.short.range(from..=b.last_step.0))
            .flat_map(|(_, list)| list.iter().copied())
            .filter(move |&(i, _)| lifetimes_overlap(placed[i].0, b))
            .map(|(_, f)| f)
    }

    /// The footprints of the long-lived buffers whose lifetimes overlap `b`'s, in address order.
    fn long_overlapping<'a>(
        &'a self,
        b: &'a Buffer,
        placed: &'a [(&Buffer, u32)],
    ) -> impl Iterator<Item = (u32, u32)> + 'a {
        (self.long.iter())
            .filter(move |&&(_, i)| lifetimes_overlap(placed[i].0, b))
            .map(|&(f, _)| f)
    }
}

/// `sorted` and the already sorted `others` into `out`, in order.
fn merge_sorted(
    sorted: &[(u32, u32)],
    others: impl Iterator<Item = (u32, u32)>,
    out: &mut Vec<(u32, u32)>,
) {
    let mut rest = sorted;
    for o in others {
        let below = rest.partition_point(|&x| x <= o);
        out.extend_from_slice(&rest[..below]);
        rest = &rest[below..];
        out.push(o);
    }
    out.extend_from_slice(rest);
}

fn aligned(addr: u32, align: u32, base: u32) -> u32 {
    base + (addr - base).next_multiple_of(align)
}

fn no_fit(
    graph: &Graph,
    tile: TileId,
    b: &Buffer,
    placed: &[(&Buffer, u32)],
    code_bytes: u32,
    target: &Target,
) -> PlaceStorageError {
    let capacity = u64::from(target.memory_end - target.memory_base);
    let (step, live) = (b.first_step.0..=b.last_step.0)
        .map(|s| {
            let live: u64 = placed
                .iter()
                .filter(|(p, _)| p.first_step.0 <= s && p.last_step.0 >= s)
                .map(|(p, _)| u64::from(p.bytes()))
                .sum();
            (s, live + u64::from(b.bytes()) + u64::from(code_bytes))
        })
        .max_by_key(|(_, live)| *live)
        .expect("lifetimes are not empty");
    if live > capacity {
        let mut by_value: BTreeMap<ValueId, u64> = BTreeMap::new();
        let live_then = placed
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| p.first_step.0 <= step && p.last_step.0 >= step);
        for p in live_then.chain(std::iter::once(b)) {
            *by_value.entry(p.value).or_default() += u64::from(p.bytes());
        }
        let named = (by_value.into_iter())
            .map(|(v, bytes)| {
                let name = graph.values.get(v.index()).map(|value| value.name.clone());
                (name.unwrap_or_else(|| v.to_string()), bytes)
            })
            .collect();
        PlaceStorageError::DoesNotFit {
            tile,
            buffer: b.id,
            what: b.describe(),
            bytes: b.bytes(),
            step: format!("step{step}"),
            live,
            over: live - capacity,
            capacity,
            values: largest_values(named, 3),
        }
    } else {
        PlaceStorageError::Fragmented {
            tile,
            buffer: b.id,
            what: b.describe(),
            bytes: b.bytes(),
            free: capacity - live + u64::from(b.bytes()),
            regions: if b.needs_interleaved() {
                "interleaved memory only, as the AMP's stationary operand, partials or probabilities"
            } else {
                "either region"
            },
        }
    }
}

pub fn verify(p: &Placement, sel: &Selected, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(p.addresses.len() == sel.buffers.len(), || {
        "address count differs from buffer count".to_string()
    });
    if p.tiles.len() != target.tiles as usize {
        v.error(format!(
            "{} tiles placed, the target has {}",
            p.tiles.len(),
            target.tiles
        ));
        return v.finish();
    }
    let mut by_tile: Vec<Vec<(&Buffer, u32)>> = vec![Vec::new(); target.tiles as usize];
    for (b, &a) in sel.buffers.iter().zip(&p.addresses) {
        by_tile[b.tile.index()].push((b, a));
        let usage = &p.tiles[b.tile.index()];
        let end = u64::from(a) + u64::from(b.bytes());
        v.check(
            a >= usage.code_address + usage.code_bytes && end <= u64::from(target.memory_end),
            || {
                format!(
                    "{} {}: [{a:#x}, {end:#x}) outside the tile's data memory",
                    b.tile, b.id
                )
            },
        );
        v.check(!b.needs_interleaved() || target.is_interleaved(a), || {
            format!("{} {}: {a:#x} is not interleaved", b.tile, b.id)
        });
        v.check(a % b.alignment() == 0, || {
            format!(
                "{} {}: {a:#x} is not {}-byte aligned",
                b.tile,
                b.id,
                b.alignment()
            )
        });
    }
    // Every two buffers of a tile live at once, met as their lifetimes begin in order: each against
    // those begun before it and not yet ended. The tiles side by side, their problems in tile order.
    let overlaps: Vec<Verifier> = (by_tile.par_iter_mut().enumerate())
        .map(|(t, list)| {
            let mut v = Verifier::default();
            list.sort_by_key(|(b, _)| (b.first_step, b.id));
            let mut live: Vec<(&Buffer, (u32, u32))> = Vec::new();
            for &(b, address) in list.iter() {
                live.retain(|(a, _)| a.last_step >= b.first_step);
                let (s2, e2) = footprint(b, address, target);
                for (a, (s1, e1)) in &live {
                    v.check(*e1 <= s2 || e2 <= *s1, || {
                        format!("tile{t}: {} and {} overlap while both live", a.id, b.id)
                    });
                }
                live.push((b, (s2, e2)));
            }
            v
        })
        .collect();
    for tile in overlaps {
        v.append(tile);
    }
    v.finish()
}
