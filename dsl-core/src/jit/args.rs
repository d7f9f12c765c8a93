//! Kernel arguments: a typed list checked against the kernel's parameters and packed, on
//! the stack, into the bytes each `.param` holds.

use std::ffi::c_void;
use std::fmt;

use crate::ir::{ElemTy, Param, ParamKind, Ty, tensor_param};
use crate::trace::Element;

use super::JitError;
use super::tensor_map::EncodedTensorMap;

/// Highest tensor rank an argument can carry inline.
pub const MAX_TENSOR_RANK: usize = 8;
/// Most parameters one launch marshals.
pub const MAX_PARAMS: usize = 64;
/// Most parameter bytes one launch marshals: the classic 4 KiB kernel-parameter limit,
/// which every driver kestrel runs on accepts.
pub const MAX_PARAM_BYTES: usize = 4096;

/// One kernel argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelArg {
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    Tensor(TensorArg),
    /// A TMA tensor map, passed by value.
    TensorMap(EncodedTensorMap),
}

impl From<u32> for KernelArg {
    fn from(v: u32) -> Self {
        KernelArg::U32(v)
    }
}
impl From<i32> for KernelArg {
    fn from(v: i32) -> Self {
        KernelArg::I32(v)
    }
}
impl From<u64> for KernelArg {
    fn from(v: u64) -> Self {
        KernelArg::U64(v)
    }
}
impl From<i64> for KernelArg {
    fn from(v: i64) -> Self {
        KernelArg::I64(v)
    }
}
impl From<f32> for KernelArg {
    fn from(v: f32) -> Self {
        KernelArg::F32(v)
    }
}
impl From<EncodedTensorMap> for KernelArg {
    fn from(m: EncodedTensorMap) -> Self {
        KernelArg::TensorMap(m)
    }
}
impl From<TensorArg> for KernelArg {
    fn from(t: TensorArg) -> Self {
        KernelArg::Tensor(t)
    }
}

impl KernelArg {
    /// The parameter kind this argument fills.
    pub fn kind(&self) -> ParamKind {
        match self {
            KernelArg::U32(_) => ParamKind::Scalar(Ty::U32),
            KernelArg::I32(_) => ParamKind::Scalar(Ty::S32),
            KernelArg::U64(_) => ParamKind::Scalar(Ty::U64),
            KernelArg::I64(_) => ParamKind::Scalar(Ty::S64),
            KernelArg::F32(_) => ParamKind::Scalar(Ty::F32),
            KernelArg::Tensor(t) => ParamKind::Tensor {
                elem: t.elem,
                rank: t.rank,
            },
            KernelArg::TensorMap(m) => ParamKind::TensorMap {
                elem: m.elem(),
                rank: m.rank(),
            },
        }
    }

    /// Writes the argument's bytes (exactly `self.kind().bytes()` of them), little-endian.
    fn write(&self, out: &mut [u8]) {
        match *self {
            KernelArg::U32(v) => out.copy_from_slice(&v.to_le_bytes()),
            KernelArg::I32(v) => out.copy_from_slice(&v.to_le_bytes()),
            KernelArg::U64(v) => out.copy_from_slice(&v.to_le_bytes()),
            KernelArg::I64(v) => out.copy_from_slice(&v.to_le_bytes()),
            KernelArg::F32(v) => out.copy_from_slice(&v.to_le_bytes()),
            KernelArg::Tensor(t) => tensor_param::write(out, t.ptr, t.extents(), t.strides()),
            KernelArg::TensorMap(m) => out.copy_from_slice(m.bytes()),
        }
    }
}

/// A tensor argument: a device address with extents and strides in elements, the run-time
/// half of a `Tensor<E, R>` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorArg {
    ptr: u64,
    elem: ElemTy,
    rank: u8,
    extents: [i64; MAX_TENSOR_RANK],
    strides: [i64; MAX_TENSOR_RANK],
}

impl TensorArg {
    /// A rank-`R` tensor of `E` at device address `ptr` (a `CUdeviceptr`, such as the first
    /// element of `DevicePtr::device_ptr`).
    pub fn new<E: Element, const R: usize>(ptr: u64, extents: [i64; R], strides: [i64; R]) -> Self {
        const { assert!(R <= MAX_TENSOR_RANK, "tensor rank above MAX_TENSOR_RANK") };
        let mut t = TensorArg {
            ptr,
            elem: E::ELEM,
            rank: R as u8,
            extents: [0; MAX_TENSOR_RANK],
            strides: [0; MAX_TENSOR_RANK],
        };
        t.extents[..R].copy_from_slice(&extents);
        t.strides[..R].copy_from_slice(&strides);
        t
    }

