//! Every command's `--json` is one object whose `kind` names a schema in `schemas/`, and validates
//! against it: keys camelCase, booleans and numbers typed, one compact line on a pipe. The schemas
//! reject what they must (a snake_case key, a number as a string, a missing `kind`), so a check here
//! can fail.

mod common;

use common::{SMALL, SMALL_ATTENTION, Sandbox};
use serde_json::Value;
use std::path::PathBuf;

/// The schema of `kind`, from the repository's `schemas/`.
fn schema(kind: &str) -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{kind}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The problems validating `doc` against the schema of `kind` finds (none for a valid one).
fn problems(kind: &str, doc: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&schema(kind)).expect("the schema compiles");
    validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Every key of `v`, at any depth, that is not camelCase, except the values of `sweep`'s axes,
/// which are keyed by the flags' own names.
fn not_camel_case(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let camel = k.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && k.chars().all(|c| c.is_ascii_alphanumeric());
                if !camel {
                    out.push(k.clone());
                }
                not_camel_case(x, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| not_camel_case(x, out)),
        _ => {}
    }
}

/// Runs `args` (which include `--json`), and checks its stdout is one line holding one object of
/// `kind` that validates against the kind's schema, with camelCase keys; returns the object.
fn checked(sb: &Sandbox, kind: &str, args: &[&str]) -> Value {
    let r = sb.run(args);
    r.assert_ok();
    assert_eq!(
        r.stdout.trim_end().lines().count(),
        1,
        "{args:?}: not one compact line on a pipe:\n{}",
        r.stdout
    );
    let doc: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{}", r.stdout));
    assert_eq!(doc["kind"], kind, "{args:?}");
    let found = problems(kind, &doc);
    assert!(found.is_empty(), "{args:?} against {kind}:\n{found:#?}");
    let mut keys = Vec::new();
    not_camel_case(&doc, &mut keys);
    assert!(keys.is_empty(), "{args:?}: keys not camelCase: {keys:?}");
    doc
}

#[test]
fn every_command_prints_json_its_schema_accepts() {
    let sb = Sandbox::new();
    let mut seen = Vec::new();
    let mut check = |kind: &'static str, args: &[&str]| {
        seen.push(kind);
        checked(&sb, kind, args)
    };
    check("build", &["build", SMALL, "--json"]);
    let run = check("run", &["run", SMALL, "--json", "--output-dir", "out"]);
    assert_eq!(run["outputFiles"].as_array().map(Vec::len), Some(1));
    check("run", &["run", SMALL_ATTENTION, "--json"]);
    let plans = check("plans", &["plans", SMALL, "--json", "--top", "2"]);
    assert!(plans["layers"].is_null(), "one block repeats nothing");
    // An encoder's layers, planned alike: an embeddings' layer norm, then two layers of seven.
    let plans = check(
        "plans",
        &["plans", "bert-encoder-small", "--json", "--top", "1"],
    );
    let layers = &plans["layers"];
    assert_eq!(
        [
            &layers["start"],
            &layers["end"],
            &layers["count"],
            &layers["period"]
        ],
        [1, 15, 2, 7],
        "{plans}"
    );
    let profile = run["profile"].as_str().unwrap().to_string();
    check("report", &["report", &profile, "--json"]);
    check(
        "sweep",
        &["sweep", SMALL, "--vary", "tokens=21,30", "--json"],
    );
    let part = check(
        "sweep",
        &[
            "sweep",
            SMALL,
            "--vary",
            "tokens=21,30",
            "--shard",
            "1/2",
            "--json",
        ],
    );
    assert_eq!(part["shard"]["index"], 1);
    let other = check("run", &["run", SMALL, "--tokens", "30", "--json"]);
    let other = other["profile"].as_str().unwrap().to_string();
    check("reportCompare", &["report", &profile, &other, "--json"]);
    check("calibrate", &["calibrate", "--json"]);
    check(
        "calibrateSensitivity",
        &["calibrate", "--sensitivity", "--workload", SMALL, "--json"],
    );
    check(
        "benchBuild",
        &["bench", "build", SMALL, "--runs", "1", "--json"],
    );
    check(
        "benchExchange",
        &["bench", "exchange", SMALL, "--synthetic-only", "--json"],
    );
    let encoder = common::test_model("encoder.onnx");
    let mut import = common::import_args(&encoder, "out/encoder.toml");
    import.push("--json");
    check("import", &import);
    check("cacheLs", &["cache", "ls", "--json"]);
    check("cacheStats", &["cache", "stats", "--json"]);
    check("cacheVerify", &["cache", "verify", "--json"]);
    check("cacheGc", &["cache", "gc", "--json"]);
    // Every schema in the repository is one a command prints.
    let mut files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    seen.sort();
    seen.dedup();
    let expected: Vec<String> = seen.iter().map(|k| format!("{k}.schema.json")).collect();
    assert_eq!(
        files, expected,
        "a schema no command prints, or a kind without one"
    );
}

#[test]
fn the_schemas_reject_what_the_json_must_not_be() {
    let sb = Sandbox::new();
    let good = checked(&sb, "cacheStats", &["cache", "stats", "--json"]);
    let mutated = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut doc = good.clone();
        f(doc.as_object_mut().unwrap());
        doc
    };
    let cases = [
        (
            "a snake_case key",
            mutated(&|m| {
                let v = m.remove("tempFiles").unwrap();
                m.insert("temp_files".into(), v);
            }),
        ),
        (
            "a number as a string",
            mutated(&|m| {
                m.insert("objects".into(), Value::String("3".into()));
            }),
        ),
        (
            "no kind",
            mutated(&|m| {
                m.remove("kind");
            }),
        ),
        (
            "another kind",
            mutated(&|m| {
                m.insert("kind".into(), Value::String("cacheGc".into()));
            }),
        ),
    ];
    for (what, doc) in cases {
        assert!(
            !problems("cacheStats", &doc).is_empty(),
            "the schema accepts {what}: {doc}"
        );
    }
    // A run whose verdict is no verdict, or whose boolean parameter is a string.
    let run = checked(&sb, "run", &["run", SMALL, "--json"]);
    let mut bad = run.clone();
    bad["hardwareTest"] = Value::String("OK".into());
    assert!(!problems("run", &bad).is_empty(), "a verdict of OK passes");
    let mut bad = run;
    bad["summary"]["cycles"] = Value::String("5064".into());
    assert!(!problems("run", &bad).is_empty(), "cycles as a string pass");
}

#[test]
fn json_on_a_terminal_is_indented_skipped_without_script() {
    let present = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok();
    if common::skip_without("`script` (util-linux)", present) {
        return;
    }
    let sb = Sandbox::new();
    let binary = env!("CARGO_BIN_EXE_ipu-codegen");
    let cache = sb.cache();
    let line = format!(
        "'{binary}' --cache '{}' cache stats --json",
        cache.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qfc", &line, "/dev/null"])
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let lines: Vec<&str> = shown.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() > 3, "not indented on a terminal:\n{shown}");
    let doc: Value = serde_json::from_str(&shown.replace('\r', "")).expect("one JSON object");
    assert_eq!(doc["kind"], "cacheStats");
}
