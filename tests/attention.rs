//! Flash attention end to end on the simulated device: PASS for small, causal, non-multiple-of-16,
//! multi-batch and other shapes; a corrupted output FAILs; bad shapes are refused with clear errors.

mod common;
use common::{
    SMALL_ATTENTION, SMALL_ATTENTION_ID, SMALL_ATTENTION_SEED, Sandbox, assert_pass,
    corruption_fails_the_check, run_in_process,
};
use ipu_codegen::progress::Silent;

#[test]
fn small_attention_passes_with_the_seed_check_line() {
    let sb = Sandbox::new();
    let out = assert_pass(&sb, &["run", SMALL_ATTENTION]);
    assert!(
        out.contains("attentionNumericalChecks=1776 "),
        "37 queries x 2 heads x 24 checked: {out}"
    );
    assert!(
        out.contains(&format!(
            "workload={SMALL_ATTENTION_ID}-s{SMALL_ATTENTION_SEED} "
        )),
        "{out}"
    );
    assert!(out.contains("effectiveTflops="), "{out}");
}

#[test]
fn attention_shapes_pass() {
    let sb = Sandbox::new();
    for args in [
        // Causal, queries and keys of different lengths, neither a multiple of 16.
        &["--causal", "true"][..],
        &["--tokens", "50", "--key-tokens", "20", "--causal", "true"],
        // Several batches.
        &["--batch", "3", "--tokens", "19", "--key-tokens", "19"],
        // f16 partials, long keys: several key sub-blocks and key blocks per query block.
        &["--partials", "f16", "--key-tokens", "600", "--heads", "3"],
        // The smallest shape.
        &[
            "--tokens",
            "1",
            "--key-tokens",
            "1",
            "--heads",
            "1",
            "--head-dim",
            "1",
        ],
    ] {
        let mut full = vec!["run", SMALL_ATTENTION];
        full.extend_from_slice(args);
        assert_pass(&sb, &full);
    }
}

#[test]
fn long_keys_step_the_online_softmax_through_several_sub_blocks() {
    let sb = Sandbox::new();
    // 737 batch-and-head groups leave one tile per group: 3000 keys, whose scores as one block
    // would not fit tile memory, in sub-blocks of at most 256.
    let shape = [
        "--batch",
        "1",
        "--heads",
        "737",
        "--head-dim",
        "8",
        "--tokens",
        "20",
        "--key-tokens",
        "3000",
    ];
    let mut run = vec!["run", SMALL_ATTENTION];
    run.extend_from_slice(&shape);
    assert_pass(&sb, &run);
    let mut show = vec!["show", "emit", SMALL_ATTENTION];
    show.extend_from_slice(&shape);
    let r = sb.run(&show);
    r.assert_ok();
    let steps: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("softmax "))
        .collect();
    assert!(steps.len() >= 3000usize.div_ceil(256), "{}", r.stdout);
    assert!(
        steps[0].ends_with(" first") && !steps[1].ends_with(" first"),
        "{steps:?}"
    );
}

#[test]
fn a_causal_plan_gives_tiles_only_to_cells_its_queries_see() {
    let sb = Sandbox::new();
    let r = sb.run(&[
        "show",
        "select_finalist",
        SMALL_ATTENTION,
        "--causal",
        "true",
    ]);
    r.assert_ok();
    // "  op0 attention: G groups of N tiles: Q query blocks of _ x K key blocks of _, ..."
    let line = r.stdout.lines().nth(1).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| words[i].trim_end_matches(':').parse::<u32>().unwrap();
    let (tiles, query_blocks, key_blocks) = (number(5), number(7), number(13));
    assert!(
        key_blocks > 1 && tiles < query_blocks * key_blocks,
        "{line}"
    );
}

#[test]
fn corrupted_attention_output_fails_the_check() {
    corruption_fails_the_check(SMALL_ATTENTION, SMALL_ATTENTION_ID, SMALL_ATTENTION_SEED);
}

/// A mask bug fails: the device's unmasked output against the reference of the causal attention, and
/// the device's output against the reference with one key dropped.
#[test]
fn attention_bugs_fail_the_check() {
    use ipu_codegen::ir::OpKind;
    use ipu_codegen::numerics;
    let run = run_in_process(SMALL_ATTENTION, SMALL_ATTENTION_ID, SMALL_ATTENTION_SEED);
    let (graph, host, out, output) = (&run.package.graph, &run.host, run.out, &run.output);
    assert!(numerics::check(output, &numerics::reference(graph, host, &Silent), out).pass);

    let mut causal = graph.clone();
    if let OpKind::Attention { causal: c, .. } = &mut causal.ops[0].kind {
        *c = true;
    }
    let check = numerics::check(output, &numerics::reference(&causal, host, &Silent), out);
    assert!(
        !check.pass,
        "an unmasked output must fail the causal check: {check:?}"
    );

    // The last key's values made to match the first's: the same as dropping one key and counting
    // another twice, about one part in 45 of every output.
    let mut shifted = host.to_vec();
    let v = graph.ops[0].kind.clone();
    let OpKind::Attention { v, .. } = v else {
        unreachable!()
    };
    let cols = graph.value(v).cols as usize;
    let keys = graph.value(v).rows as usize;
    let (first, last) = (0..cols, (keys - 1) * cols..keys * cols);
    let copy: Vec<_> = shifted[v.index()][first].to_vec();
    shifted[v.index()][last].copy_from_slice(&copy);
    let check = numerics::check(output, &numerics::reference(graph, &shifted, &Silent), out);
    assert!(!check.pass, "a wrong key must fail: {check:?}");
}

#[test]
fn bad_attention_shapes_are_refused() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL_ATTENTION]).assert_ok();
    for (args, expected) in [
        (&["--heads", "0"][..], "heads must be positive"),
        (&["--head-dim", "0"], "head_dim must be positive"),
        (&["--key-tokens", "0"], "key_tokens must be positive"),
        (
            &["--head-dim", "60000", "--heads", "1"],
            "does not fit in tile memory",
        ),
        (&["--heads", "1500"], "no partition fits"),
        (&["--dimension", "64"], "--dimension does not apply"),
    ] {
        let mut full = vec!["build", SMALL_ATTENTION];
        full.extend_from_slice(args);
        let r = sb.run(&full);
        r.assert_clean_failure();
        assert!(r.stderr.contains(expected), "{args:?}: {}", r.stderr);
    }
    // Nothing stored was lost: the store verifies and the good build is still warm.
    let verify = sb.run(&["cache", "verify"]);
    verify.assert_ok();
    assert!(verify.stdout.contains("damaged=0"), "{}", verify.stdout);
    let ran = sb.run(&["build", SMALL_ATTENTION]).assert_ok().phases_run();
    assert!(ran.is_empty(), "the rebuild ran {ran:?}");
}
