//! Fault injection: builds and runs killed at random points, and random damage to objects, action
//! entries, stage records and packages, including files swapped between builds. Every trial must end
//! in a clean recovery or a clean error that a repair recovers from: never a panic, never a hang,
//! never a PASS for a package other than the one asked for. Each test prints its tally.

mod common;
use common::{Rng, SMALL, Sandbox};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Starts `args`, kills it with SIGKILL after `delay` unless it ended first; whether it was killed.
fn kill_after(sb: &Sandbox, args: &[&str], delay: Duration) -> bool {
    let mut child = sb
        .command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while started.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    true
}

/// `run` of the small MLP at `tokens` passes and says it ran `tokens` tokens.
fn passes(sb: &Sandbox, tokens: &str) {
    let stdout = common::assert_pass(sb, &["run", SMALL, "--tokens", tokens]);
    assert!(stdout.contains(&format!(" tokens={tokens} ")), "{stdout}");
}

#[test]
fn builds_and_runs_killed_at_random_points_recover() {
    let sb = Sandbox::new();
    let mut rng = Rng(0x1ab);
    let (mut killed, mut finished) = (0, 0);
    for trial in 0..14u64 {
        // A cold build each time: a shape not built before.
        let tokens = (21 + trial).to_string();
        let delay = Duration::from_millis(rng.below(250) as u64);
        if kill_after(&sb, &["build", SMALL, "--tokens", &tokens], delay) {
            killed += 1;
        } else {
            finished += 1;
        }
        sb.run(&["cache", "verify"]).assert_ok();
        passes(&sb, &tokens);
    }
    let (mut run_killed, mut run_finished) = (0, 0);
    for _ in 0..8 {
        let delay = Duration::from_millis(rng.below(200) as u64);
        if kill_after(&sb, &["run", SMALL, "--lock-timeout", "5"], delay) {
            run_killed += 1;
        } else {
            run_finished += 1;
        }
        // The device lock does not outlive its holder; the profile is whole.
        passes(&sb, "21");
        let profile = sb
            .stages()
            .join(common::SMALL_ID)
            .join("execution.ipuprofile");
        sb.run(&["report", profile.to_str().unwrap()]).assert_ok();
    }
    sb.run(&["cache", "verify"]).assert_ok();
    eprintln!(
        "SIGKILL: build 14 trials ({killed} killed, {finished} finished first), run 8 trials \
         ({run_killed} killed, {run_finished} finished first); 22 clean recoveries, 0 panics, \
         0 hangs, 0 wrong results"
    );
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    for f in files(from) {
        let dest = to.join(f.strip_prefix(from).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&f, dest).unwrap();
    }
}

/// The files a damage trial may hit, by class.
fn targets(sb: &Sandbox) -> Vec<(&'static str, PathBuf)> {
    let mut all = Vec::new();
    for f in files(&sb.cache().join("objects")) {
        all.push(("object", f));
    }
    for f in files(&sb.cache().join("actions")) {
        all.push(("action entry", f));
    }
    for f in files(&sb.stages()) {
        let class = match f.extension().and_then(|e| e.to_str()) {
            Some("json") => "stage record",
            Some("ipuexe") => "package",
            _ => continue,
        };
        all.push((class, f));
    }
    all
}

#[test]
fn random_damage_to_stored_files_is_recovered_or_refused_and_repaired() {
    // Two builds, 21 and 30 tokens, as every trial starts from them.
    let pristine = Sandbox::new();
    pristine.run(&["build", SMALL]).assert_ok();
    pristine
        .run(&["build", SMALL, "--tokens", "30"])
        .assert_ok();
    let mut rng = Rng(0xda3a9e);
    let mut tally = std::collections::BTreeMap::<(&str, &str), (u32, u32)>::new();
    let kinds = ["flip", "truncate", "empty", "delete", "garbage", "swap"];
    for trial in 0..40 {
        let sb = Sandbox::new();
        copy_tree(&pristine.cache(), &sb.cache());
        copy_tree(&pristine.stages(), &sb.stages());
        let all = targets(&sb);
        let class = ["object", "action entry", "stage record", "package"][trial % 4];
        let of_class: Vec<&PathBuf> = all
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, p)| p)
            .collect();
        let path = of_class[rng.below(of_class.len())].clone();
        let kind = kinds[(trial / 4) % kinds.len()];
        let mut bytes = std::fs::read(&path).unwrap();
        match kind {
            "flip" => {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
                std::fs::write(&path, bytes).unwrap();
            }
            "truncate" => std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap(),
            "empty" => std::fs::write(&path, b"").unwrap(),
            "delete" => std::fs::remove_file(&path).unwrap(),
            "garbage" => std::fs::write(&path, b"\x93\xa4junk{}\xff").unwrap(),
            _ => {
                // Another file of the same class, from either build.
                let same: Vec<&PathBuf> = all
                    .iter()
                    .filter(|(c, p)| *c == class && *p != path)
                    .map(|(_, p)| p)
                    .collect();
                let other = same[rng.below(same.len())];
                std::fs::copy(other, &path).unwrap();
            }
        }
        // Either build's run, or a rerun of its later phases: a PASS must be for what was asked.
        let tokens = if rng.below(2) == 0 { "21" } else { "30" };
        let from = ipu_codegen::driver::PIPELINE[rng.below(7)].name();
        let first = if rng.below(3) == 0 {
            sb.run(&["build", SMALL, "--tokens", tokens, "--from", from])
        } else {
            sb.run(&["run", SMALL, "--tokens", tokens])
        };
        assert!(
            !first.stderr.contains("panicked"),
            "trial {trial}: {kind} of {}: {}",
            path.display(),
            first.stderr
        );
        let entry = tally.entry((class, kind)).or_default();
        if first.status.success() {
            passes(&sb, tokens);
            entry.0 += 1;
        } else {
            // A clean error, which a repair and a rebuild recover from.
            entry.1 += 1;
            sb.run(&["cache", "verify", "--repair"]).assert_ok();
            passes(&sb, tokens);
        }
        // The other build recovers too, and what neither build used a repair removes.
        passes(&sb, if tokens == "21" { "30" } else { "21" });
        sb.run(&["cache", "verify", "--repair"]).assert_ok();
        sb.run(&["cache", "verify"]).assert_ok();
    }
    for ((class, kind), (recovered, refused)) in &tally {
        eprintln!(
            "damage: {class} {kind}: {} trials, {recovered} recovered, {refused} refused then \
             repaired, 0 panics, 0 wrong results",
            recovered + refused
        );
    }
}
