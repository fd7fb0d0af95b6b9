//! The simulated device: executes a package bit-exactly on 1472 tile memories and counts cycles with the
//! reference cost model of the package's target (`Target::amp_cycles`, `Target::vector_cycles`, the
//! exchange rules, the sync cost): the same functions the compiler's estimates use.
//!
//! It runs what was emitted: it loads each tile's code image into the tile's memory and decodes the
//! program from there; streams the host's data in (`initialize`, `run`) and results out; executes each
//! superstep on every tile (compute vertices, or the exchange phase cycle by cycle in intervals), then
//! the sync. It refuses what real hardware would get wrong, as a [`Fault`] naming tile, superstep, cycle
//! and buffer: an access outside memory; a misaligned AMP operand; AMP weights or partials outside
//! interleaved memory; an AMP whose input and output share a memory element; a read of memory never
//! written; a write into a buffer still live; a receiver listening to two senders at once, or to a sender
//! that sends nothing then; a tile sending two words in one cycle.
//!
//! Cycles: a superstep takes its slowest tile's compute, or the exchange phase's last arrival; every
//! superstep ends in a sync of `target.sync_cycles`. Host streaming is timed at the host-link rate,
//! apart from device cycles.

mod memory;

use crate::ids::TileId;
use crate::ir::Package;
use crate::ir::{DType, ValueRole};
use crate::isa::Run;
use crate::isa::{
    Accumulate, Amp, Combine, Epilogue, HostTransfer, Instr, Placed, Softmax, TileProgram,
    VertexKind,
};
use crate::numerics;
use crate::target::Target;
use half::f16;
pub use memory::{Matrix, TileMemory};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A compiler bug caught by the device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{tile} step{step} cycle {cycle}: {message}")]
pub struct Fault {
    pub tile: TileId,
    pub step: usize,
    pub cycle: u64,
    pub message: String,
}

struct Tile {
    memory: TileMemory,
    /// The program, split into supersteps at its syncs.
    steps: Vec<Vec<Instr>>,
}

pub struct Device {
    target: Target,
    tiles: Vec<Tile>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepProfile {
    pub kind: String,
    pub estimated_cycles: u64,
    pub cycles: u64,
    /// Per tile: cycles busy in this step (its compute, or until its last send leaves or last word
    /// arrives); the rest of the step, and the sync, it waits.
    pub tile_busy: Vec<u32>,
}

/// What one `run` did: `execution.ipuprofile`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub workload: String,
    pub target: String,
    pub clock_khz: u64,
    /// Tiles per column of the chip (tile `t` sits in column `t / tiles_per_column`).
    pub tiles_per_column: u32,
    /// Device cycles of one `run`: every superstep and its sync.
    pub cycles: u64,
    /// The busiest tile's own cycles: its compute and exchange activity plus the syncs, without waiting
    /// for other tiles. `cycles - minimum_tile_cycles` is time lost to imbalance.
    pub minimum_tile_cycles: u64,
    pub sync_cycles: u64,
    pub steps: Vec<StepProfile>,
    /// Per tile: bytes in use in standard and in interleaved memory (up to the highest written byte).
    pub memory: Vec<(u32, u32)>,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub weight_bytes: u64,
}

/// The host's data for every input and weight value of a graph (empty for the others).
pub fn host_data(graph: &crate::ir::Graph) -> Vec<Vec<f16>> {
    graph
        .values
        .par_iter()
        .map(|v| match v.role {
            ValueRole::Input | ValueRole::Weight => numerics::generate(v, graph.seed),
            _ => Vec::new(),
        })
        .collect()
}

fn fault(tile: usize, step: usize, cycle: u64, message: String) -> Fault {
    Fault {
        tile: TileId::from_index(tile),
        step,
        cycle,
        message,
    }
}

