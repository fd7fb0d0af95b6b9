//! The host's side of the device: its seeded data for the graph's inputs and weights, and its streams.
//!
//! Contract: host data is one `Vec<f32>` per value, indexed by value id (f16 values hold f16 numbers,
//! booleans 1 and 0, i64 values integers); a value the host does not hold is empty. A package's host transfers are
//! checked when it loads ([`validate_host`]): each names a real tile, value and rectangle, at most a
//! tile's memory of bytes, in rows far enough apart to hold theirs. `initialize`
//! streams the weights in and `run` the values its host program names, each stored row converted to
//! f16 (a boolean's 1 and 0 included) and written as host data (no superstep, so no liveness check); host data of
//! the wrong length is a fault, not a panic; so is a stored row whose address passes u32. After the
//! last superstep every value of `run_outputs` is read back, every byte of it written before, a value
//! no larger than the chip's memory. Streams are timed at the host-link rate, apart from
//! device cycles, so they return bytes, not cycles.

use super::{Device, Fault, fault};
use crate::ids::ValueId;
use crate::ir::{Graph, OpKind, Package, Rect, Value, ValueRole};
use crate::isa::HostTransfer;
use crate::numerics;
use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};

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
        let tile_bytes = u64::from(package.target.memory_end - package.target.memory_base);
        let ok = tile < package.target.tiles as usize
            && value.is_some_and(|v| {
                t.rect.row0 < t.rect.row1
                    && t.rect.col0 < t.rect.col1
                    && t.rect.row1 <= v.rows
                    && t.rect.col1 <= v.cols
            })
            && t.rect.elements() <= tile_bytes / 2
            && u64::from(t.stride)
                >= 2 * u64::from(if t.transposed {
                    t.rect.rows()
                } else {
                    t.rect.cols()
                });
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
    pub fn initialize(&mut self, host: &[Vec<f32>]) -> Result<u64, Fault> {
        let Device { tiles, package, .. } = self;
        stream_in(tiles, &package.host.initialize, host, &package.graph)
    }

    /// Host reads: every value `run_outputs` names, by value id, from the tiles that hold it after the
    /// last superstep (NaN where no transfer reads), widened to f32.
    pub(super) fn stream_out(&self) -> Result<BTreeMap<ValueId, Vec<f32>>, Fault> {
        let graph = &self.package.graph;
        let mut out: BTreeMap<ValueId, Vec<f32>> = BTreeMap::new();
        let step = self.supersteps();
        for t in &self.package.host.run_outputs {
            let (tile, v) = transfer(self.tiles.len(), t, graph, step, "host read")?;
            if !v.dtype.held_as_f16() {
                return Err(fault(
                    tile,
                    step,
                    0,
                    format!(
                        "host read of {} ({}): streams f16 values (and booleans as f16) only",
                        v.name, v.dtype
                    ),
                ));
            }
            let tile_bytes = u64::from(self.target.memory_end - self.target.memory_base);
            let chip_bytes = tile_bytes.saturating_mul(self.tiles.len() as u64);
            if v.elements() > chip_bytes / 2 {
                let message = format!(
                    "host read of {}: {} elements, more than the chip's {chip_bytes} bytes hold",
                    v.name,
                    v.elements()
                );
                return Err(fault(tile, step, 0, message));
            }
            let data = out
                .entry(t.value)
                .or_insert_with(|| vec![f32::NAN; v.elements() as usize]);
            let memory = &self.tiles[tile].memory;
            for (i, row) in t.stored_rows(v.cols).enumerate() {
                let what = format!("host read of {} stored row {i}", v.name);
                let at =
                    row_address(t, i, row.address, &what).map_err(|m| fault(tile, step, 0, m))?;
                let len = u32::try_from(row.len * 2).map_err(|_| {
                    fault(tile, step, 0, format!("{what}: more than a tile addresses"))
                })?;
                let src = memory
                    .read(at, len, &what)
                    .map_err(|m| fault(tile, step, 0, m))?;
                let values = row.of_mut(data).ok_or_else(|| {
                    fault(tile, step, 0, format!("{what}: elements beyond the value"))
                })?;
                for (x, s) in values.zip(src.chunks_exact(2)) {
                    *x = f16::from_le_bytes([s[0], s[1]]).to_f32();
                }
            }
        }
        Ok(out)
    }
}

