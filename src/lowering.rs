//! The one lowering from the program to tile instructions, shared by `emit` (real addresses),
//! `place_storage` (placeholder addresses, to size the code: [`code_bytes`], a superstep at a time,
//! each kind of exchange superstep once: [`sized_by`]) and the calibration packages (exchange code
//! alone). It depends on the IR, the ISA, the exchange schedule model and the target; no phase.
//!
//! Per superstep, a tile's program holds its compute vertices (each operand placed at its buffer's
//! address plus the operand's offset, at the buffer's row stride and element type) or its part of the
//! exchange phase (an `Exchange` label, then its exchange code: [`exchange`]), then a `Sync`. A
//! placeholder base stays a placeholder, so sized code is never shorter than real code; the exchange
//! code's delays come from the schedule alone, so they are the same either way.

mod exchange;

pub use exchange::{BoundTransfer, Unplaceable, exchange_programs};

use crate::ids::{BufferId, ExchangeId, TileId};
use crate::ir::{Exchanges, Operand, Selected, Step};
use crate::isa::encoding::{encode_instr, header_bytes};
use crate::isa::{EncodedProgram, Instr, PLACEHOLDER_ADDRESS, Placed, Run};
use crate::target::Target;
use rayon::prelude::*;

/// Schedules that do not belong to the program they are lowered with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the schedules ({schedules} phases) do not belong to a program of {program} exchange phases: \
     they come from different builds"
)]
pub struct Mismatch {
    pub program: usize,
    pub schedules: usize,
}

