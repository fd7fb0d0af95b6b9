//! The host's side of the device: its data for the graph's inputs and weights, and its streams.
//!
//! Contract: a package's host transfers are checked when it loads ([`validate_host`]): each names a
//! real tile, value and rectangle. `initialize` streams the weights in and `run` the inputs, each stored
//! row written as host data (no superstep, so no liveness check); the output is read back after the
//! last superstep, every byte of it written before. Streams are timed at the host-link rate, apart from
//! device cycles, so they return bytes, not cycles.

use super::{Device, Fault, fault};
use crate::ir::{Package, ValueRole};
use crate::isa::HostTransfer;
use crate::numerics;
use half::f16;
use rayon::prelude::*;

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

/// Host transfers must name real tiles, values and rectangles: a package is data and may be damaged
/// behind a valid header hash.
pub(super) fn validate_host(package: &Package) -> Result<(), Fault> {
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

impl Device {
    /// `initialize`: streams the weights in.
    pub fn initialize(&mut self, package: &Package, host: &[Vec<f16>]) -> Result<u64, Fault> {
        self.stream_in(&package.host.initialize, host, &package.graph)
    }

    /// Host writes: copies rectangles of host values into tile memory.
    pub(super) fn stream_in(
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

    /// Host reads: the graph's output value from the tiles that hold it after the last superstep
    /// (NaN where no transfer reads; empty when the graph has no output).
    pub(super) fn stream_out(&self, package: &Package) -> Result<Vec<f16>, Fault> {
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
}
