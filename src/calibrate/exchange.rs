//! The exchange and sync cases of `calibrate`. An exchange case schedules a pattern with the compiler's
//! scheduler, lowers the schedule to exchange code (`lowering::exchange_programs`, as `emit` does),
//! runs it on the device, which times that code itself, and sets the device's cycles beside the
//! schedule's horizon, the compiler's estimate of the phase; the note gives the pattern's lower bound
//! and how far above it the schedule ends. The sync case runs a package of empty supersteps: the
//! device's syncs beside the compiler's estimate of them.

use super::{CalibrateError, Calibration, DATA_OFFSET, Micro};
use crate::device::Execution;
use crate::exchange::schedule::schedule;
use crate::exchange::{Overheads, Pattern, PatternTransfer, Schedule};
use crate::ids::{ExchangeId, TileId};
use crate::ir::StepEstimate;
use crate::isa::{Instr, Run};
use crate::lowering::{BoundTransfer, exchange_programs};
use crate::target::Target;

/// Supersteps of the sync case.
const SYNC_CASE_SUPERSTEPS: u64 = 64;

/// Schedules `pattern`, lowers and runs it on the device (every source holds its words; every
/// destination has a receive buffer per transfer), and compares with the schedule's horizon.
fn exchange_case(
    target: &Target,
    name: &str,
    pattern: Pattern,
) -> Result<Calibration, CalibrateError> {
    let (s, e) = run_pattern(target, &pattern, &|_| {})?;
    let gap = s.horizon - s.lower_bound;
    Ok(Calibration {
        case: format!("exchange {name}"),
        kind: "exchange",
        rows: None,
        hardware_cycles: None,
        device_cycles: e.steps[0].cycles,
        estimate_cycles: u64::from(s.horizon),
        peak_cycles: None,
        elements: None,
        note: format!(
            "estimate: the schedule's horizon, {gap} cycles above the bound {} (transit + the \
             busiest tile or supertile pair, words at 2 per cycle over the pair's bus, plus \
             switches between transfers)",
            s.lower_bound
        ),
    })
}

/// `pattern` scheduled, lowered to exchange code (each tile's code then passed through `edit`) and
/// run on the device: the schedule and the run.
fn run_pattern(
    target: &Target,
    pattern: &Pattern,
    edit: &dyn Fn(&mut Vec<Instr>),
) -> Result<(Schedule, Execution), CalibrateError> {
    let o = Overheads::of(target);
    let s = schedule(pattern, o);
    let mut m = Micro::new(target, "exchange");
    m.steps[0].cycles = u64::from(s.horizon);
    let base = target.memory_base + DATA_OFFSET;
    let mut next_source = vec![base; target.tiles as usize];
    let mut next_receive = vec![target.interleaved_base; target.tiles as usize];
    let mut bound = Vec::new();
    for t in &pattern.transfers {
        let bytes = t.words * target.exchange_bytes_per_cycle;
        let at = next_source[t.source as usize];
        next_source[t.source as usize] += bytes;
        m.value(1, bytes / 2, t.source, at);
        let destinations = t
            .destinations
            .iter()
            .map(|&d| {
                let at = next_receive[d as usize];
                next_receive[d as usize] += bytes;
                (TileId(d), contiguous(at, bytes))
            })
            .collect();
        bound.push(BoundTransfer {
            source: TileId(t.source),
            source_run: contiguous(at, bytes),
            bytes,
            destinations,
        });
    }
    for (tile, mut program) in exchange_programs(ExchangeId(0), &s, &bound, target)? {
        edit(&mut program);
        m.programs[tile.index()] = program;
    }
    Ok((s, m.run()?))
}

/// `bytes` bytes at `offset`, in one piece.
fn contiguous(offset: u32, bytes: u32) -> Run {
    Run {
        offset,
        bytes,
        count: 1,
        stride: 0,
    }
}

fn unicast(source: u32, destination: u32, words: u32) -> PatternTransfer {
    PatternTransfer {
        source,
        destinations: vec![destination],
        words,
    }
}

