//! `ipu-codegen run`: build if needed, take the device, load, stream, execute, check, write the profile,
//! print the summary.

use super::BuildArgs;
use crate::device::{Device, host_data};
use crate::ir::read_ipuexe;
use crate::ir::{OpKind, ValueRole};
use crate::numerics;
use crate::store::{self, Store};
use anyhow::{Context, Result, bail};
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
    let package_path: PathBuf = if args.workload.ends_with(".ipuexe") {
        PathBuf::from(&args.workload)
    } else {
        let store = Store::open(cache)?;
        let b = args.build(&store, stages)?;
        b.run(
            crate::pipeline::PIPELINE[0],
            crate::pipeline::PIPELINE[crate::pipeline::PIPELINE.len() - 1],
        )?
        .package_path
        .context("the build wrote no package")?
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
    let host = host_data(graph);
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
    let check = numerics::check(graph, &output, &reference, out_value.id);
    tracing::info!(
        simulation_ms = simulated_ms,
        reference_ms = reference_started.elapsed().as_millis(),
        "device run checked"
    );

    let profile_path = build_dir.join("execution.ipuprofile");
    std::fs::write(&profile_path, store::encode(&execution))
        .with_context(|| format!("writing {}", profile_path.display()))?;

    let target = &package.target;
    let cycles = execution.cycles;
    let device_us = cycles as f64 / target.clock_hz() * 1e6;
    let flops = graph.useful_flops() as f64;
    let active = (0..package.tiles.len())
        .filter(|&t| execution.steps.iter().any(|s| s.tile_busy[t] > 0))
        .count();
    let host_us = target.host_link_microseconds(execution.input_bytes + execution.output_bytes);
    let params: Vec<String> = graph
        .parameters
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!(
        "profile={} tiles={} samples={}",
        profile_path.display(),
        package.tiles.len(),
        package.tiles.len() * execution.steps.len()
    );
    let attention = graph
        .ops
        .iter()
        .any(|op| matches!(op.kind, OpKind::Attention { .. }));
    if attention {
        println!(
            "attentionNumericalChecks={} maxError={:.6} rmsError={:.6} tolerance={:.6} numericalTest={}",
            check.checked,
            check.maximum_absolute_error,
            check.rms_error,
            check.tolerance,
            if check.pass { "PASS" } else { "FAIL" },
        );
    }
    let peak_flop_per_cycle =
        f64::from(target.tiles) * crate::target::PEAK_FLOP_PER_TILE_CYCLE as f64;
    println!(
        "workload={} {} activeTiles={} executionTiles={} inputBytes={} weightBytes={} cycles={} minimumTileCycles={} \
         estimatedCycles={} peakBoundCycles={:.0} deviceMicroseconds={:.3} hostMicroseconds={:.3} {}={:.3} \
         peakTflops={:.3} efficiencyPercent={:.2} maximumAbsoluteError={:.6} tolerance={:.6} numericalTest={}",
        graph.workload,
        params.join(" "),
        active,
        package.tiles.len(),
        execution.input_bytes,
        execution.weight_bytes,
        cycles,
        execution.minimum_tile_cycles,
        package.estimated_cycles,
        (flops / peak_flop_per_cycle).ceil(),
        device_us,
        host_us,
        if attention {
            "effectiveTflops"
        } else {
            "effectiveGemmTflops"
        },
        flops / (device_us * 1e-6) / 1e12,
        target.peak_tflops(),
        flops / (cycles as f64 * peak_flop_per_cycle) * 100.0,
        check.maximum_absolute_error,
        check.tolerance,
        if check.pass { "PASS" } else { "FAIL" },
    );
    let verdict = if check.pass { "PASS" } else { "FAIL" };
    println!("{summary_head} hardwareTest={verdict}");
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
