//! The phase table: one row per phase, in pipeline order, holding everything the driver, the command
//! line and the Makefile know about a phase.
//!
//! Contract: a row names the phase, the artifact kinds it reads (each the imported graph or the output
//! of an earlier row, none twice), the kind it writes (no other row writes it) and that kind's schema
//! version, and its adapters, written once here: how to take its config's canonical bytes out of
//! [`PhaseConfigs`], run it, verify its output, take the headline figures for its stage record, and
//! dump its output as text. Adapters only translate between the erased artifacts and the phase's own
//! typed function in `crate::stages`; [`check_table`] states the rules the rows keep. Adding a phase
//! is a row here, a field of [`PhaseConfigs`], the line of the command line that builds its config,
//! and its module. A [`Phase`] is a row of the table, [`PIPELINE`] every row in order; an adapter
//! sees its artifacts through [`PhaseArtifacts`] and may read only the inputs its row declares (the
//! action key covers exactly those): asking for any other is an error, never a silent dependency.

use super::BuildError;
use super::artifact::{Decoded, Output, PhaseError};
use crate::exchange::Schedule;
use crate::ir::{
    ExchangeStorage, Exchanges, Graph, Mid, Package, Placement, Selected, TileCode, verify_mid,
};
use crate::progress::Progress;
use crate::stages::build_images::{self, BuildImagesConfig, build_images};
use crate::stages::emit::{self, EmitConfig, emit};
use crate::stages::lower_exchanges::{self, LowerExchangesConfig, lower_exchanges, pattern_keys};
use crate::stages::lower_mid::{LowerMidConfig, lower_mid};
use crate::stages::place_storage::{self, PlaceStorageConfig, PlacementOrder, place_storage};
use crate::stages::plan_exchange_storage::{
    self, PlanExchangeStorageConfig, plan_exchange_storage,
};
use crate::stages::select_finalist::{self, MappingChoice, SelectFinalistConfig, select_finalist};
use crate::store::{self, Artifact, ArtifactKind, ContentHash, Expect, Object, Store};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::rc::Rc;

/// Every phase's config, one field per phase, named as the phase. Each phase's action key covers only
/// its own; its stage record shows it.
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

impl Default for PhaseConfigs {
    /// Every phase's config as `ipu-codegen build` passes it without options.
    fn default() -> PhaseConfigs {
        PhaseConfigs {
            lower_mid: LowerMidConfig::default(),
            select_finalist: SelectFinalistConfig {
                mapping: MappingChoice::Auto,
                passed_over: Vec::new(),
            },
            plan_exchange_storage: PlanExchangeStorageConfig {},
            lower_exchanges: LowerExchangesConfig {},
            place_storage: PlaceStorageConfig {
                order: PlacementOrder::Lifetime,
            },
            emit: EmitConfig {},
            build_images: BuildImagesConfig {},
        }
    }
}

impl PhaseConfigs {
    /// The config of the phase named `phase`, as its stage record shows it (`null` for none).
    pub fn json(&self, phase: &str) -> serde_json::Value {
        let v = serde_json::to_value(self).expect("configs serialise");
        v.get(phase).cloned().unwrap_or(serde_json::Value::Null)
    }
}

/// One row of the phase table.
#[derive(Clone, Copy)]
pub struct PhaseSpec {
    /// The name in logs, stage records, dumps and Make targets; the subcommand is the name with dashes.
    pub name: &'static str,
    /// The phase's subcommand, in one line.
    pub about: &'static str,
    /// What the phase reads, in the order its action key hashes them.
    pub inputs: &'static [ArtifactKind],
    pub output: ArtifactKind,
    /// The output's schema version: part of the action key.
    pub schema: u32,
    /// The canonical bytes of the phase's own config: part of the action key.
    pub config: fn(&PhaseConfigs) -> Vec<u8>,
    /// Runs the phase on its inputs.
    pub run: fn(&PhaseArtifacts, &Target, &PhaseConfigs) -> Result<Output, PhaseError>,
    /// Every problem the phase's verifier finds in its output (none for a valid one).
    pub verify: fn(&PhaseArtifacts, &Target) -> Result<Vec<String>, PhaseError>,
    /// The headline figures of its output, for the stage record.
    pub headline: fn(&PhaseArtifacts) -> Result<serde_json::Value, PhaseError>,
    /// The stable text dump of its output (`ipu-codegen show`).
    pub dump: fn(&PhaseArtifacts, &Target) -> Result<String, PhaseError>,
}

