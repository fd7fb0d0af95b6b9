//! Every command reads and writes files one way (`ipu_codegen::files`): a FIFO is refused by name and
//! never waited on; a file far past its kind's size, or without its format's magic, is refused before
//! it is read whole (checked under an address-space limit, where reading it whole aborts); a link
//! planted at an output's name is replaced and its target left alone; a full disk leaves neither a
//! partial output nor a temp file; imports side by side to one `-o` leave one import's pair, which
//! `run` checks by the hash the spec records; a build removes the temp files of dead writers, and only
//! theirs, even while other writers are making theirs.

mod common;
use common::{Ran, SMALL, Sandbox};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `command`, which must exit by itself within 20 s (a read blocked on a FIFO never does).
fn within_20s(mut command: Command, what: &str) -> Ran {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: did not return within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    common::ran(child.wait_with_output().expect("output"))
}

/// `ipu-codegen args` in the sandbox under the shell's `limits` (`ulimit -v 4000000`).
fn limited(sb: &Sandbox, limits: &str, args: &[&str]) -> Ran {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("{limits}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_ipu-codegen"))
        .args(args)
        .current_dir(sb.dir.path())
        .env("IPU_CODEGEN_CACHE", sb.cache())
        .env("IPU_CODEGEN_STAGES", sb.stages())
        .env("RUST_LOG", "info");
    common::ran(c.output().expect("sh"))
}

/// A refusal: a non-zero exit of its own (no abort, no panic) and `says` on stderr.
fn refused(r: &Ran, says: &str, what: &str) {
    r.assert_clean_failure();
    assert_ne!(
        std::os::unix::process::ExitStatusExt::signal(&r.status),
        Some(6),
        "{what}: aborted"
    );
    assert_ne!(r.status.code(), Some(134), "{what}: aborted");
    assert!(r.stderr.contains(says), "{what}: {}", r.stderr);
}

fn sparse(path: &Path, bytes: u64, head: &[u8]) {
    let f = std::fs::File::create(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, head, 0).unwrap();
    f.set_len(bytes).unwrap();
}

#[test]
fn a_fifo_is_refused_by_name_on_every_command_that_reads_one() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let cases: [(&str, Vec<&str>); 6] = [
        ("in.npy", vec!["run", SMALL, "--input", "x=in.npy"]),
        (
            "w.safetensors",
            vec!["run", SMALL, "--weights", "w.safetensors"],
        ),
        ("w.toml", vec!["build", "w.toml"]),
        ("p.ipuprofile", vec!["report", "p.ipuprofile"]),
        ("m.ipuexe", vec!["run", "m.ipuexe"]),
        ("m.onnx", vec!["import", "m.onnx", "-o", "out/m.toml"]),
    ];
    for (fifo, args) in cases {
        mkfifo(&sb.path(fifo));
        let r = within_20s(sb.command(&args), fifo);
        refused(&r, &format!("{fifo} is not a regular file"), fifo);
    }
}

