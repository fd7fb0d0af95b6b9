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
/// looks only at those whose first step is in `s - reach..s`, `reach` the longest life among them
/// (at most this); the others are few (weights, and what lives across layers) and are all looked
/// at.
const SHORT: u64 = 64;

/// Where and when a buffer of the table lives (its end within u32: [`super::TileMemory::new`]
/// refuses a table with a buffer ending past it).
#[derive(Clone, Copy)]
struct Span {
    address: u32,
    end: u32,
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
    /// Every granule's buffers, each as (first step, table index): granule `g`'s are
    /// `entries[granules[g].start..granules[g + 1].start]`, first its `long` long-lived ones, by
    /// table index, then its short-lived ones by first step and table index. The last granule
    /// record only marks the end.
    entries: Vec<(u32, u32)>,
    granules: Vec<Granule>,
}

/// One granule's place in the entries and what it knows of the steps, kept together so a write
/// reads one record a granule.
#[derive(Clone, Copy, Default)]
struct Granule {
    start: u32,
    long: u32,
    /// The longest life (`last_step - first_step`) of its short-lived buffers: one live at step
    /// `s` began no earlier than `s` less it.
    reach: u32,
    /// The step last asked about, and how many of its short-lived buffers began before it: a
    /// superstep's writes ask about one step, and the device's steps come in order.
    asked: u32,
    began: u32,
}

impl LiveIndex {
    /// The index of `buffers` in the `size` bytes of memory from `base`; a buffer's part outside
    /// that memory is in no granule, since no write reaches it.
    pub(super) fn new(base: u32, size: usize, buffers: &[BufferInfo]) -> LiveIndex {
        let spans: Vec<Span> = (buffers.iter())
            .map(|b| Span {
                address: b.address,
                end: b.address.saturating_add(b.bytes),
                first_step: b.first_step,
                last_step: b.last_step,
            })
            .collect();
        let count = size.div_ceil(GRANULE);
        // The granules a buffer overlaps: an empty one, the granule its address is in.
        let (low, high) = (u64::from(base), u64::from(base) + size as u64);
        let overlapped = |s: &Span| {
            let (address, end) = (u64::from(s.address), u64::from(s.end));
            let (start, end) = (address.max(low), end.max(address + 1).min(high));
            let first = ((start - low) / GRANULE as u64) as usize;
            (start < end).then(|| first..((end - low) as usize).div_ceil(GRANULE))
        };
        let mut granules = vec![Granule::default(); count + 1];
        for s in &spans {
            for g in overlapped(s).into_iter().flatten() {
                granules[g + 1].start += 1;
            }
        }
        for g in 0..count {
            granules[g + 1].start += granules[g].start;
        }
        let mut next: Vec<u32> = granules.iter().map(|g| g.start).collect();
        let mut entries = vec![(0u32, 0u32); granules[count].start as usize];
        for (i, s) in spans.iter().enumerate() {
            for g in overlapped(s).into_iter().flatten() {
                entries[next[g] as usize] = (s.first_step, i as u32);
                next[g] += 1;
            }
        }
        for g in 0..count {
            let run = &mut entries[granules[g].start as usize..granules[g + 1].start as usize];
            run.sort_by_key(|&(first, i)| {
                let short = spans[i as usize].short();
                (short, if short { first } else { 0 }, i)
            });
            let long = run
                .iter()
                .take_while(|&&(_, i)| !spans[i as usize].short())
                .count();
            let life = |&(_, i): &(u32, u32)| {
                let s = &spans[i as usize];
                s.last_step.saturating_sub(s.first_step)
            };
            granules[g].long = long as u32;
            granules[g].reach = run[long..].iter().map(life).max().unwrap_or(0);
        }
        LiveIndex {
            spans,
            entries,
            granules,
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
        let hits = |&(_, i): &(u32, u32)| {
            let s = &self.spans[i as usize];
            addr < u64::from(s.end)
                && u64::from(s.address) < end
                && s.first_step < step
                && step <= s.last_step
        };
        let count = self.granules.len() - 1;
        let last = (offset + len.max(1)).div_ceil(GRANULE).min(count);
        let mut first: Option<u32> = None;
        for g in (offset / GRANULE).min(last)..last {
            let (at, to) = (self.granules[g], self.granules[g + 1].start);
            let run = &self.entries[at.start as usize..to as usize];
            let (long, short) = run.split_at(at.long as usize);
            // Short-lived buffers live at `step` began within the granule's reach before it.
            let before = |&(first, _): &(u32, u32)| first < step;
            let began = match at.asked.cmp(&step) {
                std::cmp::Ordering::Equal => at.began as usize,
                std::cmp::Ordering::Less => {
                    let n = at.began as usize;
                    n + short[n..].iter().take_while(|e| before(e)).count()
                }
                std::cmp::Ordering::Greater => short.partition_point(before),
            };
            (self.granules[g].asked, self.granules[g].began) = (step, began as u32);
            let recent = short[..began].iter().rev().take_while(|&&(first, _)| {
                u64::from(first) + u64::from(at.reach) >= u64::from(step)
            });
            if let Some(&(_, i)) = long
                .iter()
                .chain(recent)
                .filter(|e| hits(e))
                .min_by_key(|e| e.1)
            {
                first = Some(first.map_or(i, |f| f.min(i)));
            }
        }
        first.map(|i| i as usize)
    }
}
