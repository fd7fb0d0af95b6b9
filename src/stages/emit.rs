//! `emit`: selected + exchanges + placement -> `tile_code`.
//!
//! Writes every tile's program with resolved addresses: per superstep, the tile's compute vertices or
//! its part of the exchange phase (its exchange code, whose instructions issue at the schedule's
//! cycles: `lowering`), then a sync; and the host program (`initialize`, `run`). Each exchange step's
//! estimate is its schedule's horizon.
//!
//! Invariants (checked by [`verify`]): every tile has one sync per superstep; exchange instructions
//! lie only inside exchange phases; every send has a receiver and every receive names bytes its sender
//! sends in the same phase; every address a program touches lies in tile memory. When each
//! instruction issues, and so whether each receive listens in time, is the device's to derive.

use crate::exchange::Overheads;
use crate::exchange::check::check;
use crate::ids::{BufferId, TileId};
use crate::ir::{Exchanges, Placement, Selected, Step, TileCode};
use crate::isa::Run;
use crate::isa::{EncodedProgram, HostProgram, HostTransfer, Instr, Receive, Send};
use crate::lowering::tile_programs;
use crate::target::Target;
use crate::verify::Verifier;
use rayon::prelude::*;
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
    #[error(transparent)]
    Lowering(#[from] crate::lowering::LoweringError),
    #[error(
        "the placement has {addresses} addresses for the program's {buffers} buffers: they come from \
         different builds"
    )]
    Placement { addresses: usize, buffers: usize },
    #[error("emit produced invalid tile code:\n{0}")]
    Invalid(String),
}

