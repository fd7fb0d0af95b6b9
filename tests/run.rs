//! End to end on the simulated device: numerical PASS for several shapes, and a corrupted output FAILs.

mod common;
use common::{SMALL, SMALL_ID, SMALL_SEED, Sandbox, assert_pass, corruption_fails_the_check};

#[test]
fn small_preset_passes_and_writes_package_and_profile() {
    let sb = Sandbox::new();
    let out = assert_pass(&sb, &["run", SMALL]);
    // The summary names the workload with the seed its data came from, as builds did before.
    assert!(out.contains(&format!("workload={SMALL_ID}-s7 ")), "{out}");
    assert!(out.contains("peakTflops=282.624"), "{out}");
    // The host's peak memory, on the last line: the process held at least its own code and data.
    let last = out.lines().last().unwrap_or_default();
    let peak: f64 = (last.split(" hostPeakMiB=").nth(1))
        .and_then(|mib| mib.trim().parse().ok())
        .unwrap_or_else(|| panic!("no hostPeakMiB: {last}"));
    assert!(peak > 1.0, "{last}");
    for file in ["model.ipuexe", "execution.ipuprofile"] {
        assert!(
            sb.stages().join(SMALL_ID).join(file).exists(),
            "{file} written"
        );
    }
    // The package runs on its own, too.
    let package = sb.stages().join(SMALL_ID).join("model.ipuexe");
    assert_pass(&sb, &["run", package.to_str().unwrap()]);
}

#[test]
fn odd_shapes_pass() {
    let sb = Sandbox::new();
    for args in [
        &[
            "--tokens",
            "19",
            "--dimension",
            "24",
            "--hidden",
            "40",
            "--blocks",
            "1",
            "--biases",
            "false",
        ][..],
        &[
            "--tokens",
            "5",
            "--dimension",
            "3",
            "--hidden",
            "7",
            "--blocks",
            "3",
            "--partials",
            "f32",
        ],
        &[
            "--batch",
            "3",
            "--tokens",
            "11",
            "--dimension",
            "33",
            "--hidden",
            "17",
            "--biases",
            "true",
        ],
        &[
            "--tokens",
            "1",
            "--dimension",
            "1",
            "--hidden",
            "1",
            "--blocks",
            "1",
        ],
    ] {
        let mut full = vec!["run", SMALL];
        full.extend_from_slice(args);
        assert_pass(&sb, &full);
    }
}

#[test]
fn every_operand_form_and_weight_home_passes_on_odd_shapes() {
    let sb = Sandbox::new();
    // Biases run down the rows in the transposed form; f32 partials and three depth blocks of odd
    // sizes exercise the transposed shares of the reduction.
    let shapes: [&[&str]; 2] = [
        &[
            "--tokens",
            "37",
            "--dimension",
            "40",
            "--hidden",
            "72",
            "--biases",
            "true",
        ],
        &[
            "--batch",
            "2",
            "--tokens",
            "11",
            "--dimension",
            "50",
            "--hidden",
            "33",
            "--partials",
            "f32",
        ],
    ];
    for shape in shapes {
        for (form, weights) in [
            ("transposed", "resident"),
            ("transposed", "gathered"),
            ("normal", "resident"),
        ] {
            let mut full = vec!["run", SMALL, "--form", form, "--weight-panels", weights];
            full.extend_from_slice(shape);
            let out = assert_pass(&sb, &full);
            assert!(out.contains("hardwareTest=PASS"), "{out}");
        }
    }
    // The plan is what was asked for.
    let r = sb.run(&[
        "show",
        "lower_mid",
        SMALL,
        "--form",
        "transposed",
        "--weight-panels",
        "resident",
    ]);
    r.assert_ok();
    let plans: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains(" blocks of "))
        .collect();
    assert!(
        !plans.is_empty()
            && plans
                .iter()
                .all(|l| l.contains("transposed, weights resident")),
        "{}",
        r.stdout
    );
}

/// Two matmuls reading one weight, `y1 = x · w` and `y2 = x2 · w`, of different row counts.
const TIED: &str = r#"kind = "graph"
name = "tied"
partials = "f16"
weights = "tied.safetensors"

[[values]]
name = "x"
dtype = "f16"
role = "input"
rows = 40
cols = 48
shape = [40, 48]

[[values]]
name = "w"
dtype = "f16"
role = "weight"
rows = 48
cols = 48
shape = [48, 48]

[[values]]
name = "x2"
dtype = "f16"
role = "input"
rows = 7
cols = 48
shape = [7, 48]

[[values]]
name = "y1"
dtype = "f16"
role = "output"
rows = 40
cols = 48
shape = [40, 48]

[[values]]
name = "y2"
dtype = "f16"
role = "output"
rows = 7
cols = 48
shape = [7, 48]

[[ops]]
name = "first"
kind = "matmul"
inputs = ["x", "w"]
output = "y1"

[[ops]]
name = "second"
kind = "matmul"
inputs = ["x2", "w"]
output = "y2"
"#;

#[test]
fn two_matmuls_sharing_resident_weights_under_every_mapping_pass() {
    use ipu_codegen::onnx::WeightData;
    use ipu_codegen::workload::{GraphSpec, graph_spec};
    let sb = Sandbox::new();
    let spec = GraphSpec::parse(TIED, "tied.toml").unwrap();
    let w: Vec<f32> = (0..48 * 48)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 256.0)
        .collect();
    let weights = [("w".to_string(), WeightData::F32(w))]
        .into_iter()
        .collect();
    std::fs::write(sb.path("tied.toml"), TIED).unwrap();
    std::fs::write(
        sb.path("tied.safetensors"),
        graph_spec::safetensors_bytes(&spec.graph, &weights).unwrap(),
    )
    .unwrap();
    // The second matmul's panels lie on other tiles than the first's under some mappings: it
    // gathers them from one replica of each.
    for mapping in ["row-major", "column-major", "shared-panels"] {
        for form in ["normal", "transposed"] {
            let args = [
                "run",
                "tied.toml",
                "--weight-panels",
                "resident",
                "--form",
                form,
                "--mapping",
                mapping,
            ];
            assert_pass(&sb, &args);
        }
    }
}

#[test]
fn corrupted_output_fails_the_check() {
    corruption_fails_the_check(SMALL, SMALL_ID, SMALL_SEED);
}

#[test]
fn damaged_package_file_is_refused() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let path = sb.stages().join(SMALL_ID).join("model.ipuexe");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 1;
    let damaged = sb.path("damaged.ipuexe");
    std::fs::write(&damaged, &bytes).unwrap();
    let r = sb.run(&["run", damaged.to_str().unwrap()]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("damaged"), "{}", r.stderr);
}

#[test]
fn a_busy_device_makes_a_second_run_wait_then_give_up() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    std::fs::create_dir_all(sb.stages()).unwrap();
    let lock = std::fs::File::create(sb.stages().join("device.lock")).unwrap();
    lock.lock().unwrap();
    let r = sb.run(&["run", SMALL, "--lock-timeout", "1"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("waiting for hardware ownership"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("device is busy"), "{}", r.stderr);
    drop(lock);
    assert_pass(&sb, &["run", SMALL]);
}
