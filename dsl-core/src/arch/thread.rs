//! Who am I: thread, warp, CTA and cluster indices; and the warp collectives.

use crate::ir::{Op, Operand, ShflMode, SpecialReg, SyncOp, Ty};
use crate::trace::val::emit;
use crate::trace::{IntoVal, Pred, Val};
use crate::trace::{entry_special, entry_warp_id};

/// `%tid.x`.
#[track_caller]
pub fn thread_idx_x() -> Val<u32> {
    entry_special(SpecialReg::TidX)
}

/// `%ctaid.x`.
#[track_caller]
pub fn block_idx_x() -> Val<u32> {
    entry_special(SpecialReg::CtaidX)
}

/// `%ctaid.y`.
#[track_caller]
pub fn block_idx_y() -> Val<u32> {
    entry_special(SpecialReg::CtaidY)
}

/// `%ctaid.z`.
#[track_caller]
pub fn block_idx_z() -> Val<u32> {
    entry_special(SpecialReg::CtaidZ)
}

/// `%nctaid.x`, read where it is used ([`grid_special`] says why).
#[track_caller]
pub fn grid_dim_x() -> Val<u32> {
    grid_special(SpecialReg::NctaidX)
}

/// `%nctaid.y`, read where it is used ([`grid_special`] says why).
#[track_caller]
pub fn grid_dim_y() -> Val<u32> {
    grid_special(SpecialReg::NctaidY)
}

/// A grid dimension, read at the call rather than once at kernel entry: ptxas reads it from
/// the constant bank where it is used at no cost, while a copy read at entry stays live in
/// a register across every loop it strides (a persistent loop's token step, which ptxas
/// spilled at the 128-register cap of a 512-thread CTA).
#[track_caller]
fn grid_special(reg: SpecialReg) -> Val<u32> {
    Val::from_reg(emit(Ty::U32, |dst| {
        Op::Sync(SyncOp::ReadSpecial { dst, reg })
    }))
}

/// `%laneid`.
#[track_caller]
pub fn lane_id() -> Val<u32> {
    entry_special(SpecialReg::LaneId)
}

/// `tid.x / 32`, made warp-uniform (broadcast from lane 0) so that branches on it are
/// known uniform: the warp's index in the CTA.
#[track_caller]
pub fn warp_id() -> Val<u32> {
    entry_warp_id()
}

/// `%cluster_ctarank`: this CTA's rank in its cluster.
#[track_caller]
pub fn cluster_cta_rank() -> Val<u32> {
    entry_special(SpecialReg::ClusterCtaRank)
}

/// `%cluster_nctarank`: CTAs in the cluster.
#[track_caller]
pub fn cluster_size() -> Val<u32> {
    entry_special(SpecialReg::ClusterNctaRank)
}

#[track_caller]
fn shfl<T: crate::trace::Scalar>(mode: ShflMode, value: Val<T>, b: Operand, c: u32) -> Val<T> {
    assert_eq!(T::TY.bits(), 32, "shfl.sync moves 32-bit values");
    let src = value.reg();
    Val::from_reg(emit(T::TY, |dst| {
        Op::Sync(SyncOp::Shfl {
            mode,
            dst,
            src,
            b,
            c,
        })
    }))
}

/// `shfl.sync.bfly`: the value of lane `laneid ^ lane_mask` (whole warp).
#[track_caller]
pub fn shfl_xor<T: crate::trace::Scalar>(value: Val<T>, lane_mask: u32) -> Val<T> {
    shfl(ShflMode::Bfly, value, Operand::Imm(lane_mask as u64), 0x1f)
}

/// `shfl.sync.idx`: the value of lane `src_lane` (whole warp).
#[track_caller]
pub fn shfl_idx<T: crate::trace::Scalar>(value: Val<T>, src_lane: impl IntoVal<u32>) -> Val<T> {
    shfl(ShflMode::Idx, value, src_lane.operand(), 0x1f)
}

/// `shfl.sync.down`: the value of lane `laneid + delta`, or the own value past lane 31.
#[track_caller]
pub fn shfl_down<T: crate::trace::Scalar>(value: Val<T>, delta: u32) -> Val<T> {
    shfl(ShflMode::Down, value, Operand::Imm(delta as u64), 0x1f)
}

/// `shfl.sync.up`: the value of lane `laneid - delta`, or the own value below lane 0.
#[track_caller]
pub fn shfl_up<T: crate::trace::Scalar>(value: Val<T>, delta: u32) -> Val<T> {
    shfl(ShflMode::Up, value, Operand::Imm(delta as u64), 0)
}

/// `vote.sync.ballot`: bit i set where lane i's `pred` holds (whole warp).
#[track_caller]
pub fn ballot(pred: Pred) -> Val<u32> {
    let p = pred.reg();
    Val::from_reg(emit(Ty::U32, |dst| {
        Op::Sync(SyncOp::Ballot { dst, pred: p })
    }))
}

/// `elect.sync`: true in exactly one lane of the warp (sm_90+).
#[track_caller]
pub fn elect_one() -> Pred {
    Val::from_reg(emit(Ty::Pred, |dst| Op::Sync(SyncOp::Elect { dst })))
}
