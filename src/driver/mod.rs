//! The build driver: runs phases of the pipeline over the store, as the phase table ([`PHASES`]) says.
//!
//! Contract:
//! - A phase's action key covers its name, its output's schema version, the compiler version, its own
//!   config's canonical bytes, the target and its inputs' content hashes ([`action_key`]). A phase
//!   whose key is in the store, with its output object intact, does not run.
//! - A phase before `--from` takes its output from the build's stage record, which must continue this
//!   build ([`record_continues`]); otherwise the build stops and says which phase to build to first.
//! - Every phase that runs or hits the cache gets a stage record (`stages/<build>/<phase>.json`),
//!   rewritten only when its output or key changes; the package's phase also writes `model.ipuexe`,
//!   rewritten only when its bytes change (for a stored package, the file is checked against its
//!   header and hash, and the object read only to write it again). Writes go through a temp file
//!   and a rename, on a background thread in the order a synchronous build would make them
//!   ([`writer`]).
//! - When `place_storage` cannot place the storage of the finalist `select_finalist` chose, and this
//!   build ran `select_finalist`, the finalist under its mapping is passed over (a log line says so)
//!   and the build runs again from `select_finalist` on the outputs it already has ([`Build::run`]);
//!   the records from `select_finalist` up to `place_storage` are written only once a try places.
//!   With none left, the first placement error stands, saying how many were tried; a build that
//!   did not run `select_finalist` tries no other and says that one from `select_finalist` would.
//! - Debug builds run each fresh output's verifier.
//! - A phase's error that something does not fit the device gets the advice of the workload's kind
//!   ([`WorkloadKind::advice`]): the flags it takes, or for a graph that the model must shrink.
//! - Nothing here prints: results are values and strings; progress goes out as tracing events.

mod artifact;
mod phases;
mod records;
mod summary;
#[cfg(test)]
mod tests;
mod writer;

pub use artifact::{Decoded, Output, PhaseError};
pub use phases::{
    EXCHANGE_STORAGE, EXCHANGES, GRAPH, MID, PACKAGE, PHASES, PIPELINE, PLACEMENT, Phase,
    PhaseArtifacts, PhaseConfigs, PhaseSpec, SELECTED, TILE_CODE, check_table,
};
pub use records::{
    LOOKUPS_FILE, Lookups, RecordError, StageRecord, latest_lookups, read as read_record,
    record_continues, write_if_changed,
};
pub use summary::{Fields, RunFigures, estimate_warning, output_check_line, verdict, worst_check};
use writer::{Write, Writer};

use crate::ir::{Graph, Selected};
use crate::progress::Progress;
use crate::stages::lower_mid::LowerMidError;
use crate::stages::place_storage::PlaceStorageError;
use crate::stages::select_finalist::{PassedOver, SelectFinalistError};
use crate::store::{
    self, Artifact, ArtifactKind, ContentHash, Level, Object, Store, StoreError, Tally,
};
use crate::target::Target;
use crate::workload::WorkloadKind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

/// The target of the driver's spans and events, which log filters and JSON logs name: the driver's
/// module.
pub const LOG_TARGET: &str = module_path!();

/// A build: a workload's graph, a target and every phase's config, over a store and a stages folder.
pub struct Build<'a> {
    pub store: &'a dyn Store,
    /// The workload as the user named it, for hints.
    pub source: String,
    pub stages: PathBuf,
    pub build: String,
    /// The workload's kind, for the advice a build that does not fit gets.
    pub kind: WorkloadKind,
    pub target: Target,
    pub graph: Graph,
    pub configs: PhaseConfigs,
    /// Hears how far the phases' long steps have come (exchange scheduling); never changes a result.
    pub progress: &'a dyn Progress,
}

/// Where a phase's output came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The phase ran.
    Computed,
    /// A level of the store held it.
    Stored(Level),
}

impl Source {
    /// Its name in logs: `computed`, `local`, `remote`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Computed => "computed",
            Source::Stored(level) => level.name(),
        }
    }
}

/// What a build did.
pub struct BuildOutcome {
    pub outputs: BTreeMap<ArtifactKind, ContentHash>,
    /// Phases whose body ran (cache misses).
    pub ran: Vec<Phase>,
    /// Where the output of every phase the build looked up came from, in pipeline order.
    pub sources: BTreeMap<Phase, Source>,
    pub package_path: Option<PathBuf>,
}

