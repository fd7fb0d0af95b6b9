//! The dependency rule, read off the sources: a phase depends only on the IR, the ISA, the lowering,
//! the target, the exchange model, numerics, the store and progress, never on another phase; only the
//! driver depends on phases; the ISA is a leaf (ids and element types only), and so is progress (on
//! nothing); the device depends only on the ISA, the IR, the target, numerics and progress; and the
//! library's modules form no circle, neither file by file nor between top-level modules.
//!
//! Each library file is a module (`src/a/b.rs` is `a::b`). Its dependencies are the modules its
//! `crate::` and `super::` paths name, outside comments and `#[cfg(test)]` code; a name a module re-exports with
//! `pub use child::*` is taken to the child that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's files: its path (`exchange::schedule`) and its source, test code cut off.
type Sources = BTreeMap<String, String>;

fn module_of(relative: &str) -> Option<String> {
    let path = relative.strip_suffix(".rs")?;
    if path == "lib" || path == "main" || path.starts_with("bin/") || path.starts_with("cli") {
        return None;
    }
    let path = path.strip_suffix("/mod").unwrap_or(path);
    Some(path.replace('/', "::"))
}

/// The code of a source: comments and the items marked `#[cfg(test)]` (a `mod tests;` line or a
/// braced item) cut off; a doc link is not a dependency.
fn without_tests(source: &str) -> String {
    let code: String = source
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut kept = String::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => semi + 1,
            (Some(semi), None) => semi + 1,
            (_, Some(brace)) => brace + 1 + matching_brace(&item[brace + 1..]) + 1,
            (None, None) => item.len(),
        };
        rest = &item[end.min(item.len())..];
    }
    kept.push_str(rest);
    kept
}

fn library_sources() -> Sources {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Sources::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.expect("src is readable");
        let relative = entry.path().strip_prefix(&src).expect("under src");
        let relative = relative.to_string_lossy().replace('\\', "/");
        if let Some(module) = module_of(&relative) {
            let text = std::fs::read_to_string(entry.path()).expect("source is text");
            sources.insert(module, without_tests(&text));
        }
    }
    sources
}

/// Items a module defines at its top level (`pub struct Name`, `pub fn name`, ...).
fn defines(source: &str, name: &str) -> bool {
    source.lines().any(|line| {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        line.starts_with("pub ")
            && words.windows(2).any(|w| {
                matches!(
                    w[0],
                    "struct" | "enum" | "fn" | "const" | "static" | "type" | "trait"
                ) && w[1] == name
            })
    })
}

/// The module a path names: the deepest module along it, following glob re-exports to the child that
/// defines the item.
fn resolve(sources: &Sources, start: &str, segments: &[&str]) -> Option<String> {
    let mut module = start.to_string();
    for segment in segments {
        let child = if module.is_empty() {
            segment.to_string()
        } else {
            format!("{module}::{segment}")
        };
        if sources.contains_key(&child) {
            module = child;
            continue;
        }
        let prefix = format!("{module}::");
        let parent = sources.get(&module).map_or("", String::as_str);
        let exported = sources.iter().find(|(m, text)| {
            let Some(child) = m.strip_prefix(&prefix).filter(|rest| !rest.contains("::")) else {
                return false;
            };
            let glob = parent.contains(&format!("pub use {child}::*;")) && defines(text, segment);
            glob || re_exports(parent, child, segment)
        });
        if let Some((m, _)) = exported {
            module = m.clone();
        }
        break;
    }
    (!module.is_empty()).then_some(module)
}

/// Whether `source` re-exports `name` from its child module `child` by name
/// (`pub use child::name;`, `pub use child::{a, name};`).
fn re_exports(source: &str, child: &str, name: &str) -> bool {
    let statement = format!("pub use {child}::");
    source.match_indices(&statement).any(|(at, _)| {
        let rest = &source[at + statement.len()..];
        let body = &rest[..rest.find(';').unwrap_or(rest.len())];
        body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word == name)
    })
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

/// Every path a source names: `crate::a::b::{c, d::e}` gives `[a, b, c]` and `[a, b, d, e]`, and
/// `super::x` is taken from the parent module.
fn paths(module: &str, source: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    for (root, start) in [
        ("crate::", String::new()),
        ("super::", parent(module).to_string()),
    ] {
        let mut rest = source;
        while let Some(at) = rest.find(root) {
            let before = rest[..at].chars().last();
            rest = &rest[at + root.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // `super::super::x` climbs once per `super`.
            let (mut from, mut path) = (start.clone(), rest);
            while let Some(after) = path.strip_prefix("super::") {
                from = parent(&from).to_string();
                path = after;
            }
            expand(&from, Vec::new(), path, &mut found);
        }
    }
    found
}

/// Reads `a::b::{c, d::e}` at the start of `text` into full paths.
fn expand(start: &str, prefix: Vec<String>, text: &str, found: &mut Vec<(String, Vec<String>)>) {
    let mut path = prefix;
    let mut rest = text;
    loop {
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if word.is_empty() {
            if let Some(inner) = rest.strip_prefix('{') {
                let end = matching_brace(inner);
                for part in split_top(&inner[..end]) {
                    expand(start, path.clone(), part.trim(), found);
                }
                return;
            }
            break;
        }
        path.push(word.clone());
        rest = &rest[word.len()..];
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => break,
        }
    }
    if !path.is_empty() {
        found.push((start.to_string(), path));
    }
}

