//! Kernel parameters: scalars and tensors with dynamic extents and strides.

use std::marker::PhantomData;

use super::builder::EntryValue;
use super::val::{Literal, Val};
use super::with_builder;
use crate::arch::memory::Gmem;
use crate::ir::{ElemTy, MemOp, Op, ParamKind, Reg, SourceLoc, Ty, tensor_param};

/// A type a `#[kernel]` function can take as a runtime parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a runtime kernel parameter",
    label = "not a kernel parameter type",
    note = "runtime parameters are `Val<T>` scalars or `Tensor<E, R>` device arrays; mark compile-time arguments `#[comptime]`"
)]
pub trait KernelParam: Sized {
    /// Declares the parameter `name` in the kernel being traced and returns its handle.
    fn declare(name: &str) -> Self;
}

impl<T: Literal> KernelParam for Val<T> {
    #[track_caller]
    fn declare(name: &str) -> Self {
        let loc = SourceLoc::caller();
        let index = with_builder(|b| {
            if T::TY == Ty::Pred {
                b.error(
                    format!("kernel parameter `{name}`: PTX has no predicate parameters; pass a Val<u32>"),
                    loc,
                );
            }
            b.declare_param(name, ParamKind::Scalar(T::TY))
        });
        Val::from_reg(param_field(index, 0, T::TY, loc))
    }
}

/// The value at byte `offset` of parameter `index`, loaded once at kernel entry.
fn param_field(index: u32, offset: u32, ty: Ty, loc: SourceLoc) -> Reg {
    with_builder(|b| {
        b.entry_value(EntryValue::Param { index, offset }, ty, loc, |_, dst| {
            vec![Op::Mem(MemOp::LdParam {
                dst,
                param: index,
                offset,
            })]
        })
    })
}

/// A bare device pointer to `E`s (a `.u64` parameter): an address without a shape, for
/// kernels that compute their own extents.
pub struct GlobalPtr<E: Element> {
    index: u32,
    _elem: PhantomData<E>,
}

impl<E: Element> Clone for GlobalPtr<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E: Element> Copy for GlobalPtr<E> {}

impl<E: Element> KernelParam for GlobalPtr<E> {
    fn declare(name: &str) -> Self {
        let index = with_builder(|b| b.declare_param(name, ParamKind::Scalar(Ty::U64)));
        GlobalPtr {
            index,
            _elem: PhantomData,
        }
    }
}

impl<E: Element> GlobalPtr<E> {
    /// The global address of element 0.
    #[track_caller]
    pub fn base(&self) -> Gmem {
        global_address(self.index, 0)
    }

    /// The address of element `i`.
    #[track_caller]
    pub fn at(&self, i: Val<u32>) -> Gmem {
        self.base() + i.mul_wide(E::ELEM.bytes() as u32)
    }
}

/// The generic address in parameter `index` at byte `offset`, converted to a global one
/// once at kernel entry.
#[track_caller]
fn global_address(index: u32, offset: u32) -> Gmem {
    let loc = SourceLoc::caller();
    let reg = with_builder(|b| {
        b.entry_value(
            EntryValue::GlobalAddress { index },
            Ty::U64,
            loc,
            |b, dst| {
                let generic = b.new_reg(Ty::U64);
                vec![
                    Op::Mem(MemOp::LdParam {
                        dst: generic,
                        param: index,
                        offset,
                    }),
                    Op::Mem(MemOp::CvtaGlobal { dst, src: generic }),
                ]
            },
        )
    });
    Gmem::new(Val::from_reg(reg), 0)
}

/// The element type of a tensor in global memory.
pub trait Element: 'static {
    const ELEM: ElemTy;
}

/// An OCP e4m3 (FP8 E4M3FN) byte.
#[derive(Clone, Copy, Debug)]
pub struct E4m3;

impl Element for u8 {
    const ELEM: ElemTy = ElemTy::U8;
}
impl Element for i32 {
    const ELEM: ElemTy = ElemTy::I32;
}
impl Element for i64 {
    const ELEM: ElemTy = ElemTy::I64;
}
impl Element for u32 {
    const ELEM: ElemTy = ElemTy::U32;
}
impl Element for f32 {
    const ELEM: ElemTy = ElemTy::F32;
}
impl Element for half::bf16 {
    const ELEM: ElemTy = ElemTy::Bf16;
}
impl Element for E4m3 {
    const ELEM: ElemTy = ElemTy::E4m3;
}

/// A rank-`R` tensor of `E` in global memory: a device address with `R` extents and `R`
/// strides (in elements), all known only at run time.
pub struct Tensor<E: Element, const R: usize> {
    index: u32,
    _elem: PhantomData<E>,
}

impl<E: Element, const R: usize> Clone for Tensor<E, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E: Element, const R: usize> Copy for Tensor<E, R> {}

impl<E: Element, const R: usize> KernelParam for Tensor<E, R> {
    fn declare(name: &str) -> Self {
        let index = with_builder(|b| {
            b.declare_param(
                name,
                ParamKind::Tensor {
                    elem: E::ELEM,
                    rank: R as u8,
                },
            )
        });
        Tensor {
            index,
            _elem: PhantomData,
        }
    }
}

impl<E: Element, const R: usize> Tensor<E, R> {
    #[track_caller]
    fn field(&self, offset: u32) -> Val<i64> {
        Val::from_reg(param_field(
            self.index,
            offset,
            Ty::S64,
            SourceLoc::caller(),
        ))
    }

    /// Extent of dimension `dim`.
    #[track_caller]
    pub fn extent(&self, dim: usize) -> Val<i64> {
        assert!(dim < R, "dimension {dim} of a rank-{R} tensor");
        self.field(tensor_param::extent(dim))
    }

    /// Stride of dimension `dim`, in elements.
    #[track_caller]
    pub fn stride(&self, dim: usize) -> Val<i64> {
        assert!(dim < R, "dimension {dim} of a rank-{R} tensor");
        self.field(tensor_param::stride(R, dim))
    }

    /// The global address of element 0.
    #[track_caller]
    pub fn base(&self) -> Gmem {
        global_address(self.index, tensor_param::PTR)
    }

    /// Bytes of one element.
    pub fn elem_bytes(&self) -> i64 {
        E::ELEM.bytes() as i64
    }
}
