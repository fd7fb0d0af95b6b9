//! `ipu-codegen run`: build if needed, read the bound tensors (`--weights`, `--input`, `--inputs`'
//! `.npz`; the seeded generator for the rest), run the host operations before the device, take the
//! device, load, stream, execute, run the host operations after it, check every output, write the
//! profile, which names the package by its body's hash (and with `--output-dir` every output as
//! `.npy`, with `--output` all in one `.npz`), print the summary (its figures and lines come from
//! `ipu_codegen::driver::RunFigures`). The build's exchange scheduling, the supersteps and the host
//! reference report to the `Progress` passed in (bars on a terminal). `sweep` runs each point through
//! the same steps: `build_package`, `host_data`, `execute` and `check_outputs`.

use super::BuildArgs;
use anyhow::{Context, Result, bail};
use clap::Args;
use ipu_codegen::device::{Device, Execution, Fault};
use ipu_codegen::driver::PIPELINE;
use ipu_codegen::driver::{Fields, RunFigures, output_check_line, verdict, worst_check};
use ipu_codegen::files;
use ipu_codegen::ids::ValueId;
use ipu_codegen::ir::{Graph, Package, open_ipuexe};
use ipu_codegen::numerics;
use ipu_codegen::progress::Progress;
use ipu_codegen::report::write_profile;
use ipu_codegen::store::{self, ContentHash, Store};
use ipu_codegen::target::Target;
use ipu_codegen::tensors::bind::{Bindings, TensorFile, bind, output_files, output_tensors};
use ipu_codegen::tensors::host_ops::HostOps;
use ipu_codegen::tensors::{npy, npz, safetensors};
use ipu_codegen::workload::WeightsFile;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Holds the device lock until dropped (closing the file releases the lock).
pub struct DeviceLock {
    _file: File,
}

/// Takes the simulated device (`<stages>/device.lock`), waiting up to `timeout_secs` for another run
/// to release it.
pub fn lock_device(stages: &Path, timeout_secs: u64) -> Result<DeviceLock> {
    acquire(
        &stages.join("device.lock"),
        Duration::from_secs(timeout_secs),
    )
}

fn acquire(path: &Path, timeout: Duration) -> Result<DeviceLock> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    tracing::info!(path = %path.display(), "waiting for hardware ownership");
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                bail!(
                    "the simulated device is busy: {} is held by another run after {}s; retry or raise --lock-timeout",
                    path.display(),
                    timeout.as_secs()
                )
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
    }
    tracing::info!(path = %path.display(), "acquired hardware ownership");
    Ok(DeviceLock { _file: file })
}

/// The data a run binds and where its outputs go.
#[derive(Args, Debug, Clone, Default)]
pub struct DataArgs {
    /// Bind every weight by name from a .safetensors file (the file must hold every weight and
    /// nothing else); unbound weights come from the seeded generator.
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
    /// Bind one input by name from a .npy file, given as NAME=FILE or NAME=@FILE (repeatable). An
    /// imported model's (a graph workload's) inputs must all be bound; a preset's unbound inputs come
    /// from the seeded generator.
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Bind inputs by name from a .npz archive (numpy's savez): each entry NAME.npy binds input
    /// NAME (with --input, each input bound once).
    #[arg(long = "inputs", value_name = "FILE.npz")]
    inputs_archive: Option<PathBuf>,
    /// Draw every input no --input or --inputs binds from the seeded generator, an imported model's
    /// too.
    #[arg(long)]
    random_inputs: bool,
    /// Write every output as DIR/<name>.npy (characters outside [A-Za-z0-9._-] become _).
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Write every output into one .npz archive, as NAME.npy by its name (numpy.load reads it).
    #[arg(long = "output", value_name = "FILE.npz")]
    output_archive: Option<PathBuf>,
}

/// `--input NAME=FILE` or `NAME=@FILE`: the input's name and the file.
fn input_flag(given: &str) -> Result<(&str, &str)> {
    match given.split_once('=') {
        Some((name, file)) if !name.is_empty() => {
            let file = file.strip_prefix('@').unwrap_or(file);
            if file.is_empty() {
                bail!("--input {given:?}: no file after `=`; expected NAME=FILE.npy");
            }
            Ok((name, file))
        }
        _ => bail!("--input {given:?}: expected NAME=FILE.npy (or NAME=@FILE.npy)"),
    }
}

/// Where a summary line's fields go in `run`'s JSON object.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// At the top: the profile's line and the last line (package, tiles, hardwareTest, …).
    Top,
    /// An output file written: its path, in `outputFiles`.
    Output,
    /// A numerical check (per output, or the attention's), in `checks`.
    Check,
    /// The summary line, as `summary`.
    Summary,
}

