//! Select and the comparisons end to end: a graph-spec workload using every comparison, `is_nan`
//! and `is_inf`, and a select in each of the codelets Poplar picks for it (every operand whole or
//! spread as a row, a column or a value; both values single; the condition single), built and run
//! on the device with its numerical check passing; a corrupted output, and a reference computed
//! with a comparison turned round or a select's values swapped, failing it; `select_finalist`'s
//! verifier refusing a select vertex whose values are swapped or one short; the graph checks and
//! the graph spec refusing a select of the wrong arity or shape, naming the op; booleans bound from
//! and written to `.npy` as bool.

mod common;
use common::{Sandbox, assert_pass};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::ids::ValueId;
use ipu_codegen::ir::{BinaryFn, Graph, OpKind, Package, UnaryFn, ValueRole, read_ipuexe};
use ipu_codegen::numerics::{self, Reference};
use ipu_codegen::progress::Silent;
use ipu_codegen::workload::{GraphSpec, graph_spec};
use std::collections::BTreeMap;

const WORKLOAD: &str = include_str!("workloads/select-ops.toml");

/// A sandbox holding the workload and its weights (deterministic values).
fn sandbox() -> (Sandbox, GraphSpec) {
    common::graph_workload(WORKLOAD, "select-ops")
}

/// The package built in a sandbox, the seeded host data, and the device's outputs.
fn device_outputs() -> (Package, Vec<Vec<f32>>, BTreeMap<ValueId, Vec<f32>>) {
    let (sb, spec) = sandbox();
    sb.run(&["build", "select-ops.toml"]).assert_ok();
    let bytes = std::fs::read(sb.stages().join(spec.id()).join("model.ipuexe")).unwrap();
    let (_, package) = read_ipuexe(&bytes).unwrap();
    let host = host_data(&package.graph, 5);
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&host).unwrap();
    let (_, outputs) = device.run(&host, &Silent).unwrap();
    (package, host, outputs)
}

fn outputs(graph: &Graph) -> Vec<(ValueId, String)> {
    (graph.values.iter())
        .filter(|v| v.role == ValueRole::Output)
        .map(|v| (v.id, v.name.clone()))
        .collect()
}

/// Whether every output of the device passes the check against `reference`.
fn all_pass(graph: &Graph, reference: &Reference, out: &BTreeMap<ValueId, Vec<f32>>) -> bool {
    outputs(graph)
        .iter()
        .all(|(id, _)| numerics::check(&out[id], reference, *id).pass)
}

#[test]
fn the_workload_uses_every_comparison_and_each_select_codelet() {
    let spec = GraphSpec::parse(WORKLOAD, "select-ops.toml").unwrap();
    let g = &spec.graph;
    let functions: Vec<String> = (g.ops.iter())
        .filter_map(|op| match &op.kind {
            OpKind::Binary { function, .. } => Some(function.name().to_string()),
            OpKind::Unary { function, .. } => Some(function.name().to_string()),
            _ => None,
        })
        .collect();
    for f in BinaryFn::ALL.into_iter().filter(|f| f.compares()) {
        assert!(functions.iter().any(|n| n == f.name()), "{f:?}");
    }
    for f in [UnaryFn::IsNan, UnaryFn::IsInf] {
        assert!(functions.iter().any(|n| n == f.name()), "{f:?}");
    }
    // Each select's operands as (rows, cols): every operand whole or spread, both values single,
    // the condition single.
    let shapes: Vec<Vec<(u32, u32)>> = (g.ops.iter())
        .filter(|op| matches!(op.kind, OpKind::Select { .. }))
        .map(|op| {
            (op.kind.inputs().iter())
                .map(|&v| (g.value(v).rows, g.value(v).cols))
                .collect()
        })
        .collect();
    for want in [
        vec![(24, 40), (24, 40), (1, 40)],
        vec![(24, 40), (1, 1), (1, 1)],
        vec![(1, 1), (24, 40), (24, 40)],
        vec![(24, 1), (1, 40), (24, 40)],
    ] {
        assert!(shapes.contains(&want), "{want:?} in {shapes:?}");
    }
    let text = graph_spec::to_toml(g, "select-ops.safetensors");
    assert_eq!(
        GraphSpec::parse(&text, "select-ops.toml").unwrap().graph,
        *g
    );
}

