//! The driver's rules on their own: the table's consistency, action keys, the staleness rule, the
//! adapters' access to artifacts, the verifiers through the table and the run figures. Each rule has
//! a case that keeps it and one that breaks it.

use super::phases::canonical;
use super::*;
use crate::device::{Device, host_data};
use crate::ir::{Exchanges, Mid, Package, Placement, Selected, ValueRole, read_ipuexe};
use crate::numerics;
use crate::stages::place_storage::PlacementOrder;
use crate::stages::select_finalist::{self, MappingChoice, PassedOver};
use crate::store::LocalStore;
use crate::workload::WorkloadSpec;

fn phase(name: &str) -> Phase {
    Phase::parse(name).unwrap_or_else(|| panic!("no phase {name}"))
}

fn hash(text: &str) -> ContentHash {
    ContentHash::of(text.as_bytes())
}

// ---- the table ----

#[test]
fn the_table_keeps_its_rules() {
    assert_eq!(check_table(&PHASES, GRAPH), Vec::<String>::new());
    assert_eq!(PIPELINE.len(), PHASES.len());
    for (i, p) in PIPELINE.into_iter().enumerate() {
        assert_eq!(p.index(), i);
        assert_eq!(Phase::parse(p.name()), Some(p));
        assert_eq!(Phase::parse(&p.command()), Some(p));
        assert_eq!(producer(p.output()), Some(p));
    }
    assert_eq!(producer(GRAPH), None);
    assert_eq!(Phase::parse("no_such_phase"), None);
}

#[test]
fn a_table_that_breaks_a_rule_is_caught_at_its_row() {
    // Rows swapped: place_storage would read exchanges before lower_exchanges writes them.
    let mut swapped = PHASES;
    swapped.swap(3, 4);
    let errors = check_table(&swapped, GRAPH);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("phase 3 (place_storage): reads exchanges"));

    // Without the import, lower_mid reads what nothing writes.
    let errors = check_table(&PHASES, PACKAGE);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("(lower_mid): reads graph"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("(build_images): writes package"))
    );

    let mut twice = PHASES;
    twice[6].name = "emit";
    twice[1].inputs = &[GRAPH, MID, GRAPH];
    twice[5].output = PLACEMENT;
    let errors = check_table(&twice, GRAPH);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("(emit): an earlier phase has the same name"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("(select_finalist): reads graph twice"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("phase 5 (emit): writes placement"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("phase 6 (emit): reads tile_code"))
    );

    let mut named = PHASES;
    named[0].name = "lower-mid";
    assert_eq!(check_table(&named, GRAPH).len(), 1);
}

#[test]
fn every_phase_has_its_config_in_the_records() {
    let c = PhaseConfigs::default();
    for p in PIPELINE {
        assert!(
            c.json(p.name()).is_object(),
            "{p} has no config named after it"
        );
    }
    assert_eq!(c.json("no_such_phase"), serde_json::Value::Null);
    assert_eq!(
        c.json("select_finalist"),
        serde_json::json!({ "mapping": "auto" })
    );
}

// ---- action keys ----

#[test]
fn an_action_key_changes_with_the_config_inputs_schema_and_target_and_nothing_else() {
    let (c, target) = (PhaseConfigs::default(), hash("target"));
    let spec = phase("lower_mid").spec();
    let inputs = [hash("graph")];
    let key = action_key(spec, &c, &target, &inputs);

    // Not otherwise: another phase's config, or the text of the row, leave the key alone.
    let mut other = PhaseConfigs::default();
    other.place_storage.order = PlacementOrder::Size;
    other.select_finalist.mapping = MappingChoice::RowMajor;
    assert_eq!(key, action_key(spec, &other, &target, &inputs));
    let reworded = PhaseSpec {
        about: "Something else",
        ..*spec
    };
    assert_eq!(key, action_key(&reworded, &c, &target, &inputs));

    let mut own = PhaseConfigs::default();
    own.lower_mid.finalists = 5;
    assert_ne!(key, action_key(spec, &own, &target, &inputs));
    assert_ne!(key, action_key(spec, &c, &target, &[hash("other graph")]));
    assert_ne!(key, action_key(spec, &c, &hash("other target"), &inputs));
    let newer = PhaseSpec {
        schema: spec.schema + 1,
        ..*spec
    };
    assert_ne!(key, action_key(&newer, &c, &target, &inputs));
    let renamed = PhaseSpec {
        name: "lower_mid_again",
        ..*spec
    };
    assert_ne!(key, action_key(&renamed, &c, &target, &inputs));
}

