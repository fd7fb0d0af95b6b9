//! The arguments every build takes ([`BuildArgs`]: the workload, its overrides, the target and each
//! phase's options, turned into the workload spec and the `PhaseConfigs`), and the parsers of every
//! argument that names one of a closed set (targets, phases, what `show` dumps, element types, each
//! phase's choices). Such a parser lists its names as the argument's possible values, so `--help`
//! shows them and the completion scripts complete them, and refuses any other name with the closest
//! ones (`did you mean`, [`ipu_codegen::suggest`]).

use anyhow::{Context, Result, bail};
use clap::Args;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use ipu_codegen::driver::{Build, GRAPH, PIPELINE, Phase, PhaseConfigs};
use ipu_codegen::files;
use ipu_codegen::ir::DType;
use ipu_codegen::progress::Progress;
use ipu_codegen::stages::build_images::BuildImagesConfig;
use ipu_codegen::stages::emit::EmitConfig;
use ipu_codegen::stages::lower_exchanges::LowerExchangesConfig;
use ipu_codegen::stages::lower_mid::{FormChoice, LowerMidConfig, WeightsChoice};
use ipu_codegen::stages::place_storage::{PlaceStorageConfig, PlacementOrder};
use ipu_codegen::stages::plan_exchange_storage::PlanExchangeStorageConfig;
use ipu_codegen::stages::select_finalist::{MappingChoice, SelectFinalistConfig};
use ipu_codegen::store::Store;
use ipu_codegen::suggest;
use ipu_codegen::target::Target;
use ipu_codegen::workload::{Overrides, WorkloadSpec};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The target a build is for unless `--target` says otherwise.
pub const DEFAULT_TARGET: &str = "mk2-1500";

/// The workload, its overrides, the target and every phase's options.
#[derive(Args, Debug, Clone)]
pub struct BuildArgs {
    /// A preset (`siglip-mlp`, `siglip-mlp-small`, `attention-flash`, `attention-flash-small`,
    /// `bert-encoder-small`, `minilm-encoder`) or a TOML file.
    pub workload: String,
    /// Build name (folder under the stages directory); defaults to the workload id, followed by the
    /// target's name for a target other than the default.
    #[arg(long)]
    pub build: Option<String>,
    /// The target preset.
    #[arg(long, default_value = DEFAULT_TARGET, value_parser = target_parser())]
    pub target: String,
    /// Sequences in the batch (the spec's `batch` by default).
    #[arg(long)]
    batch: Option<u32>,
    /// Tokens per sequence; an attention's query length.
    #[arg(long)]
    tokens: Option<u32>,
    /// MLP and encoder: the model (hidden) dimension.
    #[arg(long)]
    dimension: Option<u32>,
    /// MLP and encoder: the feed-forward (intermediate) dimension.
    #[arg(long)]
    hidden: Option<u32>,
    /// MLP: blocks in sequence; encoder: layers.
    #[arg(long)]
    blocks: Option<u32>,
    /// MLP: whether each matmul adds a bias (true or false).
    #[arg(long)]
    biases: Option<bool>,
    /// The type the AMP accumulates in.
    #[arg(long, value_parser = partials_parser())]
    partials: Option<DType>,
    /// The seed `run` draws unbound inputs and weights from (the spec's `seed` key by default); no
    /// part of the build.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Attention: key and value length (the query length by default).
    #[arg(long)]
    key_tokens: Option<u32>,
    /// Attention and encoder: heads.
    #[arg(long)]
    heads: Option<u32>,
    /// Attention: the dimension of each head.
    #[arg(long)]
    head_dim: Option<u32>,
    /// Attention: whether query `i` sees only keys `0..=i` (true or false).
    #[arg(long)]
    causal: Option<bool>,
    /// lower_mid: plans kept for select_finalist (1 to 64).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    finalists: u32,
    /// lower_mid: the matmuls' operand forms the plan search may choose.
    #[arg(long, value_parser = form_parser(), default_value = "auto")]
    form: FormChoice,
    /// lower_mid: where the matmuls' weight panels may live.
    #[arg(long, value_parser = weights_parser(), default_value = "auto")]
    weight_panels: WeightsChoice,
    /// select_finalist: grid-to-tile mapping.
    #[arg(long, value_parser = mapping_parser(), default_value = "auto")]
    mapping: MappingChoice,
    /// place_storage: the order buffers are placed in.
    #[arg(long, value_parser = placement_order_parser(), default_value = "lifetime")]
    placement_order: PlacementOrder,
}

/// A parser of one name of a closed set: the names are its possible values (shown by `--help`,
/// completed by the shells); any other is refused with the set and the closest names.
#[derive(Clone)]
pub struct NameParser {
    /// What a name names, in the message: `target`.
    what: &'static str,
    names: Vec<PossibleValue>,
}

impl NameParser {
    pub fn new(what: &'static str, names: impl IntoIterator<Item = PossibleValue>) -> NameParser {
        NameParser {
            what,
            names: names.into_iter().collect(),
        }
    }
}

