//! `build_images`: tile_code + placement + selected + target -> `package`.
//!
//! Encodes every tile's program into the bytes of its memory image at the code address, and gathers
//! what the device and the host need: the host program, the graph (for the host's data and reference),
//! the estimated cycles of every superstep and of the sync that ends it, and the compiler version. The package holds no weights.
//! `model.ipuexe` is the package's store bytes behind a short header (magic, format version, compiler
//! version, blake3 of the body).
//!
//! Invariants (checked by [`verify`]): every image decodes back to its program; every code image fits the
//! space `place_storage` reserved for it.

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
    let tiles: Vec<TileImage> = code
        .tiles
        .par_iter()
        .zip(&placement.tiles)
        .zip(buffers)
        .map(|((p, usage), buffers)| TileImage {
            code_address: usage.code_address,
            code: p.encode(),
            buffers,
        })
        .collect();
    let steps: Vec<StepEstimate> = sel
        .steps
        .iter()
        .zip(&code.estimated_steps)
        .map(|(s, c)| StepEstimate {
            kind: match s {
                Step::Exchange(_) => "exchange",
                Step::Compute(_) => "compute",
            }
            .to_string(),
            cycles: *c,
            sync_cycles: target.sync_estimate(1),
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
                program.tile,
                image.code.len(),
                usage.code_bytes
            )
        });
        v.check(image.code_address == usage.code_address, || {
            format!(
                "{}: code image at {:#x}, placed at {:#x}",
                program.tile, image.code_address, usage.code_address
            )
        });
        // The image is exactly its program's encoding (which decodes back to it): no bytes past it.
        v.check(image.code == program.encode(), || {
            format!(
                "{}: code image does not decode to its program",
                program.tile
            )
        });
    }
    v.finish()
}
