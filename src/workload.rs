//! Workload specs: TOML presets (`workloads/*.toml`, read at run time: [`presets_dir`]) or files, with
//! every parameter overridable, validated, and imported into the graph.

use crate::ir::{DType, Graph, Oversize};

mod attention;
mod encoder;
mod mlp;
pub use attention::AttentionSpec;
pub use encoder::EncoderSpec;
pub use mlp::MlpSpec;
pub mod graph_spec;
pub use graph_spec::GraphSpec;

/// Where presets are read from, at run time: `$IPU_CODEGEN_WORKLOADS`, else this source tree's
/// `workloads/`. Presets are data: editing one changes only its own builds' inputs, never the
/// compiler.
pub fn presets_dir() -> std::path::PathBuf {
    std::env::var_os("IPU_CODEGEN_WORKLOADS").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads"),
        std::path::PathBuf::from,
    )
}

/// The preset names: the `*.toml` files of [`presets_dir`], sorted.
pub fn presets() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(presets_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(name.strip_suffix(".toml")?.to_string())
        })
        .collect();
    names.sort();
    names
}

/// The file of preset `name`, if there is one (a name with a path separator is no preset).
pub fn preset_path(name: &str) -> Option<std::path::PathBuf> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && !name.starts_with('.');
    let path = presets_dir().join(format!("{name}.toml"));
    (plain && path.is_file()).then_some(path)
}

/// The text of preset `name`, if there is one.
pub fn preset_text(name: &str) -> Option<String> {
    crate::files::read_text(&preset_path(name)?, &crate::files::WORKLOAD).ok()
}

/// `bert-encoder-small` with `layers` layers (an embeddings' layer norm, then seven operators a
/// layer), for tests of what repeats.
#[cfg(test)]
pub fn small_encoder(layers: u32) -> crate::ir::Graph {
    let text = preset_text("bert-encoder-small").expect("preset");
    let text = text.replace("layers = 2", &format!("layers = {layers}"));
    let spec = WorkloadSpec::parse(&text, "preset").expect("spec");
    spec.import().expect("graph")
}

/// The preset names closest to a misspelled `name` (at most three edits away), closest first.
pub fn suggest(name: &str) -> Vec<String> {
    let all = presets();
    crate::suggest::closest(name, all.iter().map(String::as_str))
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// A spec's weights file: where it is and, when the spec records it, the blake3 it must hash to
/// (an imported pair of spec and weights is checked to be one pair).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightsFile {
    pub path: std::path::PathBuf,
    pub blake3: Option<blake3::Hash>,
}

/// A workload spec; the TOML's `kind` key says which.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    Mlp(MlpSpec),
    Attention(AttentionSpec),
    Encoder(EncoderSpec),
    Graph(GraphSpec),
}

/// The kind of a workload: which flags resize it, and so what a build that does not fit is advised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    Mlp,
    Attention,
    Encoder,
    /// A graph written value by value (a `kind = "graph"` spec, an ONNX import): no flag resizes it.
    Graph,
}

impl WorkloadKind {
    /// What to make smaller when `what` does not fit, naming only the flags this kind takes; a
    /// graph's shapes are its own, so it is told to make the model smaller or split it.
    pub fn advice(self, what: Oversize) -> &'static str {
        type K = WorkloadKind;
        type O = Oversize;
        match (self, what) {
            (K::Graph, _) => {
                "the model must be made smaller or split into parts that each fit (a graph \
                 workload's shapes are its own: no flag resizes it)"
            }
            (K::Attention, _) => {
                "use fewer or shorter sequences (--batch, --tokens, --key-tokens), fewer --heads \
                 or a smaller --head-dim"
            }
            (K::Mlp, O::Weights) => {
                "use fewer blocks (--blocks) or smaller dimensions (--dimension, --hidden)"
            }
            (K::Encoder, O::Weights) => {
                "use fewer layers (--blocks) or smaller dimensions (--dimension, --hidden)"
            }
            (K::Mlp | K::Encoder, O::MatMul | O::LiveBuffers) => {
                "use fewer rows (--batch, --tokens) or smaller dimensions (--dimension, --hidden)"
            }
            (K::Mlp | K::Encoder, O::LayerNorm | O::Vector | O::Assemble) => {
                "use fewer rows (--batch, --tokens) or a smaller --dimension"
            }
            (K::Encoder, O::Attention) => {
                "use fewer tokens (--tokens) or smaller heads (a smaller --dimension or more --heads)"
            }
            // An MLP has no attention.
            (K::Mlp, O::Attention) => "use fewer rows (--batch, --tokens)",
        }
    }
}

