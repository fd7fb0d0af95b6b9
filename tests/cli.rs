//! What a user meets first: the version with the compiler fingerprint, help on every phase
//! subcommand, shell completions and the man page, suggestions for a misspelled preset, TOML errors
//! in their multi-line form, presets read as data, and the defaults of the keys a spec leaves out.

mod common;
use common::{SMALL, SMALL_ATTENTION, Sandbox};

#[test]
fn version_names_the_compiler_fingerprint() {
    let r = Sandbox::new().run(&["--version"]);
    r.assert_ok();
    let fingerprint = r
        .stdout
        .trim()
        .strip_prefix(concat!("ipu-codegen ", env!("CARGO_PKG_VERSION"), "+"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        fingerprint.len() == 16 && fingerprint.bytes().all(|b| b.is_ascii_hexdigit()),
        "{fingerprint}"
    );
}

#[test]
fn every_phase_subcommand_has_its_own_description() {
    let sb = Sandbox::new();
    for phase in ipu_codegen::driver::PIPELINE {
        let r = sb.run(&[&phase.command(), "--help"]);
        r.assert_ok();
        assert!(
            r.stdout.starts_with(phase.about()),
            "{}: {}",
            phase.name(),
            r.stdout
        );
    }
}

#[test]
fn completions_and_the_man_page_cover_every_subcommand() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let r = sb.run(&["completions", shell]);
        r.assert_ok();
        for sub in [
            "lower-mid",
            "build-images",
            "run",
            "report",
            "cache",
            "plans",
        ] {
            assert!(r.stdout.contains(sub), "{shell} lacks {sub}");
        }
    }
    // The bash script parses.
    let script = sb.path("ipu-codegen.bash");
    std::fs::write(&script, sb.run(&["completions", "bash"]).stdout).unwrap();
    let bash = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .expect("bash");
    assert!(bash.success());
    let man = sb.run(&["man"]);
    man.assert_ok();
    assert!(man.stdout.contains(".TH ipu-codegen 1"), "{}", man.stdout);
    for sub in ["lower\\-mid", "build\\-images", "completions", "cache"] {
        assert!(man.stdout.contains(sub), "the man page lacks {sub}");
    }
    sb.run(&["completions", "tcsh"]).assert_clean_failure();
}

