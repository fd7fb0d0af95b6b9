//! An exchange superstep, executed from what every tile's program says: its sends, its receives and
//! the horizon of the phase.
//!
//! Contract: the phase runs in five steps, each on every tile in tile order, and the first fault found
//! is the one reported. (1) Collect the sends: every tile names the same horizon, sends no two words in
//! one cycle, and holds only sends and receives. (2) A wide send takes the supertile pair's shared bus:
//! the pair mate sends nothing meanwhile. (3) Pair every receive with its send: the receiver listens to
//! one sender at a time, to a send that exists, for the bytes and the width it sends, switches its mux
//! before the data arrives, and the data arrives within the horizon. (4) A wide receive takes the
//! shared bus: the mate receives no other data meanwhile. (5) Move the data: read every source, then
//! write every destination, so no delivery sees another's bytes. Each tile is busy until its last send
//! arrives or its last word is received; a word arrives `exchange_transit_cycles` after it leaves.
//!
//! Every run, window, cycle and tile a send or receive names is the package's: a run whose end or
//! length passes u32, a window beyond its run, a cycle past u32 or a tile that does not exist is a
//! fault naming the instruction, never a wrap or a panic.

use super::{Device, Fault, fault};
use crate::ids::TileId;
use crate::isa::{Instr, Receive, Run, Send};
use crate::target::Target;
use rayon::prelude::*;
use std::collections::BTreeMap;

impl Device {
    /// Executes exchange superstep `step` on every tile; returns each tile's busy cycles.
    pub(super) fn exchange(&mut self, step: usize) -> Result<Vec<u32>, Fault> {
        let mut busy = vec![0u32; self.tiles.len()];
        let sends = self.collect_sends(step, &mut busy)?;
        self.check_wide_sends(step, &sends)?;
        let receives = self.collect_receives(step, &sends, &mut busy)?;
        self.check_wide_receives(step, &receives.spans)?;
        let payloads = self.read_payloads(step, &receives.deliveries)?;
        self.deliver(step, &receives.deliveries, &payloads)?;
        Ok(busy)
    }

