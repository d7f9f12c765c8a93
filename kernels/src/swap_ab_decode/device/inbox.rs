//! The split schedule's merge transport where its shared memory holds it: each CTA pushes
//! every peer's share of its partial and its statistics into that peer's inbox with
//! `st.async`, completing on the peer's mbarrier, and merges its own units from its inbox.
//!
//! Why push rather than pull: pulling the units over DSMEM after a cluster barrier puts two
//! costs on a one-token launch's critical path. The barrier's arrive must release at
//! cluster scope, which ptxas builds as `MEMBAR.ALL.GPU` on sm_90 (a GPU-wide memory
//! barrier, whatever the barrier's scope); with the arrive relaxed behind a CTA fence
//! instead (unsound, an upper bound only) the split schedules measured 2.5-4.6% faster on
//! an H100 (H=16 and 32, NE 512 and 1024, s_q 1). And each pull is a round trip to a peer
//! after the barrier; Nsight Compute put the pulls and the statistics' loads at about 18%
//! of the warp samples of `split64` at s_q 1, the barrier's memory barrier at about 6%.
//! An `st.async` completes on the receiver's mbarrier with a cluster-scope release of its
//! own (no fence, no barrier), so each CTA's values travel as soon as its partial is
//! written, and the receiver waits once, for its own bytes, with a cluster-scope acquire.
//! On an H100 (quick A/B in one run against the pulls, 3 rounds of 5 replays) that took
//! `split64` at s_q 1 to 0.938x (fp8) and 0.923x (NVFP4), split at NE 1024 s_q 1 to 0.951x
//! and split at s_q 32 to 0.955x (H=16 NE 512 unless stated).
//!
//! The inbox is its own buffer (each CTA receives a partial's worth: its units from every
//! peer), armed before any peer can store into it: thread 0 initialises the mbarrier and
//! expects the bytes, the init is fenced and published by a relaxed cluster arrive at the
//! start of the kernel, whose wait comes just before the CTA's first push. Where the
//! buffer does not fit (32 heads a CTA: a partial of 64 KiB beside a 128-row tile), the
//! CTAs pull.

use dsl_core::arch::cluster::{cluster_arrive_relaxed, cluster_wait};
use dsl_core::arch::copy::store_async;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, load_vec};
use dsl_core::trace::{SmemTile, Val, smem_alloc, smem_bytes_free, smem_tile};
use dsl_macros::device;

use super::merge::{UNIT_DIMS, VALUES_PER_THREAD, first_unit, owned_units, unit_cell, unit_of};
use super::plan::{Plan, THREADS_PER_UNIT};
use super::smem::{Buffers, plain};
use crate::swap_ab_decode::THREADS;

/// A CTA's inbox: `[peers, units_per_cta x 32]` f32, peer p's values of this CTA's units in
/// unit order, and the mbarrier their stores complete on.
pub struct Inbox {
    values: SmemTile,
    full: Mbarrier,
}

impl Inbox {
    /// The inbox of a split CTA in a cluster (`rank` its place in it), armed for every
    /// peer's values and statistics, its init published by a relaxed cluster arrive (every
    /// thread); none where the split schedule has no peers or the shared memory left does
    /// not hold it.
    #[device]
    pub fn allocate_if_it_fits(plan: &Plan, tid: Val<u32>, rank: Val<u32>) -> Option<Inbox> {
        let row = plan.units_per_cta * UNIT_DIMS;
        let bytes = plan.cluster * row * 4 + 16;
        if plan.streamed() || plan.cluster < 2 || smem_bytes_free(16) < bytes {
            return None;
        }
        let values = smem_tile(
            "inbox",
            plain(&[i64::from(plan.cluster), i64::from(row)], 4),
        );
        let full = Mbarrier::at(smem_alloc("inbox_full", 8, 8).addr());
        if tid == 0 {
            full.init(1);
            full.arrive_expect_tx(Inbox::bytes_for(plan, rank));
            init_fence();
        }
        cluster_arrive_relaxed();
        Some(Inbox { values, full })
    }

    /// The bytes CTA `rank` receives: its units from every CTA (itself too), and every
    /// other CTA's statistics.
    fn bytes_for(plan: &Plan, rank: Val<u32>) -> Val<u32> {
        let (_, units) = owned_units(plan, rank);
        let stats = (plan.cluster - 1) * Inbox::stats_per_cta(plan) * 4;
        units * (plan.cluster * UNIT_DIMS * 4) + stats
    }

    /// The statistics one CTA sends each peer: (max, sum) of every head.
    fn stats_per_cta(plan: &Plan) -> u32 {
        2 * plan.heads
    }

    /// Stage 7, once the CTA's partial and statistics are in its shared memory (after a
    /// barrier): each unit's values to the inbox of the CTA that owns it, entry `rank`, and
    /// this CTA's statistics into every peer's table.
    #[device]
    pub fn push(&self, plan: &Plan, buf: &Buffers, tid: Val<u32>, rank: Val<u32>) {
        cluster_wait();
        let pieces = plan.units * (UNIT_DIMS / VALUES_PER_THREAD);
        for k in 0..pieces.div_ceil(THREADS as u32) {
            let piece = tid + k * THREADS as u32;
            if piece < pieces {
                let unit = piece / THREADS_PER_UNIT;
                let slice = piece % THREADS_PER_UNIT;
                let (head, dim) = unit_cell(unit, slice);
                let values = load_vec::<f32, 4, _>(buf.partial().at(head, dim));
                let owner = unit / plan.units_per_cta;
                let index = unit - owner * plan.units_per_cta;
                let at = self
                    .values
                    .at(rank, index * UNIT_DIMS + slice * VALUES_PER_THREAD);
                store_async(at, owner, values, self.full);
            }
        }
        let per_cta = Inbox::stats_per_cta(plan);
        let entries = plan.cluster * per_cta;
        for k in 0..entries.div_ceil(THREADS as u32) {
            let entry = tid + k * THREADS as u32;
            let owner = entry / per_cta;
            let stat = entry % per_cta;
            if entry < entries && owner != rank {
                let at = buf
                    .stats
                    .at(rank * 2u32 + stat / plan.heads, stat % plan.heads);
                let value: Val<f32> = load(at);
                store_async(at, owner, [value], self.full);
            }
        }
    }

    /// Stage 8: once every peer's values have landed, per merge pass the 4 values of this
    /// thread's slice of its unit from every CTA, in rank order (what
    /// [`super::merge::pull_partials`] reads from the peers where there is no inbox).
    #[device]
    pub fn receive(&self, plan: &Plan, tid: Val<u32>, rank: Val<u32>) -> Vec<Vec<[Val<f32>; 4]>> {
        self.full.wait_cluster(0u32);
        let slice = tid % THREADS_PER_UNIT;
        let first = first_unit(plan, rank);
        (0..plan.merge_passes)
            .map(|pass| {
                let (_, unit) = unit_of(plan, pass, tid, rank);
                let at = (unit - first) * UNIT_DIMS + slice * VALUES_PER_THREAD;
                (0..plan.cluster)
                    .map(|peer| load_vec::<f32, 4, _>(self.values.at(peer, at)))
                    .collect()
            })
            .collect()
    }
}
