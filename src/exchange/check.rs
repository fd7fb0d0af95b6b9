//! The independent checker of a schedule against its pattern: it re-derives every port's occupancy from
//! the pieces alone, supertile pair mates included, and shares no code with the schedulers.

use super::{Overheads, Pattern, Schedule};
use crate::verify::Verifier;

/// Every problem of `schedule` for `pattern`, each naming transfer, tile or cycle.
pub fn check(pattern: &Pattern, o: Overheads, schedule: &Schedule) -> Vec<String> {
    let mut v = Verifier::default();
    // Every tile with its pair mate.
    let n = pattern.tiles().next_multiple_of(2);
    // Cycles in u64: a damaged stored schedule must not wrap around.
    let mut send: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); n];
    let mut recv: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); n];
    // Words delivered per (transfer, destination index).
    let mut delivered: Vec<Vec<Vec<(u64, u64)>>> = pattern
        .transfers
        .iter()
        .map(|t| vec![Vec::new(); t.destinations.len()])
        .collect();
    for p in &schedule.pieces {
        let Some(t) = pattern.transfers.get(p.transfer as usize) else {
            v.error(format!(
                "piece at cycle {} names transfer {} of {}",
                p.start,
                p.transfer,
                pattern.transfers.len()
            ));
            continue;
        };
        let (start, word, words) = (u64::from(p.start), u64::from(p.word), u64::from(p.words));
        if words == 0 || word + words > u64::from(t.words) {
            v.error(format!(
                "transfer {}: piece of words {}..{} outside its {} words",
                p.transfer,
                p.word,
                p.word + p.words,
                t.words
            ));
            continue;
        }
        if p.wide && !o.pairs {
            v.error(format!(
                "transfer {}: wide piece at cycle {} without supertile pairs",
                p.transfer, p.start
            ));
            continue;
        }
        // A wide piece moves two words per cycle and holds the pair mates' ports too.
        let cycles = if p.wide { words.div_ceil(2) } else { words };
        let end = start + cycles + u64::from(o.transit);
        v.check(end <= u64::from(schedule.horizon), || {
            format!(
                "transfer {}: piece at cycle {} arrives until {end}, after the horizon {}",
                p.transfer, p.start, schedule.horizon
            )
        });
        let mut senders = vec![t.source as usize];
        if p.wide {
            senders.push(t.source as usize ^ 1);
        }
        for s in senders {
            send[s].push((start, start + cycles, p.transfer));
        }
        let destinations: Vec<usize> = match p.destinations {
            None => (0..t.destinations.len()).collect(),
            Some((a, b)) if a < b && (b as usize) <= t.destinations.len() => {
                (a as usize..b as usize).collect()
            }
            Some((a, b)) => {
                v.error(format!(
                    "transfer {}: piece for destinations {a}..{b} of {}",
                    p.transfer,
                    t.destinations.len()
                ));
                continue;
            }
        };
        let listen = (start + u64::from(o.transit)).saturating_sub(u64::from(o.switch));
        let mut receivers: Vec<usize> = Vec::new();
        for k in destinations {
            let d = t.destinations[k] as usize;
            receivers.push(d);
            if p.wide {
                receivers.push(d ^ 1);
            }
            delivered[p.transfer as usize][k].push((word, word + words));
        }
        // A mate that receives the piece itself is held once.
        receivers.sort_unstable();
        receivers.dedup();
        for d in receivers {
            recv[d].push((listen, start + u64::from(o.transit) + cycles, p.transfer));
        }
    }
    for (what, ports) in [("sends", &mut send), ("receives", &mut recv)] {
        for (tile, intervals) in ports.iter_mut().enumerate() {
            intervals.sort_unstable();
            for w in intervals.windows(2) {
                v.check(w[0].1 <= w[1].0, || {
                    format!(
                        "tile{tile} {what} transfers {} and {} in the same cycle {}",
                        w[0].2, w[1].2, w[1].0
                    )
                });
            }
        }
    }
    for (i, (t, per_destination)) in pattern.transfers.iter().zip(&mut delivered).enumerate() {
        for (k, words) in per_destination.iter_mut().enumerate() {
            words.sort_unstable();
            let mut next = 0;
            for &(a, b) in words.iter() {
                v.check(a == next, || {
                    format!(
                        "transfer {i} to tile{}: words {next}..{a} {}",
                        t.destinations[k],
                        if a > next {
                            "never arrive"
                        } else {
                            "arrive twice"
                        }
                    )
                });
                next = next.max(b);
            }
            v.check(next == u64::from(t.words), || {
                format!(
                    "transfer {i} to tile{}: words {next}..{} never arrive",
                    t.destinations[k], t.words
                )
            });
        }
    }
    let bound = pattern.lower_bound(o);
    v.check(schedule.lower_bound == bound, || {
        format!(
            "records lower bound {}, the pattern's is {bound}",
            schedule.lower_bound
        )
    });
    v.check(schedule.horizon >= bound, || {
        format!("horizon {} below the lower bound {bound}", schedule.horizon)
    });
    v.finish()
}
