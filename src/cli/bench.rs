//! `ipu-codegen bench exchange`: the exchange scheduler on synthetic 1472-tile patterns shaped like the
//! seed system's phases, and on the real phases of a workload. `ipu-codegen bench build`: cold builds of
//! a workload, phase by phase. Each prints a row per pattern or run as it is measured, or with
//! `--json` one object at the end (kinds `benchExchange`, `benchBuild`).

use anyhow::{Context, Result, bail};
use ipu_codegen::driver::{Build, SELECTED, producer};
use ipu_codegen::driver::{Fields, PIPELINE};
use ipu_codegen::exchange::check::check;
use ipu_codegen::exchange::schedule::schedule;
use ipu_codegen::exchange::synthetic::{Family, SEED_PHASES, pattern};
use ipu_codegen::exchange::{Overheads, Pattern, Schedule};
use ipu_codegen::ir::Selected;
use ipu_codegen::store::{self, ContentHash, LocalStore};
use serde_json::{Value, json};
use std::time::Instant;

/// Schedules and checks one pattern, then times what reusing its stored schedule costs (decoding the
/// store's bytes and checking); prints one row unless `json`, and returns it as JSON. Each is timed
/// over a few runs: the fastest, and for scheduling the median too.
pub fn bench_one(name: &str, p: &Pattern, o: Overheads, json: bool) -> Result<Value> {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let s = schedule(p, o);
        runs.push((started.elapsed().as_secs_f64() * 1e3, s));
    }
    if runs.iter().any(|(_, s)| *s != runs[0].1) {
        bail!("{name}: scheduling the same pattern twice gave different schedules");
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ms, median_ms) = (runs[0].0, runs[RUNS / 2].0);
    let s = runs.swap_remove(0).1;
    // A reused schedule is validated by the checker: its time is what reuse costs.
    let (errors, check_ms) = best_of(RUNS, || check(p, o, &s));
    if !errors.is_empty() {
        bail!(
            "{name}: the schedule fails the checker:\n{}",
            errors.join("\n")
        );
    }
    // A reused schedule is decoded from the store's bytes, then checked.
    let bytes = store::encode(&s).joined();
    let hash = ContentHash::of(&bytes);
    let (decoded, decode_ms) = best_of(RUNS, || store::decode::<Schedule>(&bytes, &hash));
    let decoded = decoded?;
    let (errors, reuse_ms) = best_of(RUNS, || {
        let decoded = store::decode::<Schedule>(&bytes, &hash).expect("decoded once already");
        check(p, o, &decoded)
    });
    if !errors.is_empty() || decoded != s {
        bail!("{name}: the stored schedule does not decode to the same valid schedule");
    }
    let gap = s.horizon - s.lower_bound;
    let row = json!({
        "pattern": name,
        "transfers": p.transfers.len(),
        "lowerBound": s.lower_bound,
        "horizon": s.horizon,
        "gap": gap,
        "gapPercent": 100.0 * f64::from(gap) / f64::from(s.lower_bound.max(1)),
        "initialHorizon": s.initial_horizon,
        "scheduleKind": s.kind.to_string(),
        "piecesPerTransfer": s.pieces_per_transfer(p.transfers.len()),
        "ms": ms,
        "medianMs": median_ms,
        "checkMs": check_ms,
        "reuseMs": reuse_ms,
        "decodeMs": decode_ms,
        "storedBytes": bytes.len(),
    });
    if json {
        return Ok(row);
    }
    println!(
        "{name:<36} transfers={:>7} lower_bound={:>6} horizon={:>6} gap={:>5} ({:>5.2}%) initial_horizon={:>6} kind={:<16} pieces_per_transfer={:.3} ms={:.1} median_ms={:.1} check_ms={:.1} reuse_ms={:.1} (decode_ms={:.1}, {} KiB)",
        p.transfers.len(),
        s.lower_bound,
        s.horizon,
        gap,
        100.0 * f64::from(gap) / f64::from(s.lower_bound.max(1)),
        s.initial_horizon,
        s.kind,
        s.pieces_per_transfer(p.transfers.len()),
        ms,
        median_ms,
        check_ms,
        reuse_ms,
        decode_ms,
        bytes.len() / 1024
    );
    Ok(row)
}

/// Runs of the scheduler, the checker and the decoder timed, the fastest kept: the machine may be
/// shared.
const RUNS: usize = 5;

/// The result of `f` and the fastest of `runs` runs, in milliseconds.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let mut best = f64::INFINITY;
    let mut result = None;
    for _ in 0..runs {
        let started = Instant::now();
        result = Some(f());
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
    }
    (result.expect("at least one run"), best)
}

