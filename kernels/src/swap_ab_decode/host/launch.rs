//! The decode kernel as a library call for serving code: device tensors in, MXFP8 out.
//!
//! [`SwapAbDecode::launch`] checks every tensor (dtype, rank, shape, strides as a layout,
//! 16-byte alignment where the kernel loads 16 bytes, outputs that neither overlap
//! themselves nor alias another tensor) and the key's limits before anything reaches the
//! GPU, and launches without allocating or synchronising, so a decode step can be captured
//! in a CUDA graph: grid (C, s_q, head groups) (a streamed key of one CTA a token: a
//! persistent grid of no more CTAs than the SMs, [`SwapAbDecode::with_sm_budget`]), 512
//! threads, cluster (C, 1, 1), PDL, dynamic shared memory, and the non-portable cluster
//! size when C > 8.
//!
//! Keys are compiled at warm-up: in the default [`CompileMode::Strict`] a launch of a key
//! that was not warmed up is refused with the key and the [`LayerShape`] to warm up;
//! [`CompileMode::OnDemand`] compiles inside `launch` (tools, tests).
//!
//! # Serving, in short
//! ```no_run
//! use std::sync::Arc;
//! use half::bf16;
//! use kernels::cudarc::driver::CudaSlice;
//! use kernels::swap_ab_decode::{DecodeArgs, DeviceTensor, LayerShape, SwapAbDecode};
//! # fn buffers() -> (CudaSlice<u8>, CudaSlice<u8>, DecodeArgs) { unimplemented!() }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Arc::new(dsl_core::jit::Device::open(0)?);
//! let decode = SwapAbDecode::new(device.clone())?;
//! // Start-up: every key a layer of this shape can hit is compiled now.
//! let shape = LayerShape {
//!     heads: 32, swa_width: 128, extra_width: 512, extra_record_bytes: 288,
//!     swa_page: 64, extra_page: 16,
//! };
//! decode.warmup(&shape)?;
//!
//! // A step: the engine's own buffers, described as the kernel reads them. Q is
//! // chunk-interleaved, [s_q, 32, HP, 16]; the guards record cudarc's read and write.
//! let (q_buf, mut out_buf, rest) = buffers();
//! let stream = device.stream();
//! let (s_q, hp) = (4, 32);
//! let q = DeviceTensor::input::<bf16, u8>(
//!     "q", &q_buf, stream, &[s_q, 32, hp, 16], &[hp * 512, hp * 16, 16, 1],
//! )?;
//! let out = DeviceTensor::output::<u8, u8>(
//!     "out_data", &mut out_buf, stream, &[s_q, 4, 4096], &[4 * 4096, 4096, 1],
//! )?;
//! let args = DecodeArgs { q: q.tensor().clone(), out_data: out.tensor().clone(), ..rest };
//! // SAFETY: every tensor addresses live device memory of its shape until the kernel ends.
//! let call = unsafe { decode.launch(stream, &args)? };
//! drop((q, out)); // after the launch is enqueued
//! # let _ = call;
//! # Ok(())
//! # }
//! ```
//!
//! An engine on another CUDA binding launches with [`SwapAbDecode::launch_on_raw_stream`];
//! one whose cudarc links libcuda at build time enables this crate's `dynamic-linking`
//! feature. Without a GPU, an engine's own tests run the same kernel on host buffers with
//! [`engine::interpret`](super::engine::interpret) (a [`DecodeProblem`] of its batch; the
//! `testing` feature adds the reference to compare against). The interpreter is slow
//! unoptimised: a crate that runs it in its debug tests sets
//! `[profile.dev.package.kernels] opt-level = 3` (and the same for `dsl-core` and `half`),
//! as this workspace does.
//!
//! [`DecodeProblem`]: super::problem::DecodeProblem

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use dsl_core::Target;
use dsl_core::ir::ElemTy;
use dsl_core::jit::{
    Device, JitError, KernelArg, Launch, LoadedKernel, MAX_TENSOR_RANK, TensorArg,
};
use dsl_core::layout::{Int, StaticOnly};
use dsl_core::trace::{E4m3, Element};

use super::dispatch::{Gpu, LayerShape, dispatch, warmup_keys};
use crate::swap_ab_decode::key::check_heads;
use crate::swap_ab_decode::query::{self, CHUNK};
use crate::swap_ab_decode::{
    CompileKey, FP4_RECORD, FP8_RECORD, HEAD_DIM, KeyError, LOG2E, ROPE_DIM, Schedule, THREADS,
    WV_GROUP_SIZE, entry_name, trace_entry,
};
use crate::swap_ab_decode::{cache, output};

/// Most tokens one launch takes: the grid's y dimension.
pub const MAX_TOKENS: usize = 65535;

/// A tensor in device memory: its address, element type, extents and strides (elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTensor {
    pub ptr: u64,
    pub elem: ElemTy,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
}

impl DeviceTensor {
    /// A tensor of `E` at `ptr` with the given extents and strides.
    pub fn new<E: Element>(ptr: u64, shape: &[usize], strides: &[usize]) -> Self {
        DeviceTensor {
            ptr,
            elem: E::ELEM,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        }
    }

    /// An input tensor of `E` over cudarc memory of `stream`'s context (a `CudaSlice` or a
    /// `CudaView`, of any element type: a `CudaSlice<u8>` holding fp8 records is a u8
    /// tensor). Refused, naming `name`, when `shape` and `strides` reach past the memory.
    /// The returned guard records the kernel's read on `stream` when dropped: keep it until
    /// the launch is enqueued.
    pub fn input<'a, E: Element, T>(
        name: &'static str,
        memory: &'a impl DevicePtr<T>,
        stream: &'a CudaStream,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Bound<'a>, DecodeError> {
        check_fits(name, E::ELEM, shape, strides, memory.num_bytes())?;
        let (ptr, access) = memory.device_ptr(stream);
        Ok(Bound {
            tensor: Self::new::<E>(ptr, shape, strides),
            _access: access,
        })
    }

