//! The one lowering from the program to tile instructions, shared by `emit` (real addresses),
//! `place_storage` (placeholder addresses, to size the code) and the calibration packages (exchange code
//! alone). It depends on the IR, the ISA, the exchange schedule model and the target; no phase.
//!
//! Per superstep, a tile's program holds its compute vertices (each operand placed at its buffer's
//! address plus the operand's offset, at the buffer's row stride and element type) or its part of the
//! exchange phase (an `Exchange` marker, then its sends and receives in cycle order from the schedule's
//! pieces), then a `Sync`. A placeholder base stays a placeholder, so sized code is never shorter than
//! real code.

use crate::exchange::Schedule;
use crate::ids::{BufferId, ExchangeId, TileId};
use crate::ir::{ExchangeStorage, Exchanges, Operand, Selected, Step};
use crate::isa::{Instr, PLACEHOLDER_ADDRESS, Placed, Receive, Run, Send, TileProgram};
use crate::target::Target;
use rayon::prelude::*;

/// Exchange storage and schedules that do not belong to the program they are lowered with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the exchange storage ({storage} phases) and the schedules ({schedules}) do not belong to a \
     program of {program} exchange phases: they come from different builds"
)]
pub struct Mismatch {
    pub program: usize,
    pub storage: usize,
    pub schedules: usize,
}

/// `operand` of the program placed with its buffer at `base` ([`PLACEHOLDER_ADDRESS`] stays one).
fn placed(sel: &Selected, operand: &Operand, base: u32) -> Placed {
    let buffer = &sel.buffers[operand.buffer.index()];
    Placed {
        address: if base == PLACEHOLDER_ADDRESS {
            base
        } else {
            base + buffer.operand_offset(operand)
        },
        stride: buffer.stride * buffer.dtype.bytes(),
        dtype: buffer.dtype,
    }
}

/// A transfer bound to memory: the source tile and the run it reads, each destination tile and the run
/// it writes.
pub struct BoundTransfer {
    pub source: TileId,
    pub source_run: Run,
    pub bytes: u32,
    pub destinations: Vec<(TileId, Run)>,
}

/// The exchange code of one phase: for every tile taking part, in tile order, an `Exchange` marker then
/// its sends and receives in cycle order, from the schedule's pieces.
pub fn exchange_programs(
    phase: ExchangeId,
    schedule: &Schedule,
    transfers: &[BoundTransfer],
    target: &Target,
) -> Vec<(TileId, Vec<Instr>)> {
    let mut per_tile: Vec<Vec<(u32, Instr)>> = vec![Vec::new(); target.tiles as usize];
    let word = target.exchange_bytes_per_cycle;
    for piece in &schedule.pieces {
        let t = &transfers[piece.transfer as usize];
        let (start, skip) = (piece.start, piece.word * word);
        let bytes = (piece.words * word).min(t.bytes - skip);
        per_tile[t.source.index()].push((
            start,
            Instr::Send(Send {
                start,
                skip,
                bytes,
                run: t.source_run,
                wide: piece.wide,
            }),
        ));
        let served = match piece.destinations {
            None => 0..t.destinations.len(),
            Some((a, b)) => a as usize..b as usize,
        };
        for &(tile, run) in &t.destinations[served] {
            let switch = start + target.exchange_transit_cycles - target.mux_switch_cycles;
            per_tile[tile.index()].push((
                switch,
                Instr::Receive(Receive {
                    switch,
                    from: t.source,
                    sent: start,
                    skip,
                    bytes,
                    run,
                    wide: piece.wide,
                }),
            ));
        }
    }
    per_tile
        .into_iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .map(|(tile, mut list)| {
            list.sort_by_key(|(cycle, i)| (*cycle, matches!(i, Instr::Receive(_))));
            let program = std::iter::once(Instr::Exchange {
                phase,
                horizon: schedule.horizon,
            })
            .chain(list.into_iter().map(|(_, i)| i))
            .collect();
            (TileId::from_index(tile), program)
        })
        .collect()
}

/// Every tile's program, with buffer addresses from `address`. `place_storage` calls this with
/// [`PLACEHOLDER_ADDRESS`] to size the code.
pub fn tile_programs(
    sel: &Selected,
    storage: &ExchangeStorage,
    exchanges: &Exchanges,
    target: &Target,
    address: &(dyn Fn(BufferId) -> u32 + Sync),
) -> Result<Vec<TileProgram>, Mismatch> {
    let (program, storage_phases, schedules) = (
        sel.exchanges.len(),
        storage.phases.len(),
        exchanges.phases.len(),
    );
    if storage_phases != program || schedules != program {
        return Err(Mismatch {
            program,
            storage: storage_phases,
            schedules,
        });
    }
    // A placeholder base stays a placeholder, so sized code is never shorter than real code.
    let place = |run: &Run, base: u32| {
        if base == PLACEHOLDER_ADDRESS {
            Run {
                offset: base,
                ..*run
            }
        } else {
            run.shifted(base)
        }
    };
    // Each superstep's instructions by tile, lowered in parallel, then appended in step order.
    let steps: Vec<Vec<(TileId, Vec<Instr>)>> = sel
        .steps
        .par_iter()
        .map(|step| match step {
            Step::Exchange(id) => {
                let ex = &sel.exchanges[id.index()];
                let ps = &storage.phases[id.index()];
                let sched = &exchanges.phases[id.index()].schedule;
                let bound: Vec<BoundTransfer> = ex
                    .transfers
                    .iter()
                    .zip(&ps.transfers)
                    .map(|(t, ts)| BoundTransfer {
                        source: t.source,
                        source_run: place(&ts.source, address(t.source_buffer)),
                        bytes: t.bytes,
                        destinations: t
                            .destinations
                            .iter()
                            .zip(&ts.destinations)
                            .map(|(d, run)| (d.tile, place(run, address(d.buffer))))
                            .collect(),
                    })
                    .collect();
                exchange_programs(*id, sched, &bound, target)
            }
            Step::Compute(c) => sel.compute_sets[*c as usize]
                .vertices
                .iter()
                .map(|v| {
                    let vertex = v.kind.map(|o| placed(sel, o, address(o.buffer)));
                    (v.tile, vec![Instr::Vertex(vertex)])
                })
                .collect(),
        })
        .collect();
    let mut instrs: Vec<Vec<Instr>> = vec![Vec::new(); target.tiles as usize];
    for step in steps {
        for (tile, list) in step {
            instrs[tile.index()].extend(list);
        }
        for program in &mut instrs {
            program.push(Instr::Sync);
        }
    }
    Ok(instrs
        .into_iter()
        .enumerate()
        .map(|(t, instrs)| TileProgram {
            tile: TileId::from_index(t),
            instrs,
        })
        .collect())
}
