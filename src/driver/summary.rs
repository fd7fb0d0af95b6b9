//! The figures of a device run's summary, and its lines.
//!
//! Contract: every figure follows from the package, the execution profile and the numerical check
//! alone (README, "Reading the run summary"): useful flops from the graph, device time at the target's
//! clock, the peak-rate bound and efficiency over every tile of the target, active tiles as the tiles
//! busy in any superstep. The lines are returned as [`Fields`], never printed; a line's text and JSON
//! forms hold the same fields.

use crate::device::Execution;
use crate::ir::{OpKind, Package};
use crate::numerics::Check;
use crate::target::PEAK_FLOP_PER_TILE_CYCLE;

/// One summary line's fields, in order: `key=value` as text ([`Fields::line`]) or a JSON object
/// ([`Fields::json`]) with the same keys, numbers as numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields(pub Vec<(String, String)>);

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Adds a field.
    pub fn with(mut self, key: impl Into<String>, value: impl ToString) -> Fields {
        self.0.push((key.into(), value.to_string()));
        self
    }

    /// `key=value key=value`; a value with a space or a quote is quoted.
    pub fn line(&self) -> String {
        let field = |(k, v): &(String, String)| {
            if v.contains([' ', '"']) || v.is_empty() {
                format!("{k}={v:?}")
            } else {
                format!("{k}={v}")
            }
        };
        self.0.iter().map(field).collect::<Vec<_>>().join(" ")
    }

    /// The fields as a JSON object: a value that reads as a finite number is one, `true` and
    /// `false` are booleans.
    pub fn json(&self) -> serde_json::Value {
        let value = |v: &str| match v.parse::<f64>() {
            Ok(x) if x.is_finite() && !v.starts_with('+') => {
                serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()))
            }
            _ => match v {
                "true" => serde_json::Value::Bool(true),
                "false" => serde_json::Value::Bool(false),
                _ => serde_json::Value::String(v.to_string()),
            },
        };
        serde_json::Value::Object(self.0.iter().map(|(k, v)| (k.clone(), value(v))).collect())
    }
}

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
    pub fn check_line(&self, check: &Check) -> Option<Fields> {
        self.attention.then(|| {
            Fields::new()
                .with("attentionNumericalChecks", check.checked)
                .with("maxError", format!("{:.6}", check.maximum_absolute_error))
                .with("rmsError", format!("{:.6}", check.rms_error))
                .with("tolerance", format!("{:.6}", check.tolerance))
                .with("numericalTest", verdict(check.pass))
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
    ) -> Fields {
        let graph = &package.graph;
        let mut fields = Fields::new().with(
            "workload",
            if seed == 1 {
                graph.workload.clone()
            } else {
                format!("{}-s{seed}", graph.workload)
            },
        );
        for (k, v) in &graph.parameters {
            fields = fields.with(k.clone(), v);
        }
        fields
            .with("activeTiles", self.active_tiles)
            .with("executionTiles", package.tiles.len())
            .with("inputBytes", execution.input_bytes)
            .with("weightBytes", execution.weight_bytes)
            .with("cycles", execution.cycles)
            .with("minimumTileCycles", execution.minimum_tile_cycles)
            .with("estimatedCycles", package.estimated_cycles)
            .with("peakBoundCycles", format!("{:.0}", self.peak_bound_cycles))
            .with(
                "deviceMicroseconds",
                format!("{:.3}", self.device_microseconds),
            )
            .with("hostMicroseconds", format!("{:.3}", self.host_microseconds))
            .with(
                if self.attention {
                    "effectiveTflops"
                } else {
                    "effectiveGemmTflops"
                },
                format!("{:.3}", self.effective_tflops),
            )
            .with("peakTflops", format!("{:.3}", package.target.peak_tflops()))
            .with(
                "efficiencyPercent",
                format!("{:.2}", self.efficiency_percent),
            )
            .with(
                "maximumAbsoluteError",
                format!("{:.6}", check.maximum_absolute_error),
            )
            .with("tolerance", format!("{:.6}", check.tolerance))
            .with("numericalTest", verdict(check.pass))
    }
}

/// The check line of one output of several: `outputCheck=NAME checked=… maxError=… rmsError=…
/// tolerance=… numericalTest=…`.
pub fn output_check_line(name: &str, check: &Check) -> Fields {
    Fields::new()
        .with("outputCheck", name)
        .with("checked", check.checked)
        .with("maxError", format!("{:.6}", check.maximum_absolute_error))
        .with("rmsError", format!("{:.6}", check.rms_error))
        .with("tolerance", format!("{:.6}", check.tolerance))
        .with("numericalTest", verdict(check.pass))
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
/// How far the compiler's estimate of the whole run may be from the device's cycles before `run`
/// warns: 5 %.
pub const ESTIMATE_TOLERANCE: f64 = 0.05;

/// A warning when the estimate of the whole run is more than [`ESTIMATE_TOLERANCE`] from the
/// device's cycles: the plans were ranked on a model the device does not bear out.
pub fn estimate_warning(estimated: u64, cycles: u64) -> Option<String> {
    let off = (estimated as f64 - cycles as f64) / (cycles.max(1) as f64);
    (off.abs() > ESTIMATE_TOLERANCE).then(|| {
        format!(
            "the compiler estimated {estimated} cycles and the device took {cycles} ({:+.1} %): plans are ranked on the estimate; `ipu-codegen report` shows the steps furthest off",
            100.0 * off
        )
    })
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

#[cfg(test)]
mod estimate_tests {
    use super::estimate_warning;

    #[test]
    fn an_estimate_more_than_five_percent_off_is_warned_of() {
        assert_eq!(estimate_warning(104, 100), None);
        assert_eq!(estimate_warning(96, 100), None);
        let high = estimate_warning(106, 100).expect("6 % high");
        assert!(high.contains("+6.0 %"), "{high}");
        let low = estimate_warning(90, 100).expect("10 % low");
        assert!(low.contains("-10.0 %"), "{low}");
        assert!(estimate_warning(1, 0).is_some());
    }
}