    /// [`DeviceTensor::input`] for an output (a `CudaSlice` or a `CudaViewMut`): the guard
    /// records a write, so cudarc orders later reads of the memory after the kernel.
    pub fn output<'a, E: Element, T>(
        name: &'static str,
        memory: &'a mut impl DevicePtrMut<T>,
        stream: &'a CudaStream,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Bound<'a>, DecodeError> {
        check_fits(name, E::ELEM, shape, strides, memory.num_bytes())?;
        let (ptr, access) = memory.device_ptr_mut(stream);
        Ok(Bound {
            tensor: Self::new::<E>(ptr, shape, strides),
            _access: access,
        })
    }

    /// A row-major contiguous tensor of `E` at `ptr`.
    pub fn contiguous<E: Element>(ptr: u64, shape: &[usize]) -> Self {
        let mut strides = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        Self::new::<E>(ptr, shape, &strides)
    }

    fn arg<const R: usize>(&self) -> KernelArg {
        self.arg_as::<R>(self.elem)
    }

    /// The kernel argument, typed as `elem` (the MXFP8 output's bytes are the kernel's e4m3).
    fn arg_as<const R: usize>(&self, elem: ElemTy) -> KernelArg {
        let extents: [i64; R] = std::array::from_fn(|d| self.shape[d] as i64);
        let strides: [i64; R] = std::array::from_fn(|d| self.strides[d] as i64);
        let arg = match elem {
            ElemTy::Bf16 => TensorArg::new::<half::bf16, R>(self.ptr, extents, strides),
            ElemTy::U8 => TensorArg::new::<u8, R>(self.ptr, extents, strides),
            ElemTy::I32 => TensorArg::new::<i32, R>(self.ptr, extents, strides),
            ElemTy::I64 => TensorArg::new::<i64, R>(self.ptr, extents, strides),
            ElemTy::U32 => TensorArg::new::<u32, R>(self.ptr, extents, strides),
            ElemTy::F32 => TensorArg::new::<f32, R>(self.ptr, extents, strides),
            ElemTy::E4m3 => TensorArg::new::<E4m3, R>(self.ptr, extents, strides),
        };
        KernelArg::Tensor(arg)
    }
}

/// A [`DeviceTensor`] over cudarc memory, with cudarc's access guard: dropping it records
/// the kernel's read or write on the stream, which cudarc waits for before the memory is
/// used on another stream or freed.
#[must_use = "dropping the guard before the launch is enqueued records the access too early"]
pub struct Bound<'a> {
    tensor: DeviceTensor,
    _access: SyncOnDrop<'a>,
}

impl Bound<'_> {
    /// The tensor, for a field of [`DecodeArgs`].
    pub fn tensor(&self) -> &DeviceTensor {
        &self.tensor
    }
}

/// Strides the tensor's one layout ([`cache`], [`query`], [`output`]) describes for a tensor
/// named `name` of `t`'s shape and strides. Building a layout allocates, and a launch must
/// not (a decode step is captured into a CUDA graph and replayed layer after layer), so each
/// (name, shape, strides) is derived once per thread and then looked up.
fn described_strides<const N: usize>(
    name: &'static str,
    t: &DeviceTensor,
    derive: impl FnOnce() -> [usize; N],
) -> [usize; N] {
    type Entry = (&'static str, Vec<usize>, Vec<usize>, Vec<usize>);
    /// Enough for every tensor of a few layer shapes; a full table starts over.
    const CAPACITY: usize = 256;
    thread_local! {
        static DESCRIBED: std::cell::RefCell<Vec<Entry>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    DESCRIBED.with(|table| {
        let found = table
            .borrow()
            .iter()
            .find(|(n, shape, strides, _)| *n == name && *shape == t.shape && *strides == t.strides)
            .map(|(.., want)| std::array::from_fn(|i| want[i]));
        found.unwrap_or_else(|| {
            let want = derive();
            let mut table = table.borrow_mut();
            if table.len() == CAPACITY {
                table.clear();
            }
            table.push((name, t.shape.clone(), t.strides.clone(), want.to_vec()));
            want
        })
    })
}

/// A stride of a host tensor in a layout.
fn int(v: usize) -> Int<StaticOnly> {
    Int::Static(v as i64)
}

/// An extent of a host tensor in a layout whose strides are checked: an empty tensor is
/// checked as one element (the checks that need elements refuse it with their own words).
fn extent(v: usize) -> Int<StaticOnly> {
    Int::Static(v.max(1) as i64)
}

/// Refuses a shape and strides of `elem` that reach past `bytes` bytes of memory.
fn check_fits(
    name: &'static str,
    elem: ElemTy,
    shape: &[usize],
    strides: &[usize],
    bytes: usize,
) -> Result<(), DecodeError> {
    if shape.len() != strides.len() {
        return Err(bad(
            name,
            format!("shape {shape:?} and strides {strides:?} have different ranks"),
        ));
    }
    if shape.contains(&0) {
        return Ok(());
    }
    let last: usize = shape.iter().zip(strides).map(|(&e, &s)| (e - 1) * s).sum();
    let needed = (last + 1) * elem.bytes();
    if needed > bytes {
        return Err(bad(
            name,
            format!(
                "shape {shape:?} with strides {strides:?} of {} reaches byte {needed} of a \
                 {bytes}-byte buffer: allocate at least {needed} bytes or fix the shape",
                elem.name()
            ),
        ));
    }
    Ok(())
}

/// The arguments of one decode call (the seed's `__call__`).
#[derive(Clone, Debug)]
pub struct DecodeArgs {
    /// bf16 Q, chunk-interleaved, described as what it is in memory: `[s_q, 32, HP, 16]`
    /// (token, 16-dim chunk, padded head, dim in the chunk), strides
    /// `[>= HP * 512, HP * 16, 16, 1]`. A row-major `[s_q, HP, 512]` q is refused: repack it
    /// ([`QueryBuffer::pack`](crate::swap_ab_decode::query::QueryBuffer::pack) does it on the host).
    pub q: DeviceTensor,
    /// `[num_blocks, page, 528]` u8 fp8 records, strides `[>= page * 528, 528, 1]`.
    pub swa_cache: DeviceTensor,
    /// `[>= s_q, NK]` i32 slot ids, strides `[>= NK, 1]`.
    pub swa_idx: DeviceTensor,
    /// `[>= s_q]` i32.
    pub swa_len: DeviceTensor,
    /// `[num_blocks, page, 528 | 288]` u8.
    pub extra_cache: DeviceTensor,
    pub extra_idx: DeviceTensor,
    pub extra_len: DeviceTensor,
    /// `[>= s_q]` i64 query positions.
    pub positions: DeviceTensor,
    /// `[max_pos, 64]` f32: 32 cos then 32 sin per position, strides `[>= 64, 1]`; every
    /// position in `positions` must be below `max_pos` (at least 1 row).
    pub cos_sin: DeviceTensor,
    /// `[>= heads]` f32 attention-sink logits.
    pub sink: DeviceTensor,
    /// `[s_q, groups, 4096]` e4m3 (or u8), last stride 1; groups >= heads / 8. The written
    /// part (the first heads / 8 groups) must not overlap itself, `out_scale` or any input.
    pub out_data: DeviceTensor,
    /// `[s_q, groups, 32]` i32 (4 ue8m0 bytes each), any strides that do not overlap; like
    /// `out_data`, disjoint from every other tensor.
    pub out_scale: DeviceTensor,
    /// Live heads: 8, 16, 32, 64 or 128.
    pub heads: usize,
    pub softmax_scale: f32,
}

/// Why a decode call was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// An argument tensor does not fit: `tensor` is its field name in [`DecodeArgs`].
    #[error("`{tensor}`: {problem}")]
    Tensor {
        tensor: &'static str,
        problem: String,
    },
    #[error(
        "softmax_scale must be a finite positive number, got {value}: pass the model's \
         scale (1 / sqrt(576) for DeepSeek V4)"
    )]
    Scale { value: f32 },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(
        "the device has no kestrel target (compute capability {}.{}): the decode kernel runs on sm_90 or sm_100",
        .compute_capability.0, .compute_capability.1
    )]
    NoTarget { compute_capability: (i32, i32) },
    #[error(
        "compile key {key} ({entry}, from the call's shapes: {shape}) was not warmed up, and \
         this SwapAbDecode is strict: call warmup{debug_suffix}(&LayerShape {{ {shape} }}) at \
         start-up, or build it with CompileMode::OnDemand to compile inside launch (tools \
         only: a compile stalls the decode step and cannot happen inside a CUDA-graph capture)",
        entry = if *.debug { "debug entry point" } else { "production entry point" },
        debug_suffix = if *.debug { "_debug" } else { "" }
    )]
    NotWarmedUp {
        // Boxed: the key and the shape together would make every Result of a launch large.
        key: Box<CompileKey>,
        shape: LayerShape,
        debug: bool,
    },
    #[error(transparent)]
    Jit(#[from] JitError),
}

