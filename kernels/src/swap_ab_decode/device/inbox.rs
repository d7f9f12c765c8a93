//! The clusters' merge transport where shared memory holds it: each CTA pushes every
//! peer's share of its partials and its statistics into that peer's inbox with `st.async`,
//! completing on the peer's mbarrier, and merges its own units from its inbox and its own
//! partials.
//!
//! Why push rather than pull: pulling the units over DSMEM after a cluster barrier puts two
//! costs on a one-token launch's critical path. The barrier's arrive must release at
//! cluster scope, which ptxas builds as `MEMBAR.ALL.GPU` on sm_90 (a GPU-wide memory
//! barrier, whatever the barrier's scope); with the arrive relaxed behind a CTA fence
//! instead (unsound, an upper bound only) the split schedules measured 2.5-4.6% faster on
//! an H100 (H=16 and 32, NE 512 and 1024, s_q 1), `stream3` at s_q 32 2.9%. And each pull
//! is a round trip to a peer after the barrier; Nsight Compute put the pulls and the
//! statistics' loads at about 18% of the warp samples of `split64` at s_q 1, the barrier's
//! memory barrier at about 6%. An `st.async` completes on the receiver's mbarrier with a
//! cluster-scope release of its own (no fence, no barrier), so each CTA's values travel as
//! soon as its partial is written, and the receiver waits once, for its own bytes, with a
//! cluster-scope acquire. On an H100 (quick A/B in one run against the pulls, 3 rounds of
//! 5 replays) that took `split64` at s_q 1 to 0.938x (fp8) and 0.923x (NVFP4), split at
//! NE 1024 s_q 1 to 0.951x and split at s_q 32 to 0.955x (H=16 NE 512 unless stated).
//!
//! Why a CTA's own units stay where they are: pushed to itself through the cluster like a
//! peer's, they doubled what each `stream2` CTA sends, and a first build that did so
//! measured 1.055x the pulls for `stream2` at s_q 64 and 1.071x at H=32 (H100, same
//! method). Read from its own partials (an address picked per partial at run time), the
//! streamed clusters measured 0.962x for `stream3` at s_q 32, 0.967x at NE 1024, and
//! 0.994-1.002x for `stream2` and `stream4`; the split schedules 1.002-1.004x the build
//! that pushed to itself.
//!
//! Where the inbox lies. A split CTA's is its own buffer, armed before any peer can store
//! into it: thread 0 initialises the mbarrier, the init is fenced and published by a
//! relaxed cluster arrive at the start of the kernel, whose wait comes just before the
//! CTA's first push, where thread 0 also expects the bytes. A streamed cluster's CTA has no
//! room for one (its two teams' buffers take 223 KiB), so its inbox lies over its teams'
//! record stages, which are free once its tiles are done (past the last tile the copies
//! copy nothing): armed at the start, it is offered to the peers by a relaxed cluster
//! arrive once every thread of the CTA has passed stage 7's barrier, so no peer stores
//! into a stage, or into the running statistics' entries of the table, while the CTA
//! still reads them. The CTAs pull where neither fits (32 heads a CTA: a partial of 64 KiB
//! beside a 128-row tile, and no stage).

use dsl_core::arch::cluster::{cluster_arrive_relaxed, cluster_wait};
use dsl_core::arch::copy::store_async;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{Smem, load, load_vec};
use dsl_core::trace::{SmemTile, Val, smem_alloc, smem_bytes_free, smem_tile};
use dsl_macros::device;

use super::merge::{CHUNKS, UNIT_DIMS, VALUES_PER_THREAD, cell, first_unit, owned_units, unit_of};
use super::plan::{Plan, THREADS_PER_UNIT};
use super::smem::{Buffers, plain};
use crate::swap_ab_decode::THREADS;

/// A CTA's inbox: `[partials, units_per_cta x 32]` f32, partial p's values of this CTA's
/// units in unit order ([`Plan::partials`]: each team's of every CTA), and the mbarrier
/// their stores complete on.
pub struct Inbox {
    values: SmemTile,
    full: Mbarrier,
    /// When the CTA tells its peers that they may store into its inbox: as it arms it
    /// (its own buffer), or once its tiles are done with the buffer the inbox lies over.
    ready: Ready,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ready {
    Armed,
    TilesDone,
}

impl Inbox {
    /// The inbox of a split CTA in a cluster, its own buffer, its mbarrier's init published
    /// by a relaxed cluster arrive (every thread); none where the split schedule has no
    /// peers or the shared memory left does not hold it.
    #[device]
    pub fn allocate_if_it_fits(plan: &Plan, tid: Val<u32>) -> Option<Inbox> {
        let layout = Inbox::values_layout(plan);
        // The values, then the 8-byte barrier, in 16-byte steps.
        let bytes = layout.end_bytes() + 16;
        if plan.streamed() || plan.cluster < 2 || i64::from(smem_bytes_free(16)) < bytes {
            return None;
        }
        let values = smem_tile("inbox", layout);
        let inbox = Inbox::arm(tid, values, Ready::Armed);
        cluster_arrive_relaxed();
        Some(inbox)
    }

    /// The inbox of a streamed cluster's CTA over its teams' record stages `stages`, which
    /// the CTA's shared memory has no room beside: its mbarrier initialised at once, the
    /// peers told that they may store into it once the CTA's tiles are done (stage 7);
    /// none where the stages do not hold it.
    #[device]
    pub fn over_stages(plan: &Plan, tid: Val<u32>, stages: &SmemTile) -> Option<Inbox> {
        let layout = Inbox::values_layout(plan);
        if plan.cluster < 2 || layout.end_bytes() > i64::from(stages.region().bytes) {
            return None;
        }
        let values = stages.view(layout);
        Some(Inbox::arm(tid, values, Ready::TilesDone))
    }

