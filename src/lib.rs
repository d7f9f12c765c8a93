//! kestrel: a CuTe-style kernel DSL in Rust that traces to PTX.

pub use dsl_core as core;
pub use dsl_macros::{Carry, device, kernel};
pub use kernels;