/// What [`SwapAbDecode::launch`] does with a compile key that warm-up did not compile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileMode {
    /// Refuse it with [`DecodeError::NotWarmedUp`]: the serving default, so that no decode
    /// step (or CUDA-graph capture) ever compiles.
    #[default]
    Strict,
    /// Compile it on first use: for tools and tests that launch one-off shapes.
    OnDemand,
}

fn bad(tensor: &'static str, problem: impl Into<String>) -> DecodeError {
    DecodeError::Tensor {
        tensor,
        problem: problem.into(),
    }
}

/// The SPEC's rule for `softmax_scale`, on every path (host API, problems and case files,
/// the interpreter): finite and positive.
pub fn check_softmax_scale(value: f32) -> Result<(), DecodeError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(DecodeError::Scale { value })
    }
}

/// Checks dtype and rank, returns the shape.
fn check_kind<'a>(
    name: &'static str,
    t: &'a DeviceTensor,
    elems: &[ElemTy],
    rank: usize,
) -> Result<&'a [usize], DecodeError> {
    if !elems.contains(&t.elem) {
        let want: Vec<_> = elems.iter().map(|e| e.name()).collect();
        return Err(bad(
            name,
            format!("dtype must be {}, got {}", want.join(" or "), t.elem.name()),
        ));
    }
    if t.shape.len() != rank || t.strides.len() != rank {
        return Err(bad(
            name,
            format!(
                "must have rank {rank}, got shape {:?} and strides {:?}",
                t.shape, t.strides
            ),
        ));
    }
    if t.ptr == 0 && t.shape.iter().all(|&e| e > 0) {
        return Err(bad(name, "null device pointer"));
    }
    Ok(&t.shape)
}

fn check_align(name: &'static str, what: &str, value: u64, align: u64) -> Result<(), DecodeError> {
    if value % align != 0 {
        return Err(bad(
            name,
            format!(
                "{what} ({value}) must be a multiple of {align} bytes: the kernel reads it {align} bytes at a time"
            ),
        ));
    }
    Ok(())
}

fn check_at_least(
    name: &'static str,
    what: &str,
    got: usize,
    min: usize,
) -> Result<(), DecodeError> {
    if got < min {
        return Err(bad(
            name,
            format!("{what} must be at least {min}, got {got}"),
        ));
    }
    Ok(())
}

fn check_equal(name: &'static str, what: &str, got: usize, want: usize) -> Result<(), DecodeError> {
    if got != want {
        return Err(bad(name, format!("{what} must be {want}, got {got}")));
    }
    Ok(())
}

