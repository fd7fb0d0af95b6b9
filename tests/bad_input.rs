//! Bad input gets a clear error naming what and where, a non-zero exit, no panic, and the store intact.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};

#[test]
fn unknown_key_names_the_key_and_the_file() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.path("bad.toml"),
        "kind = \"mlp\"\nname = \"m\"\nbatch = 1\ntokens = 4\ntokenz = 5\ndimension = 8\nhidden = 8\nblocks = 1\n\
         biases = false\ndtype = \"f16\"\npartials = \"f16\"\nseed = 1\n",
    )
    .unwrap();
    let r = sb.run(&["build", "bad.toml"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("tokenz") && r.stderr.contains("bad.toml"),
        "{}",
        r.stderr
    );
}

#[test]
fn zero_and_negative_sizes_are_refused() {
    let sb = Sandbox::new();
    let r = sb.run(&["build", SMALL, "--hidden", "0"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("hidden must be positive"), "{}", r.stderr);
    let r = sb.run(&["build", SMALL, "--tokens=-3"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("--tokens"), "{}", r.stderr);
    std::fs::write(sb.path("neg.toml"), WorkloadText::with("tokens = -2")).unwrap();
    let r = sb.run(&["build", "neg.toml"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("neg.toml") && r.stderr.contains("tokens"),
        "{}",
        r.stderr
    );
}

struct WorkloadText;
impl WorkloadText {
    fn with(line: &str) -> String {
        format!(
            "kind = \"mlp\"\nname = \"m\"\nbatch = 1\n{line}\ndimension = 8\nhidden = 8\nblocks = 1\nbiases = false\n\
             dtype = \"f16\"\npartials = \"f16\"\nseed = 1\n"
        )
    }
}

#[test]
fn unknown_workload_and_phase_are_named() {
    let sb = Sandbox::new();
    let r = sb.run(&["build", "no-such-workload"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("no-such-workload") && r.stderr.contains("siglip-mlp"),
        "{}",
        r.stderr
    );
    let r = sb.run(&["build", SMALL, "--to", "no_such_phase"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("lower_mid"),
        "lists the phases: {}",
        r.stderr
    );
}

#[test]
fn a_finalist_count_out_of_range_is_refused_naming_the_flag() {
    let sb = Sandbox::new();
    for n in ["0", "65", "4294967295"] {
        let r = sb.run(&["build", SMALL, "--finalists", n]);
        r.assert_clean_failure();
        assert!(
            r.stderr.contains("--finalists") && r.stderr.contains("1..=64"),
            "{}",
            r.stderr
        );
    }
    let r = sb.run(&["build", SMALL, "--form", "sideways"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("transposed"), "{}", r.stderr);
}

/// The small MLP with a hidden layer too wide for any tile's memory.
const TOO_WIDE_FOR_A_TILE: [&str; 10] = [
    "build",
    SMALL,
    "--tokens",
    "729",
    "--dimension",
    "1152",
    "--hidden",
    "60000",
    "--blocks",
    "1",
];

#[test]
fn a_shape_too_large_for_tile_memory_names_tile_and_bytes_over_and_keeps_the_store() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let before = std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap();
    let r = sb.run(&TOO_WIDE_FOR_A_TILE);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("tile0")
            && r.stderr.contains("bytes over")
            && r.stderr.contains("--hidden"),
        "{}",
        r.stderr
    );
    // A shape whose operand panels sit beside the pieces they are gathered from is refused by
    // lower_mid's estimate, not later by place_storage.
    let r = sb.run(&[
        "build",
        SMALL,
        "--tokens",
        "20729",
        "--dimension",
        "100",
        "--hidden",
        "8000",
        "--blocks",
        "1",
    ]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("does not fit in tile memory")
            && !r.phases_run().contains(&"place_storage".to_string()),
        "{}",
        r.stderr
    );
    // Nothing stored was lost or damaged.
    assert_eq!(
        std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap(),
        before
    );
    sb.assert_intact_and_warm();
}

#[test]
fn missing_stage_record_for_from_is_explained() {
    let sb = Sandbox::new();
    let r = sb.run(&["emit", SMALL]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("no stage record") && r.stderr.contains("place_storage"),
        "{}",
        r.stderr
    );
}

#[test]
fn one_phase_reruns_alone_from_the_records() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let r = sb.run(&["place-storage", SMALL, "--placement-order", "size"]);
    r.assert_ok();
    assert_eq!(r.phases_run(), vec!["place_storage"]);
}

#[test]
fn from_refuses_stage_records_of_other_inputs() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL, "--tokens", "5", "--build", "x"])
        .assert_ok();
    for phase in ["select_finalist", "emit"] {
        let r = sb.run(&[
            "build", SMALL, "--tokens", "9", "--build", "x", "--from", phase,
        ]);
        r.assert_clean_failure();
        assert!(r.stderr.contains("made for other inputs"), "{}", r.stderr);
    }
    // Rebuilding from the start replaces the records, after which --from works.
    sb.run(&["build", SMALL, "--tokens", "9", "--build", "x"])
        .assert_ok();
    sb.run(&[
        "build", SMALL, "--tokens", "9", "--build", "x", "--from", "emit",
    ])
    .assert_ok();
}