#[test]
fn an_action_key_follows_the_order_of_the_inputs() {
    let (c, target) = (PhaseConfigs::default(), hash("target"));
    let spec = phase("select_finalist").spec();
    let (a, b) = (hash("a"), hash("b"));
    assert_ne!(
        action_key(spec, &c, &target, &[a, b]),
        action_key(spec, &c, &target, &[b, a])
    );
}

// ---- the staleness rule ----

fn record(workload: &str, target: &str, inputs: &[(&str, ContentHash)]) -> StageRecord {
    StageRecord {
        phase: "select_finalist".to_string(),
        build: "b".to_string(),
        workload: workload.to_string(),
        output: hash("selected"),
        key: hash("key"),
        inputs: inputs.iter().map(|(k, h)| (k.to_string(), *h)).collect(),
        config: serde_json::Value::Null,
        target: target.to_string(),
        elapsed_ms: 0,
        headline: serde_json::Value::Null,
        check: ContentHash([0; 32]),
    }
    .checked()
}

#[test]
fn a_record_is_read_only_when_its_check_matches_every_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("select_finalist.json");
    let mut r = record("w", "mk2-1500", &[("mid", hash("m"))]);
    r.headline = serde_json::json!({"estimated_cycles": 1234.5678901234567, "mapping": "tiles"});
    let r = r.checked();
    std::fs::write(&path, r.to_bytes()).expect("write");
    assert_eq!(records::read(&path).expect("an intact record reads"), r);
    // Every field, changed alone with the JSON kept valid, makes the record damaged.
    let text = String::from_utf8(r.to_bytes()).expect("utf-8");
    for (from, to) in [
        ("\"workload\": \"w\"", "\"workload\": \"v\""),
        ("\"target\": \"mk2-1500\"", "\"target\": \"gc200\""),
        ("\"elapsed_ms\": 0", "\"elapsed_ms\": 1"),
        ("1234.5678901234567", "1234.5678901234568"),
        ("\"tiles\"", "\"pairs\""),
    ] {
        assert!(text.contains(from), "{from} in {text}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
        assert!(
            matches!(records::read(&path), Err(RecordError::Damaged { .. })),
            "{from} -> {to} was read"
        );
    }
    for hex in [r.output.hex(), r.key.hex(), hash("m").hex(), r.check.hex()] {
        let flipped = hex.replacen(&hex[..1], if &hex[..1] == "0" { "1" } else { "0" }, 1);
        std::fs::write(&path, text.replacen(&hex, &flipped, 1)).expect("write");
        assert!(
            matches!(records::read(&path), Err(RecordError::Damaged { .. })),
            "a flip in {hex} was read"
        );
    }
}

#[test]
fn a_record_continues_a_build_only_from_its_own_inputs() {
    let inputs = phase("select_finalist").inputs();
    let outputs = BTreeMap::from([(GRAPH, hash("graph")), (MID, hash("mid"))]);
    let continues = |r: &StageRecord| record_continues(r, "w", "mk2-1500", inputs, &outputs);
    let good = [("graph", hash("graph")), ("mid", hash("mid"))];
    assert!(continues(&record("w", "mk2-1500", &good)));

    assert!(!continues(&record("other", "mk2-1500", &good)));
    assert!(!continues(&record("w", "gc200", &good)));
    let other_mid = [("graph", hash("graph")), ("mid", hash("other mid"))];
    assert!(!continues(&record("w", "mk2-1500", &other_mid)));
    assert!(!continues(&record("w", "mk2-1500", &good[..1])));
    // An input the build has not produced does not match a recorded one.
    let partial = BTreeMap::from([(GRAPH, hash("graph"))]);
    assert!(!record_continues(
        &record("w", "mk2-1500", &good),
        "w",
        "mk2-1500",
        inputs,
        &partial
    ));
}