    /// Every tile's sends, checked for overlap per tile, and the phase's horizon; a sender is busy until
    /// its last word arrives.
    fn collect_sends(&self, step: usize, busy: &mut [u32]) -> Result<Sends, Fault> {
        let transit = u64::from(self.target.exchange_transit_cycles);
        let mut sends = Sends {
            by_start: BTreeMap::new(),
            intervals: vec![Vec::new(); self.tiles.len()],
            horizon: None,
        };
        for (t, tile) in self.tiles.iter().enumerate() {
            let mut last_end = 0u64;
            for instr in &tile.steps[step] {
                match instr {
                    Instr::Exchange { horizon: h, .. } => {
                        if *sends.horizon.get_or_insert(*h) != *h {
                            return Err(fault(
                                t,
                                step,
                                0,
                                format!("exchange horizon {h} differs from other tiles'"),
                            ));
                        }
                    }
                    Instr::Send(Send {
                        start,
                        skip,
                        bytes,
                        run,
                        wide,
                    }) => {
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
                        last_end = u64::from(*start) + transfer_cycles(&self.target, *bytes, *wide);
                        let arrives = u32::try_from(last_end + transit).map_err(|_| {
                            let message = format!(
                                "the send at cycle {start} of {bytes} bytes arrives at cycle {}, past the phase's 32-bit count",
                                last_end + transit
                            );
                            fault(t, step, u64::from(*start), message)
                        })?;
                        busy[t] = busy[t].max(arrives);
                        sends.intervals[t].push((u64::from(*start), last_end));
                        sends.by_start.insert(
                            (t, *start),
                            Sent {
                                skip: *skip,
                                bytes: *bytes,
                                run: *run,
                                wide: *wide,
                            },
                        );
                    }
                    Instr::Receive(_) => {}
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
        Ok(sends)
    }

    /// A wide send holds the supertile pair's shared bus: the pair mate must not send meanwhile.
    fn check_wide_sends(&self, step: usize, sends: &Sends) -> Result<(), Fault> {
        for (&(t, start), sent) in &sends.by_start {
            if !sent.wide || mate(t) >= self.tiles.len() {
                continue;
            }
            let end = u64::from(start) + transfer_cycles(&self.target, sent.bytes, true);
            if let Some(&(a, b)) = sends.intervals[mate(t)]
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
        Ok(())
    }

    /// Receives: each must listen to a real send, one sender at a time, and end within the horizon; a
    /// receiver is busy until its last word arrives.
    fn collect_receives(
        &self,
        step: usize,
        sends: &Sends,
        busy: &mut [u32],
    ) -> Result<Receives, Fault> {
        let transit = u64::from(self.target.exchange_transit_cycles);
        let mut receives = Receives {
            deliveries: vec![Vec::new(); self.tiles.len()],
            spans: vec![Vec::new(); self.tiles.len()],
        };
        for (t, tile) in self.tiles.iter().enumerate() {
            let mut listening: Option<(u64, TileId)> = None;
            let of_tile = tile.steps[step].iter().filter_map(|i| match i {
                Instr::Receive(r) => Some(*r),
                _ => None,
            });
            for r in of_tile {
                let s = self.matching_send(t, step, &r, listening, sends)?;
                let cycle = u64::from(r.sent) + transit;
                let until = cycle + transfer_cycles(&self.target, r.bytes, r.wide);
                let from = r.from;
                listening = Some((until, from));
                if let Some(h) = sends.horizon
                    && until > u64::from(h)
                {
                    return Err(fault(
                        t,
                        step,
                        until,
                        format!("data from {from} arrives after the phase's horizon {h}"),
                    ));
                }
                let arrives = u32::try_from(until).map_err(|_| {
                    let message = format!(
                        "the receive from {from} sent at cycle {} arrives at cycle {until}, past the phase's 32-bit count",
                        r.sent
                    );
                    fault(t, step, until, message)
                })?;
                busy[t] = busy[t].max(arrives);
                receives.spans[t].push((u64::from(r.switch), until, from.index(), r.sent, r.wide));
                receives.deliveries[t].push(Delivery {
                    from: from.index(),
                    cycle,
                    source: s.run,
                    destination: r.run,
                    skip: r.skip,
                    bytes: r.bytes,
                });
            }
        }
        Ok(receives)
    }

    /// The send receive `r` on tile `t` listens to, when the tile has finished listening to the sender
    /// before (`listening`: until when, and to whom), the send exists, its bytes and width are the ones
    /// expected, and the mux switches to it before its data arrives.
    fn matching_send<'s>(
        &self,
        t: usize,
        step: usize,
        r: &Receive,
        listening: Option<(u64, TileId)>,
        sends: &'s Sends,
    ) -> Result<&'s Sent, Fault> {
        let tile = &self.tiles[t];
        let switch = u64::from(self.target.mux_switch_cycles);
        let Receive {
            switch: sw,
            from,
            sent,
            skip,
            bytes,
            run,
            wide,
        } = *r;
        let cycle = u64::from(sent) + u64::from(self.target.exchange_transit_cycles);
        if let Some((until, previous)) = listening
            && u64::from(sw) < until
        {
            return Err(fault(
                t,
                step,
                u64::from(sw),
                format!(
                    "two senders reach this tile at once: it switches to {from} at cycle {sw} while {previous}'s data arrives until cycle {until} (receive into {})",
                    tile.memory.name(run.offset)
                ),
            ));
        }
        let Some(s) = sends.by_start.get(&(from.index(), sent)) else {
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
        if (s.skip, s.bytes) != (skip, bytes) {
            return Err(fault(
                t,
                step,
                cycle,
                format!(
                    "expects bytes {skip}..{} from {from}, which sends bytes {}..{}",
                    u64::from(skip) + u64::from(bytes),
                    s.skip,
                    u64::from(s.skip) + u64::from(s.bytes)
                ),
            ));
        }
        if s.wide != wide {
            return Err(fault(
                t,
                step,
                cycle,
                format!(
                    "receives at {} B/cycle what {from} sends at {} B/cycle",
                    if wide { 8 } else { 4 },
                    if s.wide { 8 } else { 4 }
                ),
            ));
        }
        if u64::from(sw) + switch > cycle {
            return Err(fault(
                t,
                step,
                u64::from(sw),
                format!("mux switch to {from} at cycle {sw} comes after its data (cycle {cycle})"),
            ));
        }
        Ok(s)
    }

    /// A wide receive takes the pair's shared bus: the mate must not receive other data meanwhile.
    fn check_wide_receives(&self, step: usize, spans: &[Vec<ReceiveSpan>]) -> Result<(), Fault> {
        for (t, intervals) in spans.iter().enumerate() {
            for &(a, b, from, sent, wide) in intervals {
                if !wide || mate(t) >= self.tiles.len() {
                    continue;
                }
                let clash = spans[mate(t)]
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
        Ok(())
    }

    /// Reads every delivery's bytes from its sender's memory, per receiving tile.
    fn read_payloads(
        &self,
        step: usize,
        deliveries: &[Vec<Delivery>],
    ) -> Result<Vec<Vec<Vec<u8>>>, Fault> {
        let tiles = &self.tiles;
        deliveries
            .par_iter()
            .map(|list| {
                list.iter()
                    .map(|d| {
                        let Some(sender) = tiles.get(d.from) else {
                            let message = format!("exchange send: no tile{} on the chip", d.from);
                            return Err(fault(0, step, d.cycle, message));
                        };
                        let memory = &sender.memory;
                        // Checked against the sender's memory piece by piece as it is read.
                        let mut out = Vec::new();
                        for (at, len) in window(&d.source, d.skip, d.bytes, "exchange send")
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
            .collect::<Result<_, _>>()
    }

    /// Writes every delivery's bytes into its receiver's memory. Faults are collected per tile and the
    /// lowest tile's is reported, whatever the threads did.
    fn deliver(
        &mut self,
        step: usize,
        deliveries: &[Vec<Delivery>],
        payloads: &[Vec<Vec<u8>>],
    ) -> Result<(), Fault> {
        self.tiles
            .par_iter_mut()
            .zip(deliveries.par_iter().zip(payloads.par_iter()))
            .enumerate()
            .map(|(t, (tile, (list, data)))| {
                for (d, bytes) in list.iter().zip(data) {
                    let mut rest = bytes.as_slice();
                    for (at, len) in window(&d.destination, d.skip, d.bytes, "exchange receive")
                        .map_err(|m| fault(t, step, d.cycle, m))?
                    {
                        // Both windows hold `d.bytes` bytes, checked; a shorter payload is a fault.
                        let Some((piece, tail)) = rest.split_at_checked(len as usize) else {
                            let message = format!(
                                "exchange receive: {} bytes from tile{} for a window of {}",
                                bytes.len(),
                                d.from,
                                d.bytes
                            );
                            return Err(fault(t, step, d.cycle, message));
                        };
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
            .collect::<Result<(), Fault>>()
    }
}

/// Cycles to move `bytes`: a word per cycle, two over a supertile pair's shared bus.
fn transfer_cycles(target: &Target, bytes: u32, wide: bool) -> u64 {
    target
        .exchange_words(u64::from(bytes))
        .div_ceil(1 + u64::from(wide))
}

/// The other tile of tile `t`'s supertile pair.
fn mate(t: usize) -> usize {
    t ^ 1
}

/// The phase's sends: by (tile, start cycle), as receivers look them up; each tile's busy intervals
/// (start, end) in program order; the horizon every tile's `Exchange` names.
struct Sends {
    by_start: BTreeMap<(usize, u32), Sent>,
    intervals: Vec<Vec<(u64, u64)>>,
    horizon: Option<u32>,
}

/// A send as receivers look it up.
#[derive(Clone, Copy)]
struct Sent {
    skip: u32,
    bytes: u32,
    run: Run,
    wide: bool,
}

/// The phase's receives, per receiving tile: what each delivers, and when each keeps the tile busy.
struct Receives {
    deliveries: Vec<Vec<Delivery>>,
    spans: Vec<Vec<ReceiveSpan>>,
}

/// A receive's busy cycles (switch to last arrival), its sender and send cycle, and whether it is wide.
type ReceiveSpan = (u64, u64, usize, u32, bool);

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

/// The pieces of `run` holding bytes `skip..skip+bytes` of its stream, once the run's length and end
/// fit in u32 and the window lies within its stream.
fn window<'r>(
    run: &'r Run,
    skip: u32,
    bytes: u32,
    what: &str,
) -> Result<impl Iterator<Item = (u32, u32)> + 'r, String> {
    let shape = || {
        let Run {
            offset,
            bytes,
            count,
            stride,
        } = *run;
        format!("the run at {offset:#x} of {count} pieces of {bytes} bytes {stride} apart")
    };
    let Some(total) = run.total() else {
        return Err(format!("{what}: {} holds more than 2^32 bytes", shape()));
    };
    if run.end().is_none() && run.count > 0 {
        return Err(format!(
            "{what}: {} ends past the 32-bit address space",
            shape()
        ));
    }
    let end = u64::from(skip) + u64::from(bytes);
    if end > u64::from(total) {
        return Err(format!(
            "{what}: bytes {skip}..{end} lie beyond the {total} bytes of {}",
            shape()
        ));
    }
    Ok(run.window(skip, bytes))
}
