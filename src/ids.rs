//! Typed dense ids. Each prints with its domain prefix (`tile12`, `v7`, `ex3`) in logs, dumps and errors.

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