impl BuildOutcome {
    /// The phases whose output came from `source`, in pipeline order.
    pub fn phases_from(&self, source: Source) -> Vec<Phase> {
        (self.sources.iter())
            .filter(|&(_, &s)| s == source)
            .map(|(&p, _)| p)
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("--from {from} comes after --to {to} in the pipeline")]
    Order { from: Phase, to: Phase },
    #[error(
        "build name {0:?} is not a plain folder name (letters, digits, `.`, `_`, `+` and `-`, not \
         starting with `.`, at most 200 characters): a workload's name and --build name a folder under \
         the stages directory"
    )]
    BuildName(String),
    #[error(
        "{from} starts from the recorded outputs of the phases before it; run `ipu-codegen build {workload} --to {before}` first"
    )]
    NoRecord {
        from: Phase,
        before: Phase,
        /// The workload as the user named it.
        workload: String,
        #[source]
        record: RecordError,
    },
    #[error(
        "stage record {} was made for other inputs ({recorded_workload} on {recorded_target}) than this build: \
         {from} starts from the recorded outputs of the phases before it; run `ipu-codegen build {workload} --to {before}` first",
        .path.display()
    )]
    Stale {
        path: PathBuf,
        recorded_workload: String,
        recorded_target: String,
        from: Phase,
        before: Phase,
        workload: String,
    },
    #[error(
        "stage record {} names output {}, where the store's entry for its key names {}; run \
         `ipu-codegen build {workload} --to {before}` first",
        .path.display(), .recorded.short(), .stored.short()
    )]
    Disagrees {
        path: PathBuf,
        recorded: ContentHash,
        stored: ContentHash,
        before: Phase,
        workload: String,
    },
    #[error(
        "{kind} object {} is missing from the store {}; rebuild from an earlier phase",
        .hash.short(),
        .store.display()
    )]
    MissingObject {
        kind: &'static str,
        hash: ContentHash,
        store: PathBuf,
    },
    #[error("object {} is not a {kind}", .hash.short())]
    WrongType {
        hash: ContentHash,
        kind: &'static str,
    },
    #[error("no {kind} artifact in this build")]
    NoArtifact { kind: ArtifactKind },
    #[error("{phase} reads {kind}, which the phase table does not list for it")]
    Undeclared { phase: Phase, kind: ArtifactKind },
    #[error(
        "{phase} produced {} schema {}, where the phase table says {} schema {}",
        .found.0, .found.1, .phase.output(), .phase.spec().schema
    )]
    WrongOutput {
        phase: Phase,
        found: (ArtifactKind, u32),
    },
    #[error("{phase} produced an output its verifier rejects:\n{errors}")]
    Invalid { phase: Phase, errors: String },
    #[error("package vanished from the store")]
    PackageVanished,
    #[error("creating {}", .path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A phase's own error, or one of its adapters'.
    #[error(transparent)]
    Phase(PhaseError),
    /// A phase's error that something does not fit, with what the workload's kind advises.
    #[error("{error}; {advice}")]
    DoesNotFit {
        error: PhaseError,
        advice: &'static str,
    },
    /// `place_storage` could not place the storage of the finalist `select_finalist` chose, in a
    /// build that did not run `select_finalist` (one that did tries the next finalist).
    #[error(
        "{error}; a build from select_finalist passes finalist {} ({}) over and tries the next",
        .passed.finalist,
        .passed.mapping.name()
    )]
    Unplaced {
        passed: PassedOver,
        error: Box<BuildError>,
        /// The build's outputs when it stopped, which a next try starts from.
        outputs: BTreeMap<ArtifactKind, ContentHash>,
    },
    /// No finalist the build tried could be placed: the first one's error.
    #[error(
        "{first} (place_storage placed none of the {tried} finalists under a mapping the build tried; this was the first)"
    )]
    NonePlaced {
        tried: usize,
        first: Box<BuildError>,
    },
}

