//! `--json`: every command prints one JSON object whose `kind` field names its schema,
//! `schemas/<kind>.schema.json` in the repository (README, "JSON output"). Keys are camelCase,
//! numbers and booleans typed, a table or list under one named key. The object is indented when
//! stdout is a terminal and one compact line otherwise (a pipe, a file).

use serde_json::Value;
use std::io::IsTerminal;

/// Prints `body` (an object) with `kind` set on stdout.
pub fn print(kind: &'static str, body: Value) {
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
    let text = if std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(&object)
    } else {
        serde_json::to_string(&object)
    };
    println!("{}", text.unwrap_or_default());
}
