//! An exchange phase's schedule lowered to each tile's exchange code: the instructions whose issue
//! times carry out the schedule, as the hardware's compiled exchange does (a sender issues its sends
//! at compiled cycles, padding with delays; a receiver switches its mux at a compiled cycle).
//!
//! Contract: per tile taking part, in tile order, an `Exchange` label, then one instruction per
//! scheduled event in cycle order: a send at its piece's start cycle, a mux switch (`Receive`) at
//! `transit - switch` before its piece's first word arrives, a send and a switch in one cycle as one
//! `SendReceive`. Timed as the ISA times them (`crate::isa::Instr`): the tile issues an instruction
//! every `exchange_issue_cycles` from cycle 0, a send waits for the outgoing port to be free. So
//! between two events a `Delay` pads to the later one's cycle; a send that follows a send ending in
//! its own cycle needs none (back to back). Every event of a schedule that passes the checker
//! (`crate::exchange::check`) issues exactly at its cycle when the issue cost is one cycle; an event
//! that cannot (two in one cycle that are not a send and a switch, or events closer than the issue
//! cost) is an [`Unplaceable`] error, never code that issues late. The code depends on the schedule
//! and the runs only: no address moves a delay.

use crate::exchange::Schedule;
use crate::ids::{ExchangeId, TileId};
use crate::isa::{Instr, Receive, Run, Send};
use crate::target::Target;

/// A transfer bound to memory: the source tile and the run it reads, each destination tile and the run
/// it writes.
pub struct BoundTransfer {
    pub source: TileId,
    pub source_run: Run,
    pub bytes: u32,
    pub destinations: Vec<(TileId, Run)>,
}

/// An event of a schedule that the tile's code cannot issue at its cycle.
#[derive(Debug, thiserror::Error)]
#[error(
    "ex{} {tile}: its exchange instruction `{instr}` is scheduled at cycle {cycle}, but the tile can \
     issue it only at cycle {earliest} or, after a delay, from cycle {} (an instruction every {issue} \
     cycles, a send once the previous one has left)",
    .phase.0,
    .earliest + u64::from(*.issue)
)]
pub struct Unplaceable {
    pub phase: ExchangeId,
    pub tile: TileId,
    pub instr: String,
    pub cycle: u64,
    pub earliest: u64,
    pub issue: u32,
}

/// What a tile does at one cycle of the schedule: a send (with the cycles its words hold the
/// outgoing port), a mux switch, or both.
struct Event {
    cycle: u32,
    send: Option<(Send, u32)>,
    receive: Option<Receive>,
}

impl Event {
    fn instr(&self) -> Option<Instr> {
        match (self.send, self.receive) {
            (Some((s, _)), Some(r)) => Some(Instr::SendReceive(Box::new((s, r)))),
            (Some((s, _)), None) => Some(Instr::Send(s)),
            (None, Some(r)) => Some(Instr::Receive(r)),
            (None, None) => None,
        }
    }
}

