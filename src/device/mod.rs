//! The simulated device: executes a package bit-exactly on 1472 tile memories and counts cycles with its
//! own model of what it executes ([`timing`]: vertex launch, AMP weight loads and passes, rows dealt to
//! six barrel-scheduled workers, the bytes each vertex loads and stores), the exchange rules and the
//! sync cost, from the target's parameters; it never calls the compiler's estimates.
//!
//! It runs what was emitted: it loads each tile's code image into the tile's memory and decodes the
//! program from there, whole, to check it and find where each superstep starts; then decodes each
//! superstep's instructions from there again as that superstep runs (so one superstep's program is
//! held decoded at a time); streams the host's data in (`initialize`, `run`) and results out; executes each
//! superstep on every tile (compute vertices, or the exchange phase, each tile's exchange code timed
//! by its instructions' issue, in intervals), then the sync. It refuses what real hardware would get
//! wrong, as a [`Fault`] naming tile, superstep, cycle and buffer (and, in an exchange, the
//! instruction): an access outside memory; a misaligned AMP operand; AMP weights or partials outside
//! interleaved memory; an AMP whose input and output share a memory element; a read of memory never
//! written; a write into a buffer still live; a receiver listening to two senders at once, switching
//! its mux after its data began to arrive, or listening to a sender that sends nothing then or other
//! bytes; a wide send or receive while the pair mate uses the shared bus. A package is data: an
//! address, length, stride, count or delay read from it whose sum or product passes its width is a
//! fault too, never a wrap, and every index it supplies is checked.
//!
//! Cycles: a superstep takes its slowest tile's compute, or the exchange phase's last arrival; every
//! superstep ends in a sync of `target.sync_cycles`. Host streaming is timed at the host-link rate,
//! apart from device cycles.
//!
//! This module holds the device itself: loading a package, the superstep loop of `run`, and the
//! [`Fault`]. The rest is in modules of their own: `host` (the host's data and streams), `exchange`
//! (an exchange superstep), `vertices` (a compute superstep and each vertex kind's semantics),
//! `profile` (what a run reports) and `memory` (one tile's checked memory). The device reads the ISA,
//! the package and graph of the IR, the target and the numerics, and nothing of the phases.

mod exchange;
mod host;
mod memory;
mod profile;
pub mod timing;
mod vertices;

use crate::ids::{TileId, ValueId};
use crate::ir::Package;
use crate::isa::Instr;
use crate::isa::encoding::{DecodeError, decode_header, decode_instr, decode_instrs};
use crate::progress::Progress;
use crate::target::Target;
pub use host::host_data;
pub use memory::{Matrix, TileMemory};
pub use profile::{Execution, StepProfile};
use rayon::prelude::*;
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
    /// Each superstep's instructions (its program split at its syncs, the syncs left out) as the
    /// address and length of their code in the tile's memory; a superstep's instructions are decoded
    /// when it runs, so only one superstep's program is held decoded at a time.
    steps: Vec<(u32, u32)>,
}

impl Tile {
    /// Superstep `step`'s instructions, decoded from their code in the tile's memory.
    fn step(&self, step: usize) -> Result<Vec<Instr>, String> {
        let (address, bytes) = self.steps[step];
        let code = self.memory.read(address, bytes, "code")?;
        decode_instrs(code, 0).map_err(|e| format!("code does not decode: {e}"))
    }
}

