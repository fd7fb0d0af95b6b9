//! Shell completion past the first word, driven through bash's own completion function and fish's
//! `complete -C`; the zsh and fish scripts parse where those shells are installed (a shell that is
//! missing is reported as skipped); `man --out-dir` writes a page for every page the others refer to.

mod common;
use common::Sandbox;
use std::process::Command;

fn installed(shell: &str) -> bool {
    Command::new(shell)
        .args(["-c", "exit 0"])
        .status()
        .is_ok_and(|s| s.success())
}

/// What bash's completion function of the generated script offers for `words`, the last one the word
/// under the cursor.
fn bash_complete(sb: &Sandbox, words: &[&str]) -> Vec<String> {
    let script = sb.path("ipu-codegen.bash");
    if !script.exists() {
        let r = sb.run(&["completions", "bash"]);
        r.assert_ok();
        std::fs::write(&script, &r.stdout).unwrap();
    }
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let cur = words[cword];
    let prev = if cword > 0 { words[cword - 1] } else { "" };
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         _ipu__codegen ipu-codegen '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.join(" "),
    );
    shell_lines("bash", &["--norc", "--noprofile", "-c", &program])
}

/// The lines `shell ARGS` prints, once it has succeeded.
fn shell_lines(shell: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(shell).args(args).output().expect(shell);
    assert!(
        out.status.success(),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_a_subcommands_options_and_their_values() {
    let sb = Sandbox::new();
    let offered = bash_complete(&sb, &["ipu-codegen", "run", "--pla"]);
    assert!(
        offered.contains(&"--placement-order".to_string()),
        "{offered:?}"
    );
    let offered = bash_complete(
        &sb,
        &["ipu-codegen", "run", "siglip-mlp", "--placement-order", ""],
    );
    assert_eq!(offered, ["lifetime", "size"]);
    // A closed set's values: the target presets, what `show` dumps.
    let offered = bash_complete(&sb, &["ipu-codegen", "build", "w", "--target", ""]);
    assert_eq!(offered, ["mk2-1500", "gc200", "bow"]);
    let offered = bash_complete(&sb, &["ipu-codegen", "show", ""]);
    assert!(
        offered.iter().any(|o| o == "graph") && offered.iter().any(|o| o == "lower_mid"),
        "{offered:?}"
    );
    // Two levels down.
    let offered = bash_complete(&sb, &["ipu-codegen", "cache", "gc", "--max-"]);
    assert!(offered.iter().any(|o| o == "--max-bytes"), "{offered:?}");
    // The first word still completes.
    let offered = bash_complete(&sb, &["ipu-codegen", "lower-"]);
    assert!(offered.iter().any(|o| o == "lower-mid"), "{offered:?}");
}

#[test]
fn zsh_and_fish_scripts_parse() {
    let sb = Sandbox::new();
    for (shell, check) in [
        ("zsh", ["-n"].as_slice()),
        ("fish", ["--no-execute"].as_slice()),
    ] {
        if common::skip_without(shell, installed(shell)) {
            continue;
        }
        let r = sb.run(&["completions", shell]);
        r.assert_ok();
        let script = sb.path(&format!("ipu-codegen.{shell}"));
        std::fs::write(&script, &r.stdout).unwrap();
        let out = Command::new(shell)
            .args(check)
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(r.stdout.contains("placement-order"), "{shell}");
        println!("{shell}: the script parses");
    }
}

#[test]
fn fish_completes_a_subcommands_options_and_their_values() {
    if common::skip_without("fish", installed("fish")) {
        return;
    }
    let sb = Sandbox::new();
    let r = sb.run(&["completions", "fish"]);
    r.assert_ok();
    let script = sb.path("ipu-codegen.fish");
    std::fs::write(&script, &r.stdout).unwrap();
    let complete = |line: &str| -> Vec<String> {
        let program = format!("source '{}'; complete -C '{line}'", script.display());
        (shell_lines("fish", &["-c", &program]).iter())
            .map(|l| l.split('\t').next().unwrap_or_default().to_string())
            .collect()
    };
    let offered = complete("ipu-codegen run --pla");
    assert!(
        offered.iter().any(|o| o == "--placement-order"),
        "{offered:?}"
    );
    let mut offered = complete("ipu-codegen build w --target ");
    offered.sort();
    assert_eq!(offered, ["bow", "gc200", "mk2-1500"]);
    let offered = complete("ipu-codegen show low");
    assert!(offered.iter().any(|o| o == "lower_mid"), "{offered:?}");
    let offered = complete("ipu-codegen cache gc --max-");
    assert!(offered.iter().any(|o| o == "--max-bytes"), "{offered:?}");
}

#[test]
fn man_out_dir_writes_every_page_the_pages_refer_to() {
    let sb = Sandbox::new();
    let r = sb.run(&["man", "--out-dir", "man"]);
    r.assert_ok();
    let dir = sb.path("man");
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "ipu-codegen.1",
        "ipu-codegen-run.1",
        "ipu-codegen-lower-mid.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} not in {pages:?}");
    }
    assert!(
        pages.iter().any(|p| p == "ipu-codegen-cache-gc.1"),
        "{pages:?}"
    );
    assert_eq!(r.stdout.lines().count(), pages.len(), "{}", r.stdout);
    // Every page another names (`ipu\-codegen\-run(1)`) is there.
    for page in &pages {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.starts_with(".ie"), "{page}: {text}");
        for (at, _) in text.match_indices("(1)") {
            let start = text[..at]
                .rfind(|c: char| c.is_whitespace() || c == '>')
                .map_or(0, |i| i + 1);
            let named = text[start..at].replace("\\-", "-");
            if named.starts_with("ipu-codegen") {
                let file = format!("{named}.1");
                assert!(pages.contains(&file), "{page} names {file}, not written");
            }
        }
    }
    // Without --out-dir: the main page on stdout, as before.
    let man = sb.run(&["man"]);
    man.assert_ok();
    assert!(man.stdout.contains(".TH ipu-codegen 1"), "{}", man.stdout);
}
