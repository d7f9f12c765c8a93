//! Asynchronous copies without a tensor map: per-thread `cp.async` (sm_80+) and 1-D bulk
//! copies through the copy engine (sm_90+), and the bulk groups that track stores.

use super::mbarrier::Mbarrier;
use super::memory::{Gmem, Smem, Word};
use crate::ir::verify::rules;
use crate::ir::{AccessTy, BulkWait, CopyOp, Op, Operand, SourceLoc};
use crate::trace::val::emit_effect;
use crate::trace::{IntoVal, Val, trace_error_at};

/// `cp.async`: `bytes` (4, 8 or 16) from global `src` to shared `dst`, both aligned to
/// `bytes`, completed by [`cp_async_commit`] and [`cp_async_wait`] in this thread. With
/// `valid_bytes`, only that many are read and the rest of `dst` is zero-filled (a
/// predicated or ragged edge).
#[track_caller]
pub fn cp_async(dst: Smem, src: Gmem, bytes: u32, valid_bytes: Option<Val<u32>>) {
    if let Err(e) = rules::cp_async_bytes(bytes) {
        trace_error_at(e, SourceLoc::caller());
    }
    emit_effect(Op::Copy(CopyOp::CpAsync {
        dst: Operand::Reg(dst.value().reg()),
        src: Operand::Reg(src.value().reg()),
        bytes,
        src_bytes: valid_bytes.map(|v| v.operand()),
    }));
}

/// `cp.async.commit_group`: closes this thread's group of `cp.async`s.
#[track_caller]
pub fn cp_async_commit() {
    emit_effect(Op::Copy(CopyOp::CpAsyncCommit));
}

/// `cp.async.wait_group n`: waits until at most `n` of this thread's groups are in flight.
/// Other threads see the data after a barrier.
#[track_caller]
pub fn cp_async_wait(n: u32) {
    emit_effect(Op::Copy(CopyOp::CpAsyncWait { n }));
}

/// A 1-D bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from
/// global `src` to shared `dst`, completing `bytes` transactions on `bar`. Issued by one
/// thread; arm `bar` with [`Mbarrier::arrive_expect_tx`] in the same phase.
#[track_caller]
pub fn bulk_load(dst: Smem, src: Gmem, bytes: impl IntoVal<u32>, bar: Mbarrier) {
    super::tma::check_smem_alignment(dst, "bulk copy destination");
    let bytes = bulk_bytes(bytes);
    emit_effect(Op::Copy(CopyOp::BulkLoad {
        dst: Operand::Reg(dst.value().reg()),
        src: Operand::Reg(src.value().reg()),
        bytes,
        bar: Operand::Reg(bar.addr_reg().reg()),
    }));
}

/// `st.async`: `values` (1, 2 or 4 words of 32 bits) to `dst`'s offset in the shared memory
/// of cluster CTA `rank`, completing their bytes on that CTA's copy of `bar` (the same
/// offset: both addresses are mapped to the one rank, as the instruction requires). The
/// peer arms `bar` for the bytes and reads them after [`Mbarrier::wait_cluster`]; no fence
/// or cluster barrier orders them, which is what makes it the cheap way to hand a peer
/// data (a cluster-scope release, as `barrier.cluster.arrive` has, is a GPU-wide memory
/// barrier on sm_90).
#[track_caller]
pub fn store_async<T: Word, const N: usize>(
    dst: Smem,
    rank: impl IntoVal<u32>,
    values: [Val<T>; N],
    bar: Mbarrier,
) {
    let caller = SourceLoc::caller();
    if let Err(e) = rules::vector_width(N) {
        trace_error_at(e, caller);
    }
    if T::ACCESS != AccessTy::B32 {
        trace_error_at(
            "st.async stores 32-bit words: bitcast the values to u32",
            caller,
        );
    }
    let bytes = 4 * N as i64;
    if dst.offset() % bytes != 0 {
        trace_error_at(
            format!(
                "the st.async destination is {} bytes past an aligned base; {bytes} bytes \
                 need {bytes}-byte alignment",
                dst.offset()
            ),
            caller,
        );
    }
    let rank = rank.into_val();
    let dst = dst.in_cta(rank).value();
    let bar = bar.addr().in_cta(rank).value();
    emit_effect(Op::Copy(CopyOp::StoreAsync {
        dst: Operand::Reg(dst.reg()),
        src: values.iter().map(|v| v.operand()).collect(),
        bar: Operand::Reg(bar.reg()),
    }));
}

/// Brings `bytes` (a multiple of 16) of global memory at `src` (16-byte aligned) into L2,
/// for loads that come later: `cp.async.bulk.prefetch.L2.global`. Nothing waits for it
/// and it holds no registers. The address goes to a uniform register, so the lanes of a
/// warp that issue it with different addresses are issued one address at a time.
#[track_caller]
pub fn bulk_prefetch_l2(src: Gmem, bytes: impl IntoVal<u32>) {
    emit_effect(Op::Copy(CopyOp::BulkPrefetchL2 {
        src: Operand::Reg(src.value().reg()),
        bytes: bulk_bytes(bytes),
    }));
}

/// The byte count of a 1-D bulk operation; a static one that is not a positive multiple
/// of 16 is a trace error at the caller.
#[track_caller]
fn bulk_bytes(bytes: impl IntoVal<u32>) -> Operand {
    let bytes = bytes.operand();
    if let Operand::Imm(n) = bytes
        && let Err(e) = rules::bulk_bytes(n)
    {
        trace_error_at(e, SourceLoc::caller());
    }
    bytes
}

/// `cp.async.bulk.commit_group`: closes this thread's group of bulk and tensor stores.
#[track_caller]
pub fn bulk_commit_group() {
    emit_effect(Op::Copy(CopyOp::BulkCommit));
}

/// `cp.async.bulk.wait_group.read n`: at most `n` groups still read their shared-memory
/// sources, so older sources may be rewritten.
#[track_caller]
pub fn bulk_wait_group_read(n: u32) {
    emit_effect(Op::Copy(CopyOp::BulkWaitGroup {
        n,
        until: BulkWait::Read,
    }));
}

/// `cp.async.bulk.wait_group n`: at most `n` groups are not yet visible in global memory.
#[track_caller]
pub fn bulk_wait_group(n: u32) {
    emit_effect(Op::Copy(CopyOp::BulkWaitGroup {
        n,
        until: BulkWait::Written,
    }));
}