/// Checks Q's dtype and its chunk-interleaved rank-4 shape `[s_q, 32, HP, 16]`; returns it.
fn check_query(q: &DeviceTensor) -> Result<&[usize], DecodeError> {
    if q.shape.len() == 3 && q.elem == ElemTy::Bf16 {
        return Err(bad(
            "q",
            format!(
                "shape {:?} is the row-major [s_q, HP, 512] view, but the kernel reads Q \
                 chunk-interleaved (element (h, d) at (d / 16) * HP * 16 + h * 16 + d % 16 of a \
                 token's row): describe it as [s_q, 32, HP, 16] with strides [token stride, \
                 HP * 16, 16, 1], and repack a row-major q first (QueryBuffer::pack on the host)",
                q.shape
            ),
        ));
    }
    let shape = check_kind("q", q, &[ElemTy::Bf16], 4)?;
    check_equal("q", "chunks (dim 1)", shape[1], HEAD_DIM / CHUNK)?;
    check_equal("q", "dims of a chunk (dim 3)", shape[3], CHUNK)?;
    Ok(shape)
}

/// The bytes `[first, end)` that `t` covers with extents `extents` (none when empty).
fn span(t: &DeviceTensor, extents: &[usize]) -> Option<(u64, u64)> {
    if extents.contains(&0) {
        return None;
    }
    let bytes = t.elem.bytes() as u64;
    let last: u64 = extents
        .iter()
        .zip(&t.strides)
        .map(|(&e, &s)| (e as u64 - 1) * s as u64)
        .sum();
    Some((t.ptr, t.ptr + (last + 1) * bytes))
}

/// Refuses an output whose elements (the first `extents` of it, what the kernel writes)
/// share addresses: a zero stride or strides that interleave would make two results land
/// on one element.
fn check_no_self_overlap(
    name: &'static str,
    t: &DeviceTensor,
    extents: &[usize],
) -> Result<(), DecodeError> {
    // On the stack: this runs on every launch, which allocates nothing once loaded.
    let mut dims = [(0usize, 0usize); MAX_TENSOR_RANK];
    let mut rank = 0;
    for (&e, &s) in extents.iter().zip(&t.strides) {
        if e > 1 {
            dims[rank] = (s, e);
            rank += 1;
        }
    }
    let dims = &mut dims[..rank];
    dims.sort_unstable();
    let mut covered = 1;
    for &(stride, extent) in dims.iter() {
        if stride < covered {
            return Err(bad(
                name,
                format!(
                    "strides {:?} over the written extents {extents:?} make elements share \
                     an address (a zero stride, or strides smaller than the dims inside \
                     them): give every output element its own address",
                    t.strides
                ),
            ));
        }
        covered = stride * extent;
    }
    Ok(())
}

