//! An exchange superstep, executed from what every tile's program says: its sends, its mux switches
//! with the receives they arm, and its delays, each issuing when the tile's instruction stream reaches
//! it ([`timeline`]). No instruction names a cycle: when a send leaves and when a receiver listens
//! follow from the code, as on the hardware, whose exchange is compiled and time-deterministic.
//!
//! Contract: the phase runs in five steps, each on every tile in tile order, and the first fault found
//! is the one reported. (1) Time every tile's code: each instruction's issue cycle, each send's words
//! and each switch's listening cycle; anything but exchange code is a fault. (2) A wide send takes the
//! supertile pair's shared bus: the pair mate sends nothing meanwhile. (3) Pair every receive with the
//! send it takes: packets name no destination, so a receive takes the first send of the tile its mux
//! listens to whose words reach it once the mux listens. That send must exist, must not have begun
//! arriving before the mux listened (the switch came too late), and must carry the bytes and the width
//! the receive expects; and the tile listens to one sender at a time: a switch issues only once the
//! data of the receive before it has arrived. (4) A wide receive takes the shared bus: the mate
//! receives no other data meanwhile. (5) Move the data: read every source, then write every
//! destination, so no delivery sees another's bytes. A word arrives `exchange_transit_cycles` after it
//! leaves. Each tile is busy until its code ends, its last send arrives and its last word is received.
//!
//! Every run, window, cycle and tile a send or receive names is the package's: a run whose end or
//! length passes u32, a window beyond its run, a cycle past u32 or a tile that does not exist is a
//! fault naming the instruction, never a wrap or a panic.

mod timeline;

use super::{Device, Fault, fault};
use crate::isa::{Instr, Receive, Run};
use crate::target::Target;
use rayon::prelude::*;
use timeline::{Armed, Issued, Timeline, named, timeline};

impl Device {
    /// Executes exchange superstep `step` on every tile, `program` its instructions per tile; returns
    /// each tile's busy cycles.
    pub(super) fn exchange(
        &mut self,
        step: usize,
        program: &[Vec<Instr>],
    ) -> Result<Vec<u32>, Fault> {
        let lines: Vec<Timeline> = (program.par_iter().enumerate())
            .map(|(t, instrs)| timeline(&self.target, t, step, instrs))
            .collect::<Vec<Result<_, _>>>()
            .into_iter()
            .collect::<Result<_, _>>()?;
        self.check_wide_sends(step, &lines)?;
        let mut busy = self.senders_busy(step, &lines)?;
        let receives = self.receives(step, &lines)?;
        for (t, r) in receives.iter().enumerate() {
            busy[t] = busy[t].max(r.busy);
        }
        self.check_wide_receives(step, &receives)?;
        let payloads = self.read_payloads(step, &receives)?;
        self.deliver(step, &receives, &payloads)?;
        Ok(busy)
    }

    /// Cycles a word takes from its sender to its receiver: one figure for every path
    /// (`Target::exchange_transit_cycles` says why).
    fn transit(&self) -> u64 {
        u64::from(self.target.exchange_transit_cycles)
    }

    /// A wide send holds the supertile pair's shared bus: the pair mate must not send meanwhile.
    fn check_wide_sends(&self, step: usize, lines: &[Timeline]) -> Result<(), Fault> {
        for (t, line) in lines.iter().enumerate() {
            let Some(other) = lines.get(mate(t)) else {
                continue;
            };
            for s in line.sends.iter().filter(|s| s.send.wide) {
                // The mate's sends rise in start and end: its first send overlapping this one.
                let clash = overlapping(&other.sends, s.at, s.end(), |m| (m.at, m.end())).first();
                if let Some(m) = clash {
                    let message = format!(
                        "{} sends wide over the supertile bus at cycles {}..{} while its pair mate \
                         tile{} sends at {}..{} ({})",
                        named(s.instr, &s.send),
                        s.at,
                        s.end(),
                        mate(t),
                        m.at,
                        m.end(),
                        named(m.instr, &m.send)
                    );
                    return Err(fault(t, step, s.at, message));
                }
            }
        }
        Ok(())
    }