/// What the tries of one build share: the config (with what it passed over so far), the outputs a
/// next try carries on from, the phases that ran, and which phases' records wait for a try that
/// places (`select_finalist` up to `place_storage`, when the build may try again).
struct Attempt {
    configs: PhaseConfigs,
    carried: BTreeMap<ArtifactKind, ContentHash>,
    ran: Vec<Phase>,
    sources: BTreeMap<Phase, Source>,
    lookups: Tally,
    held: Option<(Phase, Phase)>,
}

/// Whether `error` is `select_finalist`'s that no finalist is left to choose: every one passed over
/// or too large.
fn none_left(error: &BuildError) -> bool {
    let (BuildError::Phase(e) | BuildError::DoesNotFit { error: e, .. }) = error else {
        return false;
    };
    matches!(
        e.downcast_ref::<SelectFinalistError>(),
        Some(SelectFinalistError::AllPassedOver | SelectFinalistError::NoneFits(_))
    )
}

/// The action key of a phase on these inputs (content hashes, in the order the table lists them).
pub fn action_key(
    spec: &PhaseSpec,
    configs: &PhaseConfigs,
    target: &ContentHash,
    inputs: &[ContentHash],
) -> ContentHash {
    store::action_key(
        spec.name,
        spec.schema,
        &(spec.config)(configs),
        target,
        inputs,
    )
}

/// Every damaged stage record under `stages` (one another build's or another phase's among them),
/// every `model.ipuexe` that is not the package its build's record names, and every file or folder
/// there that could not be read; how many records it read.
pub fn verify_records(stages: &Path) -> (u64, Vec<store::Damage>, Vec<store::Damage>) {
    let names: Vec<&str> = PIPELINE.iter().map(|p| p.name()).collect();
    let package = producer(PACKAGE).expect("a phase makes the package");
    records::verify(stages, &names, package.name())
}

/// The phase that writes `kind` (none for the imported graph).
pub fn producer(kind: ArtifactKind) -> Option<Phase> {
    PIPELINE.into_iter().find(|p| p.output() == kind)
}

