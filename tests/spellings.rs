//! Encoders in every spelling the front end canonicalises (`tests/models/spell_*.onnx`, written by
//! `make_spellings.py` with onnxruntime's outputs for fixed inputs beside each) and a ViT with a Conv
//! patch embedding, class token and split LayerNorm at opset 14 (`vit_tiny.onnx`): each imports, runs
//! on the device with the model's own inputs and weights, and matches onnxruntime within 1 % relative
//! RMS error on every float output. A changed weight makes the comparison fail. So does
//! `select_activations.onnx` (`make_select.py`: `Where(Greater(h, t), h, g)` and logic on
//! activations, a boolean input), whose boolean output must equal onnxruntime's exactly; a changed
//! threshold fails both.

mod common;
use common::Sandbox;
use ipu_codegen::tensors::{Elements, Tensor, npy, safetensors as st};
use std::path::PathBuf;

/// The spellings that import and match, each a file stem under `tests/models/`.
const MATCHING: [&str; 24] = [
    "spell_baseline",
    "spell_bool_mask",
    "spell_bool_mask_not",
    "spell_dequantize_linear",
    "spell_fused_qkv",
    "spell_fused_qkv_slice",
    "spell_gelu_erf_variants",
    "spell_gelu_op",
    "spell_gelu_op_tanh",
    "spell_gelu_sigmoid",
    "spell_gelu_tanh",
    "spell_gelu_tanh_cube",
    "spell_gemm",
    "spell_int8_weights",
    "spell_mask_where_scores",
    "spell_older_opset11",
    "spell_older_opset11_fused_qkv",
    "spell_position_embedding_const",
    "spell_scale_q",
    "spell_scale_qk",
    "spell_split_layernorm",
    "spell_split_layernorm_opset18",
    "spell_transposed_weight",
    "vit_tiny",
];

fn model(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models")
        .join(name)
}