/// The exchange cases: one transfer, a broadcast, all-to-all among a few tiles and among all,
/// supertile pairs, and the wide sends a pair allows.
pub(super) fn exchange_cases(target: &Target) -> Result<Vec<Calibration>, CalibrateError> {
    let n = target.tiles;
    let patterns = [
        (
            "one-to-one 256 words",
            Pattern {
                transfers: vec![unicast(0, 1, 256)],
            },
        ),
        (
            "broadcast 256 words to 1471 tiles",
            Pattern {
                transfers: vec![PatternTransfer {
                    source: 0,
                    destinations: (1..n).collect(),
                    words: 256,
                }],
            },
        ),
        (
            "all-to-all 16 tiles x 64 words",
            Pattern {
                transfers: (0..16)
                    .flat_map(|s| {
                        (0..16)
                            .filter(move |&d| d != s)
                            .map(move |d| unicast(s, d, 64))
                    })
                    .collect(),
            },
        ),
        (
            "supertile pairs 2k->2k+1 256 words",
            Pattern {
                transfers: (0..n / 2).map(|k| unicast(2 * k, 2 * k + 1, 256)).collect(),
            },
        ),
        (
            "shifted all-to-all 1472 tiles x 4 rounds x 32 words",
            Pattern {
                transfers: (1..=4)
                    .flat_map(|r| (0..n).map(move |s| unicast(s, (s + r) % n, 32)))
                    .collect(),
            },
        ),
        (
            "tile0->tile2 256 words, mates idle (wide)",
            Pattern {
                transfers: vec![unicast(0, 2, 256)],
            },
        ),
        (
            "tile0->tiles 2,3 256 words, mates receive the same (wide)",
            Pattern {
                transfers: vec![PatternTransfer {
                    source: 0,
                    destinations: vec![2, 3],
                    words: 256,
                }],
            },
        ),
    ];
    patterns
        .into_iter()
        .map(|(name, pattern)| exchange_case(target, name, pattern))
        .collect()
}

