//! Finding the GPU without panicking, and what kestrel needs to know about it.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaStream, DriverError};

use super::JitError;
use super::cache::OnceMap;
use super::kernel::{KernelInfo, LoadedKernel};
use crate::Target;
use crate::ir::{Kernel, LaunchBounds};

/// Whether `libcuda` can be loaded. Every driver call goes through cudarc's dynamic loader,
/// which panics when the library is missing, so this is asked before anything else.
#[cfg(not(feature = "dynamic-linking"))]
pub fn driver_present() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only tries to dlopen the driver library, then closes it.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Whether `libcuda` can be loaded: always, when it is linked at build time (the process
/// would not have started without it).
#[cfg(feature = "dynamic-linking")]
pub fn driver_present() -> bool {
    true
}

/// Whether a CUDA driver is installed and sees at least one device.
pub fn gpu_available() -> bool {
    matches!(device_count(), Ok(n) if n > 0)
}

/// How many CUDA devices the driver sees (0 when the driver finds none).
pub fn device_count() -> Result<usize, JitError> {
    if !driver_present() {
        return Err(JitError::NoDriver);
    }
    match CudaContext::device_count() {
        Ok(n) => Ok(n.max(0) as usize),
        // A driver installed on a machine without a GPU fails `cuInit` this way.
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
        Err(e) => Err(JitError::driver("cuDeviceGetCount", "counting devices", e)),
    }
}

/// The CUDA version of the installed driver, `(13, 0)` for a 13.0 driver.
fn driver_version() -> Result<(i32, i32), JitError> {
    let mut v = 0;
    // SAFETY: writes one int; callers have checked that the driver library loads.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| JitError::driver("cuDriverGetVersion", "reading the driver version", e))?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// The oldest driver (CUDA version) that JIT-loads PTX of ISA `ptx`, from the PTX ISA
/// release table. `None` for an ISA newer than the table: the driver then decides, and its
/// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` comes back with advice.
pub fn min_driver_for_ptx(ptx: (u32, u32)) -> Option<(i32, i32)> {
    Some(match ptx {
        (7, 8) => (11, 8),
        (8, m @ 0..=5) => (12, m as i32),
        // ISA 8.6 shipped with CUDA 12.7, which was never public; 12.8 is the first driver.
        (8, 6) | (8, 7) => (12, 8),
        (8, 8) => (12, 9),
        (9, 0) => (13, 0),
        (9, 1) => (13, 1),
        _ => return None,
    })
}

/// What kestrel needs to know about a device. Plain data, so the checks made before any
/// driver call can be exercised without a GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    /// The driver's name for it (`NVIDIA H200`).
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    /// Dynamic shared memory a CTA may use once the kernel opts in (227 KiB on Hopper).
    pub max_dynamic_smem_per_block: u32,
    /// The driver's CUDA version, `(13, 0)`.
    pub driver_version: (i32, i32),
}

impl DeviceInfo {
    /// Refuses code built for `target` unless this device runs it: an architecture-specific
    /// target (`sm_90a`, `sm_100a`) runs only on its own compute capability.
    pub fn check_target(&self, kernel: &str, target: Target) -> Result<(), JitError> {
        if target.compute_capability() == self.compute_capability {
            return Ok(());
        }
        Err(JitError::WrongTarget {
            kernel: kernel.to_string(),
            target,
            device: self.name.clone(),
            device_cc: self.compute_capability,
        })
    }

    /// The kestrel target this device runs, if any (`sm_90a` for compute capability 9.0).
    pub fn target(&self) -> Option<Target> {
        Target::for_compute_capability(self.compute_capability.0, self.compute_capability.1)
    }

    /// Refuses a kernel this device cannot run, before the driver sees it: the target must
    /// be this device's ([`DeviceInfo::check_target`]), the driver must know the PTX ISA
    /// version, and the dynamic shared memory must fit a CTA.
    pub fn check_kernel(&self, kernel: &KernelInfo) -> Result<(), JitError> {
        self.check_target(&kernel.name, kernel.target)?;
        if let Some(needs) = min_driver_for_ptx(kernel.ptx_version)
            && needs > self.driver_version
        {
            return Err(JitError::DriverTooOld {
                kernel: kernel.name.clone(),
                ptx: kernel.ptx_version,
                needs,
                driver: self.driver_version,
            });
        }
        if kernel.smem_bytes > self.max_dynamic_smem_per_block {
            return Err(JitError::SharedMemory {
                kernel: kernel.name.clone(),
                needed: kernel.smem_bytes,
                max: self.max_dynamic_smem_per_block,
                device: self.name.clone(),
            });
        }
        Ok(())
    }
}

/// Cache key: kernel name, compile-key string, target.
type CacheKey = (String, String, Target);

/// One GPU: its context, a stream of its own, what it is, and the kernels loaded on it.
///
/// The stream is a non-blocking stream made for this `Device` rather than the legacy
/// default stream, because the legacy stream cannot be captured into a CUDA graph and
/// synchronises with every other blocking stream.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    kernels: OnceMap<CacheKey, Arc<LoadedKernel>>,
}