impl Device {
    /// Loads the application: code images into tile memories, programs decoded from there.
    pub fn load(package: &Package) -> Result<Device, Fault> {
        let target = package.target.clone();
        if target.tiles == 0
            || target.memory_base >= target.memory_end
            || !(target.memory_base..=target.memory_end).contains(&target.interleaved_base)
        {
            return Err(fault(
                0,
                0,
                0,
                format!("package names an impossible target: {target:?}"),
            ));
        }
        validate_host(package)?;
        if package.tiles.len() != target.tiles as usize {
            return Err(fault(
                0,
                0,
                0,
                format!(
                    "package has {} tile images for {} tiles",
                    package.tiles.len(),
                    target.tiles
                ),
            ));
        }
        let size = (target.memory_end - target.memory_base) as usize;
        let tiles: Vec<Tile> = package
            .tiles
            .par_iter()
            .enumerate()
            .map(|(t, image)| {
                let mut memory = TileMemory::new(target.memory_base, size, image.buffers.clone());
                memory
                    .write(image.code_address, &image.code, None, "code image")
                    .map_err(|m| fault(t, 0, 0, m))?;
                let code = memory
                    .read(image.code_address, image.code.len() as u32, "code")
                    .map_err(|m| fault(t, 0, 0, m))?;
                let program = TileProgram::decode(code)
                    .map_err(|e| fault(t, 0, 0, format!("code does not decode: {e}")))?;
                let mut steps = vec![Vec::new()];
                for i in program.instrs {
                    if matches!(i, Instr::Sync) {
                        steps.push(Vec::new());
                    } else {
                        steps.last_mut().expect("non-empty").push(i);
                    }
                }
                steps.pop();
                Ok(Tile { memory, steps })
            })
            .collect::<Vec<Result<_, Fault>>>()
            .into_iter()
            .collect::<Result<_, _>>()?;
        let n = tiles[0].steps.len();
        if let Some(t) = tiles.iter().position(|t| t.steps.len() != n) {
            return Err(fault(
                t,
                0,
                0,
                format!("{} supersteps where tile0 has {n}", tiles[t].steps.len()),
            ));
        }
        Ok(Device { target, tiles })
    }

    pub fn supersteps(&self) -> usize {
        self.tiles[0].steps.len()
    }

    /// Host writes: copies rectangles of host values into tile memory.
    fn stream_in(
        &mut self,
        transfers: &[HostTransfer],
        host: &[Vec<f16>],
        graph: &crate::ir::Graph,
    ) -> Result<u64, Fault> {
        let mut bytes = 0;
        for t in transfers {
            let v = graph.value(t.value);
            let data = &host[t.value.index()];
            let memory = &mut self.tiles[t.tile.index()].memory;
            for (i, (elements, at)) in t.stored_rows(v.cols).enumerate() {
                let raw: Vec<u8> = elements
                    .iter()
                    .flat_map(|&e| data[e].to_le_bytes())
                    .collect();
                memory
                    .write(
                        at,
                        &raw,
                        None,
                        &format!("host write of {} stored row {i}", v.name),
                    )
                    .map_err(|m| fault(t.tile.index(), 0, 0, m))?;
                bytes += raw.len() as u64;
            }
        }
        Ok(bytes)
    }

    /// `initialize`: streams the weights in.
    pub fn initialize(&mut self, package: &Package, host: &[Vec<f16>]) -> Result<u64, Fault> {
        self.stream_in(&package.host.initialize, host, &package.graph)
    }

