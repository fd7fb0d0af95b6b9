//! Scheduling an exchange pattern: the entry the compiler calls.
//!
//! Contract: [`schedule`] returns a schedule of its pattern under its overheads that passes the
//! checker ([`super::check`]), with the pattern's lower bound; the same pattern and overheads give
//! the same schedule, whatever the machine's load. It chooses only how to cut the work:
//!
//! - a pattern of at most [`HALVES_DESTINATIONS`] destinations is scheduled whole: several
//!   strategies, the shortest kept ([`super::strategies`]);
//! - a larger one is scheduled in two halves, one after the other in time, one on each core
//!   ([`super::halves`]); its kind is `halves:` and the kinds of the halves' schedules.
//!
//! A transfer that names a tile twice is first cut apart ([`super::apart`]): each copy is a
//! reception of its own, and the pattern's lower bound counts it so.
//!
//! This module sits above both: the halves schedule each half by the strategies, and neither
//! depends on this choice.

use super::apart::apart;
use super::halves::in_halves;
use super::strategies::whole;
use super::{Overheads, Pattern, Schedule};

/// Patterns naming more destinations than this are scheduled in two halves, one on each core
/// ([`super::halves`]): the event loop takes about a microsecond per flow on one core, and flows
/// are about as many as destinations, so one core alone would take most of half a second.
pub(super) const HALVES_DESTINATIONS: usize = 200_000;

/// A schedule of `pattern` (module docs): in halves when it names more than
/// [`HALVES_DESTINATIONS`] destinations, else whole.
pub fn schedule(pattern: &Pattern, o: Overheads) -> Schedule {
    // A tile named twice by a transfer receives each copy by pieces of its own.
    if let Some(cut) = apart(pattern) {
        let mut s = schedule(&cut.pattern, o);
        s.pieces = cut.pieces(s.pieces);
        return s;
    }
    let destinations: usize = pattern.transfers.iter().map(|t| t.destinations.len()).sum();
    if destinations > HALVES_DESTINATIONS {
        return in_halves(pattern, o);
    }
    whole(pattern, o)
}
