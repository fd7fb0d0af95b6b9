//! Which buffer of a tile's table a write at a superstep hits while it is still live: the buffer
//! table indexed by where the buffers lie and when they live, so a write is checked against the few
//! buffers that could hold it and not the whole table (a 12-layer encoder's tiles hold about a
//! thousand buffers each).
//!
//! Contract: [`LiveIndex::first_live`] finds exactly what a scan of the table in order would find:
//! the first buffer, by table index, that overlaps the write's bytes (an empty buffer, if its
//! address lies strictly inside them) and is live at the step (`first_step < step <= last_step`).
//! Whatever the table holds (buffers overlapping, empty, running off either end of memory, living
//! the whole run), only the time it takes depends on it.

use crate::ir::BufferInfo;

/// Bytes of tile memory a granule of the index covers.
const GRANULE: usize = 1024;
/// Steps within which a short-lived buffer's life ends: one with `last_step - first_step` at most
/// this. A granule's short-lived buffers are sorted by their first step, so a write at step `s`
/// looks only at those whose first step is in `s - SHORT..s`; the others are few (weights, and
/// what lives across layers) and are all looked at.
const SHORT: u64 = 64;

/// Where and when a buffer of the table lives.
#[derive(Clone, Copy)]
struct Span {
    address: u64,
    end: u64,
    first_step: u32,
    last_step: u32,
}

impl Span {
    fn short(&self) -> bool {
        u64::from(self.last_step).saturating_sub(u64::from(self.first_step)) <= SHORT
    }
}

pub(super) struct LiveIndex {
    spans: Vec<Span>,
    /// Granule `g`'s buffers are `indices[starts[g]..starts[g + 1]]`: first its `longs[g]`
    /// long-lived ones, by table index, then its short-lived ones by first step and table index.
    starts: Vec<u32>,
    longs: Vec<u32>,
    indices: Vec<u32>,
    /// Per granule, the step last asked about and how many of its short-lived buffers began
    /// before it: a superstep's writes ask about one step, and the device's steps come in order.
    began: Vec<(u32, u32)>,
}

impl LiveIndex {
    /// The index of `buffers` in the `size` bytes of memory from `base`; a buffer's part outside
    /// that memory is in no granule, since no write reaches it.
    pub(super) fn new(base: u32, size: usize, buffers: &[BufferInfo]) -> LiveIndex {
        let spans: Vec<Span> = (buffers.iter())
            .map(|b| Span {
                address: u64::from(b.address),
                end: u64::from(b.address) + u64::from(b.bytes),
                first_step: b.first_step,
                last_step: b.last_step,
            })
            .collect();
        let count = size.div_ceil(GRANULE);
        // The granules a buffer overlaps: an empty one, the granule its address is in.
        let (low, high) = (u64::from(base), u64::from(base) + size as u64);
        let granules = |s: &Span| {
            let (start, end) = (s.address.max(low), s.end.max(s.address + 1).min(high));
            let first = ((start - low) / GRANULE as u64) as usize;
            (start < end).then(|| first..((end - low) as usize).div_ceil(GRANULE))
        };
        let mut starts = vec![0u32; count + 1];
        for s in &spans {
            for g in granules(s).into_iter().flatten() {
                starts[g + 1] += 1;
            }
        }
        for g in 0..count {
            starts[g + 1] += starts[g];
        }
        let mut next = starts.clone();
        let mut indices = vec![0u32; starts[count] as usize];
        for (i, s) in spans.iter().enumerate() {
            for g in granules(s).into_iter().flatten() {
                indices[next[g] as usize] = i as u32;
                next[g] += 1;
            }
        }
        let mut longs = vec![0u32; count];
        for g in 0..count {
            let run = &mut indices[starts[g] as usize..starts[g + 1] as usize];
            run.sort_by_key(|&i| {
                let s = &spans[i as usize];
                (s.short(), if s.short() { s.first_step } else { 0 }, i)
            });
            longs[g] = run
                .iter()
                .take_while(|&&i| !spans[i as usize].short())
                .count() as u32;
        }
        LiveIndex {
            spans,
            starts,
            longs,
            indices,
            began: vec![(0, 0); count],
        }
    }

    /// The first buffer of the table (by index) live at `step` and overlapping the `len` bytes at
    /// address `addr`, which lie `offset` bytes into memory.
    pub(super) fn first_live(
        &mut self,
        offset: usize,
        addr: u32,
        len: usize,
        step: u32,
    ) -> Option<usize> {
        let (addr, end) = (u64::from(addr), u64::from(addr) + len as u64);
        let hits = |&i: &u32| {
            let s = &self.spans[i as usize];
            addr < s.end && s.address < end && s.first_step < step && step <= s.last_step
        };
        let last = (offset + len.max(1))
            .div_ceil(GRANULE)
            .min(self.longs.len());
        let mut first: Option<u32> = None;
        for g in (offset / GRANULE).min(last)..last {
            let run = &self.indices[self.starts[g] as usize..self.starts[g + 1] as usize];
            let (long, short) = run.split_at(self.longs[g] as usize);
            // Short-lived buffers live at `step` began within SHORT steps before it.
            let before = |i: &u32| self.spans[*i as usize].first_step < step;
            let began = match self.began[g] {
                (asked, n) if asked == step => n as usize,
                (asked, n) if asked < step => {
                    n as usize + short[n as usize..].iter().take_while(|i| before(i)).count()
                }
                _ => short.partition_point(before),
            };
            self.began[g] = (step, began as u32);
            let recent = short[..began].iter().rev().take_while(|&&i| {
                u64::from(self.spans[i as usize].first_step) + SHORT >= u64::from(step)
            });
            if let Some(&i) = long.iter().chain(recent).filter(|i| hits(i)).min() {
                first = Some(first.map_or(i, |f| f.min(i)));
            }
        }
        first.map(|i| i as usize)
    }
}