    /// Each tile busy until its code ends and its last send arrives, within the phase's 32-bit count.
    fn senders_busy(&self, step: usize, lines: &[Timeline]) -> Result<Vec<u32>, Fault> {
        let transit = self.transit();
        let mut busy = vec![0u32; lines.len()];
        for (t, line) in lines.iter().enumerate() {
            let last = line
                .sends
                .iter()
                .map(|s| (s.end() + transit, Some(s)))
                .chain([(line.end, None)]);
            for (until, send) in last {
                busy[t] = busy[t].max(u32::try_from(until).map_err(|_| {
                    let what = send.map_or("its code".to_string(), |s| named(s.instr, &s.send));
                    let message =
                        format!("{what} arrives at cycle {until}, past the phase's 32-bit count");
                    fault(t, step, until, message)
                })?);
            }
        }
        Ok(busy)
    }

    /// Every tile's receives paired with the sends they take (module docs, step 3).
    fn receives(&self, step: usize, lines: &[Timeline]) -> Result<Vec<TileReceives>, Fault> {
        (0..lines.len())
            .into_par_iter()
            .map(|t| self.tile_receives(t, step, lines))
            .collect::<Vec<Result<_, _>>>()
            .into_iter()
            .collect()
    }

    /// Tile `t`'s receives, in program order, each with the send it takes.
    fn tile_receives(
        &self,
        t: usize,
        step: usize,
        lines: &[Timeline],
    ) -> Result<TileReceives, Fault> {
        let mut out = TileReceives::default();
        // Until when the tile takes the data of its previous receive, and that receive.
        let mut listening: Option<(u64, &Armed)> = None;
        for a in &lines[t].switches {
            if let Some((until, previous)) = listening
                && a.at < until
            {
                let message = format!(
                    "two senders reach this tile at once: {} switches the mux to {} at cycle {} while \
                     the data of {} from {} arrives until cycle {until} (receive into {})",
                    named(a.instr, &a.receive),
                    a.receive.from,
                    a.at,
                    named(previous.instr, &previous.receive),
                    previous.receive.from,
                    self.tiles[t].memory.name(a.receive.run.offset)
                );
                return Err(fault(t, step, a.at, message));
            }
            let (from, k, s) = self.taken(t, step, a, lines)?;
            let until = s.end() + self.transit();
            let arrives = u32::try_from(until).map_err(|_| {
                let message = format!(
                    "{} receives until cycle {until}, past the phase's 32-bit count",
                    named(a.instr, &a.receive)
                );
                fault(t, step, until, message)
            })?;
            out.busy = out.busy.max(arrives);
            listening = Some((until, a));
            out.spans.push(Span {
                from: a.at,
                until,
                sender: from,
                send: k,
                wide: a.receive.wide,
            });
            out.deliveries.push(Delivery {
                from,
                cycle: s.at + self.transit(),
                source: s.send.run,
                destination: a.receive.run,
                skip: a.receive.skip,
                bytes: a.receive.bytes,
            });
        }
        Ok(out)
    }

