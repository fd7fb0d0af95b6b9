//! Every decoder of stored or user-supplied bytes, fed random bytes and random mutations of valid
//! inputs for a fixed budget: store artifacts of every kind, `model.ipuexe`, action entries, stage
//! records, workload TOML, ONNX models, `.safetensors` and `.npy` files; and packages that still
//! decode after a mutation, run on the device. None may panic; each either reads or says why not.

mod common;
use common::{Rng, SMALL, SMALL_ID, Sandbox};
use ipu_codegen::driver::read_record;
use ipu_codegen::exchange::Schedule;
use ipu_codegen::ir::{
    ExchangeStorage, Exchanges, Graph, Mid, Package, Placement, Selected, TileCode, read_ipuexe,
};
use ipu_codegen::progress::Silent;
use ipu_codegen::store::{self, ActionEntry, Artifact, ContentHash};
use ipu_codegen::workload::WorkloadSpec;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Byte mutations for fuzzing.
trait Mutate {
    fn bytes(&mut self, len: usize) -> Vec<u8>;
    fn poke(&mut self, valid: &[u8]) -> Vec<u8>;
    fn mutate(&mut self, valid: &[u8]) -> Vec<u8>;
}

impl Mutate for Rng {
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
    /// `valid` with one to four random edits: a byte flipped, set to an extreme, a cut, a
    /// duplicated run.
    /// `valid` with one byte changed: what most often still decodes, with a field changed.
    fn poke(&mut self, valid: &[u8]) -> Vec<u8> {
        let mut b = valid.to_vec();
        let at = self.below(b.len());
        b[at] = match self.below(3) {
            0 => b[at] ^ (1 << self.below(8)),
            1 => [0x00, 0xff, 0x7f, 0x80][self.below(4)],
            _ => self.next() as u8,
        };
        b
    }

    fn mutate(&mut self, valid: &[u8]) -> Vec<u8> {
        let mut b = valid.to_vec();
        for _ in 0..1 + self.below(4) {
            if b.is_empty() {
                break;
            }
            let at = self.below(b.len());
            match self.below(5) {
                0 => b[at] ^= 1 << self.below(8),
                1 => b[at] = [0x00, 0xff, 0x7f, 0x80, 0xcf][self.below(5)],
                2 => b.truncate(at),
                3 => {
                    let run: Vec<u8> = b[at..(at + 1 + self.below(16)).min(b.len())].to_vec();
                    b.splice(at..at, run);
                }
                _ => b[at] = self.next() as u8,
            }
        }
        b
    }
}

/// Runs `decode` on `cases` inputs (random bytes, then mutations of each of `valid`); the number
/// decoded, or the panics with the inputs' seeds.
fn fuzz(
    name: &str,
    seed: u64,
    cases: usize,
    valid: &[Vec<u8>],
    mut decode: impl FnMut(&[u8]) -> bool,
) -> usize {
    let mut rng = Rng(seed);
    let mut panics = Vec::new();
    let mut accepted = 0;
    for case in 0..cases {
        let input = if case % 8 == 0 || valid.is_empty() {
            let len = rng.below(512);
            rng.bytes(len)
        } else {
            let v = &valid[case % valid.len()];
            rng.mutate(v)
        };
        match catch_unwind(AssertUnwindSafe(|| decode(&input))) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(_) => panics.push(case),
        }
    }
    assert!(
        panics.is_empty(),
        "{name}: {} of {cases} inputs panicked (seed {seed}, cases {panics:?})",
        panics.len()
    );
    eprintln!(
        "{name}: {cases} inputs, {accepted} read, {} panics",
        panics.len()
    );
    accepted
}

/// The small MLP built in a sandbox: its stage records' outputs, as (kind, bytes).
fn built() -> (Sandbox, Vec<(String, Vec<u8>)>) {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    let mut objects = Vec::new();
    for phase in ipu_codegen::driver::PIPELINE {
        let hash = sb.record(SMALL_ID, phase.name())["output"]
            .as_str()
            .unwrap()
            .to_string();
        objects.push((
            phase.output().name().to_string(),
            std::fs::read(sb.object_path(&hash)).unwrap(),
        ));
    }
    (sb, objects)
}

fn decodes<A: Artifact>(bytes: &[u8]) -> bool {
    store::decode::<A>(bytes, &ContentHash::of(bytes)).is_ok()
}

