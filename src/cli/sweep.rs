//! `ipu-codegen sweep`: a grid of a workload's build flags, every point built through the store and
//! run on the simulated device, then one row per point.
//!
//! Contract:
//! - Each `--vary NAME=V1,V2,...` is an axis; NAME is a long flag of `build` (`BuildArgs`) other than
//!   `--build`, and a point's flags are parsed by the same clap struct `build` uses, so every value is
//!   taken, and refused, exactly as `build` would. A one-value axis fixes a flag for every point.
//!   Bad syntax, an unknown or repeated name, an empty list or value, a value `build` refuses and a
//!   grid over [`MAX_POINTS`] points are errors before anything is built.
//! - The points are the axes' product in grid order: the first axis outermost, the last varying
//!   fastest. Rows come out in that order whatever the thread count (order-preserving collects).
//! - A point's build folder is its workload id (with the target, as on `build`) followed by
//!   `-NAME-VALUE` for each axis that changes a phase's config, so points with other phase options
//!   never share a folder. Points that share a folder (they differ only in the seed) share one
//!   build; builds run in parallel, then the device runs every point in parallel under the device
//!   lock, with the seeded data of the point's seed (and the spec's weights file, if it names one).
//! - A row holds the swept values, the build, cycles, efficiency (as `run` prints it), the
//!   compiler's estimate and its error against the device, the hardware test and, with `--check`,
//!   the numerical test against the float64 reference. A point that fails to resolve, build or run is
//!   a row with its error; the command fails after printing every row and writing every file when any
//!   point failed.
//! - The table, the CSV and the JSON all come from [`Row::cells`]: the same columns and values; a
//!   point's efficiency is kept as the table shows it, so every form (a merged sweep's too) agrees.
//! - `--shard I/N` resolves the whole grid as above but builds and runs only the shard's points, and
//!   `--merge` reads the parts back instead of building (`shard`).

mod page;
mod shard;

use super::BuildArgs;
use super::progress::Bar;
use super::run::{self, DataArgs, Loaded};
use super::storage::StoreArgs;
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, FromArgMatches};
use ipu_codegen::driver::{RunFigures, verdict, worst_check};
use ipu_codegen::progress::Silent;
use ipu_codegen::tensors::bind::Bindings;
use ipu_codegen::workload::WeightsFile;
use rayon::prelude::*;
use serde::ser::{Serialize, SerializeMap, Serializer};
use shard::Shard;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The most points a grid may have.
pub const MAX_POINTS: usize = 256;

/// `sweep`'s arguments.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A preset or a TOML workload file, as `build` takes it.
    #[arg(required_unless_present = "merge")]
    workload: Option<String>,
    /// One axis of the grid: NAME is any flag of `build` but --build, without its dashes (tokens,
    /// batch, partials, seed, heads, target, finalists, placement-order, ...), each value parsed as
    /// `build` parses it. Repeatable, at most 256 points in all; the first axis is the plots' x axis;
    /// a one-value axis sets a flag for every point. A swept phase option (finalists, form, ...)
    /// adds -NAME-VALUE to each point's build folder.
    #[arg(
        long = "vary",
        value_name = "NAME=V1,V2,...",
        required_unless_present = "merge"
    )]
    vary: Vec<String>,
    /// Also check every output against the float64 reference, as `run` does.
    #[arg(long)]
    check: bool,
    /// Write the rows as CSV, with a header line.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write one self-contained HTML page: cycles and efficiency against the first axis, one line per
    /// combination of the others, and the table.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print one JSON object (kind `sweep`) instead of the table: the axes and the rows, each row an
    /// object with the table's columns.
    #[arg(long)]
    json: bool,
    /// Build and run only shard I of N (0 ≤ I < N): the grid points p with p % N == I, written with
    /// --json as a part (with a `shard` field) for --merge. Give each shard its own --stages.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, requires = "json")]
    shard: Option<Shard>,
    /// Put the parts of a sharded sweep (`--shard I/N --json` outputs, every shard once) back
    /// together: the unsharded sweep's rows, in grid order, as a table, --json, --csv or --html.
    #[arg(
        long,
        value_name = "PART.json",
        num_args = 1..,
        conflicts_with_all = ["workload", "vary", "shard", "check"]
    )]
    merge: Vec<PathBuf>,
}