#[test]
fn a_misspelled_preset_gets_the_closest_names() {
    let r = Sandbox::new().run(&["build", "siglip-mpl-small"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("did you mean `siglip-mlp-small`?"),
        "{}",
        r.stderr
    );
    let r = Sandbox::new().run(&["build", "nothing-like-any"]);
    r.assert_clean_failure();
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
}

#[test]
fn toml_errors_keep_their_line_and_caret() {
    let sb = Sandbox::new();
    std::fs::write(sb.path("w.toml"), "kind = \"mlp\"\ntokenz = 5\n").unwrap();
    let r = sb.run(&["build", "w.toml"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("line 2, column 1\n")
            && r.stderr.contains("\n2 | tokenz = 5\n")
            && r.stderr.contains("unknown field `tokenz`"),
        "{}",
        r.stderr
    );
}

#[test]
fn presets_are_data_an_edit_changes_only_its_own_builds() {
    let sb = Sandbox::new();
    let dir = sb.path("workloads");
    std::fs::create_dir(&dir).unwrap();
    for name in [SMALL, SMALL_ATTENTION] {
        let from = ipu_codegen::workload::preset_path(name).unwrap();
        std::fs::copy(from, dir.join(format!("{name}.toml"))).unwrap();
    }
    let build = |name: &str| {
        let mut c = sb.command(&["build", name]);
        c.env("IPU_CODEGEN_WORKLOADS", &dir);
        let r = common::ran(c.output().unwrap());
        r.assert_ok();
        r
    };
    build(SMALL);
    build(SMALL_ATTENTION);
    let small = dir.join(format!("{SMALL}.toml"));
    let text = std::fs::read_to_string(&small).unwrap();
    assert!(text.contains("tokens = 21"));
    std::fs::write(&small, text.replace("tokens = 21", "tokens = 22")).unwrap();
    assert!(build(SMALL_ATTENTION).phases_run().is_empty());
    let edited = build(SMALL);
    assert!(
        edited.stdout.starts_with("build=siglip-mlp-f16-b1-t22-"),
        "{}",
        edited.stdout
    );
    assert_eq!(edited.phases_run().len(), 7);
    // A preset of the user's own, by name.
    std::fs::write(
        dir.join("mine.toml"),
        text.replace("tokens = 21", "tokens = 9"),
    )
    .unwrap();
    assert!(
        build("mine")
            .stdout
            .starts_with("build=siglip-mlp-f16-b1-t9-")
    );
}

/// The keys a workload spec may leave out, each with its documented default as TOML writes it.
const DEFAULTS: [(&str, &str); 11] = [
    ("batch", "1"),
    ("blocks", "1"),
    ("layers", "1"),
    ("biases", "false"),
    ("causal", "false"),
    ("mask", "false"),
    ("gelu", "\"erf\""),
    ("epsilon", "1e-12"),
    ("dtype", "\"f16\""),
    ("partials", "\"f16\""),
    ("seed", "1"),
];

#[test]
fn a_preset_without_its_default_valued_keys_has_the_same_build_id() {
    let sb = Sandbox::new();
    for name in ipu_codegen::workload::presets() {
        let text = ipu_codegen::workload::preset_text(&name).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| {
                let (key, value) = line.split_once(" = ").unwrap_or_default();
                !DEFAULTS.contains(&(key, value))
            })
            .collect();
        assert!(
            kept.len() + 2 <= text.lines().count(),
            "{name}: too few keys at their defaults to test"
        );
        let file = sb.path(&format!("{name}.toml"));
        std::fs::write(&file, kept.join("\n")).unwrap();
        let full = sb.run(&["id", &name]);
        let stripped = sb.run(&["id", file.to_str().unwrap()]);
        full.assert_ok();
        stripped.assert_ok();
        assert_eq!(full.stdout, stripped.stdout, "{name} without {DEFAULTS:?}");
    }
}

#[test]
fn a_spec_of_only_its_required_keys_builds_and_a_missing_one_is_named() {
    let sb = Sandbox::new();
    for (text, id) in [
        (
            "kind = \"mlp\"\nname = \"m\"\ntokens = 4\ndimension = 8\nhidden = 16\n",
            "m-f16-b1-t4-d8-h16-n1\n",
        ),
        (
            "kind = \"attention\"\nname = \"a\"\ntokens = 4\nheads = 2\nhead_dim = 8\n",
            "a-f16-b1-t4-h2-d8\n",
        ),
        (
            "kind = \"encoder\"\nname = \"e\"\ntokens = 4\nhidden = 16\nheads = 2\nintermediate = 32\n",
            "e-f16-b1-t4-d16-h2-i32-l1\n",
        ),
    ] {
        std::fs::write(sb.path("w.toml"), text).unwrap();
        let r = sb.run(&["id", "w.toml"]);
        r.assert_ok();
        assert_eq!(r.stdout, id);
        // Each required key left out is named.
        for line in text.lines().skip(1) {
            let key = line.split(" = ").next().unwrap();
            std::fs::write(sb.path("w.toml"), text.replace(&format!("{line}\n"), "")).unwrap();
            let r = sb.run(&["id", "w.toml"]);
            r.assert_clean_failure();
            assert!(
                r.stderr.contains(&format!("missing field `{key}`")) && r.stderr.contains("w.toml"),
                "{key}: {}",
                r.stderr
            );
        }
    }
    std::fs::write(sb.path("w.toml"), "name = \"m\"\ntokens = 4\n").unwrap();
    let r = sb.run(&["id", "w.toml"]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("missing key `kind`"), "{}", r.stderr);
}

/// The `key=value` fields of a summary line, in order (values quoted when they hold spaces).
fn fields(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while let Some((key, tail)) = rest.split_once('=') {
        let (value, next) = if let Some(quoted) = tail.strip_prefix('"') {
            let end = quoted.find('"').unwrap();
            (quoted[..end].to_string(), &quoted[end + 1..])
        } else {
            let end = tail.find(' ').unwrap_or(tail.len());
            (tail[..end].to_string(), &tail[end..])
        };
        out.push((key.trim().to_string(), value));
        rest = next.trim_start();
    }
    out
}

#[test]
fn run_and_build_json_hold_the_same_fields_as_their_text() {
    let sb = Sandbox::new();
    let text = common::assert_pass(&sb, &["run", SMALL]);
    let json = sb.run(&["run", SMALL, "--json"]);
    json.assert_ok();
    let run: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(run["kind"], "run");
    let lines: Vec<&str> = text.lines().collect();
    let mut checks = run["checks"].as_array().unwrap().iter();
    let mut matched = vec![String::from("kind"), "checks".into(), "outputFiles".into()];
    for line in &lines {
        let fields = fields(line);
        // Each line's fields sit where the object keeps that line: the summary line under
        // `summary`, a check line in `checks`, the others at the top.
        let object = if fields.iter().any(|(k, _)| k == "workload") {
            matched.push("summary".into());
            run["summary"].as_object().unwrap()
        } else if fields
            .iter()
            .any(|(k, _)| k == "outputCheck" || k == "attentionNumericalChecks")
        {
            checks.next().unwrap().as_object().unwrap()
        } else {
            matched.extend(fields.iter().map(|(k, _)| k.clone()));
            run.as_object().unwrap()
        };
        for (key, value) in fields {
            let j = &object[&key];
            let as_text = j.as_str().map_or_else(|| j.to_string(), str::to_string);
            if key == "hostPeakMiB" {
                // Each process's own measurement: the same field, a number in both.
                assert!(j.is_number() && value.parse::<f64>().is_ok(), "{key}");
            } else if j.is_number() {
                // The same number (JSON drops trailing zeros: 0.060 is 0.06).
                assert_eq!(
                    as_text.parse::<f64>().unwrap(),
                    value.parse::<f64>().unwrap(),
                    "{key}"
                );
            } else {
                assert_eq!(as_text, value, "{key}");
            }
        }
    }
    assert!(checks.next().is_none(), "a check the text does not print");
    // Nothing in the object that no line prints.
    for key in run.as_object().unwrap().keys() {
        assert!(matched.contains(key), "{key} is in the JSON only");
    }
    assert_eq!(run["hardwareTest"], "PASS");
    assert_eq!(run["summary"]["biases"], true, "a boolean is typed");
    let build = sb.run(&["build", SMALL, "--json"]);
    build.assert_ok();
    let b: serde_json::Value = serde_json::from_str(&build.stdout).unwrap();
    let text = sb.run(&["build", SMALL]).assert_ok().stdout.clone();
    assert_eq!(b["phasesRun"], serde_json::json!([]));
    assert_eq!(b["kind"], "build");
    for (key, value) in fields(&text) {
        // The phase lists are lists in JSON.
        if !key.starts_with("phases") {
            assert_eq!(b[&key], serde_json::json!(value), "{key}");
        }
    }
}