// ---- a build of the small preset, in process ----

/// Stores `bytes` as an object in `store` and returns its hash.
fn put(store: &LocalStore, bytes: impl Into<crate::store::Encoded>) -> ContentHash {
    let object = Object::new(bytes);
    store.put_object(&object).expect("put");
    object.hash()
}
struct Small {
    _dir: tempfile::TempDir,
    store: LocalStore,
    stages: PathBuf,
    graph: Graph,
}

impl Small {
    fn new() -> Small {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::open(&dir.path().join("cache")).expect("store");
        let text = crate::workload::preset_text("siglip-mlp-small").expect("preset");
        let spec = WorkloadSpec::parse(&text, "preset").expect("spec");
        Small {
            stages: dir.path().join("stages"),
            _dir: dir,
            store,
            graph: spec.import().expect("graph"),
        }
    }

    fn build(&self) -> Build<'_> {
        Build {
            store: &self.store,
            source: "siglip-mlp-small".to_string(),
            stages: self.stages.clone(),
            build: "small".to_string(),
            kind: crate::workload::WorkloadKind::Mlp,
            target: Target::preset("mk2-1500").expect("target"),
            graph: self.graph.clone(),
            configs: PhaseConfigs::default(),
            progress: &crate::progress::Silent,
        }
    }
}

fn last() -> Phase {
    PIPELINE[PIPELINE.len() - 1]
}

#[test]
fn a_build_runs_every_phase_once_then_none_and_records_each() {
    let small = Small::new();
    let b = small.build();
    let first = b.run(PIPELINE[0], last()).expect("build");
    assert_eq!(first.ran, PIPELINE.to_vec());
    assert!(first.package_path.as_ref().is_some_and(|p| p.exists()));
    for p in PIPELINE {
        let r = b.read_record(p).expect("record");
        assert_eq!(r.output, first.outputs[&p.output()]);
        assert_eq!(r.phase, p.name());
        assert!(r.headline.is_object());
    }
    let again = b.run(PIPELINE[0], last()).expect("rebuild");
    assert!(again.ran.is_empty());
    assert_eq!(again.outputs, first.outputs);

    // From emit on, the earlier outputs come from the records.
    let from = b.run(phase("emit"), last()).expect("from emit");
    assert_eq!(from.outputs, first.outputs);
    assert!(from.ran.is_empty());
}

#[test]
fn a_build_from_a_phase_needs_records_that_continue_it() {
    let small = Small::new();
    let b = small.build();
    assert!(matches!(
        b.run(phase("emit"), phase("lower_mid")),
        Err(BuildError::Order { .. })
    ));
    let none = b.run(phase("emit"), last()).err().expect("no records yet");
    assert!(matches!(none, BuildError::NoRecord { .. }));
    assert!(none.to_string().contains("--to place_storage"), "{none}");

    b.run(PIPELINE[0], phase("place_storage")).expect("build");
    let mut other = small.build();
    other.graph.workload = "another".to_string();
    let stale = other.run(phase("emit"), last()).err().expect("stale");
    assert!(matches!(stale, BuildError::Stale { .. }), "{stale}");
}