/// Refuses an output that shares bytes with another output or with an input.
fn check_disjoint(
    outputs: &[(&'static str, Option<(u64, u64)>)],
    inputs: &[(&'static str, Option<(u64, u64)>)],
) -> Result<(), DecodeError> {
    for (i, &(name, out)) in outputs.iter().enumerate() {
        let Some((lo, hi)) = out else { continue };
        for &(other, span) in outputs[..i].iter().chain(inputs) {
            if let Some((olo, ohi)) = span
                && lo < ohi
                && olo < hi
            {
                return Err(bad(
                    name,
                    format!(
                        "bytes {lo:#x}..{hi:#x} overlap `{other}` ({olo:#x}..{ohi:#x}): the \
                         kernel writes it while other CTAs read or write the other; give \
                         each output its own buffer"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A validated call: its key, its token count and the shapes the key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedCall {
    pub key: CompileKey,
    pub tokens: usize,
    pub shape: LayerShape,
}

impl CheckedCall {
    /// This call with `schedule` in place of [`dispatch`]'s pick, refused where the key's
    /// shapes do not take it.
    pub fn with_schedule(mut self, schedule: Schedule) -> Result<CheckedCall, KeyError> {
        self.key = self.key.with_schedule(schedule);
        self.key.validate()?;
        Ok(self)
    }
}

/// Checks one cache + slot list + lengths triple; returns (page, record bytes, width).
fn check_list(
    names: [&'static str; 3],
    cache: &DeviceTensor,
    idx: &DeviceTensor,
    len: &DeviceTensor,
    tokens: usize,
    records: &[usize],
) -> Result<(usize, usize, usize), DecodeError> {
    let [cache_name, idx_name, len_name] = names;
    let shape = check_kind(cache_name, cache, &[ElemTy::U8], 3)?;
    let (page, record) = (shape[1], shape[2]);
    if !records.contains(&record) {
        let want: Vec<String> = records.iter().map(|r| r.to_string()).collect();
        return Err(bad(
            cache_name,
            format!(
                "record bytes (last dim) must be {}, got {record}",
                want.join(" or ")
            ),
        ));
    }
    let want = described_strides(cache_name, cache, || {
        cache::described_strides(&cache::layout(
            extent(shape[0]),
            page as i64,
            record as i64,
            int(cache.strides[0]),
        ))
    });
    check_equal(
        cache_name,
        "the record stride (stride[2])",
        cache.strides[2],
        want[2],
    )?;
    check_equal(
        cache_name,
        "the slot stride (stride[1])",
        cache.strides[1],
        want[1],
    )?;
    check_at_least(
        cache_name,
        "the block stride (stride[0])",
        cache.strides[0],
        page * record,
    )?;
    check_align(cache_name, "the base address", cache.ptr, 16)?;
    check_align(
        cache_name,
        "the block stride in bytes",
        cache.strides[0] as u64,
        16,
    )?;

    let ids = check_kind(idx_name, idx, &[ElemTy::I32], 2)?;
    let width = ids[1];
    check_at_least(idx_name, "rows (dim 0)", ids[0], tokens)?;
    let [_, id_stride] = described_strides(idx_name, idx, || {
        let layout = cache::slot_list_layout(extent(ids[0]), extent(width), int(idx.strides[0]));
        let flat = cache::flat_strides(&layout);
        [flat[0], flat[1]]
    });
    check_equal(idx_name, "stride[1]", idx.strides[1], id_stride)?;
    check_at_least(idx_name, "stride[0]", idx.strides[0], width)?;
    check_align(idx_name, "the base address", idx.ptr, 4)?;

    let lens = check_kind(len_name, len, &[ElemTy::I32], 1)?;
    check_at_least(len_name, "its length", lens[0], tokens)?;
    check_align(len_name, "the base address", len.ptr, 4)?;
    Ok((page, record, width))
}

impl DecodeArgs {
    /// Validates every argument and derives the compile key for `gpu` ([`dispatch`]'s
    /// pick for its target and SMs); the error names the tensor and says what is expected.
    pub fn check(&self, gpu: &Gpu) -> Result<CheckedCall, DecodeError> {
        check_softmax_scale(self.softmax_scale)?;
        let tokens = self.check_q_and_heads()?;
        let (swa_page, _, swa_width) = check_list(
            ["swa_cache", "swa_idx", "swa_len"],
            &self.swa_cache,
            &self.swa_idx,
            &self.swa_len,
            tokens,
            &[FP8_RECORD],
        )?;
        let (extra_page, extra_record, extra_width) = check_list(
            ["extra_cache", "extra_idx", "extra_len"],
            &self.extra_cache,
            &self.extra_idx,
            &self.extra_len,
            tokens,
            &[FP8_RECORD, FP4_RECORD],
        )?;

        self.check_rope(tokens)?;
        let sink = check_kind("sink", &self.sink, &[ElemTy::F32], 1)?;
        check_at_least("sink", "its length", sink[0], self.heads)?;
        check_align("sink", "the base address", self.sink.ptr, 4)?;
        self.check_outputs(tokens)?;

        let shape = LayerShape {
            heads: self.heads,
            swa_width,
            extra_width,
            extra_record_bytes: extra_record,
            swa_page,
            extra_page,
        };
        let key = dispatch(&shape, tokens, gpu)?;
        Ok(CheckedCall { key, tokens, shape })
    }

    /// `q`, and the head count it must hold; returns the tokens.
    fn check_q_and_heads(&self) -> Result<usize, DecodeError> {
        let q = check_query(&self.q)?;
        let (tokens, padded_heads) = (q[0], q[2]);
        check_heads(self.heads)?;
        check_at_least("q", "padded heads (dim 2)", padded_heads, self.heads)?;
        check_at_least("q", "tokens (dim 0)", tokens, 1)?;
        if tokens > MAX_TOKENS {
            return Err(bad(
                "q",
                format!("at most {MAX_TOKENS} tokens a launch (the grid's y), got {tokens}"),
            ));
        }
        let want = described_strides("q", &self.q, || {
            let layout = query::host_layout(tokens.max(1), padded_heads.max(1), self.q.strides[0]);
            query::described_strides(&layout)
        });
        for (dim, what) in [
            (3, "stride[3] (dims of a chunk)"),
            (2, "stride[2] (heads)"),
            (1, "stride[1] (chunks, HP * 16)"),
        ] {
            check_equal("q", what, self.q.strides[dim], want[dim])?;
        }
        check_at_least(
            "q",
            "the token stride (stride[0])",
            self.q.strides[0],
            padded_heads * HEAD_DIM,
        )?;
        check_align("q", "the base address", self.q.ptr, 16)?;
        check_align(
            "q",
            "the token stride in bytes",
            2 * self.q.strides[0] as u64,
            16,
        )?;

        Ok(tokens)
    }

    /// `positions` and the `cos_sin` table they index.
    fn check_rope(&self, tokens: usize) -> Result<(), DecodeError> {
        let positions = check_kind("positions", &self.positions, &[ElemTy::I64], 1)?;
        check_at_least("positions", "its length", positions[0], tokens)?;
        check_align("positions", "the base address", self.positions.ptr, 8)?;
        let cos_sin = check_kind("cos_sin", &self.cos_sin, &[ElemTy::F32], 2)?;
        check_equal("cos_sin", "the last dim", cos_sin[1], ROPE_DIM)?;
        let want = described_strides("cos_sin", &self.cos_sin, || {
            let layout = query::host_cos_sin_layout(cos_sin[0].max(1), self.cos_sin.strides[0]);
            query::cos_sin_described_strides(&layout)
        });
        check_equal("cos_sin", "stride[1]", self.cos_sin.strides[1], want[1])?;
        if cos_sin[0] == 0 {
            return Err(bad(
                "cos_sin",
                "has no rows: the kernel reads row positions[b] for every token; pass the \
                 table with a row for every position the batch uses",
            ));
        }
        if cos_sin[0] > u32::MAX as usize {
            return Err(bad(
                "cos_sin",
                format!(
                    "has {} rows: the kernel indexes rows with 32-bit positions, so at most {}",
                    cos_sin[0],
                    u32::MAX
                ),
            ));
        }
        check_at_least("cos_sin", "stride[0]", self.cos_sin.strides[0], ROPE_DIM)?;
        check_align("cos_sin", "the base address", self.cos_sin.ptr, 16)?;
        check_align(
            "cos_sin",
            "the row stride in bytes",
            4 * self.cos_sin.strides[0] as u64,
            16,
        )?;
        Ok(())
    }

    /// `out_data` and `out_scale`: their shapes, strides and alignment, and that no
    /// element the kernel writes aliases another or any input.
    fn check_outputs(&self, tokens: usize) -> Result<(), DecodeError> {
        let groups_needed = self.heads / WV_GROUP_SIZE;
        let out = check_kind("out_data", &self.out_data, &[ElemTy::E4m3, ElemTy::U8], 3)?;
        check_equal("out_data", "tokens (dim 0)", out[0], tokens)?;
        check_at_least("out_data", "groups (dim 1)", out[1], groups_needed)?;
        check_equal("out_data", "the last dim", out[2], WV_GROUP_SIZE * HEAD_DIM)?;
        let want = described_strides("out_data", &self.out_data, || {
            let [token_stride, group_stride] = [0, 1].map(|d| int(self.out_data.strides[d]));
            let layout =
                output::data_layout(extent(out[0]), extent(out[1]), [token_stride, group_stride]);
            output::described_data_strides(&layout)
        });
        check_equal("out_data", "stride[2]", self.out_data.strides[2], want[2])?;
        check_align("out_data", "the base address", self.out_data.ptr, 4)?;
        check_align("out_data", "stride[0]", self.out_data.strides[0] as u64, 4)?;
        check_align("out_data", "stride[1]", self.out_data.strides[1] as u64, 4)?;
        let scale = check_kind("out_scale", &self.out_scale, &[ElemTy::I32], 3)?;
        check_equal("out_scale", "tokens (dim 0)", scale[0], tokens)?;
        check_at_least("out_scale", "groups (dim 1)", scale[1], groups_needed)?;
        check_equal(
            "out_scale",
            "the last dim",
            scale[2],
            WV_GROUP_SIZE * HEAD_DIM / 128,
        )?;
        check_align("out_scale", "the base address", self.out_scale.ptr, 4)?;
        let written = |t: &DeviceTensor| [tokens, groups_needed, t.shape[2]];
        check_no_self_overlap("out_data", &self.out_data, &written(&self.out_data))?;
        check_no_self_overlap("out_scale", &self.out_scale, &written(&self.out_scale))?;
        let outputs = [
            ("out_data", span(&self.out_data, &written(&self.out_data))),
            (
                "out_scale",
                span(&self.out_scale, &written(&self.out_scale)),
            ),
        ];
        check_disjoint(&outputs, &self.input_spans())?;
        Ok(())
    }

    /// [`DecodeArgs::check`] for the debug entry point, which also writes `precast`
    /// (`[s_q, heads, 512]` f32, unit last stride, strides that give every element its own
    /// address, disjoint from every other tensor).
    pub fn check_debug(
        &self,
        gpu: &Gpu,
        precast: &DeviceTensor,
    ) -> Result<CheckedCall, DecodeError> {
        let call = self.check(gpu)?;
        let shape = check_kind("precast", precast, &[ElemTy::F32], 3)?;
        if shape != [call.tokens, call.key.heads, HEAD_DIM] {
            return Err(bad(
                "precast",
                format!(
                    "shape must be [{}, {}, 512], got {shape:?}",
                    call.tokens, call.key.heads
                ),
            ));
        }
        let want = described_strides("precast", precast, || {
            let strides = [0, 1].map(|d| int(precast.strides[d]));
            let layout = output::precast_layout(extent(shape[0]), extent(shape[1]), strides);
            output::described_precast_strides(&layout)
        });
        check_equal("precast", "stride[2]", precast.strides[2], want[2])?;
        check_no_self_overlap("precast", precast, shape)?;
        let outputs = [
            ("out_data", span(&self.out_data, &self.out_data.shape)),
            ("out_scale", span(&self.out_scale, &self.out_scale.shape)),
            ("precast", span(precast, shape)),
        ];
        check_disjoint(&outputs[2..], &outputs[..2])?;
        check_disjoint(&outputs[2..], &self.input_spans())?;
        Ok(call)
    }

    /// The bytes each input tensor covers, for the aliasing check of the outputs.
    fn input_spans(&self) -> [(&'static str, Option<(u64, u64)>); 10] {
        let all = |t: &DeviceTensor| span(t, &t.shape);
        [
            ("q", all(&self.q)),
            ("swa_cache", all(&self.swa_cache)),
            ("swa_idx", all(&self.swa_idx)),
            ("swa_len", all(&self.swa_len)),
            ("extra_cache", all(&self.extra_cache)),
            ("extra_idx", all(&self.extra_idx)),
            ("extra_len", all(&self.extra_len)),
            ("positions", all(&self.positions)),
            ("cos_sin", all(&self.cos_sin)),
            ("sink", all(&self.sink)),
        ]
    }

    /// Q as the kernel's parameter takes it: `[s_q, HP, 512]` rows of `stride[0]` elements,
    /// inside which the kernel computes the chunk-interleaved offsets itself.
    fn query_arg(&self) -> KernelArg {
        let q = &self.q;
        KernelArg::Tensor(TensorArg::new::<half::bf16, 3>(
            q.ptr,
            [q.shape[0] as i64, q.shape[2] as i64, HEAD_DIM as i64],
            [q.strides[0] as i64, HEAD_DIM as i64, 1],
        ))
    }

    fn kernel_args(&self) -> [KernelArg; 13] {
        [
            self.query_arg(),
            self.swa_cache.arg::<3>(),
            self.swa_idx.arg::<2>(),
            self.swa_len.arg::<1>(),
            self.extra_cache.arg::<3>(),
            self.extra_idx.arg::<2>(),
            self.extra_len.arg::<1>(),
            self.positions.arg::<1>(),
            self.cos_sin.arg::<2>(),
            self.sink.arg::<1>(),
            self.out_data.arg_as::<3>(ElemTy::E4m3),
            self.out_scale.arg::<3>(),
            KernelArg::F32((self.softmax_scale as f64 * LOG2E) as f32),
        ]
    }
}

/// The kernels of one instance, by key and entry point (`true`: debug).
type Loaded<T> = Mutex<HashMap<(CompileKey, bool), T>>;

/// `key`'s kernel from `loaded`; when absent, refused with the call's `shape` if `strict`
/// is given, else compiled by `compile` and kept.
fn lookup<T: Clone>(
    loaded: &Loaded<T>,
    key: &CompileKey,
    debug: bool,
    strict: Option<&LayerShape>,
    compile: impl FnOnce() -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let loaded = || loaded.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kernel) = loaded().get(&(*key, debug)) {
        return Ok(kernel.clone());
    }
    if let Some(&shape) = strict {
        return Err(DecodeError::NotWarmedUp {
            key: Box::new(*key),
            shape,
            debug,
        });
    }
    let kernel = compile()?;
    loaded().insert((*key, debug), kernel.clone());
    Ok(kernel)
}

/// The decode kernel on one device. Keys are compiled at [`warmup`] (or by [`kernel`]);
/// in the default [`CompileMode::Strict`] a launch of any other key is refused, naming
/// the key and the shapes it came from.
///
/// [`warmup`]: SwapAbDecode::warmup
/// [`kernel`]: SwapAbDecode::kernel
pub struct SwapAbDecode {
    device: Arc<Device>,
    /// The target and SMs [`dispatch`] picks for and a persistent grid is sized to
    /// ([`CompileKey::grid`]): the device's, or fewer ([`SwapAbDecode::with_sm_budget`]).
    gpu: Gpu,
    mode: CompileMode,
    /// The kernels this instance has launched, by key and entry point. The device's cache
    /// is keyed by strings (it serves any kernel); looking up a `CompileKey` here keeps a
    /// launch free of allocation once the kernel is loaded.
    loaded: Loaded<Arc<LoadedKernel>>,
}

impl SwapAbDecode {
    /// The kernel for `device`'s architecture (sm_90 -> sm_90a, sm_100 -> sm_100a).
    pub fn new(device: Arc<Device>) -> Result<Self, DecodeError> {
        let target = device.target().ok_or_else(|| DecodeError::NoTarget {
            compute_capability: device.info().compute_capability,
        })?;
        SwapAbDecode::for_target(device, target)
    }

    /// Like [`SwapAbDecode::new`] for an explicit target: building sm_100a on an sm_90
    /// device is refused with a message naming both when a kernel is loaded.
    ///
    /// The device is asked how many clusters of each size run at once
    /// ([`Gpu::with_clusters_at_once`]), so that [`dispatch`] counts a launch's rounds on
    /// this chip's GPCs.
    pub fn for_target(device: Arc<Device>, target: Target) -> Result<Self, DecodeError> {
        let info = device.info();
        let mut gpu = Gpu::new(target, info.sm_count as usize)?;
        if device.target().is_some() {
            let smem = info.max_dynamic_smem_per_block;
            gpu = gpu.with_clusters_at_once(|ctas| {
                device.clusters_at_once(ctas, THREADS as u32, smem)
            })?;
        }
        Ok(SwapAbDecode {
            gpu,
            device,
            mode: CompileMode::Strict,
            loaded: Mutex::default(),
        })
    }

    /// The same instance with streamed launches of one CTA a token sized to `sms` SMs
    /// instead of the device's: their persistent grid then holds at most `sms` CTAs (a
    /// serving engine that leaves SMs to another stream; a test that runs several tokens a
    /// CTA at a small token count). Other launches are one cluster a token, as before, and
    /// [`dispatch`] weighs the schedules with the budget: it picks clusters where a
    /// persistent grid of `sms` CTAs would take longer.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use kernels::swap_ab_decode::{DecodeError, KeyError, SwapAbDecode};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let device = Arc::new(dsl_core::jit::Device::open(0)?);
    /// // Leave all but 100 SMs to another stream's work.
    /// let decode = SwapAbDecode::new(device.clone())?.with_sm_budget(100)?;
    /// assert!(matches!(
    ///     SwapAbDecode::new(device)?.with_sm_budget(0),
    ///     Err(DecodeError::Key(KeyError::SmBudget { sms: 0, .. }))
    /// ));
    /// # let _ = decode;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_sm_budget(mut self, sms: usize) -> Result<Self, DecodeError> {
        self.gpu = self.gpu.with_persistent_sms(sms)?;
        Ok(self)
    }

    /// The same instance with `mode` for keys that were not warmed up.
    pub fn with_mode(mut self, mode: CompileMode) -> Self {
        self.mode = mode;
        self
    }

    pub fn mode(&self) -> CompileMode {
        self.mode
    }

    pub fn target(&self) -> Target {
        self.gpu.target()
    }

    /// The GPU [`dispatch`] picks schedules for: the device's SMs and the SM budget.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The loaded kernel of `key`, compiled now if it was not (a warm-up of one key).
    pub fn kernel(&self, key: &CompileKey) -> Result<Arc<LoadedKernel>, DecodeError> {
        self.entry(key, false, None)
    }

    /// The production or debug entry point's kernel of `key`; `strict` (the call's shape)
    /// refuses one that is not loaded yet instead of compiling it.
    fn entry(
        &self,
        key: &CompileKey,
        debug: bool,
        strict: Option<&LayerShape>,
    ) -> Result<Arc<LoadedKernel>, DecodeError> {
        lookup(&self.loaded, key, debug, strict, || {
            Ok(self
                .device
                .kernel(entry_name(debug), &key.to_string(), key.target, || {
                    trace_entry(key, debug)
                })?)
        })
    }

    /// The kernel a checked call launches, refused in strict mode when not warmed up.
    fn for_call(&self, call: &CheckedCall, debug: bool) -> Result<Arc<LoadedKernel>, DecodeError> {
        let strict = (self.mode == CompileMode::Strict).then_some(&call.shape);
        self.entry(&call.key, debug, strict)
    }

    /// Compiles every key a layer of this shape can hit, so no decode step compiles.
    pub fn warmup(&self, layer: &LayerShape) -> Result<Vec<CompileKey>, DecodeError> {
        self.warmup_entry(layer, false)
    }

    /// [`SwapAbDecode::warmup`] for the debug entry point ([`SwapAbDecode::launch_debug`]).
    pub fn warmup_debug(&self, layer: &LayerShape) -> Result<Vec<CompileKey>, DecodeError> {
        self.warmup_entry(layer, true)
    }

    fn warmup_entry(
        &self,
        layer: &LayerShape,
        debug: bool,
    ) -> Result<Vec<CompileKey>, DecodeError> {
        let keys = warmup_keys(layer, &self.gpu)?;
        for key in &keys {
            self.entry(key, debug, None)?;
        }
        Ok(keys)
    }

    /// Checks `args` and launches the kernel on `stream` (PDL on: it may start while the
    /// previous kernel on the stream finishes, and waits for it before reading memory).
    ///
    /// # Safety
    /// Every tensor must address device memory of its shape and strides that stays valid
    /// until the kernel has finished; the outputs must not alias the inputs.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        args: &DecodeArgs,
    ) -> Result<CheckedCall, DecodeError> {
        let call = args.check(&self.gpu)?;
        // SAFETY: as this function's contract.
        unsafe { self.launch_checked(stream, args, call) }
    }

    /// [`SwapAbDecode::launch`] with the schedule pinned instead of picked by
    /// [`dispatch`]'s model, for an engine that measured its own crossovers (and for the
    /// benchmark, which times every schedule).
    ///
    /// # Safety
    /// As [`SwapAbDecode::launch`].
    pub unsafe fn launch_with_schedule(
        &self,
        stream: &CudaStream,
        args: &DecodeArgs,
        schedule: Schedule,
    ) -> Result<CheckedCall, DecodeError> {
        let call = args.check(&self.gpu)?.with_schedule(schedule)?;
        // SAFETY: as this function's contract.
        unsafe { self.launch_checked(stream, args, call) }
    }

    /// Launches a call `args` was checked into.
    ///
    /// # Safety
    /// As [`SwapAbDecode::launch`].
    unsafe fn launch_checked(
        &self,
        stream: &CudaStream,
        args: &DecodeArgs,
        call: CheckedCall,
    ) -> Result<CheckedCall, DecodeError> {
        let kernel = self.for_call(&call, false)?;
        let grid = call.key.grid(call.tokens, self.gpu.persistent_sms());
        // SAFETY: the caller guarantees the tensors; check() matched them to the kernel.
        unsafe { kernel.launch(stream, Launch::new(grid).with_pdl(), &args.kernel_args())? };
        Ok(call)
    }

    /// [`SwapAbDecode::launch`] on a raw driver stream, for engines on another CUDA
    /// binding; the stream must belong to this instance's device context.
    ///
    /// # Safety
    /// As [`SwapAbDecode::launch`], and `stream` must be a live stream handle.
    pub unsafe fn launch_on_raw_stream(
        &self,
        stream: cudarc::driver::sys::CUstream,
        args: &DecodeArgs,
    ) -> Result<CheckedCall, DecodeError> {
        let call = args.check(&self.gpu)?;
        let kernel = self.for_call(&call, false)?;
        let grid = call.key.grid(call.tokens, self.gpu.persistent_sms());
        // SAFETY: the caller guarantees the tensors and the stream; check() matched them.
        unsafe {
            kernel.launch_on_raw_stream(
                stream,
                Launch::new(grid).with_pdl(),
                &args.kernel_args(),
            )?
        };
        Ok(call)
    }

    /// [`SwapAbDecode::launch`] of the debug entry point, which also writes the fp32 output
    /// before the cast to `precast` (`[s_q, heads, 512]` f32, contiguous); `schedule` pins
    /// the schedule as [`SwapAbDecode::launch_with_schedule`] does (`None`: [`dispatch`]'s
    /// pick).
    ///
    /// # Safety
    /// As [`SwapAbDecode::launch`], and `precast` must address `s_q * heads * 512` f32.
    pub unsafe fn launch_debug(
        &self,
        stream: &CudaStream,
        args: &DecodeArgs,
        precast: &DeviceTensor,
        schedule: Option<Schedule>,
    ) -> Result<CheckedCall, DecodeError> {
        let mut call = args.check_debug(&self.gpu, precast)?;
        if let Some(schedule) = schedule {
            call = call.with_schedule(schedule)?;
        }
        let kernel = self.for_call(&call, true)?;
        let grid = call.key.grid(call.tokens, self.gpu.persistent_sms());
        let (base, precast) = (args.kernel_args(), precast.arg::<3>());
        let kernel_args: [KernelArg; 14] =
            std::array::from_fn(|i| base.get(i).copied().unwrap_or(precast));
        // SAFETY: the caller guarantees the tensors; check() matched them to the kernel.
        unsafe { kernel.launch(stream, Launch::new(grid).with_pdl(), &kernel_args)? };
        Ok(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> LayerShape {
        LayerShape {
            heads: 16,
            swa_width: 100,
            extra_width: 512,
            extra_record_bytes: 288,
            swa_page: 64,
            extra_page: 16,
        }
    }

    #[test]
    fn a_tensor_must_fit_its_memory() {
        let fits = |shape: &[usize], strides: &[usize], bytes| {
            check_fits("q", ElemTy::Bf16, shape, strides, bytes)
        };
        assert!(fits(&[2, 32, 16, 16], &[8192, 256, 16, 1], 2 * 8192 * 2).is_ok());
        let err = fits(&[2, 32, 16, 16], &[8192, 256, 16, 1], 2 * 8192 * 2 - 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("`q`: ") && err.contains("reaches byte 32768 of a 32767-byte buffer"),
            "{err}"
        );
        assert!(fits(&[0, 32, 16, 16], &[8192, 256, 16, 1], 0).is_ok());
        assert!(fits(&[2, 32], &[1], 1 << 20).is_err());
    }

    #[test]
    fn strict_lookup_refuses_a_key_that_was_not_warmed_up() {
        let loaded: Loaded<u32> = Mutex::default();
        let key = dispatch(&shape(), 1, &Gpu::of_target(Target::Sm90a)).unwrap();
        let never = || -> Result<u32, DecodeError> { panic!("strict mode compiled") };
        let err = lookup(&loaded, &key, false, Some(&shape()), never).unwrap_err();
        assert!(matches!(err, DecodeError::NotWarmedUp { debug: false, .. }));
        let message = err.to_string();
        for part in [
            "compile key h16_nk100_ne512_nvfp4_p64x16_split64_sm90a",
            "swa_width: 100",
            "call warmup(&LayerShape",
            "CompileMode::OnDemand",
        ] {
            assert!(message.contains(part), "expected `{part}` in `{message}`");
        }
        // Warm-up compiles; the strict lookup then finds it, and the debug entry is its own.
        assert_eq!(lookup(&loaded, &key, false, None, || Ok(7)).unwrap(), 7);
        assert_eq!(
            lookup(&loaded, &key, false, Some(&shape()), never).unwrap(),
            7
        );
        let debug = lookup(&loaded, &key, true, Some(&shape()), never).unwrap_err();
        assert!(debug.to_string().contains("call warmup_debug("), "{debug}");
    }
}
