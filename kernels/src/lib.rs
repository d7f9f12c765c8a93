//! Kernels written in the kestrel DSL, with everything a serving process needs around them.

pub mod basics;
pub mod formats;
pub mod gemm;
pub mod swap_ab_decode;