#[test]
fn every_output_passes_its_verifier_through_the_table_and_dumps() {
    let small = Small::new();
    let b = small.build();
    let outcome = b.run(PIPELINE[0], last()).expect("build");
    let decoded = Decoded::default();
    for p in PIPELINE {
        b.verify(p, &outcome.outputs, &decoded)
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let dump = b.dump(p.output(), &outcome.outputs).expect("dump");
        assert!(!dump.is_empty(), "{p} dumps nothing");
    }
    assert_eq!(
        b.dump(GRAPH, &outcome.outputs).expect("graph"),
        small.graph.dump()
    );
}

/// The stored bytes of the artifact under `kind` are what `rmp_serde` writes of it, header first.
fn stored_as_serde_writes<A: crate::store::Artifact>(b: &Build, hash: &ContentHash) {
    let bytes = b.store.get(hash).expect("read").expect("stored");
    let value: A = store::decode(&bytes, hash).expect("decodes");
    let header = store::header(&bytes).expect("a header");
    let serde = rmp_serde::to_vec(&(header, &value)).expect("serialises");
    assert!(
        serde == bytes,
        "{} is not stored as rmp_serde writes it",
        A::KIND
    );
}

#[test]
fn artifacts_encoded_in_pieces_are_the_bytes_serde_writes() {
    let small = Small::new();
    let b = small.build();
    let out = b.run(PIPELINE[0], last()).expect("build").outputs;
    stored_as_serde_writes::<Selected>(&b, &out[&SELECTED]);
    stored_as_serde_writes::<crate::ir::ExchangeStorage>(&b, &out[&EXCHANGE_STORAGE]);
    stored_as_serde_writes::<crate::ir::TileCode>(&b, &out[&TILE_CODE]);
    stored_as_serde_writes::<Package>(&b, &out[&PACKAGE]);
}

#[test]
fn a_damaged_output_fails_its_verifier_through_the_table() {
    let small = Small::new();
    let b = small.build();
    let mut outputs = b.run(PIPELINE[0], last()).expect("build").outputs;
    let decoded = Decoded::default();

    // A buffer moved off its alignment.
    let mut placement: Placement = (*b.load::<Placement>(&outputs).expect("placement")).clone();
    placement.addresses[0] += 1;
    outputs.insert(PLACEMENT, put(&small.store, store::encode(&placement)));
    let err = b
        .verify(phase("place_storage"), &outputs, &decoded)
        .expect_err("a misaligned buffer is invalid");
    assert!(err.to_string().contains("aligned"), "{err}");

    // A schedule missing for the last exchange phase.
    let mut exchanges: Exchanges = (*b.load::<Exchanges>(&outputs).expect("exchanges")).clone();
    exchanges.phases.pop();
    outputs.insert(EXCHANGES, put(&small.store, store::encode(&exchanges)));
    let err = b
        .verify(phase("lower_exchanges"), &outputs, &decoded)
        .expect_err("a missing schedule is invalid");
    assert!(
        err.to_string().contains("schedules for the selection's"),
        "{err}"
    );
}

#[test]
fn an_adapter_reads_only_what_its_row_declares() {
    let small = Small::new();
    let b = small.build();
    let outcome = b.run(PIPELINE[0], phase("select_finalist")).expect("build");
    let decoded = Decoded::default();
    let view = b.view(phase("select_finalist"), &outcome.outputs, &decoded);
    assert!(view.input::<Graph>().is_ok());
    assert!(view.output::<Selected>().is_ok());
    assert!(matches!(
        view.input::<Package>(),
        Err(BuildError::Undeclared { .. })
    ));
    assert!(matches!(
        view.output::<Mid>(),
        Err(BuildError::Undeclared { .. })
    ));
    // Declared, but not built yet.
    let view = b.view(phase("place_storage"), &outcome.outputs, &decoded);
    assert!(matches!(
        view.input::<Exchanges>(),
        Err(BuildError::NoArtifact { .. })
    ));
}

// ---- the run figures ----

