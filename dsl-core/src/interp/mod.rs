//! The CPU interpreter: runs a traced [`Kernel`] on host buffers, tcgen05/TMEM and wgmma
//! included, with every access checked like compute-sanitizer and every deadlock reported.
//!
//! ```
//! use dsl_core::Target;
//! use dsl_core::arch::memory::{load, store};
//! use dsl_core::arch::thread::thread_idx_x;
//! use dsl_core::interp::{Arg, Launch, Memory, run};
//! use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
//!
//! let kernel = trace_kernel("double", Target::Sm100a, || {
//!     threads(32, 1, 1);
//!     let x = Tensor::<f32, 1>::declare("x");
//!     let at = x.base() + thread_idx_x().mul_wide(4);
//!     let v: Val<f32> = load(at);
//!     store(at, v * 2.0);
//! })
//! .unwrap();
//! let mut mem = Memory::new();
//! let x = mem.alloc_from("x", &(0..32).map(|i| i as f32).collect::<Vec<_>>());
//! let stats = run(&kernel, &mut mem, &[Arg::contiguous(x, &[32])], &Launch::grid([1, 1, 1]))
//!     .unwrap();
//! assert_eq!(mem.read::<f32>(x)[3], 6.0);
//! assert_eq!(stats.lane_instructions > 0, true);
//! ```
//!
//! # Execution model
//! Clusters run one after another. Inside a cluster every CTA and warp exists at once; each
//! warp is a coroutine with its own program counter over the compiled code, an active mask
//! and a reconvergence stack for the structured `If`/`Loop` (a uniform branch skips the
//! untaken side). A warp runs until it blocks (`bar.sync`, an mbarrier wait, a cluster
//! wait, a warpgroup rendezvous, a named barrier, a `setmaxnreg.inc` the register pool
//! cannot cover, a full TMEM) or exits; warps take turns in a fixed order,
//! so runs are deterministic. When a whole round makes no progress, the run stops with
//! [`InterpError::Deadlock`] listing every blocked warp.
//!
//! # Address spaces
//! - Global: buffers of a [`Memory`] at synthetic addresses from `0x7f00_0000_0000`, 256-byte
//!   aligned, 1 MiB of unmapped space between neighbours.
//! - Shared: each CTA's dynamic shared memory sits at shared::cta addresses
//!   `[SMEM_BASE, SMEM_BASE + smem_bytes)`; `SMEM_BASE` is 0x400, so it is 1024-aligned as
//!   the 128-byte swizzles need, and address 0 is never valid.
//! - Distributed shared: `mapa` maps shared::cta address `a` of rank `r` to the
//!   shared::cluster address `(r + 1) << 24 | a`; addresses below `1 << 24` are the
//!   executing CTA's own window (shared::cta is part of shared::cluster).
//! - Tensor memory: per CTA, 128 lanes x 512 columns of 32-bit cells.
//! - Parameters: `cvta.param` of parameter `i` is [`PARAM_BASE`] `+ i *` [`PARAM_STRIDE`];
//!   only the tensor-map operand of TMA ops reads through it (any other access faults).
//!
//! Asynchronous ops (tcgen05.mma, tcgen05.ld, wgmma) execute when issued; what the program
//! may observe of their asynchrony is checked instead: registers of a `tcgen05.ld` or
//! `wgmma` read before `tcgen05.wait::ld` / `wgmma.wait_group`, shared memory an MMA reads
//! written without `fence.proxy.async` and a barrier, or overwritten before the storing
//! thread waited for the MMA's commit phase. Bulk and TMA loads also run when issued and
//! complete their bytes on the mbarrier at once; a thread that touches the data before it
//! observed that mbarrier phase (a successful `try_wait.parity`), or a copy over operands
//! an in-flight MMA reads, is a fault. `cp.async` reads when issued and lands at its
//! thread's `cp.async.wait_group`; its destination is off limits until then.
//!
//! # Registers
//! [`Program::compile`] gives every virtual register a live interval over the linearised
//! code and packs the intervals into slots (a linear-scan allocation), so a warp's register
//! file is `slots x 32 lanes x 8 bytes`, sized by the peak of simultaneously live registers
//! rather than by the trace's register count. Immediates become constant slots.
//!
//! # What is checked
//! Every global, shared, distributed-shared and tensor-memory access against its buffer or
//! window, alignment to the full access size, reads of never-written shared memory (loads and
//! MMA operands) and tensor memory (MMA accumulation; values loaded by `tcgen05.ld` from
//! never-written cells poison their registers and fault when used), divergent `bar.sync` and
//! `.aligned` cluster barriers, warp collectives with inactive lanes, mbarrier misuse, the
//! TMEM lane quadrant of each warp, TMEM allocation and leaks, every descriptor field, one
//! issuing thread per `tcgen05.mma`, integer division by zero, deadlocks and runaway loops;
//! tensor maps decoded from the parameter bytes at every TMA copy, box bounds, copy
//! alignment (a swizzled box starts a swizzle pattern), mbarrier tx-count range, TMA stores
//! of shared memory not made visible with `fence.proxy.async`, bulk stores not waited for
//! at exit, named-barrier counts and double arrivals, and `setmaxnreg` budgets; and
//! shared-memory races (`race.rs`): accesses of the same bytes by two warps, one a write,
//! that no barrier, named barrier, mbarrier phase or cluster barrier orders, whichever
//! order the interpreter happened to run them in.
//!
//! # What is counted
//! With [`Options::shared_wavefronts`], each `ld.shared` / `st.shared` of the executing CTA's
//! own shared memory: its warp executions, wavefronts and conflict-free ideal in Nsight
//! Compute's model ([`SharedAccess`]; the `banks` module says how), so that bank conflicts
//! show without a GPU. MMA operand reads, copies and distributed shared memory are not
//! counted.
//!
//! # Where the interpreter departs from the hardware
//! - MMA arithmetic: the products are exact and summed in f64, then rounded once to the
//!   accumulator format; the tensor cores' internal order and rounding are not public, so
//!   the last bit of an element may differ from a GPU's.
//! - `ex2.approx.ftz.f32` is 2^x in f64 rounded to f32 (within the documented 2 ulp).
//! - f32 arithmetic returns the canonical NaN 0x7fffffff (PTX: "an unspecified NaN"); bf16
//!   and f16 results use 0x7fff, e4m3 0x7f.
//! - Memory is sequentially consistent and warps run until they block, in a fixed order:
//!   weak-memory effects and other interleavings are not explored, fences have no effect
//!   on data, and clusters run one after another. The race check stands in for the other
//!   interleavings of shared memory; it orders a warp's lanes by program order (no race
//!   between lanes of one warp is reported), leaves MMA operand reads to the async-proxy
//!   check, and keeps one record a 4-byte word (a race between different bytes of a word
//!   written by two warps may go unreported; none is invented).
//! - A descriptor base offset other than 0, the absolute-address LBO mode (sm_103a) and
//!   128-byte swizzling with 32-byte atoms are refused rather than guessed.
//! - `tcgen05.alloc` takes the lowest free range aligned to its size; the hardware's choice
//!   is not documented, so kernels must use the address it writes.
//! - Integer division by zero faults instead of returning an unspecified value; an mbarrier
//!   object is opaque (ordinary loads and stores of it fault).
//! - wgmma operand reads are checked for proxy fences but not tracked in flight, and the
//!   `wgmma.fence` before touching accumulators is not checked.
//! - A TMA store's shared-memory source is read when the store issues; rewriting it before
//!   `cp.async.bulk.wait_group.read` is not detected. Data a copy wrote is tracked per
//!   4-byte word (an ordinary store of part of a word forgets the whole word).
//! - Register budgets are bookkeeping only: `setmaxnreg` checks counts and the 64K pool of
//!   the CTA, but code using more registers than its budget is not detected here.

