//! Calibration: the device against Graphcore's measured AMP curve, the compiler's estimate against the
//! device, and the comparisons failing when either is wrong.

mod common;
use common::Sandbox;
use ipu_codegen::calibrate::{Calibration, calibrate, check, published_amp_curve};
use ipu_codegen::target::Target;

fn bow() -> Target {
    Target::preset("bow").expect("bow")
}

#[test]
fn every_case_is_within_its_tolerance_and_every_published_point_is_run() {
    let rows = calibrate(&bow()).expect("calibration packages run");
    let problems = check(&rows);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let published: Vec<&Calibration> = rows
        .iter()
        .filter(|r| r.hardware_cycles.is_some())
        .collect();
    assert_eq!(published.len(), 128);
    assert_eq!(published.len(), published_amp_curve().len());
    // The curve's ends, as published: N = 16 at 15.9 % of peak, N = 2048 at 96.1 %.
    let fraction = |n: u32| {
        published
            .iter()
            .find(|r| r.rows == Some(n))
            .and_then(|r| r.hardware_fraction())
            .expect("published")
    };
    assert!((fraction(16) - 0.159).abs() < 0.001);
    assert!((fraction(2048) - 0.961).abs() < 0.001);
}

#[test]
fn an_estimate_twenty_percent_high_fails_the_comparison() {
    let mut rows = calibrate(&bow()).expect("calibration packages run");
    for r in rows.iter_mut().filter(|r| r.kind == "amp") {
        r.estimate_cycles = r.estimate_cycles * 6 / 5;
    }
    let problems = check(&rows);
    let amp_cases = rows.iter().filter(|r| r.kind == "amp").count();
    assert_eq!(problems.len(), amp_cases, "{}", problems.join("\n"));
    assert!(problems[0].contains("estimate"), "{}", problems[0]);
}

