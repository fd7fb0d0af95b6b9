//! Reading an `execution.ipuprofile`: the summary table (each superstep's estimate against the device,
//! and the tile whose estimate is furthest off), a self-contained HTML page (tile heat maps of busy
//! cycles, memory and the estimate's error, BSP timeline, tables) and Chrome trace-event JSON
//! (Perfetto). Pure functions from the profile to text, which never panic on a crafted profile;
//! [`check`], the consistency a profile must have before `report` reads it; the profile's file form.
//!
//! `execution.ipuprofile` checks itself as `model.ipuexe` does: a magic, the body's length and blake3,
//! then the body, the profile's store bytes (its kind and schema). [`write_profile`] makes it and
//! [`read_profile`] refuses a wrong magic, a file cut short or padded and a body that does not match
//! its hash before decoding it, on any bytes without a panic.

use crate::device::{Execution, StepProfile};
use crate::store::{ContentHash, StoreError};
use std::fmt::Write as _;

/// The profile as the store encodes it: the body of `execution.ipuprofile`.
impl crate::store::Artifact for Execution {
    const KIND: &'static str = "profile";
    const SCHEMA: u32 = 4;
}

/// `execution.ipuprofile`: magic, body length (u64, little-endian), body blake3, then the body.
pub const PROFILE_MAGIC: &[u8; 8] = b"IPUPROF\x01";

/// The bytes before the body.
const PROFILE_HEADER: usize = 8 + 8 + 32;

/// The file form of a profile.
pub fn write_profile(e: &Execution) -> Vec<u8> {
    let body = crate::store::encode(e);
    let mut out = Vec::with_capacity(PROFILE_HEADER + body.len());
    out.extend_from_slice(PROFILE_MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&ContentHash::of(&body).0);
    out.extend_from_slice(&body);
    out
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not an execution profile (bad magic)")]
    Magic,
    #[error("execution profile is truncated: {have} of {want} bytes")]
    Truncated { have: u64, want: u64 },
    #[error("execution profile has {extra} bytes past its end")]
    Padded { extra: u64 },
    #[error("execution profile is damaged: its body does not match the hash in its header")]
    Hash,
    #[error("execution profile: {0}")]
    Decode(#[from] StoreError),
}

/// The profile a file holds, once its magic, length and hash check.
pub fn read_profile(bytes: &[u8]) -> Result<Execution, ProfileError> {
    let have = bytes.len() as u64;
    let truncated = || ProfileError::Truncated {
        have,
        want: PROFILE_HEADER as u64,
    };
    let Some(rest) = bytes.strip_prefix(PROFILE_MAGIC.as_slice()) else {
        let cut_short = PROFILE_MAGIC.starts_with(bytes);
        return Err(if cut_short {
            truncated()
        } else {
            ProfileError::Magic
        });
    };
    let (length, rest) = rest.split_first_chunk::<8>().ok_or_else(truncated)?;
    let (hash, body) = rest.split_first_chunk::<32>().ok_or_else(truncated)?;
    let want = u64::from_le_bytes(*length).saturating_add(PROFILE_HEADER as u64);
    if have < want {
        return Err(ProfileError::Truncated { have, want });
    }
    if have > want {
        return Err(ProfileError::Padded { extra: have - want });
    }
    let body_hash = ContentHash::of(body);
    if body_hash.0 != *hash {
        return Err(ProfileError::Hash);
    }
    Ok(crate::store::decode(body, &body_hash)?)
}

/// What is inconsistent in a profile, one line each: a package not named by its hash, a clock or
/// column size of zero, a superstep without a figure for every tile, a tile busier than its
/// superstep, or totals that are not the sum of the supersteps and syncs. `report` refuses a profile
/// with any.
pub fn check(e: &Execution) -> Vec<String> {
    let mut errors = Vec::new();
    let tiles = e.memory.len();
    if ContentHash::parse(&e.package).is_none() {
        errors.push(format!("package {:?} is not a blake3 hash", e.package));
    }
    if e.clock_khz == 0 {
        errors.push("clock_khz is 0".to_string());
    }
    if e.tiles_per_column == 0 || tiles == 0 {
        errors.push(format!("{tiles} tiles, {} a column", e.tiles_per_column));
    }
    for (i, s) in e.steps.iter().enumerate() {
        if s.tile_busy.len() != tiles {
            errors.push(format!(
                "step{i}: {} busy figures for {tiles} tiles",
                s.tile_busy.len()
            ));
        }
        if !s.tile_estimates.is_empty() && s.tile_estimates.len() != tiles {
            errors.push(format!(
                "step{i}: {} estimates for {tiles} tiles",
                s.tile_estimates.len()
            ));
        }
        if let Some(&most) = s.tile_busy.iter().max()
            && u64::from(most) > s.cycles
        {
            errors.push(format!(
                "step{i}: a tile busy {most} cycles in a step of {}",
                s.cycles
            ));
        }
    }
    let steps: u64 = e.steps.iter().map(|s| s.cycles).sum();
    if steps.checked_add(e.sync_cycles) != Some(e.cycles) {
        errors.push(format!(
            "{} cycles are not the supersteps' {steps} and the syncs' {}",
            e.cycles, e.sync_cycles
        ));
    }
    if e.minimum_tile_cycles > e.cycles {
        errors.push(format!(
            "the busiest tile's {} cycles exceed the run's {}",
            e.minimum_tile_cycles, e.cycles
        ));
    }
    errors
}

fn share(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// Text made safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A tile's estimate against the device: (tile, estimated cycles, device cycles).
type TileEstimate = (usize, u32, u32);

/// The estimate's relative error against the device's busy cycles.
fn error(&(_, estimate, device): &TileEstimate) -> f64 {
    (f64::from(estimate) - f64::from(device)) / f64::from(device.max(1))
}

/// The tile of a compute step whose estimate is furthest from the device, if the step has estimates.
fn furthest_tile(st: &StepProfile) -> Option<TileEstimate> {
    st.tile_estimates
        .iter()
        .zip(&st.tile_busy)
        .enumerate()
        .filter(|(_, (e, b))| **e > 0 || **b > 0)
        .map(|(t, (&e, &b))| (t, e, b))
        .max_by(|a, b| error(a).abs().total_cmp(&error(b).abs()))
}

/// The superstep whose estimate is furthest from the device, with the estimate's relative error.
pub fn worst_step(e: &Execution) -> Option<(usize, f64)> {
    e.steps
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let error = (st.estimated_cycles as f64 - st.cycles as f64) / st.cycles.max(1) as f64;
            (i, error)
        })
        .rev() // the first of equals
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
}

