//! Data movement (`assemble`) end to end: a graph-spec workload with a 3-D transpose, a head
//! transpose, slices with step 2 along rows and columns, concats of an input and a computed value
//! along rows and along columns, an expand of a weight row, a ViT patch extraction feeding a matmul
//! and a class token (a weight) prepended to a computed value: built and run on the device with its
//! numerical check passing; each output checked in-process against a direct computation of its
//! indices, a corrupted element failing that check; `Graph::check` refusing overlapping pieces,
//! pieces outside their values, an unwritten output element and disagreeing ranks, naming the op.

mod common;
use common::{Sandbox, assert_pass};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::ir::{OpKind, ValueRole, read_ipuexe};
use ipu_codegen::numerics;
use ipu_codegen::progress::Silent;
use ipu_codegen::workload::{GraphSpec, graph_spec};
use std::collections::BTreeMap;

const WORKLOAD: &str = include_str!("workloads/data-movement.toml");

/// A sandbox holding the workload and its weights (deterministic values).
fn sandbox() -> (Sandbox, GraphSpec) {
    common::graph_workload(WORKLOAD, "data-movement")
}

#[test]
fn the_workload_round_trips_through_its_graph_spec() {
    let spec = GraphSpec::parse(WORKLOAD, "data-movement.toml").unwrap();
    let assembles = (spec.graph.ops.iter())
        .filter(|op| matches!(op.kind, OpKind::Assemble { .. }))
        .count();
    assert_eq!(assembles, 9);
    let text = graph_spec::to_toml(&spec.graph, "data-movement.safetensors");
    assert_eq!(
        GraphSpec::parse(&text, "data-movement.toml").unwrap().graph,
        spec.graph
    );
}

#[test]
fn every_data_movement_runs_on_the_device_and_passes_its_check() {
    let (sb, _) = sandbox();
    let out = assert_pass(&sb, &["run", "data-movement.toml"]);
    assert!(out.contains("workload=data-movement"), "{out}");
    let r = sb.run(&["plans", "data-movement.toml"]);
    r.assert_ok();
    assert!(r.stdout.contains("assemble 16x6, 1 pieces"), "{}", r.stdout);
}

/// Each output's elements as the move it implements says, from the host's data by name.
fn direct(name: &str, d: &BTreeMap<String, Vec<f32>>) -> Option<Vec<f32>> {
    let x = &d["x"];
    let y: Vec<f32> = x.iter().map(|v| -v).collect();
    let mut out = Vec::new();
    match name {
        // x [2, 6, 8] with perm [0, 2, 1].
        "transposed" => {
            for b in 0..2 {
                for j in 0..8 {
                    for i in 0..6 {
                        out.push(x[b * 48 + i * 8 + j]);
                    }
                }
            }
        }
        // [2, 3, 4, 8] (batch, token, head, dim) to [2, 4, 3, 8].
        "heads" => {
            let h = &d["heads_in"];
            for b in 0..2 {
                for head in 0..4 {
                    for t in 0..3 {
                        for e in 0..8 {
                            out.push(h[b * 96 + t * 32 + head * 8 + e]);
                        }
                    }
                }
            }
        }
        "every_other_row" => (0..12)
            .step_by(2)
            .for_each(|r| out.extend(&x[r * 8..r * 8 + 8])),
        "every_other_col" => {
            for r in 0..12 {
                out.extend((1..8).step_by(2).map(|c| x[r * 8 + c]));
            }
        }
        "rows_cat" => {
            out.extend(x);
            out.extend(&y);
        }
        "cols_cat" => {
            for r in 0..12 {
                out.extend(&x[r * 8..r * 8 + 8]);
                out.extend(&y[r * 8..r * 8 + 8]);
            }
        }
        "expanded" => (0..12).for_each(|_| out.extend(&d["row"])),
        // [1, 3, 8, 8] into 2x2 patches of 3x4x4.
        "patches" => {
            let img = &d["img"];
            for py in 0..2 {
                for px in 0..2 {
                    for c in 0..3 {
                        for ky in 0..4 {
                            for kx in 0..4 {
                                out.push(img[c * 64 + (py * 4 + ky) * 8 + px * 4 + kx]);
                            }
                        }
                    }
                }
            }
        }
        _ => return None,
    }
    Some(out)
}

#[test]
fn each_output_is_its_direct_computation_and_a_corrupted_element_is_caught() {
    let (sb, spec) = sandbox();
    sb.run(&["build", "data-movement.toml"]).assert_ok();
    let bytes = std::fs::read(sb.stages().join(spec.id()).join("model.ipuexe")).unwrap();
    let (_, package) = read_ipuexe(&bytes).unwrap();
    let graph = &package.graph;
    let host = host_data(graph, 5);
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&host).unwrap();
    let (_, outputs) = device.run(&host, &Silent).unwrap();
    let half = |v: f32| half::f16::from_f32(v).to_f32();
    let by_name: BTreeMap<String, Vec<f32>> = (graph.values.iter())
        .map(|v| {
            (
                v.name.clone(),
                host[v.id.index()].iter().map(|&x| half(x)).collect(),
            )
        })
        .collect();
    let reference = numerics::reference(graph, &host, &Silent);
    let mut checked = 0;
    for v in graph.values.iter().filter(|v| v.role == ValueRole::Output) {
        let mut output = outputs[&v.id].clone();
        let check = numerics::check(&output, &reference, v.id);
        assert!(check.pass, "{}: {check:?}", v.name);
        let expected = match direct(&v.name, &by_name) {
            Some(e) => e,
            // The class token's first row is the weight itself; the rest is a matmul's.
            None => {
                assert_eq!(v.name, "tokens");
                assert_eq!(&output[..16], &by_name["cls"][..], "tokens");
                continue;
            }
        };
        assert_eq!(output, expected, "{}", v.name);
        checked += 1;
        let i = output.len() / 3;
        output[i] += 1.0;
        assert_ne!(output, expected, "{}", v.name);
    }
    assert_eq!(checked, 8);
}