#[test]
fn selects_and_comparisons_run_on_the_device_and_pass_their_check() {
    let (sb, _) = sandbox();
    let out = assert_pass(&sb, &["run", "select-ops.toml"]);
    assert!(out.contains("workload=select-ops"), "{out}");
    let r = sb.run(&["plans", "select-ops.toml"]);
    r.assert_ok();
    for line in ["vector select 24x40", "vector binary greater 24x40"] {
        assert!(r.stdout.contains(line), "{line}: {}", r.stdout);
    }
}

#[test]
fn a_corrupted_output_fails_the_check() {
    let (package, host, mut out) = device_outputs();
    let reference = numerics::reference(&package.graph, &host, &Silent);
    assert!(all_pass(&package.graph, &reference, &out));
    for (id, name) in outputs(&package.graph) {
        let output = out.get_mut(&id).unwrap();
        let check = numerics::check(output, &reference, id);
        let i = output.len() / 3;
        let kept = output[i];
        output[i] = half::f16::from_f64(f64::from(kept) + 1.5 * check.tolerance + 0.01).to_f32();
        assert!(!numerics::check(output, &reference, id).pass, "{name}");
        output[i] = kept;
    }
}

/// The graph with one op's kind changed by `f`.
fn mutated(graph: &Graph, op: &str, f: impl Fn(&OpKind) -> OpKind) -> Graph {
    let mut g = graph.clone();
    let op = g.ops.iter_mut().find(|o| o.name == op).unwrap();
    op.kind = f(&op.kind);
    g
}

#[test]
fn a_comparison_turned_round_or_a_select_mirrored_fails_the_check() {
    let (package, host, out) = device_outputs();
    let graph = &package.graph;
    let turned = |to: BinaryFn| {
        move |k: &OpKind| match *k {
            OpKind::Binary { a, b, .. } => OpKind::Binary { a, b, function: to },
            _ => panic!("{k:?}"),
        }
    };
    let mirrored = |k: &OpKind| match *k {
        OpKind::Select { condition, x, y } => OpKind::Select {
            condition,
            x: y,
            y: x,
        },
        _ => panic!("{k:?}"),
    };
    let cases = [
        mutated(graph, "greater_row", turned(BinaryFn::Less)),
        mutated(graph, "less_left_value", turned(BinaryFn::Greater)),
        mutated(graph, "less_equal_value", turned(BinaryFn::Greater)),
        mutated(graph, "greater_equal_column", turned(BinaryFn::Less)),
        mutated(graph, "equal", turned(BinaryFn::NotEqual)),
        mutated(graph, "not_equal", turned(BinaryFn::Equal)),
        mutated(graph, "select_whole", mirrored),
        mutated(graph, "select_values", mirrored),
        mutated(graph, "select_by_column", mirrored),
    ];
    for (k, g) in cases.iter().enumerate() {
        let reference = numerics::reference(g, &host, &Silent);
        assert!(!all_pass(g, &reference, &out), "mutation {k} passes");
    }
}

/// The spec with `from` replaced by `to` (which must occur).
fn damaged(from: &str, to: &str) -> String {
    assert!(WORKLOAD.contains(from), "{from}");
    WORKLOAD.replacen(from, to, 1)
}

