//! The compiler's phases, one module each, in pipeline order (see the phase table, `crate::driver::PHASES`).

pub mod build_images;
pub mod emit;
pub mod lower_exchanges;
pub mod lower_mid;
pub mod place_storage;
pub mod plan_exchange_storage;
pub mod select_finalist;