#[test]
fn the_run_figures_follow_from_the_profile() {
    let small = Small::new();
    let b = small.build();
    let path = b
        .run(PIPELINE[0], last())
        .expect("build")
        .package_path
        .expect("package");
    let (_, package): (_, Package) =
        read_ipuexe(&std::fs::read(path).expect("read")).expect("ipuexe");
    let host = host_data(&package.graph, 7);
    let mut device = Device::load(package.clone()).expect("load");
    device.initialize(&host).expect("initialize");
    let (mut execution, output) = device.run(&host, &crate::progress::Silent).expect("run");
    let out = package
        .graph
        .values
        .iter()
        .find(|v| v.role == ValueRole::Output)
        .expect("output")
        .id;
    let check = numerics::check(
        &output[&out],
        &numerics::reference(&package.graph, &host, &crate::progress::Silent),
        out,
    );

    let f = RunFigures::of(&package, &execution);
    let tiles = package.tiles.len();
    assert!(f.active_tiles > 0 && f.active_tiles <= tiles);
    assert!(!f.attention && f.check_line(&check).is_none());
    // Two blocks of two matmuls, 21 tokens x 40 x 72, two flops per multiply-add.
    assert_eq!(f.flops, (2 * 2 * 2 * 21 * 40 * 72) as f64);
    let peak = execution.cycles as f64 * tiles as f64 * 128.0;
    assert!((f.efficiency_percent - f.flops / peak * 100.0).abs() < 1e-9);
    assert!(f.peak_bound_cycles <= execution.cycles as f64);
    let fields = f.summary_line(&package, &execution, &check, 7);
    let line = fields.line();
    // The JSON form holds the same fields, numbers as numbers.
    let json = fields.json();
    assert_eq!(json["activeTiles"], serde_json::json!(f.active_tiles));
    assert_eq!(json["numericalTest"], "PASS");
    assert_eq!(json.as_object().map(|o| o.len()), Some(fields.0.len()));
    assert!(
        line.contains(&format!(" activeTiles={} ", f.active_tiles)),
        "{line}"
    );
    assert!(check.pass && line.ends_with("numericalTest=PASS"), "{line}");

    // A profile where no tile was busy has no active tile; one twice as long is half as efficient.
    for step in &mut execution.steps {
        step.tile_busy.iter_mut().for_each(|c| *c = 0);
    }
    execution.cycles *= 2;
    let idle = RunFigures::of(&package, &execution);
    assert_eq!(idle.active_tiles, 0);
    assert!((idle.efficiency_percent * 2.0 - f.efficiency_percent).abs() < 1e-9);
}

#[test]
fn a_failed_background_write_fails_the_build_and_stops_the_writes_after_it() {
    let small = Small::new();
    let b = small.build();
    // A file where the build's stage folder goes: the first stage record cannot be written.
    std::fs::create_dir_all(&small.stages).expect("stages");
    std::fs::write(b.dir(), b"not a folder").expect("blocker");
    let error = b
        .run(PIPELINE[0], last())
        .err()
        .expect("the record write fails");
    assert!(
        matches!(error, BuildError::CreateDir { .. } | BuildError::File(_)),
        "{error}"
    );
    // What was queued before the failed record landed (the graph, lower_mid's output and its action
    // entry); select_finalist's output, queued after it, never did.
    let kinds: Vec<String> = small
        .store
        .list()
        .0
        .into_iter()
        .map(|(_, _, kind)| kind)
        .collect();
    assert!(kinds.iter().any(|k| k.starts_with("mid ")), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k.starts_with("selected ")),
        "{kinds:?}"
    );
}