/// The tile and value a host transfer names, as an index and a value; a fault naming the transfer
/// when either does not exist among `tiles` tiles (a package loaded checks them; this is the device's
/// own guard).
fn transfer<'g>(
    tiles: usize,
    t: &HostTransfer,
    graph: &'g Graph,
    step: usize,
    what: &str,
) -> Result<(usize, &'g Value), Fault> {
    let tile = t.tile.index();
    match graph.values.get(t.value.index()) {
        Some(v) if tile < tiles => Ok((tile, v)),
        _ => Err(fault(
            tile.min(tiles.saturating_sub(1)),
            step,
            0,
            format!("{what} of {} to {}: no such value or tile", t.value, t.tile),
        )),
    }
}

/// A host transfer checked: its index among the stream's, the transfer, its value and the host's
/// data of it.
type Checked<'a> = (usize, &'a HostTransfer, &'a Value, &'a [f32]);

/// A rectangle of a value a host stream writes, as the tile stores it (transposed or not).
type RectKey = (ValueId, Rect, bool);

fn rect_key(t: &HostTransfer) -> RectKey {
    (t.value, t.rect, t.transposed)
}

/// Transfers of a host stream written side by side at once.
const WINDOW: usize = 4096;

/// Host writes: copies rectangles of host values into the memories of `tiles`. Every transfer is
/// checked first, in order. Then a window of transfers at a time, in order: its rectangles not yet
/// made into stored bytes made, side by side, and held until the last transfer of them (a resident
/// weight panel goes to every row block's tiles, each rectangle is made once); then the window
/// written, the tiles side by side, each its own transfers in order. A write cannot fail on what
/// another tile holds, so the fault is the first failing transfer in order, as one transfer after
/// another would find it.
pub(super) fn stream_in(
    tiles: &mut [super::Tile],
    transfers: &[HostTransfer],
    host: &[Vec<f32>],
    graph: &Graph,
) -> Result<u64, Fault> {
    let mut checked: Vec<Checked> = Vec::with_capacity(transfers.len());
    for (i, t) in transfers.iter().enumerate() {
        let (tile, v) = transfer(tiles.len(), t, graph, 0, "host write")?;
        let data = host.get(t.value.index()).map_or(&[][..], Vec::as_slice);
        if !v.dtype.held_as_f16() || data.len() as u64 != v.elements() {
            return Err(fault(
                tile,
                0,
                0,
                format!(
                    "host write of {} ({}, {} elements): the host holds {} elements for it, and \
                     streams f16 values (and booleans as f16) only",
                    v.name,
                    v.dtype,
                    v.elements(),
                    data.len()
                ),
            ));
        }
        checked.push((i, t, v, data));
    }
    // The last transfer of each rectangle.
    let mut last: HashMap<RectKey, usize> = HashMap::new();
    for &(i, t, _, _) in &checked {
        last.insert(rect_key(t), i);
    }
    let mut stored: HashMap<RectKey, Option<Vec<u8>>> = HashMap::new();
    let mut bytes = 0;
    for window in checked.chunks(WINDOW) {
        let mut new: Vec<(RectKey, usize)> = (window.iter().enumerate())
            .map(|(j, c)| (rect_key(c.1), j))
            .filter(|(key, _)| !stored.contains_key(key))
            .collect();
        new.sort_unstable();
        new.dedup_by_key(|n| n.0);
        let made: Vec<(RectKey, Option<Vec<u8>>)> = (new.par_iter())
            .map(|&(key, j)| {
                let (_, t, v, data) = window[j];
                (key, stored_halves(t, v, data))
            })
            .collect();
        stored.extend(made);
        bytes += write_window(tiles, window, &stored)?;
        let end = window.last().map_or(0, |c| c.0);
        stored.retain(|key, _| last.get(key).is_some_and(|&l| l > end));
    }
    Ok(bytes)
}

