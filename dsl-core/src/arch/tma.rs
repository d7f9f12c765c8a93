//! TMA tensor copies (sm_90+): a box of a global tensor, described by a tensor map made on
//! the host ([`crate::tensor_map::TensorMapDesc`]), moved by the copy engine between global
//! and shared memory.
//!
//! A load completes its box's bytes on an mbarrier (arm the barrier with
//! [`Mbarrier::arrive_expect_tx`] for [`TensorMap::box_bytes`] first, or in the same
//! phase); a store is tracked by bulk groups ([`super::copy::bulk_commit_group`],
//! [`super::copy::bulk_wait_group_read`]) and reads shared memory that earlier ordinary
//! stores wrote only after `fence.proxy.async` and a barrier.

use std::marker::PhantomData;

use super::mbarrier::Mbarrier;
use super::memory::Smem;
use crate::ir::verify::rules;
use crate::ir::{CopyOp, ElemTy, MemOp, Op, Operand, ParamKind, SourceLoc, Ty};
use crate::trace::builder::EntryValue;
use crate::trace::val::emit_effect;
use crate::trace::{Element, IntoVal, KernelParam, Val, trace_error_at, with_builder};

/// A kernel parameter holding a rank-`R` TMA tensor map of `E`s, passed by value
/// (`const __grid_constant__ CUtensorMap`). Its box shape is known only on the host; the
/// kernel states the box it expects with [`TensorMap::with_box`], which sizes transactions.
pub struct TensorMap<E: Element, const R: usize> {
    index: u32,
    box_dims: Option<[u32; R]>,
    _elem: PhantomData<E>,
}

impl<E: Element, const R: usize> Clone for TensorMap<E, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E: Element, const R: usize> Copy for TensorMap<E, R> {}

impl<E: Element, const R: usize> KernelParam for TensorMap<E, R> {
    #[track_caller]
    fn declare(name: &str) -> Self {
        let loc = SourceLoc::caller();
        if let Err(e) = rules::tensor_map_rank(R) {
            trace_error_at(format!("tensor map `{name}` has {e}"), loc);
        }
        let index = with_builder(|b| {
            b.declare_param(
                name,
                ParamKind::TensorMap {
                    elem: E::ELEM,
                    rank: R as u8,
                },
            )
        });
        TensorMap {
            index,
            box_dims: None,
            _elem: PhantomData,
        }
    }
}

/// One coordinate of a box (elements, signed: a box may start before the tensor and is
/// zero-filled there).
#[derive(Clone, Copy, Debug)]
pub struct Coord(Operand);

impl From<i32> for Coord {
    fn from(v: i32) -> Self {
        Coord(v.operand())
    }
}
impl From<Val<i32>> for Coord {
    fn from(v: Val<i32>) -> Self {
        Coord(v.operand())
    }
}
impl From<Val<u32>> for Coord {
    /// A non-negative index (u32 and s32 share registers).
    fn from(v: Val<u32>) -> Self {
        Coord(v.operand())
    }
}

impl<E: Element, const R: usize> TensorMap<E, R> {
    /// The same map, with the box (elements per dimension, innermost first) that the host
    /// encodes. Transactions and shared-memory footprints are derived from it.
    pub fn with_box(self, box_dims: [u32; R]) -> Self {
        TensorMap {
            box_dims: Some(box_dims),
            ..self
        }
    }

    /// Bytes one box occupies in shared memory (what one load completes on its mbarrier).
    #[track_caller]
    pub fn box_bytes(&self) -> u32 {
        match self.box_dims {
            Some(b) => b.iter().product::<u32>() * E::ELEM.bytes() as u32,
            None => {
                trace_error_at(
                    "the tensor map's box is unknown: state it with `.with_box([..])`",
                    SourceLoc::caller(),
                );
                0
            }
        }
    }

    pub fn elem(&self) -> ElemTy {
        E::ELEM
    }

    /// The map's generic address (`cvta.param`), computed once at kernel entry.
    #[track_caller]
    fn address(&self) -> crate::ir::Reg {
        let loc = SourceLoc::caller();
        let index = self.index;
        with_builder(|b| {
            b.entry_value(
                EntryValue::ParamAddress { index },
                Ty::U64,
                loc,
                |_, dst| vec![Op::Mem(MemOp::ParamAddress { dst, param: index })],
            )
        })
    }

    /// `prefetch.tensormap`: warms the descriptor cache (one thread, early in the kernel).
    #[track_caller]
    pub fn prefetch(&self) {
        let map = self.address();
        emit_effect(Op::Copy(CopyOp::PrefetchTensorMap { map }));
    }

    /// Loads the box at `coords` (innermost first) into shared memory at `dst`, completing
    /// [`TensorMap::box_bytes`] on `bar`. Issued by one thread.
    #[track_caller]
    pub fn load(&self, dst: Smem, coords: [Coord; R], bar: Mbarrier) {
        self.load_op(dst, coords, bar, None);
    }

    /// [`TensorMap::load`] into every CTA of the cluster whose rank bit is set in `mask`,
    /// at the same shared-memory offset and on the same mbarrier offset in each.
    #[track_caller]
    pub fn load_multicast(&self, dst: Smem, coords: [Coord; R], bar: Mbarrier, mask: u16) {
        self.load_op(dst, coords, bar, Some(Operand::Imm(mask as u64)));
    }

    #[track_caller]
    fn load_op(&self, dst: Smem, coords: [Coord; R], bar: Mbarrier, multicast: Option<Operand>) {
        check_smem_alignment(dst, "TMA load destination");
        let map = self.address();
        let dst = Operand::Reg(dst.value().reg());
        emit_effect(Op::Copy(CopyOp::TensorLoad {
            dst,
            map,
            coords: coords.iter().map(|c| c.0).collect(),
            bar: Operand::Reg(bar.addr_reg().reg()),
            multicast,
        }));
    }

    /// Stores the box at `coords` from shared memory at `src` (one thread; then
    /// [`super::copy::bulk_commit_group`]).
    #[track_caller]
    pub fn store(&self, src: Smem, coords: [Coord; R]) {
        check_smem_alignment(src, "TMA store source");
        let map = self.address();
        let src = Operand::Reg(src.value().reg());
        emit_effect(Op::Copy(CopyOp::TensorStore {
            src,
            map,
            coords: coords.iter().map(|c| c.0).collect(),
        }));
    }
}

/// Shared-memory operands of bulk and tensor copies are 16-byte aligned (PTX ISA 5.5.3);
/// a static misalignment is the author's mistake, found here rather than as a fault.
#[track_caller]
pub(crate) fn check_smem_alignment(addr: Smem, what: &str) {
    if addr.offset() % 16 != 0 {
        trace_error_at(
            format!(
                "{what} is {} bytes past an aligned base; bulk and tensor copies need 16-byte \
                 aligned shared memory",
                addr.offset()
            ),
            SourceLoc::caller(),
        );
    }
}