/// The defaults of the workload keys a spec may leave out, one function per default (serde's
/// `default = "…"`); a key of type `bool` or `Option` defaults to `false` or absent.
pub(crate) mod defaults {
    use crate::ir::DType;

    /// Batch, blocks and layers.
    pub fn one() -> u32 {
        1
    }

    /// The seed `run` draws unbound data from.
    pub fn seed() -> u64 {
        1
    }

    /// The element type and the partials' type.
    pub fn f16() -> DType {
        DType::F16
    }

    /// The encoder's GELU: `erf`, as BERT's.
    pub fn gelu() -> String {
        "erf".to_string()
    }

    /// The encoder's layer-norm epsilon, as BERT's.
    pub fn epsilon() -> f32 {
        1e-12
    }
}

/// Command-line overrides of a spec's parameters; `None` keeps the spec's value.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub batch: Option<u32>,
    pub tokens: Option<u32>,
    pub dimension: Option<u32>,
    pub hidden: Option<u32>,
    pub blocks: Option<u32>,
    pub biases: Option<bool>,
    pub partials: Option<DType>,
    pub seed: Option<u64>,
    pub key_tokens: Option<u32>,
    pub heads: Option<u32>,
    pub head_dim: Option<u32>,
    pub causal: Option<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("workload {id}: --{flag} does not apply to {kind} workloads")]
    Inapplicable {
        id: String,
        flag: &'static str,
        kind: &'static str,
    },
    #[error("workload {id}: {parameter} must be positive, got 0")]
    NotPositive { id: String, parameter: &'static str },
    #[error("workload {id}: dtype {dtype} is not supported (the AMP path takes f16 inputs)")]
    DType { id: String, dtype: DType },
    #[error(
        "workload {id}: {what} has {elements} elements, beyond the 2^31 this compiler addresses"
    )]
    TooLarge {
        id: String,
        what: &'static str,
        elements: u64,
    },
    #[error("{id}: {parameter} {value} is over the {limit} this compiler builds")]
    TooMany {
        id: String,
        parameter: &'static str,
        value: u32,
        limit: u32,
    },
}

/// The most blocks an MLP may have: `siglip-mlp-small` with this many builds in about 14 s on two
/// cores (README, "Limits").
pub const MAX_BLOCKS: u32 = 256;

/// The most layers an encoder may have: `bert-encoder-small` with this many builds in about 12 s on
/// two cores (README, "Limits").
pub const MAX_LAYERS: u32 = 64;

/// Refuses more than `limit` of `parameter`, before the graph is built.
fn at_most(id: &str, parameter: &'static str, value: u32, limit: u32) -> Result<(), WorkloadError> {
    if value > limit {
        return Err(WorkloadError::TooMany {
            id: id.to_string(),
            parameter,
            value,
            limit,
        });
    }
    Ok(())
}

impl WorkloadSpec {
    /// Parses TOML text; `origin` names the file or preset in errors.
    pub fn parse(text: &str, origin: &str) -> Result<WorkloadSpec, WorkloadError> {
        let error = |message: String| WorkloadError::Parse {
            origin: origin.to_string(),
            message,
        };
        let flat = |e: toml::de::Error| error(e.to_string().trim_end().to_string());
        let table: toml::Table = toml::from_str(text).map_err(flat)?;
        match table.get("kind").and_then(|k| k.as_str()) {
            Some("mlp") => Ok(WorkloadSpec::Mlp(toml::from_str(text).map_err(flat)?)),
            Some("attention") => Ok(WorkloadSpec::Attention(toml::from_str(text).map_err(flat)?)),
            Some("encoder") => Ok(WorkloadSpec::Encoder(toml::from_str(text).map_err(flat)?)),
            Some("graph") => Ok(WorkloadSpec::Graph(GraphSpec::parse(text, origin)?)),
            Some(other) => Err(error(format!(
                "unknown workload kind {other:?}; kinds: mlp, attention, encoder, graph"
            ))),
            None => Err(error(
                "missing key `kind` (kinds: mlp, attention, encoder, graph)".to_string(),
            )),
        }
    }

