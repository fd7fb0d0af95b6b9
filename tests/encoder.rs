//! The encoder preset end to end: every phase's dump, a passing run, the check catching a corrupted
//! output, a changed weight and a dropped mask, and lower_mid refusing what it cannot lay out; its
//! middle layers, copied from the third, the program building them gives.

mod common;
use common::{Sandbox, assert_pass, corruption_fails_the_check, phases, run_in_process};
use ipu_codegen::ir::Mapping;
use ipu_codegen::progress::Silent;
use ipu_codegen::stages::select_finalist::{model_layers, whole_program};
use ipu_codegen::target::Target;

const ENCODER: &str = "bert-encoder-small";
const ENCODER_ID: &str = "bert-encoder-f16-b1-t24-d64-h2-i128-l2-pf32";
const ENCODER_SEED: u64 = 5;

#[test]
fn every_encoder_phase_dump_matches_its_snapshot() {
    let sb = Sandbox::new();
    for what in std::iter::once("graph").chain(phases()) {
        let r = sb.run(&["show", what, ENCODER]);
        r.assert_ok();
        insta::assert_snapshot!(format!("encoder_{what}"), r.stdout);
    }
}

#[test]
fn the_encoder_runs_and_passes() {
    let sb = Sandbox::new();
    let out = assert_pass(&sb, &["run", ENCODER]);
    assert!(out.contains("layers=2"), "{out}");
}

#[test]
fn a_corrupted_encoder_output_fails_the_check() {
    corruption_fails_the_check(ENCODER, ENCODER_ID, ENCODER_SEED);
}

/// The device's output, checked against the reference of other data: one weight changed, or the mask
/// dropped, must fail; the data the device ran must pass.
#[test]
fn the_check_fails_against_a_changed_weight_or_mask() {
    use ipu_codegen::numerics;
    let run = run_in_process(ENCODER, ENCODER_ID, ENCODER_SEED);
    let (graph, host, out, output) = (&run.package.graph, &run.host, run.out, &run.output);
    let check = |host: &[Vec<f32>]| {
        numerics::check(output, &numerics::reference(graph, host, &Silent), out)
    };
    assert!(check(host).pass, "{:?}", check(host));
    let named = |name: &str| graph.values.iter().find(|v| v.name == name).unwrap().id;

    let mut changed = host.to_vec();
    let w = named("layer1.intermediate.weight");
    changed[w.index()][5] += 0.5;
    assert!(!check(&changed).pass, "one changed weight must fail");

    let mut unmasked = host.to_vec();
    let mask = named("mask");
    unmasked[mask.index()].fill(0.0);
    assert!(!check(&unmasked).pass, "a dropped mask must fail");
}

/// Q, K and V of a layer (three matmuls of one input) run as one matmul with the three weights side
/// by side, each tile's block inside one of them; the run passes, and a tripled key or value weight
/// fails the check.
#[test]
fn q_k_and_v_run_as_one_matmul_and_a_tripled_key_or_value_weight_fails() {
    let sb = Sandbox::new();
    let mid = sb.run(&["show", "lower_mid", ENCODER]);
    mid.assert_ok();
    let fused = "layer0.query.matmul+layer0.key.matmul+layer0.value.matmul";
    assert!(mid.stdout.contains(&format!("{fused}: ")), "{}", mid.stdout);
    assert!(mid.stdout.contains("[24x64x192]"), "{}", mid.stdout);
    let plans = sb.run(&["plans", ENCODER]);
    plans.assert_ok();
    assert!(
        plans
            .stdout
            .contains("matmul 24x64x192, 3 weights side by side (64 + 64 + 64)"),
        "{}",
        plans.stdout
    );
    use ipu_codegen::numerics;
    let run = run_in_process(ENCODER, ENCODER_ID, ENCODER_SEED);
    let (graph, host, out, output) = (&run.package.graph, &run.host, run.out, &run.output);
    let check = |host: &[Vec<f32>]| {
        numerics::check(output, &numerics::reference(graph, host, &Silent), out)
    };
    assert!(check(host).pass, "{:?}", check(host));
    for name in ["layer1.key.weight", "layer1.value.weight"] {
        let w = graph.values.iter().find(|v| v.name == name).unwrap().id;
        let mut changed = host.to_vec();
        changed[w.index()].iter_mut().for_each(|x| *x *= 3.0);
        assert!(!check(&changed).pass, "a tripled {name} must fail");
    }
}

