//! `ipu-codegen calibrate --sensitivity`: how the headline workloads' cycles move when a constant no
//! published measurement pins (the sync, the exchange's transit, the launch of an AMP vertex) moves
//! by ±20 %. Each point is a build for the target so changed, planned and scheduled for it as the
//! compiler would for such hardware, run on the device; the table gives every point's cycles and its
//! change from the nominal target's. The builds go through the store (a second run is all cache
//! hits) and record their stages in a temporary folder, so no build folder of the user's changes.

use super::BuildArgs;
use anyhow::{Context, Result};
use clap::Parser;
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::driver::PIPELINE;
use ipu_codegen::ir::Package;
use ipu_codegen::progress::Progress;
use ipu_codegen::store::Store;
use ipu_codegen::target::Target;
use std::fmt::Write as _;

/// The workloads the table covers, as `run` would be given them.
pub const HEADLINE: [&[&str]; 4] = [
    &["siglip-mlp"],
    &["attention-flash"],
    &["minilm-encoder"],
    &["attention-flash", "--tokens", "197", "--causal", "true"],
];

/// The moves: each constant at 80 % and 120 % of its nominal figure.
pub const FACTORS: [f64; 2] = [0.8, 1.2];

/// A constant of the target the table moves.
pub struct Constant {
    pub name: &'static str,
    pub field: &'static str,
    get: fn(&Target) -> u64,
    set: fn(&mut Target, u64),
}

pub const CONSTANTS: [Constant; 3] = [
    Constant {
        name: "sync",
        field: "sync_cycles",
        get: |t| t.sync_cycles,
        set: |t, v| t.sync_cycles = v,
    },
    Constant {
        name: "transit",
        field: "exchange_transit_cycles",
        get: |t| u64::from(t.exchange_transit_cycles),
        set: |t, v| t.exchange_transit_cycles = u32::try_from(v).unwrap_or(u32::MAX),
    },
    Constant {
        name: "launch",
        field: "vertex_overhead_cycles",
        get: |t| t.vertex_overhead_cycles,
        set: |t, v| t.vertex_overhead_cycles = v,
    },
];

/// A constant's figure moved by `factor`, to the nearest cycle.
fn moved(nominal: u64, factor: f64) -> u64 {
    (nominal as f64 * factor).round() as u64
}

/// One workload's cycles on the nominal target and with each constant moved by each factor
/// (`moved[constant][factor]`).
pub struct Row {
    pub workload: String,
    pub cycles: u64,
    pub moved: Vec<[u64; 2]>,
}

#[derive(Parser)]
struct One {
    #[command(flatten)]
    args: BuildArgs,
}

/// Builds `workload` (its command-line words) for `target` through `store` and runs it on the
/// device: its cycles.
fn cycles(
    store: &dyn Store,
    words: &[&str],
    nominal: &str,
    target: &Target,
    progress: &dyn Progress,
) -> Result<u64> {
    let tail = ["--target", nominal];
    let argv = ["workload"].iter().chain(words).chain(&tail);
    let one = One::try_parse_from(argv).context("a headline workload's arguments")?;
    let stages = tempfile::tempdir().context("a temporary stages folder")?;
    let mut build = one.args.build(store, stages.path(), progress)?;
    build.target = target.clone();
    let outcome = build.run(PIPELINE[0], PIPELINE[PIPELINE.len() - 1])?;
    let package = build.load::<Package>(&outcome.outputs)?;
    let host = host_data(&package.graph, 1);
    let mut device = Device::load(std::rc::Rc::unwrap_or_clone(package))?;
    device.initialize(&host)?;
    let (execution, _) = device.run(&host, &ipu_codegen::progress::Silent)?;
    Ok(execution.cycles)
}

/// Every workload (a preset or a workload file, or by default the headline workloads) on `nominal`
/// and with each constant moved.
pub fn sensitivity(
    store: &dyn Store,
    workloads: &[String],
    nominal: &str,
    progress: &dyn Progress,
) -> Result<Vec<Row>> {
    let target = super::target_preset(nominal)?;
    let given: Vec<Vec<&str>> = workloads.iter().map(|w| vec![w.as_str()]).collect();
    let chosen: Vec<&[&str]> = if given.is_empty() {
        HEADLINE.to_vec()
    } else {
        given.iter().map(Vec::as_slice).collect()
    };
    chosen
        .into_iter()
        .map(|words| {
            let workload = words.join(" ");
            let at = |t: &Target| {
                cycles(store, words, nominal, t, progress).with_context(|| workload.clone())
            };
            let cycles = at(&target)?;
            let moved = CONSTANTS
                .iter()
                .map(|c| {
                    let mut points = [0; 2];
                    for (point, factor) in points.iter_mut().zip(FACTORS) {
                        let mut t = target.clone();
                        (c.set)(&mut t, moved((c.get)(&target), factor));
                        *point = at(&t)?;
                    }
                    Ok(points)
                })
                .collect::<Result<_>>()?;
            Ok(Row {
                workload,
                cycles,
                moved,
            })
        })
        .collect()
}

/// Change from `base`, in percent.
fn change(cycles: u64, base: u64) -> f64 {
    100.0 * (cycles as f64 - base as f64) / base.max(1) as f64
}

/// The table: a header naming each constant's figures, then per workload its cycles and each
/// point's change.
pub fn table(target: &Target, rows: &[Row]) -> String {
    let mut s = String::from("constants:");
    for c in &CONSTANTS {
        let nominal = (c.get)(target);
        let [low, high] = FACTORS.map(|f| moved(nominal, f));
        let _ = write!(s, " {} ({}) {nominal} -> {low}/{high};", c.name, c.field);
    }
    s.pop();
    let _ = write!(s, "\n{:<50} {:>9}", "workload", "cycles");
    for c in &CONSTANTS {
        let _ = write!(
            s,
            " {:>10} {:>10}",
            format!("{} -20%", c.name),
            format!("{} +20%", c.name)
        );
    }
    s.push('\n');
    for r in rows {
        let _ = write!(s, "{:<50} {:>9}", r.workload, r.cycles);
        for points in &r.moved {
            for p in points {
                let _ = write!(s, " {:>+9.2}%", change(*p, r.cycles));
            }
        }
        s.push('\n');
    }
    s
}

/// `--sensitivity --json`'s body: `{"target", "constants":[{"name","field","nominal","low","high"}],
/// "workloads":[{"workload","cycles","moved":{NAME:{"low","high"}}}]}`, cycles throughout.
pub fn json(target: &Target, rows: &[Row]) -> serde_json::Value {
    let constants: Vec<_> = CONSTANTS
        .iter()
        .map(|c| {
            let nominal = (c.get)(target);
            serde_json::json!({
                "name": c.name,
                "field": c.field,
                "nominal": nominal,
                "low": moved(nominal, FACTORS[0]),
                "high": moved(nominal, FACTORS[1]),
            })
        })
        .collect();
    let workloads: Vec<_> = rows
        .iter()
        .map(|r| {
            let moved: serde_json::Map<_, _> = CONSTANTS
                .iter()
                .zip(&r.moved)
                .map(|(c, [low, high])| {
                    (
                        c.name.to_string(),
                        serde_json::json!({"low": low, "high": high}),
                    )
                })
                .collect();
            serde_json::json!({"workload": r.workload, "cycles": r.cycles, "moved": moved})
        })
        .collect();
    serde_json::json!({"target": target.name, "constants": constants, "workloads": workloads})
}