fn expected(stem: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(model(&format!("{stem}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn bools(v: &serde_json::Value) -> Vec<bool> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_bool().unwrap())
        .collect()
}

/// Relative RMS error of `got` against `want`.
fn relative_rms(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let diff: f64 = got.iter().zip(want).map(|(a, b)| (a - b).powi(2)).sum();
    let norm: f64 = want.iter().map(|b| b * b).sum();
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

/// Imports `stem` at its inputs' shapes into `dir`, writes its inputs as `.npy` files there and
/// returns the `run` arguments that bind them.
fn import(sb: &Sandbox, stem: &str, dir: &str) -> Vec<String> {
    let want = expected(stem);
    let mut import = vec![
        "import".to_string(),
        model(&format!("{stem}.onnx")).display().to_string(),
    ];
    let mut run = Vec::new();
    for (name, t) in want["inputs"].as_object().unwrap() {
        let shape: Vec<u64> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        import.extend(["--shape".to_string(), format!("{name}={}", dims.join("x"))]);
        let elements = match t["dtype"].as_str().unwrap() {
            "int64" => Elements::I64(floats(t).iter().map(|&x| x as i64).collect()),
            "bool" => Elements::Bool(bools(t)),
            _ => Elements::F32(floats(t).iter().map(|&x| x as f32).collect()),
        };
        let path = sb.path(&format!("{dir}/{name}.npy"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, npy::write(&Tensor { shape, elements })).unwrap();
        run.extend(["--input".to_string(), format!("{name}={}", path.display())]);
    }
    import.extend([
        "-o".to_string(),
        sb.path(&format!("{dir}/{stem}.toml")).display().to_string(),
    ]);
    let args: Vec<&str> = import.iter().map(String::as_str).collect();
    sb.run(&args).assert_ok();
    run
}

/// Runs the imported `stem` with `weights` and returns `(output, relative RMS error)` for every
/// float output the model has, and `(output, fraction of elements that differ)` for every boolean
/// one.
fn compare(
    sb: &Sandbox,
    stem: &str,
    dir: &str,
    inputs: &[String],
    weights: &str,
) -> Vec<(String, f64)> {
    let out = sb.path(&format!("{dir}/out-{weights}"));
    let mut args = vec![
        "run".to_string(),
        sb.path(&format!("{dir}/{stem}.toml")).display().to_string(),
        "--weights".to_string(),
        sb.path(&format!("{dir}/{weights}")).display().to_string(),
        "--output-dir".to_string(),
        out.display().to_string(),
    ];
    args.extend(inputs.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sb.run(&args).assert_ok();
    let want = expected(stem);
    let mut errors = Vec::new();
    for (name, t) in want["outputs"].as_object().unwrap() {
        let read = || npy::read(&std::fs::read(out.join(format!("{name}.npy"))).unwrap()).unwrap();
        if t["dtype"].as_str() == Some("bool") {
            let Elements::Bool(got) = read().elements else {
                panic!("{stem} {name}: a boolean output is written as bool")
            };
            let want = bools(t);
            assert_eq!(got.len(), want.len(), "{stem} {name}");
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            errors.push((name.clone(), differ as f64 / want.len() as f64));
            continue;
        }
        if t["dtype"].as_str() != Some("float32") {
            continue;
        }
        let t_got = read();
        let got: Vec<f64> = match t_got.elements {
            Elements::F16(x) => x.iter().map(|v| v.to_f64()).collect(),
            Elements::F32(x) => x.iter().map(|&v| f64::from(v)).collect(),
            other => panic!("{stem} {name}: {}", other.type_name()),
        };
        errors.push((name.clone(), relative_rms(&got, &floats(t))));
    }
    assert!(!errors.is_empty(), "{stem}: no float output compared");
    errors
}

#[test]
fn every_spelling_imports_and_matches_onnxruntime() {
    let sb = Sandbox::new();
    let mut failures = Vec::new();
    for stem in MATCHING {
        let inputs = import(&sb, stem, stem);
        for (name, error) in compare(&sb, stem, stem, &inputs, &format!("{stem}.safetensors")) {
            println!("{stem} {name}: relative RMS error {error:.5}");
            if error > 0.01 {
                failures.push(format!("{stem} {name}: {error}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The comparison above can fail: the split-LayerNorm encoder run with its 1-D weights (biases,
/// the norms' gammas and betas) scaled by 1.5 is off by more than 1 %.
#[test]
fn changed_weights_fail_the_comparison() {
    let sb = Sandbox::new();
    let stem = "spell_split_layernorm";
    let inputs = import(&sb, stem, "m");
    let path = sb.path(&format!("m/{stem}.safetensors"));
    let mut tensors = st::read(&std::fs::read(&path).unwrap()).unwrap();
    let mut changed = 0;
    for (_, t) in tensors.iter_mut().filter(|(_, t)| t.shape.len() == 1) {
        if let Elements::F32(v) = &mut t.elements {
            v.iter_mut().for_each(|x| *x *= 1.5);
            changed += 1;
        }
    }
    assert!(changed > 0);
    std::fs::write(
        sb.path("m/changed.safetensors"),
        st::write(&tensors).unwrap(),
    )
    .unwrap();
    let errors = compare(&sb, stem, "m", &inputs, "changed.safetensors");
    assert!(errors.iter().all(|(_, e)| *e > 0.01), "{errors:?}");
}

/// Where on a comparison of activations, And/Not of comparisons, and Where on a boolean input: the
/// float outputs within 1 % of onnxruntime's, the boolean one equal to it; the threshold `t` made
/// larger by 0.5 changes both beyond that.
#[test]
fn where_on_activations_matches_onnxruntime_and_a_changed_threshold_does_not() {
    let sb = Sandbox::new();
    let stem = "select_activations";
    let inputs = import(&sb, stem, "m");
    let errors = compare(&sb, stem, "m", &inputs, &format!("{stem}.safetensors"));
    let error =
        |errors: &[(String, f64)], name: &str| errors.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(error(&errors, "both"), 0.0, "{errors:?}");
    for name in ["z", "out"] {
        assert!(error(&errors, name) < 0.01, "{errors:?}");
    }
    let path = sb.path(&format!("m/{stem}.safetensors"));
    let mut tensors = st::read(&std::fs::read(&path).unwrap()).unwrap();
    let (_, t) = tensors.iter_mut().find(|(n, _)| n == "t").unwrap();
    let Elements::F32(v) = &mut t.elements else {
        panic!("the threshold is f32")
    };
    v.iter_mut().for_each(|x| *x += 0.5);
    std::fs::write(
        sb.path("m/changed.safetensors"),
        st::write(&tensors).unwrap(),
    )
    .unwrap();
    let changed = compare(&sb, stem, "m", &inputs, "changed.safetensors");
    assert!(error(&changed, "both") > 0.0, "{changed:?}");
    for name in ["z", "out"] {
        assert!(error(&changed, name) > 0.01, "{changed:?}");
    }
}
