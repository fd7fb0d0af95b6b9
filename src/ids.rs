//! Typed dense ids. Each prints with its domain prefix (`tile12`, `v7`, `ex3`) in logs, dumps and errors.
//! [`Grouped`] groups items by such an id's index with a counting sort.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
            pub fn from_index(index: usize) -> Self {
                Self(u32::try_from(index).expect(concat!(stringify!($name), " index fits in u32")))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

dense_id!(
    /// One of the target's tiles.
    TileId,
    "tile"
);
dense_id!(
    /// A value (tensor) of the graph.
    ValueId,
    "v"
);
dense_id!(
    /// An operation of the graph, or the tileable operator it lowers to.
    OpId,
    "op"
);
dense_id!(
    /// A buffer: one piece of storage on one tile.
    BufferId,
    "buf"
);
dense_id!(
    /// An exchange phase: the data movement between two syncs.
    ExchangeId,
    "ex"
);
dense_id!(
    /// A superstep of the bulk-synchronous program.
    StepId,
    "step"
);

/// Items grouped by a dense index below a bound (a tile's, a buffer's) with a counting sort: group
/// `i` is `items[starts[i]..starts[i + 1]]`, its items in the order they were given. The items are
/// read twice, to count and then to place, so no list of (index, item) pairs is held: a phase's
/// landings are millions in a large model.
pub struct Grouped<T> {
    starts: Vec<usize>,
    items: Vec<T>,
}

impl<T: Copy> Grouped<T> {
    /// Groups what `items` yields (called twice; both times alike) under indices `0..groups`; an
    /// item of a larger index (from a malformed artifact) is left out, for the caller's checks to
    /// name.
    pub fn new<I: Iterator<Item = (usize, T)>>(groups: usize, items: impl Fn() -> I) -> Grouped<T> {
        let mut starts = vec![0usize; groups + 1];
        let mut first = None;
        for (index, item) in items().filter(|&(index, _)| index < groups) {
            first.get_or_insert(item);
            starts[index + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut next = starts.clone();
        // Every slot is overwritten below.
        let mut placed = first.map_or(Vec::new(), |first| vec![first; starts[groups]]);
        for (index, item) in items().filter(|&(index, _)| index < groups) {
            let at = &mut next[index];
            placed[*at] = item;
            *at += 1;
        }
        Grouped {
            starts,
            items: placed,
        }
    }

    /// Group `index`'s items; none for an index no item had.
    pub fn group(&self, index: usize) -> &[T] {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&from), Some(&to)) => &self.items[from..to],
            _ => &[],
        }
    }

    /// Each index that has items, with them, in index order.
    pub fn groups_mut(&mut self) -> impl Iterator<Item = (usize, &mut [T])> {
        let mut rest = &mut self.items[..];
        (self.starts.windows(2).enumerate()).filter_map(move |(index, w)| {
            let (here, after) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            rest = after;
            (!here.is_empty()).then_some((index, here))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Grouped;

    #[test]
    fn grouped_items_keep_their_order_within_each_index() {
        let items = [(3, 'a'), (0, 'b'), (3, 'c'), (1, 'd'), (7, 'x'), (0, 'e')];
        // Index 7 lies beyond the bound: left out.
        let mut g = Grouped::new(4, || items.iter().copied());
        assert_eq!(g.group(0), ['b', 'e']);
        assert_eq!(g.group(1), ['d']);
        assert_eq!(g.group(2), [] as [char; 0]);
        assert_eq!(g.group(3), ['a', 'c']);
        assert_eq!(g.group(9), [] as [char; 0]);
        let groups: Vec<(usize, Vec<char>)> = (g.groups_mut())
            .map(|(i, items)| (i, items.to_vec()))
            .collect();
        assert_eq!(
            groups,
            [(0, vec!['b', 'e']), (1, vec!['d']), (3, vec!['a', 'c'])]
        );
        let none: Grouped<char> = Grouped::new(2, std::iter::empty);
        assert_eq!(none.group(0), [] as [char; 0]);
    }
}
