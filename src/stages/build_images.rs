//! `build_images`: tile_code + placement + selected + target -> `package`.
//!
//! Puts every tile's encoded program into its memory image at the code address, and gathers
//! what the device and the host need: the host program, the graph (for the host's data and reference),
//! the estimated cycles of every superstep and of the sync that ends it, the graph operations each
//! superstep serves ([`step_operators`]), and the compiler version. The package holds no weights.
//! `model.ipuexe` is the package's store bytes behind a short header (magic, format version, compiler
//! version, blake3 of the body).
//!
//! Invariants (checked by [`verify`]): every image is its program's encoding; every code image fits the
//! space `place_storage` reserved for it.

use crate::ids::{Grouped, OpId};
use crate::ir::{
    BufferInfo, Package, Placement, Selected, Step, StepEstimate, TileCode, TileImage,
};
use crate::store::COMPILER_VERSION;
use crate::target::Target;
use crate::verify::Verifier;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BuildImagesConfig {}

#[derive(Debug, thiserror::Error)]
pub enum BuildImagesError {
    #[error("build_images produced an invalid package:\n{0}")]
    Invalid(String),
}

pub fn build_images(
    code: &TileCode,
    placement: &Placement,
    sel: &Selected,
    target: &Target,
    _cfg: &BuildImagesConfig,
) -> Result<Package, BuildImagesError> {
    let mut buffers: Vec<Vec<BufferInfo>> = vec![Vec::new(); code.tiles.len()];
    for (b, &address) in sel.buffers.iter().zip(&placement.addresses) {
        buffers[b.tile.index()].push(BufferInfo {
            address,
            bytes: b.bytes(),
            first_step: b.first_step.0,
            last_step: b.last_step.0,
            label: b.label(),
        });
    }
    // The images, and beside them the operations each superstep serves.
    let (tiles, served): (Vec<TileImage>, _) = rayon::join(
        || {
            (code.tiles.par_iter())
                .zip(&placement.tiles)
                .zip(buffers)
                .map(|((p, usage), buffers)| TileImage {
                    code_address: usage.code_address,
                    code: p.bytes().to_vec(),
                    buffers,
                })
                .collect()
        },
        || step_operators(sel),
    );
    let steps: Vec<StepEstimate> = sel
        .steps
        .iter()
        .zip(&code.estimated_steps)
        .zip(served)
        .map(|((s, c), operators)| StepEstimate {
            kind: match s {
                Step::Exchange(_) => "exchange",
                Step::Compute(_) => "compute",
            }
            .to_string(),
            cycles: *c,
            sync_cycles: target.sync_estimate(1),
            operators,
        })
        .collect();
    let estimated_cycles = steps
        .iter()
        .map(|s| s.cycles.saturating_add(s.sync_cycles))
        .fold(0u64, u64::saturating_add);
    let tile_estimates = sel
        .steps
        .iter()
        .map(|s| match s {
            Step::Exchange(_) => Vec::new(),
            Step::Compute(c) => {
                let mut tiles = vec![0u32; code.tiles.len()];
                for v in &sel.compute_sets[*c as usize].vertices {
                    let t = &mut tiles[v.tile.index()];
                    *t = t.saturating_add(u32::try_from(v.estimated_cycles).unwrap_or(u32::MAX));
                }
                tiles
            }
        })
        .collect();
    let package = Package {
        compiler_version: COMPILER_VERSION.to_string(),
        target: target.clone(),
        workload: code.workload.clone(),
        graph: sel.graph.clone(),
        tiles,
        host: code.host.clone(),
        steps,
        tile_estimates,
        estimated_cycles,
    };
    let errors = verify(&package, code, placement);
    if !errors.is_empty() {
        return Err(BuildImagesError::Invalid(errors.join("\n")));
    }
    Ok(package)
}

