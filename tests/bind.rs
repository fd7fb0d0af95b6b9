//! Data binds at run time: the seed is no part of a build; weights and inputs bound by name change the
//! output exactly as the device computes them from that data; every binding error is clean; damaged
//! .npy and .safetensors files are errors, never panics.

mod common;
use common::{SMALL, SMALL_ID, SMALL_SEED, Sandbox, assert_pass};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::ir::{Graph, Package, read_ipuexe};
use ipu_codegen::numerics;
use ipu_codegen::progress::Silent;
use ipu_codegen::tensors::{Elements, Tensor, npy, safetensors};
use std::path::PathBuf;

fn package(sb: &Sandbox) -> Package {
    let bytes = std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap();
    read_ipuexe(&bytes).unwrap().1
}

fn f16_tensor(graph: &Graph, name: &str, data: &[f32]) -> Tensor {
    let v = graph.values.iter().find(|v| v.name == name).unwrap();
    Tensor {
        shape: v.user_shape().iter().map(|&d| u64::from(d)).collect(),
        elements: Elements::F16(data.iter().map(|&x| half::f16::from_f32(x)).collect()),
    }
}

/// Every weight of `host` in a safetensors file, `skip` left out and `extra` added.
fn weights_file(
    sb: &Sandbox,
    graph: &Graph,
    host: &[Vec<f32>],
    skip: &str,
    extra: Option<(&str, Tensor)>,
    file: &str,
) -> PathBuf {
    let mut tensors: Vec<(String, Tensor)> = graph
        .values
        .iter()
        .filter(|v| v.role == ipu_codegen::ir::ValueRole::Weight && v.name != skip)
        .map(|v| {
            (
                v.name.clone(),
                f16_tensor(graph, &v.name, &host[v.id.index()]),
            )
        })
        .collect();
    tensors.extend(extra.map(|(n, t)| (n.to_string(), t)));
    let path = sb.path(file);
    std::fs::write(&path, safetensors::write(&tensors).unwrap()).unwrap();
    path
}

#[test]
fn another_seed_reruns_no_phase_and_changes_no_artifact() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let before = std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap();
    let r = sb.run(&["build", SMALL, "--seed", "8"]);
    r.assert_ok();
    assert!(r.phases_run().is_empty(), "ran {:?}", r.phases_run());
    assert!(r.stderr.contains("ran=0"), "{}", r.stderr);
    let r = sb.run(&["run", SMALL, "--seed", "8"]);
    r.assert_ok();
    assert!(r.phases_run().is_empty(), "ran {:?}", r.phases_run());
    assert!(
        r.stdout.contains(&format!("workload={SMALL_ID}-s8 ")),
        "{}",
        r.stdout
    );
    let after = std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap();
    assert!(before == after, "the package changed with the seed");
}

#[test]
fn bound_weights_and_inputs_give_the_devices_output_for_that_data() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let package = package(&sb);
    let graph = &package.graph;
    let seeded = host_data(graph, SMALL_SEED);
    // Every weight as seeded but one bias made 0.25 throughout; the input from another seed, as f32.
    let mut changed = seeded.clone();
    let bias = graph
        .values
        .iter()
        .find(|v| v.name == "block1.fc2.bias")
        .unwrap()
        .id;
    changed[bias.index()].iter_mut().for_each(|x| *x = 0.25);
    let x = graph.values.iter().find(|v| v.name == "x").unwrap();
    changed[x.id.index()] = host_data(graph, 99)[x.id.index()].clone();
    let weights = weights_file(&sb, graph, &changed, "", None, "changed.safetensors");
    let input = sb.path("x.npy");
    let x_tensor = Tensor {
        shape: x.user_shape().iter().map(|&d| u64::from(d)).collect(),
        elements: Elements::F32(changed[x.id.index()].clone()),
    };
    std::fs::write(&input, npy::write(&x_tensor)).unwrap();
    let out_dir = sb.path("out/nested");
    let out = assert_pass(
        &sb,
        &[
            "run",
            SMALL,
            "--weights",
            weights.to_str().unwrap(),
            "--input",
            &format!("x={}", input.display()),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.contains("output="), "{out}");
    let written =
        npy::read(&std::fs::read(out_dir.join("block1.fc2.biased.npy")).unwrap()).unwrap();
    assert_eq!(written.shape, vec![21, 40]);
    let Elements::F16(written) = written.elements else {
        panic!("an f16 output is written as <f2")
    };
    let written: Vec<f32> = written.iter().map(|x| x.to_f32()).collect();

    // Exactly what the device computes from the changed data...
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&changed).unwrap();
    let (_, streamed) = device.run(&changed, &Silent).unwrap();
    let out = graph
        .values
        .iter()
        .find(|v| v.role == ipu_codegen::ir::ValueRole::Output)
        .unwrap()
        .id;
    assert!(
        streamed[&out] == written,
        "the written output is the device's"
    );
    // ... within the tolerance of the reference of the changed data, and not of the seeded data's.
    let check = numerics::check(
        &written,
        &numerics::reference(graph, &changed, &Silent),
        out,
    );
    assert!(check.pass, "{check:?}");
    let check = numerics::check(&written, &numerics::reference(graph, &seeded, &Silent), out);
    assert!(
        !check.pass,
        "the seeded reference must not match: {check:?}"
    );
}

