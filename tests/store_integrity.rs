//! Nothing wrong in the store or the stages folder is ever consumed: action entries swapped between
//! builds, overwritten or forged; stage records edited; gc beside running builds; temp files of dead
//! writers; unreadable folders.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};
use ipu_codegen::driver::PIPELINE;
use ipu_codegen::store::{ActionEntry, ContentHash};
use std::path::PathBuf;

const T30_ID: &str = "siglip-mlp-f16-b1-t30-d40-h72-n2-bias";

/// Two builds of the small MLP into one sandbox: 21 and 30 tokens.
fn two_builds() -> Sandbox {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    sb.run(&["build", SMALL, "--tokens", "30"]).assert_ok();
    sb
}

fn key(sb: &Sandbox, build: &str, phase: &str) -> String {
    sb.record(build, phase)["key"].as_str().unwrap().to_string()
}

fn action_path(sb: &Sandbox, key: &str) -> PathBuf {
    sb.cache().join("actions").join(&key[..2]).join(key)
}

/// `run` of the 30-token build passes, and says it ran 30 tokens.
fn run_t30_passes(sb: &Sandbox) -> String {
    let stdout = common::assert_pass(sb, &["run", SMALL, "--tokens", "30"]);
    assert!(stdout.contains(" tokens=30 "), "{stdout}");
    stdout
}

#[test]
fn an_action_entry_copied_from_another_build_is_evicted_and_recomputed() {
    for phase in [
        "build_images",
        "select_finalist",
        "place_storage",
        "lower_mid",
        "emit",
    ] {
        let sb = two_builds();
        let (a, t) = (key(&sb, SMALL_ID, phase), key(&sb, T30_ID, phase));
        std::fs::copy(action_path(&sb, &a), action_path(&sb, &t)).unwrap();
        // verify sees it, names it and removes nothing.
        let v = sb.run(&["cache", "verify"]);
        v.assert_clean_failure();
        assert!(
            v.stdout.contains("damaged=1") && v.stdout.contains("filed under another key"),
            "{phase}: {}",
            v.stdout
        );
        assert!(action_path(&sb, &t).exists());
        // The build takes none of it.
        let r = sb.run(&["build", SMALL, "--tokens", "30"]);
        r.assert_ok();
        assert!(
            r.stderr.contains("evicted an unusable action entry"),
            "{phase}: {}",
            r.stderr
        );
        assert_eq!(r.phases_run().first().map(String::as_str), Some(phase));
        run_t30_passes(&sb);
        sb.run(&["cache", "verify"]).assert_ok();
    }
}

