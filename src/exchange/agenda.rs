//! The calendar of the tight cover's event loop ([`super::cover`]).
//!
//! Contract: [`Agenda`] holds [`Happening`]s by integer time. Happenings are only ever pushed for
//! times after the current one; [`Agenda::next`] hands out, in order of time, the whole list of the
//! first time after a given one that has any, and [`Agenda::recycle`] takes the emptied list back so
//! that its storage serves a later time. Within a time, happenings come in the order they were pushed.

/// What happens at a time of [`TightCover`](super::cover): a run ends (unless its flow
/// has moved on to another version since), or a port's deadline comes: it must start work to finish
/// within the target.
pub(super) enum Happening {
    End { flow: u32, version: u32 },
    Deadline(u32),
}

/// Happenings by time: a calendar, times being small integers. Happenings are only ever added
/// after the current time, so the lists of past times are used again ([`Agenda::recycle`]).
#[derive(Default)]
pub(super) struct Agenda {
    slots: Vec<Vec<Happening>>,
    pending: usize,
    spare: Vec<Vec<Happening>>,
}

impl Agenda {
    pub(super) fn push(&mut self, t: u64, h: Happening) {
        let t = t as usize;
        if t >= self.slots.len() {
            self.slots.resize_with(t + 1, Vec::new);
        }
        let slot = &mut self.slots[t];
        if slot.capacity() == 0
            && let Some(spare) = self.spare.pop()
        {
            *slot = spare;
        }
        slot.push(h);
        self.pending += 1;
    }

    /// Takes back the list [`Agenda::next`] gave.
    pub(super) fn recycle(&mut self, mut happenings: Vec<Happening>) {
        happenings.clear();
        self.spare.push(happenings);
    }

    /// The first time after `t` with happenings, and them.
    pub(super) fn next(&mut self, t: u64) -> Option<(u64, Vec<Happening>)> {
        if self.pending == 0 {
            return None;
        }
        let next = (t as usize + 1..self.slots.len()).find(|&s| !self.slots[s].is_empty())?;
        let happenings = std::mem::take(&mut self.slots[next]);
        self.pending -= happenings.len();
        Some((next as u64, happenings))
    }
}
