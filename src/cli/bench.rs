//! `ipu-codegen bench exchange`: the exchange scheduler on synthetic 1472-tile patterns shaped like the
//! seed system's phases, and on the real phases of a workload.

use crate::exchange::check::check;
use crate::exchange::schedule::schedule;
use crate::exchange::synthetic::{Family, SEED_PHASES, pattern};
use crate::exchange::{Overheads, Pattern};
use anyhow::{Result, bail};
use std::time::Instant;

/// Schedules and checks one pattern; prints one row.
pub fn bench_one(name: &str, p: &Pattern, o: Overheads) -> Result<()> {
    let started = Instant::now();
    let s = schedule(p, o);
    let ms = started.elapsed().as_secs_f64() * 1e3;
    // A reused schedule is validated by the checker: its time is what reuse costs.
    let checked = Instant::now();
    let errors = check(p, o, &s);
    let check_ms = checked.elapsed().as_secs_f64() * 1e3;
    if !errors.is_empty() {
        bail!(
            "{name}: the schedule fails the checker:\n{}",
            errors.join("\n")
        );
    }
    let gap = s.horizon - s.lower_bound;
    println!(
        "{name:<36} transfers={:>7} lower_bound={:>6} horizon={:>6} gap={:>5} ({:>5.2}%) initial_horizon={:>6} kind={:<16} pieces_per_transfer={:.3} ms={:.1} check_ms={:.1}",
        p.transfers.len(),
        s.lower_bound,
        s.horizon,
        gap,
        100.0 * f64::from(gap) / f64::from(s.lower_bound.max(1)),
        s.initial_horizon,
        s.kind,
        s.pieces_per_transfer(p.transfers.len()),
        ms,
        check_ms
    );
    Ok(())
}

pub fn synthetic(o: Overheads, tiles: u32) -> Result<()> {
    for (phase, transfers, mean) in SEED_PHASES {
        for family in Family::ALL {
            let p = pattern(family, tiles, transfers, mean, 1);
            bench_one(&format!("{phase}/{}", family.name()), &p, o)?;
        }
    }
    Ok(())
}