/// [`SYNC_CASE_SUPERSTEPS`] empty supersteps on every tile: the device's cycles (its syncs alone)
/// beside the compiler's estimate of the package's syncs.
pub(super) fn sync_case(target: &Target) -> Result<Calibration, CalibrateError> {
    let mut m = Micro::new(target, "compute");
    let steps = SYNC_CASE_SUPERSTEPS;
    for program in &mut m.programs {
        program.extend((1..steps).map(|_| Instr::Sync));
    }
    m.steps = (0..steps)
        .map(|_| StepEstimate {
            kind: "compute".to_string(),
            cycles: 0,
            sync_cycles: target.sync_estimate(1),
            operators: Vec::new(),
        })
        .collect();
    let e = m.run()?;
    Ok(Calibration {
        case: format!("sync {steps} empty supersteps"),
        kind: "sync",
        rows: None,
        hardware_cycles: None,
        device_cycles: e.cycles,
        estimate_cycles: target.sync_estimate(steps),
        peak_cycles: None,
        elements: None,
        note: format!(
            "{} cycles a sync: poplibs' figure (lib/popnn/CTCLossPlan.cpp)",
            target.sync_cycles
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::{Receive, Send};

    fn target() -> Target {
        Target::preset("mk2-1500").unwrap()
    }

    /// Tile 0's pieces of 32 bytes: its `pieces` pieces lie one after another from the data offset.
    fn piece(target: &Target, k: u32, pieces: u32) -> Send {
        Send {
            skip: 32 * k,
            bytes: 32,
            run: contiguous(target.memory_base + DATA_OFFSET, 32 * pieces),
            wide: false,
        }
    }

    /// A receive of tile 0's piece `k` of `pieces`, into a run as long as tile 0's.
    fn receive(target: &Target, k: u32, pieces: u32) -> Receive {
        Receive {
            from: TileId(0),
            skip: 32 * k,
            bytes: 32,
            run: contiguous(target.interleaved_base, 32 * pieces),
            wide: false,
        }
    }

    /// One exchange superstep of hand-written code, tile 0 holding `pieces` pieces.
    fn run_code(
        target: &Target,
        pieces: u32,
        code: Vec<(usize, Vec<Instr>)>,
    ) -> Result<Execution, crate::device::Fault> {
        let mut m = Micro::new(target, "exchange");
        m.value(1, 16 * pieces, 0, target.memory_base + DATA_OFFSET);
        for (tile, mut instrs) in code {
            instrs.insert(
                0,
                Instr::Exchange {
                    phase: ExchangeId(0),
                },
            );
            m.programs[tile] = instrs;
        }
        m.run()
    }

    /// The delay before a switch that makes the mux listen at `cycle`.
    fn switch_delay(target: &Target, cycle: u32) -> Instr {
        Instr::Delay {
            cycles: cycle - target.mux_switch_cycles - target.exchange_issue_cycles,
        }
    }

    #[test]
    fn a_delay_moves_a_send_and_the_phase_ends_at_its_last_arrival() {
        let t = target();
        let transit = t.exchange_transit_cycles;
        for d in [0, 5, 100] {
            // The send issues after the delay's slot and its cycles; its eight words arrive
            // `transit` later, where the receiver's mux listens.
            let sent = 1 + d;
            let e = run_code(
                &t,
                1,
                vec![
                    (
                        0,
                        vec![Instr::Delay { cycles: d }, Instr::Send(piece(&t, 0, 1))],
                    ),
                    (
                        2,
                        vec![
                            switch_delay(&t, sent + transit),
                            Instr::Receive(receive(&t, 0, 1)),
                        ],
                    ),
                ],
            )
            .unwrap();
            assert_eq!(
                e.steps[0].cycles,
                u64::from(sent + 8 + transit),
                "delay {d}"
            );
        }
    }

    #[test]
    fn a_mux_switch_that_listens_after_its_data_arrives_is_a_fault() {
        let t = target();
        let transit = t.exchange_transit_cycles;
        // The send leaves at cycle 0; the receiver listens from cycle transit + 1, a cycle after
        // its first word arrived.
        let f = run_code(
            &t,
            1,
            vec![
                (0, vec![Instr::Send(piece(&t, 0, 1))]),
                (
                    2,
                    vec![
                        switch_delay(&t, transit + 1),
                        Instr::Receive(receive(&t, 0, 1)),
                    ],
                ),
            ],
        )
        .unwrap_err();
        assert_eq!((f.tile, f.step), (TileId(2), 0));
        assert!(
            f.message
                .starts_with("instruction 2 `receive from tile0 32B+0 to"),
            "{f}"
        );
        assert!(f.message.contains("the switch comes too late"), "{f}");
    }

    #[test]
    fn two_sends_go_back_to_back_and_each_receiver_must_listen_for_its_own() {
        let t = target();
        let transit = t.exchange_transit_cycles;
        // Tile 0 sends two pieces with nothing between: the second leaves at cycle 8.
        let code = |second_arrives: u32| {
            vec![
                (
                    0,
                    vec![Instr::Send(piece(&t, 0, 2)), Instr::Send(piece(&t, 1, 2))],
                ),
                (
                    2,
                    vec![switch_delay(&t, transit), Instr::Receive(receive(&t, 0, 2))],
                ),
                (
                    4,
                    vec![
                        switch_delay(&t, second_arrives),
                        Instr::Receive(receive(&t, 1, 2)),
                    ],
                ),
            ]
        };
        let e = run_code(&t, 2, code(8 + transit)).unwrap();
        assert_eq!(e.steps[0].cycles, u64::from(16 + transit));
        // Listening as if the second send waited a cycle after the first is a cycle late.
        let f = run_code(&t, 2, code(9 + transit)).unwrap_err();
        assert_eq!(f.tile, TileId(4));
        assert!(f.message.contains("the switch comes too late"), "{f}");
        // Listening a piece early takes the first send's bytes.
        let f = run_code(&t, 2, code(transit)).unwrap_err();
        assert!(
            f.message.contains("expects bytes 32..64 from tile0")
                && f.message.contains("bytes 0..32"),
            "{f}"
        );
    }

    /// The lowering's delays off by one either way: the device's checks fail; as lowered, the
    /// phase runs and ends at the schedule's horizon.
    #[test]
    fn exchange_code_whose_delays_are_off_by_one_fails_on_the_device() {
        let t = target();
        let pattern = Pattern {
            transfers: (0..16)
                .flat_map(|s| {
                    (0..16)
                        .filter(move |&d| d != s)
                        .map(move |d| unicast(s, d, 64))
                })
                .collect(),
        };
        let (s, e) = run_pattern(&t, &pattern, &|_| {}).unwrap();
        assert_eq!(e.steps[0].cycles, u64::from(s.horizon));
        let off_by = |by: i64| {
            move |code: &mut Vec<Instr>| {
                for i in code.iter_mut() {
                    if let Instr::Delay { cycles } = i {
                        *cycles = (i64::from(*cycles) + by).max(0) as u32;
                    }
                }
            }
        };
        for by in [1, -1] {
            let fault = match run_pattern(&t, &pattern, &off_by(by)) {
                Err(CalibrateError::Fault(f)) => f,
                other => panic!("delays off by {by}: {:?}", other.map(|(_, e)| e.cycles)),
            };
            let timing = [
                "the switch comes too late",
                "two senders reach this tile at once",
            ];
            assert!(
                timing.iter().any(|m| fault.message.contains(m)),
                "delays off by {by}: {fault}"
            );
        }
    }
}
