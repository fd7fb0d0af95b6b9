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
