//! The pipeline: the one list of phases, in order. Subcommands, `build --from/--to`, the logs, stage
//! records and the Makefile (through `ipu-codegen phases`) all derive from [`PIPELINE`].

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    LowerMid,
    SelectFinalist,
    PlanExchangeStorage,
    LowerExchanges,
    PlaceStorage,
    Emit,
    BuildImages,
}

/// An artifact a phase reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArtifactKind {
    Graph,
    Mid,
    Selected,
    ExchangeStorage,
    Exchanges,
    Placement,
    TileCode,
    Package,
}

pub const PIPELINE: [Phase; 7] = [
    Phase::LowerMid,
    Phase::SelectFinalist,
    Phase::PlanExchangeStorage,
    Phase::LowerExchanges,
    Phase::PlaceStorage,
    Phase::Emit,
    Phase::BuildImages,
];

impl Phase {
    /// The name in logs, stage records and dumps: `lower_mid`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::LowerMid => "lower_mid",
            Phase::SelectFinalist => "select_finalist",
            Phase::PlanExchangeStorage => "plan_exchange_storage",
            Phase::LowerExchanges => "lower_exchanges",
            Phase::PlaceStorage => "place_storage",
            Phase::Emit => "emit",
            Phase::BuildImages => "build_images",
        }
    }

    /// The subcommand: `lower-mid`.
    pub fn command(self) -> String {
        self.name().replace('_', "-")
    }

    pub fn parse(name: &str) -> Option<Phase> {
        PIPELINE
            .into_iter()
            .find(|p| p.name() == name || p.command() == name)
    }

    pub fn index(self) -> usize {
        PIPELINE
            .iter()
            .position(|p| *p == self)
            .expect("every phase is in the pipeline")
    }

    pub fn inputs(self) -> &'static [ArtifactKind] {
        use ArtifactKind::*;
        match self {
            Phase::LowerMid => &[Graph],
            Phase::SelectFinalist => &[Graph, Mid],
            Phase::PlanExchangeStorage => &[Selected],
            Phase::LowerExchanges => &[Selected, ExchangeStorage],
            Phase::PlaceStorage => &[Selected, ExchangeStorage, Exchanges],
            Phase::Emit => &[Selected, ExchangeStorage, Exchanges, Placement],
            Phase::BuildImages => &[TileCode, Placement, Selected],
        }
    }

    pub fn output(self) -> ArtifactKind {
        use ArtifactKind::*;
        match self {
            Phase::LowerMid => Mid,
            Phase::SelectFinalist => Selected,
            Phase::PlanExchangeStorage => ExchangeStorage,
            Phase::LowerExchanges => Exchanges,
            Phase::PlaceStorage => Placement,
            Phase::Emit => TileCode,
            Phase::BuildImages => Package,
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            Phase::LowerMid => "Lower the graph to operators and keep the best candidate plans",
            Phase::SelectFinalist => {
                "Choose a finalist plan and tile mapping; build buffers, steps and transfers"
            }
            Phase::PlanExchangeStorage => "Lay out what every exchange phase reads and writes",
            Phase::LowerExchanges => "Schedule every exchange phase cycle by cycle",
            Phase::PlaceStorage => "Give every buffer of every tile an address",
            Phase::Emit => "Write every tile's program and the host program",
            Phase::BuildImages => "Encode tile images and write model.ipuexe",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl ArtifactKind {
    pub fn name(self) -> &'static str {
        match self {
            ArtifactKind::Graph => "graph",
            ArtifactKind::Mid => "mid",
            ArtifactKind::Selected => "selected",
            ArtifactKind::ExchangeStorage => "exchange_storage",
            ArtifactKind::Exchanges => "exchanges",
            ArtifactKind::Placement => "placement",
            ArtifactKind::TileCode => "tile_code",
            ArtifactKind::Package => "package",
        }
    }
}