/// The kinds the table names.
pub const GRAPH: ArtifactKind = ArtifactKind::of::<Graph>();
pub const MID: ArtifactKind = ArtifactKind::of::<Mid>();
pub const SELECTED: ArtifactKind = ArtifactKind::of::<Selected>();
pub const EXCHANGE_STORAGE: ArtifactKind = ArtifactKind::of::<ExchangeStorage>();
pub const EXCHANGES: ArtifactKind = ArtifactKind::of::<Exchanges>();
pub const PLACEMENT: ArtifactKind = ArtifactKind::of::<Placement>();
pub const TILE_CODE: ArtifactKind = ArtifactKind::of::<TileCode>();
pub const PACKAGE: ArtifactKind = ArtifactKind::of::<Package>();

pub(super) fn canonical<C: Serialize>(config: &C) -> Vec<u8> {
    rmp_serde::to_vec(config).expect("configs serialise")
}

/// A phase function's result as the table passes it on.
fn out<A, E>(result: Result<A, E>) -> Result<Output, PhaseError>
where
    A: Artifact + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    Ok(Output::of(result?))
}

/// The pipeline, in order.
pub static PHASES: [PhaseSpec; 7] = [
    PhaseSpec {
        name: "lower_mid",
        about: "Lower the graph to operators and keep the best candidate plans",
        inputs: &[GRAPH],
        output: MID,
        schema: Mid::SCHEMA,
        config: |c| canonical(&c.lower_mid),
        run: |a, t, c| {
            let graph = a.input::<Graph>()?;
            out(lower_mid(&graph, t, &c.lower_mid))
        },
        verify: |a, t| {
            let (mid, graph) = (a.output::<Mid>()?, a.input::<Graph>()?);
            Ok(verify_mid(&mid, &graph, t))
        },
        headline: |a| {
            let mid = a.output::<Mid>()?;
            Ok(json!({
                "operators": mid.operators.len(),
                "finalists": mid.finalists.len(),
                "best_estimated_cycles": mid.finalists.first().map(|f| f.estimate.cycles),
            }))
        },
        dump: |a, _| Ok(a.output::<Mid>()?.dump()),
    },
    PhaseSpec {
        name: "select_finalist",
        about: "Choose a finalist plan and tile mapping; build buffers, steps and transfers",
        inputs: &[GRAPH, MID],
        output: SELECTED,
        schema: Selected::SCHEMA,
        config: |c| canonical(&c.select_finalist),
        run: |a, t, c| {
            let (graph, mid) = (a.input::<Graph>()?, a.input::<Mid>()?);
            out(select_finalist(&graph, &mid, t, &c.select_finalist))
        },
        verify: |a, t| {
            let sel = a.output::<Selected>()?;
            Ok(select_finalist::verify(&sel, t))
        },
        headline: |a| {
            let sel = a.output::<Selected>()?;
            Ok(json!({
                "finalist": sel.finalist,
                "mapping": sel.mapping,
                "estimated_cycles": sel.estimate.cycles,
                "buffers": sel.buffers.len(),
                "exchange_phases": sel.exchanges.len(),
                "transfers": sel.exchanges.iter().map(|e| e.transfers.len()).sum::<usize>(),
            }))
        },
        dump: |a, _| Ok(a.output::<Selected>()?.dump()),
    },
    PhaseSpec {
        name: "plan_exchange_storage",
        about: "Lay out every exchange phase's receive buffers and their sizes",
        inputs: &[SELECTED],
        output: EXCHANGE_STORAGE,
        schema: ExchangeStorage::SCHEMA,
        config: |c| canonical(&c.plan_exchange_storage),
        run: |a, _, c| {
            let sel = a.input::<Selected>()?;
            out(plan_exchange_storage(&sel, &c.plan_exchange_storage))
        },
        verify: |a, _| {
            let (xs, sel) = (a.output::<ExchangeStorage>()?, a.input::<Selected>()?);
            Ok(plan_exchange_storage::verify(&xs, &sel))
        },
        headline: |a| {
            let xs = a.output::<ExchangeStorage>()?;
            Ok(json!({
                "max_row_bytes": xs.phases.iter().map(|p| p.max_row_bytes).collect::<Vec<_>>(),
            }))
        },
        dump: |a, _| Ok(a.output::<ExchangeStorage>()?.dump()),
    },
    PhaseSpec {
        name: "lower_exchanges",
        about: "Schedule every exchange phase cycle by cycle",
        inputs: &[SELECTED, EXCHANGE_STORAGE],
        output: EXCHANGES,
        schema: Exchanges::SCHEMA,
        config: |c| canonical(&c.lower_exchanges),
        run: run_lower_exchanges,
        verify: |a, t| {
            let (sel, ex) = (a.input::<Selected>()?, a.output::<Exchanges>()?);
            Ok(lower_exchanges::verify(&ex, &sel, t))
        },
        headline: |a| {
            let ex = a.output::<Exchanges>()?;
            let schedules = || ex.phases.iter().map(|p| &p.schedule);
            Ok(json!({
                "horizons": schedules().map(|s| s.horizon).collect::<Vec<_>>(),
                "lower_bounds": schedules().map(|s| s.lower_bound).collect::<Vec<_>>(),
                "pieces": schedules().map(|s| s.pieces.len()).collect::<Vec<_>>(),
            }))
        },
        dump: |a, _| Ok(a.output::<Exchanges>()?.dump()),
    },
    PhaseSpec {
        name: "place_storage",
        about: "Give every buffer of every tile an address",
        inputs: &[SELECTED, EXCHANGES],
        output: PLACEMENT,
        schema: Placement::SCHEMA,
        config: |c| canonical(&c.place_storage),
        run: |a, t, c| {
            let (sel, ex) = (a.input::<Selected>()?, a.input::<Exchanges>()?);
            out(place_storage(&sel, &ex, t, &c.place_storage))
        },
        verify: |a, t| {
            let (pl, sel) = (a.output::<Placement>()?, a.input::<Selected>()?);
            Ok(place_storage::verify(&pl, &sel, t))
        },
        headline: |a| {
            let pl = a.output::<Placement>()?;
            Ok(json!({
                "max_peak_bytes": pl.tiles.iter().map(|t| t.peak_bytes).max(),
                "max_code_bytes": pl.tiles.iter().map(|t| t.code_bytes).max(),
            }))
        },
        dump: |a, t| {
            let (pl, sel) = (a.output::<Placement>()?, a.input::<Selected>()?);
            Ok(pl.dump(&sel, t))
        },
    },
    PhaseSpec {
        name: "emit",
        about: "Write every tile's program and the host program",
        inputs: &[SELECTED, EXCHANGES, PLACEMENT],
        output: TILE_CODE,
        schema: TileCode::SCHEMA,
        config: |c| canonical(&c.emit),
        run: |a, t, c| {
            let (sel, ex) = (a.input::<Selected>()?, a.input::<Exchanges>()?);
            let pl = a.input::<Placement>()?;
            out(emit(&sel, &ex, &pl, t, &c.emit))
        },
        verify: |a, t| {
            let (code, sel) = (a.output::<TileCode>()?, a.input::<Selected>()?);
            Ok(emit::verify(&code, &sel, t))
        },
        headline: |a| {
            let code = a.output::<TileCode>()?;
            Ok(json!({
                "instructions": code.tiles.iter().map(|p| p.instruction_count()).sum::<usize>(),
            }))
        },
        dump: |a, _| Ok(a.output::<TileCode>()?.dump()),
    },
    PhaseSpec {
        name: "build_images",
        about: "Encode tile images and write model.ipuexe",
        inputs: &[TILE_CODE, PLACEMENT, SELECTED],
        output: PACKAGE,
        schema: Package::SCHEMA,
        config: |c| canonical(&c.build_images),
        run: |a, t, c| {
            let (code, pl) = (a.input::<TileCode>()?, a.input::<Placement>()?);
            let sel = a.input::<Selected>()?;
            out(build_images(&code, &pl, &sel, t, &c.build_images))
        },
        verify: |a, _| {
            let package = a.output::<Package>()?;
            let (code, pl) = (a.input::<TileCode>()?, a.input::<Placement>()?);
            Ok(build_images::verify(&package, &code, &pl))
        },
        headline: |a| {
            let package = a.output::<Package>()?;
            Ok(json!({
                "estimated_cycles": package.estimated_cycles,
                "code_bytes": package.tiles.iter().map(|t| t.code.len()).sum::<usize>(),
            }))
        },
        dump: |a, _| Ok(a.output::<Package>()?.dump()),
    },
];