/// Builds through the phase that writes the selection, then benchmarks every exchange phase of it.
pub fn real(b: &Build, o: Overheads, json: bool) -> Result<Vec<Value>> {
    let to = producer(SELECTED).context("no phase writes the selection")?;
    let outcome = b.run(PIPELINE[0], to)?;
    let sel = b.load::<Selected>(&outcome.outputs)?;
    (sel.exchanges.iter())
        .map(|ex| {
            let name = format!("{}/{}", b.build, ex.id);
            bench_one(&name, &ex.pattern(&b.target), o, json)
        })
        .collect()
}

/// Benchmarks the synthetic patterns shaped like the seed system's phases.
pub fn synthetic(o: Overheads, tiles: u32, json: bool) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for (phase, transfers, mean) in SEED_PHASES {
        for family in Family::ALL {
            let p = pattern(family, tiles, transfers, mean, 1);
            rows.push(bench_one(
                &format!("{phase}/{}", family.name()),
                &p,
                o,
                json,
            )?);
        }
    }
    Ok(rows)
}

/// `runs` cold builds of the workload, each into a fresh store and stages folder in the system's temp
/// folder (removed afterwards). Prints each run's phase times (from the stage records), its wall
/// time, the CPU time the process spent on it (user and system, every thread: steadier than the
/// wall time on a busy machine) and the process's peak resident memory during it (each where the
/// system reports it), then the fastest, median and slowest wall times; with `json`, all of it as
/// one object at the end.
pub fn cold_builds(args: &super::BuildArgs, runs: u32, json: bool) -> Result<()> {
    let scratch = std::env::temp_dir().join(format!("ipu-codegen-bench-{}", std::process::id()));
    let result = cold_builds_in(&scratch, args, runs, json);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn cold_builds_in(
    scratch: &std::path::Path,
    args: &super::BuildArgs,
    runs: u32,
    json: bool,
) -> Result<()> {
    let mut walls = Vec::new();
    let mut rows = Vec::new();
    let mut name = String::new();
    for run in 1..=runs {
        if scratch.exists() {
            std::fs::remove_dir_all(scratch)
                .with_context(|| format!("clearing {}", scratch.display()))?;
        }
        let store = LocalStore::open(&scratch.join("cache"))?;
        // Timed builds draw no bars.
        let b = args.build(
            &store,
            &scratch.join("stages"),
            &ipu_codegen::progress::Silent,
        )?;
        let peak_from_here = ipu_codegen::host_memory::reset_peak();
        let (started, cpu_before) = (Instant::now(), process_cpu());
        b.run(PIPELINE[0], PIPELINE[PIPELINE.len() - 1])?;
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut line = Fields::new()
            .with("run", run)
            .with("wallMs", format!("{wall_ms:.0}"));
        if let (Some(before), Some(after)) = (cpu_before, process_cpu()) {
            let cpu_ms = after.saturating_sub(before).as_secs_f64() * 1e3;
            line = line.with("cpuMs", format!("{cpu_ms:.0}"));
        }
        // Only a peak reset before the run is the run's own.
        if let Some(peak) = ipu_codegen::host_memory::peak_bytes().filter(|_| peak_from_here) {
            line = line.with("peakRssMiB", ipu_codegen::host_memory::mebibytes(peak));
        }
        let mut row = line.json();
        let mut phases = Vec::new();
        for phase in PIPELINE {
            let ms = b.read_record(phase)?.elapsed_ms;
            line = line.with(phase.name(), ms);
            phases.push(json!({"phase": phase.name(), "ms": ms}));
        }
        if json {
            row["phases"] = Value::Array(phases);
            rows.push(row);
        } else {
            println!("{}", line.line());
        }
        walls.push(wall_ms);
        name = b.graph.workload.clone();
    }
    walls.sort_by(f64::total_cmp);
    let summary = Fields::new()
        .with("workload", name)
        .with("runs", runs)
        .with("fastestMs", format!("{:.0}", walls[0]))
        .with("medianMs", format!("{:.0}", walls[walls.len() / 2]))
        .with("slowestMs", format!("{:.0}", walls[walls.len() - 1]))
        .with("threads", rayon::current_num_threads());
    if json {
        let mut body = summary.json();
        body["builds"] = Value::Array(rows);
        super::json::print("benchBuild", body);
    } else {
        println!("{}", summary.line());
    }
    Ok(())
}

/// The CPU time this process has spent (user and system, every thread), where the system reports it.
fn process_cpu() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `getrusage` fills the struct it is given, a zeroed one of the right type, and
        // `RUSAGE_SELF` is always a valid target.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: the call succeeded, so it wrote the struct (which started zeroed anyway).
        let usage = unsafe { usage.assume_init() };
        let time = |t: libc::timeval| {
            let micros =
                u64::try_from(t.tv_sec).ok()? * 1_000_000 + u64::try_from(t.tv_usec).ok()?;
            Some(std::time::Duration::from_micros(micros))
        };
        Some(time(usage.ru_utime)? + time(usage.ru_stime)?)
    }
    #[cfg(not(unix))]
    None
}
