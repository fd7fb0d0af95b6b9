//! The exchange and sync cases of `calibrate`. An exchange case schedules a pattern with the compiler's
//! scheduler, runs it on the device and sets the device's cycles beside the pattern's lower bound.
//! The sync case runs a package of empty supersteps: the device's syncs beside the compiler's
//! estimate of them.

use super::{Calibration, DATA_OFFSET, Micro};
use crate::device::Fault;
use crate::exchange::schedule::schedule;
use crate::exchange::{Overheads, Pattern, PatternTransfer};
use crate::ids::{ExchangeId, TileId};
use crate::ir::StepEstimate;
use crate::isa::{Instr, Run};
use crate::lowering::{BoundTransfer, exchange_programs};
use crate::target::Target;

/// Supersteps of the sync case.
const SYNC_CASE_SUPERSTEPS: u64 = 64;

/// Schedules `pattern`, runs it on the device (every source holds its words; every destination has a
/// receive buffer per transfer), and compares with the pattern's lower bound, supertile pairs included.
fn exchange_case(
    target: &Target,
    name: &str,
    pattern: Pattern,
    note: &str,
) -> Result<Calibration, Fault> {
    let o = Overheads::of(target);
    let s = schedule(&pattern, o);
    let mut m = Micro::new(target, "exchange");
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
                (
                    TileId(d),
                    Run {
                        offset: at,
                        bytes,
                        count: 1,
                        stride: 0,
                    },
                )
            })
            .collect();
        bound.push(BoundTransfer {
            source: TileId(t.source),
            source_run: Run {
                offset: at,
                bytes,
                count: 1,
                stride: 0,
            },
            bytes,
            destinations,
        });
    }
    for (tile, program) in exchange_programs(ExchangeId(0), &s, &bound, target) {
        m.programs[tile.index()] = program;
    }
    let e = m.run()?;
    let gap = s.horizon - s.lower_bound;
    Ok(Calibration {
        case: format!("exchange {name}"),
        kind: "exchange",
        rows: None,
        hardware_cycles: None,
        device_cycles: e.steps[0].cycles,
        estimate_cycles: u64::from(s.lower_bound),
        peak_cycles: None,
        note: if gap == 0 {
            note.to_string()
        } else {
            format!("{note}; scheduler {gap} cycles above the bound")
        },
    })
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
pub(super) fn exchange_cases(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let n = target.tiles;
    let bound_note = "bound: transit + the busiest tile or supertile pair, words at 2 per cycle over \
         the pair's bus, plus switches between transfers";
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
        .map(|(name, pattern)| exchange_case(target, name, pattern, bound_note))
        .collect()
}

/// [`SYNC_CASE_SUPERSTEPS`] empty supersteps on every tile: the device's cycles (its syncs alone)
/// beside the compiler's estimate of the package's syncs.
pub(super) fn sync_case(target: &Target) -> Result<Calibration, Fault> {
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
        note: format!(
            "{} cycles a sync: poplibs' figure (lib/popnn/CTCLossPlan.cpp)",
            target.sync_cycles
        ),
    })
}
