//! The general vector operations end to end: a graph-spec workload using every unary, binary,
//! reduce and softmax function but the predicates (`tests/select_ops.rs` has those, and select) (binary operands whole and spread as a row, a column and a value, on
//! either side), a bias add, GELU and add that no matmul fuses, and a matmul reading a vector
//! operator's result, built and run on the device with its numerical check passing and a corrupted
//! result failing it; the graph checks and the graph spec refusing bad shapes and attributes,
//! naming the op.

mod common;
use common::{Sandbox, assert_pass};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::ir::{OpKind, ValueRole, read_ipuexe};
use ipu_codegen::numerics;
use ipu_codegen::progress::Silent;
use ipu_codegen::workload::{GraphSpec, graph_spec};

const WORKLOAD: &str = include_str!("workloads/vector-ops.toml");

/// A sandbox holding the workload and its weights (deterministic values).
fn sandbox() -> (Sandbox, GraphSpec) {
    common::graph_workload(WORKLOAD, "vector-ops")
}

#[test]
fn the_workload_uses_every_function_and_standalone_epilogue_operations() {
    let spec = GraphSpec::parse(WORKLOAD, "vector-ops.toml").unwrap();
    let kinds: Vec<String> = (spec.graph.ops.iter())
        .map(|op| match &op.kind {
            OpKind::Unary { function, .. } => format!("unary {}", function.name()),
            OpKind::Binary { function, .. } => format!("binary {}", function.name()),
            OpKind::Reduce { function, .. } => format!("reduce {}", function.name()),
            k => k.name().to_string(),
        })
        .collect();
    // The predicates (the comparisons, is_nan, is_inf) are tests/select_ops.rs's.
    use ipu_codegen::ir::{BinaryFn, UnaryFn};
    for f in UnaryFn::PLAIN {
        if !matches!(f, UnaryFn::IsNan | UnaryFn::IsInf) {
            assert!(kinds.contains(&format!("unary {}", f.name())), "{f:?}");
        }
    }
    for f in BinaryFn::ALL.into_iter().filter(|f| !f.compares()) {
        assert!(kinds.contains(&format!("binary {}", f.name())), "{f:?}");
    }
    for k in [
        "unary pow",
        "reduce sum",
        "reduce mean",
        "reduce max",
        "softmax",
        "add_bias",
        "gelu_tanh",
        "gelu_erf",
        "add",
        "matmul",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k}");
    }
    // Written back, the spec reads as the same graph.
    let text = graph_spec::to_toml(&spec.graph, "vector-ops.safetensors");
    assert_eq!(
        GraphSpec::parse(&text, "vector-ops.toml").unwrap().graph,
        spec.graph
    );
}

#[test]
fn every_vector_operation_runs_on_the_device_and_passes_its_check() {
    let (sb, _) = sandbox();
    let out = assert_pass(&sb, &["run", "vector-ops.toml"]);
    assert!(out.contains("workload=vector-ops"), "{out}");
    // The standalone bias add, GELU and add are vector operators, one per operation.
    let r = sb.run(&["plans", "vector-ops.toml"]);
    r.assert_ok();
    for shape in [
        "vector binary add 24x40",
        "vector unary gelu_tanh 24x40",
        "vector softmax 24x40",
    ] {
        assert!(r.stdout.contains(shape), "{shape}: {}", r.stdout);
    }
}

#[test]
fn a_corrupted_vector_result_fails_the_check() {
    let (sb, spec) = sandbox();
    sb.run(&["build", "vector-ops.toml"]).assert_ok();
    let id = spec.id();
    let bytes = std::fs::read(sb.stages().join(&id).join("model.ipuexe")).unwrap();
    let (_, package) = read_ipuexe(&bytes).unwrap();
    let host = host_data(&package.graph, 5);
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&host).unwrap();
    let (_, outputs) = device.run(&host, &Silent).unwrap();
    let reference = numerics::reference(&package.graph, &host, &Silent);
    for v in package
        .graph
        .values
        .iter()
        .filter(|v| v.role == ValueRole::Output)
    {
        let mut output = outputs[&v.id].clone();
        let check = numerics::check(&output, &reference, v.id);
        assert!(check.pass, "{}: {check:?}", v.name);
        let i = output.len() / 3;
        output[i] =
            half::f16::from_f64(f64::from(output[i]) + 1.5 * check.tolerance + 0.01).to_f32();
        assert!(
            !numerics::check(&output, &reference, v.id).pass,
            "{}",
            v.name
        );
    }
}

