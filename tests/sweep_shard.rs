//! Sharded sweeps: `--shard I/N` parts merged with `--merge` give the unsharded sweep's rows in every
//! output form; a merge of parts that are not one sweep's, every shard once, is an error naming the
//! file; a bad `--shard` is refused before anything is built.

mod common;
use common::Sandbox;

const GRID: [&str; 6] = [
    "sweep",
    "siglip-mlp-small",
    "--vary",
    "tokens=21,30,40",
    "--vary",
    "partials=f16,f32",
];

/// Runs shard `i` of `n` of [`GRID`] with its own stages folder; the part's path.
fn shard(sb: &Sandbox, i: usize, n: usize) -> String {
    let stages = format!("stages-{i}");
    let part = format!("part-{i}-of-{n}.json");
    let spec = format!("{i}/{n}");
    let mut args = GRID.to_vec();
    args.extend(["--shard", &spec, "--json", "--stages", &stages]);
    let r = sb.run(&args);
    r.assert_ok();
    std::fs::write(sb.path(&part), &r.stdout).unwrap();
    part
}

#[test]
fn three_shards_merged_are_the_unsharded_sweep_in_every_form() {
    let sb = Sandbox::new();
    let parts: Vec<String> = (0..3).map(|i| shard(&sb, i, 3)).collect();
    for (i, part) in parts.iter().enumerate() {
        let p: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sb.path(part)).unwrap()).unwrap();
        assert_eq!(
            p["rows"].as_array().unwrap().len(),
            2,
            "shard {i} has 2 of 6 points"
        );
        assert_eq!(p["shard"]["index"], i);
    }
    let mut whole = GRID.to_vec();
    whole.extend(["--csv", "whole.csv", "--html", "whole.html"]);
    let table = sb.run(&whole);
    table.assert_ok();
    let mut whole_json = GRID.to_vec();
    whole_json.push("--json");
    let json = sb.run(&whole_json);
    json.assert_ok();

    // Parts in any order.
    let mut merge = vec!["sweep", "--merge", &parts[2], &parts[0], &parts[1]];
    let merged_json = sb.run(&[merge.clone(), vec!["--json"]].concat());
    assert_eq!(merged_json.assert_ok().stdout, json.stdout);
    merge.extend(["--csv", "merged.csv", "--html", "merged.html"]);
    let merged = sb.run(&merge);
    merged.assert_ok();
    let announced = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| !l.contains(".csv") && !l.contains(".html"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(announced(&merged.stdout), announced(&table.stdout));
    for (a, b) in [("whole.csv", "merged.csv"), ("whole.html", "merged.html")] {
        assert_eq!(
            std::fs::read_to_string(sb.path(a)).unwrap(),
            std::fs::read_to_string(sb.path(b)).unwrap(),
            "{a} and {b}"
        );
    }
    // One shard of one is the whole sweep, as a part.
    let one = shard(&sb, 0, 1);
    let r = sb.run(&["sweep", "--merge", &one, "--json"]);
    assert_eq!(r.assert_ok().stdout, json.stdout);
}

#[test]
fn a_merge_of_parts_that_are_not_one_sweep_every_shard_once_names_the_file() {
    let sb = Sandbox::new();
    let parts: Vec<String> = (0..3).map(|i| shard(&sb, i, 3)).collect();
    let two = shard(&sb, 1, 2);
    let other = sb.run(&[
        "sweep",
        "siglip-mlp-small",
        "--vary",
        "tokens=21,30",
        "--shard",
        "0/3",
        "--json",
    ]);
    std::fs::write(sb.path("other.json"), &other.assert_ok().stdout).unwrap();
    let whole = sb.run(&[GRID.as_slice(), &["--json"]].concat());
    std::fs::write(sb.path("whole.json"), &whole.assert_ok().stdout).unwrap();
    let mut tampered: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path(&parts[1])).unwrap()).unwrap();
    tampered["rows"][0]["tokens"] = serde_json::json!(40);
    std::fs::write(sb.path("tampered.json"), tampered.to_string()).unwrap();
    std::fs::write(sb.path("text.json"), "tokens partials\n").unwrap();
    for (given, says) in [
        (vec![&parts[0], &parts[1]], "lack shard 2/3"),
        (
            vec![&parts[0], &parts[1], &parts[1], &parts[2]],
            "are both shard 1/3",
        ),
        (
            vec![&parts[0], &two],
            "part-1-of-2.json is a part of the sweep of siglip-mlp-small over tokens=21,30,40 partials=f16,f32 in 2 shards, where part-0-of-3.json is a part of the sweep of siglip-mlp-small over tokens=21,30,40 partials=f16,f32 in 3 shards",
        ),
        (
            vec![&parts[0], &"other.json".to_string()],
            "other.json is a part of the sweep of siglip-mlp-small over tokens=21,30 in 3 shards",
        ),
        (
            vec![&"whole.json".to_string()],
            "whole.json is not a sweep part",
        ),
        (
            vec![&parts[0], &"tampered.json".to_string(), &parts[2]],
            "tampered.json is not a sweep part (`sweep … --shard I/N --json`): row 0: it is point (tokens=40 partials=f32), where the shard's row here is point (tokens=21 partials=f32)",
        ),
        (vec![&"text.json".to_string()], "text.json is not JSON"),
        (vec![&"missing.json".to_string()], "missing.json"),
    ] {
        let mut args = vec!["sweep", "--merge"];
        args.extend(given.iter().map(|s| s.as_str()));
        let r = sb.run(&args);
        r.assert_clean_failure();
        assert!(r.stderr.contains(says), "{given:?}: {}", r.stderr);
    }
}

#[test]
fn a_bad_shard_is_refused_before_anything_is_built() {
    let sb = Sandbox::new();
    for (shard, says) in [
        ("3/3", "the shard index must be below the count (0 to 2)"),
        ("0/0", "the shard count must be at least 1"),
        ("x/2", "expected I/N"),
    ] {
        let r = sb.run(&[GRID.as_slice(), &["--shard", shard, "--json"]].concat());
        r.assert_clean_failure();
        assert!(r.stderr.contains(says), "{shard}: {}", r.stderr);
    }
    let r = sb.run(&[GRID.as_slice(), &["--shard", "0/2"]].concat());
    r.assert_clean_failure();
    assert!(r.stderr.contains("--json"), "{}", r.stderr);
    assert!(!sb.cache().exists(), "nothing was built");
}