#[test]
fn a_package_whose_object_is_not_stored_leaves_the_old_model_ipuexe() {
    let small = Small::new();
    let b = small.build();
    b.run(PIPELINE[0], last()).expect("build");
    let package = b.read_record(phase("build_images")).expect("record").output;
    // The package's object made unwritable (a folder where it goes), its entry gone, and an older
    // `model.ipuexe` in place: the next build makes the package again and cannot store it.
    let hex = package.hex();
    let object = small
        .store
        .root()
        .join("objects")
        .join(&hex[..2])
        .join(&hex);
    std::fs::remove_file(&object).expect("object");
    std::fs::create_dir(&object).expect("blocker");
    let key = b.read_record(phase("build_images")).expect("record").key;
    let actions = small.store.root().join("actions");
    for entry in walkdir::WalkDir::new(&actions).into_iter().flatten() {
        if entry.file_name().to_string_lossy().contains(&key.hex()) {
            std::fs::remove_file(entry.path()).expect("entry");
        }
    }
    let ipuexe = b.dir().join("model.ipuexe");
    std::fs::write(&ipuexe, b"older").expect("older package");
    let error = b.run(phase("build_images"), last()).err();
    assert!(matches!(error, Some(BuildError::Store(_))), "{error:?}");
    // Its bytes were written beside the object, but never took the name, and no temp file is left.
    let kept = std::fs::read(&ipuexe).expect("model.ipuexe") == b"older";
    assert!(
        kept,
        "model.ipuexe was replaced by a package the store does not hold"
    );
    let names: Vec<String> = (std::fs::read_dir(b.dir()).expect("stages").flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    // With the object's place free again the build stores it and names the new model.ipuexe.
    std::fs::remove_dir(&object).expect("blocker");
    b.run(phase("build_images"), last()).expect("build");
    assert!(std::fs::read(&ipuexe).expect("model.ipuexe") != b"older");
}

/// A build whose package is stored leaves a `model.ipuexe` that holds it alone (the file is not
/// replaced), and writes it again when its bytes are not the package's: a byte of its body
/// changed, its header naming another compiler, or the file cut short.
#[test]
fn a_stored_package_rewrites_a_model_ipuexe_that_does_not_hold_it() {
    use std::os::unix::fs::MetadataExt as _;
    let small = Small::new();
    let b = small.build();
    b.run(PIPELINE[0], last()).expect("build");
    let ipuexe = b.dir().join("model.ipuexe");
    let good = std::fs::read(&ipuexe).expect("model.ipuexe");
    let inode = || std::fs::metadata(&ipuexe).expect("model.ipuexe").ino();
    let before = inode();
    b.run(PIPELINE[0], last()).expect("warm build");
    assert_eq!(inode(), before, "an intact model.ipuexe was replaced");
    let mut body = good.clone();
    *body.last_mut().expect("a body") ^= 1;
    // The compiler version's first byte, after the magic and its length.
    let mut header = good.clone();
    header[12] ^= 1;
    let short = good[..good.len() - 1].to_vec();
    for (what, damaged) in [("body", body), ("header", header), ("cut short", short)] {
        std::fs::write(&ipuexe, damaged).expect("damaged model.ipuexe");
        b.run(PIPELINE[0], last()).expect("warm build");
        let restored = std::fs::read(&ipuexe).expect("model.ipuexe") == good;
        assert!(restored, "a model.ipuexe with its {what} damaged was kept");
    }
}

// ---- a finalist place_storage cannot place ----

/// The small preset's build on a tile of `standard` and `interleaved` bytes of memory.
fn cramped(
    small: &Small,
    standard: u32,
    interleaved: u32,
    passed_over: Vec<PassedOver>,
) -> Build<'_> {
    let mut b = small.build();
    b.target.interleaved_base = b.target.memory_base + standard;
    b.target.memory_end = b.target.interleaved_base + interleaved;
    b.configs.select_finalist.passed_over = passed_over;
    b
}

