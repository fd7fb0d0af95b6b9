//! One tile's memory as the device sees it: the bytes, which bytes were ever written, and the buffer
//! table of the package, so every access is checked and every fault names the buffer it hit.
//!
//! Contract: addresses, lengths, strides and row counts come from the package and are data. No sum or
//! product of them wraps: a buffer whose end passes u32 is refused when the memory is made, and a
//! matrix is checked whole ([`TileMemory::extent`]) before a byte of it moves: its rows' addresses and
//! ends fit in u32, lie in tile memory, and hold no more bytes than the tile has, so nothing read or
//! written for it outgrows the tile. A matrix of booleans is read and written as the f16 1 and 0 they
//! are held as; i64 is no tile's type.

use crate::ir::BufferInfo;
use crate::ir::DType;
use crate::target::Target;
use half::f16;
use half::slice::HalfFloatSliceExt;
use live::LiveIndex;

mod live;

pub struct TileMemory {
    base: u32,
    bytes: Vec<u8>,
    /// One bit per byte: written by the code load, the host, an exchange or a vertex.
    written: Vec<u64>,
    buffers: Vec<BufferInfo>,
    /// The buffers by where and when they live.
    live: LiveIndex,
    /// Where interleaved memory starts.
    interleaved_base: u32,
}

/// A strided matrix in tile memory: `rows` rows of `cols` elements of `dtype`, `stride` bytes apart.
pub struct Matrix {
    pub addr: u32,
    pub stride: u32,
    pub rows: u32,
    pub cols: u32,
    pub dtype: DType,
}

/// Where a checked matrix lies: the bytes of one row, and one past the last row's last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub row_bytes: u32,
    pub end: u32,
}

impl Matrix {
    fn row_bytes(&self) -> Option<u32> {
        self.cols.checked_mul(self.dtype.bytes())
    }
    fn row(&self, r: u32) -> Option<u32> {
        r.checked_mul(self.stride)?.checked_add(self.addr)
    }
    /// Every row's address: all of them once [`TileMemory::extent`] has passed the matrix.
    fn rows(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.rows).map_while(|r| self.row(r))
    }
    /// The matrix for messages: `rows x cols dtype at addr/stride`.
    fn describe(&self) -> String {
        format!(
            "{} x {} {} at {:#x}/{}",
            self.rows, self.cols, self.dtype, self.addr, self.stride
        )
    }
}

impl TileMemory {
    /// A tile's memory as `target` lays it out, holding nothing yet; refused when a buffer of the
    /// table ends past u32.
    pub fn new(target: &Target, buffers: Vec<BufferInfo>) -> Result<TileMemory, String> {
        if let Some(b) = buffers
            .iter()
            .find(|b| b.address.checked_add(b.bytes).is_none())
        {
            return Err(format!(
                "buffer table: {} at {:#x} of {} bytes ends past the 32-bit address space",
                b.label, b.address, b.bytes
            ));
        }
        let size = (target.memory_end - target.memory_base) as usize;
        Ok(TileMemory {
            base: target.memory_base,
            bytes: vec![0; size],
            written: vec![0; size.div_ceil(64)],
            live: LiveIndex::new(target.memory_base, size, &buffers),
            buffers,
            interleaved_base: target.interleaved_base,
        })
    }

    /// Names the buffer holding `addr`, for messages.
    pub fn name(&self, addr: u32) -> String {
        self.buffers
            .iter()
            .find(|b| addr >= b.address && u64::from(addr) < buffer_end(b))
            .map_or_else(
                || format!("{addr:#x} (no buffer)"),
                |b| format!("{addr:#x} in {}", b.label),
            )
    }

    fn offset(&self, addr: u32, len: u32, what: &str) -> Result<usize, String> {
        let start = addr.checked_sub(self.base).map(|s| s as usize);
        match start {
            Some(s) if s + len as usize <= self.bytes.len() => Ok(s),
            _ => Err(format!(
                "{what}: [{addr:#x}, {:#x}) lies outside tile memory [{:#x}, {:#x})",
                u64::from(addr) + u64::from(len),
                self.base,
                self.base as usize + self.bytes.len()
            )),
        }
    }

