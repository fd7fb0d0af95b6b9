//! The command line: flags, the environment, stdout and the device lock. It reads the workload, builds
//! the phase configs from flags (`args`: the arguments every build takes and the parsers of closed
//! sets) and hands them to the library's driver (`ipu_codegen::driver`), which runs the phases over
//! the store; what it returns is printed here. One subcommand per row of the phase table is added to
//! the derived ones; the options every subcommand takes are global, in their own help section.

mod args;
mod bench;
mod cache;
mod docs;
mod import;
mod json;
mod plans;
mod progress;
mod report;
mod run;
mod sensitivity;
mod storage;
mod sweep;

use anyhow::{Result, bail};
use args::{BuildArgs, DEFAULT_TARGET, dump_parser, phase_parser, target_parser, target_preset};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use ipu_codegen::driver::{Fields, SELECTED, producer};
use ipu_codegen::driver::{PIPELINE, Phase, Source};
use ipu_codegen::files;
use ipu_codegen::ir::{Graph, Mid, Selected};
use ipu_codegen::stages::lower_mid::shortlists;
use ipu_codegen::store::{ArtifactKind, Level};
use std::path::{Path, PathBuf};

/// The help section of the options every subcommand takes.
const GLOBAL: &str = "Global options";

#[derive(Parser, Debug)]
#[command(
    name = "ipu-codegen",
    version = ipu_codegen::store::COMPILER_VERSION,
    about = "Ahead-of-time compiler for tile-based bulk-synchronous ML processors"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    globals: Globals,
}