/// Per tile, the estimate's largest relative error over the compute steps, in percent.
fn tile_errors(e: &Execution) -> Vec<f64> {
    let mut worst = vec![0f64; e.memory.len()];
    for st in &e.steps {
        for (t, (&est, &busy)) in st.tile_estimates.iter().zip(&st.tile_busy).enumerate() {
            if (est > 0 || busy > 0) && t < worst.len() {
                let err = 100.0 * error(&(t, est, busy));
                if err.abs() > worst[t].abs() {
                    worst[t] = err;
                }
            }
        }
    }
    worst
}

/// The summary table: every superstep with its cycles, share of the run, and the compiler's estimate.
pub fn table(e: &Execution) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "workload={} target={} package={} cycles={} minimumTileCycles={} syncCycles={} tiles={}",
        e.workload,
        e.target,
        e.package,
        e.cycles,
        e.minimum_tile_cycles,
        e.sync_cycles,
        e.memory.len()
    );
    let _ = writeln!(
        s,
        "{:<6} {:<9} {:>10} {:>7} {:>10} {:>9} {:>12} {:>10}  furthest tile (est/sim)",
        "step", "kind", "cycles", "share", "estimate", "est/sim", "busy tiles", "mean busy"
    );
    let mut furthest: Option<(usize, TileEstimate)> = None;
    for (i, st) in e.steps.iter().enumerate() {
        let busy: Vec<u32> = st.tile_busy.iter().copied().filter(|&b| b > 0).collect();
        let mean = busy.iter().map(|&b| u64::from(b)).sum::<u64>() / busy.len().max(1) as u64;
        let tile = furthest_tile(st);
        if let Some(t) = tile
            && furthest.is_none_or(|(_, f)| error(&t).abs() > error(&f).abs())
        {
            furthest = Some((i, t));
        }
        let _ = writeln!(
            s,
            "{:<6} {:<9} {:>10} {:>6.1}% {:>10} {:>9.3} {:>12} {:>10}  {}",
            format!("step{i}"),
            st.kind,
            st.cycles,
            share(st.cycles, e.cycles),
            st.estimated_cycles,
            st.estimated_cycles as f64 / st.cycles.max(1) as f64,
            busy.len(),
            mean,
            tile.map_or("-".to_string(), |t| format!(
                "tile{} ({:.3})",
                t.0,
                1.0 + error(&t)
            ))
        );
    }
    let compute: u64 = e
        .steps
        .iter()
        .filter(|s| s.kind == "compute")
        .map(|s| s.cycles)
        .sum();
    let exchange: u64 = e
        .steps
        .iter()
        .filter(|s| s.kind == "exchange")
        .map(|s| s.cycles)
        .sum();
    let _ = writeln!(
        s,
        "compute {} ({:.1}%), exchange {} ({:.1}%), sync {} ({:.1}%)",
        compute,
        share(compute, e.cycles),
        exchange,
        share(exchange, e.cycles),
        e.sync_cycles,
        share(e.sync_cycles, e.cycles)
    );
    let (max_standard, max_interleaved) = e
        .memory
        .iter()
        .fold((0, 0), |(a, b), &(s, i)| (a.max(s), b.max(i)));
    let _ = writeln!(
        s,
        "memory: most standard bytes on a tile {max_standard}, most interleaved bytes on a tile {max_interleaved}"
    );
    if let Some((step, error)) = worst_step(e) {
        let _ = writeln!(
            s,
            "estimate furthest off by superstep: step{step} ({:+.1} %)",
            100.0 * error
        );
    }
    if let Some((step, (tile, est, sim))) = furthest {
        let _ = writeln!(
            s,
            "estimate furthest off: step{step} tile{tile} estimate {est} device {sim} ({:+.1} %)",
            100.0 * error(&(tile, est, sim))
        );
    }
    s
}