/// The summary: one `key=value` line per [`Fields`], or with `--json` one `run` object holding the
/// same fields.
fn print_lines(json: bool, lines: &[(Part, Fields)]) {
    if !json {
        for (_, line) in lines {
            println!("{}", line.line());
        }
        return;
    }
    let mut top = serde_json::Map::new();
    let of = |part: Part| {
        lines
            .iter()
            .filter(move |(p, _)| *p == part)
            .map(|(_, f)| f.json())
    };
    for fields in of(Part::Top) {
        if let serde_json::Value::Object(map) = fields {
            top.extend(map);
        }
    }
    let files: Vec<_> = of(Part::Output).map(|f| f["output"].clone()).collect();
    top.insert("outputFiles".into(), files.into());
    top.insert("checks".into(), of(Part::Check).collect::<Vec<_>>().into());
    if let Some(summary) = of(Part::Summary).next() {
        top.insert("summary".into(), summary);
    }
    super::json::print("run", top.into());
}

/// The content hash of a graph, as the store names it.
fn graph_hash(graph: &Graph) -> ContentHash {
    store::encode(graph).hash()
}

/// Whether a package's graph is an imported model's, whose inputs a run must bind (`import` names
/// the model among the graph's parameters; no preset does).
pub fn imported(graph: &Graph) -> bool {
    graph.parameters.iter().any(|(k, _)| k == "model")
}

/// Reads the files `data` names (the spec's default weights when `--weights` is not given, which must
/// hash to what the spec records).
/// `inputs_required`: whether an unbound input is an error (an imported model's without
/// `--random-inputs`).
pub fn bindings(
    data: &DataArgs,
    default_weights: Option<WeightsFile>,
    inputs_required: bool,
) -> Result<Bindings> {
    let given = data
        .weights
        .clone()
        .map(|path| WeightsFile { path, blake3: None });
    let weights = match given.or(default_weights) {
        Some(WeightsFile { path, blake3 }) => {
            let file = path.display().to_string();
            let bytes = files::read(&path, &files::WEIGHTS)?;
            if let Some(want) = blake3 {
                let found = blake3::hash(&bytes);
                if found != want {
                    bail!(
                        "weights file {file} does not match its graph spec: it hashes to {}, the spec \
                         records weights_blake3 {} (the pair was changed or mixed; import the model \
                         again, or name the weights with --weights)",
                        found.to_hex(),
                        want.to_hex()
                    );
                }
            }
            let tensors = safetensors::read(&bytes).with_context(|| file.clone())?;
            Some(TensorFile { file, tensors })
        }
        None => None,
    };
    let mut inputs = Vec::new();
    for given in &data.inputs {
        let (name, file) = input_flag(given)?;
        let tensor = npy::read(&files::read(Path::new(file), &files::INPUT)?)
            .with_context(|| file.to_string())?;
        inputs.push((name.to_string(), file.to_string(), tensor));
    }
    if let Some(path) = &data.inputs_archive {
        let file = path.display().to_string();
        let bytes = files::read(path, &files::INPUTS_ARCHIVE)?;
        let tensors = npz::read(&bytes, files::INPUT.limit)
            .with_context(|| format!("inputs archive {file}"))?;
        for (name, tensor) in tensors {
            let source = format!("{file} (entry {name}.npy)");
            inputs.push((name, source, tensor));
        }
    }
    Ok(Bindings {
        weights,
        inputs,
        inputs_required: inputs_required && !data.random_inputs,
    })
}

/// The host data of a run: bound and seeded inputs and weights, and what the host operations before
/// the device make of them.
pub fn host_data(graph: &Graph, seed: u64, bindings: &Bindings) -> Result<Vec<Vec<f32>>> {
    let mut host = bind(graph, seed, bindings)?;
    HostOps::run(graph, &HostOps::of(graph).before, &mut host)?;
    Ok(host)
}

/// A package read from its `model.ipuexe`.
pub struct Loaded {
    pub path: PathBuf,
    /// The hash of the file's body, which names the package in its execution profile.
    pub body_hash: ContentHash,
    pub package: Package,
}

/// Builds the workload `args` names through `store` (every phase a cache hit when nothing changed)
/// and reads the package the build wrote.
pub fn build_package(
    store: &dyn Store,
    stages: &Path,
    args: &BuildArgs,
    progress: &dyn Progress,
) -> Result<Loaded> {
    let b = args.build(store, stages, progress)?;
    let path = b
        .run(PIPELINE[0], PIPELINE[PIPELINE.len() - 1])?
        .package_path
        .context("the build wrote no package")?;
    read_package(&path, Some((&b.graph, &b.target)))
}

