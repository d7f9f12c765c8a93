//! CTA barriers (whole-CTA and named), memory fences, and warpgroup register budgets.

use crate::ir::verify::rules;
use crate::ir::{FenceKind, Op, SourceLoc, SyncOp};
use crate::trace::val::emit_effect;
use crate::trace::{trace_error_at, with_builder};

/// `bar.sync 0`: every thread of the CTA waits here; earlier shared-memory writes are
/// visible to every thread after it.
#[track_caller]
pub fn sync_threads() {
    emit_effect(Op::Sync(SyncOp::BarSync { id: 0 }));
}

/// `fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes
/// visible to the async proxy (tcgen05.mma, wgmma, TMA). Needed before a barrier after
/// which an MMA reads what threads stored.
#[track_caller]
pub fn fence_proxy_async_shared() {
    emit_effect(Op::Sync(SyncOp::Fence(FenceKind::ProxyAsyncSharedCta)));
}

/// `fence.acq_rel.cluster`.
#[track_caller]
pub fn fence_acq_rel_cluster() {
    emit_effect(Op::Sync(SyncOp::Fence(FenceKind::AcqRelCluster)));
}

/// `fence.acq_rel.gpu`: this thread's accesses before it are ordered before its accesses
/// after it for every thread of the grid: before a CTA hands its stores to another CTA
/// (through an [`atomic_add`](crate::arch::memory::atomic_add)), and before it reads what
/// another handed it.
#[track_caller]
pub fn fence_acq_rel_gpu() {
    emit_effect(Op::Sync(SyncOp::Fence(FenceKind::AcqRelGpu)));
}

/// A named CTA barrier (`bar.sync id, threads` / `bar.arrive id, threads`) between a subset
/// of the CTA's warps: roles that hand work to each other without stopping the rest of the
/// CTA. `threads` counts every participant, waiting and arriving; id 0 is
/// [`sync_threads`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedBarrier {
    id: u32,
    threads: u32,
}

impl NamedBarrier {
    /// Barrier `id` (1..16) for `threads` threads (a positive multiple of 32).
    #[track_caller]
    pub fn new(id: u32, threads: u32) -> Self {
        let cta = with_builder(|b| b.launch.threads.iter().product::<u32>());
        if let Err(e) = rules::named_barrier(id, threads, cta) {
            trace_error_at(e, SourceLoc::caller());
        }
        NamedBarrier { id, threads }
    }

    /// Arrives and waits until all `threads` have arrived.
    #[track_caller]
    pub fn sync(self) {
        self.emit(true);
    }

    /// Arrives without waiting (a producer signalling consumers that `sync`).
    #[track_caller]
    pub fn arrive(self) {
        self.emit(false);
    }

    #[track_caller]
    fn emit(self, wait: bool) {
        emit_effect(Op::Sync(SyncOp::NamedBarrier {
            id: self.id,
            threads: self.threads,
            wait,
        }));
    }
}

/// `setmaxnreg.inc` (`increase`) or `.dec` to `regs` registers per thread, executed by all
/// four warps of a warpgroup: warp roles with little state (a TMA producer) give registers
/// to roles with large accumulators. The kernel must fix its entry register count
/// (`max_regs`, or `threads` with `min_ctas_per_sm`), or ptxas ignores the request.
#[track_caller]
pub fn set_max_nreg(regs: u32, increase: bool) {
    let loc = SourceLoc::caller();
    if let Err(e) = rules::setmaxnreg(regs) {
        trace_error_at(e, loc);
    }
    if let Err(e) = with_builder(|b| rules::setmaxnreg_entry(&b.launch)) {
        trace_error_at(e, loc);
    }
    emit_effect(Op::Sync(SyncOp::SetMaxNreg { regs, increase }));
}