#[test]
fn verify_repair_removes_damaged_entries_records_and_objects_and_the_build_recomputes_them() {
    let sb = two_builds();
    let (a, t) = (key(&sb, SMALL_ID, "emit"), key(&sb, T30_ID, "emit"));
    std::fs::copy(action_path(&sb, &a), action_path(&sb, &t)).unwrap();
    let record = sb.stages().join(T30_ID).join("place_storage.json");
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(
        &record,
        text.replacen("\"elapsed_ms\": ", "\"elapsed_ms\": 1", 1),
    )
    .unwrap();
    let mid = sb.record(SMALL_ID, "lower_mid")["output"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(sb.object_path(&mid), b"garbage").unwrap();
    // The entry, the record, the object and the action entry naming the object.
    let v = sb.run(&["cache", "verify"]);
    v.assert_clean_failure();
    assert!(v.stdout.contains("damaged=4"), "{}", v.stdout);
    assert!(v.stdout.contains("which is damaged"), "{}", v.stdout);
    let r = sb.run(&["cache", "verify", "--repair"]);
    r.assert_ok();
    assert!(r.stdout.contains("removed=4"), "{}", r.stdout);
    assert!(!record.exists() && !sb.object_path(&mid).exists());
    sb.run(&["cache", "verify"]).assert_ok();
    run_t30_passes(&sb);
    assert_eq!(
        sb.run(&["build", SMALL])
            .assert_ok()
            .phases_run()
            .first()
            .map(String::as_str),
        Some("lower_mid"),
        "the 21-token build recomputes its removed mid"
    );
    sb.assert_intact_and_warm();
}

#[test]
fn an_entry_overwritten_with_another_entry_or_with_an_object_never_breaks_the_store() {
    let sb = two_builds();
    let t = key(&sb, T30_ID, "build_images");
    let other = key(&sb, T30_ID, "lower_mid");
    let object = sb.record(T30_ID, "lower_mid")["output"]
        .as_str()
        .unwrap()
        .to_string();
    for source in [action_path(&sb, &other), sb.object_path(&object)] {
        std::fs::copy(&source, action_path(&sb, &t)).unwrap();
        sb.run(&["build", SMALL, "--tokens", "30", "--from", "build_images"])
            .assert_ok();
        run_t30_passes(&sb);
    }
}

#[test]
fn a_forged_entry_gives_a_package_that_run_refuses_naming_both_builds() {
    let sb = two_builds();
    // A valid entry under the 30-token key naming the 21-token package: what only a deliberate
    // forger could write.
    let phase = PIPELINE[PIPELINE.len() - 1];
    let t = ContentHash::parse(&key(&sb, T30_ID, phase.name())).unwrap();
    let a = ContentHash::parse(
        sb.record(SMALL_ID, phase.name())["output"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let forged = ActionEntry::new(&t, phase.expect(), &a);
    std::fs::write(
        action_path(&sb, &t.hex()),
        serde_json::to_vec(&forged).unwrap(),
    )
    .unwrap();
    let r = sb.run(&["run", SMALL, "--tokens", "30"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("was built for siglip-mlp-f16-b1-t21")
            && r.stderr
                .contains("not for what this run asked: siglip-mlp-f16-b1-t30"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("PASS"), "{}", r.stdout);
}

#[test]
fn an_edited_stage_record_is_refused_by_from_and_rewritten_by_a_full_build() {
    let sb = two_builds();
    let record = sb.stages().join(T30_ID).join("place_storage.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let (own, other) = (
        sb.record(T30_ID, "place_storage")["output"]
            .as_str()
            .unwrap()
            .to_string(),
        sb.record(SMALL_ID, "place_storage")["output"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let input = sb.record(T30_ID, "place_storage")["inputs"]["exchanges"]
        .as_str()
        .unwrap()
        .to_string();
    let flipped = format!(
        "{}{}",
        if input.starts_with('0') { "1" } else { "0" },
        &input[1..]
    );
    for edited in [text.replace(&own, &other), text.replace(&input, &flipped)] {
        assert_ne!(edited, text);
        std::fs::write(&record, &edited).unwrap();
        let from = sb.run(&["build", SMALL, "--tokens", "30", "--from", "emit"]);
        from.assert_clean_failure();
        assert!(
            from.stderr.contains("place_storage.json is damaged"),
            "{}",
            from.stderr
        );
        // A full build finds the record disagrees with what it computed and rewrites it.
        sb.run(&["build", SMALL, "--tokens", "30"]).assert_ok();
        let identity = |r: serde_json::Value| {
            let mut r = r.as_object().unwrap().clone();
            for volatile in ["elapsed_ms", "check"] {
                r.remove(volatile);
            }
            r
        };
        assert_eq!(
            identity(sb.record(T30_ID, "place_storage")),
            identity(serde_json::from_str(&text).unwrap())
        );
        sb.run(&["build", SMALL, "--tokens", "30", "--from", "emit"])
            .assert_ok();
    }
}

#[test]
fn gc_beside_running_builds_never_removes_what_they_use() {
    let sb = Sandbox::new();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let gcs = std::thread::scope(|scope| {
        let collector = scope.spawn(|| {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if !sb
                    .run(&["cache", "gc", "--max-bytes", "0"])
                    .status
                    .success()
                {
                    return 0;
                }
                runs += 1;
            }
            runs
        });
        let builds: Vec<_> = ["21", "22", "23", "24", "25", "26"]
            .into_iter()
            .map(|tokens| sb.run(&["build", SMALL, "--tokens", tokens]))
            .collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let gcs = collector.join().unwrap();
        for build in &builds {
            build.assert_ok();
        }
        gcs
    });
    assert!(gcs >= 2, "gc ran {gcs} times");
}

#[test]
fn temp_files_of_dead_writers_are_counted_and_removed() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    // A writer killed between its write and its rename leaves these.
    let store_temp = sb.cache().join("tmp").join("999999-0-object");
    std::fs::write(&store_temp, vec![7u8; 1000]).unwrap();
    let stage_temp = sb.stages().join(SMALL_ID).join(".emit.json.999999999.tmp");
    std::fs::write(&stage_temp, b"{").unwrap();
    let s = sb.run(&["cache", "stats"]);
    s.assert_ok();
    assert!(
        s.stdout.contains("tempFiles=1 tempBytes=1000"),
        "{}",
        s.stdout
    );
    let gc = sb.run(&["cache", "gc"]);
    gc.assert_ok();
    assert!(
        gc.stdout.contains("removed 1 files, 1000 bytes"),
        "{}",
        gc.stdout
    );
    assert!(!store_temp.exists());
    sb.run(&["build", SMALL]).assert_ok();
    assert!(
        !stage_temp.exists(),
        "the next build removes its folder's dead temp files"
    );
}

#[test]
fn unreadable_store_folders_are_reported_by_stats_verify_and_gc() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let objects = sb.cache().join("objects");
    let sub = std::fs::read_dir(&objects)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    // A FIFO where an object should be is no file to read.
    let fifo = objects.join("ff");
    std::fs::create_dir_all(&fifo).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(fifo.join("f".repeat(64)))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    for args in [
        &["cache", "stats"][..],
        &["cache", "verify"],
        &["cache", "gc"],
    ] {
        let r = sb.run(args);
        r.assert_clean_failure();
        assert!(
            r.stdout.contains("not a regular file"),
            "{args:?}: {}",
            r.stdout
        );
    }
    std::fs::remove_dir_all(&fifo).unwrap();
    // A folder the user cannot read, as a user without privileges sees it.
    use std::os::unix::fs::PermissionsExt;
    let open = std::fs::Permissions::from_mode(0o777);
    for dir in [sb.dir.path().to_path_buf(), sb.cache()]
        .into_iter()
        .chain(walk(&sb.cache(), true))
    {
        std::fs::set_permissions(&dir, open.clone()).unwrap();
    }
    for file in walk(&sb.cache(), false) {
        std::fs::set_permissions(&file, open.clone()).unwrap();
    }
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o000)).unwrap();
    // SAFETY: geteuid only reads the process's user id.
    let root = unsafe { libc::geteuid() } == 0;
    for args in [
        &["cache", "stats"][..],
        &["cache", "verify"],
        &["cache", "gc"],
    ] {
        let mut c = sb.command(args);
        let r = if root {
            // Root reads everything: the check runs as `nobody`.
            let mut as_nobody = std::process::Command::new("setpriv");
            as_nobody
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(c.get_program())
                .args(c.get_args())
                .current_dir(sb.dir.path())
                .envs(c.get_envs().filter_map(|(k, v)| Some((k, v?))));
            common::ran(as_nobody.output().expect("setpriv (util-linux)"))
        } else {
            common::ran(c.output().unwrap())
        };
        r.assert_clean_failure();
        assert!(
            r.stdout.contains(&format!("unreadable {}", sub.display())),
            "{args:?}: {}\n{}",
            r.stdout,
            r.stderr
        );
    }
    std::fs::set_permissions(&sub, open).unwrap();
}

/// The folders (`dirs`) or the files under `dir`.
fn walk(dir: &std::path::Path, dirs: bool) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_dir() == dirs)
        .map(|e| e.into_path())
        .collect()
}
