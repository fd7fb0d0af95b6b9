//! When each of a tile's exchange instructions issues, derived from the tile's instruction stream as
//! the tile executes it: the phase opens at cycle 0 (the sync); an instruction issues when the one
//! before leaves the tile free (`exchange_issue_cycles` after it issued; a delay idles its cycles
//! after its own slot); a send, alone or with a mux switch, waits besides for the outgoing port to be
//! free of the previous send's words. A send's words leave from its issue cycle, one a cycle or two
//! when wide; a mux switch listens `mux_switch_cycles` after it issues.
//!
//! Contract: [`timeline`] reads one tile's instructions of one exchange superstep and returns its
//! sends and switches in program order with their cycles, and the cycle its code ends. An instruction
//! that is not exchange code, or code that runs past the phase's 32-bit cycle count, is a fault naming
//! the instruction; every count is u64 from u32 fields and checked, never wrapped.

use super::transfer_cycles;
use crate::device::{Fault, fault};
use crate::isa::{Instr, Receive, Send};
use crate::target::Target;

/// A send as the tile issued it: its instruction's index in the superstep, the cycle its first word
/// leaves, and the cycles its words hold the outgoing port.
#[derive(Clone, Copy, Debug)]
pub(super) struct Issued {
    pub instr: usize,
    pub at: u64,
    pub cycles: u64,
    pub send: Send,
}

impl Issued {
    /// One past the cycle its last word leaves.
    pub fn end(&self) -> u64 {
        self.at + self.cycles
    }
}

/// A mux switch as the tile issued it: its instruction's index, its issue cycle and the cycle from
/// which the mux listens to the receive's sender.
#[derive(Clone, Copy, Debug)]
pub(super) struct Armed {
    pub instr: usize,
    pub at: u64,
    pub listens: u64,
    pub receive: Receive,
}

/// One tile's exchange code as it ran.
#[derive(Debug, Default)]
pub(super) struct Timeline {
    pub sends: Vec<Issued>,
    pub switches: Vec<Armed>,
    /// The cycle the tile is free after its last instruction.
    pub end: u64,
}

/// The instruction `at` of a superstep, for messages: its index and its text.
pub(super) fn named(at: usize, instr: &dyn std::fmt::Display) -> String {
    format!("instruction {at} `{}`", instr.to_string().trim())
}