/// One axis of the grid: a flag of `build` and its values, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<String>,
    /// Its values give different phase configs (not a different workload id), so they name the
    /// point's build folder.
    phase_option: bool,
}

impl Axis {
    /// An axis read back from a sweep's output: its name and values.
    pub fn named(name: &str, values: Vec<String>) -> Axis {
        Axis {
            name: name.to_string(),
            values,
            phase_option: false,
        }
    }
}

/// The command a point's flags are parsed with: `build`'s arguments and nothing else.
fn point_command() -> clap::Command {
    BuildArgs::augment_args(clap::Command::new("build"))
}

/// The names `--vary` takes: every long flag of `build` but `--build` (a sweep names its builds).
fn axis_names() -> Vec<String> {
    point_command()
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|&l| l != "build" && l != "help")
        .map(str::to_string)
        .collect()
}

/// A clap error's message, without its `error: ` and the lines after its first.
fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// `build`'s arguments for `workload` with `flags` (`(name, value)`, each given as `--name=value`).
fn parse_point(workload: &str, flags: &[(&str, &str)]) -> Result<BuildArgs, String> {
    let argv = ["build".to_string(), workload.to_string()]
        .into_iter()
        .chain(flags.iter().map(|(n, v)| format!("--{n}={v}")));
    let matches = point_command()
        .try_get_matches_from(argv)
        .map_err(|e| clap_message(&e))?;
    BuildArgs::from_arg_matches(&matches).map_err(|e| clap_message(&e))
}

/// The axes `--vary` gives, each value checked as `build` checks it, and the grid's size within
/// [`MAX_POINTS`].
pub fn axes(workload: &str, vary: &[String]) -> Result<Vec<Axis>> {
    let names = axis_names();
    let mut axes: Vec<Axis> = Vec::new();
    for given in vary {
        let Some((name, list)) = given.split_once('=') else {
            bail!("--vary {given:?}: expected NAME=V1,V2,... (for example tokens=21,30)");
        };
        let name = name.trim();
        if name == "build" {
            bail!(
                "--vary {given:?}: a sweep names each point's build folder itself; leave out build"
            );
        }
        if !names.iter().any(|n| n == name) {
            bail!(
                "--vary {given:?}: unknown name {name:?}; names: {}{}",
                names.join(", "),
                ipu_codegen::suggest::did_you_mean(name, names.iter().map(String::as_str))
            );
        }
        if axes.iter().any(|a| a.name == name) {
            bail!("--vary {given:?}: {name} is varied twice; give all its values in one --vary");
        }
        if list.trim().is_empty() {
            bail!("--vary {given:?}: {name} has an empty value list");
        }
        let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            bail!("--vary {given:?}: the list of {name} has an empty value");
        }
        let mut configs = Vec::new();
        for value in &values {
            let args = parse_point(workload, &[(name, value)])
                .map_err(|e| anyhow!("--vary {given:?}: {e}"))?;
            args.target().with_context(|| format!("--vary {given:?}"))?;
            let config = serde_json::to_string(&args.configs()).expect("configs serialise");
            if !configs.contains(&config) {
                configs.push(config);
            }
        }
        axes.push(Axis {
            name: name.to_string(),
            values,
            phase_option: configs.len() > 1,
        });
    }
    let size = axes
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()));
    if size.is_none_or(|n| n > MAX_POINTS) {
        let sizes: Vec<String> = axes
            .iter()
            .map(|a| format!("{} {}", a.name, a.values.len()))
            .collect();
        bail!(
            "the grid has {} points ({}), over the limit of {MAX_POINTS}; vary fewer values",
            size.map_or("too many".to_string(), |n| n.to_string()),
            sizes.join(" × ")
        );
    }
    Ok(axes)
}