impl Device {
    /// Opens device `ordinal` (its primary context) with a fresh stream.
    ///
    /// Making that stream synchronises the context (cudarc does so for a context's first
    /// stream), which fails a stream capture in progress on the same GPU: open devices
    /// before capturing, not while another thread captures.
    pub fn open(ordinal: usize) -> Result<Device, JitError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(JitError::NoDevice { ordinal, count });
        }
        // Checked before any other call: cudarc resolves driver symbols lazily and panics on
        // one an old driver lacks (cuLaunchKernelEx appeared in 11.8).
        let driver_version = driver_version()?;
        if driver_version < (12, 0) {
            return Err(JitError::DriverUnsupported {
                driver: driver_version,
            });
        }
        let doing = format!("opening device {ordinal}");
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| JitError::driver("cuDevicePrimaryCtxRetain", doing.clone(), e))?;
        let attr = |a: CUdevice_attribute, what: &str| {
            ctx.attribute(a).map_err(|e| {
                JitError::driver(
                    "cuDeviceGetAttribute",
                    format!("reading the {what} of device {ordinal}"),
                    e,
                )
            })
        };
        let compute_capability = (
            attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                "compute capability",
            )?,
            attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                "compute capability",
            )?,
        );
        let sm_count = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "SM count",
        )? as u32;
        let max_dynamic_smem_per_block = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "opt-in shared memory per block",
        )? as u32;
        let name = ctx
            .name()
            .map_err(|e| JitError::driver("cuDeviceGetName", doing.clone(), e))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| JitError::driver("cuStreamCreate", doing, e))?;
        Ok(Device {
            ctx,
            stream,
            info: DeviceInfo {
                ordinal,
                name,
                compute_capability,
                sm_count,
                max_dynamic_smem_per_block,
                driver_version,
            },
            kernels: OnceMap::default(),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The kestrel target this device runs, if any.
    pub fn target(&self) -> Option<Target> {
        self.info.target()
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// This device's own stream (non-blocking, capturable).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Prints `kernel` as PTX and loads it, uncached. Refuses a kernel this device cannot
    /// run before calling the driver ([`DeviceInfo::check_kernel`]).
    pub fn load(&self, kernel: &Kernel) -> Result<LoadedKernel, JitError> {
        let info = KernelInfo::from(kernel);
        self.info.check_kernel(&info)?;
        let ptx = crate::emit::ptx::emit(kernel)?;
        LoadedKernel::load(&self.ctx, info, &ptx.text)
    }

    /// How many clusters of `cluster_ctas` CTAs, each of `threads` threads and `smem_bytes`
    /// bytes of dynamic shared memory, the device runs at once (the driver's
    /// `cuOccupancyMaxActiveClusters`; 0 where such a cluster cannot run). A cluster's CTAs
    /// share a GPC, so where a CTA takes a whole SM this is set by the SMs of each GPC,
    /// which differ between parts and between chips of one part, not by the SM count:
    /// what a model of a launch's rounds needs. Clusters above 8 CTAs are asked about as
    /// a launch that allows them (`NON_PORTABLE_CLUSTER_SIZE_ALLOWED`).
    ///
    /// ```no_run
    /// use dsl_core::jit::Device;
    /// # fn main() -> Result<(), dsl_core::jit::JitError> {
    /// let device = Device::open(0)?;
    /// let smem = device.info().max_dynamic_smem_per_block;
    /// let fours = device.clusters_at_once(4, 512, smem)?;
    /// println!("{fours} clusters of 4 whole-SM CTAs run at once");
    /// # Ok(())
    /// # }
    /// ```
    pub fn clusters_at_once(
        &self,
        cluster_ctas: u32,
        threads: u32,
        smem_bytes: u32,
    ) -> Result<u32, JitError> {
        let name = "kestrel_launch_probe";
        let target = self.target().unwrap_or(Target::Sm90a);
        let shape = format!("{threads}_threads_{smem_bytes}_bytes");
        let probe = self
            .kernels
            .get_or_try_init((name.to_string(), shape, target), || {
                self.load_probe(name, target, threads, smem_bytes)
                    .map(Arc::new)
            })?;
        probe.clusters_at_once([cluster_ctas, 1, 1])
    }

    /// A kernel that returns at once, of `threads` threads and `smem_bytes` of dynamic
    /// shared memory, for the driver's questions about a launch shape rather than a kernel.
    fn load_probe(
        &self,
        name: &str,
        target: Target,
        threads: u32,
        smem_bytes: u32,
    ) -> Result<LoadedKernel, JitError> {
        let info = KernelInfo {
            name: name.to_string(),
            target,
            params: Vec::new(),
            launch: LaunchBounds {
                threads: [threads, 1, 1],
                min_ctas_per_sm: None,
                max_regs: None,
                cluster: None,
            },
            smem_bytes,
            ptx_version: (8, 0),
        };
        self.info.check_kernel(&info)?;
        // sm_90 PTX: every device kestrel targets JIT-compiles it.
        let ptx = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n\n\
             .visible .entry {name}()\n.reqntid {threads}, 1, 1\n{{\n\tret;\n}}\n"
        );
        LoadedKernel::load(&self.ctx, info, &ptx)
    }

    /// The kernel `name` for compile key `key` and `target`, loaded on this device: the
    /// first call for a key runs `build` (the trace) and loads its PTX, later calls return
    /// the same kernel. Callers asking for the same key at once wait for one load; callers
    /// asking for different keys do not wait for each other. A failed build or load is not
    /// remembered, so the next call tries again.
    pub fn kernel<E: Into<JitError>>(
        &self,
        name: &str,
        key: &str,
        target: Target,
        build: impl FnOnce() -> Result<Kernel, E>,
    ) -> Result<Arc<LoadedKernel>, JitError> {
        let cache_key = (name.to_string(), key.to_string(), target);
        self.kernels.get_or_try_init(cache_key, || {
            // Refused before tracing: a kernel for another architecture cannot run here.
            self.info.check_target(name, target)?;
            let kernel = build().map_err(Into::into)?;
            if kernel.name != name || kernel.target != target {
                return Err(JitError::CacheMismatch {
                    name: name.to_string(),
                    key: key.to_string(),
                    target,
                    built: kernel.name,
                    built_target: kernel.target,
                });
            }
            self.load(&kernel).map(Arc::new)
        })
    }
}