mod access;
mod alu;
mod banks;
mod barriers;
mod compile;
mod copy;
mod cvt;
mod debug;
mod desc;
mod error;
mod machine;
mod matrix;
mod mbarrier;
mod memory;
mod proxy;
mod race;
mod roles;
mod tcgen05;
mod wgmma;

use std::time::Duration;

pub use banks::SharedAccess;
pub use compile::Program;
pub use debug::{
    Snapshot, SnapshotData, SnapshotRequest, SnapshotWhat, StagePoint, TraceEntry, TraceRequest,
};
pub use error::{BlockedWarp, CtaId, Deadlock, Fault, FaultKind, InterpError, Site};
pub use memory::{BufferId, Memory, Plain};

use crate::ir::{Kernel, ParamKind, Ty, tensor_param};

/// The shared::cta address of the first byte of dynamic shared memory.
pub const SMEM_BASE: u32 = 0x400;
/// Where parameter space sits in the generic address space (`cvta.param`): parameter `i`
/// at `PARAM_BASE + i * PARAM_STRIDE`. Below every global buffer and far from the shared
/// windows, so an ordinary access through it faults and a TMA op can name the parameter.
pub const PARAM_BASE: u64 = 0x7e00_0000_0000;
/// The distance between two parameters' addresses: a tensor map's 128 bytes, rounded up.
pub const PARAM_STRIDE: u64 = 256;