#[test]
fn a_finalist_passed_over_is_not_chosen_and_the_next_is() {
    let small = Small::new();
    let b = small.build();
    let outcome = b
        .run(phase("lower_mid"), phase("place_storage"))
        .expect("build");
    let selected = |b: &Build, outcome: &BuildOutcome| {
        let decoded = Decoded::default();
        let view = b.view(phase("select_finalist"), &outcome.outputs, &decoded);
        let s = view.output::<Selected>().expect("selected");
        PassedOver {
            finalist: s.finalist,
            mapping: s.mapping,
        }
    };
    let first = selected(&b, &outcome);
    let mut b = small.build();
    b.configs.select_finalist.passed_over = vec![first];
    let outcome = b
        .run(phase("lower_mid"), phase("place_storage"))
        .expect("build");
    let next = selected(&b, &outcome);
    assert_ne!(next, first);
    let record = b.read_record(phase("select_finalist")).unwrap();
    assert_eq!(record.config["passed_over"][0]["finalist"], first.finalist);
}

#[test]
fn a_build_whose_placement_fails_tries_every_other_finalist_then_reports_the_first_failure() {
    // 20 KiB of interleaved memory: an AMP's partials own a whole 16 KiB element, and no finalist
    // leaves a whole element beside its weights panel, though every one fits by bytes.
    let (standard, interleaved) = (200 * 1024, 20 * 1024);
    // Run alone, place_storage places the finalist select_finalist chose, fails, and tries no other.
    let alone = Small::new();
    let b = cramped(&alone, standard, interleaved, Vec::new());
    b.run(phase("lower_mid"), phase("lower_exchanges"))
        .expect("selects");
    let Err(first) = b.run(phase("place_storage"), phase("place_storage")) else {
        panic!("the build placed its storage");
    };
    let first = first.to_string();
    assert!(first.contains("no hole"), "{first}");
    assert!(
        first.contains("a build from select_finalist passes finalist"),
        "{first}"
    );
    let record = b.read_record(phase("select_finalist")).unwrap();
    assert!(
        record.config.get("passed_over").is_none(),
        "{}",
        record.config
    );
    // A whole build tries the others, then reports the first one's error and how many it tried.
    let whole = Small::new();
    let b = cramped(&whole, standard, interleaved, Vec::new());
    let Err(error) = b.run(phase("lower_mid"), phase("place_storage")) else {
        panic!("the build placed its storage");
    };
    let error = error.to_string();
    let placement = first
        .split("; a build from select_finalist")
        .next()
        .unwrap();
    assert!(
        error.starts_with(placement),
        "{error}\nagainst\n{placement}"
    );
    let tried: usize = error
        .split("placed none of the ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{error}"));
    let mut outputs = BTreeMap::new();
    outputs.insert(MID, b.read_record(phase("lower_mid")).unwrap().output);
    let decoded = Decoded::default();
    let view = b.view(phase("lower_mid"), &outputs, &decoded);
    let finalists = view.output::<Mid>().expect("mid").finalists.len();
    assert!(tried > finalists && tried <= 3 * finalists, "{error}");
    // No try placed, so no try's selection was recorded.
    assert!(b.read_record(phase("select_finalist")).is_err());
}

#[test]
fn a_config_that_passes_nothing_over_keeps_its_bytes() {
    let configs = PhaseConfigs::default();
    let select = &configs.select_finalist;
    assert_eq!(
        canonical(select),
        rmp_serde::to_vec(&(select.mapping,)).unwrap()
    );
    let mut passing = select.clone();
    passing.passed_over.push(PassedOver {
        finalist: 0,
        mapping: crate::ir::Mapping::RowMajor,
    });
    assert_ne!(canonical(&passing), canonical(select));
}

/// `lower_mid`'s output for `graph` on the default target and configuration.
fn mid_of(graph: &Graph) -> Mid {
    let target = Target::preset("mk2-1500").expect("target");
    let cfg = crate::stages::lower_mid::LowerMidConfig::default();
    crate::stages::lower_mid::lower_mid(graph, &target, &cfg).expect("mid")
}

