//! A committed handful of ONNX's backend node tests (`tests/conformance/<case>/`, written by
//! `tools/onnx_conformance.py write tests/conformance --cases …`), imported and run through the CLI
//! as `make onnx-conformance` runs all of them, without Python: each case's `model.onnx` is imported
//! with a `--shape` for every graph input, run with an `--input` for each, and every output the run
//! writes is compared with ONNX's expected one within the tolerance the case's `case.json` gives (the
//! script's per-operator table): |device − expected| ≤ atol + rtol·|expected|, NaN only against NaN,
//! an infinity only against the same infinity, shapes equal.
//!
//! `PASSING` lists the cases that pass with today's importer: one that does not pass fails the test.
//! `PENDING` lists the rest (the importer refuses most single operators today); they run and their
//! status is printed, and they fail the test only if the CLI panics. When the importer learns an
//! operator, move its cases from `PENDING` to `PASSING`. Every committed case is in exactly one list.

mod common;
use common::Sandbox;
use ipu_codegen::tensors::{Elements, Tensor, npy};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Cases that must pass.
const PASSING: &[&str] = &[
    "test_add",
    "test_add_bcast",
    "test_gelu_default_1",
    "test_gemm_default_vector_bias",
    "test_layer_normalization_2d_axis1",
    "test_layer_normalization_3d_axis_negative_1_epsilon",
    "test_less_bcast",
    "test_matmul_2d",
    "test_matmul_3d",
    "test_mul_example",
    "test_reduce_max_keepdims_example",
    "test_reduce_mean_keepdims_example",
    "test_reduce_sum_do_not_keepdims_example",
    "test_relu",
    "test_softmax_example",
    "test_softmax_large_number",
    "test_sqrt_example",
    "test_tanh_example",
    "test_transpose_default",
    "test_where_example",
    "test_xor_bcast4v4d",
];