/// The graph with the `op`th assemble's first piece changed by `f`.
fn damaged(op: &str, f: impl FnOnce(&mut ipu_codegen::ir::Piece)) -> String {
    let mut spec = GraphSpec::parse(WORKLOAD, "data-movement.toml").unwrap();
    let g = &mut spec.graph;
    let k = g.ops.iter().position(|o| o.name == op).unwrap();
    let OpKind::Assemble { pieces } = &mut g.ops[k].kind else {
        panic!("{op} is an assemble")
    };
    f(&mut pieces[0]);
    g.check().unwrap_err()
}

#[test]
fn bad_pieces_are_refused_naming_the_op() {
    let cases = [
        // The second half of the row concat moved onto the first: they overlap.
        (
            damaged("concat_rows", |p| p.to.offset = 8),
            "op `concat_rows` (assemble): piece 1 writes element 96 of `rows_cat`",
        ),
        // A source row past x's last.
        (
            damaged("slice_rows", |p| p.from.offset = 9),
            "op `slice_rows` (assemble): piece 0 (from `x`): elements 9..=96 fall outside its 96",
        ),
        // An output index past the end.
        (
            damaged("expand", |p| p.to.offset = 1),
            "op `expand` (assemble): piece 0 (to `expanded`): elements 1..=96 fall outside its 96",
        ),
        // One row fewer: the last row is written by no piece.
        (
            damaged("slice_rows", |p| p.shape[0] = 5),
            "op `slice_rows` (assemble): no piece writes element 40 of `every_other_row` (row 5, \
             column 0)",
        ),
        (
            damaged("patchify", |p| {
                p.from.strides.pop();
            }),
            "op `patchify` (assemble): piece 0: shape [2, 2, 3, 4, 4] (rank 5, at most 16) with 4 \
             from strides",
        ),
    ];
    for (error, said) in cases {
        assert!(error.contains(said), "{said}: {error}");
    }
    // The graph spec refuses inputs that are not the pieces' values, naming the file and op.
    let text = WORKLOAD.replacen(
        "inputs = [\"cls\", \"embedded\"]",
        "inputs = [\"embedded\", \"cls\"]",
        1,
    );
    let error = GraphSpec::parse(&text, "data-movement.toml")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("op `class_token` (assemble): inputs must be the pieces' values"),
        "{error}"
    );
}

/// What a tile gathers and copies for its rows: a transpose's block reads a column band of every
/// source row and copies one piece; a slice's block reads only the rows it needs; an expand's
/// block reads its one row.
#[test]
fn a_row_block_gathers_only_what_its_pieces_read() {
    use ipu_codegen::ids::OpId;
    use ipu_codegen::ir::{AssembleOp, Piece, Rect, Strided};
    use ipu_codegen::isa::CopyPiece;
    let spec = GraphSpec::parse(WORKLOAD, "data-movement.toml").unwrap();
    let g = &spec.graph;
    let id = |name: &str| g.values.iter().find(|v| v.name == name).unwrap().id;
    let strided = |offset: u64, strides: &[i64]| Strided {
        offset,
        strides: strides.to_vec(),
    };
    let op = |x, shape: &[u32], from, to, (rows, cols)| AssembleOp {
        id: OpId::from_index(0),
        name: "a".to_string(),
        pieces: vec![Piece {
            x,
            shape: shape.to_vec(),
            from,
            to,
        }],
        out: id("transposed"),
        rows,
        cols,
        covers: Vec::new(),
    };
    // x [12, 8] transposed into [8, 12]; rows 2..5 are x's columns 2..5.
    let t = op(
        id("x"),
        &[8, 12],
        strided(0, &[1, 8]),
        strided(0, &[12, 1]),
        (8, 12),
    );
    let b = t.block(g, 2, 5);
    assert_eq!(b.gathers, vec![(id("x"), Rect::new(0, 12, 2, 5))]);
    assert_eq!(
        b.pieces,
        vec![CopyPiece {
            source: 0,
            shape: vec![3, 12],
            from: strided(0, &[1, 3]),
            to: strided(0, &[12, 1]),
        }]
    );
    // Every other row of x: output rows 2..4 are x's rows 4 and 6.
    let s = op(
        id("x"),
        &[6, 8],
        strided(0, &[16, 1]),
        strided(0, &[8, 1]),
        (6, 8),
    );
    let b = s.block(g, 2, 4);
    assert_eq!(b.gathers, vec![(id("x"), Rect::new(4, 7, 0, 8))]);
    assert_eq!(b.pieces[0].from, strided(0, &[16, 1]));
    // The expand's rows 5..9 read the one row.
    let e = op(
        id("row"),
        &[12, 8],
        strided(0, &[0, 1]),
        strided(0, &[8, 1]),
        (12, 8),
    );
    let b = e.block(g, 5, 9);
    assert_eq!(b.gathers, vec![(id("row"), Rect::new(0, 1, 0, 8))]);
    assert_eq!(b.pieces[0].shape, vec![4, 8]);
}