    /// Checks a matrix whole before a byte of it moves (see the module's contract); where it lies. A
    /// matrix of no rows touches no memory and lies at its address.
    pub fn extent(&self, m: &Matrix, what: &str) -> Result<Extent, String> {
        let row_bytes = m.row_bytes();
        let end = row_bytes.and_then(|b| match m.rows.checked_sub(1) {
            Some(last) => m.row(last)?.checked_add(b),
            None => Some(m.addr),
        });
        let (Some(row_bytes), Some(end)) = (row_bytes, end) else {
            return Err(format!(
                "{what}: {} runs past the 32-bit address space",
                m.describe()
            ));
        };
        if u64::from(m.rows) * u64::from(row_bytes.max(1)) > self.bytes.len() as u64 {
            return Err(format!(
                "{what}: {} holds more bytes than tile memory ({} bytes)",
                m.describe(),
                self.bytes.len()
            ));
        }
        if m.rows > 0 {
            self.offset(m.addr, end - m.addr, what)?;
        }
        Ok(Extent { row_bytes, end })
    }

    /// Reads bytes that must have been written before.
    pub fn read(&self, addr: u32, len: u32, what: &str) -> Result<&[u8], String> {
        let s = self.offset(addr, len, what)?;
        if let Some(hole) = self.first_unwritten(s, len as usize) {
            let at = self.base + hole as u32;
            return Err(format!(
                "{what}: reads never-written memory at {}",
                self.name(at)
            ));
        }
        Ok(&self.bytes[s..s + len as usize])
    }

    /// Writes bytes at superstep `step` (`None` for the host and the loader). A write into a buffer that
    /// holds data from an earlier superstep, still to be read, is refused.
    pub fn write(
        &mut self,
        addr: u32,
        data: &[u8],
        step: Option<u32>,
        what: &str,
    ) -> Result<(), String> {
        let len = u32::try_from(data.len()).map_err(|_| {
            format!(
                "{what}: {} bytes at {addr:#x} are more than a tile addresses",
                data.len()
            )
        })?;
        let s = self.offset(addr, len, what)?;
        let end = u64::from(addr) + u64::from(len);
        if let Some(step) = step
            && let Some(b) = self.live.first_live(s, addr, data.len(), step)
        {
            let b = &self.buffers[b];
            return Err(format!(
                "{what}: writes [{addr:#x}, {end:#x}) into {}, still live (step{} to step{})",
                b.label, b.first_step, b.last_step
            ));
        }
        self.bytes[s..s + data.len()].copy_from_slice(data);
        self.mark(s, data.len());
        Ok(())
    }

    /// The bitmap words covering bytes `start..start+len`, each with the mask of its bytes in range.
    fn masks(start: usize, len: usize) -> impl Iterator<Item = (usize, u64)> {
        let end = start + len;
        (start / 64..end.div_ceil(64)).map(move |w| {
            let lo = start.max(w * 64) - w * 64;
            let hi = end.min(w * 64 + 64) - w * 64;
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            (w, mask)
        })
    }

    fn mark(&mut self, start: usize, len: usize) {
        for (w, mask) in Self::masks(start, len) {
            self.written[w] |= mask;
        }
    }

    fn first_unwritten(&self, start: usize, len: usize) -> Option<usize> {
        Self::masks(start, len).find_map(|(w, mask)| {
            let missing = mask & !self.written[w];
            (missing != 0).then(|| w * 64 + missing.trailing_zeros() as usize)
        })
    }

    /// Reads a matrix, widened to f32.
    pub fn load(&self, m: &Matrix, what: &str) -> Result<Vec<f32>, String> {
        let Extent { row_bytes, .. } = self.extent(m, what)?;
        // Checked: the rows hold at most tile memory's bytes.
        let mut out = Vec::with_capacity(m.rows as usize * m.cols as usize);
        // A row's halves, widened a vector at a time (exactly: every half is a float).
        let mut halves: Vec<f16> = Vec::new();
        for at in m.rows() {
            let row = self.read(at, row_bytes, what)?;
            match m.dtype {
                DType::F16 | DType::Bool => {
                    halves.clear();
                    halves.extend(
                        row.chunks_exact(2)
                            .map(|b| f16::from_le_bytes([b[0], b[1]])),
                    );
                    let start = out.len();
                    out.resize(start + halves.len(), 0.0);
                    halves.convert_to_f32_slice(&mut out[start..]);
                }
                DType::F32 => out.extend(
                    row.chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                ),
                DType::I64 => return Err(format!("{what}: i64 is a host type, not a tile's")),
            }
        }
        Ok(out)
    }