    /// `run`: streams the inputs in, executes every superstep, streams the output out.
    pub fn run(
        &mut self,
        package: &Package,
        host: &[Vec<f16>],
    ) -> Result<(Execution, Vec<f16>), Fault> {
        let input_bytes = self.stream_in(&package.host.run_inputs, host, &package.graph)?;
        let weight_bytes = package
            .host
            .initialize
            .iter()
            .map(|t| t.rect.elements() * 2)
            .sum();
        let mut steps = Vec::new();
        for s in 0..self.supersteps() {
            let exchange = self.tiles.iter().any(|t| {
                t.steps[s]
                    .iter()
                    .any(|i| matches!(i, Instr::Exchange { .. }))
            });
            let busy = if exchange {
                self.exchange(s)?
            } else {
                self.compute(s)?
            };
            let (kind, estimated) = package.steps.get(s).cloned().unwrap_or_default();
            let cycles = u64::from(busy.iter().copied().max().unwrap_or(0));
            steps.push(StepProfile {
                kind,
                estimated_cycles: estimated,
                cycles,
                tile_busy: busy,
            });
        }
        let sync_cycles = self.target.sync_cycles * steps.len() as u64;
        let cycles = steps.iter().map(|s| s.cycles).sum::<u64>() + sync_cycles;
        let minimum_tile_cycles = (0..self.tiles.len())
            .map(|t| steps.iter().map(|s| u64::from(s.tile_busy[t])).sum::<u64>())
            .max()
            .unwrap_or(0)
            + sync_cycles;
        let output = self.stream_out(package)?;
        let output_bytes = output.len() as u64 * 2;
        let memory = self
            .tiles
            .iter()
            .map(|t| {
                let (standard_end, interleaved_end) =
                    t.memory.used_ends(self.target.interleaved_base);
                (
                    standard_end - self.target.memory_base,
                    interleaved_end - self.target.interleaved_base,
                )
            })
            .collect();
        let execution = Execution {
            workload: package.workload.clone(),
            target: self.target.name.clone(),
            clock_khz: self.target.clock_khz,
            tiles_per_column: self.target.tiles / self.target.columns,
            cycles,
            minimum_tile_cycles,
            sync_cycles,
            steps,
            memory,
            input_bytes,
            output_bytes,
            weight_bytes,
        };
        Ok((execution, output))
    }

    fn stream_out(&self, package: &Package) -> Result<Vec<f16>, Fault> {
        let graph = &package.graph;
        let Some(out) = graph.values.iter().find(|v| v.role == ValueRole::Output) else {
            return Ok(Vec::new());
        };
        let mut data = vec![f16::NAN; out.elements() as usize];
        let step = self.supersteps();
        for t in &package.host.run_outputs {
            let memory = &self.tiles[t.tile.index()].memory;
            for (i, (elements, at)) in t.stored_rows(out.cols).enumerate() {
                let src = memory
                    .read(
                        at,
                        elements.len() as u32 * 2,
                        &format!("host read of {} stored row {i}", out.name),
                    )
                    .map_err(|m| fault(t.tile.index(), step, 0, m))?;
                for (&e, s) in elements.iter().zip(src.chunks_exact(2)) {
                    data[e] = f16::from_le_bytes([s[0], s[1]]);
                }
            }
        }
        Ok(data)
    }

    fn compute(&mut self, step: usize) -> Result<Vec<u32>, Fault> {
        let target = &self.target;
        self.tiles
            .par_iter_mut()
            .enumerate()
            .map(|(t, tile)| {
                let mut cycles = 0u64;
                for instr in &tile.steps[step] {
                    cycles += execute_vertex(target, &mut tile.memory, instr, step as u32)
                        .map_err(|m| fault(t, step, cycles, m))?;
                }
                Ok(cycles as u32)
            })
            .collect::<Vec<Result<u32, Fault>>>()
            .into_iter()
            .collect()
    }

