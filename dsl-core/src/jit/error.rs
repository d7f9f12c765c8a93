//! Everything that can go wrong between a traced kernel and a finished launch, each with
//! what to do about it.

use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;

use crate::Target;
use crate::emit::ptx::EmitError;
use crate::trace::TraceError;

/// Why a device could not be opened, a kernel loaded, or a launch made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    #[error(
        "no CUDA driver on this machine (libcuda.so was not found): GPU work needs an NVIDIA \
         driver; run on a machine with an NVIDIA GPU, or run the kernel on the CPU interpreter"
    )]
    NoDriver,

    #[error(
        "the CUDA driver sees {count} device(s), so there is no device {ordinal}: check \
         `nvidia-smi` and CUDA_VISIBLE_DEVICES, or open a lower ordinal"
    )]
    NoDevice { ordinal: usize, count: usize },

    #[error(
        "the CUDA driver is version {}.{}; kestrel needs 12.0 or newer (the first with \
         cuLaunchKernelEx and PTX ISA 8.0): update the NVIDIA driver",
        .driver.0, .driver.1
    )]
    DriverUnsupported { driver: (i32, i32) },

    #[error("CUDA driver call `{call}` failed while {doing}: {}{}", describe(*.error), hint(*.error))]
    Driver {
        call: &'static str,
        doing: String,
        error: DriverError,
    },

    #[error(
        "this kernel (`{kernel}`) was built for {target} ({family}, compute capability \
         {target_cc}); the device is {device} (compute capability {device_cc}): {advice}",
        family = .target.family(),
        target_cc = cc_string(.target.compute_capability()),
        device_cc = cc_string(*.device_cc),
        advice = retarget_advice(*.device_cc)
    )]
    WrongTarget {
        kernel: String,
        target: Target,
        device: String,
        device_cc: (i32, i32),
    },

    #[error(
        "kernel `{kernel}` is PTX ISA {}.{}, which a CUDA {}.{} driver or newer loads; this \
         driver is CUDA {}.{}: update the NVIDIA driver",
        .ptx.0, .ptx.1, .needs.0, .needs.1, .driver.0, .driver.1
    )]
    DriverTooOld {
        kernel: String,
        ptx: (u32, u32),
        needs: (i32, i32),
        driver: (i32, i32),
    },

    #[error(
        "kernel `{kernel}` needs {needed} bytes of dynamic shared memory per CTA; {device} \
         allows at most {max}: shrink the kernel's shared-memory buffers (fewer stages or \
         smaller tiles)"
    )]
    SharedMemory {
        kernel: String,
        needed: u32,
        max: u32,
        device: String,
    },

    #[error(
        "the driver could not load kernel `{kernel}` for {target}: {}{}{}",
        describe(*.error), hint(*.error),
        if .log.is_empty() { String::new() } else { format!("\nJIT log:\n{}", .log) }
    )]
    ModuleLoad {
        kernel: String,
        target: Target,
        error: DriverError,
        log: String,
    },

    #[error("kernel `{kernel}` takes {expected} argument(s) ({params}); {got} were given")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
        params: String,
    },

    #[error("argument {index} of kernel `{kernel}` (`{param}`) must be {expected}; got {got}")]
    ArgKind {
        kernel: String,
        index: usize,
        param: String,
        expected: String,
        got: String,
    },

    #[error(
        "kernel `{kernel}` has {count} parameters taking {bytes} bytes; a launch marshals at \
         most {max_params} parameters in {max_bytes} bytes: pass fewer, larger parameters"
    )]
    TooManyParams {
        kernel: String,
        count: usize,
        bytes: usize,
        max_params: usize,
        max_bytes: usize,
    },

    #[error("kernel `{kernel}` cannot be launched on grid {grid:?}: {problem}")]
    BadGrid {
        kernel: String,
        grid: [u32; 3],
        problem: String,
    },

    #[error(
        "kernel `{kernel}` was loaded on device {loaded} and cannot be launched on a stream of \
         device {stream}: load it on the stream's device"
    )]
    WrongContext {
        kernel: String,
        loaded: usize,
        stream: usize,
    },

    #[error(
        "the raw stream given for kernel `{kernel}` belongs to another CUDA context than the \
         one it was loaded in (device {loaded}'s primary context): load the kernel through a \
         Device of the stream's context, or launch on a stream of device {loaded}"
    )]
    RawStreamContext { kernel: String, loaded: usize },

    #[error(
        "launching kernel `{kernel}` (grid {grid:?}, block {block:?}, cluster {cluster:?}, \
         {smem_bytes} bytes of dynamic shared memory, PDL {pdl}) failed: {}{}",
        describe(*.error), hint(*.error)
    )]
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        cluster: Option<[u32; 3]>,
        smem_bytes: u32,
        pdl: bool,
        error: DriverError,
    },

    #[error(
        "the kernel cache entry `{name}` [{key}] for {target} was built as kernel `{built}` \
         for {built_target}: the build function must trace the entry it is asked for"
    )]
    CacheMismatch {
        name: String,
        key: String,
        target: Target,
        built: String,
        built_target: Target,
    },

    #[error(transparent)]
    Trace(#[from] TraceError),

    #[error(transparent)]
    Emit(#[from] EmitError),
}

impl JitError {
    /// A failed driver call, with what was being done.
    pub(crate) fn driver(call: &'static str, doing: impl Into<String>, error: DriverError) -> Self {
        JitError::Driver {
            call,
            doing: doing.into(),
            error,
        }
    }
}

/// `CUDA_ERROR_X (the driver's sentence)`.
fn describe(error: DriverError) -> String {
    let name = error
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// What to do about the driver errors this layer can cause.
fn hint(error: DriverError) -> &'static str {
    match error.0 {
        CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            ": the driver is older than the PTX `.version`; update the NVIDIA driver"
        }
        CUresult::CUDA_ERROR_INVALID_PTX => {
            ": assemble the kernel with `dsl_core::ptxas::assemble` for ptxas's full message"
        }
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
            ": the module's `.target` does not run on this device; build it for the device's target"
        }
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
            ": the CTA needs more registers or threads than an SM has; lower `max_regs` or the \
             thread count"
        }
        CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE => {
            ": the cluster is larger than the device allows for this kernel's resources; use \
             a smaller cluster or less shared memory"
        }
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED => {
            ": the legacy default stream cannot be captured; capture a stream made with \
             `new_stream()`"
        }
        _ => "",
    }
}

fn cc_string((major, minor): (i32, i32)) -> String {
    format!("{major}.{minor}")
}

fn retarget_advice(device_cc: (i32, i32)) -> String {
    match Target::for_compute_capability(device_cc.0, device_cc.1) {
        Some(t) => format!("build it for {t}"),
        None => format!(
            "kestrel has no target for compute capability {}.{} (it builds for sm_90a and \
             sm_100a); run on a Hopper or Blackwell datacenter GPU",
            device_cc.0, device_cc.1
        ),
    }
}