/// Every point of the grid as the index of its value on each axis, the first axis outermost.
pub fn grid(axes: &[Axis]) -> Vec<Vec<usize>> {
    axes.iter().fold(vec![Vec::new()], |points, axis| {
        points
            .iter()
            .flat_map(|p| {
                (0..axis.values.len()).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect()
    })
}

/// A point resolved to what it builds and the data it runs.
struct Resolved {
    /// Index into the distinct builds.
    build: usize,
    seed: u64,
}

/// What the device measured at a point.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub cycles: u64,
    pub efficiency_percent: f64,
    pub estimated_cycles: u64,
}

/// One point's row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The point's value on each axis, in axis order.
    pub values: Vec<String>,
    /// The build folder; none when the point's workload did not resolve.
    pub build: Option<String>,
    /// None when the point did not reach the end of a device run.
    pub measured: Option<Measured>,
    /// None when the device did not run.
    pub hardware_pass: Option<bool>,
    /// None without `--check` or when the device did not finish.
    pub numerical_pass: Option<bool>,
    /// Why the point failed.
    pub error: Option<String>,
}

/// A table cell: text in the table and the CSV, a number or a string in JSON, `-` (empty in the CSV,
/// null in JSON) when missing.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Missing,
    Count(u64),
    /// A number with this many decimals (`+` before a positive one when `signed`).
    Fixed {
        value: f64,
        decimals: usize,
        signed: bool,
    },
    Text(String),
}

impl Cell {
    /// Its text in the table.
    pub fn text(&self) -> String {
        match self {
            Cell::Missing => "-".to_string(),
            Cell::Count(n) => n.to_string(),
            Cell::Fixed {
                value,
                decimals,
                signed: true,
            } => format!("{value:+.decimals$}"),
            Cell::Fixed {
                value, decimals, ..
            } => format!("{value:.decimals$}"),
            Cell::Text(s) => s.clone(),
        }
    }

    /// The number it shows (rounded as shown), if it is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Cell::Count(n) => Some(*n as f64),
            Cell::Fixed { .. } => self.text().parse().ok(),
            Cell::Missing | Cell::Text(_) => None,
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Cell::Missing => serde_json::Value::Null,
            Cell::Count(n) => serde_json::json!(n),
            Cell::Fixed { .. } => self
                .number()
                .map_or(serde_json::Value::Null, |x| serde_json::json!(x)),
            Cell::Text(s) => serde_json::json!(s),
        }
    }
}

/// The columns after the swept values.
pub const COLUMNS: [&str; 8] = [
    "cycles",
    "efficiencyPercent",
    "estimatedCycles",
    "estimateErrorPercent",
    "hardwareTest",
    "numericalTest",
    "build",
    "error",
];

impl Row {
    /// Whether the point failed: it did not resolve, build or run, or a test failed.
    pub fn failed(&self) -> bool {
        self.error.is_some()
            || self.hardware_pass != Some(true)
            || self.numerical_pass == Some(false)
    }

    /// The row's cells: one per axis (its value: a count when it reads as one), then one per
    /// [`COLUMNS`].
    pub fn cells(&self) -> Vec<Cell> {
        let value = |v: &String| match v.parse::<u64>() {
            Ok(n) if n.to_string() == *v => Cell::Count(n),
            _ => Cell::Text(v.clone()),
        };
        let test =
            |pass: Option<bool>| pass.map_or(Cell::Missing, |p| Cell::Text(verdict(p).into()));
        let m = self.measured.as_ref();
        let mut cells: Vec<Cell> = self.values.iter().map(value).collect();
        cells.extend([
            m.map_or(Cell::Missing, |m| Cell::Count(m.cycles)),
            m.map_or(Cell::Missing, |m| Cell::Fixed {
                value: m.efficiency_percent,
                decimals: 2,
                signed: false,
            }),
            m.map_or(Cell::Missing, |m| Cell::Count(m.estimated_cycles)),
            m.map_or(Cell::Missing, |m| Cell::Fixed {
                value: 100.0 * (m.estimated_cycles as f64 - m.cycles as f64)
                    / (m.cycles as f64).max(1.0),
                decimals: 2,
                signed: true,
            }),
            test(self.hardware_pass),
            test(self.numerical_pass),
            self.build.clone().map_or(Cell::Missing, Cell::Text),
            self.error.clone().map_or(Cell::Missing, Cell::Text),
        ]);
        cells
    }
}