/// At 128 wide the layer norms split each row over column blocks on tiles of their own (moments,
/// their exchange, the combination): the run passes, and a changed gamma fails the check.
#[test]
fn a_layer_norm_split_over_column_blocks_passes_and_a_changed_gamma_fails() {
    use ipu_codegen::numerics;
    const SPLIT: &str = "bert-encoder-small --dimension 128 --hidden 256";
    let sb = Sandbox::new();
    let mut args = vec!["show", "select_finalist"];
    args.extend(SPLIT.split_whitespace());
    let shown = sb.run(&args);
    shown.assert_ok();
    assert!(
        shown.stdout.contains("buffers MomentsShare:"),
        "{}",
        shown.stdout
    );
    corruption_fails_the_check(
        SPLIT,
        "bert-encoder-f16-b1-t24-d128-h2-i256-l2-pf32",
        ENCODER_SEED,
    );

    let run = run_in_process(
        SPLIT,
        "bert-encoder-f16-b1-t24-d128-h2-i256-l2-pf32",
        ENCODER_SEED,
    );
    let (graph, out) = (&run.package.graph, run.out);
    let check = |host: &[Vec<f32>]| {
        numerics::check(&run.output, &numerics::reference(graph, host, &Silent), out)
    };
    let gamma = (graph.values.iter())
        .find(|v| v.name == "layer1.output.norm.gamma")
        .unwrap()
        .id;
    let mut changed = run.host.to_vec();
    changed[gamma.index()][7] += 0.5;
    assert!(!check(&changed).pass, "a changed gamma must fail");
}

#[test]
fn lower_mid_makes_an_add_no_matmul_fuses_a_vector_operator() {
    use ipu_codegen::ir::{BinaryFn, OpKind, Operator};
    use ipu_codegen::isa::{Spread, VectorFn};
    use ipu_codegen::stages::lower_mid::{LowerMidConfig, lower_mid};
    use ipu_codegen::target::Target;
    let mut graph = encoder_graph();
    // The embeddings added to themselves in place of their layer norm: no matmul precedes the add.
    let x = graph.ops[0].kind.inputs()[0];
    graph.ops[0].kind = OpKind::Add { a: x, b: x };
    graph.ops[0].name = "doubled".to_string();
    let mid = lower_mid(
        &graph,
        &Target::preset("mk2-1500").unwrap(),
        &LowerMidConfig {
            finalists: 1,
            ..LowerMidConfig::default()
        },
    )
    .unwrap();
    let Operator::Vector(v) = &mid.operators[0] else {
        panic!("{:?}", mid.operators[0])
    };
    assert_eq!(v.name, "doubled");
    assert_eq!(v.function, VectorFn::Binary(BinaryFn::Add));
    assert_eq!(v.operands, vec![(x, Spread::Whole), (x, Spread::Whole)]);
}

/// A matmul of the same input by a weight already among the parts (the key projection made to use
/// the query's weight), or adding a bias already among them (the query's), stays a matmul of its own;
/// the others still join, and the plan still builds and runs.
#[test]
fn a_sibling_by_a_weight_or_bias_already_joined_runs_on_its_own() {
    use ipu_codegen::ir::{OpKind, Operator};
    use ipu_codegen::stages::lower_mid::{LowerMidConfig, lower_mid};
    use ipu_codegen::target::Target;
    let target = Target::preset("mk2-1500").unwrap();
    let cfg = LowerMidConfig {
        finalists: 1,
        ..LowerMidConfig::default()
    };
    for shared in ["weight", "bias"] {
        let mut graph = encoder_graph();
        let op = |name: &str| graph.ops.iter().position(|o| o.name == name).unwrap();
        let (query, key) = match shared {
            "weight" => (op("layer0.query.matmul"), op("layer0.key.matmul")),
            _ => (op("layer0.query"), op("layer0.key")),
        };
        match (graph.ops[query].kind.clone(), &mut graph.ops[key].kind) {
            (OpKind::MatMul { b: wq, .. }, OpKind::MatMul { b, .. }) => *b = wq,
            (OpKind::AddBias { bias: bq, .. }, OpKind::AddBias { bias, .. }) => *bias = bq,
            other => panic!("{other:?}"),
        }
        let mid = lower_mid(&graph, &target, &cfg).unwrap();
        let names: Vec<&str> = (mid.operators.iter())
            .filter_map(|o| match o {
                Operator::MatMul(m) => Some(m.name.as_str()),
                _ => None,
            })
            .take(2)
            .collect();
        assert_eq!(
            names,
            [
                "layer0.query.matmul+layer0.value.matmul",
                "layer0.key.matmul"
            ],
            "a shared {shared}"
        );
        let selected = ipu_codegen::stages::select_finalist::select_finalist(
            &graph,
            &mid,
            &target,
            &ipu_codegen::driver::PhaseConfigs::default().select_finalist,
        );
        assert!(selected.is_ok(), "a shared {shared}: {:?}", selected.err());
    }
}

