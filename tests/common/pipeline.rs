//! The pipeline in-process: a preset built phase by phase through the library, with the configs the
//! command line uses by default, every artifact kept. Built once per test binary; every phase's
//! verifier must accept what it holds.

use super::{SMALL, SMALL_ATTENTION};
use ipu_codegen::driver::PhaseConfigs;
use ipu_codegen::exchange::Schedule;
use ipu_codegen::ir::{
    ExchangeStorage, Exchanges, Graph, Mid, Package, Placement, Selected, TileCode, verify_mid,
};
use ipu_codegen::stages::build_images::{self};
use ipu_codegen::stages::emit::{self};
use ipu_codegen::stages::lower_exchanges::{self, lower_exchanges};
use ipu_codegen::stages::lower_mid::{self, FormChoice, WeightsChoice};
use ipu_codegen::stages::place_storage::{self};
use ipu_codegen::stages::plan_exchange_storage::{self};
use ipu_codegen::stages::select_finalist::{self, MappingChoice};
use ipu_codegen::target::Target;
use ipu_codegen::workload::WorkloadSpec;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The target the command line builds for by default.
pub const TARGET: &str = "mk2-1500";

/// Every artifact of one build, graph to package.
pub struct Built {
    pub target: Target,
    pub graph: Graph,
    pub mid: Mid,
    pub selected: Selected,
    pub storage: ExchangeStorage,
    pub exchanges: Exchanges,
    pub placement: Placement,
    pub code: TileCode,
    pub package: Package,
}

/// Builds preset `workload` through every phase with the default configs.
pub fn build(workload: &str) -> Built {
    build_with(workload, &PhaseConfigs::default())
}

/// Builds preset `workload` through every phase with configs `c`, with no stored schedules to reuse.
pub fn build_with(workload: &str, c: &PhaseConfigs) -> Built {
    let text = ipu_codegen::workload::preset_text(workload)
        .unwrap_or_else(|| panic!("no preset {workload}"));
    let spec = WorkloadSpec::parse(&text, &format!("preset {workload}")).expect("preset parses");
    let graph = spec.import().expect("preset imports");
    let target = Target::preset(TARGET).expect("target preset");
    let mid = lower_mid::lower_mid(&graph, &target, &c.lower_mid).expect("lower_mid");
    let selected = select_finalist::select_finalist(&graph, &mid, &target, &c.select_finalist)
        .expect("select_finalist");
    let storage = plan_exchange_storage::plan_exchange_storage(&selected, &c.plan_exchange_storage)
        .expect("plan_exchange_storage");
    let exchanges = lower_exchanges(
        &selected,
        &storage,
        &target,
        &c.lower_exchanges,
        &BTreeMap::new(),
        &ipu_codegen::progress::Silent,
    )
    .expect("lower_exchanges");
    let placement = place_storage::place_storage(&selected, &exchanges, &target, &c.place_storage)
        .expect("place_storage");
    let code = emit::emit(&selected, &exchanges, &placement, &target, &c.emit).expect("emit");
    let package =
        build_images::build_images(&code, &placement, &selected, &target, &c.build_images)
            .expect("build_images");
    let built = Built {
        target,
        graph,
        mid,
        selected,
        storage,
        exchanges,
        placement,
        code,
        package,
    };
    built.assert_accepted(workload);
    built
}

impl Built {
    /// `lower_exchanges`' verdict on the schedules with `schedule` as the schedule of exchange phase
    /// `phase`.
    pub fn check_schedule(&self, phase: usize, schedule: &Schedule) -> Vec<String> {
        let mut exchanges = self.exchanges.clone();
        exchanges.phases[phase].schedule = schedule.clone();
        lower_exchanges::verify(&exchanges, &self.selected, &self.target)
    }

    /// Every phase's verifier accepts the undamaged artifacts: a test that damages one can only see an
    /// error because of the damage.
    fn assert_accepted(&self, workload: &str) {
        let t = &self.target;
        let mut verdicts = vec![
            ("lower_mid", verify_mid(&self.mid, &self.graph, t)),
            (
                "select_finalist",
                select_finalist::verify(&self.selected, t),
            ),
            (
                "plan_exchange_storage",
                plan_exchange_storage::verify(&self.storage, &self.selected),
            ),
            (
                "place_storage",
                place_storage::verify(&self.placement, &self.selected, t),
            ),
            ("emit", emit::verify(&self.code, &self.selected, t)),
            (
                "build_images",
                build_images::verify(&self.package, &self.code, &self.placement),
            ),
        ];
        for (i, p) in self.exchanges.phases.iter().enumerate() {
            verdicts.push(("lower_exchanges", self.check_schedule(i, &p.schedule)));
        }
        for (phase, errors) in verdicts {
            assert!(
                errors.is_empty(),
                "{workload}: the {phase} verifier rejects the valid artifact:\n{}",
                errors.join("\n")
            );
        }
    }
}

/// The small MLP preset in the normal form with its weights gathered at every run, mapped row-major
/// (a plan with every kind of matmul buffer and transfer), built once per test binary.
pub fn small() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut c = PhaseConfigs::default();
        c.lower_mid.form = FormChoice::Normal;
        c.lower_mid.weights = WeightsChoice::Gathered;
        c.select_finalist.mapping = MappingChoice::RowMajor;
        build_with(SMALL, &c)
    })
}

/// The small attention preset, built once per test binary.
pub fn small_attention() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| build(SMALL_ATTENTION))
}
