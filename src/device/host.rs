//! The host's side of the device: its seeded data for the graph's inputs and weights, and its streams.
//!
//! Contract: host data is one `Vec<f32>` per value, indexed by value id (f16 values hold f16 numbers,
//! i64 values integers); a value the host does not hold is empty. A package's host transfers are
//! checked when it loads ([`validate_host`]): each names a real tile, value and rectangle. `initialize`
//! streams the weights in and `run` the values its host program names, each stored row converted to
//! the value's type (f16) and written as host data (no superstep, so no liveness check); host data of
//! the wrong length is a fault, not a panic. After the last superstep every value of `run_outputs` is
//! read back, every byte of it written before. Streams are timed at the host-link rate, apart from
//! device cycles, so they return bytes, not cycles.

use super::{Device, Fault, fault};
use crate::ids::ValueId;
use crate::ir::{DType, Graph, OpKind, Package, ValueRole};
use crate::isa::HostTransfer;
use crate::numerics;
use half::f16;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// The seeded host data of every input and weight value of a graph (empty for the others). An integer
/// value draws indices below the rows of the smallest table an embedding looks it up in.
pub fn host_data(graph: &Graph, seed: u64) -> Vec<Vec<f32>> {
    let mut entries = vec![u32::MAX; graph.values.len()];
    for op in &graph.ops {
        if let OpKind::Embed { lookups } = &op.kind {
            for &(table, indices) in lookups {
                let e = &mut entries[indices.index()];
                *e = (*e).min(graph.value(table).rows);
            }
        }
    }
    graph
        .values
        .par_iter()
        .map(|v| match v.role {
            ValueRole::Input | ValueRole::Weight => {
                let e = entries[v.id.index()];
                numerics::generate(v, seed, if e == u32::MAX { 0 } else { e })
            }
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
    pub fn initialize(&mut self, package: &Package, host: &[Vec<f32>]) -> Result<u64, Fault> {
        self.stream_in(&package.host.initialize, host, &package.graph)
    }

    /// Host writes: copies rectangles of host values into tile memory.
    pub(super) fn stream_in(
        &mut self,
        transfers: &[HostTransfer],
        host: &[Vec<f32>],
        graph: &Graph,
    ) -> Result<u64, Fault> {
        let mut bytes = 0;
        for t in transfers {
            let v = graph.value(t.value);
            let data = host.get(t.value.index()).map_or(&[][..], Vec::as_slice);
            if v.dtype != DType::F16 || data.len() as u64 != v.elements() {
                return Err(fault(
                    t.tile.index(),
                    0,
                    0,
                    format!(
                        "host write of {} ({}, {} elements): the host holds {} elements for it, \
                         and streams f16 values only",
                        v.name,
                        v.dtype,
                        v.elements(),
                        data.len()
                    ),
                ));
            }
            let memory = &mut self.tiles[t.tile.index()].memory;
            for (i, (elements, at)) in t.stored_rows(v.cols).enumerate() {
                let raw: Vec<u8> = elements
                    .iter()
                    .flat_map(|&e| f16::from_f32(data[e]).to_le_bytes())
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

    /// Host reads: every value `run_outputs` names, by value id, from the tiles that hold it after the
    /// last superstep (NaN where no transfer reads), widened to f32.
    pub(super) fn stream_out(
        &self,
        package: &Package,
    ) -> Result<BTreeMap<ValueId, Vec<f32>>, Fault> {
        let graph = &package.graph;
        let mut out: BTreeMap<ValueId, Vec<f32>> = BTreeMap::new();
        let step = self.supersteps();
        for t in &package.host.run_outputs {
            let v = graph.value(t.value);
            if v.dtype != DType::F16 {
                return Err(fault(
                    t.tile.index(),
                    step,
                    0,
                    format!(
                        "host read of {} ({}): streams f16 values only",
                        v.name, v.dtype
                    ),
                ));
            }
            let data = out
                .entry(t.value)
                .or_insert_with(|| vec![f32::NAN; v.elements() as usize]);
            let memory = &self.tiles[t.tile.index()].memory;
            for (i, (elements, at)) in t.stored_rows(v.cols).enumerate() {
                let src = memory
                    .read(
                        at,
                        elements.len() as u32 * 2,
                        &format!("host read of {} stored row {i}", v.name),
                    )
                    .map_err(|m| fault(t.tile.index(), step, 0, m))?;
                for (&e, s) in elements.iter().zip(src.chunks_exact(2)) {
                    data[e] = f16::from_le_bytes([s[0], s[1]]).to_f32();
                }
            }
        }
        Ok(out)
    }
}
