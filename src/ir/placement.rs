//! The placement (`placement`): the address of every buffer and each tile's code space and peak use.
//! Written by `place_storage`.

use crate::ir::Selected;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileUsage {
    pub code_address: u32,
    pub code_bytes: u32,
    /// Highest address in use + 1, per region.
    pub standard_end: u32,
    pub interleaved_end: u32,
    /// Most bytes live at once (code included).
    pub peak_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The address of every buffer, by buffer id.
    pub addresses: Vec<u32>,
    pub tiles: Vec<TileUsage>,
}

impl crate::store::Artifact for Placement {
    const KIND: &'static str = "placement";
    const SCHEMA: u32 = 1;
}

impl Placement {
    pub fn dump(&self, sel: &Selected, target: &Target) -> String {
        let mut s = String::new();
        let used: Vec<&TileUsage> = self
            .tiles
            .iter()
            .filter(|t| t.peak_bytes > t.code_bytes)
            .collect();
        let max_peak = used.iter().map(|t| t.peak_bytes).max().unwrap_or(0);
        let max_code = self.tiles.iter().map(|t| t.code_bytes).max().unwrap_or(0);
        let _ = writeln!(
            s,
            "placement: buffers={} tiles_with_data={} max_peak_bytes={} max_code_bytes={} capacity={}",
            self.addresses.len(),
            used.len(),
            max_peak,
            max_code,
            target.memory_end - target.memory_base
        );
        if let Some((t, _)) = self
            .tiles
            .iter()
            .enumerate()
            .find(|(_, u)| u.peak_bytes == max_peak)
        {
            let _ = writeln!(s, "  busiest tile{t}:");
            for (b, a) in sel
                .buffers
                .iter()
                .zip(&self.addresses)
                .filter(|(b, _)| b.tile.index() == t)
            {
                let _ = writeln!(
                    s,
                    "    {:#07x} {:>7} bytes {}..{} {}",
                    a,
                    b.bytes(),
                    b.first_step,
                    b.last_step,
                    b.describe()
                );
            }
        }
        s
    }
}
