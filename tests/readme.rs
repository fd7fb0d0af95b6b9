//! The README's concrete `ipu-codegen` examples run as written, in order, in one scratch folder, and
//! succeed. A line is an example when it starts with `ipu-codegen` and names no placeholder (`<…>`,
//! `[…]`, `…`); examples on the MiniLM model need `make model` (tools/model.sh) and the Make lines
//! have their own test (tests/make.rs).

mod common;
use std::process::Command;

/// The README's `sh` examples that run as written: continuation lines joined, comments cut.
fn examples() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        pending.push_str(line.trim_end_matches('\\'));
        if line.ends_with('\\') {
            continue;
        }
        let command = std::mem::take(&mut pending);
        let command = command.split(" # ").next().unwrap().trim().to_string();
        let placeholder = ["<", "[", "…", "MODEL", "minilm", "paraphrase-MiniLM"]
            .iter()
            .any(|p| command.contains(p));
        if command.starts_with("ipu-codegen ") && !placeholder {
            commands.push(command);
        }
    }
    commands
}

#[test]
fn every_concrete_readme_example_runs_and_succeeds() {
    let commands = examples();
    assert!(
        commands.len() >= 3,
        "the README's examples were not found: {commands:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ipu-codegen"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README example failed: {command}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("ran: {command}");
    }
}