/// The header: the axes' names, then [`COLUMNS`].
pub fn header(axes: &[Axis]) -> Vec<String> {
    (axes.iter().map(|a| a.name.clone()))
        .chain(COLUMNS.iter().map(|c| c.to_string()))
        .collect()
}

/// A row with its header, serialised as one JSON object with the table's columns.
struct Keyed<'a>(&'a [String], &'a Row);

impl Serialize for Keyed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let cells = self.1.cells();
        let mut map = serializer.serialize_map(Some(cells.len()))?;
        for (key, cell) in self.0.iter().zip(&cells) {
            map.serialize_entry(key, &cell.json())?;
        }
        map.end()
    }
}

/// `sweep --json`'s body: the workload, the axes' names in grid order and the rows, each an object
/// keyed by the header (the axes' names, then [`COLUMNS`]).
pub fn json(workload: &str, axes: &[Axis], rows: &[Row]) -> serde_json::Value {
    let header = header(axes);
    let keyed: Vec<Keyed> = rows.iter().map(|r| Keyed(&header, r)).collect();
    serde_json::json!({
        "workload": workload,
        "axes": axes.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        "rows": keyed,
    })
}

/// The rows as an aligned table: numbers right-aligned, text left, the error last and unpadded.
pub fn table(axes: &[Axis], rows: &[Row]) -> String {
    let header = header(axes);
    let cells: Vec<Vec<Cell>> = rows.iter().map(Row::cells).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].text().chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let numeric: Vec<bool> = (0..header.len())
        .map(|c| {
            let number = |r: &Vec<Cell>| matches!(r[c], Cell::Count(_) | Cell::Fixed { .. });
            cells.iter().any(number) && !cells.iter().any(|r| matches!(r[c], Cell::Text(_)))
        })
        .collect();
    let line = |texts: Vec<String>| {
        let last = texts.len() - 1;
        let mut s = String::new();
        for (c, text) in texts.into_iter().enumerate() {
            if c == last {
                s.push_str(&text);
            } else if numeric[c] {
                let _ = write!(s, "{text:>w$}  ", w = widths[c]);
            } else {
                let _ = write!(s, "{text:<w$}  ", w = widths[c]);
            }
        }
        s.trim_end().to_string()
    };
    let mut s = line(header.clone());
    s.push('\n');
    for r in &cells {
        s.push_str(&line(r.iter().map(Cell::text).collect()));
        s.push('\n');
    }
    s
}

/// One CSV field: quoted when it holds a comma, a quote or a line break (quotes doubled).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The rows as CSV with a header line; a missing cell is empty.
pub fn csv(axes: &[Axis], rows: &[Row]) -> String {
    let mut s = header(axes)
        .iter()
        .map(|h| csv_field(h))
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    for r in rows {
        let fields: Vec<String> = (r.cells().iter())
            .map(|c| match c {
                Cell::Missing => String::new(),
                c => csv_field(&c.text()),
            })
            .collect();
        s.push_str(&fields.join(","));
        s.push('\n');
    }
    s
}