/// The spec with `from` replaced by `to` (which must occur).
fn damaged(from: &str, to: &str) -> String {
    assert!(WORKLOAD.contains(from), "{from}");
    WORKLOAD.replacen(from, to, 1)
}

#[test]
fn bad_shapes_and_attributes_are_refused_naming_the_op() {
    let cases = [
        // A row of the wrong length does not broadcast.
        (
            damaged(
                "name = \"bias\"\ndtype = \"f16\"\nrole = \"weight\"\nrows = 1\ncols = 40",
                "name = \"bias\"\ndtype = \"f16\"\nrole = \"weight\"\nrows = 1\ncols = 39",
            ),
            "op `bias_alone` (add_bias)",
        ),
        // A reduction's output is one value per row.
        (
            damaged(
                "name = \"rs\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24\ncols = 1",
                "name = \"rs\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24\ncols = 2",
            ),
            "op `row_sum` (reduce): `rs` is [24, 2], expected [24, 1]",
        ),
        (
            damaged(
                "name = \"rs\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24\ncols = 1",
                "name = \"rs\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 23\ncols = 1",
            ),
            "op `row_sum` (reduce)",
        ),
        (
            damaged(
                "name = \"sm\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 24",
                "name = \"sm\"\ndtype = \"f16\"\nrole = \"intermediate\"\nrows = 25",
            ),
            "op `softmax` (softmax): `sm` is [25, 40], expected [24, 40]",
        ),
        (
            damaged("function = \"sqrt\"", "function = \"cbrt\""),
            "op `sqrt` (unary): unknown function \"cbrt\"",
        ),
        (
            damaged("exponent = 3.0", "exponent = nan"),
            "op `cube` (unary): exponent = NaN must be finite",
        ),
        (
            damaged("function = \"pow\"\nexponent = 3.0", "function = \"pow\""),
            "op `cube` (unary): attribute exponent is missing",
        ),
        (
            damaged("function = \"div\"", "function = \"div\"\nexponent = 2.0"),
            "op `div` (binary): attribute exponent does not apply to binary",
        ),
        (
            damaged("function = \"mean\"", "function = \"median\""),
            "op `row_mean` (reduce): unknown function \"median\"",
        ),
        (
            damaged(
                "kind = \"softmax\"",
                "kind = \"softmax\"\nfunction = \"exp\"",
            ),
            "op `softmax` (softmax): attribute function does not apply to softmax",
        ),
    ];
    for (text, said) in cases {
        let error = GraphSpec::parse(&text, "vector-ops.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains(said), "{said}: {error}");
        assert!(error.contains("vector-ops.toml"), "{error}");
    }
}

#[test]
fn a_binary_operand_that_does_not_broadcast_is_named() {
    let mut spec = GraphSpec::parse(WORKLOAD, "vector-ops.toml").unwrap();
    let g = &mut spec.graph;
    // `rs` ([24, 1]) made [2, 1]: neither every row nor one.
    let rs = g.values.iter().position(|v| v.name == "rs").unwrap();
    g.values[rs].rows = 2;
    let error = g.check().unwrap_err();
    assert!(error.contains("op `row_sum` (reduce)"), "{error}");
    g.values[rs].rows = 24;
    g.values[rs].cols = 3;
    let error = g.check().unwrap_err();
    assert!(
        error.contains("`rs` is [24, 3], expected [24, 1]"),
        "{error}"
    );
    // A binary operand of [40, 16] against [24, 40].
    g.values[rs].cols = 1;
    g.check().unwrap();
    let less = g.ops.iter().position(|o| o.name == "less_sum").unwrap();
    let w = g.values.iter().find(|v| v.name == "w").unwrap().id;
    let OpKind::Binary { a, function, .. } = g.ops[less].kind else {
        panic!("less_sum is binary")
    };
    g.ops[less].kind = OpKind::Binary { a, b: w, function };
    let error = g.check().unwrap_err();
    assert!(
        error.contains(
            "op `less_sum` (binary): `p1` is [24, 40], which does not broadcast to [40, 40]"
        ),
        "{error}"
    );
}
