//! The store: rebuilds hit, config changes recompute exactly what they must, unchanged outputs stop the
//! cascade, damaged objects are evicted and rebuilt, concurrent builds both succeed.

mod common;
use common::{SMALL, SMALL_ID, Sandbox, phases};

#[test]
fn identical_rebuild_runs_no_phase() {
    let sb = Sandbox::new();
    let first = sb.run(&["build", SMALL]);
    first.assert_ok();
    assert_eq!(
        first.phases_run(),
        phases(),
        "a cold build runs every phase"
    );
    let second = sb.run(&["build", SMALL]);
    second.assert_ok();
    assert!(
        second.phases_run().is_empty(),
        "warm build ran {:?}",
        second.phases_run()
    );
    // The summaries on stdout say the same.
    let all = phases().join(",");
    assert!(
        first
            .stdout
            .starts_with(&format!("build={SMALL_ID} phasesRun={all} "))
            && first.stdout.contains("/model.ipuexe"),
        "{}",
        first.stdout
    );
    assert!(
        second
            .stdout
            .starts_with(&format!("build={SMALL_ID} phasesRun=- ")),
        "{}",
        second.stdout
    );
}

#[test]
fn a_phase_config_change_recomputes_that_phase_and_later_only() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let before = sb.record(SMALL_ID, "place_storage");
    let r = sb.run(&["build", SMALL, "--placement-order", "size"]);
    r.assert_ok();
    let ran = r.phases_run();
    assert_eq!(
        ran.first().map(String::as_str),
        Some("place_storage"),
        "ran {ran:?}"
    );
    assert!(
        ran.iter()
            .all(|p| ["place_storage", "emit", "build_images"].contains(&p.as_str())),
        "ran {ran:?}"
    );
    let after = sb.record(SMALL_ID, "place_storage");
    assert_ne!(before["key"], after["key"], "the config is part of the key");
}

#[test]
fn an_unchanged_output_stops_the_cascade() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let chosen = sb.record(SMALL_ID, "select_finalist")["headline"]["mapping"]
        .as_str()
        .unwrap()
        .to_string();
    // Asking for the mapping `auto` already chose changes select_finalist's key but not its output.
    let r = sb.run(&["build", SMALL, "--mapping", &chosen]);
    r.assert_ok();
    assert_eq!(
        r.phases_run(),
        vec!["select_finalist"],
        "only the reconfigured phase runs"
    );
}

#[test]
fn damaged_objects_are_evicted_and_rebuilt() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let selected = sb.record(SMALL_ID, "select_finalist")["output"]
        .as_str()
        .unwrap()
        .to_string();
    let placement = sb.record(SMALL_ID, "place_storage")["output"]
        .as_str()
        .unwrap()
        .to_string();
    // Truncate one object, flip a byte in another.
    let sel_path = sb.object_path(&selected);
    let bytes = std::fs::read(&sel_path).unwrap();
    std::fs::write(&sel_path, &bytes[..bytes.len() / 2]).unwrap();
    let pl_path = sb.object_path(&placement);
    let mut bytes = std::fs::read(&pl_path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&pl_path, &bytes).unwrap();

    let r = sb.run(&["build", SMALL]);
    r.assert_ok();
    assert!(
        r.stderr.contains("evicted damaged store object"),
        "{}",
        r.stderr
    );
    let ran = r.phases_run();
    assert!(
        ran.contains(&"select_finalist".to_string()) && ran.contains(&"place_storage".to_string()),
        "ran {ran:?}"
    );
    for (path, hash) in [(&sel_path, &selected), (&pl_path, &placement)] {
        let rebuilt = std::fs::read(path).unwrap();
        assert_eq!(
            blake3::hash(&rebuilt).to_hex().as_str(),
            hash.as_str(),
            "rebuilt object has its hash"
        );
    }
    let verify = sb.run(&["cache", "verify"]);
    verify.assert_ok();
    assert!(verify.stdout.contains("damaged=0"), "{}", verify.stdout);
}

#[test]
fn cache_verify_reports_damage_and_removes_nothing() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let mid = sb.record(SMALL_ID, "lower_mid")["output"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(sb.object_path(&mid), b"garbage").unwrap();
    let r = sb.run(&["cache", "verify"]);
    r.assert_clean_failure();
    // The object, and the action entry naming it.
    assert!(r.stdout.contains("damaged=2"), "{}", r.stdout);
    assert!(r.stdout.contains("which is damaged"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("damaged {}", sb.object_path(&mid).display())),
        "{}",
        r.stdout
    );
    assert!(sb.object_path(&mid).exists(), "verify only reads");
    let stats = sb.run(&["cache", "stats"]);
    stats.assert_ok();
    assert!(stats.stdout.contains("objects="), "{}", stats.stdout);
}

#[test]
fn two_builds_into_one_store_at_once_both_succeed() {
    let sb = Sandbox::new();
    let a = sb
        .command(&["build", SMALL])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let b = sb
        .command(&["build", SMALL])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (
        common::ran(a.wait_with_output().unwrap()),
        common::ran(b.wait_with_output().unwrap()),
    );
    a.assert_ok();
    b.assert_ok();
    sb.assert_intact_and_warm();
}

#[test]
fn gc_removes_by_size() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let r = sb.run(&["cache", "gc", "--max-bytes", "0"]);
    r.assert_ok();
    assert!(r.stdout.contains("removed"), "{}", r.stdout);
    let stats = sb.run(&["cache", "stats"]);
    assert!(stats.stdout.contains("objects=0"), "{}", stats.stdout);
    // The next build recomputes everything.
    assert_eq!(sb.run(&["build", SMALL]).assert_ok().phases_run(), phases());
}

