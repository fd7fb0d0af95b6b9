//! The build driver: runs phases of the pipeline over the store, writes stage records and
//! `model.ipuexe`. A phase whose action key is in the store (and whose output object is intact) does not
//! run; a phase before `--from` takes its output from the build's stage record.

use crate::exchange::Schedule;
use crate::ir::ExchangeStorage;
use crate::ir::Exchanges;
use crate::ir::Graph;
use crate::ir::Mid;
use crate::ir::Placement;
use crate::ir::Selected;
use crate::ir::TileCode;
use crate::ir::{Package, write_ipuexe};
use crate::pipeline::{ArtifactKind, PIPELINE, Phase};
use crate::stages::build_images::{BuildImagesConfig, build_images};
use crate::stages::emit::{EmitConfig, emit};
use crate::stages::lower_exchanges::{LowerExchangesConfig, lower_exchanges, pattern_keys};
use crate::stages::lower_mid::{LowerMidConfig, lower_mid};
use crate::stages::place_storage::{PlaceStorageConfig, place_storage};
use crate::stages::plan_exchange_storage::{PlanExchangeStorageConfig, plan_exchange_storage};
use crate::stages::select_finalist::{SelectFinalistConfig, select_finalist};
use crate::store::{self, Artifact, ContentHash, Store};
use crate::target::Target;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

impl Artifact for Graph {
    const KIND: &'static str = "graph";
    const SCHEMA: u32 = 1;
}

/// Every phase's config; each phase hashes only its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseConfigs {
    pub lower_mid: LowerMidConfig,
    pub select_finalist: SelectFinalistConfig,
    pub plan_exchange_storage: PlanExchangeStorageConfig,
    pub lower_exchanges: LowerExchangesConfig,
    pub place_storage: PlaceStorageConfig,
    pub emit: EmitConfig,
    pub build_images: BuildImagesConfig,
}

impl PhaseConfigs {
    fn canonical(&self, phase: Phase) -> Vec<u8> {
        let bytes = match phase {
            Phase::LowerMid => rmp_serde::to_vec(&self.lower_mid),
            Phase::SelectFinalist => rmp_serde::to_vec(&self.select_finalist),
            Phase::PlanExchangeStorage => rmp_serde::to_vec(&self.plan_exchange_storage),
            Phase::LowerExchanges => rmp_serde::to_vec(&self.lower_exchanges),
            Phase::PlaceStorage => rmp_serde::to_vec(&self.place_storage),
            Phase::Emit => rmp_serde::to_vec(&self.emit),
            Phase::BuildImages => rmp_serde::to_vec(&self.build_images),
        };
        bytes.expect("configs serialise")
    }

    fn json(&self, phase: Phase) -> serde_json::Value {
        let v = serde_json::to_value(self).expect("configs serialise");
        v.get(phase.name())
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    }
}

/// `stages/<build>/<phase>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageRecord {
    pub phase: String,
    pub build: String,
    pub workload: String,
    pub output: ContentHash,
    pub key: ContentHash,
    pub inputs: BTreeMap<String, ContentHash>,
    pub config: serde_json::Value,
    pub target: String,
    pub elapsed_ms: u64,
    pub headline: serde_json::Value,
}

pub struct Build<'a> {
    pub store: &'a Store,
    /// The workload as the user named it, for hints.
    pub source: String,
    pub stages: PathBuf,
    pub build: String,
    pub target: Target,
    pub graph: Graph,
    pub configs: PhaseConfigs,
}

/// What a build did.
pub struct BuildOutcome {
    pub outputs: BTreeMap<ArtifactKind, ContentHash>,
    /// Phases whose body ran (cache misses).
    pub ran: Vec<Phase>,
    pub package_path: Option<PathBuf>,
}

/// Decoded artifacts by content hash, so a build decodes each at most once.
#[derive(Default)]
struct Decoded(BTreeMap<ContentHash, Rc<dyn Any>>);

