//! Exchange schedules (`exchanges`): every exchange phase's schedule with the key of its pattern, under
//! which the store keeps it for reuse. Written by `lower_exchanges`.

use crate::exchange::Schedule;
use crate::ids::ExchangeId;
use crate::store::ContentHash;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseSchedule {
    pub id: ExchangeId,
    /// The key of the phase's pattern, under which the schedule is stored for reuse.
    pub pattern: ContentHash,
    pub schedule: Schedule,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchanges {
    pub phases: Vec<PhaseSchedule>,
}

impl crate::store::Artifact for Exchanges {
    const KIND: &'static str = "exchanges";
    const SCHEMA: u32 = 5;
}

impl crate::store::Artifact for Schedule {
    const KIND: &'static str = "exchange_schedule";
    const SCHEMA: u32 = 4;
}

impl Exchanges {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for p in &self.phases {
            let sc = &p.schedule;
            let _ = writeln!(
                s,
                "{}: pieces={} horizon={} endpoint_lower_bound={} gap={} initial_horizon={} strategy={}",
                p.id,
                sc.pieces.len(),
                sc.horizon,
                sc.lower_bound,
                sc.horizon - sc.lower_bound,
                sc.initial_horizon,
                sc.kind
            );
        }
        s
    }
}