#[test]
fn binding_errors_name_the_tensor_and_the_file() {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let graph = package(&sb).graph;
    let host = host_data(&graph, SMALL_SEED);
    let weight = |name: &str| {
        f16_tensor(
            &graph,
            name,
            &host[graph
                .values
                .iter()
                .find(|v| v.name == name)
                .unwrap()
                .id
                .index()],
        )
    };
    let transposed = Tensor {
        shape: vec![72, 40],
        ..weight("block0.fc1.weight")
    };
    let integers = Tensor {
        shape: vec![1, 72],
        elements: Elements::I64(vec![0; 72]),
    };
    let missing = weights_file(
        &sb,
        &graph,
        &host,
        "block0.fc1.bias",
        None,
        "missing.safetensors",
    );
    let extra = weights_file(
        &sb,
        &graph,
        &host,
        "",
        Some(("block9.bias", weight("block0.fc1.bias"))),
        "extra.safetensors",
    );
    let input_in_weights = weights_file(
        &sb,
        &graph,
        &host,
        "",
        Some(("x", weight("x"))),
        "input_in_weights.safetensors",
    );
    let shaped = weights_file(
        &sb,
        &graph,
        &host,
        "block0.fc1.weight",
        Some(("block0.fc1.weight", transposed)),
        "shaped.safetensors",
    );
    let typed = weights_file(
        &sb,
        &graph,
        &host,
        "block0.fc1.bias",
        Some(("block0.fc1.bias", integers)),
        "typed.safetensors",
    );
    let short_x = sb.path("short.npy");
    std::fs::write(
        &short_x,
        npy::write(&Tensor {
            shape: vec![20, 40],
            elements: Elements::F16(vec![half::f16::ZERO; 800]),
        }),
    )
    .unwrap();
    let truncated = sb.path("truncated.npy");
    let good = npy::write(&weight("x"));
    std::fs::write(&truncated, &good[..good.len() - 3]).unwrap();
    let p = |p: &PathBuf| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec!["--weights".into(), p(&missing)],
            vec!["lacks weight \"block0.fc1.bias\"".into(), p(&missing)],
        ),
        (
            vec!["--weights".into(), p(&extra)],
            vec!["\"block9.bias\" is not a weight".into(), p(&extra)],
        ),
        (
            vec!["--weights".into(), p(&input_in_weights)],
            vec!["it is an input".into()],
        ),
        (
            vec!["--weights".into(), p(&shaped)],
            vec![
                "\"block0.fc1.weight\" has shape [72, 40]".into(),
                "[40, 72] f16".into(),
                p(&shaped),
            ],
        ),
        (
            vec!["--weights".into(), p(&typed)],
            vec![
                "\"block0.fc1.bias\" holds i64".into(),
                "f16 or f32 data".into(),
            ],
        ),
        (
            vec!["--input".into(), format!("y={}", p(&short_x))],
            vec!["takes no input \"y\"".into(), "its inputs: x".into()],
        ),
        (
            vec!["--input".into(), format!("x={}", p(&short_x))],
            vec!["\"x\" has shape [20, 40]".into(), "[21, 40] f16".into()],
        ),
        (
            vec!["--input".into(), format!("x={}", p(&truncated))],
            vec!["truncated.npy".into(), "needs 1680 bytes".into()],
        ),
        (
            vec![
                "--input".into(),
                format!("x={}", p(&short_x)),
                "--input".into(),
                format!("x={}", p(&short_x)),
            ],
            vec!["given twice".into()],
        ),
        (
            vec!["--input".into(), p(&short_x)],
            vec!["expected NAME=FILE.npy".into()],
        ),
        (
            vec!["--weights".into(), p(&short_x)],
            vec!["not a valid safetensors file".into(), p(&short_x)],
        ),
        (
            vec!["--input".into(), "x=absent.npy".into()],
            vec!["absent.npy".into()],
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run", SMALL];
        args.extend(flags.iter().map(String::as_str));
        let r = sb.run(&args);
        r.assert_clean_failure();
        for e in expected {
            assert!(
                r.stderr.contains(&e),
                "{flags:?}: missing {e:?} in\n{}",
                r.stderr
            );
        }
    }
}

#[test]
fn damaged_files_are_errors_never_panics() {
    let npy_bytes = npy::write(&Tensor {
        shape: vec![3, 2],
        elements: Elements::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    });
    let st_bytes = safetensors::write(&[
        (
            "a".to_string(),
            Tensor {
                shape: vec![2],
                elements: Elements::I64(vec![1, 2]),
            },
        ),
        (
            "b".to_string(),
            Tensor {
                shape: vec![1, 3],
                elements: Elements::F16(vec![half::f16::ONE; 3]),
            },
        ),
    ])
    .unwrap();
    for n in 0..npy_bytes.len() {
        assert!(npy::read(&npy_bytes[..n]).is_err(), "npy truncated to {n}");
    }
    for n in 0..st_bytes.len() {
        assert!(
            safetensors::read(&st_bytes[..n]).is_err(),
            "safetensors truncated to {n}"
        );
    }
    // Every bit of every byte flipped: an error or a tensor, never a panic.
    for (bytes, read) in [
        (
            &npy_bytes,
            (|b: &[u8]| npy::read(b).is_ok()) as fn(&[u8]) -> bool,
        ),
        (&st_bytes, |b: &[u8]| safetensors::read(b).is_ok()),
    ] {
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                read(&damaged);
            }
        }
    }
    // Lying lengths and huge shapes are checked before anything is allocated.
    let mut huge = b"\x93NUMPY\x01\x00".to_vec();
    let header =
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }\n";
    huge.extend_from_slice(&(header.len() as u16).to_le_bytes());
    huge.extend_from_slice(header);
    assert!(npy::read(&huge).is_err());
    let mut lying = st_bytes.clone();
    lying[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(safetensors::read(&lying).is_err());
    let header = br#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#;
    let mut shaped = (header.len() as u64).to_le_bytes().to_vec();
    shaped.extend_from_slice(header);
    shaped.extend_from_slice(&[0; 8]);
    assert!(safetensors::read(&shaped).is_err());
}
