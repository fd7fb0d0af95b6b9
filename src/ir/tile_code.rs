//! Tile code (`tile_code`): every tile's instruction sequence with resolved addresses, the host program
//! and the estimated cycles of every superstep. Written by `emit`.

use crate::isa::{EncodedProgram, HostProgram, Instr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileCode {
    pub workload: String,
    /// Every tile's program, in tile order, held encoded.
    pub tiles: Vec<EncodedProgram>,
    pub host: HostProgram,
    /// Estimated cycles per superstep (compute from the cost model, exchange from the schedule).
    pub estimated_steps: Vec<u64>,
}

/// Schema 7: the split layer norm's vertex kinds; since 5, programs in encoding format 2
/// (`crate::isa::encoding::FORMAT`).
impl crate::store::Artifact for TileCode {
    const KIND: &'static str = "tile_code";
    const SCHEMA: u32 = 7;

    fn encode_body(&self, out: &mut crate::store::Encoded) {
        let TileCode {
            workload,
            tiles,
            host,
            estimated_steps,
        } = self;
        out.array_len(4);
        out.value(workload);
        out.list(tiles);
        out.value(host);
        out.value(estimated_steps);
    }
}

impl TileCode {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "tile_code {}", self.workload);
        let _ = writeln!(s, "  estimated step cycles: {:?}", self.estimated_steps);
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for p in &self.tiles {
            for i in p.instrs() {
                let name = match i {
                    Instr::Vertex(v) => v.name(),
                    Instr::Exchange { .. } => "exchange",
                    Instr::Send(_) => "send",
                    Instr::Receive(_) => "receive",
                    Instr::SendReceive(..) => "send-receive",
                    Instr::Delay { .. } => "delay",
                    Instr::Sync => "sync",
                };
                *counts.entry(name).or_default() += 1;
            }
        }
        let active = self.tiles.iter().filter(|p| p.has_work()).count();
        let _ = writeln!(s, "  tiles={} active={}", self.tiles.len(), active);
        for (name, n) in counts {
            let _ = writeln!(s, "  {name}: {n}");
        }
        let _ = writeln!(
            s,
            "  host: initialize={} run_inputs={} run_outputs={}",
            self.host.initialize.len(),
            self.host.run_inputs.len(),
            self.host.run_outputs.len()
        );
        if let Some(p) = self.tiles.iter().find(|p| p.has_work()) {
            let _ = writeln!(s, "  program of {}:", p.tile());
            for i in p.instrs() {
                let _ = writeln!(s, "    {i}");
            }
        }
        s
    }
}
