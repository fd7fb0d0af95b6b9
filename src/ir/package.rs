//! The application package (`package`) and its file form, `model.ipuexe`: every tile's memory image of
//! code with its buffer table, the host program, the graph (for the host's data and reference), the
//! estimated cycles of every superstep and the compiler version. It holds no weights: its
//! [`Signature`] names the tensors a run takes (inputs, weights) and gives (outputs). `model.ipuexe` is
//! the package's store bytes behind a short header (magic, format version, compiler version, blake3 of
//! the body). Written by `build_images`, read by the device. The body's hash names the package: a
//! profile records it as the package it measured.

use crate::ids::ValueId;
use crate::ir::{BufferLabel, DType, Graph, ValueRole};
use crate::isa::HostProgram;
use crate::store::{COMPILER_VERSION, ContentHash};
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileImage {
    pub code_address: u32,
    #[serde(with = "serde_bytes")]
    pub code: Vec<u8>,
    /// The tile's buffers, for the device's checks and its fault messages.
    pub buffers: Vec<BufferInfo>,
}

/// A buffer as the device sees it: where it is and in which supersteps it holds live data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferInfo {
    pub address: u32,
    pub bytes: u32,
    pub first_step: u32,
    pub last_step: u32,
    pub label: BufferLabel,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Package {
    pub compiler_version: String,
    pub target: Target,
    pub workload: String,
    pub graph: Graph,
    pub tiles: Vec<TileImage>,
    pub host: HostProgram,
    /// The compiler's estimate of every superstep, the sync that ends it included.
    pub steps: Vec<StepEstimate>,
    /// Per superstep, every tile's estimated compute cycles (the sum of its vertices' estimates);
    /// empty for an exchange superstep.
    pub tile_estimates: Vec<Vec<u32>>,
    pub estimated_cycles: u64,
}

/// A superstep as the compiler estimates it: its kind ("exchange" or "compute"), its cycles (an
/// exchange phase's schedule's horizon, a compute step's busiest tile) and the cycles of the sync
/// that ends it, with the names of the graph operations it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEstimate {
    pub kind: String,
    pub cycles: u64,
    pub sync_cycles: u64,
    /// The graph operations (for an ONNX import, its nodes) the step serves, by name, in graph
    /// order: those its compute set's operator implements; for an exchange, those of the compute
    /// steps that next read what it writes (or, when none does, of the values it moves).
    pub operators: Vec<String>,
}

/// Schema 13: the `FlashStateShare` buffer class; 12: the split layer norm's vertex kinds; since 11, each superstep names the graph operations
/// it serves; since 9, tile programs in encoding
/// format 2 (exchange code timed by its instructions); since 8, a sync estimate per superstep.
impl crate::store::Artifact for Package {
    const KIND: &'static str = "package";
    const SCHEMA: u32 = 13;

    fn encode_body(&self, out: &mut crate::store::Encoded) {
        let Package {
            compiler_version,
            target,
            workload,
            graph,
            tiles,
            host,
            steps,
            tile_estimates,
            estimated_cycles,
        } = self;
        out.array_len(9);
        out.value(compiler_version);
        out.value(target);
        out.value(workload);
        out.value(graph);
        out.list(tiles);
        out.value(host);
        out.value(steps);
        out.value(tile_estimates);
        out.value(estimated_cycles);
    }
}

/// `model.ipuexe`: magic, format version, compiler version, body hash, then the package's store bytes.
pub const IPUEXE_MAGIC: &[u8; 8] = b"IPUEXE\0\x01";

pub fn write_ipuexe(body: &crate::store::Encoded) -> Vec<u8> {
    let mut out = ipuexe_header(body.hash());
    body.parts().for_each(|part| out.extend_from_slice(part));
    out
}

/// What comes before the body in `model.ipuexe`: magic, format version, compiler version, and
/// `body_hash`, the body's [`ContentHash`].
pub fn ipuexe_header(body_hash: ContentHash) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(IPUEXE_MAGIC);
    out.extend_from_slice(&(COMPILER_VERSION.len() as u32).to_le_bytes());
    out.extend_from_slice(COMPILER_VERSION.as_bytes());
    out.extend_from_slice(&body_hash.0);
    out
}

#[derive(Debug, thiserror::Error)]
pub enum IpuexeError {
    #[error("not an application package (bad magic)")]
    Magic,
    #[error("application package is truncated")]
    Truncated,
    #[error("application package is damaged: its body does not match the hash in its header")]
    Hash,
    #[error(
        "application package is damaged: the compiler version in its header is not the one in its body"
    )]
    Version,
    #[error("application package is damaged: its graph is malformed: {0}")]
    Graph(String),
    #[error("application package is damaged: its target {0:?} is not the preset of that name")]
    Target(String),
    #[error("application package: {0}")]
    Decode(#[from] crate::store::StoreError),
}

/// A `model.ipuexe` whose header checks: the blake3 of its body (which names the package), the body,
/// and the compiler version the header names.
pub struct Ipuexe<'a> {
    pub body_hash: ContentHash,
    pub body: &'a [u8],
    version: &'a [u8],
}