impl TypedValueParser for NameParser {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        let given = value.to_string_lossy();
        if let Some(found) = self.names.iter().find(|n| n.matches(&given, false)) {
            return Ok(found.get_name().to_string());
        }
        let names: Vec<&str> = self.names.iter().map(PossibleValue::get_name).collect();
        let flag = arg.map(|a| format!(" for {a}")).unwrap_or_default();
        let message = format!(
            "unknown {what} {given:?}{flag}; {what}s: {}{}",
            names.join(", "),
            suggest::did_you_mean(&given, names.iter().copied()),
            what = self.what,
        );
        let mut cmd = cmd.clone();
        Err(cmd.error(ErrorKind::InvalidValue, message))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().cloned()))
    }
}

/// A flag taking one of `all` by its name, each value listed with its help.
fn choice_parser<T: Copy + Send + Sync + 'static>(
    what: &'static str,
    all: &'static [T],
    name: fn(T) -> &'static str,
    help: fn(T) -> Option<&'static str>,
) -> impl TypedValueParser<Value = T> {
    let names = all
        .iter()
        .map(|&c| PossibleValue::new(name(c)).help(help(c)));
    NameParser::new(what, names).map(move |given| {
        (all.iter().copied())
            .find(|&c| name(c) == given)
            .expect("the parser takes only these names")
    })
}

/// `--mapping`: the names of [`MappingChoice`], each with its help.
fn mapping_parser() -> impl TypedValueParser<Value = MappingChoice> {
    choice_parser(
        "mapping",
        &MappingChoice::ALL,
        MappingChoice::name,
        |m| match m {
            MappingChoice::Auto => Some(
                "Every mapping for the first finalist that fits, its cheapest for the others; the least modelled cycles kept",
            ),
            MappingChoice::SharedPanels => {
                Some("Column blocks that gather the same panel on adjacent tiles (supertile pairs)")
            }
            MappingChoice::RowMajor | MappingChoice::ColumnMajor => None,
        },
    )
}

/// `--form`: the names of [`FormChoice`], each with its help.
fn form_parser() -> impl TypedValueParser<Value = FormChoice> {
    choice_parser("form", &FormChoice::ALL, FormChoice::name, |f| {
        Some(match f {
            FormChoice::Auto => "Either form, chosen by estimated cycles",
            FormChoice::Normal => "Tokens are the AMP's rows, the weights its stationary operand",
            FormChoice::Transposed => {
                "The weights' columns are the AMP's rows, the tokens its stationary operand"
            }
        })
    })
}

/// `--weight-panels`: the names of [`WeightsChoice`], each with its help.
fn weights_parser() -> impl TypedValueParser<Value = WeightsChoice> {
    choice_parser(
        "weight panel placement",
        &WeightsChoice::ALL,
        WeightsChoice::name,
        |w| {
            Some(match w {
                WeightsChoice::Auto => {
                    "Resident or gathered, chosen by estimated cycles within memory"
                }
                WeightsChoice::Resident => {
                    "Each tile keeps its weight panels, streamed once at initialize"
                }
                WeightsChoice::Gathered => {
                    "Home pieces spread over the grid, gathered into panels at every run"
                }
            })
        },
    )
}

/// `--placement-order`: the names of [`PlacementOrder`], each with its help.
fn placement_order_parser() -> impl TypedValueParser<Value = PlacementOrder> {
    choice_parser(
        "placement order",
        &PlacementOrder::ALL,
        PlacementOrder::name,
        |o| {
            Some(match o {
                PlacementOrder::Lifetime => {
                    "Place buffers in order of birth, larger first among equals"
                }
                PlacementOrder::Size => "Place the largest buffers first",
            })
        },
    )
}

/// `--partials`: f16 or f32.
fn partials_parser() -> impl TypedValueParser<Value = DType> {
    const TYPES: [DType; 2] = [DType::F16, DType::F32];
    choice_parser(
        "type",
        &TYPES,
        |t| if t == DType::F16 { "f16" } else { "f32" },
        |t| {
            Some(if t == DType::F16 {
                "Accumulate in half precision"
            } else {
                "Accumulate in single precision"
            })
        },
    )
}

/// A target preset's name (`--target`, `target [NAME]`).
pub fn target_parser() -> NameParser {
    NameParser::new("target", Target::PRESETS.map(PossibleValue::new))
}

/// A phase by its name (`lower_mid`) or its subcommand's (`lower-mid`), as `--from` and `--to` take it.
pub fn phase_parser() -> impl TypedValueParser<Value = Phase> {
    let names = PIPELINE.map(|p| {
        PossibleValue::new(p.name())
            .alias(p.command())
            .help(p.about())
    });
    NameParser::new("phase", names).map(|name| Phase::parse(&name).expect("a phase's name"))
}

/// What `show` dumps: `graph`, or a phase's output by the phase's name.
pub fn dump_parser() -> impl TypedValueParser<Value = ipu_codegen::store::ArtifactKind> {
    let graph = PossibleValue::new("graph").help("The imported graph");
    let phases = PIPELINE.map(|p| {
        PossibleValue::new(p.name())
            .alias(p.command())
            .help(p.about())
    });
    NameParser::new("dump", std::iter::once(graph).chain(phases)).map(|name| {
        match Phase::parse(&name) {
            Some(phase) => phase.output(),
            None => GRAPH,
        }
    })
}