/// Reads a `model.ipuexe`; with `asked`, refuses a package built for another graph or target.
fn read_package(path: &Path, asked: Option<(&Graph, &Target)>) -> Result<Loaded> {
    tracing::info!("reading application package");
    let bytes = files::read(path, &files::PACKAGE)?;
    let file = open_ipuexe(&bytes).with_context(|| format!("{}", path.display()))?;
    let package = file
        .package()
        .with_context(|| format!("{}", path.display()))?;
    if let Some((graph, target)) = asked
        && (package.graph != *graph || package.target != *target)
    {
        bail!(
            "{} was built for {} on {} (graph {}), not for what this run asked: {} on {} (graph {}); \
             rebuild it",
            path.display(),
            package.workload,
            package.target.name,
            graph_hash(&package.graph).short(),
            graph.workload,
            target.name,
            graph_hash(graph).short(),
        );
    }
    tracing::info!(tiles = package.tiles.len(), compiler = %package.compiler_version, "application package read");
    Ok(Loaded {
        path: path.to_path_buf(),
        body_hash: file.body_hash,
        package,
    })
}

/// What a device run gives back: the run's profile, the outputs the device streamed back, and the
/// package it ran, but for its code images (which went to the device and were let go with it).
pub struct Ran {
    pub execution: Execution,
    pub streamed: BTreeMap<ValueId, Vec<f32>>,
    pub package: Package,
}

/// Loads `package` on the device, streams the host's weights (`initialize`) and inputs (`run`) and
/// executes every superstep: the run's profile, naming the package by `body_hash`, the outputs the
/// device streamed back and the package without its code images ([`Ran`]); or the fault the device
/// refused it with.
pub fn execute(
    package: Package,
    body_hash: &ContentHash,
    host: &[Vec<f32>],
    progress: &dyn Progress,
) -> Result<Ran, Fault> {
    let tiles = package.tiles.len();
    tracing::info!(path = "sim:0", "opening IPU device");
    tracing::info!(path = "sim:0", "IPU device attached");
    tracing::info!("initializing IPU device");
    tracing::info!(tiles, "IPU device initialized");
    // One code-base register per tile: where its program starts.
    tracing::info!(register_writes = tiles, "replaying device configuration");
    tracing::info!(tile_count = tiles, "loading application");
    let mut device = Device::load(package)?;
    // The package's code images now live in tile memory; their freed blocks go back to the system.
    ipu_codegen::host_memory::release_freed();
    tracing::info!(
        tile_count = tiles,
        "application loaded and initial synchronization completed"
    );
    tracing::info!("starting host exchange session");
    tracing::info!("host exchange session started");
    tracing::info!(
        call = "initialize",
        phases = 1,
        transfers = device.package().host.initialize.len(),
        "invoking streaming host exchange call"
    );
    device.initialize(host)?;
    tracing::info!(
        call = "run",
        phases = device.supersteps(),
        transfers =
            device.package().host.run_inputs.len() + device.package().host.run_outputs.len(),
        "invoking streaming host exchange call"
    );
    let (execution, streamed) = device.run(host, progress)?;
    tracing::info!(samples = execution.steps.len() * tiles, "profile read back");
    // The profile names the package by its body's hash.
    let execution = Execution {
        package: body_hash.hex(),
        ..execution
    };
    Ok(Ran {
        execution,
        streamed,
        package: device.into_package(),
    })
}

/// Takes what the device `streamed` back into `host`, runs the host's operations after the device and
/// checks every output of the package's signature, in order, against `reference`, the float64
/// reference over the data the device was given.
pub fn check_outputs(
    package: &Package,
    host: &mut [Vec<f32>],
    streamed: BTreeMap<ValueId, Vec<f32>>,
    reference: &numerics::Reference,
) -> Result<Vec<numerics::Check>> {
    let graph = &package.graph;
    for (value, data) in streamed {
        host[value.index()] = data;
    }
    HostOps::run(graph, &HostOps::of(graph).after, host)?;
    let outputs = package.signature().outputs;
    if outputs.is_empty() {
        bail!("the graph has no output");
    }
    Ok(outputs
        .iter()
        .map(|o| numerics::check(&host[o.value.index()], reference, o.value))
        .collect())
}