    /// A packed row-major tensor: the last dimension has stride 1.
    pub fn contiguous<E: Element, const R: usize>(ptr: u64, extents: [i64; R]) -> Self {
        let mut strides = [1i64; R];
        for d in (0..R.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * extents[d + 1];
        }
        TensorArg::new::<E, R>(ptr, extents, strides)
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn elem(&self) -> ElemTy {
        self.elem
    }

    pub fn extents(&self) -> &[i64] {
        &self.extents[..self.rank as usize]
    }

    pub fn strides(&self) -> &[i64] {
        &self.strides[..self.rank as usize]
    }
}

/// How a parameter kind reads in messages: `u32`, `a rank-2 bf16 tensor`.
struct KindName(ParamKind);

impl fmt::Display for KindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ParamKind::Scalar(Ty::S32) => f.write_str("i32"),
            ParamKind::Scalar(Ty::S64) => f.write_str("i64"),
            ParamKind::Scalar(ty) => f.write_str(ty.ptx()),
            ParamKind::Tensor { elem, rank } => write!(f, "a rank-{rank} {} tensor", elem.name()),
            ParamKind::TensorMap { elem, rank } => {
                write!(f, "a rank-{rank} {} tensor map", elem.name())
            }
        }
    }
}

/// The packed parameter values of one launch, each at its own offset, in a fixed inline
/// buffer so that marshalling allocates nothing.
pub struct ParamBuffer {
    bytes: AlignedBytes,
    offsets: [u32; MAX_PARAMS],
    count: usize,
    len: usize,
}

/// Parameter storage aligned for the widest field (a 64-byte aligned tensor map).
#[repr(C, align(64))]
struct AlignedBytes([u8; MAX_PARAM_BYTES]);

impl ParamBuffer {
    /// Checks `args` against `params` (count, then each kind) and packs them. `kernel`
    /// names the kernel in errors.
    pub fn marshal(kernel: &str, params: &[Param], args: &[KernelArg]) -> Result<Self, JitError> {
        if args.len() != params.len() {
            let list: Vec<String> = params
                .iter()
                .map(|p| format!("{}: {}", p.name, KindName(p.kind)))
                .collect();
            return Err(JitError::ArgCount {
                kernel: kernel.to_string(),
                expected: params.len(),
                got: args.len(),
                params: list.join(", "),
            });
        }
        for (index, (p, a)) in params.iter().zip(args).enumerate() {
            if a.kind() != p.kind {
                return Err(JitError::ArgKind {
                    kernel: kernel.to_string(),
                    index,
                    param: p.name.clone(),
                    expected: KindName(p.kind).to_string(),
                    got: KindName(a.kind()).to_string(),
                });
            }
        }
        // Every kind now matches an argument's, so each has a nonzero size and alignment.
        let mut end = 0usize;
        for p in params {
            end = end.next_multiple_of(p.kind.align()) + p.kind.bytes();
        }
        if params.len() > MAX_PARAMS || end > MAX_PARAM_BYTES {
            return Err(JitError::TooManyParams {
                kernel: kernel.to_string(),
                count: params.len(),
                bytes: end,
                max_params: MAX_PARAMS,
                max_bytes: MAX_PARAM_BYTES,
            });
        }
        let mut buf = ParamBuffer {
            bytes: AlignedBytes([0; MAX_PARAM_BYTES]),
            offsets: [0; MAX_PARAMS],
            count: params.len(),
            len: 0,
        };
        for (i, a) in args.iter().enumerate() {
            let kind = a.kind();
            let at = buf.len.next_multiple_of(kind.align());
            a.write(&mut buf.bytes.0[at..at + kind.bytes()]);
            buf.offsets[i] = at as u32;
            buf.len = at + kind.bytes();
        }
        Ok(buf)
    }

    /// The packed bytes: each parameter at its offset, zero padding between.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes.0[..self.len]
    }

    /// Where each parameter's bytes start.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets[..self.count]
    }

    /// `cuLaunchKernelEx`'s `kernelParams`: one pointer to each parameter's bytes. The
    /// pointers borrow `self`, which must stay put until the launch call returns (the
    /// driver copies the values during the call).
    pub(crate) fn pointers(&mut self) -> [*mut c_void; MAX_PARAMS] {
        let mut out = [std::ptr::null_mut(); MAX_PARAMS];
        let base = self.bytes.0.as_mut_ptr();
        for (p, &off) in out.iter_mut().zip(&self.offsets[..self.count]) {
            // SAFETY: every offset is inside the buffer (checked against MAX_PARAM_BYTES).
            *p = unsafe { base.add(off as usize) }.cast();
        }
        out
    }
}