    /// The send switch `a` on tile `t` takes (module docs, step 3): its sender, its index among the
    /// sender's sends, and the send.
    fn taken<'l>(
        &self,
        t: usize,
        step: usize,
        a: &Armed,
        lines: &'l [Timeline],
    ) -> Result<(usize, usize, &'l Issued), Fault> {
        let Armed {
            instr,
            listens,
            receive,
            ..
        } = *a;
        let Receive {
            from,
            skip,
            bytes,
            run,
            wide,
        } = receive;
        // Messages are made only for a fault.
        let what = || named(instr, &receive);
        let into = || self.tiles[t].memory.name(run.offset);
        let Some(sender) = lines.get(from.index()) else {
            let message = format!("{} listens to {from}, which is not on the chip", what());
            return Err(fault(t, step, listens, message));
        };
        let transit = self.transit();
        // The sender's sends leave in order, each after the one before: their last arrivals rise.
        let k = sender
            .sends
            .partition_point(|s| s.end() + transit <= listens);
        let Some(s) = sender.sends.get(k) else {
            let message = format!(
                "{} listens to {from} from cycle {listens}, but {from} sends nothing that arrives \
                 from then on: data meant for this tile arrives while it listens elsewhere \
                 (receive into {})",
                what(),
                into()
            );
            return Err(fault(t, step, listens, message));
        };
        let arrives = s.at + transit;
        let sent = || named(s.instr, &s.send);
        if arrives < listens {
            let message = format!(
                "{}: the mux listens to {from} from cycle {listens}, after the data of {from}'s {} \
                 began arriving at cycle {arrives}: the switch comes too late (receive into {})",
                what(),
                sent(),
                into()
            );
            return Err(fault(t, step, a.at, message));
        }
        if (s.send.skip, s.send.bytes) != (skip, bytes) {
            let message = format!(
                "{} expects bytes {skip}..{} from {from}, but the first data {from} sends to \
                 arrive once the mux listens is its {}, bytes {}..{}, from cycle {arrives}",
                what(),
                u64::from(skip) + u64::from(bytes),
                sent(),
                s.send.skip,
                u64::from(s.send.skip) + u64::from(s.send.bytes)
            );
            return Err(fault(t, step, arrives, message));
        }
        if s.send.wide != wide {
            let message = format!(
                "{} receives at {} B/cycle what {from}'s {} sends at {} B/cycle",
                what(),
                if wide { 8 } else { 4 },
                sent(),
                if s.send.wide { 8 } else { 4 }
            );
            return Err(fault(t, step, arrives, message));
        }
        Ok((from.index(), k, s))
    }

    /// A wide receive takes the pair's shared bus: the mate must not receive other data meanwhile.
    fn check_wide_receives(&self, step: usize, receives: &[TileReceives]) -> Result<(), Fault> {
        for (t, r) in receives.iter().enumerate() {
            let Some(other) = receives.get(mate(t)) else {
                continue;
            };
            for span in r.spans.iter().filter(|s| s.wide) {
                let (a, b) = (span.from, span.until);
                // A tile's receives, checked not to overlap, rise in start and end.
                let clash = overlapping(&other.spans, a, b, |m| (m.from, m.until))
                    .iter()
                    .find(|m| (m.sender, m.send) != (span.sender, span.send));
                if let Some(m) = clash {
                    let message = format!(
                        "wide receive over the supertile bus at cycles {a}..{b} while its pair mate \
                         tile{} receives other data from tile{} at {}..{}",
                        mate(t),
                        m.sender,
                        m.from,
                        m.until
                    );
                    return Err(fault(t, step, a, message));
                }
            }
        }
        Ok(())
    }

    /// Reads every delivery's bytes from its sender's memory, per receiving tile: its deliveries'
    /// bytes one after another, and where each ends.
    fn read_payloads(
        &self,
        step: usize,
        receives: &[TileReceives],
    ) -> Result<Vec<Payloads>, Fault> {
        let tiles = &self.tiles;
        receives
            .par_iter()
            .map(|r| {
                let total = r.deliveries.iter().map(|d| d.bytes as usize).sum();
                let mut out = Payloads {
                    bytes: Vec::with_capacity(total),
                    ends: Vec::with_capacity(r.deliveries.len()),
                };
                for d in &r.deliveries {
                    let memory = &tiles[d.from].memory;
                    // Checked against the sender's memory piece by piece as it is read.
                    for (at, len) in window(&d.source, d.skip, d.bytes, "exchange send")
                        .map_err(|m| fault(d.from, step, d.cycle, m))?
                    {
                        out.bytes.extend_from_slice(
                            memory
                                .read(at, len, "exchange send")
                                .map_err(|m| fault(d.from, step, d.cycle, m))?,
                        );
                    }
                    out.ends.push(out.bytes.len());
                }
                Ok(out)
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
        receives: &[TileReceives],
        payloads: &[Payloads],
    ) -> Result<(), Fault> {
        self.tiles
            .par_iter_mut()
            .zip(receives.par_iter().zip(payloads.par_iter()))
            .enumerate()
            .map(|(t, (tile, (r, data)))| {
                let starts = std::iter::once(0).chain(data.ends.iter().copied());
                for (d, (start, end)) in r.deliveries.iter().zip(starts.zip(&data.ends)) {
                    let bytes = &data.bytes[start..*end];
                    let mut rest = bytes;
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

/// Cycles to move `bytes`: the exchange's bytes a cycle (a word), twice that over a supertile pair's
/// shared bus.
fn transfer_cycles(target: &Target, bytes: u32, wide: bool) -> u64 {
    let per_cycle = u64::from(target.exchange_bytes_per_cycle.max(1)) * (1 + u64::from(wide));
    u64::from(bytes).div_ceil(per_cycle)
}

/// The other tile of tile `t`'s supertile pair.
fn mate(t: usize) -> usize {
    t ^ 1
}

/// The items of `list` overlapping cycles `a..b` (`start < b && a < end`), for a list whose starts
/// and ends both rise (a tile's sends; its receives once checked not to overlap): a run of it, in
/// its order, found by two binary searches.
fn overlapping<T>(list: &[T], a: u64, b: u64, span: impl Fn(&T) -> (u64, u64)) -> &[T] {
    let from = list.partition_point(|m| span(m).1 <= a);
    let to = list.partition_point(|m| span(m).0 < b);
    &list[from..to.max(from)]
}

/// What one tile receives in a superstep: every delivery's bytes one after another, and the end of
/// each in them.
struct Payloads {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// One tile's receives: what each delivers, the cycles each keeps the tile's port, and until when the
/// last word arrives.
#[derive(Default)]
struct TileReceives {
    deliveries: Vec<Delivery>,
    spans: Vec<Span>,
    busy: u32,
}

/// A receive's hold on the tile's port, from its switch to its last word, and the send it takes (its
/// sender and its index among the sender's sends).
struct Span {
    from: u64,
    until: u64,
    sender: usize,
    send: usize,
    wide: bool,
}

/// One piece of an exchange as the receiver sees it: bytes `skip..skip+bytes` of the stream read from
/// `source` on tile `from`, written to the same bytes of the stream of `destination`; `cycle` its
/// first word's arrival.
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

#[cfg(test)]
mod tests {
    use super::overlapping;
    use crate::rng::SplitMix64;

    /// Over lists laid out as a tile's sends are (each starting at or after the one before ends, some
    /// empty, some touching), the run `overlapping` finds is exactly what a scan in order keeps.
    #[test]
    fn overlapping_finds_what_a_scan_of_the_list_finds() {
        let mut rng = SplitMix64(5);
        for _ in 0..500 {
            let mut at = rng.below(4);
            let list: Vec<(u64, u64)> = (0..rng.below(12))
                .map(|_| {
                    let span = (at, at + [0, 1, 3, 8][rng.below(4) as usize]);
                    at = span.1 + [0, 0, 1, 5][rng.below(4) as usize];
                    span
                })
                .collect();
            for _ in 0..20 {
                let a = rng.below(at + 4);
                let b = a + rng.below(10);
                let scanned: Vec<(u64, u64)> = (list.iter().copied())
                    .filter(|&(start, end)| start < b && a < end)
                    .collect();
                assert_eq!(
                    overlapping(&list, a, b, |&s| s),
                    scanned,
                    "{list:?} {a}..{b}"
                );
            }
        }
    }
}