fn matching_brace(text: &str) -> usize {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    text.len()
}

fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut from) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[from..]);
    parts
}

/// Each module's dependencies on other modules (a module's own children and ancestors excluded).
fn graph(sources: &Sources) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (module, source) in sources {
        let mut to = BTreeSet::new();
        for (start, path) in paths(module, source) {
            let segments: Vec<&str> = path.iter().map(String::as_str).collect();
            if let Some(target) = resolve(sources, &start, &segments) {
                let related = target == *module
                    || module.starts_with(&format!("{target}::"))
                    || target.starts_with(&format!("{module}::"));
                if !related {
                    to.insert(target);
                }
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// What a phase may depend on besides its own modules.
const PHASE_MAY_USE: [&str; 10] = [
    "ir", "isa", "lowering", "target", "exchange", "numerics", "store", "verify", "ids", "progress",
];

/// What the device may depend on besides itself.
const DEVICE_MAY_USE: [&str; 7] = [
    "device", "isa", "ir", "target", "numerics", "ids", "progress",
];

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

fn phase(module: &str) -> Option<&str> {
    let mut parts = module.split("::");
    (parts.next() == Some("stages"))
        .then(|| parts.next())
        .flatten()
}

/// Every breach of the rule, as readable lines.
fn breaches(sources: &Sources) -> Vec<String> {
    let edges = graph(sources);
    let mut found = Vec::new();
    for (from, targets) in &edges {
        for to in targets {
            let breach = match (phase(from), phase(to)) {
                (Some(a), Some(b)) if a != b => Some("a phase depends on another phase"),
                (Some(_), None) if !PHASE_MAY_USE.contains(&top(to)) => Some(
                    "a phase depends only on the IR, the ISA, the lowering, the target, the exchange \
                     model, numerics, the store and progress",
                ),
                (None, Some(_)) if top(from) != "driver" => {
                    Some("only the driver depends on a phase")
                }
                _ if top(from) == "isa" && !["isa", "ids", "elements"].contains(&top(to)) => {
                    Some("the ISA is a leaf: it depends only on ids and element types")
                }
                _ if top(from) == "device" && !DEVICE_MAY_USE.contains(&top(to)) => Some(
                    "the device depends only on the ISA, the IR, the target, numerics and \
                         progress",
                ),
                _ if top(from) == "progress" && top(to) != "progress" => {
                    Some("progress is a leaf: it depends on nothing")
                }
                _ => None,
            };
            if let Some(why) = breach {
                found.push(format!("{from} -> {to}: {why}"));
            }
        }
    }
    found.extend(circles(&edges));
    // The same between top-level modules (a phase counts as its own).
    let node = |m: &str| match phase(m) {
        Some(p) => format!("stages::{p}"),
        None => top(m).to_string(),
    };
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &edges {
        let here = node(from);
        let there: BTreeSet<String> = targets.iter().map(|t| node(t)).collect();
        tops.entry(here.clone())
            .or_default()
            .extend(there.into_iter().filter(|t| *t != here));
    }
    found.extend(circles(&tops).into_iter().map(|c| format!("top-level {c}")));
    found
}

/// One line per circle of modules found by depth-first search.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        found: &mut Vec<String>,
    ) {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|m| m == next).unwrap_or(0);
                    let mut circle = stack[at..].to_vec();
                    circle.push(next.clone());
                    found.push(format!("circle: {}", circle.join(" -> ")));
                }
                Some(_) => {}
                None => visit(next, edges, state, stack, found),
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
    }
    let (mut state, mut found) = (BTreeMap::new(), Vec::new());
    for node in edges.keys() {
        if !state.contains_key(node) {
            visit(node, edges, &mut state, &mut Vec::new(), &mut found);
        }
    }
    found
}