#[test]
fn exchange_schedules_are_reused_after_placement_changes_and_across_builds() {
    let sb = Sandbox::new();
    // A shape whose buffers differ in size, so the size order moves them.
    let shape = ["--tokens", "70", "--dimension", "96", "--hidden", "200"];
    let build = |extra: &[&str]| {
        let mut args = vec!["build", SMALL];
        args.extend_from_slice(&shape);
        args.extend_from_slice(extra);
        sb.run(&args)
    };
    build(&[]).assert_ok();
    let id = "siglip-mlp-f16-b1-t70-d96-h200-n2-bias";
    let phases = sb.record(id, "lower_exchanges")["headline"]["horizons"]
        .as_array()
        .unwrap()
        .len();
    // Another placement: lower_exchanges does not run; emit binds every schedule to the moved rows.
    let r = build(&["--placement-order", "size"]);
    r.assert_ok();
    assert!(
        !r.phases_run().contains(&"lower_exchanges".to_string()),
        "ran {:?}",
        r.phases_run()
    );
    for phase in 0..phases {
        let line =
            format!("reused exchange optimization after validating relocated rows phase={phase}");
        assert!(r.stderr.contains(&line), "missing `{line}`:\n{}", r.stderr);
    }
    // Another workload with the same shapes (another name): lower_exchanges runs, and takes every
    // schedule from the store by its pattern.
    let renamed = sb.path("renamed.toml");
    let text = ipu_codegen::workload::preset_text(SMALL).unwrap();
    std::fs::write(
        &renamed,
        text.replace("name = \"siglip-mlp\"", "name = \"renamed-mlp\""),
    )
    .unwrap();
    let mut args = vec!["build", renamed.to_str().unwrap()];
    args.extend_from_slice(&shape);
    let r = sb.run(&args);
    r.assert_ok();
    assert!(r.phases_run().contains(&"lower_exchanges".to_string()));
    for phase in 0..phases {
        let line = format!("phase={phase} pattern=");
        assert!(
            r.stderr.lines().any(|l| l
                .contains("reused exchange optimization after validating the pattern")
                && l.contains(&line)),
            "phase {phase} not reused:\n{}",
            r.stderr
        );
    }
}

#[test]
fn damaged_action_files_are_misses() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    for entry in walk(&sb.cache().join("actions")) {
        std::fs::write(entry, b"\xff\xfe garbage").unwrap();
    }
    let r = sb.run(&["build", SMALL]);
    r.assert_ok();
    assert_eq!(r.phases_run(), phases(), "every damaged action is a miss");
    sb.assert_intact_and_warm();
}

#[test]
fn gc_by_age_keeps_what_builds_still_use() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(10 * 86_400);
    for entry in walk(&sb.cache()) {
        std::fs::File::options()
            .write(true)
            .open(entry)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // A warm build uses (and so refreshes) everything it needs...
    assert!(
        sb.run(&["build", SMALL])
            .assert_ok()
            .phases_run()
            .is_empty()
    );
    let r = sb.run(&["cache", "gc", "--max-age-days", "5"]);
    r.assert_ok();
    // ... so gc by age keeps it.
    assert!(
        sb.run(&["build", SMALL])
            .assert_ok()
            .phases_run()
            .is_empty()
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files.extend(walk(&p))
        } else {
            files.push(p)
        }
    }
    files
}

#[test]
fn bench_build_times_cold_builds_and_leaves_the_store_alone() {
    let sb = Sandbox::new();
    let ran = sb.run(&["bench", "build", SMALL, "--runs", "2"]);
    ran.assert_ok();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    for (run, line) in lines[..2].iter().enumerate() {
        assert!(
            line.starts_with(&format!("run={} wallMs=", run + 1)),
            "{line}"
        );
        for phase in phases() {
            assert!(
                line.contains(&format!(" {phase}=")),
                "{phase} missing: {line}"
            );
        }
        // The run's own CPU time: more than nothing, and no more than its wall time on every
        // thread the machine has (both rounded to a millisecond).
        let figure = |key: &str| -> f64 {
            (line.split(&format!(" {key}=")).nth(1))
                .and_then(|rest| rest.split(' ').next())
                .and_then(|ms| ms.parse().ok())
                .unwrap_or_else(|| panic!("no {key}: {line}"))
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let (cpu, wall) = (figure("cpuMs"), figure("wallMs"));
        assert!(cpu > 0.0 && cpu <= (wall + 1.0) * threads, "{line}");
        // The run's own peak: more than nothing, less than the machine.
        let peak: f64 = line
            .split(" peakRssMiB=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|mib| mib.parse().ok())
            .unwrap_or_else(|| panic!("no peakRssMiB: {line}"));
        assert!(peak > 1.0 && peak < 4096.0, "{line}");
    }
    assert!(lines[2].contains("runs=2 fastestMs="), "{}", lines[2]);
    // Every run was cold, in its own scratch store: the user's store holds nothing.
    assert!(!sb.cache().join("objects").exists());
    sb.run(&["bench", "build", SMALL, "--runs", "0"])
        .assert_clean_failure();
}

/// `cache gc --max-bytes` takes a size with a binary suffix, and names what it cannot read.
#[test]
fn gc_reads_sizes_with_binary_suffixes() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    sb.run(&["cache", "gc", "--max-bytes", "1G"]).assert_ok();
    sb.assert_intact_and_warm();
    let bad = sb.run(&["cache", "gc", "--max-bytes", "1X"]);
    bad.assert_clean_failure();
    assert!(
        bad.stderr.contains("\"1X\" is not a size"),
        "{}",
        bad.stderr
    );
}