/// The exchange code of one phase (module docs).
pub fn exchange_programs(
    phase: ExchangeId,
    schedule: &Schedule,
    transfers: &[BoundTransfer],
    target: &Target,
) -> Result<Vec<(TileId, Vec<Instr>)>, Unplaceable> {
    let tiles = target.tiles as usize;
    let word = target.exchange_bytes_per_cycle;
    // The mux switch issues this long before the piece's first word arrives.
    let lead = target
        .exchange_transit_cycles
        .saturating_sub(target.mux_switch_cycles);
    // Each piece's bytes of its transfer, and the destinations it serves.
    let span = |piece: &crate::exchange::Piece| {
        let t = &transfers[piece.transfer as usize];
        let skip = piece.word.saturating_mul(word);
        let bytes = piece
            .words
            .saturating_mul(word)
            .min(t.bytes.saturating_sub(skip));
        let served = match piece.destinations {
            None => &t.destinations[..],
            Some((a, b)) => &t.destinations[a as usize..b as usize],
        };
        (t, skip, bytes, served)
    };
    // Every tile's sends and switches in two flat lists, a tile's together in piece order: counted
    // first, so each list is allocated once.
    let (mut send_count, mut switch_count) = (vec![0u32; tiles + 1], vec![0u32; tiles + 1]);
    for piece in &schedule.pieces {
        let (t, _, _, served) = span(piece);
        send_count[t.source.index() + 1] += 1;
        for &(tile, _) in served {
            switch_count[tile.index() + 1] += 1;
        }
    }
    for counts in [&mut send_count, &mut switch_count] {
        for tile in 0..tiles {
            counts[tile + 1] += counts[tile];
        }
    }
    // `send_count[t]..send_count[t + 1]` are tile t's (likewise switches); `next` where each tile's
    // next one goes.
    let mut next_send = send_count.clone();
    let mut next_switch = switch_count.clone();
    // Every slot is overwritten below.
    let run = Run {
        offset: 0,
        bytes: 0,
        count: 0,
        stride: 0,
    };
    let (skip, bytes, wide) = (0, 0, false);
    let blank_send = Send {
        skip,
        bytes,
        run,
        wide,
    };
    let blank_switch = Receive {
        from: TileId(0),
        skip,
        bytes,
        run,
        wide,
    };
    let mut sends = vec![(0u32, blank_send, 0u32); send_count[tiles] as usize];
    let mut switches = vec![(0u32, blank_switch); switch_count[tiles] as usize];
    for piece in &schedule.pieces {
        let (t, skip, bytes, served) = span(piece);
        let send = Send {
            skip,
            bytes,
            run: t.source_run,
            wide: piece.wide,
        };
        let at = &mut next_send[t.source.index()];
        sends[*at as usize] = (piece.start, send, piece.cycles());
        *at += 1;
        for &(tile, run) in served {
            let receive = Receive {
                from: t.source,
                skip,
                bytes,
                run,
                wide: piece.wide,
            };
            let at = &mut next_switch[tile.index()];
            switches[*at as usize] = (piece.start.saturating_add(lead), receive);
            *at += 1;
        }
    }
    let mut programs = Vec::new();
    for tile in 0..tiles {
        let tile_sends = &mut sends[send_count[tile] as usize..send_count[tile + 1] as usize];
        let tile_switches =
            &mut switches[switch_count[tile] as usize..switch_count[tile + 1] as usize];
        if tile_sends.is_empty() && tile_switches.is_empty() {
            continue;
        }
        tile_sends.sort_by_key(|&(cycle, _, _)| cycle);
        tile_switches.sort_by_key(|&(cycle, _)| cycle);
        let tile = TileId::from_index(tile);
        let code = tile_code(phase, tile, events(tile_sends, tile_switches), target)?;
        programs.push((tile, code));
    }
    Ok(programs)
}

/// A tile's sends and switches, each in cycle order, merged into events in cycle order: a send and a
/// switch of one cycle make one event.
fn events(sends: &[(u32, Send, u32)], switches: &[(u32, Receive)]) -> Vec<Event> {
    let mut out = Vec::with_capacity(sends.len() + switches.len());
    let (mut sends, mut switches) = (
        sends.iter().copied().peekable(),
        switches.iter().copied().peekable(),
    );
    loop {
        let next_send = sends.peek().map(|&(c, _, _)| c);
        let next_switch = switches.peek().map(|&(c, _)| c);
        let cycle = match (next_send, next_switch) {
            (None, None) => break,
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
        };
        let send = sends
            .next_if(|&(c, _, _)| c == cycle)
            .map(|(_, s, cycles)| (s, cycles));
        let receive = switches.next_if(|&(c, _)| c == cycle).map(|(_, r)| r);
        out.push(Event {
            cycle,
            send,
            receive,
        });
    }
    out
}

/// The tile's code for `events`: each instruction issued at its event's cycle, delays between.
fn tile_code(
    phase: ExchangeId,
    tile: TileId,
    events: Vec<Event>,
    target: &Target,
) -> Result<Vec<Instr>, Unplaceable> {
    let issue = u64::from(target.exchange_issue_cycles);
    // At most a delay before each instruction.
    let mut code = Vec::with_capacity(1 + 2 * events.len());
    code.push(Instr::Exchange { phase });
    // When the tile can issue its next instruction, and when its outgoing port is free.
    let (mut free, mut port) = (0u64, 0u64);
    for event in events {
        let Some(instr) = event.instr() else { continue };
        let cycle = u64::from(event.cycle);
        let earliest = if event.send.is_some() {
            free.max(port)
        } else {
            free
        };
        // A send whose port frees in its cycle issues then without a delay (back to back).
        if cycle > earliest {
            // A delay issued at `free` lets the next instruction issue `issue + cycles` later.
            match (cycle - free).checked_sub(issue) {
                Some(idle) => code.push(Instr::Delay {
                    cycles: u32::try_from(idle).unwrap_or(u32::MAX),
                }),
                None => return Err(unplaceable(phase, tile, &instr, cycle, free, target)),
            }
        } else if cycle < earliest {
            return Err(unplaceable(phase, tile, &instr, cycle, earliest, target));
        }
        code.push(instr);
        free = cycle + issue;
        if let Some((_, cycles)) = event.send {
            port = cycle + u64::from(cycles);
        }
    }
    Ok(code)
}