/// The action of the schedule cache's entries: a phase pattern's key -> its schedule.
const SCHEDULE_ACTION: &str = "schedule";

/// `lower_exchanges` with the schedules of earlier builds: each phase pattern's stored schedule, by
/// pattern key, goes in; each schedule comes out stored under its pattern's key.
fn run_lower_exchanges(
    a: &PhaseArtifacts,
    t: &Target,
    c: &PhaseConfigs,
) -> Result<Output, PhaseError> {
    let (sel, xs) = (a.input::<Selected>()?, a.input::<ExchangeStorage>()?);
    let s = a.store();
    let mut known = BTreeMap::new();
    let keys: BTreeSet<ContentHash> = pattern_keys(&sel, t, &c.lower_exchanges)
        .into_iter()
        .collect();
    for key in keys {
        if let Some(found) = s.lookup(&key, Expect::of::<Schedule>(SCHEDULE_ACTION))?
            && let Some(bytes) = s.get(&found.output)?
            && let Ok(schedule) = store::decode::<Schedule>(&bytes, &found.output)
        {
            known.insert(key, schedule);
        }
    }
    let exchanges = lower_exchanges(&sel, &xs, t, &c.lower_exchanges, &known, a.progress)?;
    // Every schedule is stored under its pattern (once, phases alike share it), beside the phase's
    // output.
    let mut stored = BTreeSet::new();
    let schedules: Vec<_> = (exchanges.phases.iter())
        .filter(|phase| stored.insert(phase.pattern))
        .map(|phase| (phase.pattern, Object::new(store::encode(&phase.schedule))))
        .collect();
    let mut out = Output::of(exchanges);
    for (pattern, schedule) in schedules {
        out = out.with_entry(pattern, Expect::of::<Schedule>(SCHEDULE_ACTION), schedule);
    }
    Ok(out)
}

