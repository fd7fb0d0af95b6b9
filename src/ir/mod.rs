//! The IR: every artifact the phases pass along, in pipeline order. It depends on no phase; phases
//! depend on it. Each artifact's type, its store kind and schema, and its stable text dump live here;
//! what produces an artifact and what checks it live in the phase that writes it, except the mid's
//! verifier (`verify_mid`), which `select_finalist` also runs on its input.
//!
//! graph → mid → program (`selected`) → exchange storage → exchanges → placement → tile code → package

pub mod exchange_storage;
pub mod exchanges;
pub mod graph;
mod graph_check;
pub mod layout;
pub mod mid;
pub mod package;
pub mod placement;
pub mod program;
pub mod tile_code;

pub use exchange_storage::*;
pub use exchanges::*;
pub use graph::*;
pub use graph_check::MAX_ELEMENTS;
pub use layout::*;
pub use mid::*;
pub use package::*;
pub use placement::*;
pub use program::*;
pub use tile_code::*;