/// Writes `window`, transfers checked by [`stream_in`], into the memories of `tiles`, the tiles
/// side by side, from the rectangles' stored bytes.
fn write_window(
    tiles: &mut [super::Tile],
    window: &[Checked],
    stored: &HashMap<RectKey, Option<Vec<u8>>>,
) -> Result<u64, Fault> {
    let mut by_tile: Vec<Vec<&Checked>> = vec![Vec::new(); tiles.len()];
    for c in window {
        by_tile[c.1.tile.index()].push(c);
    }
    let written: Vec<Result<u64, (usize, Fault)>> = (tiles.par_iter_mut().zip(by_tile))
        .enumerate()
        .filter(|(_, (_, list))| !list.is_empty())
        .map(|(tile, (target, list))| {
            let mut bytes = 0;
            for &&(i, t, v, _) in &list {
                let what = format!("host write of {}", v.name);
                let failed = |m: String| (i, fault(tile, 0, 0, m));
                let raw = (stored.get(&rect_key(t)).and_then(Option::as_deref))
                    .ok_or_else(|| failed(format!("{what}: elements beyond the value")))?;
                let r = t.rect;
                let row_bytes = 2 * if t.transposed { r.rows() } else { r.cols() } as usize;
                for (row, stored) in t.stored_rows(v.cols).enumerate() {
                    let in_row = |m: String| failed(format!("{m} (stored row {row})"));
                    let at = row_address(t, row, stored.address, &what).map_err(in_row)?;
                    let bytes_of_row = &raw[row * row_bytes..(row + 1) * row_bytes];
                    (target.memory)
                        .write(at, bytes_of_row, None, &what)
                        .map_err(in_row)?;
                    bytes += bytes_of_row.len() as u64;
                }
            }
            Ok(bytes)
        })
        .collect();
    let (mut bytes, mut failed) = (0, Vec::new());
    for result in written {
        match result {
            Ok(b) => bytes += b,
            Err(e) => failed.push(e),
        }
    }
    match failed.into_iter().min_by_key(|&(i, _)| i) {
        Some((_, f)) => Err(f),
        None => Ok(bytes),
    }
}

/// The bytes of transfer `t`'s rectangle of `v` (whose data is `data`, row-major) as the tile stores
/// them: stored row after stored row (a column a stored row when transposed), each element rounded
/// as `f16::from_f32` rounds it; `None` when the rectangle reaches past the data.
fn stored_halves(t: &HostTransfer, v: &Value, data: &[f32]) -> Option<Vec<u8>> {
    let r = t.rect;
    let (rows, cols) = (r.rows() as usize, r.cols() as usize);
    let at = |row: u32, col: u32| row as usize * v.cols as usize + col as usize;
    let block = (r.row0..r.row1)
        .map(|row| data.get(at(row, r.col0)..at(row, r.col1)))
        .collect::<Option<Vec<_>>>()?;
    let mut values = Vec::with_capacity(rows * cols);
    if t.transposed {
        values.resize(rows * cols, 0.0);
        for (i, row) in block.iter().enumerate() {
            for (j, &x) in row.iter().enumerate() {
                values[j * rows + i] = x;
            }
        }
    } else {
        block.iter().for_each(|row| values.extend_from_slice(row));
    }
    let mut halves = vec![f16::ZERO; values.len()];
    halves.convert_from_f32_slice(&values);
    Some(halves.iter().flat_map(|h| h.to_le_bytes()).collect())
}

/// A stored row's address, or the message saying it passes u32.
fn row_address(t: &HostTransfer, row: usize, at: Option<u32>, what: &str) -> Result<u32, String> {
    at.ok_or_else(|| {
        format!(
            "{what}: {:#x} + {row} x {} passes the 32-bit address space",
            t.address, t.stride
        )
    })
}

#[cfg(test)]
mod tests {
    use half::f16;
    use half::slice::HalfFloatSliceExt;

    #[test]
    fn a_row_converts_as_each_element_does() {
        let tie = f32::from_bits(0x3f80_1000); // halfway between two f16s: rounds to even
        let values = [
            0.0,
            -0.0,
            1.0,
            tie,
            -tie,
            65504.0,
            65520.0,
            1e-8,
            5.96e-8,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7fc0_1234),
            f32::from_bits(0xff80_0001),
            f32::MIN_POSITIVE,
            std::f32::consts::PI,
        ];
        let mut halves = vec![f16::ZERO; values.len()];
        halves.convert_from_f32_slice(&values);
        for (h, &x) in halves.iter().zip(&values) {
            assert_eq!(h.to_bits(), f16::from_f32(x).to_bits(), "{x:e}");
        }
    }
}
