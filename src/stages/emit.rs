//! `emit`: selected + exchange_storage + exchanges + placement -> `tile_code`.
//!
//! Writes every tile's program with resolved addresses: per superstep, the tile's compute vertices or
//! its part of the exchange phase (its sends and receives at their scheduled cycles), then a sync; and
//! the host program (`initialize`, `run`).
//!
//! Invariants (checked by [`verify`]): every tile has one sync per superstep; every send has receivers
//! and every receive names a send of its sender at the same cycle with the same size; every address a
//! program touches lies in tile memory.

use crate::exchange::check::check;
use crate::exchange::{Overheads, Schedule};
use crate::ids::{BufferId, ExchangeId, TileId};
use crate::ir::{
    ExchangeStorage, Exchanges, Operand, Placement, Run, Selected, Step, TileCode, VertexKind,
};
use crate::isa::{HostProgram, HostTransfer, Instr, PLACEHOLDER_ADDRESS, TileProgram};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EmitConfig {}

#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error(
        "the schedule of ex{phase} does not fit its pattern (stale exchanges artifact?):\n{errors}"
    )]
    Schedule { phase: u32, errors: String },
    #[error("emit produced invalid tile code:\n{0}")]
    Invalid(String),
}

pub fn emit(
    sel: &Selected,
    storage: &ExchangeStorage,
    exchanges: &Exchanges,
    placement: &Placement,
    target: &Target,
    _cfg: &EmitConfig,
) -> Result<TileCode, EmitError> {
    // Schedules are address-free: validate each against its pattern before binding it to the rows
    // place_storage gave addresses.
    let o = Overheads::of(target);
    for (ex, ps) in sel.exchanges.iter().zip(&exchanges.phases) {
        let errors = check(&ex.pattern(target), o, &ps.schedule);
        if !errors.is_empty() {
            return Err(EmitError::Schedule {
                phase: ex.id.0,
                errors: errors.join("\n"),
            });
        }
        tracing::info!(
            phase = ex.id.0,
            "reused exchange optimization after validating relocated rows"
        );
    }
    let address = |b: BufferId| placement.addresses[b.index()];
    let tiles = tile_programs(sel, storage, exchanges, target, &address);
    let host_transfer = |t: &crate::ir::HostTransfer| {
        let buf = &sel.buffers[t.buffer.index()];
        HostTransfer {
            value: t.value,
            rect: t.rect,
            tile: t.tile,
            address: address(t.buffer) + buf.offset(t.rect.row0, t.rect.col0),
            stride: buf.stride * buf.dtype.bytes(),
            transposed: buf.transposed,
        }
    };
    let host = HostProgram {
        initialize: sel.initialize.iter().map(host_transfer).collect(),
        run_inputs: sel.run_inputs.iter().map(host_transfer).collect(),
        run_outputs: sel.run_outputs.iter().map(host_transfer).collect(),
    };
    let estimated_steps = sel
        .steps
        .iter()
        .zip(&sel.estimate.steps)
        .map(|(step, est)| match step {
            Step::Exchange(id) => u64::from(exchanges.phases[id.index()].schedule.horizon),
            Step::Compute(_) => *est,
        })
        .collect();
    let code = TileCode {
        workload: sel.workload.clone(),
        tiles,
        host,
        estimated_steps,
    };
    let errors = verify(&code, sel, target);
    if !errors.is_empty() {
        return Err(EmitError::Invalid(errors.join("\n")));
    }
    Ok(code)
}

/// A transfer bound to memory: the source tile and the run it reads, each destination tile and the run
/// it writes.
pub struct BoundTransfer {
    pub source: TileId,
    pub source_run: Run,
    pub bytes: u32,
    pub destinations: Vec<(TileId, Run)>,
}

