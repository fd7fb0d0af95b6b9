//! `ipu-codegen run`: build if needed, take the device, load, stream, execute, check, write the profile,
//! print the summary (its figures come from `ipu_codegen::driver::RunFigures`).

use super::BuildArgs;
use anyhow::{Context, Result, bail};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::driver::PIPELINE;
use ipu_codegen::driver::{RunFigures, verdict};
use ipu_codegen::ir::ValueRole;
use ipu_codegen::ir::read_ipuexe;
use ipu_codegen::numerics;
use ipu_codegen::store::{self, Store};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Holds the device lock until dropped (closing the file releases the lock).
struct DeviceLock {
    _file: File,
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

pub fn run(cache: &Path, stages: &Path, args: &BuildArgs, lock_timeout: u64) -> Result<()> {
    let (package_path, seed): (PathBuf, u64) = if args.workload.ends_with(".ipuexe") {
        (PathBuf::from(&args.workload), args.seed.unwrap_or(1))
    } else {
        let store = Store::open(cache)?;
        let b = args.build(&store, stages)?;
        let seed = args.spec()?.seed();
        let path = b
            .run(PIPELINE[0], PIPELINE[PIPELINE.len() - 1])?
            .package_path
            .context("the build wrote no package")?;
        (path, seed)
    };
    tracing::info!("reading application package");
    let bytes = std::fs::read(&package_path)
        .with_context(|| format!("reading {}", package_path.display()))?;
    let (compiler, package) =
        read_ipuexe(&bytes).with_context(|| format!("{}", package_path.display()))?;
    tracing::info!(tiles = package.tiles.len(), compiler = %compiler, "application package read");
    let build_dir = package_path
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let _lock = acquire(
        &stages.join("device.lock"),
        Duration::from_secs(lock_timeout),
    )?;

    let graph = &package.graph;
    let host = host_data(graph, seed);
    let started = Instant::now();
    tracing::info!(path = "sim:0", "opening IPU device");
    tracing::info!(path = "sim:0", "IPU device attached");
    tracing::info!("initializing IPU device");
    tracing::info!(tiles = package.tiles.len(), "IPU device initialized");
    // One code-base register per tile: where its program starts.
    tracing::info!(
        register_writes = package.tiles.len(),
        "replaying device configuration"
    );
    tracing::info!(tile_count = package.tiles.len(), "loading application");
    let loaded = Device::load(&package);
    let summary_head = format!(
        "package={} tiles={}",
        package_path.display(),
        package.tiles.len()
    );
    let mut device = match loaded {
        Ok(d) => d,
        Err(fault) => {
            println!("{summary_head} hardwareTest=FAIL fault=\"{fault}\"");
            bail!("hardware test failed: {fault}");
        }
    };
    tracing::info!(
        tile_count = package.tiles.len(),
        "application loaded and initial synchronization completed"
    );
    tracing::info!("starting host exchange session");
    tracing::info!("host exchange session started");
    tracing::info!(
        call = "initialize",
        phases = 1,
        transfers = package.host.initialize.len(),
        "invoking streaming host exchange call"
    );
    let result = device.initialize(&package, &host).and_then(|_| {
        tracing::info!(
            call = "run",
            phases = device.supersteps(),
            transfers = package.host.run_inputs.len() + package.host.run_outputs.len(),
            "invoking streaming host exchange call"
        );
        device.run(&package, &host)
    });
    let (execution, output) = match result {
        Ok(r) => r,
        Err(fault) => {
            println!("{summary_head} hardwareTest=FAIL fault=\"{fault}\"");
            bail!("hardware test failed: {fault}");
        }
    };
    let simulated_ms = started.elapsed().as_millis();
    tracing::info!(
        samples = execution.steps.len() * package.tiles.len(),
        "profile read back"
    );
    let reference_started = Instant::now();
    let reference = numerics::reference(graph, &host);
    let out_value = graph
        .values
        .iter()
        .find(|v| v.role == ValueRole::Output)
        .context("the graph has no output")?;
    let check = numerics::check(
        graph,
        output.get(&out_value.id).map_or(&[][..], Vec::as_slice),
        &reference,
        out_value.id,
    );
    tracing::info!(
        simulation_ms = simulated_ms,
        reference_ms = reference_started.elapsed().as_millis(),
        "device run checked"
    );

    let profile_path = build_dir.join("execution.ipuprofile");
    ipu_codegen::driver::write_if_changed(&profile_path, &store::encode(&execution))
        .with_context(|| format!("writing {}", profile_path.display()))?;

    let figures = RunFigures::of(&package, &execution);
    println!(
        "profile={} tiles={} samples={}",
        profile_path.display(),
        package.tiles.len(),
        package.tiles.len() * execution.steps.len()
    );
    if let Some(line) = figures.check_line(&check) {
        println!("{line}");
    }
    println!(
        "{}",
        figures.summary_line(&package, &execution, &check, seed)
    );
    println!("{summary_head} hardwareTest={}", verdict(check.pass));
    if !check.pass {
        bail!(
            "numerical check failed: maximum absolute error {:.6} over the tolerance {:.6} ({} non-finite of {})",
            check.maximum_absolute_error,
            check.tolerance,
            check.non_finite,
            check.checked
        );
    }
    Ok(())
}