pub fn run(
    storage: &super::storage::StoreArgs,
    stages: &Path,
    args: &BuildArgs,
    data: &DataArgs,
    lock_timeout: u64,
    json: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let (loaded, seed, default_weights) = if args.workload.ends_with(".ipuexe") {
        let path = PathBuf::from(&args.workload);
        (read_package(&path, None)?, args.seed.unwrap_or(1), None)
    } else {
        let store = storage.open()?;
        let loaded = build_package(&*store, stages, args, progress)?;
        let spec = args.spec()?;
        (loaded, spec.seed(), spec.default_weights())
    };
    let Loaded {
        path: package_path,
        body_hash,
        package,
    } = loaded;
    let build_dir = package_path
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    // The graph apart from the package, which goes to the device and comes back without its code.
    let graph = &package.graph.clone();
    let required = imported(graph);
    if required && data.random_inputs {
        tracing::info!(
            seed,
            "inputs no --input binds are drawn from the seed (--random-inputs)"
        );
    }
    let mut host = host_data(graph, seed, &bindings(data, default_weights, required)?)?;
    let _lock = lock_device(stages, lock_timeout)?;

    let started = Instant::now();
    let summary_head = Fields::new()
        .with("package", package_path.display())
        .with("tiles", package.tiles.len());
    // The host reference runs beside the device, over the same data, with a bar of its own.
    let reference_bars = super::progress::Terminal::default();
    let (ran, reference) = std::thread::scope(|s| {
        let reference = s.spawn(|| {
            let started = Instant::now();
            let r = numerics::reference(graph, &host, &reference_bars);
            (r, started.elapsed().as_millis())
        });
        let ran = execute(package, &body_hash, &host, progress);
        let simulated_ms = started.elapsed().as_millis();
        (ran.map(|r| (r, simulated_ms)), reference.join())
    });
    let (
        Ran {
            execution,
            streamed,
            package,
        },
        simulated_ms,
    ) = match ran {
        Ok(ran) => ran,
        Err(fault) => {
            let line = summary_head
                .with("hardwareTest", "FAIL")
                .with("fault", &fault);
            print_lines(json, &[(Part::Top, line)]);
            bail!("hardware test failed: {fault}");
        }
    };
    let Ok((reference, reference_ms)) = reference else {
        bail!("the host reference stopped before it finished");
    };
    let checks = check_outputs(&package, &mut host, streamed, &reference)?;
    let outputs = package.signature().outputs;
    let check = worst_check(&checks);
    tracing::info!(
        simulation_ms = simulated_ms,
        reference_ms,
        "device run checked"
    );

    let profile_path = build_dir.join("execution.ipuprofile");
    ipu_codegen::driver::write_if_changed(&profile_path, &[&write_profile(&execution)])?;
    let files = match &data.output_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut written = Vec::new();
            for (name, bytes) in output_files(graph, &host)? {
                let path = dir.join(name);
                files::write_atomic(&path, "output", &bytes)?;
                written.push(path);
            }
            written
        }
        None => Vec::new(),
    };
    let files = match &data.output_archive {
        Some(path) => {
            let bytes = npz::write(&output_tensors(graph, &host)?)
                .with_context(|| format!("outputs archive {}", path.display()))?;
            files::write_atomic(path, "outputs archive", &bytes)?;
            files.into_iter().chain([path.clone()]).collect()
        }
        None => files,
    };

    let figures = RunFigures::of(&package, &execution);
    let mut lines = vec![(
        Part::Top,
        Fields::new()
            .with("profile", profile_path.display())
            .with("tiles", package.tiles.len())
            .with("samples", package.tiles.len() * execution.steps.len()),
    )];
    for path in &files {
        lines.push((Part::Output, Fields::new().with("output", path.display())));
    }
    if checks.len() > 1 {
        for (o, c) in outputs.iter().zip(&checks) {
            lines.push((Part::Check, output_check_line(&o.name, c)));
        }
    } else if let Some(line) = figures.check_line(&check) {
        lines.push((Part::Check, line));
    }
    if let Some(warning) =
        ipu_codegen::driver::estimate_warning(package.estimated_cycles, execution.cycles)
    {
        tracing::warn!("{warning}");
    }
    lines.push((
        Part::Summary,
        figures.summary_line(&package, &execution, &check, seed),
    ));
    let mut last = summary_head.with("hardwareTest", verdict(check.pass));
    if let Some(peak) = ipu_codegen::host_memory::peak_bytes() {
        last = last.with("hostPeakMiB", ipu_codegen::host_memory::mebibytes(peak));
    }
    lines.push((Part::Top, last));
    print_lines(json, &lines);
    if !check.pass {
        bail!("{}", check_failure(&check));
    }
    Ok(())
}

/// Why a numerical check failed.
pub fn check_failure(check: &numerics::Check) -> String {
    if check.non_finite > 0 {
        format!(
            "numerical check failed: {} of {} outputs are not finite (NaN or infinite); the \
             finite ones are within {:.6} of the reference (tolerance {:.6})",
            check.non_finite, check.checked, check.maximum_absolute_error, check.tolerance
        )
    } else {
        format!(
            "numerical check failed: maximum absolute error {:.6} over the tolerance {:.6}",
            check.maximum_absolute_error, check.tolerance
        )
    }
}