#[test]
fn a_build_name_that_leaves_the_stages_folder_is_refused_and_writes_nothing() {
    let sb = Sandbox::new();
    let text = ipu_codegen::workload::preset_text(SMALL)
        .unwrap()
        .replace("name = \"siglip-mlp\"", "name = \"../../escape/x\"");
    assert!(text.contains("../../escape/x"));
    std::fs::write(sb.path("escape.toml"), text).unwrap();
    let r = sb.run(&["build", "escape.toml"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("not a plain folder name"), "{}", r.stderr);
    let r = sb.run(&["build", SMALL, "--build", "/tmp/elsewhere"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("\"/tmp/elsewhere\""), "{}", r.stderr);
    // Nothing was written beside or above the stages folder.
    assert!(!sb.stages().join("../../escape").exists());
    // Two targets build into two folders.
    sb.run(&["build", SMALL]).assert_ok();
    sb.run(&["build", SMALL, "--target", "gc200"]).assert_ok();
    assert!(sb.stages().join(SMALL_ID).join("model.ipuexe").exists());
    assert!(
        sb.stages()
            .join(format!("{SMALL_ID}-gc200"))
            .join("model.ipuexe")
            .exists()
    );
}

#[test]
fn output_into_a_reader_that_stops_early_ends_without_a_panic() {
    use std::process::Stdio;
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    for args in [&["show", "select_finalist", SMALL][..], &["cache", "ls"]] {
        let mut child = sb
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the first line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn workload_files_that_are_devices_folders_or_too_large_are_refused_before_any_work() {
    let sb = Sandbox::new();
    for (path, says) in [
        ("/dev/zero", "workload file /dev/zero is not a regular file"),
        ("/dev/urandom", "is not a regular file"),
        (".", "is not a regular file"),
    ] {
        let r = sb.run(&["build", path]);
        r.assert_clean_failure();
        assert!(r.stderr.contains(says), "{path}: {}", r.stderr);
    }
    // A sparse file past the limit is refused without being read.
    let big = sb.path("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(ipu_codegen::files::WORKLOAD.limit + 1)
        .unwrap();
    let r = sb.run(&["build", big.to_str().unwrap()]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("big.toml has more than"), "{}", r.stderr);
    assert!(!sb.cache().join("objects").exists() || r.phases_run().is_empty());
}

#[test]
fn block_counts_and_weights_beyond_the_device_are_refused_at_once_naming_the_cause() {
    let sb = Sandbox::new();
    for blocks in ["4294967295", "2000"] {
        let r = sb.run(&["build", SMALL, "--blocks", blocks]);
        r.assert_clean_failure();
        assert!(
            r.stderr.contains(&format!(
                "blocks {blocks} is over the 256 this compiler builds"
            )),
            "{}",
            r.stderr
        );
        assert!(r.phases_run().is_empty());
    }
    for layers in ["65", "4294967295"] {
        let r = sb.run(&["build", "bert-encoder-small", "--blocks", layers]);
        r.assert_clean_failure();
        let says = format!("layers {layers} is over the 64 this compiler builds");
        assert!(r.stderr.contains(&says), "{}", r.stderr);
        assert!(r.phases_run().is_empty());
    }
    // 200 full-size blocks are allowed by count, but their weights alone overflow the device.
    let r = sb.run(&["build", "siglip-mlp", "--blocks", "200"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("the weights need 3966566400 bytes")
            && r.stderr.contains("use fewer blocks (--blocks)")
            && r.stderr.contains("`block0.fc1.weight` (9916416 bytes)"),
        "{}",
        r.stderr
    );
}

/// A graph spec of one matmul `y = x · w`, `x` of `rows x k`, `w` of `k x n`.
fn one_matmul(rows: u32, k: u32, n: u32) -> String {
    let value = |name: &str, role: &str, r: u32, c: u32| {
        format!(
            "[[values]]\nname = \"{name}\"\ndtype = \"f16\"\nrole = \"{role}\"\nrows = {r}\ncols = {c}\n\n"
        )
    };
    format!(
        "kind = \"graph\"\nname = \"big\"\npartials = \"f16\"\nweights = \"big.safetensors\"\n\n{}{}{}\
         [[ops]]\nname = \"fc\"\nkind = \"matmul\"\ninputs = [\"x\", \"w\"]\noutput = \"y\"\n",
        value("x", "input", rows, k),
        value("w", "weight", k, n),
        value("y", "output", rows, n),
    )
}

/// The `error:` line of a failed command.
fn error_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line in {stderr}"))
}

#[test]
fn does_not_fit_advice_names_an_mlps_flags_and_a_graphs_largest_values_but_no_flag() {
    let sb = Sandbox::new();
    // An MLP too large for a tile: its flags, and its values by name and bytes.
    let r = sb.run(&TOO_WIDE_FOR_A_TILE);
    r.assert_clean_failure();
    let line = error_line(&r.stderr);
    assert!(
        line.contains("does not fit in tile memory")
            && line.contains("`block0.fc1.weight` (138240000 bytes)")
            && line.contains("(--batch, --tokens)")
            && line.contains("(--dimension, --hidden)"),
        "{line}"
    );
    // The same matmul as a graph spec: its values, and that the model must shrink; no flag, as a
    // graph takes none of them.
    for (rows, k, n, says) in [
        (729, 1152, 60000, "does not fit in tile memory"),
        (16, 16384, 16384, "the weights need 536870912 bytes"),
    ] {
        std::fs::write(sb.path("big.toml"), one_matmul(rows, k, n)).unwrap();
        let r = sb.run(&["build", "big.toml"]);
        r.assert_clean_failure();
        let line = error_line(&r.stderr);
        let w = format!("`w` ({} bytes)", 2 * k * n);
        assert!(
            line.contains(says)
                && line.contains(&w)
                && line.contains("the model must be made smaller or split"),
            "{line}"
        );
        assert!(!line.contains("--"), "names a flag a graph refuses: {line}");
        // Each size flag is indeed refused.
        for flag in [
            "--tokens",
            "--hidden",
            "--blocks",
            "--dimension",
            "--head-dim",
        ] {
            let r = sb.run(&["build", "big.toml", flag, "8"]);
            r.assert_clean_failure();
            assert!(
                r.stderr.contains("does not apply to graph"),
                "{flag}: {}",
                r.stderr
            );
        }
    }
    // The same product with `w` an input: what overflows is named as what it is.
    let input_w = one_matmul(16, 16384, 16384).replace(
        "name = \"w\"\ndtype = \"f16\"\nrole = \"weight\"",
        "name = \"w\"\ndtype = \"f16\"\nrole = \"input\"",
    );
    assert!(input_w.contains("role = \"input\"\nrows = 16384"));
    std::fs::write(sb.path("big.toml"), input_w).unwrap();
    let r = sb.run(&["build", "big.toml"]);
    r.assert_clean_failure();
    let line = error_line(&r.stderr);
    assert!(
        line.contains("the weights and matmul operands need 536870912 bytes")
            && line.contains("`w` (536870912 bytes)"),
        "{line}"
    );
}
