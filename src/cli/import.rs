//! `ipu-codegen import MODEL.onnx --shape NAME=AxB … -o DIR/NAME.toml`: reads the model, lowers it with
//! `ipu_codegen::onnx::import`, checks the spec loads, writes the weights (`DIR/NAME.safetensors`) and
//! then the graph spec (`kind = "graph"`, recording the weights' blake3, which `run` checks), each by
//! [`ipu_codegen::files::write_atomic`] (a unique temp file, `fsync`, a rename: a link at either name is
//! replaced, never written through), holding a lock on `DIR` for the pair so that imports to one `-o`
//! side by side leave one import's pair, never a mix; logs the host operations and prints one summary
//! line (with `--json` one object of kind `import`, the same fields).

use anyhow::{Context, Result, bail};
use clap::Args;
use ipu_codegen::driver::Fields;
use ipu_codegen::files;
use ipu_codegen::onnx::{self, ImportConfig};
use ipu_codegen::workload::graph_spec::{self, GraphSpec};
use std::path::{Path, PathBuf};

/// The model, the input shapes and where the spec goes.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The ONNX model file.
    model: PathBuf,
    /// A graph input's fixed shape as NAME=AxB (dimensions joined by `x`, e.g. input_ids=1x128);
    /// repeat for every graph input.
    #[arg(long = "shape", value_name = "NAME=AxB", value_parser = parse_shape)]
    shapes: Vec<(String, Vec<u32>)>,
    /// The graph spec to write, DIR/NAME.toml; NAME names the workload, and its weights go to
    /// DIR/NAME.safetensors.
    #[arg(short, long, value_name = "DIR/NAME.toml")]
    output: PathBuf,
    /// Print the summary as one JSON object (kind `import`) with the same fields.
    #[arg(long)]
    json: bool,
}

fn parse_shape(s: &str) -> Result<(String, Vec<u32>), String> {
    let (name, dims) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=AxB"))?;
    let dims = dims
        .split('x')
        .map(|d| d.parse::<u32>().ok().filter(|&d| d > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("{s:?}: dimensions must be positive integers joined by `x`"))?;
    if name.is_empty() {
        return Err(format!("{s:?} names no input"));
    }
    Ok((name.to_string(), dims))
}

/// The files the model keeps external tensor data in, read from beside it: each location must be a
/// relative path that stays inside the model's folder (no `..`, no absolute path, no link out).
fn external_data(
    model: &Path,
    bytes: &[u8],
) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let folder = model.parent().unwrap_or(Path::new("."));
    let root = std::fs::canonicalize(if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    })
    .with_context(|| format!("the folder of {}", model.display()))?;
    let mut files = std::collections::BTreeMap::new();
    for location in
        onnx::external_locations(bytes).with_context(|| format!("reading {}", model.display()))?
    {
        let relative = Path::new(&location);
        let plain = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            bail!(
                "{}: external data `{location}` is not a path inside the model's folder",
                model.display()
            );
        }
        let path = root.join(relative);
        let real = std::fs::canonicalize(&path)
            .with_context(|| format!("external data of {}: {}", model.display(), path.display()))?;
        if !real.starts_with(&root) {
            bail!(
                "{}: external data `{location}` leads out of the model's folder",
                model.display()
            );
        }
        let data = files::read(&real, &files::EXTERNAL_DATA)?;
        files.insert(location, data);
    }
    Ok(files)
}

pub fn import(args: &ImportArgs) -> Result<()> {
    if args.output.extension().and_then(|e| e.to_str()) != Some("toml") {
        bail!("-o {} must name a .toml file", args.output.display());
    }
    let name = args
        .output
        .file_stem()
        .and_then(|s| s.to_str())
        .context("the output file has no name")?
        .to_string();
    let bytes = files::read(&args.model, &files::ONNX_MODEL)?;
    let model = args
        .model
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("model")
        .to_string();
    tracing::info!(model = %args.model.display(), bytes = bytes.len(), "importing ONNX model");
    let external = external_data(&args.model, &bytes)?;
    let imported = onnx::import(
        &bytes,
        &ImportConfig {
            name: name.clone(),
            model,
            shapes: args.shapes.clone(),
            external,
        },
    )
    .with_context(|| format!("importing {}", args.model.display()))?;
    let g = &imported.graph;
    for warning in &imported.warnings {
        tracing::warn!("{warning}");
    }
    for note in &imported.notes {
        tracing::info!("{note}");
    }
    for op in g.ops.iter().filter(|o| o.kind.on_host()) {
        tracing::info!(op = %op.id, kind = op.kind.name(), name = %op.name, "runs on the host");
    }
    let weights_file = format!("{name}.safetensors");
    let tensors =
        graph_spec::safetensors_bytes(g, &imported.weights).map_err(anyhow::Error::msg)?;
    let toml = graph_spec::to_toml_pinned(g, &weights_file, Some(&blake3::hash(&tensors)));
    GraphSpec::parse(&toml, &args.output.display().to_string())
        .context("the imported graph does not load back as a graph spec")?;
    let dir = args
        .output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    {
        let _pair = files::lock_folder(dir)?;
        files::write_atomic(&dir.join(&weights_file), "weights file", &tensors)?;
        files::write_atomic(&args.output, "graph spec", toml.as_bytes())?;
    }
    let host = g.ops.iter().filter(|o| o.kind.on_host()).count();
    let weight_bytes: u64 = g
        .values
        .iter()
        .filter(|v| v.role == ipu_codegen::ir::ValueRole::Weight)
        .map(|v| v.bytes())
        .sum();
    let summary = Fields::new()
        .with("imported", &name)
        .with("opsLowered", g.ops.len())
        .with("hostOps", host)
        .with("deviceOps", g.ops.len() - host)
        .with("weightBytes", weight_bytes)
        .with("safetensorsBytes", tensors.len())
        .with("foldedNodes", imported.folded)
        .with("spec", args.output.display());
    if args.json {
        super::json::print("import", summary.json());
    } else {
        println!("{}", summary.line());
    }
    Ok(())
}