    fn values_layout(plan: &Plan) -> dsl_core::layout::ComposedLayout {
        let row = plan.units_per_cta * UNIT_DIMS;
        plain(&[i64::from(plan.partials()), i64::from(row)], 4)
    }

    /// Thread 0 initialises the mbarrier; it expects the bytes in [`Inbox::push`].
    #[device]
    fn arm(tid: Val<u32>, values: SmemTile, ready: Ready) -> Inbox {
        let full = Mbarrier::at(smem_alloc("inbox_full", 8, 8).addr());
        if tid == 0 {
            full.init(1);
            init_fence();
        }
        Inbox {
            values,
            full,
            ready,
        }
    }

    /// The bytes CTA `rank` receives: its units from every other CTA's partials, and their
    /// statistics.
    fn bytes_for(plan: &Plan, rank: Val<u32>) -> Val<u32> {
        let (_, units) = owned_units(plan, rank);
        let peers = plan.cluster - 1;
        let stats = peers * Inbox::stats_per_cta(plan) * 4;
        units * (peers * plan.teams * UNIT_DIMS * 4) + stats
    }

    /// The statistics one CTA sends each peer: (max, sum) of every head, a team.
    fn stats_per_cta(plan: &Plan) -> u32 {
        2 * plan.heads * plan.teams
    }

    /// Stage 7, once the CTA's partials and statistics are in its shared memory (after a
    /// barrier): each peer's units to its inbox, entry of the partial, and this CTA's
    /// statistics into every peer's table. Its own units it reads where they are.
    #[device]
    pub fn push(&self, plan: &Plan, buf: &Buffers, tid: Val<u32>, rank: Val<u32>) {
        if self.ready == Ready::TilesDone {
            // No thread reads the stages or the running statistics any more.
            cluster_arrive_relaxed();
        }
        cluster_wait();
        // Behind stage 7's barrier rather than beside the init: ptxas may make thread 0's
        // init a warp-wide instruction, and racecheck reports an arrive right after it by
        // the same warp as a warp-level hazard. Peers' bytes that land first take the
        // barrier's tx-count below zero; the phase waits for this arrival all the same.
        if tid == 0 {
            self.full.arrive_expect_tx(Inbox::bytes_for(plan, rank));
        }
        let pieces = plan.units * (UNIT_DIMS / VALUES_PER_THREAD);
        for (team, partial) in buf.partials.iter().enumerate() {
            let entry = rank * plan.teams + team as u32;
            for k in 0..pieces.div_ceil(THREADS as u32) {
                let piece = tid + k * THREADS as u32;
                let unit = piece / THREADS_PER_UNIT;
                let owner = unit / plan.units_per_cta;
                if (piece < pieces) & (owner != rank) {
                    let slice = piece % THREADS_PER_UNIT;
                    let (head, dim) = cell(unit / CHUNKS, unit % CHUNKS, slice);
                    let values = load_vec::<f32, 4, _>(partial.at(head, dim));
                    let at = self.values.at(entry, slot(plan, owner, unit, slice));
                    store_async(at, owner, values, self.full);
                }
            }
        }
        let per_cta = Inbox::stats_per_cta(plan);
        let entries = plan.cluster * per_cta;
        let first_row = rank * (2 * plan.teams);
        for k in 0..entries.div_ceil(THREADS as u32) {
            let entry = tid + k * THREADS as u32;
            let owner = entry / per_cta;
            let stat = entry % per_cta;
            if entry < entries && owner != rank {
                let at = buf
                    .stats
                    .at(first_row + stat / plan.heads, stat % plan.heads);
                let value: Val<f32> = load(at);
                store_async(at, owner, [value], self.full);
            }
        }
    }

    /// Stage 8: once every peer's values have landed, per merge pass the 4 values of this
    /// thread's slice of its unit from every partial, in partial order (what
    /// [`super::merge::pull_partials`] reads from the peers where there is no inbox): the
    /// peers' from the inbox, this CTA's own from its partials.
    #[device]
    pub fn receive(
        &self,
        plan: &Plan,
        buf: &Buffers,
        tid: Val<u32>,
        rank: Val<u32>,
    ) -> Vec<Vec<[Val<f32>; 4]>> {
        self.full.wait_cluster(0u32);
        let slice = tid % THREADS_PER_UNIT;
        (0..plan.merge_passes)
            .map(|pass| {
                let unit = unit_of(plan, pass, tid, rank);
                let (head, dim) = cell(unit.head, unit.chunk, slice);
                let at = slot(plan, rank, unit.unit, slice);
                (0..plan.partials())
                    .map(|part| {
                        let own = buf.partials[(part % plan.teams) as usize].at(head, dim);
                        let pushed = self.values.at(part, at);
                        let is_own = rank.eq(part / plan.teams);
                        let address = is_own.select(own.value(), pushed.value());
                        load_vec::<f32, 4, _>(Smem::new(address, 0))
                    })
                    .collect()
            })
            .collect()
    }
}

/// Where the slice `slice` of unit `unit`, which CTA `owner` owns, starts in a row of the
/// owner's inbox.
fn slot(plan: &Plan, owner: Val<u32>, unit: Val<u32>, slice: Val<u32>) -> Val<u32> {
    (unit - first_unit(plan, owner)) * UNIT_DIMS + slice * VALUES_PER_THREAD
}
