//! Progress of the long steps (the device's supersteps, the host reference, exchange scheduling),
//! reported to whoever asked for it; a leaf every module may use.
//!
//! Contract: a step calls [`Progress::start`] once with its length in units, [`Progress::advance`]
//! as units are done (from any thread), then [`Progress::finish`]. What is reported never changes a
//! result: library code calls these and nothing else, and reads nothing back. The library draws
//! nothing; the CLI passes an implementation that draws bars on a terminal, tests and other callers
//! pass [`Silent`].

/// Hears how far a long step has come.
pub trait Progress: Sync {
    /// A step of `len` units begins; `what` names its units (`supersteps`).
    fn start(&self, what: &'static str, len: u64);
    /// `units` more units of the step are done.
    fn advance(&self, units: u64);
    /// The step is over.
    fn finish(&self);
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &'static str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