/// Why the program could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum LoweringError {
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    #[error(transparent)]
    Unplaceable(#[from] Unplaceable),
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

/// The program's schedules, refused unless they belong to it.
fn check_belongs(sel: &Selected, exchanges: &Exchanges) -> Result<(), Mismatch> {
    let (program, schedules) = (sel.exchanges.len(), exchanges.phases.len());
    if schedules != program {
        return Err(Mismatch { program, schedules });
    }
    Ok(())
}

/// One superstep's instructions, by tile, with buffer addresses from `address`: its exchange code,
/// or a vertex per tile of its compute set (the `Sync` after it is the caller's).
fn step_instrs(
    sel: &Selected,
    exchanges: &Exchanges,
    target: &Target,
    step: &Step,
    address: &(dyn Fn(BufferId) -> u32 + Sync),
) -> Result<Vec<(TileId, Vec<Instr>)>, Unplaceable> {
    match step {
        Step::Exchange(id) => {
            let sched = &exchanges.phases[id.index()].schedule;
            exchange_programs(*id, sched, &bind(sel, *id, address), target)
        }
        Step::Compute(c) => Ok(sel.compute_sets[*c as usize]
            .vertices
            .iter()
            .map(|v| {
                let vertex = v.kind.map(|o| placed(sel, o, address(o.buffer)));
                (v.tile, vec![Instr::Vertex(Box::new(vertex))])
            })
            .collect()),
    }
}

/// Exchange phase `id`'s transfers bound to memory, with buffer addresses from `address`: each
/// reads and writes its rectangle's run in its buffer (`Buffer::run`).
fn bind(
    sel: &Selected,
    id: ExchangeId,
    address: &(dyn Fn(BufferId) -> u32 + Sync),
) -> Vec<BoundTransfer> {
    // A placeholder base stays a placeholder, so sized code is never shorter than real code.
    let place = |buffer: BufferId, t: &crate::ir::Transfer| {
        let run = sel.buffers[buffer.index()].run(&t.rect);
        match address(buffer) {
            PLACEHOLDER_ADDRESS => Run {
                offset: PLACEHOLDER_ADDRESS,
                ..run
            },
            base => run.shifted(base),
        }
    };
    (sel.exchanges[id.index()].transfers.iter())
        .map(|t| BoundTransfer {
            source: t.source,
            source_run: place(t.source_buffer, t),
            bytes: t.bytes,
            destinations: (t.destinations.iter())
                .map(|d| (d.tile, place(d.buffer, t)))
                .collect(),
        })
        .collect()
}

/// For each superstep, the one whose code bytes it has under placeholder addresses: the first
/// exchange superstep alike (a model's repeated layers), or itself. Exchange supersteps are alike when
/// their schedules' pieces, their transfers bound to placeholders (tiles, bytes, run shapes) and the
/// length of their phase label are: their code then encodes to the same number of bytes on every
/// tile (the same bytes but for the label's phase id).
pub fn sized_by(sel: &Selected, exchanges: &Exchanges) -> Vec<usize> {
    let placeholder = |_| PLACEHOLDER_ADDRESS;
    let kinds: Vec<Option<blake3::Hash>> = (sel.steps.par_iter())
        .map(|step| match *step {
            Step::Exchange(id) => {
                let mut words: Vec<u32> = Vec::new();
                let mut label = Vec::new();
                encode_instr(&mut label, &Instr::Exchange { phase: id });
                words.push(label.len() as u32);
                let run = |r: &Run| [r.offset, r.bytes, r.count, r.stride];
                let pieces = &exchanges.phases[id.index()].schedule.pieces;
                words.push(pieces.len() as u32);
                for p in pieces {
                    let (a, b) = p.destinations.unwrap_or((0, 0));
                    let some = u32::from(p.destinations.is_some());
                    words.extend([p.start, p.transfer, some, a, b]);
                    words.extend([p.word, p.words, u32::from(p.wide)]);
                }
                let bound = bind(sel, id, &placeholder);
                words.push(bound.len() as u32);
                for t in bound {
                    words.extend([t.source.0, t.bytes]);
                    words.extend(run(&t.source_run));
                    words.push(t.destinations.len() as u32);
                    for (tile, r) in &t.destinations {
                        words.push(tile.0);
                        words.extend(run(r));
                    }
                }
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                Some(blake3::hash(&bytes))
            }
            Step::Compute(_) => None,
        })
        .collect();
    let mut first = std::collections::HashMap::new();
    (kinds.iter().enumerate())
        .map(|(s, kind)| kind.map_or(s, |k| *first.entry(k).or_insert(s)))
        .collect()
}

/// The bytes of every tile's encoded program with every address a placeholder, so never fewer
/// than the real code's: what [`tile_programs`] with [`PLACEHOLDER_ADDRESS`] encodes to, worked out
/// one superstep at a time without holding the programs, a superstep alike with an earlier one
/// ([`sized_by`]) counted as that one.
pub fn code_bytes(
    sel: &Selected,
    exchanges: &Exchanges,
    target: &Target,
) -> Result<Vec<u64>, LoweringError> {
    check_belongs(sel, exchanges)?;
    let placeholder = |_| PLACEHOLDER_ADDRESS;
    // Each superstep sized once per kind: one alike with an earlier one is left empty here.
    let by = sized_by(sel, exchanges);
    let steps: Vec<Vec<(TileId, u64)>> = (sel.steps.par_iter().enumerate())
        .map(|(s, step)| {
            if by[s] != s {
                return Ok(Vec::new());
            }
            let mut scratch = Vec::new();
            let list = step_instrs(sel, exchanges, target, step, &placeholder)?;
            Ok(list
                .into_iter()
                .map(|(tile, instrs)| {
                    scratch.clear();
                    for instr in &instrs {
                        encode_instr(&mut scratch, instr);
                    }
                    (tile, scratch.len() as u64)
                })
                .collect())
        })
        .collect::<Vec<Result<_, Unplaceable>>>()
        .into_iter()
        .collect::<Result<_, _>>()?;
    let mut sync = Vec::new();
    encode_instr(&mut sync, &Instr::Sync);
    let syncs = (sync.len() * sel.steps.len()) as u64;
    let mut bytes: Vec<u64> = (0..target.tiles as usize)
        .map(|t| header_bytes(TileId::from_index(t)) as u64 + syncs)
        .collect();
    for &s in &by {
        for &(tile, b) in &steps[s] {
            bytes[tile.index()] += b;
        }
    }
    Ok(bytes)
}

/// Supersteps [`tile_programs`] lowers at once.
const STEPS_AT_ONCE: usize = 16;

/// Every tile's program, with buffer addresses from `address`, encoded as it is lowered.
pub fn tile_programs(
    sel: &Selected,
    exchanges: &Exchanges,
    target: &Target,
    address: &(dyn Fn(BufferId) -> u32 + Sync),
) -> Result<Vec<EncodedProgram>, LoweringError> {
    check_belongs(sel, exchanges)?;
    // Each superstep's instructions by tile, lowered in parallel a chunk of steps at a time, then
    // encoded onto the programs in step order, the tiles in parallel: only one chunk's instructions
    // are held decoded.
    let mut programs: Vec<EncodedProgram> = (0..target.tiles as usize)
        .map(|t| EncodedProgram::start(TileId::from_index(t)))
        .collect();
    for chunk in sel.steps.chunks(STEPS_AT_ONCE) {
        let steps: Vec<Vec<(TileId, Vec<Instr>)>> = (chunk.par_iter())
            .map(|step| step_instrs(sel, exchanges, target, step, address))
            .collect::<Vec<Result<_, Unplaceable>>>()
            .into_iter()
            .collect::<Result<_, _>>()?;
        // Per tile, its instructions of each step of the chunk, in step order.
        let mut by_tile: Vec<Vec<(usize, &[Instr])>> = vec![Vec::new(); programs.len()];
        for (s, step) in steps.iter().enumerate() {
            for (tile, list) in step {
                by_tile[tile.index()].push((s, list));
            }
        }
        programs
            .par_iter_mut()
            .zip(by_tile)
            .for_each(|(program, lists)| {
                let mut lists = lists.into_iter().peekable();
                for s in 0..steps.len() {
                    while let Some((_, list)) = lists.next_if(|&(at, _)| at == s) {
                        list.iter().for_each(|i| program.push(i));
                    }
                    program.push(&Instr::Sync);
                }
            });
    }
    Ok(programs)
}