/// Cases the importer or the build refuses today: run and reported, not required to pass.
const PENDING: &[&str] = &[];

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn case_json(case: &str) -> Value {
    let path = cases_dir().join(case).join("case.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_npy(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    npy::read(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn values(t: &Tensor) -> Vec<f64> {
    match &t.elements {
        Elements::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        Elements::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Elements::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Elements::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Elements::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// The comparison `tools/onnx_conformance.py` makes: `Err` names the first element off, the count
/// of elements off and the largest absolute error.
fn compare(device: &Tensor, expected: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if device.shape != expected.shape {
        return Err(format!(
            "shape {:?}, expected {:?}",
            device.shape, expected.shape
        ));
    }
    let (d, e) = (values(device), values(expected));
    let mut off = Vec::new();
    let mut max_abs = 0.0f64;
    for (i, (&d, &e)) in d.iter().zip(&e).enumerate() {
        let ok = if e.is_nan() || d.is_nan() {
            e.is_nan() && d.is_nan()
        } else if e.is_infinite() || d.is_infinite() {
            d == e
        } else {
            max_abs = max_abs.max((d - e).abs());
            (d - e).abs() <= atol + rtol * e.abs()
        };
        if !ok {
            off.push((i, d, e));
        }
    }
    let count = expected.elements.len();
    match off.first() {
        None => Ok(()),
        Some(&(i, d, e)) => Err(format!(
            "{} of {count} elements beyond rtol {rtol} atol {atol} (first: element {i} is {d}, expected {e}); max abs {max_abs:.3e}",
            off.len(),
        )),
    }
}

#[derive(Debug)]
enum Outcome {
    Passed,
    /// The device ran and an output is off, missing or mis-shaped, or the device reported a fault.
    Failed(String),
    /// Import or build refused the case: the first `error:` line.
    Unsupported(String),
    /// A panic or a signal.
    Crashed(String),
}

/// The first `error:` line of `stderr` (else its last line), without the cases' folder.
fn first_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .find(|l| l.starts_with("error:"))
        .or(lines.last())
        .map_or("(no message)".to_string(), |l| l.to_string());
    line.replace(&format!("{}/", cases_dir().display()), "")
}

fn crash(ran: &common::Ran) -> Option<String> {
    if ran.status.code().is_none() {
        return Some(format!("killed: {}", ran.status));
    }
    ran.stderr
        .lines()
        .find(|l| l.contains("panicked"))
        .map(|l| l.trim().to_string())
}

/// Imports and runs `case` in `sb`; the outputs' directory and the outcome of the steps (`None`
/// when both succeeded).
fn import_and_run(sb: &Sandbox, case: &str) -> (PathBuf, Option<Outcome>) {
    let dir = cases_dir().join(case);
    let meta = case_json(case);
    let inputs: Vec<&Value> = meta["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "input")
        .collect();
    let spec = sb.path(&format!("spec/{case}.toml"));
    let mut args: Vec<String> = vec![
        "import".into(),
        dir.join("model.onnx").display().to_string(),
    ];
    for i in &inputs {
        let dims: Vec<String> = i["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap().to_string())
            .collect();
        args.push("--shape".into());
        args.push(format!(
            "{}={}",
            i["name"].as_str().unwrap(),
            dims.join("x")
        ));
    }
    args.extend(["-o".into(), spec.display().to_string()]);
    let ran = sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    if let Some(why) = crash(&ran) {
        return (
            PathBuf::new(),
            Some(Outcome::Crashed(format!("import: {why}"))),
        );
    }
    if !ran.status.success() {
        return (
            PathBuf::new(),
            Some(Outcome::Unsupported(first_error(&ran.stderr))),
        );
    }

    let out = sb.path("out");
    let mut args: Vec<String> = vec![
        "run".into(),
        spec.display().to_string(),
        "--output-dir".into(),
        out.display().to_string(),
    ];
    for i in &inputs {
        let file = dir.join(i["file"].as_str().unwrap());
        args.push("--input".into());
        args.push(format!(
            "{}={}",
            i["name"].as_str().unwrap(),
            file.display()
        ));
    }
    let ran = sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    if let Some(why) = crash(&ran) {
        return (out, Some(Outcome::Crashed(format!("run: {why}"))));
    }
    if !ran.status.success() {
        let outcome = if ran.stdout.contains("hardwareTest=FAIL") {
            Outcome::Failed(format!("device fault:\n{}", ran.stdout))
        } else if !ran.stdout.contains("hardwareTest=") && !out.exists() {
            Outcome::Unsupported(first_error(&ran.stderr))
        } else {
            Outcome::Failed(format!("run failed: {}", first_error(&ran.stderr)))
        };
        return (out, Some(outcome));
    }
    (out, None)
}

/// Compares every output of `case` in `out` with its expected file.
fn check_outputs(case: &str, out: &Path) -> Outcome {
    let dir = cases_dir().join(case);
    let meta = case_json(case);
    let mut problems = Vec::new();
    for o in meta["outputs"].as_array().unwrap() {
        let name = o["name"].as_str().unwrap();
        let device = out.join(o["device_file"].as_str().unwrap());
        if !device.exists() {
            problems.push(format!("output {name} not written"));
            continue;
        }
        let expected = read_npy(&dir.join(o["file"].as_str().unwrap()));
        let (rtol, atol) = (o["rtol"].as_f64().unwrap(), o["atol"].as_f64().unwrap());
        if let Err(e) = compare(&read_npy(&device), &expected, rtol, atol) {
            problems.push(format!("output {name}: {e}"));
        }
    }
    if problems.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(problems.join("; "))
    }
}

fn run_case(case: &str) -> Outcome {
    let sb = Sandbox::new();
    match import_and_run(&sb, case) {
        (_, Some(outcome)) => outcome,
        (out, None) => check_outputs(case, &out),
    }
}

#[test]
fn every_committed_case_is_listed_once() {
    let mut committed: Vec<String> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("case.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    let mut listed: Vec<String> = PASSING
        .iter()
        .chain(PENDING)
        .map(|s| s.to_string())
        .collect();
    listed.sort();
    assert_eq!(
        committed, listed,
        "tests/conformance/ and PASSING + PENDING differ"
    );
    // The subset covers what the brief names: elementwise, reduction, softmax, matmul, layer norm.
    let operators: Vec<String> = listed
        .iter()
        .map(|c| case_json(c)["operator"].as_str().unwrap().to_string())
        .collect();
    for op in [
        "Add",
        "ReduceMean",
        "Softmax",
        "MatMul",
        "LayerNormalization",
    ] {
        assert!(
            operators.iter().any(|o| o == op),
            "no committed case of {op}"
        );
    }
}

#[test]
fn passing_cases_pass() {
    let failures: Vec<String> = PASSING
        .iter()
        .filter_map(|case| match run_case(case) {
            Outcome::Passed => {
                println!("passed      {case}");
                None
            }
            other => Some(format!("{case}: {other:?}")),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "cases listed in PASSING do not pass:\n{}",
        failures.join("\n")
    );
}

#[test]
fn pending_cases_are_reported() {
    let mut crashes = Vec::new();
    for case in PENDING {
        match run_case(case) {
            Outcome::Passed => println!("passed      {case} (now passes: move it to PASSING)"),
            Outcome::Failed(why) => println!("failed      {case}: {why}"),
            Outcome::Unsupported(why) => println!("unsupported {case}: {why}"),
            Outcome::Crashed(why) => {
                println!("CRASHED     {case}: {why}");
                crashes.push(format!("{case}: {why}"));
            }
        }
    }
    // Refusing a case is allowed while the importer grows; panicking on one never is.
    assert!(
        crashes.is_empty(),
        "the CLI crashed:\n{}",
        crashes.join("\n")
    );
}

/// The comparison fails on an expected file altered by one element beyond the tolerance, and passes
/// on one altered within it: run on the device's real output of the first passing case, through
/// `.npy` files written and read back.
#[test]
fn an_expected_output_altered_beyond_tolerance_fails() {
    let case = PASSING[0];
    let sb = Sandbox::new();
    let (out, refused) = import_and_run(&sb, case);
    assert!(refused.is_none(), "{case}: {refused:?}");
    let meta = case_json(case);
    let o = &meta["outputs"][0];
    let (rtol, atol) = (o["rtol"].as_f64().unwrap(), o["atol"].as_f64().unwrap());
    let device = read_npy(&out.join(o["device_file"].as_str().unwrap()));
    let expected = read_npy(&cases_dir().join(case).join(o["file"].as_str().unwrap()));
    compare(&device, &expected, rtol, atol).expect("the unaltered expected output passes");

    let Elements::F32(original) = &expected.elements else {
        panic!("{case}: expected a float32 output")
    };
    let d = values(&device);
    let altered = |i: usize, factor: f64| {
        // The expected element moved to `factor` allowances from the device's value.
        let mut v = original.clone();
        let allowance = atol + rtol * d[i].abs();
        v[i] = (d[i] + factor * allowance) as f32;
        let file = sb.path(&format!("altered-{factor}.npy"));
        let tensor = Tensor {
            shape: expected.shape.clone(),
            elements: Elements::F32(v),
        };
        std::fs::write(&file, npy::write(&tensor)).unwrap();
        read_npy(&file)
    };
    for i in [0, original.len() / 2, original.len() - 1] {
        // Within: half an allowance off still passes (the comparison is not "any change fails").
        compare(&device, &altered(i, 0.5), rtol, atol)
            .unwrap_or_else(|e| panic!("element {i} half an allowance off must pass: {e}"));
        // Beyond: 1.5 allowances off (atol + rtol·|e| grows by at most rtol·1.5 allowances) fails.
        let err = compare(&device, &altered(i, 1.5), rtol, atol)
            .expect_err("one element beyond tolerance must fail");
        assert!(err.starts_with("1 of "), "{err}");
        assert!(compare(&device, &altered(i, -1.5), rtol, atol).is_err());
    }
    // A NaN, an infinity or another shape fails too.
    let mut v = original.clone();
    v[0] = f32::NAN;
    let nan = Tensor {
        shape: expected.shape.clone(),
        elements: Elements::F32(v),
    };
    assert!(compare(&device, &nan, rtol, atol).is_err());
    let mut v = original.clone();
    v[0] = f32::INFINITY;
    let inf = Tensor {
        shape: expected.shape.clone(),
        elements: Elements::F32(v),
    };
    assert!(compare(&device, &inf, rtol, atol).is_err());
    let reshaped = Tensor {
        shape: vec![expected.elements.len() as u64],
        elements: expected.elements.clone(),
    };
    assert!(compare(&device, &reshaped, rtol, atol).is_err());
}

/// A boolean output is compared exactly: the device's output of the committed Xor case is written
/// as bool, passes against ONNX's expected file, and fails with any one element flipped.
#[test]
fn a_boolean_expected_output_with_one_element_flipped_fails() {
    let case = "test_xor_bcast4v4d";
    let sb = Sandbox::new();
    let (out, refused) = import_and_run(&sb, case);
    assert!(refused.is_none(), "{case}: {refused:?}");
    let meta = case_json(case);
    let o = &meta["outputs"][0];
    assert_eq!(
        (o["rtol"].as_f64(), o["atol"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    let device = read_npy(&out.join(o["device_file"].as_str().unwrap()));
    assert_eq!(device.elements.type_name(), "bool", "written as |b1");
    let expected = read_npy(&cases_dir().join(case).join(o["file"].as_str().unwrap()));
    compare(&device, &expected, 0.0, 0.0).expect("the unaltered expected output passes");
    let Elements::Bool(original) = &expected.elements else {
        panic!("{case}: expected a bool output")
    };
    for i in [0, original.len() / 2, original.len() - 1] {
        let mut v = original.clone();
        v[i] = !v[i];
        let flipped = Tensor {
            shape: expected.shape.clone(),
            elements: Elements::Bool(v),
        };
        let err = compare(&device, &flipped, 0.0, 0.0).expect_err("a flipped element must fail");
        assert!(err.starts_with("1 of "), "{err}");
    }
}
