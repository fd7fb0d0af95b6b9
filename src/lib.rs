//! ipu-codegen: an ahead-of-time compiler for tile-based, bulk-synchronous ML processors of the Graphcore
//! IPU kind, and the simulated device its packages run on. See ARCHITECTURE.md for the map.

pub mod calibrate;
pub mod device;
pub mod driver;
pub mod elements;
pub mod exchange;
pub mod files;
pub mod host_memory;
pub mod ids;
pub mod ir;
pub mod isa;
pub mod lowering;
pub mod numerics;
pub mod onnx;
pub mod progress;
pub mod report;
pub mod rng;
pub mod stages;
pub mod store;
pub mod suggest;
pub mod target;
pub mod tensors;
pub mod verify;
pub mod workload;
