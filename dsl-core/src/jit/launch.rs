//! Launching through `cuLaunchKernelEx`: grid, the kernel's block and cluster shape, its
//! dynamic shared memory and, when asked, programmatic stream serialization (PDL).
//!
//! A launch only packs arguments on the stack and calls the driver once: it allocates no
//! device memory, records no events and never synchronises, so it can be captured into a
//! CUDA graph.

use cudarc::driver::CudaStream;
use cudarc::driver::sys::{
    self, CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue,
    CUlaunchAttributeValue_union__bindgen_ty_1 as ClusterDim, CUlaunchConfig,
};

use super::JitError;
use super::args::KernelArg;
use super::kernel::{KernelInfo, LoadedKernel};

/// Largest grid extent in x, and in y and z.
const MAX_GRID_X: u32 = i32::MAX as u32;
const MAX_GRID_YZ: u32 = 65535;

/// What varies between launches of one kernel: the grid, and whether it may start before
/// the previous kernel on the stream has finished (PDL; the kernel's
/// `grid_dependency_wait` then orders its reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// CTAs in x, y, z.
    pub grid: [u32; 3],
    /// Sets `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`.
    pub pdl: bool,
}

impl Launch {
    pub fn new(grid: [u32; 3]) -> Self {
        Launch { grid, pdl: false }
    }

    /// Lets the launch overlap the tail of the previous kernel on the stream (PDL).
    pub fn with_pdl(self) -> Self {
        Launch { pdl: true, ..self }
    }
}

/// A checked launch: everything `cuLaunchKernelEx` is given besides the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub grid: [u32; 3],
    /// The kernel's `.reqntid`.
    pub block: [u32; 3],
    /// The kernel's `.reqnctapercluster`.
    pub cluster: Option<[u32; 3]>,
    /// The kernel's dynamic shared memory.
    pub smem_bytes: u32,
    pub pdl: bool,
}

impl KernelInfo {
    /// Checks `launch` against the kernel: no empty grid dimension, within the hardware's
    /// grid limits, and each dimension a multiple of the cluster's.
    pub fn launch_shape(&self, launch: Launch) -> Result<LaunchShape, JitError> {
        let grid = launch.grid;
        let bad = |problem: String| JitError::BadGrid {
            kernel: self.name.clone(),
            grid,
            problem,
        };
        if grid.contains(&0) {
            return Err(bad("every grid dimension must be at least 1".into()));
        }
        if grid[0] > MAX_GRID_X || grid[1] > MAX_GRID_YZ || grid[2] > MAX_GRID_YZ {
            return Err(bad(format!(
                "the grid may have at most {MAX_GRID_X} CTAs in x and {MAX_GRID_YZ} in each of y and z"
            )));
        }
        if let Some(cluster) = self.launch.cluster
            && grid.iter().zip(cluster).any(|(g, c)| g % c != 0)
        {
            let rounded: Vec<u32> = grid
                .iter()
                .zip(cluster)
                .map(|(g, c)| g.next_multiple_of(c))
                .collect();
            return Err(bad(format!(
                "the kernel's cluster {cluster:?} does not divide it; each grid dimension must \
                 be a multiple of the cluster's (round the grid up to {rounded:?})"
            )));
        }
        Ok(LaunchShape {
            grid,
            block: self.launch.threads,
            cluster: self.launch.cluster,
            smem_bytes: self.smem_bytes,
            pdl: launch.pdl,
        })
    }
}

