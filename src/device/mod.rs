//! The simulated device: executes a package bit-exactly on 1472 tile memories and counts cycles with the
//! reference cost model of the package's target.
//!
//! It runs what was emitted: it loads each tile's code image into the tile's memory and decodes the
//! program from there; streams the host's data in (`initialize`, `run`) and results out; executes each
//! superstep on every tile (compute vertices, or the exchange phase cycle-accurately in intervals), then
//! the sync. It refuses what real hardware would get wrong: accesses outside memory, misaligned or
//! non-interleaved AMP operands, an AMP whose input and output share a memory element, a receiver
//! listening to two senders at once or to a sender that sends nothing then, sends that overlap. Each
//! refusal is a [`Fault`] naming tile, step and cycle.
//!
//! Cycles: a superstep takes its slowest tile's compute, or the exchange phase's last arrival; every
//! superstep ends in a sync of `target.sync_cycles`. Host streaming is timed at the host-link rate,
//! apart from device cycles.

use crate::ids::TileId;
use crate::ir::{DType, ValueRole};
use crate::isa::{HostTransfer, Instr, TileProgram};
use crate::numerics;
use crate::stages::build_images::Package;
use crate::stages::plan_exchange_storage::Run;
use crate::target::Target;
use half::f16;
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
    memory: Vec<u8>,
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
    /// Per tile: cycles busy in this step (compute, or until its last send or arrival).
    pub tile_busy: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// Device cycles of one `run`: every superstep and its sync.
    pub cycles: u64,
    /// The busiest tile's own cycles: its compute and exchange activity plus the syncs, without waiting
    /// for other tiles. `cycles - minimum_tile_cycles` is time lost to imbalance.
    pub minimum_tile_cycles: u64,
    pub steps: Vec<StepProfile>,
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
        let size = (target.memory_end - target.memory_base) as usize;
        let tiles: Vec<Tile> = package
            .tiles
            .par_iter()
            .enumerate()
            .map(|(t, image)| {
                let mut memory = vec![0u8; size];
                let start = image
                    .code_address
                    .checked_sub(target.memory_base)
                    .map(|s| s as usize);
                let range = start.and_then(|s| {
                    (s + image.code.len() <= size).then_some(s..s + image.code.len())
                });
                let Some(range) = range else {
                    return Err(fault(
                        t,
                        0,
                        0,
                        format!(
                            "code image at {:#x} lies outside tile memory",
                            image.code_address
                        ),
                    ));
                };
                memory[range.clone()].copy_from_slice(&image.code);
                let program = TileProgram::decode(&memory[range])
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
            .collect::<Result<_, _>>()?;
        if tiles.len() != target.tiles as usize {
            return Err(fault(
                0,
                0,
                0,
                format!(
                    "package has {} tile images for {} tiles",
                    tiles.len(),
                    target.tiles
                ),
            ));
        }
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
        let base = self.target.memory_base;
        let mut bytes = 0;
        for t in transfers {
            let v = graph.value(t.value);
            let data = &host[t.value.index()];
            let mem = &mut self.tiles[t.tile.index()].memory;
            for r in t.rect.row0..t.rect.row1 {
                let at = (t.address - base + (r - t.rect.row0) * t.stride) as usize;
                let len = t.rect.cols() as usize * 2;
                let dst = mem.get_mut(at..at + len).ok_or_else(|| {
                    fault(
                        t.tile.index(),
                        0,
                        0,
                        format!(
                            "host write of {} row {r} at {:#x} outside memory",
                            v.name, t.address
                        ),
                    )
                })?;
                let row =
                    &data[(r * v.cols + t.rect.col0) as usize..(r * v.cols + t.rect.col1) as usize];
                for (d, x) in dst.chunks_exact_mut(2).zip(row) {
                    d.copy_from_slice(&x.to_le_bytes());
                }
                bytes += len as u64;
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
        let sync = self.target.sync_cycles * steps.len() as u64;
        let cycles = steps.iter().map(|s| s.cycles).sum::<u64>() + sync;
        let minimum_tile_cycles = (0..self.tiles.len())
            .map(|t| steps.iter().map(|s| u64::from(s.tile_busy[t])).sum::<u64>())
            .max()
            .unwrap_or(0)
            + sync;
        let output = self.stream_out(package)?;
        let output_bytes = output.len() as u64 * 2;
        Ok((
            Execution {
                cycles,
                minimum_tile_cycles,
                steps,
                input_bytes,
                output_bytes,
                weight_bytes,
            },
            output,
        ))
    }

    fn stream_out(&self, package: &Package) -> Result<Vec<f16>, Fault> {
        let graph = &package.graph;
        let Some(out) = graph.values.iter().find(|v| v.role == ValueRole::Output) else {
            return Ok(Vec::new());
        };
        let mut data = vec![f16::NAN; out.elements() as usize];
        let base = self.target.memory_base;
        for t in &package.host.run_outputs {
            let mem = &self.tiles[t.tile.index()].memory;
            for r in t.rect.row0..t.rect.row1 {
                let at = (t.address - base + (r - t.rect.row0) * t.stride) as usize;
                let len = t.rect.cols() as usize * 2;
                let src = mem.get(at..at + len).ok_or_else(|| {
                    fault(
                        t.tile.index(),
                        self.supersteps(),
                        0,
                        format!("host read of {} row {r} outside memory", out.name),
                    )
                })?;
                let row = &mut data
                    [(r * out.cols + t.rect.col0) as usize..(r * out.cols + t.rect.col1) as usize];
                for (d, s) in row.iter_mut().zip(src.chunks_exact(2)) {
                    *d = f16::from_le_bytes([s[0], s[1]]);
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
                    cycles += execute_vertex(target, &mut tile.memory, instr)
                        .map_err(|m| fault(t, step, cycles, m))?;
                }
                Ok(cycles as u32)
            })
            .collect()
    }

    fn exchange(&mut self, step: usize) -> Result<Vec<u32>, Fault> {
        let target = &self.target;
        let transit = u64::from(target.exchange_transit_cycles);
        let switch = u64::from(target.mux_switch_cycles);
        let words = |bytes: u32| target.exchange_words(u64::from(bytes));
        // Sends by (tile, cycle), checked for overlap per tile.
        let mut sends: BTreeMap<(usize, u32), (u32, u32, Run)> = BTreeMap::new();
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
                    } => {
                        if u64::from(*start) < last_end {
                            return Err(fault(
                                t,
                                step,
                                u64::from(*start),
                                format!(
                                    "sends two words in one cycle (send at {start} overlaps the previous until {last_end})"
                                ),
                            ));
                        }
                        last_end = u64::from(*start) + words(*bytes);
                        busy[t] = busy[t].max((last_end + transit) as u32);
                        sends.insert((t, *start), (*skip, *bytes, *run));
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
        // Receives: each must listen to a real send, one sender at a time.
        let mut deliveries: Vec<Vec<Delivery>> = vec![Vec::new(); self.tiles.len()];
        for (t, tile) in self.tiles.iter().enumerate() {
            let mut listening_until = 0u64;
            for instr in &tile.steps[step] {
                let Instr::Receive {
                    switch: sw,
                    from,
                    sent,
                    skip,
                    bytes,
                    run,
                } = instr
                else {
                    continue;
                };
                let cycle = u64::from(*sent) + transit;
                let Some(&(sskip, sbytes, srun)) = sends.get(&(from.index(), *sent)) else {
                    return Err(fault(
                        t,
                        step,
                        cycle,
                        format!(
                            "listens to {from} for data sent at cycle {sent}, but {from} sends nothing then"
                        ),
                    ));
                };
                if (sskip, sbytes) != (*skip, *bytes) {
                    return Err(fault(
                        t,
                        step,
                        cycle,
                        format!(
                            "expects bytes {skip}..{} from {from}, which sends bytes {sskip}..{}",
                            skip + bytes,
                            sskip + sbytes
                        ),
                    ));
                }
                if u64::from(*sw) < listening_until || u64::from(*sw) + switch > cycle {
                    return Err(fault(
                        t,
                        step,
                        u64::from(*sw),
                        format!(
                            "mux switch to {from} at cycle {sw} collides with the previous receive (until {listening_until}) or comes after the data (cycle {cycle})"
                        ),
                    ));
                }
                listening_until = cycle + words(*bytes);
                busy[t] = busy[t].max(listening_until as u32);
                if let Some(h) = horizon
                    && listening_until > u64::from(h)
                {
                    return Err(fault(
                        t,
                        step,
                        listening_until,
                        format!("data from {from} arrives after the phase's horizon {h}"),
                    ));
                }
                deliveries[t].push(Delivery {
                    from: from.index(),
                    source: srun,
                    destination: *run,
                    skip: *skip,
                    bytes: *bytes,
                });
            }
        }
        // Move the data: read every source, then write every destination.
        let base = target.memory_base;
        let memories: Vec<&[u8]> = self.tiles.iter().map(|t| t.memory.as_slice()).collect();
        let payloads: Vec<Vec<Vec<u8>>> = deliveries
            .par_iter()
            .enumerate()
            .map(|(t, list)| {
                list.iter()
                    .map(|d| {
                        gather(memories[d.from], d, base).map_err(|m| fault(d.from, step, 0, m))
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|f: Fault| Fault {
                        message: format!("{} (sending to tile{t})", f.message),
                        ..f
                    })
            })
            .collect::<Result<_, _>>()?;
        self.tiles
            .par_iter_mut()
            .zip(deliveries.par_iter().zip(payloads.par_iter()))
            .enumerate()
            .try_for_each(|(t, (tile, (list, data)))| {
                for (d, bytes) in list.iter().zip(data) {
                    scatter(&mut tile.memory, d, base, bytes).map_err(|m| fault(t, step, 0, m))?;
                }
                Ok(())
            })?;
        Ok(busy)
    }
}

fn span(run: &Run, base: u32, len: usize) -> Result<(usize, usize), String> {
    let start = run
        .offset
        .checked_sub(base)
        .ok_or_else(|| format!("address {:#x} below tile memory", run.offset))?
        as usize;
    let end = start + (run.end() - run.offset) as usize;
    if end > len {
        return Err(format!(
            "run at {:#x} of {} bytes goes past the end of tile memory",
            run.offset,
            run.total()
        ));
    }
    Ok((start, end))
}

/// One piece of an exchange as the receiver sees it: bytes `skip..skip+bytes` of the stream read from
/// `source` on tile `from`, written to the same bytes of the stream of `destination`.
#[derive(Clone, Copy)]
struct Delivery {
    from: usize,
    source: Run,
    destination: Run,
    skip: u32,
    bytes: u32,
}

fn window_in_range(run: &Run, skip: u32, bytes: u32, base: u32, len: usize) -> Result<(), String> {
    span(run, base, len)?;
    if skip + bytes > run.total() {
        return Err(format!(
            "bytes {skip}..{} lie beyond the {}-byte run at {:#x}",
            skip + bytes,
            run.total(),
            run.offset
        ));
    }
    Ok(())
}

fn gather(memory: &[u8], d: &Delivery, base: u32) -> Result<Vec<u8>, String> {
    window_in_range(&d.source, d.skip, d.bytes, base, memory.len())?;
    let mut out = Vec::with_capacity(d.bytes as usize);
    for (at, len) in d.source.window(d.skip, d.bytes) {
        let at = (at - base) as usize;
        out.extend_from_slice(&memory[at..at + len as usize]);
    }
    Ok(out)
}

fn scatter(memory: &mut [u8], d: &Delivery, base: u32, bytes: &[u8]) -> Result<(), String> {
    window_in_range(&d.destination, d.skip, d.bytes, base, memory.len())?;
    let mut src = bytes;
    for (at, len) in d.destination.window(d.skip, d.bytes) {
        let at = (at - base) as usize;
        memory[at..at + len as usize].copy_from_slice(&src[..len as usize]);
        src = &src[len as usize..];
    }
    Ok(())
}

/// A strided matrix in tile memory: `rows` rows of `cols` elements of `dtype`, `stride` bytes apart.
struct Matrix {
    addr: u32,
    stride: u32,
    rows: u32,
    cols: u32,
    dtype: DType,
}

impl Matrix {
    /// The byte range it covers, relative to the memory base; an error names `what` when it leaves memory.
    fn span(&self, base: u32, len: usize, what: &str) -> Result<usize, String> {
        let start = self
            .addr
            .checked_sub(base)
            .ok_or_else(|| format!("{what} at {:#x} below tile memory", self.addr))?
            as usize;
        let end = start
            + (self.rows.saturating_sub(1) * self.stride) as usize
            + (self.cols * self.dtype.bytes()) as usize;
        if self.rows > 0 && end > len {
            return Err(format!(
                "{what} at {:#x} ({}x{}, stride {}) goes past the end of tile memory",
                self.addr, self.rows, self.cols, self.stride
            ));
        }
        Ok(start)
    }

    fn row_bytes(&self) -> usize {
        (self.cols * self.dtype.bytes()) as usize
    }
}

/// Reads a matrix, widened to f32.
fn load(memory: &[u8], base: u32, m: &Matrix, what: &str) -> Result<Vec<f32>, String> {
    let start = m.span(base, memory.len(), what)?;
    let mut out = Vec::with_capacity((m.rows * m.cols) as usize);
    for r in 0..m.rows as usize {
        let row = &memory[start + r * m.stride as usize..][..m.row_bytes()];
        match m.dtype {
            DType::F16 => out.extend(
                row.chunks_exact(2)
                    .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()),
            ),
            DType::F32 => out.extend(
                row.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        }
    }
    Ok(out)
}

/// Writes a matrix from f32 values (rounded to its dtype).
fn store(memory: &mut [u8], base: u32, m: &Matrix, data: &[f32], what: &str) -> Result<(), String> {
    let start = m.span(base, memory.len(), what)?;
    let cols = m.cols as usize;
    for r in 0..m.rows as usize {
        let row = &mut memory[start + r * m.stride as usize..][..m.row_bytes()];
        let vals = &data[r * cols..(r + 1) * cols];
        match m.dtype {
            DType::F16 => row
                .chunks_exact_mut(2)
                .zip(vals)
                .for_each(|(b, v)| b.copy_from_slice(&f16::from_f32(*v).to_le_bytes())),
            DType::F32 => row
                .chunks_exact_mut(4)
                .zip(vals)
                .for_each(|(b, v)| b.copy_from_slice(&v.to_le_bytes())),
        }
    }
    Ok(())
}

/// Executes one compute instruction; returns its cycles.
fn execute_vertex(target: &Target, memory: &mut [u8], instr: &Instr) -> Result<u64, String> {
    let base = target.memory_base;
    match *instr {
        Instr::Amp {
            a,
            a_stride,
            b,
            b_stride,
            partials,
            partials_stride,
            partials_type,
            rows,
            depth,
            cols,
        } => {
            check_alignment(a, 8, "AMP input a")?;
            check_alignment(b, 16, "AMP weights b")?;
            check_alignment(partials, 16, "AMP partials")?;
            if !target.is_interleaved(b) || !target.is_interleaved(partials) {
                return Err(format!(
                    "AMP weights at {b:#x} or partials at {partials:#x} outside interleaved memory (from {:#x})",
                    target.interleaved_base
                ));
            }
            let out_elements = (
                target.memory_element(partials),
                target.memory_element(
                    partials + (rows.max(1) - 1) * partials_stride + cols * partials_type.bytes()
                        - 1,
                ),
            );
            for (what, addr, len) in [
                ("a", a, (rows.max(1) - 1) * a_stride + depth * 2),
                ("b", b, (depth.max(1) - 1) * b_stride + cols * 2),
            ] {
                let (e0, e1) = (
                    target.memory_element(addr),
                    target.memory_element(addr + len - 1),
                );
                if e0 <= out_elements.1 && out_elements.0 <= e1 {
                    return Err(format!(
                        "AMP input {what} at {addr:#x} shares a memory element with its partials at {partials:#x}"
                    ));
                }
            }
            let av = load(
                memory,
                base,
                &Matrix {
                    addr: a,
                    stride: a_stride,
                    rows,
                    cols: depth,
                    dtype: DType::F16,
                },
                "AMP input a",
            )?;
            let bv = load(
                memory,
                base,
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
            store(
                memory,
                base,
                &Matrix {
                    addr: partials,
                    stride: partials_stride,
                    rows,
                    cols,
                    dtype: partials_type,
                },
                &out,
                "AMP partials",
            )?;
            Ok(target.amp_cycles(rows, depth, cols, partials_type))
        }
        Instr::Epilogue {
            partials,
            partials_stride,
            partials_type,
            bias,
            out,
            out_stride,
            rows,
            cols,
            gelu,
        } => {
            let p = load(
                memory,
                base,
                &Matrix {
                    addr: partials,
                    stride: partials_stride,
                    rows,
                    cols,
                    dtype: partials_type,
                },
                "epilogue partials",
            )?;
            let bv = match bias {
                Some(addr) => Some(load(
                    memory,
                    base,
                    &Matrix {
                        addr,
                        stride: cols * 2,
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
            store(
                memory,
                base,
                &Matrix {
                    addr: out,
                    stride: out_stride,
                    rows,
                    cols,
                    dtype: DType::F16,
                },
                &result,
                "epilogue output",
            )?;
            let (ops, transcendentals) = Target::epilogue_ops(partials_type, bias.is_some(), gelu);
            Ok(target.vector_cycles(
                u64::from(rows) * u64::from(cols),
                DType::F16,
                ops,
                transcendentals,
            ))
        }
        ref other => Err(format!("{other:?} inside a compute step")),
    }
}

fn check_alignment(addr: u32, align: u32, what: &str) -> Result<(), String> {
    if !addr.is_multiple_of(align) {
        return Err(format!("{what} at {addr:#x} is not {align}-byte aligned"));
    }
    Ok(())
}