    /// Applies the overrides; a flag of another kind of workload is an error.
    pub fn apply(&mut self, o: &Overrides) -> Result<(), WorkloadError> {
        let (kind, foreign) = match self {
            WorkloadSpec::Graph(g) => return g.apply(o),
            WorkloadSpec::Mlp(m) => {
                m.batch = o.batch.unwrap_or(m.batch);
                m.tokens = o.tokens.unwrap_or(m.tokens);
                m.dimension = o.dimension.unwrap_or(m.dimension);
                m.hidden = o.hidden.unwrap_or(m.hidden);
                m.blocks = o.blocks.unwrap_or(m.blocks);
                m.biases = o.biases.unwrap_or(m.biases);
                m.partials = o.partials.unwrap_or(m.partials);
                m.seed = o.seed.unwrap_or(m.seed);
                (
                    "mlp",
                    [
                        ("key-tokens", o.key_tokens.is_some()),
                        ("heads", o.heads.is_some()),
                        ("head-dim", o.head_dim.is_some()),
                        ("causal", o.causal.is_some()),
                    ],
                )
            }
            WorkloadSpec::Attention(a) => {
                a.batch = o.batch.unwrap_or(a.batch);
                a.tokens = o.tokens.unwrap_or(a.tokens);
                a.key_tokens = o.key_tokens.or(a.key_tokens);
                a.heads = o.heads.unwrap_or(a.heads);
                a.head_dim = o.head_dim.unwrap_or(a.head_dim);
                a.causal = o.causal.unwrap_or(a.causal);
                a.partials = o.partials.unwrap_or(a.partials);
                a.seed = o.seed.unwrap_or(a.seed);
                (
                    "attention",
                    [
                        ("dimension", o.dimension.is_some()),
                        ("hidden", o.hidden.is_some()),
                        ("blocks", o.blocks.is_some()),
                        ("biases", o.biases.is_some()),
                    ],
                )
            }
            WorkloadSpec::Encoder(e) => {
                e.batch = o.batch.unwrap_or(e.batch);
                e.tokens = o.tokens.unwrap_or(e.tokens);
                e.hidden = o.dimension.unwrap_or(e.hidden);
                e.intermediate = o.hidden.unwrap_or(e.intermediate);
                e.layers = o.blocks.unwrap_or(e.layers);
                e.heads = o.heads.unwrap_or(e.heads);
                e.partials = o.partials.unwrap_or(e.partials);
                e.seed = o.seed.unwrap_or(e.seed);
                (
                    "encoder",
                    [
                        ("key-tokens", o.key_tokens.is_some()),
                        ("head-dim", o.head_dim.is_some()),
                        ("causal", o.causal.is_some()),
                        ("biases", o.biases.is_some()),
                    ],
                )
            }
        };
        match foreign.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(WorkloadError::Inapplicable {
                id: self.id(),
                flag,
                kind,
            }),
            None => Ok(()),
        }
    }

    /// The workload id, as in the seed: `siglip-mlp-f16-b1-t729-d1152-h4304-n1`, with `-bias` and `-pf32`
    /// appended when they differ from the defaults. It names shapes only: the data's seed is no part of
    /// it (nor of the graph), so builds under every seed are one build.
    pub fn id(&self) -> String {
        match self {
            WorkloadSpec::Graph(g) => g.id(),
            WorkloadSpec::Mlp(m) => {
                let mut id = format!(
                    "{}-{}-b{}-t{}-d{}-h{}-n{}",
                    m.name, m.dtype, m.batch, m.tokens, m.dimension, m.hidden, m.blocks
                );
                if m.biases {
                    id.push_str("-bias");
                }
                if m.partials != m.dtype {
                    id.push_str(&format!("-p{}", m.partials));
                }
                id
            }
            WorkloadSpec::Attention(a) => {
                let mut id = format!(
                    "{}-{}-b{}-t{}-h{}-d{}",
                    a.name, a.dtype, a.batch, a.tokens, a.heads, a.head_dim
                );
                if a.keys() != a.tokens {
                    id.push_str(&format!("-k{}", a.keys()));
                }
                if a.causal {
                    id.push_str("-causal");
                }
                if a.partials != a.dtype {
                    id.push_str(&format!("-p{}", a.partials));
                }
                id
            }
            WorkloadSpec::Encoder(e) => {
                let mut id = format!(
                    "{}-{}-b{}-t{}-d{}-h{}-i{}-l{}",
                    e.name, e.dtype, e.batch, e.tokens, e.hidden, e.heads, e.intermediate, e.layers
                );
                if e.partials != e.dtype {
                    id.push_str(&format!("-p{}", e.partials));
                }
                id
            }
        }
    }

    pub fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadSpec::Mlp(_) => WorkloadKind::Mlp,
            WorkloadSpec::Attention(_) => WorkloadKind::Attention,
            WorkloadSpec::Encoder(_) => WorkloadKind::Encoder,
            WorkloadSpec::Graph(_) => WorkloadKind::Graph,
        }
    }

    /// The seed `run` draws unbound inputs and weights from unless `--seed` says otherwise (the spec's
    /// `seed` key). It is no part of the graph.
    pub fn seed(&self) -> u64 {
        match self {
            WorkloadSpec::Mlp(m) => m.seed,
            WorkloadSpec::Attention(a) => a.seed,
            WorkloadSpec::Encoder(e) => e.seed,
            WorkloadSpec::Graph(g) => g.seed,
        }
    }

    /// The weights file `run` binds when `--weights` is not given (a path relative to the spec's own
    /// file) and the hash it must have; `None` when the spec names none, as no preset does.
    pub fn default_weights(&self) -> Option<WeightsFile> {
        match self {
            WorkloadSpec::Graph(g) => Some(WeightsFile {
                path: g.weights_path(),
                blake3: g.weights_blake3,
            }),
            WorkloadSpec::Mlp(_) | WorkloadSpec::Attention(_) | WorkloadSpec::Encoder(_) => None,
        }
    }

    /// Checks the parameters and builds the graph, which [`Graph::check`] accepts.
    pub fn import(&self) -> Result<Graph, WorkloadError> {
        let graph = self.build()?;
        graph.check().map_err(|message| WorkloadError::Parse {
            origin: self.id(),
            message,
        })?;
        Ok(graph)
    }

    /// The graph of the parameters, once they are in range.
    fn build(&self) -> Result<Graph, WorkloadError> {
        let id = self.id();
        match self {
            WorkloadSpec::Graph(g) => Ok(g.graph.clone()),
            WorkloadSpec::Mlp(m) => {
                for (parameter, v) in [
                    ("batch", m.batch),
                    ("tokens", m.tokens),
                    ("dimension", m.dimension),
                    ("hidden", m.hidden),
                    ("blocks", m.blocks),
                ] {
                    if v == 0 {
                        return Err(WorkloadError::NotPositive { id, parameter });
                    }
                }
                if m.dtype != DType::F16 {
                    return Err(WorkloadError::DType { id, dtype: m.dtype });
                }
                at_most(&id, "blocks", m.blocks, MAX_BLOCKS)?;
                let rows = u64::from(m.batch) * u64::from(m.tokens);
                let limit = 1u64 << 31;
                for (what, elements) in [
                    (
                        "the activation",
                        rows * u64::from(m.dimension.max(m.hidden)),
                    ),
                    ("a weight", u64::from(m.dimension) * u64::from(m.hidden)),
                ] {
                    if elements >= limit || rows >= limit {
                        return Err(WorkloadError::TooLarge { id, what, elements });
                    }
                }
                Ok(mlp::mlp_graph(id, m, rows as u32))
            }
            WorkloadSpec::Attention(a) => {
                for (parameter, v) in [
                    ("batch", a.batch),
                    ("tokens", a.tokens),
                    ("key_tokens", a.keys()),
                    ("heads", a.heads),
                    ("head_dim", a.head_dim),
                ] {
                    if v == 0 {
                        return Err(WorkloadError::NotPositive { id, parameter });
                    }
                }
                if a.dtype != DType::F16 {
                    return Err(WorkloadError::DType { id, dtype: a.dtype });
                }
                let limit = 1u64 << 31;
                let cols = u64::from(a.heads) * u64::from(a.head_dim);
                let rows = u64::from(a.batch) * u64::from(a.tokens.max(a.keys()));
                if rows * cols >= limit || rows >= limit || cols >= limit {
                    return Err(WorkloadError::TooLarge {
                        id,
                        what: "a query, key or value tensor",
                        elements: rows * cols,
                    });
                }
                Ok(attention::attention_graph(id, a))
            }
            WorkloadSpec::Encoder(e) => {
                for (parameter, v) in [
                    ("batch", e.batch),
                    ("tokens", e.tokens),
                    ("hidden", e.hidden),
                    ("heads", e.heads),
                    ("intermediate", e.intermediate),
                    ("layers", e.layers),
                ] {
                    if v == 0 {
                        return Err(WorkloadError::NotPositive { id, parameter });
                    }
                }
                if e.dtype != DType::F16 {
                    return Err(WorkloadError::DType { id, dtype: e.dtype });
                }
                at_most(&id, "layers", e.layers, MAX_LAYERS)?;
                let invalid = |message: String| WorkloadError::Parse {
                    origin: id.clone(),
                    message,
                };
                if e.hidden % e.heads != 0 {
                    return Err(invalid(format!(
                        "hidden {} is not a multiple of heads {}",
                        e.hidden, e.heads
                    )));
                }
                if e.gelu != "erf" && e.gelu != "tanh" {
                    return Err(invalid(format!("gelu {:?}: erf or tanh", e.gelu)));
                }
                if !(e.epsilon.is_finite() && e.epsilon >= 0.0) {
                    return Err(invalid(format!(
                        "epsilon {} is not a finite non-negative number",
                        e.epsilon
                    )));
                }
                let rows = u64::from(e.batch) * u64::from(e.tokens);
                let widest = u64::from(e.hidden.max(e.intermediate));
                let limit = 1u64 << 31;
                if rows * widest >= limit || u64::from(e.hidden) * widest >= limit {
                    return Err(WorkloadError::TooLarge {
                        id,
                        what: "an activation or a weight",
                        elements: rows.max(u64::from(e.hidden)) * widest,
                    });
                }
                Ok(encoder::encoder_graph(id, e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_id_follows_the_seed() {
        let spec = WorkloadSpec::parse(&preset_text("siglip-mlp").unwrap(), "siglip-mlp").unwrap();
        assert_eq!(spec.id(), "siglip-mlp-f16-b1-t729-d1152-h4304-n1");
        let g = spec.import().unwrap();
        assert_eq!(g.ops.len(), 3);
        assert_eq!(g.useful_flops(), 2 * 2 * 729 * 1152 * 4304);
    }

    #[test]
    fn unknown_keys_and_zero_sizes_are_rejected() {
        let err = WorkloadSpec::parse("kind = \"mlp\"\nname = \"m\"\ntokenz = 3\n", "bad.toml")
            .unwrap_err();
        assert!(err.to_string().contains("bad.toml"), "{err}");
        assert!(err.to_string().contains("tokenz"), "{err}");
        let mut spec = WorkloadSpec::parse(&preset_text("siglip-mlp").unwrap(), "p").unwrap();
        spec.apply(&Overrides {
            hidden: Some(0),
            ..Overrides::default()
        })
        .unwrap();
        assert!(
            spec.import()
                .unwrap_err()
                .to_string()
                .contains("hidden must be positive")
        );
    }
}