/// Tile `t`'s exchange code of superstep `step`, timed (module docs).
pub(super) fn timeline(
    target: &Target,
    t: usize,
    step: usize,
    instrs: &[Instr],
) -> Result<Timeline, Fault> {
    let issue = u64::from(target.exchange_issue_cycles);
    let switch = u64::from(target.mux_switch_cycles);
    let mut line = Timeline::default();
    // When the tile can issue its next instruction, and when its outgoing port is free.
    let (mut free, mut port) = (0u64, 0u64);
    for (i, instr) in instrs.iter().enumerate() {
        let issued = free;
        let send = |s: &Send, at: u64| Issued {
            instr: i,
            at,
            cycles: transfer_cycles(target, s.bytes, s.wide),
            send: *s,
        };
        let armed = |r: &Receive, at: u64| Armed {
            instr: i,
            at,
            listens: at + switch,
            receive: *r,
        };
        match instr {
            Instr::Exchange { .. } => continue,
            Instr::Delay { cycles } => free = free + issue + u64::from(*cycles),
            Instr::Send(s) => {
                let at = free.max(port);
                line.sends.push(send(s, at));
                (free, port) = (at + issue, at + transfer_cycles(target, s.bytes, s.wide));
            }
            Instr::Receive(r) => {
                line.switches.push(armed(r, free));
                free += issue;
            }
            Instr::SendReceive(pair) => {
                let (s, r) = &**pair;
                let at = free.max(port);
                line.sends.push(send(s, at));
                line.switches.push(armed(r, at));
                (free, port) = (at + issue, at + transfer_cycles(target, s.bytes, s.wide));
            }
            Instr::Vertex(_) | Instr::Sync => {
                let message = format!("{} inside an exchange phase", named(i, instr));
                return Err(fault(t, step, free, message));
            }
        }
        // Each instruction adds at most two u32 counts to cycles within u32: no u64 wraps.
        if free.max(port) > u64::from(u32::MAX) {
            let message = format!(
                "{} keeps the tile's exchange code running until cycle {}, past the phase's 32-bit count",
                named(i, instr),
                free.max(port)
            );
            return Err(fault(t, step, issued, message));
        }
    }
    line.end = free;
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ExchangeId, TileId};
    use crate::isa::Run;

    fn target() -> Target {
        Target::preset("mk2-1500").unwrap()
    }

    fn send(bytes: u32) -> Send {
        Send {
            skip: 0,
            bytes,
            run: Run {
                offset: 0x4c000,
                bytes,
                count: 1,
                stride: 0,
            },
            wide: false,
        }
    }

    fn receive(from: u32) -> Receive {
        Receive {
            from: TileId(from),
            skip: 0,
            bytes: 32,
            run: Run {
                offset: 0x4d000,
                bytes: 32,
                count: 1,
                stride: 0,
            },
            wide: false,
        }
    }

    fn issues(instrs: &[Instr]) -> (Vec<u64>, Vec<u64>, u64) {
        let line = timeline(&target(), 0, 0, instrs).unwrap();
        (
            line.sends.iter().map(|s| s.at).collect(),
            line.switches.iter().map(|s| s.at).collect(),
            line.end,
        )
    }

    #[test]
    fn a_delay_moves_the_send_after_it_by_its_slot_and_its_cycles() {
        let label = Instr::Exchange {
            phase: ExchangeId(0),
        };
        assert_eq!(issues(&[label.clone(), Instr::Send(send(32))]).0, [0]);
        let delayed = [label, Instr::Delay { cycles: 5 }, Instr::Send(send(32))];
        assert_eq!(issues(&delayed).0, [6]);
        assert_eq!(
            issues(&[Instr::Delay { cycles: 0 }, Instr::Send(send(32))]).0,
            [1]
        );
    }

    #[test]
    fn two_sends_go_back_to_back_and_a_switch_between_them_waits_for_no_port() {
        // Eight words hold the port for eight cycles: the second send waits for them.
        let both = [Instr::Send(send(32)), Instr::Send(send(16))];
        assert_eq!(issues(&both), (vec![0, 8], vec![], 9));
        // A switch after a send issues in the next slot, while the words still leave.
        let switched = [
            Instr::Send(send(32)),
            Instr::Receive(receive(3)),
            Instr::Send(send(16)),
        ];
        assert_eq!(issues(&switched), (vec![0, 8], vec![1], 9));
        // A wide send holds the port for half as long.
        let mut wide = send(32);
        wide.wide = true;
        assert_eq!(issues(&[Instr::Send(wide), Instr::Send(send(4))]).0, [0, 4]);
        // A send with a switch issues both in one slot, once the port is free.
        let merged = [
            Instr::Send(send(32)),
            Instr::SendReceive(Box::new((send(4), receive(2)))),
        ];
        assert_eq!(issues(&merged), (vec![0, 8], vec![8], 9));
    }

    #[test]
    fn the_mux_listens_a_switch_after_its_issue() {
        let line = timeline(
            &target(),
            0,
            0,
            &[Instr::Delay { cycles: 3 }, Instr::Receive(receive(1))],
        )
        .unwrap();
        let switch = u64::from(target().mux_switch_cycles);
        assert_eq!(
            (line.switches[0].at, line.switches[0].listens),
            (4, 4 + switch)
        );
    }

    #[test]
    fn code_past_u32_cycles_and_a_vertex_are_faults_naming_the_instruction() {
        let long = [
            Instr::Delay {
                cycles: u32::MAX - 1,
            },
            Instr::Delay { cycles: 7 },
        ];
        let f = timeline(&target(), 5, 2, &long).unwrap_err();
        assert_eq!((f.tile, f.step), (TileId(5), 2));
        assert!(
            f.message.starts_with("instruction 1 `delay 7` keeps"),
            "{f}"
        );
        let f = timeline(&target(), 0, 0, &[Instr::Sync]).unwrap_err();
        assert_eq!(f.message, "instruction 0 `sync` inside an exchange phase");
    }
}