#[test]
fn store_artifacts_of_every_kind_decode_or_are_refused() {
    let (_sb, objects) = built();
    let valid: Vec<Vec<u8>> = objects.iter().map(|(_, b)| b.clone()).collect();
    type Decoder = fn(&[u8]) -> bool;
    let decoders: [(&str, Decoder); 9] = [
        ("graph", decodes::<Graph>),
        ("mid", decodes::<Mid>),
        ("selected", decodes::<Selected>),
        ("exchange_storage", decodes::<ExchangeStorage>),
        ("exchanges", decodes::<Exchanges>),
        ("placement", decodes::<Placement>),
        ("tile_code", decodes::<TileCode>),
        ("package", decodes::<Package>),
        ("schedule", decodes::<Schedule>),
    ];
    for (i, (name, decode)) in decoders.into_iter().enumerate() {
        fuzz(name, 0x5eed + i as u64, 400, &valid, decode);
    }
}

#[test]
fn application_packages_profiles_action_entries_and_stage_records_decode_or_are_refused() {
    let (sb, _) = built();
    let ipuexe = std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap();
    fuzz(
        "model.ipuexe",
        11,
        300,
        std::slice::from_ref(&ipuexe),
        |b| read_ipuexe(b).is_ok(),
    );
    sb.run(&["run", SMALL]).assert_ok();
    let profile = std::fs::read(sb.stages().join(SMALL_ID).join("execution.ipuprofile")).unwrap();
    // Whatever decodes is then checked and reported, as `report` does; only the unchanged file reads.
    let changed_read = fuzz(
        "execution.ipuprofile",
        14,
        1000,
        std::slice::from_ref(&profile),
        |b| {
            let Ok(e) = ipu_codegen::report::read_profile(b) else {
                return false;
            };
            let _ = ipu_codegen::report::check(&e);
            let _ = ipu_codegen::report::Summary::of(&e).text();
            let _ = ipu_codegen::report::html(&e, Err("none"));
            b != profile.as_slice()
        },
    );
    assert_eq!(changed_read, 0, "a changed profile passed its hash");
    let entries: Vec<Vec<u8>> = walkdir::WalkDir::new(sb.cache().join("actions"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    let key = ContentHash([7; 32]);
    fuzz("action entry", 12, 2000, &entries, |b| {
        ActionEntry::parse(b, &key).is_ok()
    });
    let records: Vec<Vec<u8>> = ipu_codegen::driver::PIPELINE
        .iter()
        .map(|p| {
            std::fs::read(
                sb.stages()
                    .join(SMALL_ID)
                    .join(format!("{}.json", p.name())),
            )
            .unwrap()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("emit.json");
    let read = fuzz("stage record", 13, 1000, &records, |b| {
        std::fs::write(&path, b).unwrap();
        read_record(&path).is_ok()
    });
    // A mutation read as a record changed nothing it says (only spacing).
    let originals: Vec<_> = records
        .iter()
        .map(|b| serde_json::from_slice::<serde_json::Value>(b).unwrap())
        .collect();
    let mut rng = Rng(13);
    for _ in 0..1000 {
        let which = rng.below(records.len());
        let b = rng.mutate(&records[which]);
        std::fs::write(&path, &b).unwrap();
        if read_record(&path).is_ok() {
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert!(
                originals.contains(&v),
                "a changed record was read:\n{}",
                String::from_utf8_lossy(&b)
            );
        }
    }
    assert!(read < 1000);
}

#[test]
fn workload_toml_onnx_safetensors_and_npy_decode_or_are_refused() {
    let presets: Vec<Vec<u8>> = ipu_codegen::workload::presets()
        .iter()
        .map(|name| {
            ipu_codegen::workload::preset_text(name)
                .unwrap()
                .into_bytes()
        })
        .collect();
    assert!(presets.len() >= 6);
    fuzz("workload TOML", 21, 3000, &presets, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return false;
        };
        WorkloadSpec::parse(text, "fuzz").is_ok_and(|spec| spec.import().is_ok())
    });
    let model = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/encoder.onnx"),
    )
    .unwrap();
    let config = ipu_codegen::onnx::ImportConfig {
        external: Default::default(),
        name: "encoder".to_string(),
        model: "encoder".to_string(),
        shapes: vec![
            ("input_ids".to_string(), vec![1, 8]),
            ("attention_mask".to_string(), vec![1, 8]),
        ],
    };
    assert!(ipu_codegen::onnx::import(&model, &config).is_ok());
    fuzz("ONNX model", 22, 300, std::slice::from_ref(&model), |b| {
        ipu_codegen::onnx::import(b, &config).is_ok()
    });
    use ipu_codegen::tensors::{Elements, Tensor, npy, safetensors};
    let tensor = Tensor {
        shape: vec![2, 3],
        elements: Elements::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    };
    let st = safetensors::write(&[("w".to_string(), tensor.clone())]).unwrap();
    fuzz("safetensors", 23, 3000, &[st], |b| {
        safetensors::read(b).is_ok()
    });
    fuzz("npy", 24, 3000, &[npy::write(&tensor)], |b| {
        npy::read(b).is_ok()
    });
}

#[test]
fn mutated_packages_that_still_decode_fault_cleanly_on_the_device() {
    use ipu_codegen::device::{Device, host_data};
    let (_sb, objects) = built();
    let package = &objects.last().unwrap().1;
    let mut rng = Rng(31);
    let (mut decoded, mut ran, mut faulted, mut panics) = (0, 0, 0, Vec::new());
    for case in 0..400 {
        let mutated = rng.poke(package);
        let Ok(p) = store::decode::<Package>(&mutated, &ContentHash::of(&mutated)) else {
            continue;
        };
        decoded += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let host = host_data(&p.graph, 1);
            let mut device = Device::load(p.clone())?;
            device.initialize(&host)?;
            device.run(&host, &Silent).map(|_| ())
        }));
        match outcome {
            Ok(Ok(())) => ran += 1,
            Ok(Err(_)) => faulted += 1,
            Err(_) => panics.push(case),
        }
    }
    assert!(
        panics.is_empty(),
        "{} of {decoded} decoded mutations panicked on the device (seed 31, cases {panics:?})",
        panics.len()
    );
    assert!(decoded > 100, "only {decoded} mutations decoded");
    eprintln!(
        "device: {decoded} decoded mutations, {ran} ran, {faulted} faulted, {} panics",
        panics.len()
    );
}

