//! `--json`: every command prints one JSON object whose `kind` field names its schema,
//! `schemas/<kind>.schema.json` in the repository (README, "JSON output"). Keys are camelCase,
//! numbers and booleans typed, a table or list under one named key. The object is indented when
//! stdout is a terminal and one compact line otherwise (a pipe, a file).

use serde_json::Value;
use std::io::IsTerminal;

/// Every kind of `--json` document: the schema file of each is `schemas/<kind>.schema.json`.
pub const KINDS: [&str; 15] = [
    "benchBuild",
    "benchExchange",
    "build",
    "cacheGc",
    "cacheLs",
    "cacheStats",
    "cacheVerify",
    "calibrate",
    "calibrateSensitivity",
    "import",
    "plans",
    "report",
    "reportCompare",
    "run",
    "sweep",
];

/// `body` (an object) with `kind` set, as the text printed on stdout (no trailing newline).
pub fn document(kind: &'static str, body: Value) -> String {
    debug_assert!(KINDS.contains(&kind), "{kind} has no schema");
    let mut object = match body {
        Value::Object(map) => map,
        other => {
            let mut map = serde_json::Map::new();
            map.insert("value".into(), other);
            map
        }
    };
    object.insert("kind".into(), Value::String(kind.into()));
    let object = Value::Object(object);
    if std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(&object)
    } else {
        serde_json::to_string(&object)
    }
    .unwrap_or_default()
}

/// Prints [`document`] on stdout.
pub fn print(kind: &'static str, body: Value) {
    println!("{}", document(kind, body));
}
