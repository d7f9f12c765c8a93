//! A bf16 GEMM on TMA, a multi-stage pipeline, warp roles and a persistent tile schedule:
//! `C[M, N] = A[M, K] . B[N, K]^T` (cuBLAS's `TN`: both operands K-contiguous), f32
//! accumulation, bf16 output. wgmma on sm_90a, tcgen05 with the accumulator in tensor
//! memory on sm_100a; the roles and the pipeline are the same source.

mod host;
mod kernel;
mod tiling;

pub use host::{GemmError, GemmGpu, GemmShape, exact_operands, reference, run_interpreter};
pub use kernel::gemm_bf16_tn;
pub use tiling::{TILE_K, Tiling};