/// A device loaded with a package: it holds the package it runs, and each tile's code image in that
/// tile's memory only (moved there from the package, whose `TileImage::code` is left empty).
pub struct Device {
    target: Target,
    tiles: Vec<Tile>,
    package: Package,
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
    /// Loads the application: code images moved into tile memories, programs decoded from there.
    pub fn load(mut package: Package) -> Result<Device, Fault> {
        let target = package.target.clone();
        // Every rate the timing divides by is at least one, and an access fits a tile's address.
        let rates = [
            u64::from(target.workers),
            u64::from(target.amp_block_depth),
            u64::from(target.amp_block_width),
            target.weight_load_bytes_per_cycle,
            target.vector_f16_lanes,
            target.vector_f32_lanes,
            target.transcendental_f16_lanes,
            target.memory_access_bytes,
            target.wide_load_bytes,
            u64::from(target.memory_element_bytes),
            u64::from(target.exchange_bytes_per_cycle),
        ];
        if target.tiles == 0
            || target.columns == 0
            || target.memory_base >= target.memory_end
            || !(target.memory_base..=target.memory_end).contains(&target.interleaved_base)
            || rates.iter().any(|&r| r == 0 || r > 1 << 20)
        {
            return Err(fault(
                0,
                0,
                0,
                format!("package names an impossible target: {target:?}"),
            ));
        }
        host::validate_host(&package)?;
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
        let tiles: Vec<Tile> = package
            .tiles
            .par_iter_mut()
            .enumerate()
            .map(|(t, image)| {
                let code_bytes = u32::try_from(image.code.len()).map_err(|_| {
                    let n = image.code.len();
                    fault(
                        t,
                        0,
                        0,
                        format!("code image of {n} bytes: more than a tile addresses"),
                    )
                })?;
                let mut memory = TileMemory::new(&target, image.buffers.clone())
                    .map_err(|m| fault(t, 0, 0, m))?;
                memory
                    .write(
                        image.code_address,
                        &std::mem::take(&mut image.code),
                        None,
                        "code image",
                    )
                    .map_err(|m| fault(t, 0, 0, m))?;
                let code = memory
                    .read(image.code_address, code_bytes, "code")
                    .map_err(|m| fault(t, 0, 0, m))?;
                // The whole program decodes; each superstep starts after a sync (the first after
                // the header) and ends before the next. Offsets lie within the code, so within u32.
                let undecodable =
                    |e: DecodeError| fault(t, 0, 0, format!("code does not decode: {e}"));
                let (_, mut at) = decode_header(code).map_err(undecodable)?;
                let (mut start, mut steps) = (at, Vec::new());
                while at < code.len() {
                    let (instr, next) = decode_instr(code, at).map_err(undecodable)?;
                    if matches!(instr, Instr::Sync) {
                        steps.push((image.code_address + start as u32, (at - start) as u32));
                        start = next;
                    }
                    at = next;
                }
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
        Ok(Device {
            target,
            tiles,
            package,
        })
    }

    /// The package loaded, but for its code images, which live in the tiles' memories.
    pub fn package(&self) -> &Package {
        &self.package
    }

    /// Lets the device go: the package it was loaded with, without its code images.
    pub fn into_package(self) -> Package {
        self.package
    }

    pub fn supersteps(&self) -> usize {
        self.tiles[0].steps.len()
    }

    /// Superstep `step`'s instructions on every tile, decoded from the code in its memory.
    fn step_programs(&self, step: usize) -> Result<Vec<Vec<Instr>>, Fault> {
        (self.tiles.par_iter().enumerate())
            .map(|(t, tile)| tile.step(step).map_err(|m| fault(t, step, 0, m)))
            .collect()
    }

    /// The sync ending a superstep, once its slowest tile is done: every tile's `sync` releases
    /// together after the target's sync latency (`Target::sync_cycles`, a cited figure).
    fn sync(&self) -> u64 {
        self.target.sync_cycles
    }

    /// `run`: streams the inputs in, executes every superstep (each reported to `progress` as it
    /// ends), streams the outputs out: the data of every value the package's `run_outputs` names, by
    /// value id, as f32.
    pub fn run(
        &mut self,
        host: &[Vec<f32>],
        progress: &dyn Progress,
    ) -> Result<(Execution, BTreeMap<ValueId, Vec<f32>>), Fault> {
        let Device { tiles, package, .. } = self;
        let input_bytes = host::stream_in(tiles, &package.host.run_inputs, host, &package.graph)?;
        let mut steps = Vec::new();
        progress.start("supersteps", self.supersteps() as u64);
        for s in 0..self.supersteps() {
            let program = self.step_programs(s)?;
            let exchange = (program.iter().flatten()).any(|i| matches!(i, Instr::Exchange { .. }));
            let busy = if exchange {
                self.exchange(s, &program)?
            } else {
                self.compute(s, &program)?
            };
            let package = &self.package;
            let estimate = package.steps.get(s).cloned().unwrap_or_default();
            let cycles = u64::from(busy.iter().copied().max().unwrap_or(0));
            steps.push(StepProfile {
                kind: estimate.kind,
                operators: estimate.operators,
                estimated_cycles: estimate.cycles,
                cycles,
                sync_cycles: self.sync(),
                estimated_sync_cycles: estimate.sync_cycles,
                tile_busy: busy,
                tile_estimates: package.tile_estimates.get(s).cloned().unwrap_or_default(),
            });
            progress.advance(1);
        }
        progress.finish();
        let output = self.stream_out()?;
        let output_bytes = output.values().map(|o| o.len() as u64 * 2).sum();
        let execution = self.profile(steps, input_bytes, output_bytes)?;
        Ok((execution, output))
    }
}