fn unplaceable(
    phase: ExchangeId,
    tile: TileId,
    instr: &Instr,
    cycle: u64,
    earliest: u64,
    target: &Target,
) -> Unplaceable {
    Unplaceable {
        phase,
        tile,
        instr: instr.to_string().trim().to_string(),
        cycle,
        earliest,
        issue: target.exchange_issue_cycles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::Piece;

    fn run(offset: u32, bytes: u32) -> Run {
        Run {
            offset,
            bytes,
            count: 1,
            stride: 0,
        }
    }

    /// Tile 0 sends `words` words to each of tiles 1 and 2 (two transfers); the pieces start where
    /// `starts` says.
    fn lowered(
        starts: [u32; 2],
        target: &Target,
    ) -> Result<Vec<(TileId, Vec<Instr>)>, Unplaceable> {
        let transfers: Vec<BoundTransfer> = (1..=2)
            .map(|d| BoundTransfer {
                source: TileId(0),
                source_run: run(0x4c000, 32),
                bytes: 32,
                destinations: vec![(TileId(d), run(0x4d000, 32))],
            })
            .collect();
        let pieces = starts
            .iter()
            .enumerate()
            .map(|(i, &start)| Piece {
                start,
                transfer: i as u32,
                destinations: None,
                word: 0,
                words: 8,
                wide: false,
            })
            .collect();
        let schedule = Schedule {
            pieces,
            horizon: 0,
            lower_bound: 0,
            kind: String::new(),
            initial_horizon: 0,
        };
        exchange_programs(ExchangeId(0), &schedule, &transfers, target)
    }

    fn texts(code: &[Instr]) -> Vec<String> {
        code.iter()
            .map(|i| i.to_string().trim().to_string())
            .collect()
    }

    #[test]
    fn sends_back_to_back_need_no_delay_and_a_gap_is_a_delay() {
        let t = Target::preset("mk2-1500").unwrap();
        let lead = t.exchange_transit_cycles - t.mux_switch_cycles;
        let programs = lowered([0, 8], &t).unwrap();
        assert_eq!(
            texts(&programs[0].1),
            [
                "exchange ex0",
                "send 32B+0 from 0x4c000+32",
                "send 32B+0 from 0x4c000+32"
            ]
        );
        // The receiver of the second piece idles until one issue slot before its switch.
        assert_eq!(
            texts(&programs[2].1)[1],
            format!("delay {}", 8 + lead - t.exchange_issue_cycles)
        );
        // Three cycles after the first send's eight words: a delay issued at cycle 1, when the
        // tile is free again, idles nine cycles so the second send issues at cycle 11.
        let programs = lowered([0, 11], &t).unwrap();
        assert_eq!(texts(&programs[0].1)[2], "delay 9");
    }

    #[test]
    fn events_closer_than_the_issue_cost_are_refused_not_issued_late() {
        let mut t = Target::preset("mk2-1500").unwrap();
        t.exchange_issue_cycles = 2;
        // The second send one cycle after the first's words: a delay from cycle 2 fits.
        let programs = lowered([0, 9], &t).unwrap();
        assert_eq!(texts(&programs[0].1)[2], "delay 5");
        // Two sends in one cycle cannot both issue then.
        let e = lowered([4, 4], &t).unwrap_err();
        assert_eq!((e.tile, e.cycle, e.earliest), (TileId(0), 4, 12));
        assert!(
            e.to_string()
                .contains("scheduled at cycle 4, but the tile can issue it only at cycle 12 or"),
            "{e}"
        );
    }
}