/// The encoder's mid and graph as `lower_mid` makes them by default.
fn encoder_mid() -> (
    ipu_codegen::ir::Graph,
    ipu_codegen::ir::Mid,
    ipu_codegen::target::Target,
) {
    use ipu_codegen::stages::lower_mid::{LowerMidConfig, lower_mid};
    use ipu_codegen::target::Target;
    let graph = encoder_graph();
    let target = Target::preset("mk2-1500").unwrap();
    let mid = lower_mid(&graph, &target, &LowerMidConfig::default()).unwrap();
    (graph, mid, target)
}

/// The encoder preset's graph.
fn encoder_graph() -> ipu_codegen::ir::Graph {
    use ipu_codegen::workload::WorkloadSpec;
    let spec = WorkloadSpec::parse(
        &ipu_codegen::workload::preset_text(ENCODER).unwrap(),
        ENCODER,
    )
    .unwrap();
    spec.import().unwrap()
}

#[test]
fn the_mid_verifier_refuses_a_matmul_reading_a_layer_norm_transposed() {
    use ipu_codegen::ir::{Operator, Partition, verify_mid};
    let (graph, mut mid, target) = encoder_mid();
    assert!(verify_mid(&mid, &graph, &target).is_empty());
    // The first matmul reads the embeddings' layer norm, which writes only row by row.
    let first = (mid.operators.iter())
        .position(|o| matches!(o, Operator::MatMul(_)))
        .unwrap();
    let Partition::Grid(g) = &mut mid.finalists[0].partitions[first] else {
        panic!("a matmul's partition is a grid");
    };
    g.transposed = true;
    let errors = verify_mid(&mid, &graph, &target);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("finalist 0:") && e.contains("writes only row by row")),
        "{errors:?}"
    );
}

#[test]
fn an_encoder_cannot_be_planned_all_transposed_and_says_which_value_forbids_it() {
    let sb = Sandbox::new();
    let r = sb.run(&["build", ENCODER, "--form", "transposed"]);
    assert!(!r.status.success());
    assert!(
        r.stderr.contains("no whole-program plan")
            && r.stderr.contains("reads embeddings.norm transposed"),
        "{}",
        r.stderr
    );
}

/// The small encoder with `layers` layers, lowered for the default target.
fn encoder(layers: u32) -> (ipu_codegen::ir::Graph, ipu_codegen::ir::Mid, Target) {
    let text = ipu_codegen::workload::preset_text(ENCODER).expect("a preset");
    let text = text.replace("layers = 2", &format!("layers = {layers}"));
    let spec = ipu_codegen::workload::WorkloadSpec::parse(&text, "test").expect("parses");
    let graph = spec.import().expect("imports");
    let target = Target::preset("mk2-1500").expect("a target");
    let cfg = ipu_codegen::driver::PhaseConfigs::default().lower_mid;
    let mid = ipu_codegen::stages::lower_mid::lower_mid(&graph, &target, &cfg).expect("lowers");
    (graph, mid, target)
}

#[test]
fn copied_layers_are_the_program_their_operators_build() {
    for layers in [5, 7] {
        let (graph, mid, target) = encoder(layers);
        let repeated = model_layers(&graph, &mid);
        assert!(repeated.is_some(), "{layers} layers repeat");
        for mapping in [Mapping::RowMajor, Mapping::SharedPanels] {
            let (copied, was) = whole_program(&graph, &mid, 0, mapping, &target, repeated);
            let (built, _) = whole_program(&graph, &mid, 0, mapping, &target, None);
            assert!(was, "{layers} layers under {mapping:?} were not copied");
            assert_eq!(copied.buffers.len(), built.buffers.len());
            assert!(copied == built, "{layers} layers under {mapping:?}");
        }
    }
}

#[test]
fn four_layers_are_built_not_copied() {
    let (graph, mid, target) = encoder(4);
    let repeated = model_layers(&graph, &mid);
    let (_, copied) = whole_program(&graph, &mid, 0, Mapping::RowMajor, &target, repeated);
    assert!(!copied);
}
