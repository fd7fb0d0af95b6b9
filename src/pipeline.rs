//! The pipeline's vocabulary: a [`Phase`] is a row of the phase table (`crate::driver::PHASES`), and an
//! [`ArtifactKind`] is the store kind of an artifact type. Every fact about a phase (its name, inputs,
//! output, description) is read from the table, so subcommands, `build --from/--to`, the logs, stage
//! records and the Makefile (through `ipu-codegen make-rules`) all derive from it. [`PIPELINE`] lists the
//! phases in order.

use crate::driver::{PHASES, PhaseSpec};
use crate::store::Artifact;
use std::fmt;

/// A phase of the pipeline: its row in the phase table. Phases compare in pipeline order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Phase(usize);

/// An artifact a phase reads or writes, named by its store kind (`mid`, `selected`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArtifactKind(&'static str);

/// Every phase, in pipeline order: one per row of the phase table.
pub const PIPELINE: [Phase; PHASES.len()] = {
    let mut all = [Phase(0); PHASES.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = Phase(i);
        i += 1;
    }
    all
};

impl Phase {
    /// The phase's row in the table.
    pub fn spec(self) -> &'static PhaseSpec {
        &PHASES[self.0]
    }

    /// The name in logs, stage records and dumps: `lower_mid`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The subcommand: `lower-mid`.
    pub fn command(self) -> String {
        self.name().replace('_', "-")
    }

    /// The phase named `name` or `command`.
    pub fn parse(name: &str) -> Option<Phase> {
        PIPELINE
            .into_iter()
            .find(|p| p.name() == name || p.command() == name)
    }

    /// The place in the pipeline, from 0.
    pub fn index(self) -> usize {
        self.0
    }

    pub fn inputs(self) -> &'static [ArtifactKind] {
        self.spec().inputs
    }

    pub fn output(self) -> ArtifactKind {
        self.spec().output
    }

    /// One line for the phase's subcommand.
    pub fn about(self) -> &'static str {
        self.spec().about
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl ArtifactKind {
    /// The kind of artifact type `A`.
    pub const fn of<A: Artifact>() -> ArtifactKind {
        ArtifactKind(A::KIND)
    }

    /// The name in stage records and messages: `exchange_storage`.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
