//! A kernel loaded on a device: its module and function handle, plus what a launch needs
//! to know about it.

use std::ffi::{CString, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{self, CUfunction_attribute, CUjit_option, CUresult};
use cudarc::driver::{CudaContext, DriverError};

use super::JitError;
use super::args::{KernelArg, ParamBuffer};
use super::launch::cluster_dimension;
use crate::Target;
use crate::ir::{Kernel, LaunchBounds, Param};

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_SMEM_LIMIT: u32 = 48 * 1024;
/// Largest cluster the hardware guarantees without `NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
const PORTABLE_CLUSTER_CTAS: u32 = 8;
/// Bytes kept of each JIT log (errors of a failed load; the verbose info of a loaded one).
const JIT_LOG_BYTES: usize = 16 * 1024;

/// What launching a kernel needs from its trace, without the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    pub target: Target,
    pub params: Vec<Param>,
    /// `.reqntid` (the block shape) and the cluster shape.
    pub launch: LaunchBounds,
    /// Dynamic shared memory every launch passes.
    pub smem_bytes: u32,
    /// The module's PTX ISA `.version`.
    pub ptx_version: (u32, u32),
}

impl From<&Kernel> for KernelInfo {
    fn from(k: &Kernel) -> Self {
        KernelInfo {
            name: k.name.clone(),
            target: k.target,
            params: k.params.clone(),
            launch: k.launch.clone(),
            smem_bytes: k.smem_bytes,
            ptx_version: k.ptx_version(),
        }
    }
}

impl KernelInfo {
    /// Checks `args` against the parameters and packs them ([`ParamBuffer::marshal`]).
    pub fn marshal(&self, args: &[KernelArg]) -> Result<ParamBuffer, JitError> {
        ParamBuffer::marshal(&self.name, &self.params, args)
    }

    /// CTAs per cluster (1 without a cluster).
    pub fn cluster_ctas(&self) -> u32 {
        self.launch.cluster.map_or(1, |c| c.iter().product())
    }
}

/// A loaded module, unloaded when dropped.
struct Module {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; cudarc keeps them for the context's next call.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: `raw` came from cuModuleLoadDataEx and is unloaded once, here.
        self.ctx
            .record_err(unsafe { sys::cuModuleUnload(self.raw) }.result());
    }
}

/// A kernel's function handle on one device, with its launch facts. Immutable once loaded,
/// so one `LoadedKernel` can be launched from many threads at once.
pub struct LoadedKernel {
    info: KernelInfo,
    function: sys::CUfunction,
    module: Module,
    jit_log: String,
}

// SAFETY: a CUfunction and a CUmodule are context-wide handles, valid on any thread that
// makes their context current (every use here binds it first); nothing mutates them after
// loading, and the module outlives the function because both live in this struct.
unsafe impl Send for LoadedKernel {}
unsafe impl Sync for LoadedKernel {}

impl LoadedKernel {
    /// JIT-loads `ptx` (the text of `info`'s kernel) into `ctx` and sets the function
    /// attributes a launch relies on. The caller has checked that the device can run it.
    pub(crate) fn load(
        ctx: &Arc<CudaContext>,
        info: KernelInfo,
        ptx: &str,
    ) -> Result<Self, JitError> {
        let doing = || format!("loading kernel `{}`", info.name);
        ctx.bind_to_thread()
            .map_err(|e| JitError::driver("cuCtxSetCurrent", doing(), e))?;
        let image = CString::new(ptx).expect("the PTX printer writes no NUL bytes");
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut info_log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_LOG_VERBOSE,
        ];
        // Sizes and flags are passed in the pointer slot itself, as the API asks.
        let mut values = [
            log.as_mut_ptr().cast::<c_void>(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            info_log.as_mut_ptr().cast::<c_void>(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            std::ptr::without_provenance_mut(1),
        ];
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX; the log buffers outlive the call and their
        // sizes are passed alongside them.
        let loaded = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        }
        .result();
        if let Err(error) = loaded {
            return Err(JitError::ModuleLoad {
                kernel: info.name.clone(),
                target: info.target,
                error,
                log: log_text(&log),
            });
        }
        let module = Module {
            raw,
            ctx: Arc::clone(ctx),
        };
        let name = CString::new(info.name.as_str()).expect("kernel names are identifiers");
        let mut function = std::ptr::null_mut();
        // SAFETY: `module.raw` is a live module and `name` is NUL-terminated.
        unsafe { sys::cuModuleGetFunction(&mut function, module.raw, name.as_ptr()) }
            .result()
            .map_err(|e| JitError::driver("cuModuleGetFunction", doing(), e))?;
        let set = |attr, value, what: &str| {
            set_attribute(function, attr, value).map_err(|e| {
                JitError::driver("cuFuncSetAttribute", format!("{} ({what})", doing()), e)
            })
        };
        if info.smem_bytes > DEFAULT_SMEM_LIMIT {
            set(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                info.smem_bytes,
                "opting in to its dynamic shared memory",
            )?;
        }
        if info.cluster_ctas() > PORTABLE_CLUSTER_CTAS {
            set(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
                "allowing a cluster above 8 CTAs",
            )?;
        }
        Ok(LoadedKernel {
            info,
            function,
            module,
            jit_log: log_text(&info_log),
        })
    }

