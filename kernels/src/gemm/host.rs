//! The GEMM from the host: shape checks, the two tensor maps, the persistent grid, and a
//! run on the GPU or the interpreter. The tensor maps are described once
//! ([`GemmShape::tensor_maps`]) and given to either back end.

use std::sync::Arc;

use dsl_core::Target;
use dsl_core::interp::{self, Arg, Launch as InterpLaunch, Memory};
use dsl_core::ir::{ElemTy, Kernel};
use dsl_core::jit::{self, Device, KernelArg, LoadedKernel, TensorArg};
use dsl_core::tensor_map::{MapSwizzle, TensorMapDesc, TensorMapError};
use half::bf16;

use super::gemm_bf16_tn;
use super::tiling::{TILE_K, Tiling};

/// Why a GEMM could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GemmError {
    #[error("GEMM shape {m} x {n} x {k}: {reason}")]
    Shape {
        m: u32,
        n: u32,
        k: u32,
        reason: &'static str,
    },
    #[error("{what} holds {got} elements; a {rows} x {cols} matrix needs {want}")]
    Buffer {
        what: &'static str,
        rows: u32,
        cols: u32,
        got: usize,
        want: usize,
    },
    #[error("{device} has no kestrel target (sm_90a or sm_100a): run the GEMM on the interpreter")]
    NoTarget { device: String },
    #[error(transparent)]
    TensorMap(#[from] TensorMapError),
    #[error(transparent)]
    Trace(#[from] dsl_core::trace::TraceError),
    #[error(transparent)]
    Jit(#[from] jit::JitError),
    #[error(transparent)]
    Interp(#[from] dsl_core::interp::InterpError),
}

/// `C[M, N] = A[M, K] . B[N, K]^T`, all row-major and densely packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl GemmShape {
    /// The shape, if the kernel takes it: every extent positive, K a multiple of 8 (the
    /// copy engine needs 16-byte row strides) and N even (C is written as bf16 pairs).
    pub fn new(m: u32, n: u32, k: u32) -> Result<Self, GemmError> {
        let reason = if m == 0 || n == 0 || k == 0 {
            Some("every extent must be positive")
        } else if k % 8 != 0 {
            Some(
                "K must be a multiple of 8 (A and B rows are copied with 16-byte strides); pad K with zeros",
            )
        } else if n % 2 != 0 {
            Some("N must be even (C is stored as pairs of bf16); pad N")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(GemmError::Shape { m, n, k, reason }),
            None => Ok(GemmShape { m, n, k }),
        }
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Output tiles of `target`'s kernel.
    pub fn tiles(&self, target: Target) -> u32 {
        let t = Tiling::for_target(target);
        self.m.div_ceil(t.tile_m) * self.n.div_ceil(t.tile_n)
    }

    /// The persistent grid: one CTA per SM, or one per tile when there are fewer tiles.
    pub fn grid(&self, target: Target, sm_count: u32) -> u32 {
        self.tiles(target).min(sm_count.max(1))
    }

    /// The tensor maps of A at `a` and B at `b` (device or interpreter addresses).
    pub fn tensor_maps(
        &self,
        target: Target,
        a: u64,
        b: u64,
    ) -> Result<(TensorMapDesc, TensorMapDesc), GemmError> {
        let t = Tiling::for_target(target);
        let k = self.k as u64;
        let map = |addr, rows: u32, box_rows: u32| {
            TensorMapDesc::tiled(
                ElemTy::Bf16,
                addr,
                &[k, rows as u64],
                &[k * 2],
                &[TILE_K, box_rows],
                MapSwizzle::B128,
            )
        };
        Ok((map(a, self.m, t.tile_m)?, map(b, self.n, t.tile_n)?))
    }
}

/// That a host buffer holds a `rows x cols` matrix.
fn check_buffer(what: &'static str, rows: u32, cols: u32, got: usize) -> Result<(), GemmError> {
    let want = rows as usize * cols as usize;
    if got != want {
        return Err(GemmError::Buffer {
            what,
            rows,
            cols,
            got,
            want,
        });
    }
    Ok(())
}

/// The f64 sum of products in K order, rounded once to f32 and then to bf16: what the
/// kernel computes whenever every partial sum is exact in f32 (the test operands are
/// chosen so), and a tight reference otherwise.
pub fn reference(shape: GemmShape, a: &[bf16], b: &[bf16]) -> Vec<bf16> {
    let (m, n) = (shape.m as usize, shape.n as usize);
    (0..m * n)
        .map(|e| reference_element(shape, a, b, e / n, e % n))
        .collect()
}

/// Element `(i, j)` of [`reference()`], for checking samples of a large product.
pub fn reference_element(shape: GemmShape, a: &[bf16], b: &[bf16], i: usize, j: usize) -> bf16 {
    let k = shape.k as usize;
    let dot: f64 = a[i * k..][..k]
        .iter()
        .zip(&b[j * k..][..k])
        .map(|(x, y)| x.to_f64() * y.to_f64())
        .sum();
    bf16::from_f32(dot as f32)
}

/// Runs the kernel for `target` on the CPU interpreter over `ctas` persistent CTAs.
pub fn run_interpreter(
    target: Target,
    shape: GemmShape,
    a: &[bf16],
    b: &[bf16],
    ctas: u32,
) -> Result<Vec<bf16>, GemmError> {
    check_buffer("A", shape.m, shape.k, a.len())?;
    check_buffer("B", shape.n, shape.k, b.len())?;
    let kernel = gemm_bf16_tn(target)?;
    let mut mem = Memory::new();
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let ab = mem.alloc_from("a", &bits(a));
    let bb = mem.alloc_from("b", &bits(b));
    let cb = mem.alloc_from("c", &vec![0x7fc0u16; shape.m as usize * shape.n as usize]);
    let (amap, bmap) = shape.tensor_maps(target, mem.address(ab), mem.address(bb))?;
    let args = [
        Arg::TensorMap(amap),
        Arg::TensorMap(bmap),
        Arg::contiguous(cb, &[shape.m as i64, shape.n as i64]),
        Arg::U32(shape.k),
    ];
    let grid = shape.grid(target, ctas);
    interp::run(&kernel, &mut mem, &args, &InterpLaunch::grid([grid, 1, 1]))?;
    Ok(mem
        .read::<u16>(cb)
        .into_iter()
        .map(bf16::from_bits)
        .collect())
}

/// A GEMM bound to its buffers ([`GemmGpu::bind`]): the kernel's arguments and grid.
#[derive(Clone, Copy, Debug)]
pub struct GemmCall {
    args: [KernelArg; 4],
    grid: u32,
}

/// The kernel loaded on a GPU.
pub struct GemmGpu {
    device: Arc<Device>,
    kernel: LoadedKernel,
    target: Target,
}

impl GemmGpu {
    /// Traces, assembles and loads the kernel for `device`'s target.
    pub fn load(device: Arc<Device>) -> Result<Self, GemmError> {
        let target = device.target().ok_or_else(|| GemmError::NoTarget {
            device: device.info().name.clone(),
        })?;
        let traced: Kernel = gemm_bf16_tn(target)?;
        let kernel = device.load(&traced)?;
        Ok(GemmGpu {
            device,
            kernel,
            target,
        })
    }

    pub fn target(&self) -> Target {
        self.target
    }

    /// `C = A . B^T` bound to device buffers at `a`, `b` and `c` holding `M x K`, `N x K`
    /// and `M x N` bf16 values: the tensor maps are encoded here, once, so that
    /// [`GemmGpu::launch`] makes no driver call but the launch.
    pub fn bind(&self, shape: GemmShape, a: u64, b: u64, c: u64) -> Result<GemmCall, GemmError> {
        let (amap, bmap) = shape.tensor_maps(self.target, a, b)?;
        Ok(GemmCall {
            args: [
                KernelArg::TensorMap(jit::encode_tensor_map(&amap)?),
                KernelArg::TensorMap(jit::encode_tensor_map(&bmap)?),
                KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
                    c,
                    [shape.m as i64, shape.n as i64],
                )),
                KernelArg::U32(shape.k),
            ],
            grid: shape.grid(self.target, self.device.info().sm_count),
        })
    }

    /// Enqueues `call` on `stream`.
    ///
    /// # Safety
    /// The buffers `call` was bound to must be live device allocations of at least their
    /// sizes until the kernel has completed, and `c` must not overlap `a` or `b`.
    pub unsafe fn launch(
        &self,
        stream: &Arc<cudarc::driver::CudaStream>,
        call: &GemmCall,
    ) -> Result<(), GemmError> {
        // SAFETY: the caller guarantees the buffers; the arguments match the parameters
        // (checked by the launch).
        unsafe {
            self.kernel
                .launch(stream, jit::Launch::new([call.grid, 1, 1]), &call.args)
        }?;
        Ok(())
    }
}

/// Operands whose every product and partial sum is exact in f32 for K up to 2^14 (multiples
/// of 1/4 in [-2, 2]), so the kernel must match [`reference()`] bit for bit whatever its
/// summation order. `seed` varies the values.
pub fn exact_operands(shape: GemmShape, seed: u64) -> (Vec<bf16>, Vec<bf16>) {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let quarter = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 59) as i32 - 16;
        bf16::from_f32(quarter.clamp(-8, 8) as f32 / 4.0)
    };
    let a = (0..shape.m as usize * shape.k as usize)
        .map(|_| next())
        .collect();
    let b = (0..shape.n as usize * shape.k as usize)
        .map(|_| next())
        .collect();
    (a, b)
}