/// Options every subcommand takes.
#[derive(Args, Debug)]
struct Globals {
    #[command(flatten)]
    store: storage::StoreArgs,
    /// Where stage records, model.ipuexe and execution.ipuprofile go (one folder per build).
    #[arg(
        long,
        global = true,
        env = "IPU_CODEGEN_STAGES",
        default_value = "stages",
        help_heading = GLOBAL
    )]
    stages: PathBuf,
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        help_heading = GLOBAL
    )]
    log_format: LogFormat,
    /// Draw no progress bars (they are drawn only when stderr is a terminal) and log only warnings
    /// and errors (`RUST_LOG` still chooses, where it is set).
    #[arg(long, short, global = true, help_heading = GLOBAL)]
    quiet: bool,
    /// Give up waiting for the simulated device (held by another run or sweep) after this many
    /// seconds.
    #[arg(
        long,
        global = true,
        env = "IPU_CODEGEN_LOCK_TIMEOUT",
        default_value_t = 600,
        value_name = "SECONDS",
        help_heading = GLOBAL
    )]
    lock_timeout: u64,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    /// One line per event, for people.
    Text,
    /// One JSON object per event, for programs.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the reference target model.
    Target {
        /// The target preset.
        #[arg(default_value = DEFAULT_TARGET, value_parser = target_parser())]
        name: String,
    },
    /// Print the pipeline's phases in order.
    Phases,
    /// Print a shell completion script on stdout (`ipu-codegen completions bash > ipu-codegen.bash`).
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout (`ipu-codegen man | man -l -`), or with --out-dir write
    /// one page per command and subcommand.
    Man {
        /// Write ipu-codegen.1 and a page per subcommand (ipu-codegen-run.1, …) into DIR instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Print Make rules for per-phase targets over the stage records (the Makefile includes them).
    MakeRules,
    /// Print the build name (the workload id unless --build is given).
    Id(BuildArgs),
    /// Run the pipeline (or part of it with --from/--to).
    Build {
        #[command(flatten)]
        args: BuildArgs,
        /// First phase to run; earlier outputs come from this build's stage records.
        #[arg(long, value_parser = phase_parser())]
        from: Option<Phase>,
        /// Last phase to run.
        #[arg(long, value_parser = phase_parser())]
        to: Option<Phase>,
        /// Print the summary as one JSON object (kind `build`) with the same fields (`phasesRun`,
        /// `phasesLocal` and `phasesRemote` as lists).
        #[arg(long)]
        json: bool,
    },
    /// Print the text dump of a phase's output (building it through the store first).
    Show {
        /// `graph`, or a phase whose output to dump (by its name or its subcommand's).
        #[arg(value_parser = dump_parser())]
        what: ArtifactKind,
        #[command(flatten)]
        args: BuildArgs,
    },
    /// Show why a plan won: per operator the fastest candidates the joint search chose among, then
    /// the finalists with their estimates and the one select_finalist chose (builds through
    /// select_finalist first).
    Plans {
        #[command(flatten)]
        args: BuildArgs,
        /// Candidates shown per operator.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Print the table as one JSON object (kind `plans`).
        #[arg(long)]
        json: bool,
    },
    /// Build if needed, then run the package on the simulated device and check the result.
    Run {
        /// A workload (preset name or TOML file) or a model.ipuexe.
        #[command(flatten)]
        args: BuildArgs,
        #[command(flatten)]
        data: run::DataArgs,
        /// Print the summary as one JSON object (kind `run`) holding every line's fields: the checks
        /// under `checks`, the summary line under `summary`, the output files under `outputFiles`.
        #[arg(long)]
        json: bool,
    },
    /// Build and run a grid of build flags on the simulated device, one row per point.
    ///
    /// Every point is built through the store (cached like any build) and run on the device, points
    /// in parallel. The rows come out in grid order (the first --vary outermost, the last varying
    /// fastest): the swept values, cycles, efficiencyPercent (as `run` prints it), the compiler's
    /// estimate and its error against the device, the hardware test, with --check the numerical
    /// test, the build folder and the point's error. A point that fails to build or run is a row with
    /// its error; the command exits non-zero after printing every row and writing every file.
    /// With --shard I/N --json it builds and runs one share of the grid, for a scheduler to run on
    /// many machines; --merge puts the parts back together as the whole sweep.
    /// Example: `ipu-codegen sweep siglip-mlp-small --vary tokens=21,42 --vary partials=f16,f32
    /// --csv sweep.csv --html sweep.html`.
    Sweep(sweep::SweepArgs),
    /// Summarise an execution profile, or compare two; optionally write an HTML page (with a tile's
    /// memory map) and a Chrome trace.
    Report(report::ReportArgs),
    /// Run micro-packages through the device beside the compiler's estimates and published hardware
    /// figures; fails when a case is outside its tolerance.
    Calibrate {
        /// The target preset the cases run for.
        #[arg(long, default_value = DEFAULT_TARGET, value_parser = target_parser())]
        target: String,
        /// Print the cases (or with --sensitivity the points) as one JSON object (kind `calibrate`
        /// or `calibrateSensitivity`) instead of the table.
        #[arg(long)]
        json: bool,
        /// Instead of the cases: the headline workloads' cycles with each constant no published
        /// measurement pins (sync, transit, launch) at 80 % and 120 % of its figure, each point
        /// built for the target so changed and run on the device.
        #[arg(long)]
        sensitivity: bool,
        /// With --sensitivity: a workload (preset or TOML file) to measure instead of the headline
        /// ones (siglip-mlp, attention-flash, minilm-encoder, attention-flash at 197 causal
        /// tokens); repeatable.
        #[arg(long, requires = "sensitivity")]
        workload: Vec<String>,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Import an ONNX model: write DIR/NAME.toml (a `graph` workload) and DIR/NAME.safetensors.
    Import(import::ImportArgs),
    /// Inspect or clean the store.
    Cache {
        #[command(subcommand)]
        action: cache::CacheAction,
    },
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// The exchange scheduler on synthetic patterns shaped like the seed's phases, then on the real
    /// phases of a workload.
    Exchange {
        #[command(flatten)]
        args: BuildArgs,
        /// Only the synthetic patterns.
        #[arg(long)]
        synthetic_only: bool,
        /// Print one JSON object (kind `benchExchange`) at the end instead of a row per pattern.
        #[arg(long)]
        json: bool,
    },
    /// Cold builds of a workload, each into a fresh store and stages folder in the system's temp
    /// folder (removed afterwards): the wall time of every phase and of the whole build, per run, then
    /// the fastest, median and slowest.
    Build {
        #[command(flatten)]
        args: BuildArgs,
        /// How many cold builds.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
        runs: u32,
        /// Print one JSON object (kind `benchBuild`) at the end instead of a row per build.
        #[arg(long)]
        json: bool,
    },
}

/// Writes a file a command was asked for ([`files::write_atomic`]: a link there is replaced, a failed
/// write leaves the old file) and, with `announce`, names it on stdout as `what=PATH` (not when
/// stdout is JSON).
fn write_output(path: &Path, text: &str, what: &'static str, announce: bool) -> Result<()> {
    files::write_atomic(path, what, text.as_bytes())?;
    if announce {
        println!("{what}={}", path.display());
    }
    Ok(())
}

/// Logs to stderr in `format`: INFO and above, or with `quiet` WARN and above, unless `RUST_LOG`
/// says otherwise.
fn init_logging(format: LogFormat, quiet: bool) {
    let level = if quiet { "warn" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The command line, with one subcommand per phase of the pipeline added to the derived ones.
fn command() -> clap::Command {
    PIPELINE.iter().fold(Cli::command(), |cmd, phase| {
        // The phase's own line, set after the arguments' (which bring BuildArgs' doc comment).
        cmd.subcommand(
            BuildArgs::augment_args(clap::Command::new(phase.command())).about(phase.about()),
        )
    })
}

pub fn main() -> std::process::ExitCode {
    let matches = command().get_matches();
    let result = match matches.subcommand() {
        Some((name, sub)) if Phase::parse(name).is_some() => {
            let phase = Phase::parse(name).expect("checked");
            Globals::from_arg_matches(&matches)
                .map_err(anyhow::Error::from)
                .and_then(|g| {
                    let args = BuildArgs::from_arg_matches(sub)?;
                    init_logging(g.log_format, g.quiet);
                    progress::set_quiet(g.quiet);
                    let store = g.store.open()?;
                    let bars = progress::Terminal::default();
                    args.build(&*store, &g.stages, &bars)?.run(phase, phase)?;
                    Ok(())
                })
        }
        _ => match Cli::from_arg_matches(&matches) {
            Ok(cli) => {
                init_logging(cli.globals.log_format, cli.globals.quiet);
                progress::set_quiet(cli.globals.quiet);
                execute(cli)
            }
            Err(e) => e.exit(),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Per-phase Make rules: `stages/<build>/<phase>.json` depends on the previous phase's record and on a
/// stamp of the phase's own flags (`<PHASE>_FLAGS`), rewritten only when they change. Records are
/// rewritten only when a phase's output changes, so Make reruns only what really changed.
fn make_rules() -> String {
    let mut s = String::from("# Generated by `ipu-codegen make-rules` from the pipeline list.\n");
    s.push_str(&format!(
        "PHASES := {}\n",
        PIPELINE.map(|p| p.name()).join(" ")
    ));
    s.push_str(".PHONY: $(PHASES)\n");
    let mut previous: Option<Phase> = None;
    for p in PIPELINE {
        let flags = format!("{}_FLAGS", p.name().to_uppercase());
        let after = previous
            .map(|q| format!(" $(BUILD_DIR)/{}.json", q.name()))
            .unwrap_or_default();
        s.push_str(&format!(
            "{name}: $(BUILD_DIR)/{name}.json\n\
             $(BUILD_DIR)/{name}.flags: FORCE\n\
             \t@mkdir -p $(@D); echo '$(FLAGS) $({flags})' | cmp -s - $@ || echo '$(FLAGS) $({flags})' > $@\n\
             $(BUILD_DIR)/{name}.json: $(BIN){after} $(BUILD_DIR)/{name}.flags\n\
             \t$(BIN) {command} $(WORKLOAD) $(FLAGS) $({flags})\n\t@touch $@\n",
            name = p.name(),
            command = p.command(),
        ));
        previous = Some(p);
    }
    s
}

fn execute(cli: Cli) -> Result<()> {
    let g = cli.globals;
    let bars = progress::Terminal::default();
    match cli.command {
        Command::Target { name } => {
            let t = target_preset(&name)?;
            print!("{}", t.describe());
        }
        Command::Phases => println!("{}", PIPELINE.map(|p| p.name()).join(" ")),
        Command::MakeRules => print!("{}", make_rules()),
        Command::Completions { shell } => print!("{}", docs::completions(shell, &mut command())),
        Command::Man { out_dir: None } => {
            clap_mangen::Man::new(command()).render(&mut std::io::stdout())?
        }
        Command::Man { out_dir: Some(dir) } => {
            for path in docs::man_pages(command(), &dir)? {
                println!("man={}", path.display());
            }
        }
        Command::Id(args) => {
            let spec = args.spec()?;
            spec.import()?;
            println!("{}", args.build_name(&spec));
        }
        Command::Build {
            args,
            from,
            to,
            json,
        } => {
            let store = g.store.open()?;
            let b = args.build(&*store, &g.stages, &bars)?;
            let outcome = b.run(
                from.unwrap_or(PIPELINE[0]),
                to.unwrap_or(PIPELINE[PIPELINE.len() - 1]),
            )?;
            tracing::info!(ran = outcome.ran.len(), build = %b.dir().display(), "build finished");
            let names =
                |phases: &[Phase]| -> Vec<&str> { phases.iter().map(|p| p.name()).collect() };
            let listed = |names: &[&str]| {
                if names.is_empty() {
                    "-".to_string()
                } else {
                    names.join(",")
                }
            };
            let ran = names(&outcome.ran);
            let local = names(&outcome.phases_from(Source::Stored(Level::Local)));
            let remote = names(&outcome.phases_from(Source::Stored(Level::Remote)));
            let mut line = Fields::new()
                .with("build", &b.build)
                .with("phasesRun", listed(&ran))
                .with("phasesLocal", listed(&local))
                .with("phasesRemote", listed(&remote))
                .with("dir", b.dir().display());
            if let Some(package) = &outcome.package_path {
                line = line.with("package", package.display());
            }
            if json {
                // The same fields, the phases as a list.
                let mut summary = line.json();
                summary["phasesRun"] = serde_json::json!(ran);
                summary["phasesLocal"] = serde_json::json!(local);
                summary["phasesRemote"] = serde_json::json!(remote);
                json::print("build", summary);
            } else {
                println!("{}", line.line());
            }
        }
        Command::Show { what: kind, args } => {
            let store = g.store.open()?;
            let b = args.build(&*store, &g.stages, &bars)?;
            let to = producer(kind).unwrap_or(PIPELINE[0]);
            let outcome = b.run(PIPELINE[0], to)?;
            print!("{}", b.dump(kind, &outcome.outputs)?);
        }
        Command::Plans { args, top, json } => {
            let store = g.store.open()?;
            let b = args.build(&*store, &g.stages, &bars)?;
            let to = producer(SELECTED).unwrap_or(PIPELINE[0]);
            let outcome = b.run(PIPELINE[0], to)?;
            let graph = b.load::<Graph>(&outcome.outputs)?;
            let mid = b.load::<Mid>(&outcome.outputs)?;
            let selected = b.load::<Selected>(&outcome.outputs)?;
            let target = args.target()?;
            let (operators, shortlists) = shortlists(&graph, &target, &args.configs().lower_mid)?;
            let table = plans::json(
                &target,
                &graph,
                &operators,
                &shortlists,
                &mid,
                &selected,
                top,
            );
            if json {
                json::print("plans", table);
            } else {
                print!("{}", plans::text(&table));
            }
        }
        Command::Report(args) => report::report(&args)?,
        Command::Calibrate {
            target,
            json,
            sensitivity: true,
            workload,
        } => {
            let store = g.store.open()?;
            let rows = sensitivity::sensitivity(&*store, &workload, &target, &bars)?;
            let t = target_preset(&target)?;
            if json {
                json::print("calibrateSensitivity", sensitivity::json(&t, &rows));
            } else {
                print!("{}", sensitivity::table(&t, &rows));
            }
        }
        Command::Calibrate { target, json, .. } => {
            let t = target_preset(&target)?;
            let rows = ipu_codegen::calibrate::calibrate(&t)
                .map_err(|e| anyhow::anyhow!("calibration failed: {e}"))?;
            if json {
                json::print("calibrate", ipu_codegen::calibrate::json(&t, &rows));
            } else {
                print!("{}", ipu_codegen::calibrate::table(&rows));
            }
            let problems = ipu_codegen::calibrate::check(&rows);
            if !problems.is_empty() {
                bail!(
                    "{} calibration cases outside their tolerance:\n{}",
                    problems.len(),
                    problems.join("\n")
                );
            }
        }
        Command::Bench {
            what:
                BenchWhat::Exchange {
                    args,
                    synthetic_only,
                    json,
                },
        } => {
            let target = args.target()?;
            let o = ipu_codegen::exchange::Overheads::of(&target);
            let synthetic = bench::synthetic(o, target.tiles, json)?;
            let real = if synthetic_only {
                Vec::new()
            } else {
                let store = g.store.open()?;
                let b = args.build(&*store, &g.stages, &bars)?;
                bench::real(&b, o, json)?
            };
            if json {
                let body = serde_json::json!({"synthetic": synthetic, "real": real});
                json::print("benchExchange", body);
            }
        }
        Command::Bench {
            what: BenchWhat::Build { args, runs, json },
        } => bench::cold_builds(&args, runs, json)?,
        Command::Import(args) => import::import(&args)?,
        Command::Run { args, data, json } => run::run(
            &g.store,
            &g.stages,
            &args,
            &data,
            g.lock_timeout,
            json,
            &bars,
        )?,
        Command::Sweep(args) => sweep::sweep(&g.store, &g.stages, &args, g.lock_timeout)?,
        Command::Cache { action } => cache::cache(&g.store.cache, &g.stages, action)?,
    }
    Ok(())
}
