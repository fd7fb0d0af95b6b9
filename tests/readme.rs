//! The README's concrete `ipu-codegen` examples run as written, in order, in one scratch folder, and
//! succeed. A line is an example when it starts with `ipu-codegen` (or `parallel`, GNU parallel running
//! `ipu-codegen` commands: without it the test is skipped) and names no placeholder (`<…>`,
//! `[…]`, `…`); examples on the MiniLM model need `make model` (tools/model.sh) and the Make lines
//! have their own test (tests/make.rs). A ```` ```text ```` block after an example's `sh` block is
//! what that block's last example prints: every line of it but `...` must be a line of its output,
//! where `...` stands for any words and `key=...` for any value of `key`.

mod common;
use std::process::Command;

/// One README example, and what the README shows it printing.
struct Example {
    command: String,
    shown: Vec<String>,
}

/// The README's `sh` examples that run as written (continuation lines joined, comments cut), each
/// with the `text` block that follows its `sh` block, if any.
fn examples() -> Vec<Example> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut examples: Vec<Example> = Vec::new();
    let mut block = "";
    let mut pending = String::new();
    for line in readme.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            block = if block.is_empty() {
                if fence.is_empty() { "other" } else { fence }
            } else {
                ""
            };
            continue;
        }
        match block {
            "sh" => {
                pending.push_str(line.trim_end_matches('\\'));
                if line.ends_with('\\') {
                    continue;
                }
                let command = std::mem::take(&mut pending);
                let command = command.split(" # ").next().unwrap().trim().to_string();
                let placeholder = ["<", "[", "…", "MODEL", "minilm", "paraphrase-MiniLM"]
                    .iter()
                    .any(|p| command.contains(p));
                let runs = command.starts_with("ipu-codegen ") || command.starts_with("parallel ");
                if runs && !placeholder {
                    examples.push(Example {
                        command,
                        shown: Vec::new(),
                    });
                }
            }
            "text" => {
                let last = examples
                    .last_mut()
                    .expect("a text block follows an example");
                last.shown.push(line.to_string());
            }
            _ => {}
        }
    }
    examples
}

/// Whether the words of `line` are the words of `shown`, where `...` stands for any words and
/// `key=...` for any value of `key`.
fn matches(shown: &[&str], line: &[&str]) -> bool {
    match shown.split_first() {
        None => line.is_empty(),
        Some((&"...", rest)) => (0..=line.len()).any(|skip| matches(rest, &line[skip..])),
        Some((word, rest)) => line.split_first().is_some_and(|(first, tail)| {
            let same = match word.strip_suffix("=...") {
                Some(key) => first.split_once('=').is_some_and(|(k, _)| k == key),
                None => first == word,
            };
            same && matches(rest, tail)
        }),
    }
}

/// The lines `shown` has that `output` does not print.
fn missing(shown: &[String], output: &str) -> Vec<String> {
    let printed: Vec<Vec<&str>> = output
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    (shown.iter())
        .filter(|s| s.trim() != "...")
        .filter(|s| {
            let words: Vec<&str> = s.split_whitespace().collect();
            !printed.iter().any(|p| matches(&words, p))
        })
        .cloned()
        .collect()
}

#[test]
fn a_shown_line_matches_only_what_was_printed() {
    let out = "tokens partials cycles\n    21  f16   5064  PASS\nhtml=sweep.html\n";
    assert!(missing(&["21 f16 5064 PASS".into(), "html=...".into()], out).is_empty());
    assert!(missing(&["21 f16 ... PASS".into(), "...".into()], out).is_empty());
    assert_eq!(missing(&["21 f16 4588 PASS".into()], out).len(), 1);
    assert_eq!(missing(&["csv=...".into()], out).len(), 1);
    assert_eq!(
        missing(&["21 f16".into()], out).len(),
        1,
        "a line is matched whole"
    );
}

#[test]
fn every_concrete_readme_example_runs_and_prints_what_the_readme_shows() {
    let examples = examples();
    assert!(examples.len() >= 3, "the README's examples were not found");
    let parallel = std::process::Command::new("parallel")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if examples.iter().any(|e| e.command.starts_with("parallel "))
        && common::skip_without("GNU parallel", parallel)
    {
        return;
    }
    assert!(
        examples.iter().any(|e| !e.shown.is_empty()),
        "no example shows its output"
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
    for Example { command, shown } in &examples {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "README example failed: {command}\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let missing = missing(shown, &stdout);
        assert!(
            missing.is_empty(),
            "the README shows {command} printing lines it did not print:\n{}\nit printed:\n{stdout}",
            missing.join("\n")
        );
        eprintln!("ran: {command}");
    }
}