/// A reduction's epilogue over sixteen parts is charged the cheaper of poplibs' two ways to sum
/// them, whichever memory region holds the parts: here poplin's `ReduceAdd` (72 loops of 8 halves,
/// 12 a worker, each 3 cycles a part and 8, after 32 to enter) rather than the fused chain of
/// fifteen in-place adds (one launch, the first add's loop whole, the fourteen others without the
/// intermediate's reload and store), which would take 4,823.
#[test]
fn an_epilogue_over_many_parts_is_charged_the_cheaper_way_to_sum_them() {
    let rows = calibrate(&bow()).expect("calibration packages run");
    let case = |name: &str| {
        rows.iter()
            .find(|r| r.case == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    };
    let wide = case("vector 18x32 16 parts interleaved");
    let narrow = case("vector 18x32 16 parts standard");
    assert_eq!(wide.device_cycles, narrow.device_cycles);
    assert_eq!(wide.device_cycles, 6 * (32 + 12 * (3 * 16 + 8)));
    let added = 6 * 58 + 11 + 6 * 24 * 3 + 14 * 6 * 24 * 2;
    assert_eq!(added, 4823);
    assert!(wide.device_cycles < added);
}

#[test]
fn a_device_without_its_fitted_vertex_cost_misses_the_hardware() {
    let mut target = bow();
    target.amp_vertex_supervisor_cycles = 0;
    let rows = calibrate(&target).expect("calibration packages run");
    let problems = check(&rows);
    // Every published point is then more than 8 cycles fast.
    let hardware = problems.iter().filter(|p| p.contains("hardware")).count();
    assert!(hardware >= 128, "{}", problems.join("\n"));
}

/// Each AMP constant the published curve pins (the per-vertex set-up fitted to it, poplibs'
/// per-block set-up, and the workers' fill) moved by 5 cycles either way, or the fill by one worker
/// cycle (6 tile cycles), puts some published point outside its tolerance.
#[test]
fn moving_any_amp_constant_the_curve_pins_by_five_cycles_fails_calibrate() {
    type Field = fn(&mut Target) -> &mut u64;
    let fields: [(&str, Field, u64); 3] = [
        (
            "per-vertex set-up",
            |t| &mut t.amp_vertex_supervisor_cycles,
            5,
        ),
        (
            "per-block set-up",
            |t| &mut t.amp_block_supervisor_cycles,
            5,
        ),
        ("worker fill", |t| &mut t.amp_worker_fill_cycles, 1),
    ];
    for (name, field, step) in fields {
        for up in [true, false] {
            let mut target = bow();
            let value = field(&mut target);
            *value = if up { *value + step } else { *value - step };
            let rows = calibrate(&target).expect("calibration packages run");
            let problems = check(&rows);
            assert!(
                problems.iter().any(|p| p.contains("hardware")),
                "{name} {}{step}: calibrate passes",
                if up { "+" } else { "-" }
            );
        }
    }
}

/// A device charging one cycle more per element for a poplibs-derived vector formula, its estimate
/// unchanged, fails the estimate's comparison on every case of that formula: the unary, binary and
/// select functions, the reductions, the softmax, the fused vertices and the data movement. Left
/// out are the two cases whose elements are too dear for one cycle to show: `pow` at poplibs' 325
/// cycles an element (`POWER`), and a slice of every other column, copied an element at a time at
/// 45 cycles each (one more is 2.2 %).
#[test]
fn a_device_one_cycle_an_element_slower_fails_the_estimate_check() {
    let rows = calibrate(&bow()).expect("calibration packages run");
    let timed = rows.iter().filter(|r| r.elements.is_some()).count();
    assert!(timed > 60, "{timed} cases with elements");
    for formula in [
        "vector unary",
        "vector binary",
        "vector select",
        "vector reduce",
        "vector softmax",
        "layer norm",
        "accumulate",
        "combine",
        "vector 23x96",
        "assemble",
    ] {
        let mut mutant = rows.clone();
        let mut cases = 0;
        let dear = |case: &str| case.contains("pow") || case.contains("slice columns");
        let of_formula = |r: &&mut Calibration| r.case.contains(formula) && !dear(&r.case);
        for r in mutant.iter_mut().filter(of_formula) {
            r.device_cycles += r.elements.expect("a vector case has elements");
            cases += 1;
        }
        assert!(cases > 0, "no case of {formula}");
        let problems = check(&mutant);
        let estimates = problems
            .iter()
            .filter(|p| p.contains(formula) && !dear(p))
            .count();
        assert_eq!(estimates, cases, "{formula}: {}", problems.join("\n"));
    }
}

#[test]
fn calibrate_prints_the_table_and_json_and_passes() {
    let sb = Sandbox::new();
    let table = sb.run(&["calibrate"]);
    table.assert_ok();
    assert!(
        table.stdout.contains("amp 23x4304x16 f16 partials"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("exchange all-to-all 16 tiles"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("published=128"), "{}", table.stdout);
    let json = sb.run(&["calibrate", "--json", "--target", "bow"]);
    json.assert_ok();
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    let cases = v["cases"].as_array().expect("cases");
    let first = &cases[0];
    assert_eq!(first["name"], "amp 16x16x16 f16 partials");
    assert_eq!(first["kind"], "amp");
    assert_eq!(first["rows"], 16);
    let hw = first["hardwareFraction"].as_f64().expect("published");
    let dev = first["deviceFraction"].as_f64().expect("amp");
    assert!((0.0..=1.0).contains(&hw) && (0.0..=1.0).contains(&dev));
    assert!(first["deviceCycles"].as_u64().is_some() && first["estimateCycles"].as_u64().is_some());
    let vector = cases
        .iter()
        .find(|c| c["kind"] == "vector")
        .expect("a vector case");
    assert!(vector["hardwareFraction"].is_null() && vector["rows"].is_null());
}

/// Every general vector function has a case timed from poplibs' estimators, within tolerance of
/// its estimate; an estimate ten percent low fails each of them.
#[test]
fn every_vector_function_is_calibrated_and_a_low_estimate_fails() {
    let mut rows = calibrate(&bow()).expect("calibration packages run");
    let vector = |r: &Calibration| r.note.contains("poplibs");
    for name in [
        "unary neg",
        "unary abs",
        "unary sqrt",
        "unary reciprocal",
        "unary exp",
        "unary erf",
        "unary tanh",
        "unary sigmoid",
        "unary relu",
        "unary gelu_erf",
        "unary gelu_tanh",
        "unary pow",
        "binary add",
        "binary sub",
        "binary mul",
        "binary div",
        "binary pow",
        "binary max",
        "binary min",
        "b column",
        "b value",
        "b row",
        "reduce sum",
        "reduce mean",
        "reduce max",
        "softmax 23x384",
    ] {
        assert!(
            rows.iter().any(|r| vector(r) && r.case.contains(name)),
            "no case {name}"
        );
    }
    assert!(check(&rows).is_empty(), "{}", check(&rows).join("\n"));
    let cases = rows.iter().filter(|r| vector(r)).count();
    for r in rows.iter_mut().filter(|r| vector(r)) {
        r.estimate_cycles = r.estimate_cycles * 9 / 10;
    }
    let problems = check(&rows);
    assert_eq!(problems.len(), cases, "{}", problems.join("\n"));
}

/// The data-movement vertex has cases (a transpose, slices, a concat of two inputs, patches) timed
/// from poplibs' estimators, within tolerance of its estimate; an estimate ten percent low fails
/// each of them.
#[test]
fn the_assemble_vertex_is_calibrated_and_a_low_estimate_fails() {
    let mut rows = calibrate(&bow()).expect("calibration packages run");
    let assemble = |r: &Calibration| r.kind == "assemble";
    for name in [
        "transpose",
        "slice rows",
        "slice columns",
        "concat",
        "patches",
    ] {
        assert!(
            rows.iter().any(|r| assemble(r) && r.case.contains(name)),
            "no case {name}"
        );
    }
    assert!(check(&rows).is_empty(), "{}", check(&rows).join("\n"));
    let cases = rows.iter().filter(|r| assemble(r)).count();
    for r in rows.iter_mut().filter(|r| assemble(r)) {
        r.estimate_cycles = r.estimate_cycles * 9 / 10;
    }
    let problems = check(&rows);
    assert_eq!(problems.len(), cases, "{}", problems.join("\n"));
}

/// A package of empty supersteps: the device charges one sync of poplibs' 90 cycles per superstep,
/// as the estimate does; an estimate at elk's 118 a sync fails the comparison.
#[test]
fn the_syncs_of_empty_supersteps_are_calibrated_and_a_wrong_sync_fails() {
    let target = bow();
    assert_eq!(target.sync_cycles, 90);
    let rows = calibrate(&target).expect("calibration packages run");
    let sync = rows.iter().find(|r| r.kind == "sync").expect("a sync case");
    assert_eq!(sync.case, "sync 64 empty supersteps");
    assert_eq!(sync.device_cycles, 64 * 90);
    assert_eq!(sync.estimate_cycles, sync.device_cycles);
    let mut elk = sync.clone();
    elk.estimate_cycles = 64 * 118;
    let problems = check(&[elk]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("sync 64 empty supersteps: estimate 7552 cycles, device 5760"));
}

/// Every exchange pattern, lowered to exchange code and timed by the device from it, ends where its
/// schedule's horizon (the compiler's estimate) says; an estimate ten percent low fails each.
#[test]
fn exchange_code_ends_at_the_schedules_horizon_and_a_low_estimate_fails() {
    let mut rows = calibrate(&bow()).expect("calibration packages run");
    let exchange = |r: &Calibration| r.kind == "exchange";
    let cases = rows.iter().filter(|r| exchange(r)).count();
    assert_eq!(cases, 7);
    for r in rows.iter().filter(|r| exchange(r)) {
        assert_eq!(r.estimate_cycles, r.device_cycles, "{}", r.case);
        assert!(r.note.contains("the schedule's horizon"), "{}", r.note);
    }
    for r in rows.iter_mut().filter(|r| exchange(r)) {
        r.estimate_cycles = r.estimate_cycles * 9 / 10;
    }
    let problems = check(&rows);
    assert_eq!(problems.len(), cases, "{}", problems.join("\n"));
    assert!(problems.iter().all(|p| p.starts_with("exchange ")));
}

/// `calibrate --sensitivity` builds a workload for targets whose sync, transit and launch are each
/// at 80 % and 120 % of their figures and runs it: a sync 18 cycles longer costs 18 cycles a
/// superstep, both ways alike; the others move the cycles too. `--workload` needs `--sensitivity`.
#[test]
fn sensitivity_moves_each_constant_by_a_fifth_each_way() {
    let sb = Sandbox::new();
    let out = sb.run(&[
        "calibrate",
        "--sensitivity",
        "--workload",
        "attention-flash-small",
        "--json",
    ]);
    out.assert_ok();
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let constants = v["constants"].as_array().expect("constants");
    let figures: Vec<(&str, u64, u64, u64)> = constants
        .iter()
        .map(|c| {
            let n = |k: &str| c[k].as_u64().expect("a figure");
            (
                c["name"].as_str().expect("a name"),
                n("nominal"),
                n("low"),
                n("high"),
            )
        })
        .collect();
    assert_eq!(
        figures,
        [
            ("sync", 90, 72, 108),
            ("transit", 29, 23, 35),
            ("launch", 50, 40, 60)
        ]
    );
    let w = &v["workloads"][0];
    assert_eq!(w["workload"], "attention-flash-small");
    let cycles = w["cycles"].as_u64().expect("cycles");
    let point = |name: &str, which: &str| w["moved"][name][which].as_u64().expect("a point");
    let (low, high) = (point("sync", "low"), point("sync", "high"));
    assert_eq!(cycles - low, high - cycles);
    assert!(
        high > cycles && (high - cycles).is_multiple_of(18),
        "{cycles} {high}"
    );
    for name in ["transit", "launch"] {
        assert!(
            point(name, "low") < cycles && point(name, "high") > cycles,
            "{name}"
        );
    }
    let refused = sb.run(&["calibrate", "--workload", "attention-flash-small"]);
    assert!(!refused.status.success());
    assert!(
        refused.stderr.contains("--sensitivity"),
        "{}",
        refused.stderr
    );
}

/// The compiler's closed form of a reduction's epilogue against the device's timing of the vertex:
/// equal along the rows, whether the parts are reduced (twelve small f32 parts) or added in place
/// (two large f16 parts); within 2 % down the rows and transposed.
#[test]
fn the_epilogue_estimate_agrees_with_the_device_on_reductions() {
    use ipu_codegen::device::timing::epilogue;
    use ipu_codegen::ir::DType;
    use ipu_codegen::isa::{Epilogue, Placed};
    use ipu_codegen::target::EpilogueCost;
    let t = Target::preset("mk2-1500").unwrap();
    let pair = |rows: u32, cols: u32, parts: u32, partials: DType, transposed: bool| {
        let placed = |address| Placed {
            address,
            stride: 64,
            dtype: partials,
        };
        let v = Epilogue {
            partials: (0..parts).map(|p| placed(p * 4096)).collect(),
            bias: Some(placed(0)),
            bias_by_row: transposed,
            residual: None,
            out: placed(0),
            rows,
            cols,
            activation: None,
            transpose: transposed,
        };
        let cost = EpilogueCost {
            partials,
            parts,
            bias: true,
            bias_by_row: transposed,
            activation: None,
            residual: false,
            transposed,
        };
        (epilogue(&t, &v), t.epilogue_cycles(rows, cols, &cost))
    };
    let (device, estimate) = pair(3, 16, 12, DType::F32, false);
    assert_eq!(device, estimate);
    let (device, estimate) = pair(64, 128, 2, DType::F16, false);
    assert_eq!(device, estimate);
    let (device, estimate) = pair(3, 16, 12, DType::F32, true);
    assert!(
        device.abs_diff(estimate) * 50 <= device,
        "{device} vs {estimate}"
    );
}