impl Decoded {
    fn get<A: Artifact + 'static>(&mut self, store: &Store, hash: &ContentHash) -> Result<Rc<A>> {
        if let Some(v) = self.0.get(hash) {
            return Rc::clone(v)
                .downcast::<A>()
                .map_err(|_| anyhow::anyhow!("object {} is not a {}", hash.short(), A::KIND));
        }
        let bytes = store.get(hash)?.with_context(|| {
            format!(
                "{} object {} is missing from the store {}; rebuild from an earlier phase",
                A::KIND,
                hash.short(),
                store.root().display()
            )
        })?;
        let value: Rc<A> = Rc::new(store::decode(&bytes, hash)?);
        self.0.insert(*hash, value.clone());
        Ok(value)
    }
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    let dir = path.parent().expect("stage paths have a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("x"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

impl Build<'_> {
    pub fn dir(&self) -> PathBuf {
        self.stages.join(&self.build)
    }

    pub fn record_path(&self, phase: Phase) -> PathBuf {
        self.dir().join(format!("{}.json", phase.name()))
    }

    pub fn read_record(&self, phase: Phase) -> Result<StageRecord> {
        let path = self.record_path(phase);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("no stage record {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("stage record {} is damaged", path.display()))
    }

    /// Runs phases `from..=to` of the pipeline.
    pub fn run(&self, from: Phase, to: Phase) -> Result<BuildOutcome> {
        if from > to {
            bail!("--from {from} comes after --to {to} in the pipeline");
        }
        let span = tracing::info_span!(
            "ipu_codegen.package.build",
            tile_count = self.target.tiles,
            operations = self.graph.ops.len()
        );
        let _enter = span.enter();
        let target_hash =
            ContentHash::of(&rmp_serde::to_vec(&self.target).expect("targets serialise"));
        let mut outputs = BTreeMap::new();
        let mut decoded = Decoded::default();
        let graph_bytes = store::encode(&self.graph);
        let graph_hash = self.store.put(&graph_bytes)?;
        decoded.0.insert(graph_hash, Rc::new(self.graph.clone()));
        outputs.insert(ArtifactKind::Graph, graph_hash);
        let mut ran = Vec::new();
        let mut package_path = None;
        for phase in PIPELINE {
            if phase > to {
                break;
            }
            if phase < from {
                let before = PIPELINE[from.index() - 1];
                let hint = || {
                    format!(
                        "{from} starts from the recorded outputs of the phases before it; run `ipu-codegen build {} --to {before}` first",
                        self.source
                    )
                };
                let record = self.read_record(phase).with_context(hint)?;
                // The record must continue this build: same workload and target, and inputs that are
                // exactly the outputs recorded (or imported) before it.
                let stale = record.workload != self.graph.workload
                    || record.target != self.target.name
                    || phase
                        .inputs()
                        .iter()
                        .any(|k| record.inputs.get(k.name()) != outputs.get(k));
                if stale {
                    bail!(
                        "stage record {} was made for other inputs ({} on {}) than this build: {}",
                        self.record_path(phase).display(),
                        record.workload,
                        record.target,
                        hint()
                    );
                }
                outputs.insert(phase.output(), record.output);
                continue;
            }
            let span = tracing::info_span!("ipu_codegen.package.phase", phase = phase.name());
            let _enter = span.enter();
            let started = Instant::now();
            let inputs: Vec<ContentHash> = phase.inputs().iter().map(|k| outputs[k]).collect();
            let config = self.configs.canonical(phase);
            let key = store::action_key(
                phase.name(),
                schema(phase.output()),
                &config,
                &target_hash,
                &inputs,
            );
            let cached = match self.store.lookup(&key)? {
                Some(out) if self.store.get(&out)?.is_some() => Some(out),
                _ => None,
            };
            let output = match cached {
                Some(out) => out,
                None => {
                    let (bytes, value) = self.run_phase(phase, &inputs, &mut decoded)?;
                    let out = self.store.put(&bytes)?;
                    self.store.record(&key, &out)?;
                    decoded.0.insert(out, value);
                    ran.push(phase);
                    out
                }
            };
            outputs.insert(phase.output(), output);
            let elapsed_ms = started.elapsed().as_millis() as u64;
            tracing::info!(
                phase = phase.name(),
                elapsed_ms,
                cached = cached.is_some(),
                success = true,
                "package build phase finished"
            );
            let previous = self.read_record(phase).ok();
            if previous
                .as_ref()
                .is_none_or(|r| r.output != output || r.key != key)
            {
                let headline = self.headline(phase, &output, &mut decoded)?;
                let record = StageRecord {
                    phase: phase.name().to_string(),
                    build: self.build.clone(),
                    workload: self.graph.workload.clone(),
                    output,
                    key,
                    inputs: phase
                        .inputs()
                        .iter()
                        .zip(&inputs)
                        .map(|(k, h)| (k.name().to_string(), *h))
                        .collect(),
                    config: self.configs.json(phase),
                    target: self.target.name.clone(),
                    elapsed_ms,
                    headline,
                };
                let json = serde_json::to_vec_pretty(&record).expect("records serialise");
                write_if_changed(&self.record_path(phase), &json)?;
            }
            if phase == Phase::BuildImages {
                let body = self
                    .store
                    .get(&output)?
                    .context("package vanished from the store")?;
                let path = self.dir().join("model.ipuexe");
                if write_if_changed(&path, &write_ipuexe(&body))? {
                    tracing::info!(tiles = self.target.tiles, path = %path.display(), "application package written");
                }
                package_path = Some(path);
            }
        }
        Ok(BuildOutcome {
            outputs,
            ran,
            package_path,
        })
    }

    fn run_phase(
        &self,
        phase: Phase,
        inputs: &[ContentHash],
        d: &mut Decoded,
    ) -> Result<(Vec<u8>, Rc<dyn Any>)> {
        let s = self.store;
        let t = &self.target;
        let c = &self.configs;
        fn out<A: Artifact + 'static>(a: A) -> (Vec<u8>, Rc<dyn Any>) {
            (store::encode(&a), Rc::new(a))
        }
        Ok(match phase {
            Phase::LowerMid => out(lower_mid(
                &*d.get::<Graph>(s, &inputs[0])?,
                t,
                &c.lower_mid,
            )?),
            Phase::SelectFinalist => {
                let (g, m) = (d.get::<Graph>(s, &inputs[0])?, d.get::<Mid>(s, &inputs[1])?);
                out(select_finalist(&g, &m, t, &c.select_finalist)?)
            }
            Phase::PlanExchangeStorage => out(plan_exchange_storage(
                &*d.get::<Selected>(s, &inputs[0])?,
                &c.plan_exchange_storage,
            )?),
            Phase::LowerExchanges => {
                let (sel, xs) = (
                    d.get::<Selected>(s, &inputs[0])?,
                    d.get::<ExchangeStorage>(s, &inputs[1])?,
                );
                // Schedules of these patterns from earlier builds, by pattern key.
                let mut known = BTreeMap::new();
                for key in pattern_keys(&sel, t, &c.lower_exchanges) {
                    if let Some(hash) = s.lookup(&key)?
                        && let Some(bytes) = s.get(&hash)?
                        && let Ok(schedule) = store::decode::<Schedule>(&bytes, &hash)
                    {
                        known.insert(key, schedule);
                    }
                }
                let exchanges = lower_exchanges(&sel, &xs, t, &c.lower_exchanges, &known)?;
                for phase in &exchanges.phases {
                    let hash = s.put(&store::encode(&phase.schedule))?;
                    s.record(&phase.pattern, &hash)?;
                }
                out(exchanges)
            }
            Phase::PlaceStorage => {
                let sel = d.get::<Selected>(s, &inputs[0])?;
                let xs = d.get::<ExchangeStorage>(s, &inputs[1])?;
                let ex = d.get::<Exchanges>(s, &inputs[2])?;
                out(place_storage(&sel, &xs, &ex, t, &c.place_storage)?)
            }
            Phase::Emit => {
                let sel = d.get::<Selected>(s, &inputs[0])?;
                let xs = d.get::<ExchangeStorage>(s, &inputs[1])?;
                let ex = d.get::<Exchanges>(s, &inputs[2])?;
                let pl = d.get::<Placement>(s, &inputs[3])?;
                out(emit(&sel, &xs, &ex, &pl, t, &c.emit)?)
            }
            Phase::BuildImages => {
                let code = d.get::<TileCode>(s, &inputs[0])?;
                let pl = d.get::<Placement>(s, &inputs[1])?;
                let sel = d.get::<Selected>(s, &inputs[2])?;
                out(build_images(&code, &pl, &sel, t, &c.build_images)?)
            }
        })
    }

    /// Headline figures of a phase's output for its stage record.
    fn headline(
        &self,
        phase: Phase,
        output: &ContentHash,
        d: &mut Decoded,
    ) -> Result<serde_json::Value> {
        let s = self.store;
        use serde_json::json;
        Ok(match phase {
            Phase::LowerMid => {
                let m = d.get::<Mid>(s, output)?;
                json!({ "operators": m.operators.len(), "finalists": m.finalists.len(),
                        "best_estimated_cycles": m.finalists.first().map(|f| f.estimate.cycles) })
            }
            Phase::SelectFinalist => {
                let sel = d.get::<Selected>(s, output)?;
                json!({ "finalist": sel.finalist, "mapping": sel.mapping, "estimated_cycles": sel.estimate.cycles,
                        "buffers": sel.buffers.len(), "exchange_phases": sel.exchanges.len(),
                        "transfers": sel.exchanges.iter().map(|e| e.transfers.len()).sum::<usize>() })
            }
            Phase::PlanExchangeStorage => {
                let xs = d.get::<ExchangeStorage>(s, output)?;
                json!({ "max_row_bytes": xs.phases.iter().map(|p| p.max_row_bytes).collect::<Vec<_>>() })
            }
            Phase::LowerExchanges => {
                let ex = d.get::<Exchanges>(s, output)?;
                json!({ "horizons": ex.phases.iter().map(|p| p.schedule.horizon).collect::<Vec<_>>(),
                        "lower_bounds": ex.phases.iter().map(|p| p.schedule.lower_bound).collect::<Vec<_>>(),
                        "pieces": ex.phases.iter().map(|p| p.schedule.pieces.len()).collect::<Vec<_>>() })
            }
            Phase::PlaceStorage => {
                let pl = d.get::<Placement>(s, output)?;
                json!({ "max_peak_bytes": pl.tiles.iter().map(|t| t.peak_bytes).max(),
                        "max_code_bytes": pl.tiles.iter().map(|t| t.code_bytes).max() })
            }
            Phase::Emit => {
                let code = d.get::<TileCode>(s, output)?;
                json!({ "instructions": code.tiles.iter().map(|p| p.instrs.len()).sum::<usize>() })
            }
            Phase::BuildImages => {
                let p = d.get::<Package>(s, output)?;
                json!({ "estimated_cycles": p.estimated_cycles, "code_bytes": p.tiles.iter().map(|t| t.code.len()).sum::<usize>() })
            }
        })
    }

    /// `bench exchange` on the real phases: builds through `select_finalist`, then schedules every phase.
    pub fn bench_exchanges(&self, o: crate::exchange::Overheads) -> Result<()> {
        let outcome = self.run(PIPELINE[0], Phase::SelectFinalist)?;
        let mut d = Decoded::default();
        let sel = d.get::<Selected>(self.store, &outcome.outputs[&ArtifactKind::Selected])?;
        for ex in &sel.exchanges {
            super::bench::bench_one(
                &format!("{}/{}", self.build, ex.id),
                &ex.pattern(&self.target),
                o,
            )?;
        }
        Ok(())
    }

    /// The text dump of an artifact of this build (`ipu-codegen show`).
    pub fn dump(
        &self,
        kind: ArtifactKind,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
    ) -> Result<String> {
        let mut d = Decoded::default();
        let s = self.store;
        let h = |k: ArtifactKind| {
            outputs
                .get(&k)
                .copied()
                .with_context(|| format!("no {} artifact in this build", k.name()))
        };
        Ok(match kind {
            ArtifactKind::Graph => self.graph.dump(),
            ArtifactKind::Mid => d.get::<Mid>(s, &h(kind)?)?.dump(),
            ArtifactKind::Selected => d.get::<Selected>(s, &h(kind)?)?.dump(),
            ArtifactKind::ExchangeStorage => d.get::<ExchangeStorage>(s, &h(kind)?)?.dump(),
            ArtifactKind::Exchanges => d.get::<Exchanges>(s, &h(kind)?)?.dump(),
            ArtifactKind::Placement => {
                let sel = d.get::<Selected>(s, &h(ArtifactKind::Selected)?)?;
                d.get::<Placement>(s, &h(kind)?)?.dump(&sel, &self.target)
            }
            ArtifactKind::TileCode => d.get::<TileCode>(s, &h(kind)?)?.dump(),
            ArtifactKind::Package => d.get::<Package>(s, &h(kind)?)?.dump(),
        })
    }
}

fn schema(kind: ArtifactKind) -> u32 {
    match kind {
        ArtifactKind::Graph => Graph::SCHEMA,
        ArtifactKind::Mid => Mid::SCHEMA,
        ArtifactKind::Selected => Selected::SCHEMA,
        ArtifactKind::ExchangeStorage => ExchangeStorage::SCHEMA,
        ArtifactKind::Exchanges => Exchanges::SCHEMA,
        ArtifactKind::Placement => Placement::SCHEMA,
        ArtifactKind::TileCode => TileCode::SCHEMA,
        ArtifactKind::Package => Package::SCHEMA,
    }
}
