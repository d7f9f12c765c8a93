//! Asynchronous copies: `cp.async` (per thread, sm_80), 1-D bulk copies and TMA tensor
//! copies (the async proxy, sm_90), and the groups and mbarrier transactions that complete
//! them.
//!
//! Completion, per form:
//! - `cp.async`: `cp.async.commit_group` then `cp.async.wait_group n` in the issuing thread;
//!   other threads see the data only after a barrier.
//! - global -> shared bulk and tensor loads: `complete_tx` of the copied bytes on the
//!   mbarrier operand; readers wait for that mbarrier phase.
//! - shared -> global bulk and tensor stores: `cp.async.bulk.commit_group`, then
//!   `cp.async.bulk.wait_group.read n` before the source is reused (and `... 0` before exit).
//! - `st.async` into a cluster peer's shared memory: `complete_tx` of the stored bytes on
//!   the peer's mbarrier (release at cluster scope); the peer's readers wait for that phase
//!   with a cluster-scope acquire.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

/// How a bulk-group wait ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BulkWait {
    /// `.read`: the sources have been read (shared memory may be rewritten).
    Read,
    /// The writes are visible in global memory.
    Written,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CopyOp {
    /// `cp.async.cg.shared.global [dst], [src], 16{, src_bytes}` (`.ca` for 4 and 8 bytes):
    /// `bytes` from global `src` to shared `dst`; with `src_bytes`, only that many are read
    /// and the rest of the `bytes` are zero-filled.
    CpAsync {
        dst: Operand,
        src: Operand,
        bytes: u32,
        src_bytes: Option<Operand>,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n`: at most `n` of this thread's groups stay in flight.
    CpAsyncWait { n: u32 },
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src],
    /// bytes, [bar]`: a 1-D copy (16-byte aligned, a multiple of 16 bytes) that completes
    /// `bytes` transactions on `bar`.
    BulkLoad {
        dst: Operand,
        src: Operand,
        bytes: Operand,
        bar: Operand,
    },
    /// `cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    /// [dst], [map, {coords}], [bar]{, mask}`: one box of the tensor map `map` (a generic
    /// address of a 128-byte map in parameter space) at element coordinates `coords`
    /// (innermost first, signed), completing the box's bytes on `bar`. With `multicast`, the
    /// box and the completion go to the same offsets in every CTA of the 16-bit rank mask.
    TensorLoad {
        dst: Operand,
        map: Reg,
        coords: Vec<Operand>,
        bar: Operand,
        multicast: Option<Operand>,
    },
    /// `cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group [map, {coords}],
    /// [src]`: one box from shared memory into the tensor, tracked by bulk groups.
    TensorStore {
        src: Operand,
        map: Reg,
        coords: Vec<Operand>,
    },
    /// `cp.async.bulk.commit_group`.
    BulkCommit,
    /// `cp.async.bulk.wait_group{.read} n`.
    BulkWaitGroup { n: u32, until: BulkWait },
    /// `prefetch.tensormap [map]`: brings the map into the descriptor cache.
    PrefetchTensorMap { map: Reg },
    /// `cp.async.bulk.prefetch.L2.global [src], bytes`: brings `bytes` of global memory
    /// (16-byte aligned, a multiple of 16) into L2; nothing completes or waits.
    BulkPrefetchL2 { src: Operand, bytes: Operand },
    /// `st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.b32 [dst], src,
    /// [bar]`: `src.len()` (1, 2 or 4) 32-bit values into the shared memory of a CTA of the
    /// cluster (a `mapa` address aligned to the store's size), completing their bytes on the
    /// mbarrier `bar` of the same CTA.
    StoreAsync {
        dst: Operand,
        src: Vec<Operand>,
        bar: Operand,
    },
}

impl CopyOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            CopyOp::CpAsync {
                dst,
                src,
                src_bytes,
                ..
            } => {
                visit_operand(dst, f);
                visit_operand(src, f);
                if let Some(n) = src_bytes {
                    visit_operand(n, f);
                }
            }
            CopyOp::BulkLoad {
                dst,
                src,
                bytes,
                bar,
            } => {
                for o in [dst, src, bytes, bar] {
                    visit_operand(o, f);
                }
            }
            CopyOp::TensorLoad {
                dst,
                map,
                coords,
                bar,
                multicast,
            } => {
                visit_operand(dst, f);
                f(*map, false);
                for c in coords {
                    visit_operand(c, f);
                }
                visit_operand(bar, f);
                if let Some(m) = multicast {
                    visit_operand(m, f);
                }
            }
            CopyOp::TensorStore { src, map, coords } => {
                visit_operand(src, f);
                f(*map, false);
                for c in coords {
                    visit_operand(c, f);
                }
            }
            CopyOp::PrefetchTensorMap { map } => f(*map, false),
            CopyOp::StoreAsync { dst, src, bar } => {
                visit_operand(dst, f);
                for s in src {
                    visit_operand(s, f);
                }
                visit_operand(bar, f);
            }
            CopyOp::BulkPrefetchL2 { src, bytes } => {
                visit_operand(src, f);
                visit_operand(bytes, f);
            }
            CopyOp::CpAsyncCommit
            | CopyOp::CpAsyncWait { .. }
            | CopyOp::BulkCommit
            | CopyOp::BulkWaitGroup { .. } => {}
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        match self {
            CopyOp::CpAsync { .. } | CopyOp::CpAsyncCommit | CopyOp::CpAsyncWait { .. } => {
                Requirement::with(Capability::CpAsync, 7, 0)
            }
            CopyOp::BulkLoad { .. }
            | CopyOp::BulkCommit
            | CopyOp::BulkWaitGroup { .. }
            | CopyOp::BulkPrefetchL2 { .. } => Requirement::with(Capability::BulkCopy, 8, 0),
            CopyOp::TensorLoad {
                multicast: Some(_), ..
            } => Requirement::with(Capability::Tma, 8, 0).and(Capability::Cluster),
            CopyOp::TensorLoad { .. }
            | CopyOp::TensorStore { .. }
            | CopyOp::PrefetchTensorMap { .. } => Requirement::with(Capability::Tma, 8, 0),
            CopyOp::StoreAsync { .. } => Requirement::with(Capability::Cluster, 8, 1),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            CopyOp::CpAsync { .. } => "cp.async",
            CopyOp::CpAsyncCommit => "cp.async.commit_group",
            CopyOp::CpAsyncWait { .. } => "cp.async.wait_group",
            CopyOp::BulkLoad { .. } => "cp.async.bulk.shared::cluster.global",
            CopyOp::TensorLoad { .. } => "cp.async.bulk.tensor (load)",
            CopyOp::TensorStore { .. } => "cp.async.bulk.tensor (store)",
            CopyOp::BulkCommit => "cp.async.bulk.commit_group",
            CopyOp::BulkWaitGroup { .. } => "cp.async.bulk.wait_group",
            CopyOp::PrefetchTensorMap { .. } => "prefetch.tensormap",
            CopyOp::BulkPrefetchL2 { .. } => "cp.async.bulk.prefetch.L2.global",
            CopyOp::StoreAsync { .. } => "st.async.shared::cluster",
        }
    }
}