#[test]
fn files_far_past_their_kinds_size_or_without_its_magic_are_refused_before_being_read_whole() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let six_gb = 6 << 30;
    sparse(&sb.path("big.npy"), six_gb, b"\x93NUMPY\x01\x00");
    sparse(&sb.path("big.ipuexe"), six_gb, b"IPUEXE\0\x01");
    sparse(&sb.path("big.ipuprofile"), six_gb, b"IPUPROF\x01");
    let limit = "ulimit -v 4000000";
    for (file, args) in [
        ("big.npy", vec!["run", SMALL, "--input", "x=big.npy"]),
        ("big.ipuexe", vec!["run", "big.ipuexe"]),
        ("big.ipuprofile", vec!["report", "big.ipuprofile"]),
    ] {
        refused(
            &limited(&sb, limit, &args),
            &format!("{file} has more than"),
            file,
        );
    }
    // Within the size limit but larger than the address space: its first bytes say what it is not.
    for (file, args, says) in [
        (
            "zip.npy",
            vec!["run", SMALL, "--input", "x=zip.npy"],
            "zip.npy is not a .npy file (bad magic",
        ),
        (
            "zip.ipuexe",
            vec!["run", "zip.ipuexe"],
            "zip.ipuexe is not an application package (bad magic",
        ),
        (
            "zip.ipuprofile",
            vec!["report", "zip.ipuprofile"],
            "zip.ipuprofile is not an execution profile (bad magic",
        ),
    ] {
        sparse(&sb.path(file), 1 << 30, b"PK\x03\x04");
        refused(&limited(&sb, "ulimit -v 900000", &args), says, file);
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

#[test]
fn a_link_planted_at_an_output_is_replaced_and_its_target_left_alone() {
    let sb = Sandbox::new();
    let precious = sb.path("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    let out = sb.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let output = out.join("block1.fc2.biased.npy");
    std::os::unix::fs::symlink(&precious, &output).unwrap();
    sb.run(&["run", SMALL, "--output-dir", "out"]).assert_ok();
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    assert!(is_regular(&output), "the link is replaced by the output");
    assert!(std::fs::read(&output).unwrap().starts_with(b"\x93NUMPY"));

    // import: links at the spec, the weights and the temp names import once used.
    let imported = sb.path("imp");
    std::fs::create_dir_all(&imported).unwrap();
    let names_planted = ["x.toml", "x.safetensors", "x.toml.tmp", "x.safetensors.tmp"];
    for name in names_planted {
        std::os::unix::fs::symlink(&precious, imported.join(name)).unwrap();
    }
    let encoder = common::test_model("encoder.onnx");
    sb.run(&common::import_args(&encoder, "imp/x.toml"))
        .assert_ok();
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    assert!(is_regular(&imported.join("x.toml")));
    assert!(is_regular(&imported.join("x.safetensors")));
    // The old temp names are left as they were, links still: nothing wrote through them.
    let mut planted = names_planted.map(String::from).to_vec();
    planted.sort();
    assert_eq!(names(&imported), planted);
    assert!(!is_regular(&imported.join("x.toml.tmp")));
}

#[test]
fn a_full_disk_leaves_no_partial_output_and_no_temp_file() {
    let sb = Sandbox::new();
    // A first run writes the profile; the second writes nothing but its outputs.
    sb.run(&["run", SMALL]).assert_ok();
    std::fs::create_dir_all(sb.path("out")).unwrap();
    // A file-size limit makes every write past 1 KiB fail as a full disk does.
    let full = "trap '' XFSZ; ulimit -f 1";
    let r = limited(&sb, full, &["run", SMALL, "--output-dir", "out"]);
    refused(
        &r,
        "writing output out/block1.fc2.biased.npy: File too large",
        "run",
    );
    assert!(
        names(&sb.path("out")).is_empty(),
        "{:?}",
        names(&sb.path("out"))
    );

    let encoder = common::test_model("encoder.onnx");
    std::fs::create_dir_all(sb.path("imp")).unwrap();
    let r = limited(&sb, full, &common::import_args(&encoder, "imp/x.toml"));
    refused(&r, "writing weights file imp/x.safetensors", "import");
    assert!(
        names(&sb.path("imp")).is_empty(),
        "{:?}",
        names(&sb.path("imp"))
    );
}

/// The blake3 a graph spec records for its weights.
fn recorded_hash(toml: &Path) -> String {
    let text = std::fs::read_to_string(toml).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("weights_blake3 = "))
        .unwrap_or_else(|| panic!("{} records no weights_blake3", toml.display()));
    line.trim_start_matches("weights_blake3 = ")
        .trim_matches('"')
        .to_string()
}

#[test]
fn imports_side_by_side_to_one_output_leave_one_imports_pair() {
    let sb = Sandbox::new();
    let models = [
        common::test_model("encoder.onnx"),
        common::test_model("spell_gelu_op.onnx"),
    ];
    for round in 0..2 {
        let children: Vec<_> = (0..16)
            .map(|i| {
                sb.command(&common::import_args(&models[i % 2], "out/x.toml"))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let r = common::ran(child.wait_with_output().unwrap());
            r.assert_ok();
            assert!(!r.stderr.contains("renaming"), "{}", r.stderr);
        }
        let weights = std::fs::read(sb.path("out/x.safetensors")).unwrap();
        assert_eq!(
            recorded_hash(&sb.path("out/x.toml")),
            blake3::hash(&weights).to_hex().as_str(),
            "round {round}: the spec and the weights are one import's"
        );
        assert_eq!(
            names(&sb.path("out")),
            ["x.safetensors", "x.toml"],
            "no temp file is left"
        );
    }
}

#[test]
fn a_spec_whose_weights_were_changed_is_refused_naming_the_hash() {
    let sb = Sandbox::new();
    let encoder = common::test_model("encoder.onnx");
    sb.run(&common::import_args(&encoder, "imp/x.toml"))
        .assert_ok();
    sb.run(&["run", "imp/x.toml", "--random-inputs"])
        .assert_ok();
    // One weight's last byte changed: a pair mixed or edited.
    let path = sb.path("imp/x.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let r = sb.run(&["run", "imp/x.toml", "--random-inputs"]);
    refused(&r, "imp/x.safetensors does not match its graph spec", "run");
    assert!(r.stderr.contains("weights_blake3"), "{}", r.stderr);
    // Weights the user names are theirs: not checked against the spec.
    sb.run(&[
        "run",
        "imp/x.toml",
        "--random-inputs",
        "--weights",
        "imp/x.safetensors",
    ])
    .assert_ok();
}

#[test]
fn a_build_removes_the_temp_files_of_dead_writers_and_keeps_a_live_ones() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let tmp = sb.cache().join("tmp");
    let dead = tmp.join(".0123abcd.Xy12Zq.tmp");
    std::fs::write(&dead, b"half an object").unwrap();
    let live = tmp.join(".4567ef01.Ab34Cd.tmp");
    let writer = std::fs::File::create(&live).unwrap();
    writer.lock().unwrap();
    let stage = sb.stages().join(common::SMALL_ID);
    let dead_record = stage.join(".emit.json.Qw56Er.tmp");
    std::fs::write(&dead_record, b"{").unwrap();
    sb.run(&["build", SMALL]).assert_ok();
    assert!(!dead.exists(), "a dead writer's temp file goes");
    assert!(!dead_record.exists(), "a dead writer's temp record goes");
    assert!(live.exists(), "a live writer's temp file stays");
    drop(writer);
}

#[test]
fn cache_verify_reports_entries_naming_missing_objects_and_records_or_packages_of_other_builds() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    sb.run(&["build", "attention-flash-small"]).assert_ok();
    let other = std::fs::read_dir(sb.stages())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && !p.ends_with(common::SMALL_ID))
        .unwrap();
    let small = sb.stages().join(common::SMALL_ID);
    // An object an action entry names, deleted.
    let mid = sb.record(common::SMALL_ID, "lower_mid")["output"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_file(sb.object_path(&mid)).unwrap();
    // A record and the package of another build, copied in.
    std::fs::copy(other.join("emit.json"), small.join("emit.json")).unwrap();
    std::fs::copy(other.join("model.ipuexe"), small.join("model.ipuexe")).unwrap();

    let r = sb.run(&["cache", "verify"]);
    r.assert_clean_failure();
    assert!(r.stdout.contains("damaged=3"), "{}", r.stdout);
    for says in [
        "which the store does not hold".to_string(),
        format!(
            "{}: it is a record of build",
            small.join("emit.json").display()
        ),
        format!("{}: it holds package", small.join("model.ipuexe").display()),
    ] {
        assert!(r.stdout.contains(&says), "{says}: {}", r.stdout);
    }
    let repaired = sb.run(&["cache", "verify", "--repair"]);
    repaired.assert_ok();
    assert!(repaired.stdout.contains("removed=3"), "{}", repaired.stdout);
    let clean = sb.run(&["cache", "verify"]);
    clean.assert_ok();
    assert!(clean.stdout.contains("damaged=0"), "{}", clean.stdout);
    // The next build puts back what was removed, and the store verifies clean again.
    let ran = sb.run(&["build", SMALL]).assert_ok().phases_run();
    assert_eq!(ran, ["lower_mid"], "only the phase whose entry went runs");
    assert!(is_regular(&small.join("model.ipuexe")));
    sb.assert_intact_and_warm();
}

/// A file that is not there is named with the system's reason, said once, by every command that
/// reads one.
#[test]
fn a_missing_file_is_named_with_its_reason_once() {
    let sb = Sandbox::new();
    let missing = sb.path("missing.bin");
    let missing = missing.to_str().unwrap();
    let weights = format!("{missing}.safetensors");
    let input = format!("x={missing}.npy");
    let commands: [&[&str]; 4] = [
        &["run", SMALL, "--weights", &weights],
        &["run", SMALL, "--input", &input],
        &["report", missing],
        &["import", missing, "-o", "out/m.toml"],
    ];
    for args in commands {
        let r = sb.run(args);
        r.assert_clean_failure();
        assert!(r.stderr.contains(missing), "{args:?}: {}", r.stderr);
        let reason = "No such file or directory";
        assert_eq!(
            r.stderr.matches(reason).count(),
            1,
            "{args:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn writes_beside_a_sweep_of_dead_temps_all_land() {
    // A sweep that let go of a new temp file's lock before unlinking it lost a writer's file now and
    // then (2 of 20,000 such writes in one trial, made without the fsync): its rename failed with
    // "No such file or directory".
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let failed: Vec<String> = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                ipu_codegen::files::remove_dead_temps(&tmp);
            }
        });
        let failed = (0..20_000u32)
            .filter_map(|i| {
                let path = dir.path().join(format!("object{}", i % 7));
                let bytes = i.to_le_bytes();
                ipu_codegen::files::write_atomic_via(&tmp, &path, "store file", &[&bytes])
                    .err()
                    .map(|e| e.to_string())
            })
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        failed
    });
    assert!(
        failed.is_empty(),
        "{} writes failed: {failed:?}",
        failed.len()
    );
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "temp files left"
    );
}