    fn exchange(&mut self, step: usize) -> Result<Vec<u32>, Fault> {
        let target = &self.target;
        let transit = u64::from(target.exchange_transit_cycles);
        let switch = u64::from(target.mux_switch_cycles);
        // Cycles to move `bytes`: a word per cycle, two over a supertile pair's shared bus.
        let cycles = |bytes: u32, wide: bool| {
            target
                .exchange_words(u64::from(bytes))
                .div_ceil(1 + u64::from(wide))
        };
        let mate = |t: usize| t ^ 1;
        // Sends by (tile, cycle), checked for overlap per tile; wide sends also against the pair mate.
        let mut sends: BTreeMap<(usize, u32), Sent> = BTreeMap::new();
        let mut send_intervals: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.tiles.len()];
        let mut horizon = None;
        let mut busy = vec![0u32; self.tiles.len()];
        for (t, tile) in self.tiles.iter().enumerate() {
            let mut last_end = 0u64;
            for instr in &tile.steps[step] {
                match instr {
                    Instr::Exchange { horizon: h, .. } => {
                        if *horizon.get_or_insert(*h) != *h {
                            return Err(fault(
                                t,
                                step,
                                0,
                                format!("exchange horizon {h} differs from other tiles'"),
                            ));
                        }
                    }
                    Instr::Send {
                        start,
                        skip,
                        bytes,
                        run,
                        wide,
                    } => {
                        if u64::from(*start) < last_end {
                            return Err(fault(
                                t,
                                step,
                                u64::from(*start),
                                format!(
                                    "sends two words in one cycle: the send at cycle {start} overlaps the previous one, which lasts until {last_end}"
                                ),
                            ));
                        }
                        last_end = u64::from(*start) + cycles(*bytes, *wide);
                        busy[t] = busy[t].max((last_end + transit) as u32);
                        send_intervals[t].push((u64::from(*start), last_end));
                        sends.insert(
                            (t, *start),
                            Sent {
                                skip: *skip,
                                bytes: *bytes,
                                run: *run,
                                wide: *wide,
                            },
                        );
                    }
                    Instr::Receive { .. } => {}
                    other => {
                        return Err(fault(
                            t,
                            step,
                            0,
                            format!("{other:?} inside an exchange phase"),
                        ));
                    }
                }
            }
        }
        for (&(t, start), sent) in &sends {
            if !sent.wide || mate(t) >= self.tiles.len() {
                continue;
            }
            let end = u64::from(start) + cycles(sent.bytes, true);
            if let Some(&(a, b)) = send_intervals[mate(t)]
                .iter()
                .find(|&&(a, b)| a < end && u64::from(start) < b)
            {
                return Err(fault(
                    t,
                    step,
                    u64::from(start),
                    format!(
                        "wide send over the supertile bus at cycles {start}..{end} while its pair mate tile{} sends at {a}..{b}",
                        mate(t)
                    ),
                ));
            }
        }
        // Receives: each must listen to a real send, one sender at a time.
        let mut deliveries: Vec<Vec<Delivery>> = vec![Vec::new(); self.tiles.len()];
        let mut receive_intervals: Vec<Vec<ReceiveSpan>> = vec![Vec::new(); self.tiles.len()];
        for (t, tile) in self.tiles.iter().enumerate() {
            let mut listening: Option<(u64, TileId)> = None;
            for instr in &tile.steps[step] {
                let Instr::Receive {
                    switch: sw,
                    from,
                    sent,
                    skip,
                    bytes,
                    run,
                    wide,
                } = instr
                else {
                    continue;
                };
                let cycle = u64::from(*sent) + transit;
                if let Some((until, previous)) = listening
                    && u64::from(*sw) < until
                {
                    return Err(fault(
                        t,
                        step,
                        u64::from(*sw),
                        format!(
                            "two senders reach this tile at once: it switches to {from} at cycle {sw} while {previous}'s data arrives until cycle {until} (receive into {})",
                            tile.memory.name(run.offset)
                        ),
                    ));
                }
                let Some(s) = sends.get(&(from.index(), *sent)) else {
                    return Err(fault(
                        t,
                        step,
                        cycle,
                        format!(
                            "listens to {from} for data sent at cycle {sent}, but {from} sends nothing then: data meant for this tile arrives while it listens elsewhere (receive into {})",
                            tile.memory.name(run.offset)
                        ),
                    ));
                };
                if (s.skip, s.bytes) != (*skip, *bytes) {
                    return Err(fault(
                        t,
                        step,
                        cycle,
                        format!(
                            "expects bytes {skip}..{} from {from}, which sends bytes {}..{}",
                            skip + bytes,
                            s.skip,
                            s.skip + s.bytes
                        ),
                    ));
                }
                if s.wide != *wide {
                    return Err(fault(
                        t,
                        step,
                        cycle,
                        format!(
                            "receives at {} B/cycle what {from} sends at {} B/cycle",
                            if *wide { 8 } else { 4 },
                            if s.wide { 8 } else { 4 }
                        ),
                    ));
                }
                if u64::from(*sw) + switch > cycle {
                    return Err(fault(
                        t,
                        step,
                        u64::from(*sw),
                        format!(
                            "mux switch to {from} at cycle {sw} comes after its data (cycle {cycle})"
                        ),
                    ));
                }
                let until = cycle + cycles(*bytes, *wide);
                listening = Some((until, *from));
                busy[t] = busy[t].max(until as u32);
                if let Some(h) = horizon
                    && until > u64::from(h)
                {
                    return Err(fault(
                        t,
                        step,
                        until,
                        format!("data from {from} arrives after the phase's horizon {h}"),
                    ));
                }
                receive_intervals[t].push((u64::from(*sw), until, from.index(), *sent, *wide));
                deliveries[t].push(Delivery {
                    from: from.index(),
                    cycle,
                    source: s.run,
                    destination: *run,
                    skip: *skip,
                    bytes: *bytes,
                });
            }
        }
        // A wide receive takes the pair's shared bus: the mate must not receive other data meanwhile.
        for (t, intervals) in receive_intervals.iter().enumerate() {
            for &(a, b, from, sent, wide) in intervals {
                if !wide || mate(t) >= self.tiles.len() {
                    continue;
                }
                let clash = receive_intervals[mate(t)]
                    .iter()
                    .find(|&&(c, d, f2, s2, _)| c < b && a < d && (f2, s2) != (from, sent));
                if let Some(&(c, d, f2, _, _)) = clash {
                    return Err(fault(
                        t,
                        step,
                        a,
                        format!(
                            "wide receive over the supertile bus at cycles {a}..{b} while its pair mate tile{} receives other data from tile{f2} at {c}..{d}",
                            mate(t)
                        ),
                    ));
                }
            }
        }
        // Move the data: read every source, then write every destination.
        let tiles = &self.tiles;
        let payloads: Vec<Vec<Vec<u8>>> = deliveries
            .par_iter()
            .map(|list| {
                list.iter()
                    .map(|d| {
                        let memory = &tiles[d.from].memory;
                        let mut out = Vec::with_capacity(d.bytes as usize);
                        for (at, len) in window(&d.source, d.skip, d.bytes)
                            .map_err(|m| fault(d.from, step, d.cycle, m))?
                        {
                            out.extend_from_slice(
                                memory
                                    .read(at, len, "exchange send")
                                    .map_err(|m| fault(d.from, step, d.cycle, m))?,
                            );
                        }
                        Ok(out)
                    })
                    .collect::<Result<_, Fault>>()
            })
            .collect::<Vec<Result<_, _>>>()
            .into_iter()
            .collect::<Result<_, _>>()?;
        // Faults are collected per tile and the lowest tile's is reported, whatever the threads did.
        self.tiles
            .par_iter_mut()
            .zip(deliveries.par_iter().zip(payloads.par_iter()))
            .enumerate()
            .map(|(t, (tile, (list, data)))| {
                for (d, bytes) in list.iter().zip(data) {
                    let mut rest = bytes.as_slice();
                    for (at, len) in window(&d.destination, d.skip, d.bytes)
                        .map_err(|m| fault(t, step, d.cycle, m))?
                    {
                        let (piece, tail) = rest.split_at(len as usize);
                        tile.memory
                            .write(at, piece, Some(step as u32), "exchange receive")
                            .map_err(|m| fault(t, step, d.cycle, m))?;
                        rest = tail;
                    }
                }
                Ok(())
            })
            .collect::<Vec<Result<(), Fault>>>()
            .into_iter()
            .collect::<Result<(), Fault>>()?;
        Ok(busy)
    }
}

