//! A bf16 GEMM on TMA, a multi-stage pipeline, warp roles and a persistent tile schedule:
//! `C[M, N] = A[M, K] . B[N, K]^T` (cuBLAS's `TN`: both operands K-contiguous), f32
//! accumulation, bf16 output. wgmma on sm_90a, tcgen05 with the accumulator in tensor
//! memory on sm_100a; the roles and the pipeline are the same source.
//!
//! On the CPU interpreter, exact against the host for operands whose sums are exact:
//! ```
//! use dsl_core::Target;
//! use kernels::gemm::{GemmShape, exact_operands, reference, run_interpreter};
//!
//! let shape = GemmShape::new(128, 256, 64)?;
//! let (a, b) = exact_operands(shape, 1);
//! assert_eq!(run_interpreter(Target::Sm90a, shape, &a, &b, 1)?, reference(shape, &a, &b));
//! # Ok::<(), kernels::gemm::GemmError>(())
//! ```
//!
//! On a GPU: bind the buffers once (the tensor maps are encoded there), then launch, also
//! inside a CUDA-graph capture:
//! ```no_run
//! use std::sync::Arc;
//! use cudarc::driver::DevicePtr;
//! use kernels::gemm::{GemmGpu, GemmShape};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = Arc::new(dsl_core::jit::Device::open(0)?);
//! let gemm = GemmGpu::load(Arc::clone(&dev))?;
//! let shape = GemmShape::new(4096, 4096, 4096)?;
//! let stream = dev.stream();
//! let a = stream.alloc_zeros::<u16>(4096 * 4096)?;
//! let b = stream.alloc_zeros::<u16>(4096 * 4096)?;
//! let c = stream.alloc_zeros::<u16>(4096 * 4096)?;
//! let (ap, _ga) = a.device_ptr(stream);
//! let (bp, _gb) = b.device_ptr(stream);
//! let (cp, _gc) = c.device_ptr(stream);
//! let call = gemm.bind(shape, ap, bp, cp)?;
//! // SAFETY: the three buffers hold the shape's matrices until the stream is synchronised.
//! unsafe { gemm.launch(stream, &call)? };
//! stream.synchronize()?;
//! # Ok(())
//! # }
//! ```

mod host;
mod kernel;
mod tiling;

pub use host::{
    GemmCall, GemmError, GemmGpu, GemmShape, exact_operands, reference, reference_element,
    run_interpreter,
};
pub use kernel::gemm_bf16_tn;
pub use tiling::{TILE_K, Tiling};