/// The front end's passes (folding, every canonicalisation, the op-by-op and movement lowering) on
/// mutated models of every spelling and the ViT, and on the encoder at random input shapes: each
/// imports or is refused, never panics.
#[test]
fn the_front_end_s_passes_import_or_refuse_mutated_models_and_shapes() {
    use ipu_codegen::onnx::{ImportConfig, import};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models");
    let text = [("input_ids", 2), ("attention_mask", 2)];
    let models = [
        ("spell_split_layernorm", &text[..]),
        ("spell_bool_mask", &text[..]),
        ("spell_int8_weights", &text[..]),
        ("spell_dequantize_linear", &text[..]),
        ("spell_fused_qkv", &text[..]),
        ("spell_gemm", &text[..]),
        ("spell_gelu_tanh", &text[..]),
        ("spell_scale_qk", &text[..]),
        ("vit_tiny", &[("pixel_values", 4)][..]),
    ];
    for (i, (stem, inputs)) in models.iter().enumerate() {
        let bytes = std::fs::read(dir.join(format!("{stem}.onnx"))).unwrap();
        let shape = |rank: usize| match rank {
            4 => vec![1, 3, 32, 32],
            _ => vec![1, 16],
        };
        let config = ImportConfig {
            external: Default::default(),
            name: stem.to_string(),
            model: stem.to_string(),
            shapes: inputs
                .iter()
                .map(|&(n, r)| (n.to_string(), shape(r)))
                .collect(),
        };
        let mut rng = Rng(0xf0 + i as u64);
        let mut panics = Vec::new();
        for case in 0..60 {
            let input = if case % 2 == 0 {
                rng.poke(&bytes)
            } else {
                rng.mutate(&bytes)
            };
            if catch_unwind(AssertUnwindSafe(|| import(&input, &config))).is_err() {
                panics.push(case);
            }
        }
        assert!(panics.is_empty(), "{stem}: mutations {panics:?} panicked");
    }
    let encoder = std::fs::read(dir.join("encoder.onnx")).unwrap();
    let mut rng = Rng(0xf00d);
    for case in 0..60 {
        let (b, t) = (rng.below(4) as u32, rng.below(70) as u32);
        let config = ImportConfig {
            external: Default::default(),
            name: "e".to_string(),
            model: "e".to_string(),
            shapes: vec![
                ("input_ids".to_string(), vec![b, t]),
                (
                    "attention_mask".to_string(),
                    vec![b, t + (case % 3 == 0) as u32],
                ),
            ],
        };
        let ran = catch_unwind(AssertUnwindSafe(|| import(&encoder, &config)));
        assert!(ran.is_ok(), "the encoder at {b}x{t} (case {case}) panicked");
    }
}