impl LoadedKernel {
    /// Enqueues the kernel on `stream` with `args`, checked against its parameters.
    ///
    /// # Safety
    /// The kernel reads and writes whatever the tensor arguments address, after this call
    /// returns: that memory must be valid for the kernel's accesses, and not freed or used
    /// conflictingly by other work, until the kernel has finished on `stream`.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        launch: Launch,
        args: &[KernelArg],
    ) -> Result<(), JitError> {
        let ctx = stream.context();
        if ctx.cu_ctx() != self.context().cu_ctx() {
            return Err(JitError::WrongContext {
                kernel: self.info().name.clone(),
                loaded: self.context().ordinal(),
                stream: ctx.ordinal(),
            });
        }
        // SAFETY: the stream is live (borrowed) and of the kernel's context (checked above);
        // the memory is the caller's promise.
        unsafe { self.enqueue(stream.cu_stream(), launch, args) }
    }

    /// [`LoadedKernel::launch`] on a raw driver stream, for engines that manage streams
    /// through another binding (their own FFI, another cudarc version).
    ///
    /// # Safety
    /// As [`LoadedKernel::launch`], and `stream` must be a live stream handle (or null, the
    /// legacy default stream) of the context the kernel was loaded in.
    pub unsafe fn launch_on_raw_stream(
        &self,
        stream: sys::CUstream,
        launch: Launch,
        args: &[KernelArg],
    ) -> Result<(), JitError> {
        if !stream.is_null() {
            let mut ctx = std::ptr::null_mut();
            // SAFETY: the caller promises a live stream handle; the driver writes `ctx`.
            unsafe { sys::cuStreamGetCtx(stream, &mut ctx) }
                .result()
                .map_err(|e| {
                    JitError::driver(
                        "cuStreamGetCtx",
                        format!("checking the raw stream of `{}`", self.info().name),
                        e,
                    )
                })?;
            if ctx != self.context().cu_ctx() {
                return Err(JitError::RawStreamContext {
                    kernel: self.info().name.clone(),
                    loaded: self.context().ordinal(),
                });
            }
        }
        // SAFETY: as above; the handle's context is the kernel's.
        unsafe { self.enqueue(stream, launch, args) }
    }

    /// Checks and packs `args` and enqueues the kernel on `stream`, a stream of the
    /// kernel's context.
    ///
    /// # Safety
    /// As [`LoadedKernel::launch`].
    unsafe fn enqueue(
        &self,
        stream: sys::CUstream,
        launch: Launch,
        args: &[KernelArg],
    ) -> Result<(), JitError> {
        let info = self.info();
        let shape = info.launch_shape(launch)?;
        let mut params = info.marshal(args)?;
        let ctx = self.context();
        let failed = |error| JitError::Launch {
            kernel: info.name.clone(),
            grid: shape.grid,
            block: shape.block,
            cluster: shape.cluster,
            smem_bytes: shape.smem_bytes,
            pdl: shape.pdl,
            error,
        };
        ctx.bind_to_thread().map_err(failed)?;

        let mut attrs = [attribute(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_IGNORE, ignored()); 2];
        let mut n = 0;
        if let Some(cluster) = shape.cluster {
            attrs[n] = cluster_dimension(cluster);
            n += 1;
        }
        if shape.pdl {
            attrs[n] = attribute(
                CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                CUlaunchAttributeValue {
                    programmaticStreamSerializationAllowed: 1,
                },
            );
            n += 1;
        }
        let [gx, gy, gz] = shape.grid;
        let [bx, by, bz] = shape.block;
        let config = CUlaunchConfig {
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: shape.smem_bytes,
            hStream: stream,
            attrs: attrs.as_mut_ptr(),
            numAttrs: n as u32,
        };
        let mut pointers = params.pointers();
        // SAFETY: the function is live in the stream's context (checked above); `pointers`
        // has one entry per parameter pointing at bytes of the parameter's declared size
        // (checked by `marshal`), and `params` and `attrs` outlive the call, during which
        // the driver copies them. The memory the arguments address is the caller's promise.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.function(),
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(failed)
    }
}

/// The launch attribute of a cluster of `[x, y, z]` CTAs.
pub(super) fn cluster_dimension([x, y, z]: [u32; 3]) -> CUlaunchAttribute {
    attribute(
        CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        CUlaunchAttributeValue {
            clusterDim: ClusterDim { x, y, z },
        },
    )
}

fn attribute(id: CUlaunchAttributeID, value: CUlaunchAttributeValue) -> CUlaunchAttribute {
    CUlaunchAttribute {
        id,
        pad: [0; 4],
        value,
    }
}

/// The value of an unused attribute slot.
fn ignored() -> CUlaunchAttributeValue {
    CUlaunchAttributeValue { pad: [0; 64] }
}
