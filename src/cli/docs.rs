//! What documents the command line outside it: shell completion scripts (`completions`) and man
//! pages (`man`), both generated from the clap command.
//!
//! clap_complete's bash script names its states inconsistently for a binary whose name has a hyphen
//! (clap issue 6421): the loop over the words sets `cmd` to `ipu__codegen__subcmd__run` while the
//! arms that complete a subcommand's options test `ipu__subcmd__codegen__subcmd__run`, so completion
//! stops after the first word. [`completions`] renames the arms to the loop's names, and adds to the
//! fish script the values of positional arguments (`show <WHAT>`), which it leaves out. `man --out-dir`
//! writes one page per command and subcommand (`ipu-codegen.1`, `ipu-codegen-run.1`,
//! `ipu-codegen-cache-gc.1`, …), the pages the main page's subcommand list refers to, each through
//! [`files::write_atomic`].

use anyhow::Result;
use clap_complete::Shell;
use ipu_codegen::files;
use std::path::{Path, PathBuf};

/// The binary's name, as the shells complete it.
pub const BIN: &str = "ipu-codegen";

/// The completion script for `shell` of the command line `cmd`.
pub fn completions(shell: Shell, cmd: &mut clap::Command) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, BIN, &mut script);
    let script = String::from_utf8(script).expect("clap_complete writes UTF-8");
    match shell {
        Shell::Bash => fix_bash_state_names(&script),
        Shell::Fish => with_fish_positional_values(script, cmd),
        _ => script,
    }
}

/// The fish script with the values of each subcommand's positional arguments that take one of a set
/// (`show <WHAT>`, `target [NAME]`), which clap_complete's fish script leaves out: offered until one
/// of them is given.
fn with_fish_positional_values(mut script: String, cmd: &clap::Command) -> String {
    let using = format!("__fish_{}_using_subcommand", BIN.replace('-', "_"));
    if !script.contains(&format!("function {using}")) {
        return script;
    }
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = (arg.get_possible_values().iter())
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            if values.is_empty() {
                continue;
            }
            let names = values.join(" ");
            script.push_str(&format!(
                "complete -c {BIN} -n \"{using} {sub}; and not __fish_seen_subcommand_from {names}\" \
                 -f -a \"{names}\"\n",
                sub = sub.get_name(),
            ));
        }
    }
    script
}

/// The bash script with every state named as its loop names it: the binary's name with `-` made
/// `__` (`ipu__codegen`), where the case arms have `-` made `__subcmd__` (`ipu__subcmd__codegen`).
fn fix_bash_state_names(script: &str) -> String {
    let loop_name = BIN.replace('-', "__");
    let arm_name = BIN.replace('-', "__subcmd__");
    if loop_name == arm_name {
        return script.to_string();
    }
    script.replace(&arm_name, &loop_name)
}

/// Writes the man page of `cmd` and of each of its subcommands, at every depth, into `dir` (created
/// when missing); the paths written, the main page first.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("creating man page folder {}: {e}", dir.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, dir, &mut written)?;
    Ok(written)
}

fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page)?;
    files::write_atomic(&path, "man page", &page)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_arms_take_the_loop_names() {
        let broken =
            "cmd=\"ipu__codegen__subcmd__run\"\n        ipu__subcmd__codegen__subcmd__run)\n";
        assert_eq!(
            fix_bash_state_names(broken),
            "cmd=\"ipu__codegen__subcmd__run\"\n        ipu__codegen__subcmd__run)\n"
        );
    }
}