/// Host transfers must name real tiles, values and rectangles: a package is data and may be damaged
/// behind a valid header hash.
fn validate_host(package: &Package) -> Result<(), Fault> {
    let host = &package.host;
    for t in host
        .initialize
        .iter()
        .chain(&host.run_inputs)
        .chain(&host.run_outputs)
    {
        let tile = t.tile.index();
        let value = package.graph.values.get(t.value.index());
        let ok = tile < package.target.tiles as usize
            && value.is_some_and(|v| {
                t.rect.row0 < t.rect.row1
                    && t.rect.col0 < t.rect.col1
                    && t.rect.row1 <= v.rows
                    && t.rect.col1 <= v.cols
            })
            && t.stride
                >= 2 * if t.transposed {
                    t.rect.rows()
                } else {
                    t.rect.cols()
                };
        if !ok {
            return Err(fault(
                tile.min(package.target.tiles as usize),
                0,
                0,
                format!(
                    "host transfer of {} {} to {} (stride {}) does not fit its value or the chip",
                    t.value, t.rect, t.tile, t.stride
                ),
            ));
        }
    }
    Ok(())
}

/// A receive's busy cycles (switch to last arrival), its sender and send cycle, and whether it is wide.
type ReceiveSpan = (u64, u64, usize, u32, bool);

