//! The device times what it executes from its own mechanisms and from published figures, never from
//! the compiler's estimate: no function of `src/target.rs` or `src/target/` that computes cycles,
//! operations, passes, grains or words is called from `src/device/`. Read off the sources; the
//! device may read the target's hardware parameters (its fields) and its facts about memory.

use std::collections::BTreeSet;
use std::path::Path;

/// The target's functions that compute costs: `pub fn` items whose names speak of cycles,
/// operations, passes, grains or words.
fn cost_functions(root: &Path) -> BTreeSet<String> {
    let mut files = vec![root.join("src/target.rs")];
    for entry in std::fs::read_dir(root.join("src/target")).expect("src/target") {
        files.push(entry.expect("entry").path());
    }
    let mut names = BTreeSet::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("readable");
        for line in source.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if ["cycles", "ops", "passes", "grains", "words"]
                .iter()
                .any(|w| name.contains(w))
            {
                names.insert(name);
            }
        }
    }
    names
}

/// Every `(file, function)` where a device source names one of `functions` as a call.
fn calls(root: &Path, functions: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.join("src/device")];
    let mut files = vec![root.join("src/device.rs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for file in files.into_iter().filter(|f| f.exists()) {
        let source = std::fs::read_to_string(&file).expect("readable");
        let code: Vec<&str> = source
            .lines()
            .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        let code = code.join("\n");
        for f in functions {
            let called = code.contains(&format!(".{f}("))
                || code.contains(&format!("::{f}("))
                || code
                    .lines()
                    .any(|l| l.contains("use crate::target") && l.contains(f.as_str()));
            if called {
                found.push((file.display().to_string(), f.clone()));
            }
        }
    }
    found
}

#[test]
fn the_device_calls_no_cost_function_of_the_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let functions = cost_functions(root);
    assert!(functions.contains("amp_cycles") && functions.contains("epilogue_cycles"));
    let offending: Vec<String> = calls(root, &functions)
        .into_iter()
        .map(|(file, f)| format!("{file} calls {f}"))
        .collect();
    assert!(offending.is_empty(), "{}", offending.join("\n"));
}

#[test]
fn a_device_calling_a_cost_function_is_found() {
    let dir = std::env::temp_dir().join(format!("device-sources-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src/device")).expect("folder");
    std::fs::create_dir_all(dir.join("src/target")).expect("folder");
    std::fs::write(
        dir.join("src/target.rs"),
        "impl Target {\n    pub fn amp_cycles(&self) -> u64 { 1 }\n    pub fn clock_hz(&self) -> f64 { 1.0 }\n}\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("src/device/timing.rs"),
        "fn amp(t: &Target) -> u64 {\n    t.amp_cycles()\n}\nfn hz(t: &Target) -> f64 { t.clock_hz() }\n",
    )
    .expect("write");
    let functions = cost_functions(&dir);
    assert_eq!(functions.iter().collect::<Vec<_>>(), ["amp_cycles"]);
    let found = calls(&dir, &functions);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "amp_cycles");
}
