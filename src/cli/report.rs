//! `ipu-codegen report`: reads one execution profile (or two, to compare), refuses a damaged,
//! foreign or inconsistent one naming the file, prints the summary table (or JSON) and writes the
//! page and trace asked for. The memory map comes from the package the profile measured: the
//! `model.ipuexe` beside the profile unless `--package` names one, refused unless its body hash is
//! the one the profile records.

use anyhow::{Context, Result, bail};
use ipu_codegen::device::Execution;
use ipu_codegen::files::{self, read};
use ipu_codegen::ir::open_ipuexe;
use ipu_codegen::report::{self, Comparison, MemoryMap, Summary};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// An execution.ipuprofile (written by `run` beside model.ipuexe), or two to compare (A, then B).
    #[arg(required = true, num_args = 1..=2, value_name = "PROFILE")]
    profiles: Vec<PathBuf>,
    /// Write a self-contained HTML page: BSP timeline, heat maps, a tile's memory map and the table
    /// (with two profiles: both timelines to one scale and the steps side by side).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write Chrome trace-event JSON (open in Perfetto); one profile only.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// One trace track per chip column (its busiest tile) instead of per tile.
    #[arg(long, requires = "trace")]
    per_column: bool,
    /// Print the summary (or the comparison) as one JSON object with the table's fields.
    #[arg(long)]
    json: bool,
    /// The tile whose memory map the page shows [default: the tile using the most memory].
    #[arg(long, value_name = "TILE")]
    tile: Option<usize>,
    /// The package the profile measured, for the memory map [default: model.ipuexe beside the
    /// profile].
    #[arg(long, value_name = "FILE")]
    package: Option<PathBuf>,
}

/// A profile file, read within the size limit, its header checked and its contents consistent.
fn profile(path: &Path) -> Result<Execution> {
    let bytes = read(path, &files::PROFILE)?;
    let execution = report::read_profile(&bytes)
        .with_context(|| format!("{} is not an execution profile", path.display()))?;
    let errors = report::check(&execution);
    if !errors.is_empty() {
        bail!(
            "{} is not a consistent execution profile:\n{}",
            path.display(),
            errors.join("\n")
        );
    }
    Ok(execution)
}

/// The memory map for the page, or why there is none. A package named with `--package`, or a tile
/// asked for, must be there; the default package may be absent.
fn memory_map(args: &ReportArgs, e: &Execution) -> Result<std::result::Result<MemoryMap, String>> {
    let beside = args.profiles[0].with_file_name("model.ipuexe");
    let path = args.package.clone().unwrap_or(beside);
    if args.package.is_none() && args.tile.is_none() && !path.exists() {
        return Ok(Err(format!("no package at {}", path.display())));
    }
    let bytes = read(&path, &files::PACKAGE)?;
    let file = open_ipuexe(&bytes).with_context(|| format!("{}", path.display()))?;
    if file.body_hash.hex() != e.package {
        bail!(
            "{} is package {}, but the profile measured package {}",
            path.display(),
            file.body_hash.hex(),
            e.package
        );
    }
    let package = file
        .package()
        .with_context(|| format!("{}", path.display()))?;
    let busiest = (0..e.memory.len())
        .max_by_key(|&t| {
            (
                u64::from(e.memory[t].0) + u64::from(e.memory[t].1),
                usize::MAX - t,
            )
        })
        .unwrap_or(0);
    let tile = args.tile.unwrap_or(busiest);
    Ok(Ok(
        MemoryMap::of(&package, tile).map_err(anyhow::Error::msg)?
    ))
}

pub fn report(args: &ReportArgs) -> Result<()> {
    let a = profile(&args.profiles[0])?;
    if let Some(path) = &args.profiles.get(1) {
        let b = profile(path)?;
        if args.trace.is_some() || args.tile.is_some() || args.package.is_some() {
            bail!("--trace, --tile and --package take one profile, not two");
        }
        let c = Comparison::of(&a, &b);
        if args.json {
            super::json::print("reportCompare", c.json());
        } else {
            print!("{}", c.text());
        }
        if let Some(path) = &args.html {
            super::write_output(path, &report::compare::html(&a, &b), "html", !args.json)?;
        }
        return Ok(());
    }
    let summary = Summary::of(&a);
    if args.json {
        super::json::print("report", summary.json());
    } else {
        print!("{}", summary.text());
    }
    if let Some(path) = &args.html {
        let map = memory_map(args, &a)?;
        let page = report::html(&a, map.as_ref().map_err(|s| s.as_str()));
        super::write_output(path, &page, "html", !args.json)?;
    }
    if let Some(path) = &args.trace {
        super::write_output(
            path,
            &report::trace(&a, args.per_column),
            "trace",
            !args.json,
        )?;
    }
    Ok(())
}
