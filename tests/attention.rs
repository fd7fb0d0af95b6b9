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

/// Under the column-major mapping, paired columns put every supertile pair of an attention's tiles
/// inside one key block's column, or beside an idle tile, two groups side by side included; without
/// them, a column of odd length shares a pair with the next.
#[test]
fn paired_columns_keep_every_supertile_pair_inside_one_key_blocks_column() {
    use ipu_codegen::ir::{AttentionPartition, AttentionShape, Mapping};
    // The group and key block of each tile of two groups, `None` for an idle one.
    let columns = |p: &AttentionPartition, s: &AttentionShape| {
        let mut group = vec![None; p.tiles_per_group as usize];
        for row in Mapping::ColumnMajor.attention_cells(p, s) {
            for (k, tile) in row.into_iter().enumerate() {
                assert!(group[tile as usize].is_none(), "{p:?}: tile {tile} twice");
                group[tile as usize] = Some(k);
            }
        }
        let tagged = |g: usize| group.iter().map(move |t| t.map(|k| (g, k)));
        tagged(0).chain(tagged(1)).collect::<Vec<_>>()
    };
    let straddles = |tiles: &[Option<(usize, usize)>]| {
        (tiles.chunks(2)).any(|pair| matches!(pair, [Some(a), Some(b)] if a != b))
    };
    for causal in [false, true] {
        let s = AttentionShape {
            batch: 1,
            heads: 2,
            queries: 75,
            keys: 75,
            head_dim: 8,
            causal,
        };
        for (query_blocks, key_blocks) in [(5, 3), (15, 1), (3, 5), (25, 3)] {
            let mut p = AttentionPartition {
                groups: 2,
                query_blocks,
                block_queries: 75 / query_blocks,
                key_blocks,
                block_keys: 75 / key_blocks,
                sub_block: 75 / key_blocks,
                paired_columns: true,
                tiles_per_group: 0,
            };
            p.tiles_per_group = p.group_tiles(&s);
            let paired = columns(&p, &s);
            assert!(!straddles(&paired), "{p:?}: {paired:?}");
            p.paired_columns = false;
            p.tiles_per_group = p.group_tiles(&s);
            assert!(straddles(&columns(&p, &s)), "{p:?} unpaired");
        }
    }
}

/// With an odd number of query blocks, pairing the plan's columns makes its key and value gather go
/// at two words a cycle: the same partition unpaired gathers markedly slower; and the estimate
/// `lower_mid` ranks plans by follows the gather the program makes for the plan it chose.
#[test]
fn odd_query_blocks_pair_their_columns_and_gather_keys_at_the_pair_rate() {
    use ipu_codegen::driver::PhaseConfigs;
    use ipu_codegen::ir::Partition;
    use ipu_codegen::stages::{lower_mid, select_finalist};
    use ipu_codegen::target::Target;
    use ipu_codegen::workload::{WorkloadSpec, preset_text};
    // 365 queries and keys, 6 heads: an odd number of query blocks, with tiles to pair them.
    let text = preset_text("attention-flash")
        .expect("preset")
        .replace("tokens = 729", "tokens = 365")
        .replace("heads = 16", "heads = 6");
    let graph = (WorkloadSpec::parse(&text, "attention").expect("spec"))
        .import()
        .expect("graph");
    let target = Target::preset("mk2-1500").expect("target");
    let c = PhaseConfigs::default();
    let mut mid = lower_mid::lower_mid(&graph, &target, &c.lower_mid).expect("lower_mid");
    mid.finalists.truncate(1);
    let Partition::Attention(p) = mid.finalists[0].partitions[0] else {
        panic!("an attention partition");
    };
    assert!(!p.query_blocks.is_multiple_of(2), "{p:?}");
    let gather = |mid: &ipu_codegen::ir::Mid| {
        let selected = select_finalist::select_finalist(&graph, mid, &target, &c.select_finalist)
            .expect("select_finalist");
        selected.exchanges[0].lower_bound
    };
    // The estimate's exchange is the gather's and the merge's, each bounded below by its schedule.
    let selected = select_finalist::select_finalist(&graph, &mid, &target, &c.select_finalist)
        .expect("select_finalist");
    let bounds: u64 = (selected.exchanges.iter())
        .map(|e| u64::from(e.lower_bound))
        .sum();
    let estimated = mid.finalists[0].operators[0].exchange_cycles;
    assert!(
        estimated >= bounds && estimated < bounds * 6 / 5,
        "estimated {estimated}, the exchanges' bounds {bounds}"
    );
    let mut with = |paired: bool| {
        let Partition::Attention(p) = &mut mid.finalists[0].partitions[0] else {
            unreachable!()
        };
        p.paired_columns = paired;
        p.tiles_per_group = p.group_tiles(&graph_shape(&graph));
        gather(&mid)
    };
    let (paired, unpaired) = (with(true), with(false));
    assert!(
        unpaired > paired * 3 / 2,
        "unpaired {unpaired}, paired {paired}"
    );
}

fn graph_shape(graph: &ipu_codegen::ir::Graph) -> ipu_codegen::ir::AttentionShape {
    (graph.ops.iter())
        .find_map(|op| graph.attention_shape(op))
        .expect("an attention")
}