/// The target preset `name`, which the argument's parser has taken.
pub fn target_preset(name: &str) -> Result<Target> {
    Target::preset(name).with_context(|| {
        format!(
            "unknown target {name:?}; targets: {}{}",
            Target::PRESETS.join(", "),
            suggest::did_you_mean(name, Target::PRESETS)
        )
    })
}

impl BuildArgs {
    pub fn spec(&self) -> Result<WorkloadSpec> {
        use ipu_codegen::workload::{preset_path, presets, suggest};
        let (path, origin) = match preset_path(&self.workload) {
            Some(path) => (path, format!("preset {}", self.workload)),
            None => {
                let path = PathBuf::from(&self.workload);
                if !path.exists() {
                    let hint = match suggest(&self.workload).first() {
                        Some(close) => format!("; did you mean `{close}`?"),
                        None => String::new(),
                    };
                    bail!(
                        "unknown workload {:?}: not a preset ({}) nor a file{hint}",
                        self.workload,
                        presets().join(", ")
                    );
                }
                let origin = path.display().to_string();
                (path, origin)
            }
        };
        let text = files::read_text(&path, &files::WORKLOAD)?;
        let mut spec = WorkloadSpec::parse(&text, &origin)?;
        spec.apply(&Overrides {
            batch: self.batch,
            tokens: self.tokens,
            dimension: self.dimension,
            hidden: self.hidden,
            blocks: self.blocks,
            biases: self.biases,
            partials: self.partials,
            seed: self.seed,
            key_tokens: self.key_tokens,
            heads: self.heads,
            head_dim: self.head_dim,
            causal: self.causal,
        })?;
        Ok(spec)
    }

    pub fn target(&self) -> Result<Target> {
        target_preset(&self.target)
    }

    pub fn configs(&self) -> PhaseConfigs {
        PhaseConfigs {
            lower_mid: LowerMidConfig {
                finalists: self.finalists,
                form: self.form,
                weights: self.weight_panels,
            },
            select_finalist: SelectFinalistConfig {
                mapping: self.mapping,
                passed_over: Vec::new(),
            },
            plan_exchange_storage: PlanExchangeStorageConfig {},
            lower_exchanges: LowerExchangesConfig {},
            place_storage: PlaceStorageConfig {
                order: self.placement_order,
            },
            emit: EmitConfig {},
            build_images: BuildImagesConfig {},
        }
    }

    /// `--build`, or the workload's id, with the target's name unless it is the default one.
    pub fn build_name(&self, spec: &WorkloadSpec) -> String {
        self.build.clone().unwrap_or_else(|| {
            let id = spec.id();
            if self.target == DEFAULT_TARGET {
                id
            } else {
                format!("{id}-{}", self.target)
            }
        })
    }

    /// The build of these arguments; `progress` hears of its phases' long steps.
    pub fn build<'a>(
        &self,
        store: &'a dyn Store,
        stages: &Path,
        progress: &'a dyn Progress,
    ) -> Result<Build<'a>> {
        let spec = self.spec()?;
        let graph = spec.import()?;
        Ok(Build {
            store,
            source: self.workload.clone(),
            stages: stages.to_path_buf(),
            build: self.build_name(&spec),
            kind: spec.kind(),
            target: self.target()?,
            graph,
            configs: self.configs(),
            progress,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::ArgAction;

    /// Every argument of `cmd` and its subcommands, with the path of subcommands it belongs to.
    fn arguments(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
        for arg in cmd.get_arguments() {
            out.push((path.to_string(), arg.clone()));
        }
        for sub in cmd.get_subcommands() {
            arguments(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_argument_is_described() {
        let mut cmd = super::super::command();
        cmd.build();
        let mut all = Vec::new();
        arguments(&cmd, "ipu-codegen", &mut all);
        let undescribed: Vec<String> = all
            .iter()
            .filter(|(_, a)| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version))
            .filter(|(_, a)| a.get_help().is_none() && a.get_long_help().is_none())
            .map(|(path, a)| format!("{path} {}", a.get_id()))
            .collect();
        assert!(undescribed.is_empty(), "no help: {undescribed:?}");
    }

    #[test]
    fn closed_sets_list_their_values() {
        let mut cmd = super::super::command();
        cmd.build();
        let mut all = Vec::new();
        arguments(&cmd, "ipu-codegen", &mut all);
        for (path, flag) in [
            ("ipu-codegen target", "name"),
            ("ipu-codegen calibrate", "target"),
            ("ipu-codegen show", "what"),
            ("ipu-codegen show", "partials"),
            ("ipu-codegen build", "from"),
            ("ipu-codegen run", "target"),
            ("ipu-codegen run", "log_format"),
            ("ipu-codegen lower-mid", "form"),
        ] {
            let (_, arg) = (all.iter())
                .find(|(p, a)| p == path && a.get_id() == flag)
                .unwrap_or_else(|| panic!("{path} has no {flag}"));
            assert!(
                !arg.get_possible_values().is_empty(),
                "{path} {flag} lists no values"
            );
        }
    }
}