pub(crate) fn param_address(param: u32) -> u64 {
    PARAM_BASE + param as u64 * PARAM_STRIDE
}

/// The most dynamic shared memory a CTA may have on sm_90/sm_100 (227 KiB).
pub const MAX_SMEM_BYTES: u32 = 227 * 1024;

/// A kernel argument, in the order of [`Kernel::params`].
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    U32(u32),
    S32(i32),
    U64(u64),
    S64(i64),
    F32(f32),
    Pred(bool),
    Tensor(TensorArg),
    /// A TMA tensor map whose global address is in this run's [`Memory`].
    TensorMap(crate::tensor_map::TensorMapDesc),
}

/// A tensor argument: a buffer (from a byte offset) with extents and strides in elements,
/// laid out in the parameter as `ir::tensor_param` says.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorArg {
    pub buffer: BufferId,
    pub byte_offset: u64,
    pub extents: Vec<i64>,
    pub strides: Vec<i64>,
}

impl Arg {
    /// A tensor over the whole buffer with the given extents and strides (in elements).
    pub fn tensor(buffer: BufferId, extents: &[i64], strides: &[i64]) -> Arg {
        Arg::Tensor(TensorArg {
            buffer,
            byte_offset: 0,
            extents: extents.to_vec(),
            strides: strides.to_vec(),
        })
    }

    /// A row-major contiguous tensor.
    pub fn contiguous(buffer: BufferId, extents: &[i64]) -> Arg {
        let mut strides = vec![1; extents.len()];
        for d in (0..extents.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * extents[d + 1];
        }
        Arg::tensor(buffer, extents, &strides)
    }

    fn kind(&self) -> &'static str {
        match self {
            Arg::U32(_) => "u32",
            Arg::S32(_) => "s32",
            Arg::U64(_) => "u64",
            Arg::S64(_) => "s64",
            Arg::F32(_) => "f32",
            Arg::Pred(_) => "pred",
            Arg::Tensor(_) => "tensor",
            Arg::TensorMap(_) => "tensor map",
        }
    }
}

/// How to launch: the grid, the cluster shape and the dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    /// `None`: the kernel's fixed cluster shape, or 1x1x1.
    pub cluster: Option<[u32; 3]>,
    /// `None`: exactly the kernel's `smem_bytes`.
    pub smem_bytes: Option<u32>,
}

impl Launch {
    pub fn grid(grid: [u32; 3]) -> Self {
        Launch {
            grid,
            cluster: None,
            smem_bytes: None,
        }
    }

    pub fn cluster(self, cluster: [u32; 3]) -> Self {
        Launch {
            cluster: Some(cluster),
            ..self
        }
    }

    pub fn smem(self, bytes: u32) -> Self {
        Launch {
            smem_bytes: Some(bytes),
            ..self
        }
    }
}