/// Every rule a phase table keeps, each broken one with its row: names are distinct snake_case words;
/// every input is `imported` or the output of an earlier row, and none is listed twice; no row writes
/// `imported` or what another row writes.
pub fn check_table(table: &[PhaseSpec], imported: ArtifactKind) -> Vec<String> {
    let mut v = Verifier::default();
    let mut available = vec![imported];
    for (i, row) in table.iter().enumerate() {
        let at = format!("phase {i} ({})", row.name);
        v.check(
            !row.name.is_empty()
                && row
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
            || format!("{at}: the name is not a snake_case word"),
        );
        v.check(table[..i].iter().all(|r| r.name != row.name), || {
            format!("{at}: an earlier phase has the same name")
        });
        for (j, input) in row.inputs.iter().enumerate() {
            v.check(available.contains(input), || {
                format!("{at}: reads {input}, which neither the import nor an earlier phase writes")
            });
            v.check(!row.inputs[..j].contains(input), || {
                format!("{at}: reads {input} twice")
            });
        }
        v.check(!available.contains(&row.output), || {
            format!(
                "{at}: writes {}, which the import or an earlier phase writes",
                row.output
            )
        });
        available.push(row.output);
    }
    v.finish()
}

/// A phase of the pipeline: its row in the phase table. Phases compare in pipeline order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Phase(usize);