/// The exchange code of one phase: for every tile taking part, an `Exchange` marker then its sends and
/// receives in cycle order, from the schedule's pieces.
pub fn exchange_programs(
    phase: ExchangeId,
    schedule: &Schedule,
    transfers: &[BoundTransfer],
    target: &Target,
) -> BTreeMap<TileId, Vec<Instr>> {
    let mut per_tile: BTreeMap<TileId, Vec<(u32, Instr)>> = BTreeMap::new();
    let word = target.exchange_bytes_per_cycle;
    for piece in &schedule.pieces {
        let t = &transfers[piece.transfer as usize];
        let (start, skip) = (piece.start, piece.word * word);
        let bytes = (piece.words * word).min(t.bytes - skip);
        per_tile.entry(t.source).or_default().push((
            start,
            Instr::Send {
                start,
                skip,
                bytes,
                run: t.source_run,
                wide: piece.wide,
            },
        ));
        let served = match piece.destinations {
            None => 0..t.destinations.len(),
            Some((a, b)) => a as usize..b as usize,
        };
        for &(tile, run) in &t.destinations[served] {
            let switch = start + target.exchange_transit_cycles - target.mux_switch_cycles;
            per_tile.entry(tile).or_default().push((
                switch,
                Instr::Receive {
                    switch,
                    from: t.source,
                    sent: start,
                    skip,
                    bytes,
                    run,
                    wide: piece.wide,
                },
            ));
        }
    }
    per_tile
        .into_iter()
        .map(|(tile, mut list)| {
            list.sort_by_key(|(cycle, i)| (*cycle, matches!(i, Instr::Receive { .. })));
            let program = std::iter::once(Instr::Exchange {
                phase,
                horizon: schedule.horizon,
            })
            .chain(list.into_iter().map(|(_, i)| i))
            .collect();
            (tile, program)
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
    address: &dyn Fn(BufferId) -> u32,
) -> Vec<TileProgram> {
    let mut instrs: Vec<Vec<Instr>> = vec![Vec::new(); target.tiles as usize];
    let at = |b: BufferId| address(b);
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
    for step in &sel.steps {
        match step {
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
                for (tile, list) in exchange_programs(*id, sched, &bound, target) {
                    instrs[tile.index()].extend(list);
                }
            }
            Step::Compute(c) => {
                for v in &sel.compute_sets[*c as usize].vertices {
                    let buf = |b: BufferId| &sel.buffers[b.index()];
                    let stride = |b: BufferId| buf(b).stride * buf(b).dtype.bytes();
                    let operand = |o: &Operand| {
                        let base = at(o.buffer);
                        if base == PLACEHOLDER_ADDRESS {
                            base
                        } else {
                            base + buf(o.buffer).operand_offset(o)
                        }
                    };
                    let instr = match v.kind.clone() {
                        VertexKind::AmpMatMul {
                            a,
                            b,
                            partials,
                            rows,
                            depth,
                            cols,
                        } => Instr::Amp {
                            a: operand(&a),
                            a_stride: stride(a.buffer),
                            b: operand(&b),
                            b_stride: stride(b.buffer),
                            partials: at(partials),
                            partials_stride: stride(partials),
                            partials_type: buf(partials).dtype,
                            rows,
                            depth,
                            cols,
                        },
                        VertexKind::Epilogue {
                            partials,
                            bias,
                            out,
                            gelu,
                            rows,
                            cols,
                        } => Instr::Epilogue {
                            partials: partials
                                .iter()
                                .map(|o| (operand(o), stride(o.buffer)))
                                .collect(),
                            partials_type: buf(partials[0].buffer).dtype,
                            bias: bias.map(&at),
                            out: at(out),
                            out_stride: stride(out),
                            rows,
                            cols,
                            gelu,
                        },
                        VertexKind::Softmax {
                            scores,
                            probabilities,
                            state,
                            rescale,
                            keys,
                            queries,
                            head_dim,
                            mask,
                            first,
                            scale_bits,
                        } => Instr::Softmax {
                            scores: at(scores),
                            scores_stride: stride(scores),
                            scores_type: buf(scores).dtype,
                            probabilities: at(probabilities),
                            probabilities_stride: stride(probabilities),
                            state: at(state),
                            state_stride: stride(state),
                            rescale: at(rescale),
                            keys,
                            queries,
                            head_dim,
                            mask: mask.map(|m| (m.first_key, m.first_query)),
                            first,
                            scale_bits,
                        },
                        VertexKind::Accumulate {
                            partials,
                            state,
                            rescale,
                            rows,
                            cols,
                            first,
                        } => Instr::Accumulate {
                            partials: at(partials),
                            partials_stride: stride(partials),
                            partials_type: buf(partials).dtype,
                            state: at(state),
                            state_stride: stride(state),
                            rescale: at(rescale),
                            rows,
                            cols,
                            first,
                        },
                        VertexKind::Combine {
                            states,
                            out,
                            rows,
                            cols,
                            scale_bits,
                        } => Instr::Combine {
                            states: states
                                .iter()
                                .map(|o| (operand(o), stride(o.buffer)))
                                .collect(),
                            out: at(out),
                            out_stride: stride(out),
                            rows,
                            cols,
                            scale_bits,
                        },
                    };
                    instrs[v.tile.index()].push(instr);
                }
            }
        }
        for program in &mut instrs {
            program.push(Instr::Sync);
        }
    }
    instrs
        .into_iter()
        .enumerate()
        .map(|(t, instrs)| TileProgram {
            tile: TileId::from_index(t),
            instrs,
        })
        .collect()
}

pub fn verify(code: &TileCode, sel: &Selected, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(code.tiles.len() == target.tiles as usize, || {
        format!(
            "{} tile programs for {} tiles",
            code.tiles.len(),
            target.tiles
        )
    });
    // (phase, sender, cycle) -> ((skip, bytes), receivers).
    type Sends = BTreeMap<(u32, TileId, u32), ((u32, u32), usize)>;
    let mut sends: Sends = BTreeMap::new();
    let mut receives = Vec::new();
    let in_memory = |a: u32, len: u32| {
        a >= target.memory_base && u64::from(a) + u64::from(len) <= u64::from(target.memory_end)
    };
    for p in &code.tiles {
        v.check(p.syncs() == sel.steps.len(), || {
            format!(
                "{}: {} syncs for {} supersteps",
                p.tile,
                p.syncs(),
                sel.steps.len()
            )
        });
        let mut phase = None;
        for i in &p.instrs {
            match i {
                Instr::Exchange { phase: id, .. } => phase = Some(id.0),
                Instr::Send {
                    start,
                    skip,
                    bytes,
                    run,
                    ..
                } => {
                    v.check(in_memory(run.offset, run.end() - run.offset), || {
                        format!("{}: send run {run:?} outside memory", p.tile)
                    });
                    sends.insert(
                        (phase.unwrap_or(u32::MAX), p.tile, *start),
                        ((*skip, *bytes), 0),
                    );
                }
                Instr::Receive {
                    from,
                    sent,
                    skip,
                    bytes,
                    run,
                    ..
                } => {
                    v.check(in_memory(run.offset, run.end() - run.offset), || {
                        format!("{}: receive run {run:?} outside memory", p.tile)
                    });
                    receives.push((
                        phase.unwrap_or(u32::MAX),
                        p.tile,
                        *from,
                        *sent,
                        (*skip, *bytes),
                    ));
                }
                Instr::Amp {
                    a,
                    b,
                    partials,
                    rows,
                    depth,
                    cols,
                    a_stride,
                    b_stride,
                    partials_stride,
                    ..
                } => {
                    for (what, addr, len) in [
                        ("a", a, rows * a_stride),
                        ("b", b, depth * b_stride),
                        ("partials", partials, rows * partials_stride),
                    ] {
                        v.check(in_memory(*addr, len), || {
                            format!(
                                "{}: AMP operand {what} at {addr:#x}+{len} outside memory",
                                p.tile
                            )
                        });
                    }
                    let _ = cols;
                }
                Instr::Epilogue {
                    partials,
                    out,
                    rows,
                    out_stride,
                    ..
                } => {
                    v.check(
                        partials
                            .iter()
                            .all(|&(p, stride)| in_memory(p, rows * stride))
                            && in_memory(*out, rows * out_stride),
                        || format!("{}: epilogue operands outside memory", p.tile),
                    );
                }
                Instr::Softmax {
                    scores,
                    scores_stride,
                    probabilities,
                    probabilities_stride,
                    state,
                    state_stride,
                    keys,
                    head_dim,
                    ..
                } => {
                    v.check(
                        in_memory(*scores, keys * scores_stride)
                            && in_memory(*probabilities, keys * probabilities_stride)
                            && in_memory(*state, (head_dim + 2) * state_stride),
                        || format!("{}: softmax operands outside memory", p.tile),
                    );
                }
                Instr::Accumulate {
                    partials,
                    partials_stride,
                    state,
                    state_stride,
                    rows,
                    ..
                } => {
                    v.check(
                        in_memory(*partials, rows * partials_stride)
                            && in_memory(*state, rows * state_stride),
                        || format!("{}: accumulate operands outside memory", p.tile),
                    );
                }
                Instr::Combine {
                    states,
                    out,
                    out_stride,
                    rows,
                    ..
                } => {
                    v.check(
                        states
                            .iter()
                            .all(|&(s, stride)| in_memory(s, (rows + 2) * stride))
                            && in_memory(*out, rows * out_stride),
                        || format!("{}: combine operands outside memory", p.tile),
                    );
                }
                Instr::Sync => phase = None,
            }
        }
    }
    for (phase, tile, from, sent, bytes) in receives {
        match sends.get_mut(&(phase, from, sent)) {
            Some((b, n)) if *b == bytes => *n += 1,
            _ => v.error(format!("ex{phase} {tile}: receives bytes {}..{} from {from} sent at cycle {sent}, which sends no such thing", bytes.0, bytes.0 + bytes.1)),
        }
    }
    for ((phase, tile, start), (_, n)) in sends {
        v.check(n > 0, || {
            format!("ex{phase} {tile}: send at cycle {start} has no receiver")
        });
    }
    v.finish()
}
