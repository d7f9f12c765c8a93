//! CTA barriers and memory fences.

use crate::ir::{FenceKind, Op, SyncOp};
use crate::trace::val::emit_effect;

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
