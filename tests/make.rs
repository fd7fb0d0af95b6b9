//! The README's Make flow: a phase target runs the phase commands whose flags or inputs changed and
//! nothing else, and a second identical `make` invokes nothing.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};

/// `make TARGET WORKLOAD=siglip-mlp-small ARGS…` in the source tree, with this test's binary and
/// the sandbox's store and stages; the phase commands it invoked.
fn make(sb: &Sandbox, args: &[&str]) -> Vec<String> {
    let bin = env!("CARGO_BIN_EXE_ipu-codegen");
    let out = std::process::Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .arg(format!("BIN={bin}"))
        // The binary is the one cargo built for this test: nothing to build.
        .arg("CARGO=true")
        .arg(format!("STAGES={}", sb.stages().display()))
        .arg(format!("WORKLOAD={SMALL}"))
        .args(args)
        .env("IPU_CODEGEN_CACHE", sb.cache())
        .output()
        .expect("GNU Make");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "make {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(bin))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|command| *command != "make-rules")
        .map(str::to_string)
        .collect()
}

#[test]
fn a_phase_target_runs_what_changed_and_a_repeat_invokes_nothing() {
    let sb = Sandbox::new();
    let all: Vec<String> = ipu_codegen::driver::PIPELINE
        .iter()
        .map(|p| p.command())
        .collect();
    assert_eq!(make(&sb, &["build_images"]), all);
    assert_eq!(make(&sb, &["build_images"]), Vec::<String>::new());
    // One phase's flags: that phase and the ones after it, and the record says so.
    let size = ["build_images", "PLACE_STORAGE_FLAGS=--placement-order size"];
    assert_eq!(make(&sb, &size), all[4..].to_vec());
    assert_eq!(
        sb.record(SMALL_ID, "place_storage")["config"]["order"],
        "size"
    );
    assert_eq!(make(&sb, &size), Vec::<String>::new());
    // A phase target stops at its phase.
    assert_eq!(make(&sb, &["place_storage"]), vec![all[4].clone()]);
    assert_eq!(
        sb.record(SMALL_ID, "place_storage")["config"]["order"],
        "lifetime"
    );
    assert_eq!(make(&sb, &["place_storage"]), Vec::<String>::new());
}