#[test]
fn an_encoders_layers_are_modelled_through_the_second_an_mlps_blocks_whole() {
    let encoder = crate::workload::small_encoder(4);
    let found = select_finalist::model_layers(&encoder, &mid_of(&encoder));
    assert_eq!(found.map(|l| (l.start, l.period, l.count)), Some((1, 7, 4)));
    // Each block's second matmul writes its output as the next block's first reads it: a model
    // that leaves the next block out could write it otherwise.
    let text = crate::workload::preset_text("siglip-mlp-small").expect("preset");
    let text = text.replace("blocks = 2", "blocks = 5");
    let mlp = WorkloadSpec::parse(&text, "preset")
        .expect("spec")
        .import()
        .expect("graph");
    let mid = mid_of(&mlp);
    assert!(mid.layers.is_some_and(|l| l.count >= 3), "{:?}", mid.layers);
    assert_eq!(select_finalist::model_layers(&mlp, &mid), None);
}

#[test]
fn a_model_through_the_second_layer_costs_the_whole_program() {
    let target = Target::preset("mk2-1500").expect("target");
    for layers in [3, 5] {
        let graph = crate::workload::small_encoder(layers);
        let mid = mid_of(&graph);
        for mapping in [MappingChoice::RowMajor, MappingChoice::SharedPanels] {
            let cfg = select_finalist::SelectFinalistConfig {
                mapping,
                passed_over: Vec::new(),
            };
            let whole =
                select_finalist::select_finalist(&graph, &mid, &target, &cfg).expect("selected");
            let repeat = select_finalist::model_layers(&graph, &mid);
            let (f, mapping) = (whole.finalist, whole.mapping);
            let (modelled, part) =
                select_finalist::model(&graph, &mid, repeat, f, mapping, &target);
            let exact = (whole.estimate.cycles, whole.estimate.exchange_cycles);
            assert_eq!(modelled, exact, "{layers} layers, {mapping:?}");
            // The model left the later layers out, and they are a real share, so a miscount of
            // them would show.
            assert!(part.operators.len() < whole.operators.len());
            assert!(part.estimate.cycles + 1000 < whole.estimate.cycles);
        }
    }
}

#[test]
fn code_sized_once_per_kind_of_superstep_is_the_placeholder_codes_length() {
    use crate::isa::PLACEHOLDER_ADDRESS;
    use crate::lowering::{code_bytes, sized_by, tile_programs};
    let target = Target::preset("mk2-1500").expect("target");
    // Enough layers that the phase ids pass 127 and their labels grow a byte.
    let graph = crate::workload::small_encoder(12);
    let mid = mid_of(&graph);
    let configs = PhaseConfigs::default();
    let sel = select_finalist::select_finalist(&graph, &mid, &target, &configs.select_finalist)
        .expect("selected");
    let storage = crate::stages::plan_exchange_storage::plan_exchange_storage(
        &sel,
        &configs.plan_exchange_storage,
    )
    .expect("storage");
    let exchanges = crate::stages::lower_exchanges::lower_exchanges(
        &sel,
        &storage,
        &target,
        &configs.lower_exchanges,
        &BTreeMap::new(),
        &crate::progress::Silent,
    )
    .expect("exchanges");
    assert!(sel.exchanges.len() > 130, "{} phases", sel.exchanges.len());
    // The later layers' exchange supersteps are sized by the first layer's.
    let by = sized_by(&sel, &exchanges);
    let shared = (by.iter().enumerate()).filter(|&(s, &b)| b != s).count();
    assert!(shared >= 10, "{shared} supersteps sized by another");
    let sized = code_bytes(&sel, &exchanges, &target).expect("sized");
    let placeholder = |_| PLACEHOLDER_ADDRESS;
    let code = tile_programs(&sel, &exchanges, &target, &placeholder).expect("code");
    let lengths: Vec<u64> = code.iter().map(|p| p.bytes().len() as u64).collect();
    let wrong = (sized.iter().zip(&lengths)).position(|(a, b)| a != b);
    assert_eq!(
        wrong,
        None,
        "sized {:?}, encoded {:?}",
        wrong.map(|t| sized[t]),
        wrong.map(|t| lengths[t])
    );
}