pub fn emit(
    sel: &Selected,
    exchanges: &Exchanges,
    placement: &Placement,
    target: &Target,
    _cfg: &EmitConfig,
) -> Result<TileCode, EmitError> {
    // Schedules are address-free: validate each against its pattern before binding it to the rows
    // place_storage gave addresses.
    // The phases are checked side by side; the first in order that fails is the error.
    let o = Overheads::of(target);
    let failed = (sel.exchanges.par_iter().zip(&exchanges.phases))
        .map(|(ex, ps)| (ex.id.0, check(&ex.pattern(target), o, &ps.schedule)))
        .find_first(|(_, errors)| !errors.is_empty());
    if let Some((phase, errors)) = failed {
        return Err(EmitError::Schedule {
            phase,
            errors: errors.join("\n"),
        });
    }
    for ex in &sel.exchanges {
        tracing::info!(
            phase = ex.id.0,
            "reused exchange optimization after validating relocated rows"
        );
    }
    if placement.addresses.len() != sel.buffers.len() {
        return Err(EmitError::Placement {
            addresses: placement.addresses.len(),
            buffers: sel.buffers.len(),
        });
    }
    let address = |b: BufferId| placement.addresses[b.index()];
    let tiles = tile_programs(sel, exchanges, target, &address)?;
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

pub fn verify(code: &TileCode, sel: &Selected, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(code.tiles.len() == target.tiles as usize, || {
        format!(
            "{} tile programs for {} tiles",
            code.tiles.len(),
            target.tiles
        )
    });
    // Per (superstep, tile), the kinds of its vertices in order: what the program asks, and what the
    // code has; each list sorted by (superstep, tile), then walked side by side.
    let mut expected: Vec<VertexNames> = Vec::new();
    for (s, step) in sel.steps.iter().enumerate() {
        if let Step::Compute(c) = step {
            let vertices = &sel.compute_sets[*c as usize].vertices;
            let mut names: Vec<(TileId, &'static str)> = vertices
                .iter()
                .map(|vx| (vx.tile, vx.kind.name()))
                .collect();
            // A stable sort: each tile's in the compute set's order.
            names.sort_by_key(|&(tile, _)| tile);
            expected.extend(names.chunk_by(|a, b| a.0 == b.0).map(|same| {
                let names = same.iter().map(|&(_, name)| name).collect();
                ((s, same[0].0), names)
            }));
        }
    }
    // Every tile's program checked on its own, in parallel; the results joined in tile order.
    let mut scans: Vec<TileScan> = code
        .tiles
        .par_iter()
        .map(|p| scan(p, sel.steps.len(), target))
        .collect();
    let mut emitted: Vec<VertexNames> = Vec::new();
    // Each phase's runs of sends and receives: which tile's scan holds them, and where.
    let mut phases: BTreeMap<u32, PhaseTraffic> = BTreeMap::new();
    for (at, scan) in scans.iter_mut().enumerate() {
        v.append(std::mem::take(&mut scan.problems));
        emitted.append(&mut scan.vertices);
        for (phase, range) in runs(&scan.sends, |s| s.0) {
            phases.entry(phase).or_default().sends.push((at, range));
        }
        for (phase, range) in runs(&scan.receives, |r| r.phase) {
            phases.entry(phase).or_default().receives.push((at, range));
        }
    }
    // A malformed program may list one (superstep, tile) twice: its lists joined, as one.
    emitted.sort_by_key(|(key, _)| *key);
    let mut joined: Vec<VertexNames> = Vec::with_capacity(emitted.len());
    for (key, names) in emitted {
        match joined.last_mut() {
            Some((at, have)) if *at == key => have.extend(names),
            _ => joined.push((key, names)),
        }
    }
    let (mut want, mut have) = (expected.iter().peekable(), joined.iter().peekable());
    let none: Vec<&'static str> = Vec::new();
    loop {
        let key = match (want.peek(), have.peek()) {
            (None, None) => break,
            (Some(w), Some(h)) => w.0.min(h.0),
            (Some(w), None) => w.0,
            (None, Some(h)) => h.0,
        };
        let w = want.next_if(|w| w.0 == key).map_or(&none, |w| &w.1);
        let h = have.next_if(|h| h.0 == key).map_or(&none, |h| &h.1);
        v.check(w == h, || {
            format!(
                "{} step{}: vertices {h:?} where the program has {w:?}",
                key.1, key.0
            )
        });
    }
    // Phase by phase, side by side: each receive looked up among its sender's sends in the phase,
    // sorted by the bytes a receive names them by; bytes received count for every send of them.
    // Every receive that names no send is listed (phases in order, receives in tile order), then
    // every send nobody receives.
    // A sender is looked up by its tile id; a program naming a tile beyond the target's (reported
    // by the receives naming it) is no sender.
    let senders = scans.len();
    let matched: Vec<(Vec<String>, Vec<String>)> = (phases.into_iter().collect::<Vec<_>>())
        .into_par_iter()
        .map(|(phase, traffic)| {
            // Each sender's sends in the phase, and where their marks start.
            let mut by_sender: Vec<Option<(&[SendKey], usize)>> = vec![None; senders];
            let mut marks = 0;
            for (at, range) in &traffic.sends {
                let scan = &scans[*at];
                if let Some(sender) = by_sender.get_mut(scan.tile.index()) {
                    *sender = Some((&scan.sends[range.clone()], marks));
                }
                marks += range.len();
            }
            let mut received = vec![false; marks];
            let mut unsent = Vec::new();
            for (at, range) in &traffic.receives {
                for r in &scans[*at].receives[range.clone()] {
                    let (sent, mark) = by_sender
                        .get(r.from.index())
                        .copied()
                        .flatten()
                        .unwrap_or((&[], 0));
                    let first = sent.partition_point(|&(_, bytes)| bytes < r.bytes);
                    let count = sent[first..].partition_point(|&(_, bytes)| bytes == r.bytes);
                    if count == 0 {
                        unsent.push(format!(
                            "ex{} {}: receives bytes {}..{} from {}, which sends no such thing",
                            r.phase,
                            scans[*at].tile,
                            r.bytes.0,
                            u64::from(r.bytes.0) + u64::from(r.bytes.1),
                            r.from,
                        ));
                    }
                    received[mark + first..mark + first + count].fill(true);
                }
            }
            // A send repeated by its sender is listed once.
            let mut unreceived = Vec::new();
            let mut marks = received.iter();
            for (at, range) in &traffic.sends {
                let mut before = None;
                for (&(_, bytes), &received) in
                    scans[*at].sends[range.clone()].iter().zip(&mut marks)
                {
                    let repeated = before.replace(bytes) == Some(bytes);
                    if !received && !repeated {
                        unreceived.push(format!(
                            "ex{phase} {}: its send of bytes {}..{} has no receiver",
                            scans[*at].tile,
                            bytes.0,
                            u64::from(bytes.0) + u64::from(bytes.1)
                        ));
                    }
                }
            }
            (unsent, unreceived)
        })
        .collect();
    let (unsent, unreceived): (Vec<_>, Vec<_>) = matched.into_iter().unzip();
    for problem in unsent.into_iter().chain(unreceived).flatten() {
        v.error(problem);
    }
    v.finish()
}

/// A (superstep, tile) and the kinds of its vertices, in order.
type VertexNames = ((usize, TileId), Vec<&'static str>);

/// One exchange phase's runs of sends and of receives: each the index of the tile scan holding it and
/// its range there.
#[derive(Default)]
struct PhaseTraffic {
    sends: Vec<(usize, std::ops::Range<usize>)>,
    receives: Vec<(usize, std::ops::Range<usize>)>,
}

/// The runs of `items` alike in `phase`, each with its range.
fn runs<T>(
    items: &[T],
    phase: fn(&T) -> u32,
) -> impl Iterator<Item = (u32, std::ops::Range<usize>)> + '_ {
    let mut start = 0;
    items
        .chunk_by(move |a, b| phase(a) == phase(b))
        .map(move |run| {
            let range = start..start + run.len();
            start = range.end;
            (phase(&run[0]), range)
        })
}

/// A send as a receive names it (its tile aside): phase, then `(skip, bytes)`.
type SendKey = (u32, (u32, u32));

/// A receive: the send it names (phase, sender, (skip, bytes)).
#[derive(Clone, Copy)]
struct ReceiveKey {
    phase: u32,
    from: TileId,
    bytes: (u32, u32),
}

/// What one tile's program holds for the cross-tile checks, and its own problems.
struct TileScan {
    tile: TileId,
    problems: Verifier,
    vertices: Vec<VertexNames>,
    /// Each send, sorted: a phase's together.
    sends: Vec<SendKey>,
    /// Each receive, a phase's together, in program order within it.
    receives: Vec<ReceiveKey>,
}

fn scan(p: &EncodedProgram, steps: usize, target: &Target) -> TileScan {
    let mut v = Verifier::default();
    let (mut sends, mut receives) = (Vec::new(), Vec::new());
    let mut vertices: Vec<VertexNames> = Vec::new();
    let (mut phase, mut step) = (None, 0);
    let tile = p.tile();
    for i in p.instrs() {
        // An exchange instruction: inside an exchange phase, its run in memory.
        let exchange = |v: &mut Verifier, what: &dyn std::fmt::Display, run: Option<&Run>| {
            let what = || what.to_string().trim().to_string();
            if let Some(run) = run {
                v.check(
                    run.end()
                        .is_some_and(|end| in_memory(target, run.offset, end - run.offset)),
                    || format!("{tile}: `{}`: run {run:?} outside memory", what()),
                );
            }
            v.check(phase.is_some(), || {
                format!("{tile} step{step}: `{}` outside an exchange phase", what())
            });
        };
        let send_key = |s: &Send| (phase.unwrap_or(u32::MAX), (s.skip, s.bytes));
        let receive_key = |r: &Receive| ReceiveKey {
            phase: phase.unwrap_or(u32::MAX),
            from: r.from,
            bytes: (r.skip, r.bytes),
        };
        match &i {
            Instr::Exchange { phase: id } => phase = Some(id.0),
            Instr::Send(s) => {
                exchange(&mut v, s, Some(&s.run));
                sends.push(send_key(s));
            }
            Instr::Receive(r) => {
                exchange(&mut v, r, Some(&r.run));
                receives.push(receive_key(r));
            }
            Instr::SendReceive(pair) => {
                let (s, r) = &**pair;
                exchange(&mut v, s, Some(&s.run));
                exchange(&mut v, r, Some(&r.run));
                sends.push(send_key(s));
                receives.push(receive_key(r));
            }
            Instr::Delay { .. } => exchange(&mut v, &i, None),
            Instr::Vertex(vertex) => {
                match vertices.last_mut() {
                    Some((key, names)) if *key == (step, tile) => names.push(vertex.name()),
                    _ => vertices.push(((step, tile), vec![vertex.name()])),
                }
                for u in vertex.operands() {
                    let len = u.rows * u.operand.stride;
                    v.check(in_memory(target, u.operand.address, len), || {
                        format!(
                            "{tile}: {} operand {} at {:#x}+{len} outside memory",
                            vertex.name(),
                            u.role,
                            u.operand.address
                        )
                    });
                }
            }
            Instr::Sync => (phase, step) = (None, step + 1),
        }
    }
    // `step` counted the syncs; that count, the telling one, comes first.
    let mut problems = Verifier::default();
    problems.check(step == steps, || {
        format!("{tile}: {step} syncs for {steps} supersteps")
    });
    problems.append(v);
    // A phase's sends and receives together (a program names each phase once, in order, unless
    // it is malformed); sends by their bytes within it.
    sends.sort_unstable();
    receives.sort_by_key(|r: &ReceiveKey| r.phase);
    TileScan {
        tile,
        problems,
        vertices,
        sends,
        receives,
    }
}

/// Whether `len` bytes from `a` lie in tile memory.
fn in_memory(target: &Target, a: u32, len: u32) -> bool {
    a >= target.memory_base && u64::from(a) + u64::from(len) <= u64::from(target.memory_end)
}
