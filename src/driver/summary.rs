//! The figures of a device run's summary, and its lines.
//!
//! Contract: every figure follows from the package, the execution profile and the numerical check
//! alone (README, "Reading the run summary"): useful flops from the graph, device time at the target's
//! clock, the peak-rate bound and efficiency over every tile of the target, active tiles as the tiles
//! busy in any superstep. The lines are returned, never printed.

use crate::device::Execution;
use crate::ir::{OpKind, Package};
use crate::numerics::Check;
use crate::target::PEAK_FLOP_PER_TILE_CYCLE;

/// The figures of one run of a package.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFigures {
    /// The graph has an attention: flops are the attention's, and it gets a check line of its own.
    pub attention: bool,
    /// Tiles busy in at least one superstep.
    pub active_tiles: usize,
    /// Useful flops of one run (`Graph::useful_flops`).
    pub flops: f64,
    /// The cycles the flops take at the AMPs' peak rate on every tile of the target.
    pub peak_bound_cycles: f64,
    pub device_microseconds: f64,
    /// Host-link time of the run's streams.
    pub host_microseconds: f64,
    pub effective_tflops: f64,
    /// The flops over what every tile's AMP could do in the run's cycles, in percent.
    pub efficiency_percent: f64,
}

impl RunFigures {
    pub fn of(package: &Package, execution: &Execution) -> RunFigures {
        let target = &package.target;
        let graph = &package.graph;
        let device_microseconds = execution.cycles as f64 / target.clock_hz() * 1e6;
        let flops = graph.useful_flops() as f64;
        let peak_flop_per_cycle = f64::from(target.tiles) * PEAK_FLOP_PER_TILE_CYCLE as f64;
        RunFigures {
            attention: graph
                .ops
                .iter()
                .any(|op| matches!(op.kind, OpKind::Attention { .. })),
            active_tiles: (0..package.tiles.len())
                .filter(|&t| execution.steps.iter().any(|s| s.tile_busy[t] > 0))
                .count(),
            flops,
            peak_bound_cycles: (flops / peak_flop_per_cycle).ceil(),
            device_microseconds,
            host_microseconds: target
                .host_link_microseconds(execution.input_bytes + execution.output_bytes),
            effective_tflops: flops / (device_microseconds * 1e-6) / 1e12,
            efficiency_percent: flops / (execution.cycles as f64 * peak_flop_per_cycle) * 100.0,
        }
    }

    /// The attention's check line (`attentionNumericalChecks=…`); none for other graphs.
    pub fn check_line(&self, check: &Check) -> Option<String> {
        self.attention.then(|| {
            format!(
                "attentionNumericalChecks={} maxError={:.6} rmsError={:.6} tolerance={:.6} numericalTest={}",
                check.checked,
                check.maximum_absolute_error,
                check.rms_error,
                check.tolerance,
                verdict(check.pass),
            )
        })
    }

    /// The summary line: the workload (its id, with `-s<seed>` when the data's seed is not 1) and its
    /// parameters, the run's figures, the error and the verdict.
    pub fn summary_line(
        &self,
        package: &Package,
        execution: &Execution,
        check: &Check,
        seed: u64,
    ) -> String {
        let graph = &package.graph;
        let params: Vec<String> = graph
            .parameters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "workload={} {} activeTiles={} executionTiles={} inputBytes={} weightBytes={} cycles={} minimumTileCycles={} \
             estimatedCycles={} peakBoundCycles={:.0} deviceMicroseconds={:.3} hostMicroseconds={:.3} {}={:.3} \
             peakTflops={:.3} efficiencyPercent={:.2} maximumAbsoluteError={:.6} tolerance={:.6} numericalTest={}",
            if seed == 1 {
                graph.workload.clone()
            } else {
                format!("{}-s{seed}", graph.workload)
            },
            params.join(" "),
            self.active_tiles,
            package.tiles.len(),
            execution.input_bytes,
            execution.weight_bytes,
            execution.cycles,
            execution.minimum_tile_cycles,
            package.estimated_cycles,
            self.peak_bound_cycles,
            self.device_microseconds,
            self.host_microseconds,
            if self.attention {
                "effectiveTflops"
            } else {
                "effectiveGemmTflops"
            },
            self.effective_tflops,
            package.target.peak_tflops(),
            self.efficiency_percent,
            check.maximum_absolute_error,
            check.tolerance,
            verdict(check.pass),
        )
    }
}

/// The check line of one output of several: `outputCheck=NAME checked=… maxError=… rmsError=…
/// tolerance=… numericalTest=…`.
pub fn output_check_line(name: &str, check: &Check) -> String {
    format!(
        "outputCheck={name} checked={} maxError={:.6} rmsError={:.6} tolerance={:.6} numericalTest={}",
        check.checked,
        check.maximum_absolute_error,
        check.rms_error,
        check.tolerance,
        verdict(check.pass),
    )
}

/// The checks of several outputs as one, for the summary line: the failing check (or, when all pass,
/// the one) with the largest error relative to its tolerance, the first among equals; it passes only
/// when every check passes. The only check of a single output is itself.
pub fn worst_check(checks: &[Check]) -> Check {
    let ratio = |c: &Check| {
        let r = c.maximum_absolute_error / c.tolerance;
        if r.is_nan() { f64::INFINITY } else { r }
    };
    let mut worst = checks
        .iter()
        .fold(None::<&Check>, |w, c| match w {
            Some(w) if (!w.pass, ratio(w)) >= (!c.pass, ratio(c)) => Some(w),
            _ => Some(c),
        })
        .cloned()
        .unwrap_or(Check {
            maximum_absolute_error: 0.0,
            rms_error: 0.0,
            tolerance: 0.0,
            checked: 0,
            non_finite: 0,
            pass: false,
        });
    worst.pass = checks.iter().all(|c| c.pass) && !checks.is_empty();
    worst
}

/// `PASS` or `FAIL`.
pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}