#[test]
fn a_select_of_the_wrong_arity_or_shape_is_refused_naming_the_op() {
    let cases = [
        (
            damaged(
                "inputs = [\"gt\", \"x\", \"t\"]",
                "inputs = [\"gt\", \"x\"]",
            ),
            "op `select_whole` (select): takes 3 inputs, got 2",
        ),
        (
            damaged(
                "kind = \"select\"\ninputs = [\"le\", \"s\", \"x\"]\noutput = \"s2\"",
                "kind = \"select\"\ninputs = [\"le\", \"s\", \"x\"]\noutput = \"s2\"\nfunction = \"min\"",
            ),
            "op `select_value_x` (select): attribute function does not apply to select",
        ),
        (
            damaged(
                "name = \"rc\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24\ncols = 1",
                "name = \"rc\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24\ncols = 2",
            ),
            "op `column_condition` (binary): `rc` is [24, 2], expected [24, 1]",
        ),
        (
            damaged("function = \"greater\"", "function = \"greater_than\""),
            "op `greater_row` (binary): unknown function \"greater_than\"",
        ),
    ];
    for (text, said) in cases {
        let error = GraphSpec::parse(&text, "select-ops.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains(said), "{said}: {error}");
        assert!(error.contains("select-ops.toml"), "{error}");
    }
    // A condition of [2, 1] broadcasts neither as every row nor as one.
    let mut spec = GraphSpec::parse(WORKLOAD, "select-ops.toml").unwrap();
    let g = &mut spec.graph;
    let rc = g.values.iter().position(|v| v.name == "rc").unwrap();
    g.values[rc].rows = 2;
    let at = g
        .ops
        .iter()
        .position(|o| o.name == "column_condition")
        .unwrap();
    g.ops.remove(at);
    for (i, op) in g.ops.iter_mut().enumerate() {
        op.id = ipu_codegen::ids::OpId::from_index(i);
    }
    g.values[rc].role = ValueRole::Input;
    let error = g.check().unwrap_err();
    assert!(
        error.contains(
            "op `select_by_column` (select): `rc` is [2, 1], which does not broadcast to [24, 40]"
        ),
        "{error}"
    );
}

#[test]
fn a_boolean_input_binds_from_a_bool_npy_and_a_boolean_output_is_written_as_one() {
    use ipu_codegen::tensors::{Elements, Tensor, npy};
    let (sb, spec) = sandbox();
    let g = &spec.graph;
    let m = g.values.iter().find(|v| v.name == "m").unwrap();
    assert_eq!(m.dtype, ipu_codegen::ir::DType::Bool);
    // The seed draws ones and zeros for it.
    let seeded = &host_data(g, 5)[m.id.index()];
    assert!(seeded.iter().all(|&b| b == 0.0 || b == 1.0));
    assert!(seeded.contains(&0.0) && seeded.contains(&1.0));

    // x as f32 from a pattern; m true on the even columns.
    let x: Vec<f32> = (0..960)
        .map(|i| ((i * 29 % 97) as f32 - 48.0) / 50.0)
        .collect();
    let write = |name: &str, elements: Elements| {
        let path = sb.path(&format!("{name}.npy"));
        let t = Tensor {
            shape: vec![24, 40],
            elements,
        };
        std::fs::write(&path, npy::write(&t)).unwrap();
        format!("{name}={}", path.display())
    };
    let x_arg = write("x", Elements::F32(x.clone()));
    let m_arg = write("m", Elements::Bool((0..960).map(|i| i % 2 == 0).collect()));
    let out_dir = sb.path("out");
    let out = assert_pass(
        &sb,
        &[
            "run",
            "select-ops.toml",
            "--input",
            &x_arg,
            "--input",
            &m_arg,
            "--output-dir",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.contains("numericalTest=PASS"), "{out}");
    // `gt = x > t`, t the row graph_workload writes, as a bool array.
    let gt = npy::read(&std::fs::read(out_dir.join("gt.npy")).unwrap()).unwrap();
    assert_eq!(gt.shape, vec![24, 40]);
    let Elements::Bool(gt) = gt.elements else {
        panic!(
            "a boolean output is written as |b1: {:?}",
            gt.elements.type_name()
        )
    };
    let t = |c: usize| ((c * 37 % 101) as f32 - 50.0) / 64.0;
    for (i, &got) in gt.iter().enumerate() {
        let xi = half::f16::from_f32(x[i]).to_f32();
        let ti = half::f16::from_f32(t(i % 40)).to_f32();
        assert_eq!(got, xi > ti, "element {i}: {xi} > {ti}");
    }
    assert!(gt.contains(&true) && gt.contains(&false));

    // The same input as floats is refused, naming the tensor, the file and the type it takes.
    let floats = write("m_floats", Elements::F32(vec![1.0; 960]));
    let r = sb.run(&[
        "run",
        "select-ops.toml",
        "--input",
        &x_arg,
        "--input",
        &floats.replacen("m_floats=", "m=", 1),
    ]);
    r.assert_clean_failure();
    for said in [
        "\"m\"",
        "m_floats.npy",
        "holds f32",
        "[24, 40] bool",
        "bool data",
    ] {
        assert!(r.stderr.contains(said), "{said}: {}", r.stderr);
    }
}

#[test]
fn a_boolean_weight_or_boolean_partials_are_refused() {
    let weight = damaged(
        "name = \"s\"\ndtype = \"f16\"\nrole = \"weight\"",
        "name = \"s\"\ndtype = \"bool\"\nrole = \"weight\"",
    );
    let error = GraphSpec::parse(&weight, "select-ops.toml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "value `s`: a weight is f16, f32 or i64; a boolean constant is an f16 weight"
        ),
        "{error}"
    );
    let partials = damaged("partials = \"f32\"", "partials = \"bool\"");
    let error = GraphSpec::parse(&partials, "select-ops.toml")
        .unwrap_err()
        .to_string();
    assert!(error.contains("partials must be f16 or f32"), "{error}");
}

#[test]
fn select_finalist_verifier_rejects_a_select_vertex_with_its_values_swapped_or_one_short() {
    use ipu_codegen::driver::PhaseConfigs;
    use ipu_codegen::isa::VertexKind;
    use ipu_codegen::stages::{lower_mid, select_finalist};
    use ipu_codegen::target::Target;
    let spec = GraphSpec::parse(WORKLOAD, "select-ops.toml").unwrap();
    let target = Target::preset("mk2-1500").unwrap();
    let c = PhaseConfigs::default();
    let mid = lower_mid::lower_mid(&spec.graph, &target, &c.lower_mid).unwrap();
    let sel =
        select_finalist::select_finalist(&spec.graph, &mid, &target, &c.select_finalist).unwrap();
    assert_eq!(select_finalist::verify(&sel, &target), Vec::<String>::new());
    // The first select vertex, by compute set and position.
    let (cs, at) = (sel.compute_sets.iter().enumerate())
        .find_map(|(i, cs)| {
            (cs.vertices.iter())
                .position(|v| matches!(&v.kind, VertexKind::Vector(v) if v.operands.len() == 3))
                .map(|k| (i, k))
        })
        .expect("a select vertex");
    type Operands = Vec<(ipu_codegen::ir::Operand, ipu_codegen::isa::Spread)>;
    let damaged = |f: &dyn Fn(&mut Operands)| {
        let mut sel = sel.clone();
        let VertexKind::Vector(v) = &mut sel.compute_sets[cs].vertices[at].kind else {
            unreachable!()
        };
        f(&mut v.operands);
        select_finalist::verify(&sel, &target)
    };
    let step = sel.compute_sets[cs].step.to_string();
    let tile = sel.compute_sets[cs].vertices[at].tile.to_string();
    let swapped = damaged(&|o| o.swap(1, 2));
    assert!(
        swapped
            .iter()
            .any(|e| e.contains(&step) && e.contains(&tile) && e.contains("as its x")),
        "{swapped:?}"
    );
    let short = damaged(&|o| {
        o.pop();
    });
    assert!(
        short
            .iter()
            .any(|e| e.contains("computes select of 2 operands") && e.contains(&tile)),
        "{short:?}"
    );
}
