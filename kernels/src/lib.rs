//! Kernels written in the kestrel DSL, with everything a serving process needs around them.

pub mod basics;
pub mod formats;
pub mod gemm;
pub mod swap_ab_decode;

/// The cudarc this crate is built against, so an engine names the same `CudaSlice`,
/// `CudaStream` and driver types the host API takes.
pub use dsl_core::jit::cudarc;