    pub fn info(&self) -> &KernelInfo {
        &self.info
    }

    /// The driver JIT's verbose log of this kernel's load (its ptxas `-v` lines: registers,
    /// spills, and any `C75xx` degradation; [`crate::ptxas::read_log`] reads it).
    /// The driver's JIT may be an older ptxas than the one the snapshot checks run. A
    /// module the driver serves from its disk cache has an empty log (`CUDA_CACHE_DISABLE=1`
    /// before the process starts turns the cache off).
    ///
    /// ```no_run
    /// use dsl_core::jit::Device;
    /// use dsl_core::ptxas;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let traced: dsl_core::ir::Kernel = unimplemented!();
    /// let device = Device::open(0)?;
    /// let kernel = device.load(&traced)?;
    /// let info = kernel.info();
    /// let report = ptxas::read_log(&info.name, info.target, kernel.jit_log().into())?;
    /// println!("the driver's JIT: {} registers", report.registers);
    /// # Ok(())
    /// # }
    /// ```
    pub fn jit_log(&self) -> &str {
        &self.jit_log
    }

    /// How many clusters of `cluster` CTAs of this kernel the device runs at once (the
    /// driver's `cuOccupancyMaxActiveClusters`; 0 where they cannot run). A kernel with a
    /// fixed cluster shape is asked about that shape, whatever `cluster` says.
    ///
    /// ```no_run
    /// use dsl_core::jit::Device;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let traced: dsl_core::ir::Kernel = unimplemented!();
    /// let device = Device::open(0)?;
    /// let kernel = device.load(&traced)?;
    /// let pairs = kernel.clusters_at_once([2, 1, 1])?;
    /// println!("{pairs} clusters of two of this kernel's CTAs run at once");
    /// # Ok(())
    /// # }
    /// ```
    pub fn clusters_at_once(&self, cluster: [u32; 3]) -> Result<u32, JitError> {
        let info = &self.info;
        let doing = || format!("asking how many clusters of `{}` run at once", info.name);
        let fixed = info.launch.cluster;
        let [x, y, z] = fixed.unwrap_or(cluster);
        if x * y * z > PORTABLE_CLUSTER_CTAS && fixed.is_none() {
            set_attribute(
                self.function,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
            )
            .map_err(|e| JitError::driver("cuFuncSetAttribute", doing(), e))?;
        }
        self.module
            .ctx
            .bind_to_thread()
            .map_err(|e| JitError::driver("cuCtxSetCurrent", doing(), e))?;
        let mut attr = cluster_dimension([x, y, z]);
        let [bx, by, bz] = info.launch.threads;
        let config = sys::CUlaunchConfig {
            gridDimX: x,
            gridDimY: y,
            gridDimZ: z,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: info.smem_bytes,
            hStream: std::ptr::null_mut(),
            // A fixed cluster shape is the function's own; the driver takes it from there.
            attrs: if fixed.is_some() {
                std::ptr::null_mut()
            } else {
                &mut attr
            },
            numAttrs: u32::from(fixed.is_none()),
        };
        let mut clusters = 0;
        // SAFETY: `function` is live in the bound context; `config` and `attr` outlive the
        // call, which writes one int.
        match unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, self.function, &config) }
            .result()
        {
            Ok(()) => Ok(clusters.max(0) as u32),
            // A cluster larger than this device takes cannot run: none at once.
            Err(DriverError(CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE)) => Ok(0),
            Err(e) => Err(JitError::driver("cuOccupancyMaxActiveClusters", doing(), e)),
        }
    }

    pub(crate) fn function(&self) -> sys::CUfunction {
        self.function
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.module.ctx
    }
}

/// Sets a function attribute that takes a plain integer.
fn set_attribute(
    function: sys::CUfunction,
    attr: CUfunction_attribute,
    value: u32,
) -> Result<(), DriverError> {
    // SAFETY: callers pass a live function; these attributes take plain integers.
    unsafe { sys::cuFuncSetAttribute(function, attr, value as i32) }.result()
}

/// A JIT log buffer's text, up to its NUL.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end])
        .trim_end()
        .to_string()
}