/// Runs a built package at one point on the device, its weights bound from `bindings`: its row's
/// measurements, tests and error.
fn measure(
    point: &Resolved,
    loaded: &Loaded,
    bindings: &Bindings,
    check: bool,
    row: &mut Row,
) -> Result<()> {
    let package = &loaded.package;
    let mut host = run::host_data(&package.graph, point.seed, bindings)?;
    // The device takes a copy: the package runs at its build's other points too.
    let ran = run::execute(package.clone(), &loaded.body_hash, &host, &Silent);
    let (execution, streamed) = match ran {
        Ok(ran) => (ran.execution, ran.streamed),
        Err(fault) => {
            row.hardware_pass = Some(false);
            bail!("hardware test failed: {fault}");
        }
    };
    row.hardware_pass = Some(true);
    // Efficiency as `run` prints it, so every form of the rows (a merged sweep's too) shows one value.
    let efficiency = format!(
        "{:.2}",
        RunFigures::of(package, &execution).efficiency_percent
    );
    row.measured = Some(Measured {
        cycles: execution.cycles,
        efficiency_percent: efficiency.parse().expect("a formatted number parses"),
        estimated_cycles: package.estimated_cycles,
    });
    if check {
        let reference = ipu_codegen::numerics::reference(&package.graph, &host, &Silent);
        let worst = worst_check(&run::check_outputs(
            package, &mut host, streamed, &reference,
        )?);
        row.numerical_pass = Some(worst.pass);
        if !worst.pass {
            bail!("{}", run::check_failure(&worst));
        }
    }
    Ok(())
}

/// A point's `build` arguments, its build folder named (the workload's build name, then
/// `-NAME-VALUE` for each phase-option axis), and the seed and weights file of its spec.
fn resolve(
    workload: &str,
    axes: &[Axis],
    values: &[String],
) -> Result<(BuildArgs, u64, Option<WeightsFile>)> {
    let flags: Vec<(&str, &str)> = (axes.iter().zip(values))
        .map(|(a, v)| (a.name.as_str(), v.as_str()))
        .collect();
    let mut args = parse_point(workload, &flags).map_err(anyhow::Error::msg)?;
    let spec = args.spec()?;
    let mut name = args.build_name(&spec);
    for (axis, value) in axes.iter().zip(values) {
        if axis.phase_option {
            name.push_str(&format!("-{}-{value}", axis.name));
        }
    }
    args.build = Some(name);
    Ok((args, spec.seed(), spec.default_weights()))
}