    /// Writes a matrix from f32 values, rounded to its dtype.
    pub fn store(&mut self, m: &Matrix, data: &[f32], step: u32, what: &str) -> Result<(), String> {
        let Extent { row_bytes, .. } = self.extent(m, what)?;
        let cols = m.cols as usize;
        let mut row = Vec::with_capacity(row_bytes as usize);
        // A row's values rounded to halves a vector at a time, as `f16::from_f32` rounds each.
        let mut halves: Vec<f16> = Vec::new();
        for (r, at) in m.rows().enumerate() {
            row.clear();
            let Some(vals) = data.get(r * cols..(r + 1) * cols) else {
                return Err(format!(
                    "{what}: {} values for {}",
                    data.len(),
                    m.describe()
                ));
            };
            match m.dtype {
                DType::F16 | DType::Bool => {
                    halves.resize(vals.len(), f16::ZERO);
                    halves.convert_from_f32_slice(vals);
                    (halves.iter()).for_each(|h| row.extend_from_slice(&h.to_le_bytes()));
                }
                DType::F32 => vals
                    .iter()
                    .for_each(|v| row.extend_from_slice(&v.to_le_bytes())),
                DType::I64 => return Err(format!("{what}: i64 is a host type, not a tile's")),
            }
            self.write(at, &row, Some(step), what)?;
        }
        Ok(())
    }

    /// The highest byte written + 1 in each region (standard, interleaved), as addresses; the region's
    /// base when nothing was written there.
    pub fn used_ends(&self) -> (u32, u32) {
        let interleaved_base = self.interleaved_base;
        // Region boundaries are multiples of 64 bytes, so whole words of the bitmap belong to one region.
        let split = ((interleaved_base - self.base) as usize / 64).min(self.written.len());
        let last = |words: std::ops::Range<usize>| {
            words
                .rev()
                .find(|&w| self.written[w] != 0)
                .map(|w| self.base + (w * 64) as u32 + (64 - self.written[w].leading_zeros()))
        };
        (
            last(0..split).unwrap_or(self.base),
            last(split..self.written.len()).unwrap_or(interleaved_base),
        )
    }
}

/// One past a buffer's last byte, as u64: a damaged table cannot wrap it.
fn buffer_end(b: &BufferInfo) -> u64 {
    u64::from(b.address) + u64::from(b.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{BufferId, ValueId};
    use crate::ir::{BufferClass, BufferLabel, Rect};
    use crate::rng::SplitMix64;

    /// Every write is refused, naming the same buffer, exactly as a scan of the whole table would
    /// refuse it: buffers large and small, empty, reusing addresses across steps, straddling
    /// granules, running off either end of memory, living a step, the whole run, or just as long
    /// as the index calls short.
    #[test]
    fn a_write_is_checked_against_the_buffers_a_scan_of_the_table_finds() {
        let target = Target::preset("mk2-1500").expect("a preset");
        let (base, end) = (target.memory_base, target.memory_end);
        let mut rng = SplitMix64(11);
        let buffers: Vec<BufferInfo> = (0..600u32)
            .map(|i| {
                let address = base - 256 + rng.below(u64::from(end - base) + 512) as u32;
                let bytes = [0, 1, 7, 100, 1024, 5000][rng.below(6) as usize];
                let first_step = rng.below(200) as u32;
                let life = [0, 1, 3, 5, 63, 64, 65, 70, 300][rng.below(9) as usize];
                BufferInfo {
                    address,
                    bytes,
                    first_step,
                    last_step: first_step + life,
                    label: BufferLabel {
                        id: BufferId(i),
                        class: BufferClass::APanel,
                        value: ValueId(0),
                        rect: Rect::new(0, 1, 0, 1),
                        transposed: false,
                    },
                }
            })
            .collect();
        let mut memory = TileMemory::new(&target, buffers.clone()).expect("addresses fit u32");
        let (mut refused, mut accepted) = (0, 0);
        for _ in 0..20_000 {
            let len = [0, 1, 2, 64, 1500, 3000][rng.below(6) as usize];
            let addr = base + rng.below(u64::from(end - base) - len as u64) as u32;
            let step = rng.below(280) as u32;
            let end = u64::from(addr) + len as u64;
            let scanned = buffers.iter().find(|b| {
                u64::from(addr) < buffer_end(b)
                    && u64::from(b.address) < end
                    && b.first_step < step
                    && step <= b.last_step
            });
            let result = memory.write(addr, &vec![1; len], Some(step), "w");
            match scanned {
                Some(b) => {
                    let message = result.expect_err("a live buffer is hit");
                    assert!(
                        message.contains(&format!(" into {}, still", b.label)),
                        "{message}"
                    );
                    refused += 1;
                }
                None => {
                    result.expect("no live buffer is hit");
                    accepted += 1;
                }
            }
        }
        assert!(refused > 1000 && accepted > 1000, "{refused} {accepted}");
    }
}
