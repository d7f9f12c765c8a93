//! JIT and launch through cudarc: a traced [`Kernel`](crate::ir::Kernel) is printed as PTX,
//! loaded by the CUDA driver (cached per kernel name, compile key and target), and launched
//! with `cuLaunchKernelEx` using the block and cluster shape, dynamic shared memory and PDL
//! that the kernel fixes.
//!
//! # Rules
//! - Nothing here panics for want of a GPU: every failure (no driver, no device, a driver
//!   too old for the PTX `.version`, a kernel built for another architecture, a module the
//!   driver rejects, a bad launch) is a [`JitError`] that says what to do. A kernel the
//!   device cannot run is refused before the driver sees it.
//! - Arguments are a typed list ([`KernelArg`]) checked against the kernel's parameters;
//!   a tensor is its device address, extents and strides in elements, packed as
//!   [`ir::tensor_param`](crate::ir::tensor_param) lays out the `.param` it is read from.
//! - A launch allocates no device memory, records no events and never synchronises, so it
//!   can be captured into a CUDA graph.
//! - GPU tests start with [`test_device`] and are named `gpu_*`.
//!
//! # Example
//! ```no_run
//! use cudarc::driver::DevicePtr;
//! use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
//! use dsl_core::Target;
//! use dsl_core::jit::{Device, KernelArg, Launch, TensorArg};
//! # fn trace_scale(_: Target) -> Result<dsl_core::ir::Kernel, dsl_core::trace::TraceError> { unimplemented!() }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = Device::open(0)?;
//! let target = dev.target().ok_or("no kestrel target for this GPU")?;
//! // Traced and loaded on the first call for ("scale", "n128", target); cached after.
//! let scale = dev.kernel("scale", "n128", target, || trace_scale(target))?;
//!
//! let stream = dev.stream();
//! let input = stream.clone_htod(&[1.0f32; 256])?;
//! let output = stream.alloc_zeros::<f32>(256)?;
//! let (inp, _read) = input.device_ptr(stream);
//! let (out, _write) = output.device_ptr(stream);
//! let args = [
//!     KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(out, [256])),
//!     KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(inp, [256])),
//!     KernelArg::F32(3.0),
//! ];
//! // SAFETY: both buffers hold 256 f32 and outlive the kernel (read back below).
//! unsafe { scale.launch(stream, Launch::new([2, 1, 1]), &args)? };
//!
//! // The same launch, captured once into a graph and replayed.
//! stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
//! unsafe { scale.launch(stream, Launch::new([2, 1, 1]).with_pdl(), &args)? };
//! let graph = stream
//!     .end_capture(CUgraphInstantiate_flags(0))?
//!     .ok_or("nothing was captured")?;
//! graph.launch()?;
//! drop((_read, _write));
//! let result = stream.clone_dtoh(&output)?;
//! # let _ = result;
//! # Ok(())
//! # }
//! ```

/// The cudarc the JIT is built against: its `CudaSlice`, `CudaStream` and driver types are
/// the ones launches take.
pub use cudarc;

mod args;
mod cache;
mod device;
mod error;
mod kernel;
mod launch;
mod tensor_map;
mod testing;

pub use args::{KernelArg, MAX_PARAM_BYTES, MAX_PARAMS, MAX_TENSOR_RANK, ParamBuffer, TensorArg};
pub use device::{
    Device, DeviceInfo, device_count, driver_present, gpu_available, min_driver_for_ptx,
};
pub use error::JitError;
pub use kernel::{KernelInfo, LoadedKernel};
pub use launch::{Launch, LaunchShape};
pub use tensor_map::{EncodedTensorMap, encode as encode_tensor_map};
pub use testing::{REQUIRE_GPU_ENV, test_device};