/// Checks and debug hooks of a run.
#[derive(Clone, Debug)]
pub struct Options {
    pub trace: Option<TraceRequest>,
    pub snapshots: Vec<SnapshotRequest>,
    /// Check the async proxy: shared memory read by an MMA must have been made visible with
    /// `fence.proxy.async` and a barrier, and must not be overwritten before the MMA's
    /// commit phase completed. Costs 8 bytes of bookkeeping per byte of shared memory.
    pub async_proxy_check: bool,
    /// Check shared memory for races, as compute-sanitizer's racecheck does: two accesses
    /// of the same bytes by different warps, one of them a write, that no barrier,
    /// mbarrier or cluster barrier orders. Costs 36 bytes of bookkeeping per word of shared
    /// memory and a clock per pair of warps of a cluster.
    ///
    /// ```
    /// use dsl_core::Target;
    /// use dsl_core::arch::memory::{load, store};
    /// use dsl_core::arch::thread::thread_idx_x;
    /// use dsl_core::interp::{Arg, FaultKind, Launch, Memory, Options, run_with};
    /// use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, threads, trace_kernel};
    ///
    /// // Each thread reads the word of its lane in warp 0, with no barrier.
    /// let kernel = trace_kernel("handoff", Target::Sm90a, || {
    ///     threads(64, 1, 1);
    ///     let out = Tensor::<u32, 1>::declare("out");
    ///     let buf = smem_alloc("buf", 256, 16);
    ///     let tid = thread_idx_x();
    ///     store(buf.addr() + tid * 4u32, tid);
    ///     let v: Val<u32> = load(buf.addr() + (tid % 32u32) * 4u32);
    ///     store(out.base() + tid.mul_wide(4), v);
    /// })
    /// .unwrap();
    /// let mut mem = Memory::new();
    /// let out = mem.alloc("out", 256);
    /// let args = [Arg::contiguous(out, &[64])];
    /// let e = run_with(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1]), &Options::default())
    ///     .unwrap_err();
    /// assert_eq!(e.fault().unwrap().kind, FaultKind::SharedRace);
    /// ```
    pub race_check: bool,
    /// Warp-instructions one cluster may execute before the run stops with
    /// [`FaultKind::Watchdog`] (a runtime loop that never ends would otherwise hang the
    /// run). The default, 2^28, is ~30x what a 16-CTA cluster of the decode kernel runs and
    /// about ten seconds of interpretation.
    pub max_warp_instructions: u64,
    /// Called after each cluster finishes: a long run (a large batch on the interpreter
    /// takes minutes) can say how far it is.
    pub progress: Option<fn(&Progress)>,
    /// Count the shared-memory wavefronts and bank conflicts of every `ld.shared` and
    /// `st.shared` ([`RunStats::shared_accesses`]).
    pub shared_wavefronts: bool,
    /// Run the grid's clusters last to first instead of first to last. Clusters run one
    /// after another here, so a kernel whose CTAs hand work to each other through global
    /// memory (an [`atomic_add`](crate::arch::memory::atomic_add) count) sees one order a
    /// run; running both shows that its result does not depend on which CTA comes last.
    ///
    /// ```
    /// use dsl_core::Target;
    /// use dsl_core::arch::memory::{AtomOrder, atomic_add, store};
    /// use dsl_core::arch::thread::block_idx_x;
    /// use dsl_core::interp::{Arg, Launch, Memory, Options, run_with};
    /// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
    ///
    /// // Each of four one-thread CTAs counts itself into word 0 and keeps its count at word
    /// // 1 + its index.
    /// let kernel = trace_kernel("arrivals", Target::Sm90a, || {
    ///     threads(1, 1, 1);
    ///     let x = Tensor::<u32, 1>::declare("x");
    ///     let before = atomic_add(x.base(), Val::<u32>::constant(1), AtomOrder::Relaxed);
    ///     store(x.base() + (block_idx_x() + 1u32) * 4u32, before);
    /// })
    /// .unwrap();
    /// for (clusters_last_first, counts) in [(false, [0, 1, 2, 3]), (true, [3, 2, 1, 0])] {
    ///     let mut mem = Memory::new();
    ///     let x = mem.alloc_from("x", &[0u32; 5]);
    ///     let options = Options { clusters_last_first, ..Options::default() };
    ///     let launch = Launch::grid([4, 1, 1]);
    ///     run_with(&kernel, &mut mem, &[Arg::contiguous(x, &[5])], &launch, &options).unwrap();
    ///     assert_eq!(mem.read::<u32>(x)[1..], counts);
    /// }
    /// ```
    pub clusters_last_first: bool,
}

/// How far a run is, as reported to [`Options::progress`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub clusters_done: u32,
    pub clusters_total: u32,
    pub elapsed: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            trace: None,
            snapshots: Vec::new(),
            async_proxy_check: true,
            race_check: true,
            max_warp_instructions: 1 << 28,
            progress: None,
            shared_wavefronts: false,
            clusters_last_first: false,
        }
    }
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct RunStats {
    /// Instructions executed, counted once per active lane.
    pub lane_instructions: u64,
    /// Instructions executed, counted once per warp.
    pub warp_instructions: u64,
    pub wall: Duration,
    pub clusters: u32,
    pub ctas: u32,
    /// Register file bytes per warp (slots x 32 lanes x 8 bytes).
    pub register_bytes_per_warp: usize,
    pub trace: Vec<TraceEntry>,
    pub snapshots: Vec<Snapshot>,
    /// With [`Options::shared_wavefronts`]: each `ld.shared` / `st.shared` that ran, in
    /// program order, with its wavefronts.
    pub shared_accesses: Vec<SharedAccess>,
}