impl Build<'_> {
    /// `stages/<build>`.
    pub fn dir(&self) -> PathBuf {
        self.stages.join(&self.build)
    }

    pub fn record_path(&self, phase: Phase) -> PathBuf {
        self.dir().join(format!("{}.json", phase.name()))
    }

    pub fn read_record(&self, phase: Phase) -> Result<StageRecord, RecordError> {
        records::read(&self.record_path(phase))
    }

    fn target_hash(&self) -> ContentHash {
        ContentHash::of(&rmp_serde::to_vec(&self.target).expect("targets serialise"))
    }

    /// Runs phases `from..=to` of the pipeline. Its writes go to the disk in the background
    /// ([`writer`]) and have all landed when this returns.
    pub fn run(&self, from: Phase, to: Phase) -> Result<BuildOutcome, BuildError> {
        if from > to {
            return Err(BuildError::Order { from, to });
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
        let name = &self.build;
        if name.is_empty() || name.len() > 200 || name.starts_with('.') || !name.chars().all(plain)
        {
            return Err(BuildError::BuildName(name.clone()));
        }
        crate::files::remove_dead_temps(&self.dir());
        self.store.local().remove_dead_temps();
        std::thread::scope(|scope| {
            let writer = Writer::spawn(scope, self.store);
            let outcome = self.run_finalists(from, to, &writer);
            let written = writer.finish();
            let outcome = outcome?;
            written.map(|()| outcome)
        })
    }

    /// Runs the phases. When `place_storage` cannot place the chosen finalist's storage and this
    /// build ran `select_finalist`, the build passes that finalist under its mapping over, says so,
    /// and runs again from `select_finalist` on the outputs it already has, until one places or none
    /// is left (then the first placement's error stands). The stage records from `select_finalist`
    /// up to `place_storage` are written only once an attempt places.
    fn run_finalists(
        &self,
        from: Phase,
        to: Phase,
        writer: &Writer,
    ) -> Result<BuildOutcome, BuildError> {
        let select = producer(SELECTED).ok_or(BuildError::NoArtifact { kind: SELECTED })?;
        let place = producer(PLACEMENT).ok_or(BuildError::NoArtifact { kind: PLACEMENT })?;
        let retries = from <= select && to >= place;
        let mut attempt = Attempt {
            configs: self.configs.clone(),
            carried: BTreeMap::new(),
            ran: Vec::new(),
            sources: BTreeMap::new(),
            lookups: Tally::default(),
            held: retries.then_some((select, place)),
        };
        let mut first_error = None;
        let mut start = from;
        loop {
            match self.run_phases(start, to, writer, &mut attempt) {
                Err(BuildError::Unplaced {
                    passed,
                    error,
                    outputs,
                }) if retries => {
                    tracing::info!(
                        target: LOG_TARGET,
                        finalist = passed.finalist,
                        mapping = passed.mapping.name(),
                        "place_storage could not place finalist {} ({}): {error}; the next finalist is tried",
                        passed.finalist,
                        passed.mapping.name()
                    );
                    attempt.configs.select_finalist.passed_over.push(passed);
                    attempt.carried = outputs;
                    // The next attempt reads what it carries from the store.
                    writer.landed();
                    first_error.get_or_insert(*error);
                    start = select;
                }
                Err(error) if none_left(&error) => {
                    return Err(match first_error {
                        Some(first) => BuildError::NonePlaced {
                            tried: attempt.configs.select_finalist.passed_over.len(),
                            first: Box::new(first),
                        },
                        None => error,
                    });
                }
                outcome => return outcome,
            }
        }
    }

    fn run_phases(
        &self,
        from: Phase,
        to: Phase,
        writer: &Writer,
        attempt: &mut Attempt,
    ) -> Result<BuildOutcome, BuildError> {
        let configs = &attempt.configs;
        let span = tracing::info_span!(
            target: LOG_TARGET,
            "ipu_codegen.package.build",
            tile_count = self.target.tiles,
            operations = self.graph.ops.len()
        );
        let _enter = span.enter();
        let target_hash = self.target_hash();
        let mut outputs = BTreeMap::new();
        let decoded = Decoded::default();
        let graph = Object::new(store::encode(&self.graph));
        let graph_hash = graph.hash();
        writer.push(Write::Object(graph));
        decoded.insert(graph_hash, Rc::new(self.graph.clone()));
        outputs.insert(GRAPH, graph_hash);
        let mut held_records = Vec::new();
        let mut package_path = None;
        for phase in PIPELINE {
            if phase > to || writer.failed() {
                break;
            }
            if phase < from {
                let output = match attempt.carried.get(&phase.output()) {
                    Some(&carried) => carried,
                    None => self.recorded_output(phase, from, &outputs)?,
                };
                outputs.insert(phase.output(), output);
                continue;
            }
            let span = tracing::info_span!(target: LOG_TARGET, "ipu_codegen.package.phase", phase = phase.name());
            let _enter = span.enter();
            let started = Instant::now();
            let spec = phase.spec();
            let inputs: Vec<ContentHash> = spec
                .inputs
                .iter()
                .map(|&kind| {
                    outputs
                        .get(&kind)
                        .copied()
                        .ok_or(BuildError::NoArtifact { kind })
                })
                .collect::<Result<_, _>>()?;
            let key = action_key(spec, configs, &target_hash, &inputs);
            let found = self.store.lookup(&key, phase.expect())?;
            attempt
                .lookups
                .count(self.store.levels(), found.map(|f| f.level));
            let source = found.map_or(Source::Computed, |f| Source::Stored(f.level));
            attempt.sources.insert(phase, source);
            let cached = found.map(|f| f.output);
            let ipuexe = self.dir().join("model.ipuexe");
            let output = match cached {
                Some(out) => out,
                None => {
                    let object = self
                        .run_phase(phase, &outputs, &decoded, configs, writer)
                        .map_err(|error| self.unplaced(phase, error, &outputs, &decoded))?;
                    attempt.ran.push(phase);
                    // What the phase let go goes back to the system, not only to the allocator, so
                    // it does not stay resident under the phases after it.
                    crate::host_memory::release_freed();
                    let output = object.hash();
                    if spec.output == PACKAGE {
                        writer.push(Write::PackageBegin {
                            path: ipuexe.clone(),
                            body: object.clone(),
                        });
                    }
                    writer.push(Write::Object(object));
                    writer.push(Write::Action {
                        key,
                        expect: phase.expect(),
                        output,
                    });
                    output
                }
            };
            outputs.insert(phase.output(), output);
            if cfg!(debug_assertions) && cached.is_none() {
                self.verify(phase, &outputs, &decoded)?;
            }
            let elapsed_ms = started.elapsed().as_millis() as u64;
            tracing::info!(
                target: LOG_TARGET,
                phase = phase.name(),
                elapsed_ms,
                cached = cached.is_some(),
                source = source.name(),
                success = true,
                "package build phase finished"
            );
            let mut record = StageRecord {
                phase: phase.name().to_string(),
                build: self.build.clone(),
                workload: self.graph.workload.clone(),
                output,
                key,
                inputs: spec
                    .inputs
                    .iter()
                    .zip(&inputs)
                    .map(|(k, h)| (k.name().to_string(), *h))
                    .collect(),
                config: configs.json(phase.name()),
                target: self.target.name.clone(),
                elapsed_ms,
                headline: serde_json::Value::Null,
                check: ContentHash([0; 32]),
            };
            let kept = self
                .read_record(phase)
                .is_ok_and(|previous| previous.same_identity(&record));
            if !kept {
                let view = self.view(phase, &outputs, &decoded);
                record.headline = (spec.headline)(&view).map_err(BuildError::Phase)?;
                let bytes = record.checked().to_bytes();
                let path = self.record_path(phase);
                held_records.push(Write::Record { path, bytes });
            }
            // Until an attempt places, the records of the phases it may run again stay held.
            let holding = attempt
                .held
                .is_some_and(|(select, place)| (select..place).contains(&phase));
            if !holding {
                for write in held_records.drain(..) {
                    writer.push(write);
                }
            }
            if spec.output == PACKAGE {
                // A fresh package's `model.ipuexe` was begun beside its object; a stored one's is
                // written from its object unless the file holds it already.
                if let Some(output) = cached
                    && !records::holds_package(&ipuexe, &output)
                {
                    let body = self.store.get(&output)?;
                    writer.push(Write::PackageBegin {
                        path: ipuexe.clone(),
                        body: Object::new(body.ok_or(BuildError::PackageVanished)?),
                    });
                }
                writer.push(Write::Package {
                    path: ipuexe.clone(),
                    tiles: self.target.tiles,
                });
                package_path = Some(ipuexe);
            }
            // What no phase left to run reads is let go.
            let read_later: BTreeSet<ContentHash> = (PIPELINE.iter())
                .filter(|&&later| later > phase && later <= to)
                .flat_map(|later| later.inputs())
                .filter_map(|kind| outputs.get(kind).copied())
                .collect();
            decoded.retain(&read_later);
        }
        let mut ran = attempt.ran.clone();
        ran.sort();
        ran.dedup();
        let lookups = Lookups {
            build: self.build.clone(),
            tally: attempt.lookups.clone(),
        };
        writer.push(Write::Record {
            path: self.dir().join(LOOKUPS_FILE),
            bytes: lookups.to_bytes(),
        });
        Ok(BuildOutcome {
            outputs,
            ran,
            sources: attempt.sources.clone(),
            package_path,
        })
    }

    /// The output a phase before `from` recorded, if its record continues this build.
    fn recorded_output(
        &self,
        phase: Phase,
        from: Phase,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
    ) -> Result<ContentHash, BuildError> {
        let before = PIPELINE[from.index() - 1];
        let record = self
            .read_record(phase)
            .map_err(|record| BuildError::NoRecord {
                from,
                before,
                workload: self.source.clone(),
                record,
            })?;
        if !record_continues(
            &record,
            &self.graph.workload,
            &self.target.name,
            phase.inputs(),
            outputs,
        ) {
            return Err(BuildError::Stale {
                path: self.record_path(phase),
                recorded_workload: record.workload,
                recorded_target: record.target,
                from,
                before,
                workload: self.source.clone(),
            });
        }
        if let Some(stored) = self.store.lookup(&record.key, phase.expect())?
            && stored.output != record.output
        {
            return Err(BuildError::Disagrees {
                path: self.record_path(phase),
                recorded: record.output,
                stored: stored.output,
                before,
                workload: self.source.clone(),
            });
        }
        Ok(record.output)
    }

    fn view<'a>(
        &'a self,
        phase: Phase,
        outputs: &'a BTreeMap<ArtifactKind, ContentHash>,
        decoded: &'a Decoded,
    ) -> PhaseArtifacts<'a> {
        PhaseArtifacts {
            phase,
            outputs,
            store: self.store,
            decoded,
            progress: self.progress,
        }
    }

    /// Runs a phase's body; its output as an object to store, its value kept in `decoded`.
    fn run_phase(
        &self,
        phase: Phase,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
        decoded: &Decoded,
        configs: &PhaseConfigs,
        writer: &Writer,
    ) -> Result<Object, BuildError> {
        let spec = phase.spec();
        let out = (spec.run)(&self.view(phase, outputs, decoded), &self.target, configs)
            .map_err(|error| self.advise(error))?;
        if out.kind() != (spec.output, spec.schema) {
            return Err(BuildError::WrongOutput {
                phase,
                found: out.kind(),
            });
        }
        for (key, expect, object) in out.entries {
            let output = object.hash();
            writer.push(Write::Object(object));
            writer.push(Write::Action {
                key,
                expect,
                output,
            });
        }
        let object = Object::new(out.bytes);
        decoded.insert(object.hash(), out.value);
        Ok(object)
    }

    /// `place_storage`'s error that the selected finalist's storage does not fit, as
    /// [`BuildError::Unplaced`] naming that finalist and its mapping; any other error as it is.
    fn unplaced(
        &self,
        phase: Phase,
        error: BuildError,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
        decoded: &Decoded,
    ) -> BuildError {
        let source = match &error {
            BuildError::Phase(e) | BuildError::DoesNotFit { error: e, .. } => e,
            _ => return error,
        };
        let fits = source
            .downcast_ref::<PlaceStorageError>()
            .is_none_or(|e| !e.does_not_fit());
        if fits || phase.output() != PLACEMENT {
            return error;
        }
        match self.view(phase, outputs, decoded).input::<Selected>() {
            Ok(selected) => BuildError::Unplaced {
                passed: PassedOver {
                    finalist: selected.finalist,
                    mapping: selected.mapping,
                },
                error: Box::new(error),
                outputs: outputs.clone(),
            },
            Err(_) => error,
        }
    }

    /// A phase's error; one that says something does not fit gets the advice of the workload's kind.
    fn advise(&self, error: PhaseError) -> BuildError {
        let oversize = (error.downcast_ref::<LowerMidError>())
            .and_then(LowerMidError::oversize)
            .or_else(|| {
                (error.downcast_ref::<PlaceStorageError>()).and_then(PlaceStorageError::oversize)
            });
        match oversize {
            Some(what) => BuildError::DoesNotFit {
                error,
                advice: self.kind.advice(what),
            },
            None => BuildError::Phase(error),
        }
    }

    /// Runs a phase's verifier on its output in `outputs`.
    pub fn verify(
        &self,
        phase: Phase,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
        decoded: &Decoded,
    ) -> Result<(), BuildError> {
        let errors = (phase.spec().verify)(&self.view(phase, outputs, decoded), &self.target)
            .map_err(BuildError::Phase)?;
        if errors.is_empty() {
            Ok(())
        } else {
            Err(BuildError::Invalid {
                phase,
                errors: errors.join("\n"),
            })
        }
    }

    /// An artifact of this build, by the outputs a run returned.
    pub fn load<A: Artifact + 'static>(
        &self,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
    ) -> Result<Rc<A>, BuildError> {
        let kind = ArtifactKind::of::<A>();
        let hash = outputs.get(&kind).ok_or(BuildError::NoArtifact { kind })?;
        Decoded::default().get(self.store, hash)
    }

    /// The text dump of an artifact of this build (`ipu-codegen show`).
    pub fn dump(
        &self,
        kind: ArtifactKind,
        outputs: &BTreeMap<ArtifactKind, ContentHash>,
    ) -> Result<String, BuildError> {
        if kind == GRAPH {
            return Ok(self.graph.dump());
        }
        let phase = producer(kind).ok_or(BuildError::NoArtifact { kind })?;
        let decoded = Decoded::default();
        (phase.spec().dump)(&self.view(phase, outputs, &decoded), &self.target)
            .map_err(BuildError::Phase)
    }
}