/// Chrome trace-event JSON: one track per tile (or per column with `per_column`), a slice per
/// superstep for the busy part and one for the wait until the sync ends.
pub fn trace(e: &Execution, per_column: bool) -> String {
    let us = |cycles: u64| cycles as f64 / e.clock_khz as f64 * 1e3;
    let tracks = if per_column {
        e.memory.len().div_ceil(e.tiles_per_column.max(1) as usize)
    } else {
        e.memory.len()
    };
    let mut events = Vec::new();
    for t in 0..tracks {
        let name = if per_column {
            format!("column {t}")
        } else {
            format!("tile{t}")
        };
        events.push(format!(
            r#"{{"name":"thread_name","ph":"M","pid":0,"tid":{t},"args":{{"name":"{name}"}}}}"#
        ));
    }
    let sync = e.sync_cycles / e.steps.len().max(1) as u64;
    let mut start = 0u64;
    for (i, st) in e.steps.iter().enumerate() {
        for t in 0..tracks {
            let busy = if per_column {
                let cols = e.tiles_per_column.max(1) as usize;
                let end = ((t + 1) * cols).min(st.tile_busy.len());
                st.tile_busy[(t * cols).min(end)..end]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
            } else {
                st.tile_busy.get(t).copied().unwrap_or(0)
            };
            let busy = u64::from(busy);
            if busy > 0 {
                events.push(format!(
                    r#"{{"name":"step{i} {}","cat":"{}","ph":"X","pid":0,"tid":{t},"ts":{:.4},"dur":{:.4}}}"#,
                    st.kind,
                    st.kind,
                    us(start),
                    us(busy)
                ));
            }
            events.push(format!(
                r#"{{"name":"step{i} sync wait","cat":"sync","ph":"X","pid":0,"tid":{t},"ts":{:.4},"dur":{:.4}}}"#,
                us(start + busy),
                us(st.cycles.saturating_sub(busy) + sync)
            ));
        }
        start += st.cycles + sync;
    }
    format!(
        "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{}\n]}}\n",
        events.join(",\n")
    )
}