impl RunStats {
    pub fn lane_instructions_per_second(&self) -> f64 {
        self.lane_instructions as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Compiles and runs `kernel` with default [`Options`].
pub fn run(
    kernel: &Kernel,
    mem: &mut Memory,
    args: &[Arg],
    launch: &Launch,
) -> Result<RunStats, InterpError> {
    run_with(kernel, mem, args, launch, &Options::default())
}

/// Compiles and runs `kernel`.
pub fn run_with(
    kernel: &Kernel,
    mem: &mut Memory,
    args: &[Arg],
    launch: &Launch,
    opts: &Options,
) -> Result<RunStats, InterpError> {
    Program::compile(kernel)?.run(mem, args, launch, opts)
}

impl Program {
    /// Runs the compiled kernel; `mem` holds the buffers before and after.
    pub fn run(
        &self,
        mem: &mut Memory,
        args: &[Arg],
        launch: &Launch,
        opts: &Options,
    ) -> Result<RunStats, InterpError> {
        let params = bind_params(&self.kernel, mem, args)?;
        machine::run(self, mem, params, launch, opts)
    }
}

/// The bytes of each parameter, after checking the arguments against the parameters.
fn bind_params(kernel: &Kernel, mem: &Memory, args: &[Arg]) -> Result<Vec<Vec<u8>>, InterpError> {
    let err = |message: String| InterpError::Args {
        kernel: kernel.name.clone(),
        message,
    };
    if args.len() != kernel.params.len() {
        let names: Vec<_> = kernel.params.iter().map(|p| p.name.as_str()).collect();
        return Err(err(format!(
            "the kernel takes {} parameter(s) ({}), got {} argument(s)",
            kernel.params.len(),
            names.join(", "),
            args.len()
        )));
    }
    let mut out = Vec::with_capacity(args.len());
    for (i, (p, a)) in kernel.params.iter().zip(args).enumerate() {
        let mismatch = |want: String| {
            err(format!(
                "parameter #{i} `{}` is {want}, got a {} argument",
                p.name,
                a.kind()
            ))
        };
        let bytes = match (p.kind, a) {
            (ParamKind::Scalar(Ty::U32 | Ty::B32), Arg::U32(v)) => v.to_le_bytes().to_vec(),
            (ParamKind::Scalar(Ty::S32), Arg::S32(v)) => v.to_le_bytes().to_vec(),
            (ParamKind::Scalar(Ty::U64), Arg::U64(v)) => v.to_le_bytes().to_vec(),
            (ParamKind::Scalar(Ty::S64), Arg::S64(v)) => v.to_le_bytes().to_vec(),
            (ParamKind::Scalar(Ty::F32), Arg::F32(v)) => v.to_le_bytes().to_vec(),
            (ParamKind::Scalar(Ty::Pred), Arg::Pred(v)) => vec![*v as u8, 0],
            (ParamKind::Scalar(ty), _) => return Err(mismatch(format!("a {} scalar", ty.ptx()))),
            (ParamKind::Tensor { elem, rank }, Arg::Tensor(t)) => {
                let rank = rank as usize;
                if t.extents.len() != rank || t.strides.len() != rank {
                    return Err(err(format!(
                        "parameter #{i} `{}` is a rank-{rank} {} tensor, got {} extent(s) and {} \
                         stride(s)",
                        p.name,
                        elem.name(),
                        t.extents.len(),
                        t.strides.len()
                    )));
                }
                if let Some(d) = (0..rank).find(|&d| t.extents[d] < 0 || t.strides[d] < 0) {
                    return Err(err(format!(
                        "parameter #{i} `{}`: dimension {d} has extent {} and stride {}; both \
                         must be non-negative",
                        p.name, t.extents[d], t.strides[d]
                    )));
                }
                let len = mem.len(t.buffer) as u64;
                if t.extents.iter().all(|&e| e > 0) {
                    let last: i64 = (0..rank).map(|d| (t.extents[d] - 1) * t.strides[d]).sum();
                    let end = t.byte_offset + (last as u64 + 1) * elem.bytes() as u64;
                    if end > len {
                        return Err(err(format!(
                            "parameter #{i} `{}` spans bytes [{}, {end}) of buffer `{}`, which \
                             has {len} bytes",
                            p.name,
                            t.byte_offset,
                            mem.name(t.buffer)
                        )));
                    }
                }
                let mut bytes = vec![0u8; p.kind.bytes()];
                let addr = mem.address(t.buffer) + t.byte_offset;
                tensor_param::write(&mut bytes, addr, &t.extents[..rank], &t.strides[..rank]);
                bytes
            }
            (ParamKind::Tensor { elem, rank }, _) => {
                return Err(mismatch(format!("a rank-{rank} {} tensor", elem.name())));
            }
            (ParamKind::TensorMap { elem, rank }, Arg::TensorMap(m)) => {
                if m.elem() != elem || m.rank() != rank as usize {
                    return Err(err(format!(
                        "parameter #{i} `{}` is a rank-{rank} {} tensor map, got a {m}",
                        p.name,
                        elem.name()
                    )));
                }
                m.to_interp_bytes().to_vec()
            }
            (ParamKind::TensorMap { elem, rank }, _) => {
                return Err(mismatch(format!(
                    "a rank-{rank} {} tensor map",
                    elem.name()
                )));
            }
        };
        out.push(bytes);
    }
    Ok(out)
}