impl Ipuexe<'_> {
    /// The package the body holds, written by the compiler version the header names, with a well-formed
    /// graph ([`crate::ir::Graph::check`]) whose values the host can hold together, and a target that is the preset it names (so no crafted
    /// tile count or memory size reaches the device).
    pub fn package(&self) -> Result<Package, IpuexeError> {
        let package = crate::store::decode::<Package>(self.body, &self.body_hash)?;
        if self.version != package.compiler_version.as_bytes() {
            return Err(IpuexeError::Version);
        }
        package.graph.check().map_err(IpuexeError::Graph)?;
        let elements: u64 = package.graph.values.iter().map(|v| v.elements()).sum();
        if elements > crate::ir::MAX_ELEMENTS {
            return Err(IpuexeError::Graph(format!(
                "its values hold {elements} elements, more than a run holds on the host (2^31)"
            )));
        }
        if crate::target::Target::preset(&package.target.name).as_ref() != Some(&package.target) {
            return Err(IpuexeError::Target(package.target.name.clone()));
        }
        Ok(package)
    }
}

/// Checks a `model.ipuexe`'s magic, header and body hash.
pub fn open_ipuexe(bytes: &[u8]) -> Result<Ipuexe<'_>, IpuexeError> {
    let rest = bytes
        .strip_prefix(IPUEXE_MAGIC.as_slice())
        .ok_or(IpuexeError::Magic)?;
    let len = rest
        .first_chunk::<4>()
        .map(|b| u32::from_le_bytes(*b) as usize)
        .ok_or(IpuexeError::Truncated)?;
    let version = rest.get(4..4 + len).ok_or(IpuexeError::Truncated)?;
    let hash = rest.get(4 + len..36 + len).ok_or(IpuexeError::Truncated)?;
    let body = rest.get(36 + len..).ok_or(IpuexeError::Truncated)?;
    let body_hash = ContentHash::of(body);
    if body_hash.0 != hash {
        return Err(IpuexeError::Hash);
    }
    Ok(Ipuexe {
        body_hash,
        body,
        version,
    })
}

/// The compiler version and package of a `model.ipuexe`.
pub fn read_ipuexe(bytes: &[u8]) -> Result<(String, Package), IpuexeError> {
    let package = open_ipuexe(bytes)?.package()?;
    Ok((package.compiler_version.clone(), package))
}

/// One named tensor a run takes or gives: a graph value with role input, weight or output, in the
/// shape and type the user sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureTensor {
    pub value: ValueId,
    pub role: ValueRole,
    pub name: String,
    /// [`crate::ir::Value::user_shape`].
    pub shape: Vec<u32>,
    pub dtype: DType,
}

/// What a package's run takes (inputs bound by `--input`, weights by `--weights`) and gives (outputs),
/// each in value order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub inputs: Vec<SignatureTensor>,
    pub weights: Vec<SignatureTensor>,
    pub outputs: Vec<SignatureTensor>,
}

impl Signature {
    pub fn of(graph: &Graph) -> Signature {
        let of_role = |role: ValueRole| {
            graph
                .values
                .iter()
                .filter(|v| v.role == role)
                .map(|v| SignatureTensor {
                    value: v.id,
                    role,
                    name: v.name.clone(),
                    shape: v.user_shape(),
                    dtype: v.dtype,
                })
                .collect()
        };
        Signature {
            inputs: of_role(ValueRole::Input),
            weights: of_role(ValueRole::Weight),
            outputs: of_role(ValueRole::Output),
        }
    }

    /// Every tensor: inputs, weights, then outputs.
    pub fn tensors(&self) -> impl Iterator<Item = &SignatureTensor> {
        self.inputs.iter().chain(&self.weights).chain(&self.outputs)
    }
}

impl std::fmt::Display for SignatureTensor {
    /// `input x [1, 21, 40] f16`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.role {
            ValueRole::Input => "input",
            ValueRole::Weight => "weight",
            ValueRole::Intermediate => "intermediate",
            ValueRole::Output => "output",
        };
        write!(f, "{role} {} {:?} {}", self.name, self.shape, self.dtype)
    }
}

impl Package {
    /// The named tensors a run of this package takes and gives.
    pub fn signature(&self) -> Signature {
        Signature::of(&self.graph)
    }

    pub fn dump(&self) -> String {
        let mut s = String::new();
        let code: Vec<usize> = self.tiles.iter().map(|t| t.code.len()).collect();
        let _ = writeln!(
            s,
            "package {} target={} tiles={} code_bytes_total={} code_bytes_max={} estimated_cycles={}",
            self.workload,
            self.target.name,
            self.tiles.len(),
            code.iter().sum::<usize>(),
            code.iter().max().unwrap_or(&0),
            self.estimated_cycles
        );
        for (i, step) in self.steps.iter().enumerate() {
            let _ = writeln!(
                s,
                "  step{i} {} estimated_cycles={} sync={} serves {}",
                step.kind,
                step.cycles,
                step.sync_cycles,
                if step.operators.is_empty() {
                    "-".to_string()
                } else {
                    step.operators.join(", ")
                }
            );
        }
        let _ = writeln!(
            s,
            "  host: initialize={} run_inputs={} run_outputs={}",
            self.host.initialize.len(),
            self.host.run_inputs.len(),
            self.host.run_outputs.len()
        );
        for t in self.signature().tensors() {
            let verb = if t.role == ValueRole::Output {
                "gives"
            } else {
                "takes"
            };
            let _ = writeln!(s, "  {verb} {t}");
        }
        s
    }
}