/// A send as receivers look it up.
#[derive(Clone, Copy)]
struct Sent {
    skip: u32,
    bytes: u32,
    run: Run,
    wide: bool,
}

/// One piece of an exchange as the receiver sees it: bytes `skip..skip+bytes` of the stream read from
/// `source` on tile `from`, written to the same bytes of the stream of `destination`.
#[derive(Clone, Copy)]
struct Delivery {
    from: usize,
    cycle: u64,
    source: Run,
    destination: Run,
    skip: u32,
    bytes: u32,
}

fn window(
    run: &Run,
    skip: u32,
    bytes: u32,
) -> Result<impl Iterator<Item = (u32, u32)> + '_, String> {
    if skip + bytes > run.total() {
        return Err(format!(
            "bytes {skip}..{} lie beyond the {}-byte run at {:#x}",
            skip + bytes,
            run.total(),
            run.offset
        ));
    }
    Ok(run.window(skip, bytes))
}

/// Executes one compute instruction at superstep `step`; returns its cycles.
fn execute_vertex(
    target: &Target,
    memory: &mut TileMemory,
    instr: &Instr,
    step: u32,
) -> Result<u64, String> {
    let Instr::Vertex(vertex) = instr else {
        return Err(format!("{instr:?} inside a compute step"));
    };
    match vertex {
        VertexKind::Amp(v) => {
            let Amp {
                rows, depth, cols, ..
            } = *v;
            expect(&v.a, DType::F16, "AMP input a")?;
            expect(&v.b, DType::F16, "AMP weights b")?;
            let (a, a_stride) = (v.a.address, v.a.stride);
            let (b, b_stride) = (v.b.address, v.b.stride);
            let (partials, partials_stride) = (v.partials.address, v.partials.stride);
            let partials_type = v.partials.dtype;
            // Every row is loaded or stored on its own: base and stride keep each row aligned.
            for (what, addr, stride, align) in [
                ("AMP input a", a, a_stride, 8),
                ("AMP weights b (128-bit loads)", b, b_stride, 16),
                ("AMP partials", partials, partials_stride, 16),
            ] {
                check_alignment(addr, align, what)?;
                check_alignment(stride, align, &format!("{what} row stride"))?;
            }
            for (what, addr) in [("weights b (128-bit loads)", b), ("partials", partials)] {
                if !target.is_interleaved(addr) {
                    return Err(format!(
                        "AMP {what} at {} outside interleaved memory (from {:#x})",
                        memory.name(addr),
                        target.interleaved_base
                    ));
                }
            }
            let last = |addr: u32, rows: u32, stride: u32, row_bytes: u32| {
                addr + (rows.max(1) - 1) * stride + row_bytes - 1
            };
            let out = (
                target.memory_element(partials),
                target.memory_element(last(
                    partials,
                    rows,
                    partials_stride,
                    cols * partials_type.bytes(),
                )),
            );
            for (what, addr, end) in [
                ("a", a, last(a, rows, a_stride, depth * 2)),
                ("b", b, last(b, depth, b_stride, cols * 2)),
            ] {
                let (e0, e1) = (target.memory_element(addr), target.memory_element(end));
                if e0 <= out.1 && out.0 <= e1 {
                    return Err(format!(
                        "AMP input {what} at {} shares memory element {} with its partials at {}",
                        memory.name(addr),
                        e0.max(out.0),
                        memory.name(partials)
                    ));
                }
            }
            let av = memory.load(
                &Matrix {
                    addr: a,
                    stride: a_stride,
                    rows,
                    cols: depth,
                    dtype: DType::F16,
                },
                "AMP input a",
            )?;
            let bv = memory.load(
                &Matrix {
                    addr: b,
                    stride: b_stride,
                    rows: depth,
                    cols,
                    dtype: DType::F16,
                },
                "AMP weights b",
            )?;
            let (d, c) = (depth as usize, cols as usize);
            let block = target.amp_block_depth as usize;
            let padded = d.next_multiple_of(block);
            let mut ap = vec![0f32; rows as usize * padded];
            for r in 0..rows as usize {
                ap[r * padded..r * padded + d].copy_from_slice(&av[r * d..(r + 1) * d]);
            }
            let mut bp = bv;
            bp.resize(padded * c, 0.0);
            let mut out = vec![0f32; rows as usize * c];
            numerics::amp_matmul(
                &ap,
                padded,
                &bp,
                c,
                &mut out,
                c,
                rows as usize,
                padded,
                c,
                block,
                partials_type,
            );
            let m = Matrix {
                addr: partials,
                stride: partials_stride,
                rows,
                cols,
                dtype: partials_type,
            };
            memory.store(&m, &out, step, "AMP partials")?;
            Ok(target.amp_cycles(rows, depth, cols, partials_type))
        }
        VertexKind::Epilogue(v) => {
            let Epilogue {
                rows, cols, gelu, ..
            } = *v;
            let (out, out_stride) = (v.out.address, v.out.stride);
            expect(&v.out, DType::F16, "epilogue output")?;
            let mut p = vec![0f32; rows as usize * cols as usize];
            let Some(partials_type) = v.partials.first().map(|p| p.dtype) else {
                return Err("epilogue of no partials".to_string());
            };
            for part in &v.partials {
                expect(part, partials_type, "epilogue partials")?;
                let part = memory.load(
                    &Matrix {
                        addr: part.address,
                        stride: part.stride,
                        rows,
                        cols,
                        dtype: partials_type,
                    },
                    "epilogue partials",
                )?;
                for (sum, x) in p.iter_mut().zip(part) {
                    *sum += x;
                }
            }
            let bv = match &v.bias {
                Some(bias) => Some(memory.load(
                    &Matrix {
                        addr: expect(bias, DType::F16, "epilogue bias")?,
                        stride: bias.stride,
                        rows: 1,
                        cols,
                        dtype: DType::F16,
                    },
                    "epilogue bias",
                )?),
                None => None,
            };
            let result: Vec<f32> = p
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    numerics::epilogue(v, bv.as_ref().map(|b| b[i % cols as usize]), gelu).to_f32()
                })
                .collect();
            memory.store(
                &Matrix {
                    addr: out,
                    stride: out_stride,
                    rows,
                    cols,
                    dtype: DType::F16,
                },
                &result,
                step,
                "epilogue output",
            )?;
            let (ops, transcendentals) =
                Target::epilogue_ops(partials_type, v.partials.len() as u32, bv.is_some(), gelu);
            Ok(target.vector_cycles(
                u64::from(rows) * u64::from(cols),
                DType::F16,
                ops,
                transcendentals,
            ))
        }
        VertexKind::Softmax(v) => {
            let Softmax {
                keys,
                queries,
                head_dim,
                mask,
                first,
                scale_bits,
                ..
            } = *v;
            let (scores, scores_stride, scores_type) =
                (v.scores.address, v.scores.stride, v.scores.dtype);
            let probabilities = expect(&v.probabilities, DType::F16, "softmax probabilities")?;
            let probabilities_stride = v.probabilities.stride;
            let state = expect(&v.state, DType::F32, "softmax state")?;
            let state_stride = v.state.stride;
            let rescale = expect(&v.rescale, DType::F32, "softmax rescale")?;
            let mask = mask.map(|m| (m.first_key, m.first_query));
            let matrix = |addr, stride, rows, dtype| Matrix {
                addr,
                stride,
                rows,
                cols: queries,
                dtype,
            };
            let stats = matrix(state + head_dim * state_stride, state_stride, 2, DType::F32);
            let s = memory.load(
                &matrix(scores, scores_stride, keys, scores_type),
                "softmax scores",
            )?;
            let q = queries as usize;
            let (mut max, mut sum) = if first {
                (vec![0f32; q], vec![0f32; q])
            } else {
                let m = memory.load(&stats, "softmax running max and sum")?;
                (m[..q].to_vec(), m[q..].to_vec())
            };
            let (p, r) = numerics::softmax_block(
                &s,
                keys as usize,
                q,
                f32::from_bits(scale_bits),
                mask,
                first,
                &mut max,
                &mut sum,
            );
            let p_matrix = matrix(probabilities, probabilities_stride, keys, DType::F16);
            memory.store(&p_matrix, &p, step, "softmax probabilities")?;
            memory.store(
                &matrix(rescale, queries * 4, 1, DType::F32),
                &r,
                step,
                "softmax rescale",
            )?;
            max.extend_from_slice(&sum);
            memory.store(&stats, &max, step, "softmax running max and sum")?;
            Ok(target.softmax_cycles(keys, queries, scores_type, mask.is_some()))
        }
        VertexKind::Accumulate(v) => {
            let Accumulate {
                rows, cols, first, ..
            } = *v;
            let (partials, partials_stride, partials_type) =
                (v.partials.address, v.partials.stride, v.partials.dtype);
            let state = expect(&v.state, DType::F32, "accumulator")?;
            let state_stride = v.state.stride;
            let rescale = expect(&v.rescale, DType::F32, "accumulate rescale")?;
            let matrix = |addr, stride, rows, dtype| Matrix {
                addr,
                stride,
                rows,
                cols,
                dtype,
            };
            let p = memory.load(
                &matrix(partials, partials_stride, rows, partials_type),
                "accumulate partials",
            )?;
            let acc_matrix = matrix(state, state_stride, rows, DType::F32);
            let acc = if first {
                p
            } else {
                let r = memory.load(
                    &matrix(rescale, cols * 4, 1, DType::F32),
                    "accumulate rescale",
                )?;
                let acc = memory.load(&acc_matrix, "accumulator")?;
                acc.iter()
                    .zip(&p)
                    .enumerate()
                    .map(|(i, (a, x))| a * r[i % cols as usize] + x)
                    .collect()
            };
            memory.store(&acc_matrix, &acc, step, "accumulator")?;
            Ok(target.accumulate_cycles(u64::from(rows) * u64::from(cols), first))
        }
        VertexKind::Combine(v) => {
            let Combine {
                rows,
                cols,
                scale_bits,
                ..
            } = *v;
            let out = expect(&v.out, DType::F16, "attention output")?;
            let out_stride = v.out.stride;
            let states = &v.states;
            let parts = states
                .iter()
                .map(|s| {
                    memory.load(
                        &Matrix {
                            addr: expect(s, DType::F32, "flash state")?,
                            stride: s.stride,
                            rows: rows + 2,
                            cols,
                            dtype: DType::F32,
                        },
                        "flash state",
                    )
                })
                .collect::<Result<Vec<_>, String>>()?;
            if parts.is_empty() {
                return Err("combine of no flash state".to_string());
            }
            let o = numerics::combine(
                &parts,
                rows as usize,
                cols as usize,
                f32::from_bits(scale_bits),
            );
            let m = Matrix {
                addr: out,
                stride: out_stride,
                rows,
                cols,
                dtype: DType::F16,
            };
            memory.store(&m, &o, step, "attention output")?;
            Ok(target.combine_cycles(states.len() as u32, u64::from(rows) * u64::from(cols), cols))
        }
    }
}

/// The operand's address, when its element type is the one the vertex reads or writes there.
fn expect(operand: &Placed, dtype: DType, what: &str) -> Result<u32, String> {
    if operand.dtype != dtype {
        return Err(format!(
            "{what} at {:#x} is {}, where the vertex takes {dtype}",
            operand.address, operand.dtype
        ));
    }
    Ok(operand.address)
}

fn check_alignment(value: u32, align: u32, what: &str) -> Result<(), String> {
    if !value.is_multiple_of(align) {
        return Err(format!("{what} {value:#x} is not {align}-byte aligned"));
    }
    Ok(())
}