/// Per superstep, the names of the graph operations it serves, in graph order: a compute step's are
/// those its compute set's operator implements; an exchange's are those of the compute steps that
/// next read or write the buffers it writes, or, when no later step uses them, those producing the
/// values it moves (none for a weight or an input).
pub fn step_operators(sel: &Selected) -> Vec<Vec<String>> {
    let covers = |operator: OpId| {
        (sel.operators.iter().find(|o| o.id() == operator)).map_or(&[][..], |o| o.covers())
    };
    // Per buffer, the compute steps that use it, in step order, with their operators (every use
    // grouped by buffer).
    let mut uses: Vec<(usize, (usize, OpId))> = Vec::new();
    for (i, step) in sel.steps.iter().enumerate() {
        let Step::Compute(c) = step else { continue };
        let Some(cs) = sel.compute_sets.get(*c as usize) else {
            continue;
        };
        for v in &cs.vertices {
            for u in v.kind.operands() {
                uses.push((u.operand.buffer.index(), (i, cs.operator)));
            }
        }
    }
    let users = Grouped::new(sel.buffers.len(), || uses.iter().copied());
    let names = |mut ops: Vec<OpId>| {
        ops.sort_unstable();
        ops.dedup();
        ops.iter()
            .filter_map(|&id| sel.graph.ops.iter().find(|o| o.id == id))
            .map(|o| o.name.clone())
            .collect::<Vec<String>>()
    };
    // The step whose exchange last looked a buffer up: each buffer's next users once a step.
    let mut seen = vec![usize::MAX; sel.buffers.len()];
    let mut served = Vec::with_capacity(sel.steps.len());
    for (i, step) in sel.steps.iter().enumerate() {
        served.push(match step {
            Step::Compute(c) => names(
                (sel.compute_sets.get(*c as usize))
                    .map_or(Vec::new(), |cs| covers(cs.operator).to_vec()),
            ),
            Step::Exchange(x) => {
                let transfers = sel
                    .exchanges
                    .get(x.index())
                    .map_or(&[][..], |x| &x.transfers);
                // The operators of the steps next using what the phase writes, each once.
                let mut next_ops: Vec<OpId> = Vec::new();
                for d in transfers.iter().flat_map(|t| &t.destinations) {
                    let b = d.buffer.index();
                    let Some(mark) = seen.get_mut(b) else {
                        continue;
                    };
                    if std::mem::replace(mark, i) == i {
                        continue;
                    }
                    let list = users.group(b);
                    let first = list.partition_point(|&(j, _)| j <= i);
                    let Some(&(next, _)) = list.get(first) else {
                        continue;
                    };
                    let at_next = list[first..].iter().take_while(|&&(j, _)| j == next);
                    for &(_, op) in at_next {
                        if !next_ops.contains(&op) {
                            next_ops.push(op);
                        }
                    }
                }
                let next_users: Vec<OpId> = (next_ops.into_iter())
                    .flat_map(|op| covers(op).iter().copied())
                    .collect();
                if next_users.is_empty() {
                    let moved: Vec<_> = transfers.iter().map(|t| t.value).collect();
                    names(
                        (sel.graph.ops.iter())
                            .filter(|o| moved.contains(&o.out))
                            .map(|o| o.id)
                            .collect(),
                    )
                } else {
                    names(next_users)
                }
            }
        });
    }
    served
}

pub fn verify(package: &Package, code: &TileCode, placement: &Placement) -> Vec<String> {
    let mut v = Verifier::default();
    v.check(
        package.tiles.len() == code.tiles.len() && code.tiles.len() == placement.tiles.len(),
        || {
            format!(
                "{} tile images for {} tile programs and {} placed tiles",
                package.tiles.len(),
                code.tiles.len(),
                placement.tiles.len()
            )
        },
    );
    for ((image, program), usage) in package.tiles.iter().zip(&code.tiles).zip(&placement.tiles) {
        v.check(image.code.len() as u32 <= usage.code_bytes, || {
            format!(
                "{}: code is {} bytes, {} reserved",
                program.tile(),
                image.code.len(),
                usage.code_bytes
            )
        });
        v.check(image.code_address == usage.code_address, || {
            format!(
                "{}: code image at {:#x}, placed at {:#x}",
                program.tile(),
                image.code_address,
                usage.code_address
            )
        });
        // The image is exactly its program's encoding (which decodes): no bytes past it.
        v.check(image.code == program.bytes(), || {
            format!("{}: code image is not its program", program.tile())
        });
    }
    v.finish()
}