/// One self-contained page: heat maps of busy cycles and memory per tile (columns of the chip side by
/// side), the BSP timeline, and the summary table. No network.
pub fn html(e: &Execution) -> String {
    let busy: Vec<u64> = (0..e.memory.len())
        .map(|t| {
            e.steps
                .iter()
                .map(|s| u64::from(s.tile_busy.get(t).copied().unwrap_or(0)))
                .sum()
        })
        .collect();
    let memory: Vec<u64> = e
        .memory
        .iter()
        .map(|&(s, i)| u64::from(s) + u64::from(i))
        .collect();
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let errors = tile_errors(e)
        .iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(",");
    let sync = e.sync_cycles / e.steps.len().max(1) as u64;
    let mut timeline = String::new();
    for (i, st) in e.steps.iter().enumerate() {
        let _ = write!(
            timeline,
            r#"<div class="bar {kind}" style="flex:{c}" title="step{i} {kind}: {c} cycles (estimate {est})">step{i}</div><div class="bar sync" style="flex:{sync}" title="sync: {sync} cycles"></div>"#,
            kind = escape(&st.kind),
            c = st.cycles,
            est = st.estimated_cycles
        );
    }
    let table = escape(&table(e));
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>{workload}: execution profile</title>
<style>
body {{ font: 13px system-ui, sans-serif; margin: 20px; }}
.maps {{ display: flex; gap: 40px; }}
.map {{ display: grid; grid-template-columns: repeat({columns}, 12px); grid-auto-rows: 5px; gap: 1px; }}
.cell {{ width: 12px; height: 5px; }}
.timeline {{ display: flex; height: 28px; margin: 8px 0 20px; }}
.bar {{ font-size: 10px; overflow: hidden; color: #fff; padding: 2px; }}
.compute {{ background: #2b7bba; }} .exchange {{ background: #e6842a; }} .sync {{ background: #999; }}
pre {{ background: #f6f6f6; padding: 8px; }}
</style></head><body>
<h1>{workload}</h1>
<p>{cycles} cycles on {target}; {tiles} tiles in {columns} columns of {per_column}.</p>
<h2>BSP timeline</h2>
<div class="timeline">{timeline}</div>
<div class="maps">
<div><h2>busy cycles per tile</h2><div id="busy" class="map"></div></div>
<div><h2>memory used per tile</h2><div id="memory" class="map"></div></div>
<div><h2>estimate vs device per tile</h2><div id="estimate" class="map"></div>
<p>the compute step where the tile's estimate is furthest off, in % (red: over, blue: under)</p></div>
</div>
<h2>supersteps</h2>
<pre>{table}</pre>
<script>
const busy = [{busy}];
const memory = [{memory}];
const perColumn = {per_column};
// Column-major: each grid column is one column of the chip. A cell's shade is the value's magnitude,
// `hue` its colour and `label` its title.
function draw(id, values, hue, label) {{
  const max = Math.max(1, ...values.map(Math.abs));
  const map = document.getElementById(id);
  for (let row = 0; row < perColumn; row++) {{
    for (let col = 0; col < {columns}; col++) {{
      const tile = col * perColumn + row;
      if (tile >= values.length) continue;
      const v = values[tile];
      const cell = document.createElement("div");
      cell.className = "cell";
      cell.title = "tile" + tile + ": " + label(v);
      cell.style.background = "hsl(" + hue(v) + ", 80%, " + (95 - 60 * Math.abs(v) / max) + "%)";
      map.appendChild(cell);
    }}
  }}
}}
draw("busy", busy, () => 210, v => v);
draw("memory", memory, () => 30, v => v);
draw("estimate", [{errors}], v => (v >= 0 ? 0 : 220), v => "estimate " + (v >= 0 ? "+" : "") + v + " %");
</script>
</body></html>
"#,
        workload = escape(&e.workload),
        cycles = e.cycles,
        target = escape(&e.target),
        tiles = e.memory.len(),
        columns = e.memory.len().div_ceil(e.tiles_per_column.max(1) as usize),
        per_column = e.tiles_per_column,
        busy = list(&busy),
        memory = list(&memory),
        errors = errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a damage says, and the damage.
    type Damage = (&'static str, fn(&mut Execution));

    fn execution(estimates: [Vec<u32>; 2]) -> Execution {
        let step = |tile_estimates: Vec<u32>| StepProfile {
            kind: "compute".to_string(),
            estimated_cycles: 100,
            cycles: 100,
            tile_busy: vec![100, 90, 0],
            tile_estimates,
        };
        let [a, b] = estimates;
        Execution {
            workload: "w".to_string(),
            target: "mk2-1500".to_string(),
            package: ContentHash::of(b"package").hex(),
            clock_khz: 1_500_000,
            tiles_per_column: 3,
            cycles: 436,
            minimum_tile_cycles: 436,
            sync_cycles: 236,
            steps: vec![step(a), step(b)],
            memory: vec![(0, 0); 3],
            input_bytes: 0,
            output_bytes: 0,
            weight_bytes: 0,
        }
    }

    #[test]
    fn the_table_names_the_tile_whose_estimate_is_furthest_off() {
        let e = execution([vec![100, 90, 0], vec![104, 90, 0]]);
        let t = table(&e);
        assert!(
            t.contains("estimate furthest off: step1 tile0 estimate 104 device 100 (+4.0 %)"),
            "{t}"
        );
        // One tile's estimate moved: the table follows it.
        let e = execution([vec![100, 81, 0], vec![104, 90, 0]]);
        let t = table(&e);
        assert!(
            t.contains("estimate furthest off: step0 tile1 estimate 81 device 90 (-10.0 %)"),
            "{t}"
        );
        assert_eq!(tile_errors(&e), [4.0, -10.0, 0.0]);
        assert_eq!(worst_step(&e), Some((0, 0.0)));
    }

    #[test]
    fn a_consistent_profile_passes_the_check_and_each_inconsistency_is_named() {
        let good = execution([vec![100, 90, 0], vec![104, 90, 0]]);
        assert_eq!(check(&good), Vec::<String>::new());
        let damaged: [Damage; 7] = [
            ("package \"v7\" is not a blake3 hash", |e| {
                e.package = "v7".to_string()
            }),
            ("clock_khz is 0", |e| e.clock_khz = 0),
            ("3 tiles, 0 a column", |e| e.tiles_per_column = 0),
            ("step1: 2 busy figures for 3 tiles", |e| {
                e.steps[1].tile_busy.pop();
            }),
            ("step0: 1 estimates for 3 tiles", |e| {
                e.steps[0].tile_estimates = vec![5];
            }),
            ("step0: a tile busy 101 cycles in a step of 100", |e| {
                e.steps[0].tile_busy[2] = 101
            }),
            (
                "437 cycles are not the supersteps' 200 and the syncs' 236",
                |e| e.cycles = 437,
            ),
        ];
        for (said, damage) in damaged {
            let mut e = good.clone();
            damage(&mut e);
            let errors = check(&e);
            assert!(errors.iter().any(|x| x == said), "{said}: {errors:?}");
        }
    }

    #[test]
    fn a_crafted_profile_is_reported_without_a_panic_and_its_names_escaped() {
        let mut e = execution([Vec::new(), vec![1, 2, 3, 4, 5]]);
        e.workload = "<img src=x onerror=alert(1)>".to_string();
        e.tiles_per_column = 0;
        e.steps[0].tile_busy.clear();
        e.steps[1].tile_busy = vec![u32::MAX];
        let page = html(&e);
        assert!(!page.contains("<img") && page.contains("&lt;img"));
        let _ = (table(&e), trace(&e, true), trace(&e, false));
    }

    #[test]
    fn a_profile_file_reads_back_and_each_damage_is_refused_by_name() {
        let e = execution([vec![100, 90, 0], vec![104, 90, 0]]);
        let file = write_profile(&e);
        assert_eq!(read_profile(&file).unwrap(), e);
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut magic = file.clone();
        magic[0] = b'X';
        let cases: [(&[u8], &str); 5] = [
            (&flipped, "does not match the hash"),
            (&file[..file.len() - 1], "truncated"),
            (&file[..5], "truncated"),
            (&[file.as_slice(), b"x"].concat(), "1 bytes past its end"),
            (&magic, "bad magic"),
        ];
        for (bytes, said) in cases {
            let error = read_profile(bytes).unwrap_err().to_string();
            assert!(error.contains(said), "{said}: {error}");
        }
        // A body of the schema before, behind a header that checks, is refused by the store.
        #[derive(serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        struct Before(Execution);
        impl crate::store::Artifact for Before {
            const KIND: &'static str = "profile";
            const SCHEMA: u32 = 3;
        }
        let before = behind_header(&crate::store::encode(&Before(e)));
        let error = read_profile(&before).unwrap_err().to_string();
        assert!(error.contains("profile schema 3"), "{error}");
    }

    /// xorshift64: deterministic, so a failure reproduces.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// The header `write_profile` puts before `body`.
    fn behind_header(body: &[u8]) -> Vec<u8> {
        let mut file = PROFILE_MAGIC.to_vec();
        file.extend_from_slice(&(body.len() as u64).to_le_bytes());
        file.extend_from_slice(&ContentHash::of(body).0);
        file.extend_from_slice(body);
        file
    }

    #[test]
    fn random_bytes_and_mutations_of_a_profile_file_never_panic_the_reader() {
        let file = write_profile(&execution([vec![100, 90, 0], vec![104, 90, 0]]));
        let body = &file[PROFILE_HEADER..];
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            // Random bytes, half of them behind the magic so the reader gets further.
            let len = (next(&mut state) % 160) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next(&mut state) as u8).collect();
            if next(&mut state).is_multiple_of(2) {
                bytes.splice(0..0, PROFILE_MAGIC.iter().copied());
            }
            assert!(read_profile(&bytes).is_err());
            // One byte of the file changed: refused, whichever byte.
            let mut mutated = file.clone();
            let at = (next(&mut state) % file.len() as u64) as usize;
            mutated[at] ^= (next(&mut state) % 255 + 1) as u8;
            assert!(read_profile(&mutated).is_err(), "byte {at} changed");
            // One byte of the body changed behind a header that checks: the decoder sees it.
            let mut body = body.to_vec();
            let at = (next(&mut state) % body.len() as u64) as usize;
            body[at] = next(&mut state) as u8;
            let _ = read_profile(&behind_header(&body));
            // Random bytes behind a header that checks.
            let _ = read_profile(&behind_header(&bytes));
        }
    }
}