#[test]
fn the_library_keeps_the_dependency_rule() {
    let sources = library_sources();
    for expected in ["ir", "isa", "device", "stages::emit", "lowering"] {
        assert!(
            sources.contains_key(expected),
            "module {expected} not found"
        );
    }
    let found = breaches(&sources);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_graph_sees_the_phases_dependencies() {
    let edges = graph(&library_sources());
    let emit = &edges["stages::emit"];
    assert!(emit.contains("lowering"), "emit -> lowering: {emit:?}");
    assert!(
        emit.contains("ir::placement"),
        "re-export resolved: {emit:?}"
    );
    assert!(edges["isa"].contains("elements"), "{:?}", edges["isa"]);
    let phases = &edges["driver::phases"];
    assert!(phases.contains("stages::emit"), "{phases:?}");
}

fn crafted(files: &[(&str, &str)]) -> Sources {
    files
        .iter()
        .map(|(m, s)| (m.to_string(), s.to_string()))
        .collect()
}

#[test]
fn a_phase_importing_another_phase_breaks_the_rule() {
    let sources = crafted(&[
        ("stages", "pub mod emit;\npub mod place_storage;\n"),
        ("stages::emit", "pub fn tile_programs() {}\n"),
        (
            "stages::place_storage",
            "use crate::stages::emit::tile_programs;\n",
        ),
    ]);
    let found = breaches(&sources);
    assert_eq!(
        found,
        ["stages::place_storage -> stages::emit: a phase depends on another phase"]
    );
}

#[test]
fn the_device_importing_a_phase_breaks_the_rule() {
    let sources = crafted(&[
        ("stages", "pub mod build_images;\n"),
        ("stages::build_images", "pub struct Package;\n"),
        (
            "device",
            "use crate::{isa::Instr, stages::build_images::Package};\n",
        ),
        ("isa", "pub enum Instr {}\n"),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(found.contains("device -> stages::build_images"), "{found}");
}

#[test]
fn a_circle_through_a_re_export_breaks_the_rule() {
    let sources = crafted(&[
        (
            "ir",
            "pub mod graph;\npub mod program;\npub use graph::*;\npub use program::*;\n",
        ),
        ("ir::graph", "use crate::ir::Selected;\npub struct Graph;\n"),
        ("ir::program", "use super::Graph;\npub struct Selected;\n"),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(
        found.contains("circle: ir::graph -> ir::program -> ir::graph"),
        "{found}"
    );
}

#[test]
fn test_code_and_comments_are_not_dependencies() {
    let source = without_tests(
        "use crate::isa::Instr; // see crate::stages\n#[cfg(test)]\nmod tests { use crate::device; }\n",
    );
    assert!(source.contains("isa"), "{source}");
    assert!(
        !source.contains("device") && !source.contains("stages"),
        "{source}"
    );
}

#[test]
fn code_after_a_test_module_declaration_still_counts() {
    let source = without_tests(
        "#[cfg(test)]\nmod tests;\nuse crate::stages::emit;\n#[cfg(test)]\nmod more { use crate::device; }\nuse crate::isa;\n",
    );
    assert!(
        source.contains("stages::emit") && source.contains("crate::isa"),
        "{source}"
    );
    assert!(!source.contains("device"), "{source}");
}

#[test]
fn a_phase_reaching_a_sibling_through_super_super_breaks_the_rule() {
    let sources = crafted(&[
        ("stages", "pub mod emit;\npub mod select_finalist;\n"),
        ("stages::emit", "pub fn emit() {}\n"),
        ("stages::select_finalist", "mod matmul;\n"),
        (
            "stages::select_finalist::matmul",
            "use super::super::emit::emit;\n",
        ),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(
        found.contains(
            "stages::select_finalist::matmul -> stages::emit: a phase depends on another phase"
        ),
        "{found}"
    );
}

#[test]
fn a_circle_through_a_named_re_export_breaks_the_rule() {
    let sources = crafted(&[
        ("driver", "mod phases;\npub use phases::{PHASES, Phase};\n"),
        (
            "driver::phases",
            "use crate::pipeline::Kind;\npub static PHASES: [u8; 0] = [];\npub struct Phase;\n",
        ),
        ("pipeline", "use crate::driver::PHASES;\npub struct Kind;\n"),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(
        found.contains("circle: driver::phases -> pipeline -> driver::phases"),
        "{found}"
    );
}

#[test]
fn a_phase_using_the_device_or_the_isa_using_the_ir_breaks_the_rule() {
    let sources = crafted(&[
        ("stages", "pub mod emit;\n"),
        ("stages::emit", "use crate::device::Device;\n"),
        ("device", "pub struct Device;\n"),
        ("isa", "use crate::ir::Graph;\n"),
        ("ir", "pub struct Graph;\n"),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(
        found.contains("stages::emit -> device: a phase depends only on"),
        "{found}"
    );
    assert!(found.contains("isa -> ir: the ISA is a leaf"), "{found}");
}

#[test]
fn a_circle_between_top_level_modules_breaks_the_rule() {
    let sources = crafted(&[
        ("ir", "pub mod program;\n"),
        (
            "ir::program",
            "use crate::exchange::Pattern;\npub struct Selected;\n",
        ),
        (
            "exchange",
            "use crate::numerics::Rng;\npub struct Pattern;\n",
        ),
        (
            "numerics",
            "use crate::ir::program::Selected;\npub struct Rng;\n",
        ),
    ]);
    let found = breaches(&sources).join("\n");
    assert!(found.contains("top-level circle:"), "{found}");
}
