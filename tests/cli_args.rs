//! The arguments as `--help` shows them: the options every subcommand takes in their own section,
//! each closed set's values listed; and a name picked from a set that is not in it (a target, a
//! phase, what `show` dumps, a package's input) refused with the closest name.

mod common;
use common::{SMALL, Sandbox};

/// `--help`'s own options and its global ones, split at the `Global options:` heading.
fn sections(help: &str) -> (&str, &str) {
    help.split_once("\nGlobal options:\n")
        .unwrap_or_else(|| panic!("no Global options section:\n{help}"))
}

#[test]
fn global_options_have_their_own_help_section() {
    let sb = Sandbox::new();
    for sub in ["run", "build", "lower-mid", "cache", "sweep"] {
        let r = sb.run(&[sub, "--help"]);
        r.assert_ok();
        let (own, global) = sections(&r.stdout);
        for flag in [
            "--cache <CACHE>",
            "--stages <STAGES>",
            "--log-format <LOG_FORMAT>",
            "-q, --quiet",
            "--lock-timeout <SECONDS>",
        ] {
            assert!(global.contains(flag), "{sub}: {flag} not global:\n{global}");
            assert!(!own.contains(flag), "{sub}: {flag} among its own:\n{own}");
        }
    }
    // Given after the subcommand, as before.
    let r = sb.run(&["run", SMALL, "--lock-timeout", "0", "--help"]);
    r.assert_ok();
}

#[test]
fn closed_sets_list_their_values_in_help() {
    let sb = Sandbox::new();
    for (args, shown) in [
        (
            &["target", "--help"][..],
            "[possible values: mk2-1500, gc200, bow]",
        ),
        (
            &["calibrate", "--help"],
            "[possible values: mk2-1500, gc200, bow]",
        ),
        (&["run", "--help"], "- f16: Accumulate in half precision"),
        (
            &["run", "--help"],
            "- lifetime: Place buffers in order of birth",
        ),
        (&["build", "--help"], "Place the largest buffers first"),
        (&["show", "--help"], "The imported graph"),
        (&["show", "--help"], "- lower_mid:"),
        (&["build", "--help"], "- select_finalist: "),
        (
            &["completions", "--help"],
            "[possible values: bash, elvish, fish",
        ),
    ] {
        let r = sb.run(args);
        r.assert_ok();
        assert!(
            r.stdout.contains(shown),
            "{args:?} lacks {shown}:\n{}",
            r.stdout
        );
    }
}

#[test]
fn a_misspelled_name_gets_the_closest() {
    let sb = Sandbox::new();
    for (args, said) in [
        (
            &["target", "gc20"][..],
            "unknown target \"gc20\" for [NAME]; targets: mk2-1500, gc200, bow; did you mean `gc200`?",
        ),
        (&["calibrate", "--target", "bwo"], "did you mean `bow`?"),
        (
            &["build", SMALL, "--target", "mk2-150"],
            "did you mean `mk2-1500`?",
        ),
        (
            &["build", SMALL, "--from", "lower_mdi"],
            "unknown phase \"lower_mdi\" for --from <FROM>; phases: lower_mid, select_finalist",
        ),
        (&["build", SMALL, "--to", "emitt"], "did you mean `emit`?"),
        (&["show", "lowr-mid", SMALL], "did you mean `lower_mid`?"),
        (&["show", "grpah", SMALL], "did you mean `graph`?"),
        (&["run", SMALL, "--partials", "f61"], "types: f16, f32"),
        (
            &["build", SMALL, "--placement-order", "sise"],
            "did you mean `size`?",
        ),
        (
            &["build", "siglip-mpl-small"],
            "did you mean `siglip-mlp-small`?",
        ),
        (
            &["build", SMALL, "--weight-panels", "residnet"],
            "weight panel placements: auto, resident, gathered; did you mean `resident`?",
        ),
    ] {
        let r = sb.run(args);
        r.assert_clean_failure();
        assert!(r.stderr.contains(said), "{args:?}: {}", r.stderr);
    }
    // Nothing close: no suggestion.
    let r = sb.run(&["target", "nothing-like-any"]);
    r.assert_clean_failure();
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
}

#[test]
fn a_misspelled_input_name_gets_the_closest() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.path("x.npy"),
        ipu_codegen::tensors::npy::write(&ipu_codegen::tensors::Tensor {
            shape: vec![1, 24],
            elements: ipu_codegen::tensors::Elements::F32(vec![1.0; 24]),
        }),
    )
    .unwrap();
    let r = sb.run(&["run", "bert-encoder-small", "--input", "maks=@x.npy"]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains(
            "x.npy: the package takes no input \"maks\" (its inputs: embeddings, mask); did you \
             mean `mask`?"
        ),
        "{}",
        r.stderr
    );
}