/// Every phase, in pipeline order: one per row of the phase table.
pub const PIPELINE: [Phase; PHASES.len()] = {
    let mut all = [Phase(0); PHASES.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = Phase(i);
        i += 1;
    }
    all
};

impl Phase {
    /// The phase's row in the table.
    pub fn spec(self) -> &'static PhaseSpec {
        &PHASES[self.0]
    }

    /// The name in logs, stage records and dumps: `lower_mid`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The subcommand: `lower-mid`.
    pub fn command(self) -> String {
        self.name().replace('_', "-")
    }

    /// The phase named `name` or `command`.
    pub fn parse(name: &str) -> Option<Phase> {
        PIPELINE
            .into_iter()
            .find(|p| p.name() == name || p.command() == name)
    }

    /// The place in the pipeline, from 0.
    pub fn index(self) -> usize {
        self.0
    }

    pub fn inputs(self) -> &'static [ArtifactKind] {
        self.spec().inputs
    }

    pub fn output(self) -> ArtifactKind {
        self.spec().output
    }

    /// What the phase's action entries must name: an output of its kind and schema.
    pub fn expect(self) -> Expect<'static> {
        let spec = self.spec();
        Expect {
            action: spec.name,
            kind: spec.output.name(),
            schema: spec.schema,
        }
    }

    /// One line for the phase's subcommand.
    pub fn about(self) -> &'static str {
        self.spec().about
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The artifacts one phase sees: the build's outputs so far (its inputs, and its own output once it
/// has one), decoded on demand.
pub struct PhaseArtifacts<'a> {
    pub(super) phase: Phase,
    pub(super) outputs: &'a BTreeMap<ArtifactKind, ContentHash>,
    pub(super) store: &'a dyn Store,
    pub(super) decoded: &'a Decoded,
    /// Hears how far the phase's long steps have come.
    pub(super) progress: &'a dyn Progress,
}

impl PhaseArtifacts<'_> {
    /// The phase's input of type `A`.
    pub fn input<A: Artifact + 'static>(&self) -> Result<Rc<A>, BuildError> {
        let kind = ArtifactKind::of::<A>();
        if !self.phase.inputs().contains(&kind) {
            return Err(BuildError::Undeclared {
                phase: self.phase,
                kind,
            });
        }
        self.get(kind)
    }

    /// The phase's output, as an `A`.
    pub fn output<A: Artifact + 'static>(&self) -> Result<Rc<A>, BuildError> {
        let kind = ArtifactKind::of::<A>();
        if self.phase.output() != kind {
            return Err(BuildError::Undeclared {
                phase: self.phase,
                kind,
            });
        }
        self.get(kind)
    }

    fn get<A: Artifact + 'static>(&self, kind: ArtifactKind) -> Result<Rc<A>, BuildError> {
        let hash = self
            .outputs
            .get(&kind)
            .ok_or(BuildError::NoArtifact { kind })?;
        self.decoded.get::<A>(self.store, hash)
    }

    /// The store, for a phase that reuses results of earlier builds by their own keys
    /// (`lower_exchanges`' schedules).
    pub fn store(&self) -> &dyn Store {
        self.store
    }
}