/// Builds and runs every point of the grid, or of the shard's share of it; the rows in grid order.
fn sweep_rows(
    storage: &StoreArgs,
    stages: &Path,
    workload: &str,
    args: &SweepArgs,
    axes: &[Axis],
    lock_timeout: u64,
) -> Result<Vec<Row>> {
    // Resolve every point to its build folder and data; distinct folders in order of first use.
    let mut builds: Vec<BuildArgs> = Vec::new();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut resolved = Vec::new();
    // Every point runs one workload file, so the weights file it names is read once, for all.
    let mut default_weights = None;
    let points = (grid(axes).into_iter().enumerate())
        .filter(|&(p, _)| args.shard.is_none_or(|shard| shard.holds(p)))
        .map(|(_, point)| point);
    for point in points {
        let values: Vec<String> = (axes.iter().zip(&point))
            .map(|(a, &i)| a.values[i].clone())
            .collect();
        let mut row = Row {
            values,
            build: None,
            measured: None,
            hardware_pass: None,
            numerical_pass: None,
            error: None,
        };
        match resolve(workload, axes, &row.values) {
            Ok((point_args, seed, weights)) => {
                default_weights.get_or_insert(weights);
                let name = point_args.build.clone().unwrap_or_default();
                let next = builds.len();
                let build = *by_name.entry(name.clone()).or_insert(next);
                if build == next {
                    builds.push(point_args);
                }
                row.build = Some(name);
                resolved.push(Some(Resolved { build, seed }));
            }
            Err(e) => {
                row.error = Some(format!("{e:#}"));
                resolved.push(None);
            }
        }
        rows.push(row);
    }

    let store = storage.open()?;
    let parent = tracing::Span::current();
    // Points run in parallel: one bar for the builds and one for the runs, not one per point.
    let bar = Bar::new(builds.len() as u64, "sweep builds");
    let packages: Vec<Result<Loaded, String>> = builds
        .par_iter()
        .map(|b| {
            let name = b.build.as_deref().unwrap_or_default();
            let _span =
                tracing::info_span!(parent: &parent, "ipu_codegen.sweep.build", build = name)
                    .entered();
            let loaded = run::build_package(&*store, stages, b, &Silent);
            bar.inc(1);
            loaded.map_err(|e| format!("{e:#}"))
        })
        .collect();
    bar.finish();

    if let Some(Ok(loaded)) = packages.first()
        && run::imported(&loaded.package.graph)
    {
        tracing::info!("the imported model's inputs are drawn from each point's seed");
    }
    let bindings = run::bindings(&DataArgs::default(), default_weights.flatten(), false)
        .map_err(|e| format!("{e:#}"));
    let _lock = run::lock_device(stages, lock_timeout)?;
    let bar = Bar::new(rows.len() as u64, "sweep runs");
    rows.par_iter_mut()
        .zip(&resolved)
        .enumerate()
        .for_each(|(i, (row, point))| {
            let Some(point) = point else { return };
            let _span = tracing::info_span!(parent: &parent, "ipu_codegen.sweep.point", point = i)
                .entered();
            match (&packages[point.build], &bindings) {
                (Ok(loaded), Ok(bindings)) => {
                    if let Err(e) = measure(point, loaded, bindings, args.check, row) {
                        row.error = Some(format!("{e:#}"));
                    }
                }
                (Err(e), _) | (_, Err(e)) => row.error = Some(e.clone()),
            }
            bar.inc(1);
        });
    bar.finish();
    Ok(rows)
}

/// `ipu-codegen sweep`: the rows on stdout (a table, or JSON), the CSV and the page where asked; fails
/// after all of that when a point failed. With `--shard`, only the shard's rows, as a part; with
/// `--merge`, the rows of the parts.
/// `lock_timeout`: how long to wait for the device (`--lock-timeout`), in seconds.
pub fn sweep(
    storage: &StoreArgs,
    stages: &Path,
    args: &SweepArgs,
    lock_timeout: u64,
) -> Result<()> {
    let (workload, axes, rows) = match &args.workload {
        None => shard::merge(&args.merge)?,
        Some(workload) => {
            if workload.ends_with(".ipuexe") {
                bail!(
                    "sweep takes a workload (a preset or a TOML file), not a package: {workload}"
                );
            }
            let axes = axes(workload, &args.vary)?;
            let rows = sweep_rows(storage, stages, workload, args, &axes, lock_timeout)?;
            (workload.clone(), axes, rows)
        }
    };
    if args.json {
        let mut body = json(&workload, &axes, &rows);
        if let Some(shard) = args.shard {
            body["shard"] = shard.json(&axes, args.check);
        }
        super::json::print("sweep", body);
    } else {
        print!("{}", table(&axes, &rows));
    }
    if let Some(path) = &args.csv {
        super::write_output(path, &csv(&axes, &rows), "csv", !args.json)?;
    }
    if let Some(path) = &args.html {
        let page = page::page(&workload, &axes, &rows);
        super::write_output(path, &page, "html", !args.json)?;
    }
    // A shard's row i is grid point index + i × count.
    let point = |i: usize| args.shard.map_or(i, |s| s.index + i * s.count);
    let failed: Vec<String> = (rows.iter().enumerate())
        .filter(|(_, r)| r.failed())
        .map(|(i, r)| {
            let values: Vec<String> = (axes.iter().zip(&r.values))
                .map(|(a, v)| format!("{}={v}", a.name))
                .collect();
            format!("point {} ({})", point(i), values.join(" "))
        })
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} points failed: {}",
            failed.len(),
            rows.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
