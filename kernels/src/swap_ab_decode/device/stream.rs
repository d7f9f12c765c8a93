//! The streamed schedule: grid (C, s_q, G), a cluster of C CTAs (the key's `ctas`, often 1)
//! per token and group of 16 heads. The token's KV tiles, 128 rows each (SWA tiles first,
//! then compressed ones), go round the cluster: tile g is rank g % C's, and each CTA walks
//! its tiles keeping an online softmax over them. The stages, as they appear in the PTX's
//! stage comments:
//!
//! 1. after `griddepcontrol.wait`: the position, Q and cos/sin, the lists' lengths; Q RoPE
//!    -> bf16 -> shared `[16, 512]`; every slot id of both lists into shared memory (-1
//!    past the list's length); the running statistics and outputs start empty;
//! 2. per list, the first tile's records into registers; then per tile whose first row is
//!    inside the list's length (a runtime loop):
//!    - KV dequant -> shared `[128, 512]` bf16 from the registers;
//!    - the next tile's records are issued into the same registers, so they are in flight
//!      while this tile computes (the software pipeline: loads of tile t + 1 overlap
//!      stages 3-6 of tile t);
//!    - 3-4 as in the split schedule (S = KV . Q^T, softmax down each column with P =
//!      hi + lo), but against the running max M' = max(M, tile max): the column's first
//!      thread records alpha = 2^(M - M') and M' for its heads;
//!    - 5: O^T += V^T . P^T after the running O^T takes alpha per head, and the column
//!      sums;
//!    - 6: once the O MMA's barrier has passed, the running sum becomes alpha S + s and
//!      the running max M' (no barrier of its own: the next tile reads them only after
//!      its dequant's);
//! 6. after the last tile: the running O^T into the partial `[16, 512]` (sm_90a, from the
//!    accumulator registers); in a cluster, the running statistics into this CTA's entry;
//! 7. (to 10) the split schedule's merge (`kernel::merge_stages`): with C = 1 a merge with
//!    one peer, itself, behind plain barriers; with C > 1 over distributed shared memory
//!    behind cluster barriers, each CTA merging and storing its share of the output units.
//!
//! Why this shape: one CTA per SM (the KV tile alone is 128 KiB of shared memory) that
//! runs a single tile from gather to merge leaves the SM idle while the records arrive;
//! here the records of tile t + 1 are loaded during tile t's MMAs and softmax, and the
//! per-token merge, epilogue and launch are paid once per token instead of once per tile.
//! Taking each tile's probabilities against the running max (rather than the tile's own
//! and rescaling two terms) lets a tile's O^T add to the running one unscaled: on sm_90a
//! the running O^T is the wgmma accumulator itself, kept in registers across the tiles and
//! scaled by alpha before each tile's MMA (32 multiplies a thread instead of a
//! shared-memory partial read, scaled and written back every tile), and the partial is
//! written once, over the KV tile. On sm_100a each tile's O^T lands in tensor memory and
//! stage 6 folds it into a partial in its own shared-memory buffer (32 KiB). The
//! accumulation order is fixed (each CTA's tiles in row order, SWA first; the merge in rank
//! order), so the output is bitwise deterministic. 32 heads take two CTAs, which read the
//! same records (the second from L2 when the two run together).
//!
//! Why clusters of streamed CTAs: a CTA's 128-row tile takes about 7.4 us on the H200
//! whether or not the SM has other work, so a step whose tokens leave SMs idle is bound by
//! the number of tiles per CTA. Split gives each tile its own CTA, but from about 24 tokens
//! its clusters of 6 (NE 512) or 10 (NE 1024) no longer fit the GPU at once and take a
//! second round; a cluster of 2-4 streamed CTAs gives each token 2-4 SMs and 2-5 tiles per
//! CTA in one round, the cluster merge costing about 2 us. `host/dispatch.rs` models both
//! and picks per call.
//!
//! Why the slot ids are staged: read from global memory a tile ahead, each tile's record
//! loads waited on its slot-id load first, and ptxas (at the 128-register cap it sinks
//! the record loads below the softmax) exposed that latency in every tile; from shared
//! memory the record loads issue at once, with no register held for a list's length. On
//! the H200 that took 4-8% off the one-CTA schedule with fp8 records (the README has the
//! figures).
//!
//! Why one multiply a pair in the fp8 dequant (`Fp8Dequant::OneMultiply`): the dequant is
//! the loop's most issue-bound stage (all 16 warps at once, between two barriers), and
//! folding 2^120 into the scale takes half its multiplies out of it: the compressed list's
//! loop issued 1074 instructions a warp a tile instead of 1170 (ptxas 13.5, sm_90a), which
//! took 2-2.5% off the one-CTA schedule on the H200 (the README has the figures). The rare
//! scales above 2^7 take a second pass ([`Fp8Dequant`]). Its pairs come from sign-widened
//! bytes (`prmt` with sign replication), one op a pair fewer, and with the softmax's
//! reduce-scatter butterfly the loop issues 1004 instructions a tile. NVFP4 values are
//! looked up rather than bit-moved (`e2m1x8_to_bf16x8`: a `prmt` whose selector is four
//! magnitudes reads a table of their bf16 bytes), which needs no multiply but the scale's:
//! that loop fell from 1341 instructions a warp a tile to 934, and NVFP4 records now take no
//! longer than fp8 ones (the README has the figures).
//!
//! Measured and not kept: staging the next tile's records in shared memory with
//! `cp.async` a tile ahead (no records in registers) was slower on the H200 than these
//! register loads, and so was prefetching the next tile's records into L2 with
//! `cp.async.bulk.prefetch.L2` (the README's performance section has the figures). Nor
//! were two restructurings toward warp roles: committing the O MMA by halves of the dims so
//! that the next tile's dequant starts under it (slower), and producer and consumer
//! warpgroups passing 64-row stages through named barriers (3% faster, but spilling at the
//! register cap); the README has the figures and what they leave open.

use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::cluster_cta_rank;
use dsl_core::trace::{SmemTile, Tensor, Val, dyn_range, smem_tile, stage};
use dsl_macros::device;

use super::inputs::{
    Fp8Dequant, Gathered, KvList, RowMap, gather, load_limit, load_position, load_query, load_rope,
    load_staged_slot, stage_slot_ids, store_cos_sin, store_query, store_tile,
};
use super::kernel::{Ctx, merge_stages, score_tile};
use super::mma::{Mma, MmaSetup, RunningOutputs};
use super::plan::Plan;
use super::smem::plain;
use super::softmax::{Reference, column_sums, fold_running, publish_running, reset_running};
use crate::swap_ab_decode::{ExtraRecord, TILE};

/// Stages 1 to 10 of a CTA of the token's cluster (a cluster of one when the key streams
/// by one CTA).
#[device]
pub(super) fn run(ctx: &Ctx<'_>, mma: MmaSetup, precast: Option<Tensor<f32, 3>>) {
    let (plan, buf, tid) = (ctx.plan, ctx.buf, ctx.tid);
    // Each head's alpha (row 0) and new running max (row 1) of the current tile.
    let rescale = smem_tile("rescale", plain(&[2, i64::from(plan.heads)], 4));
    // A cluster of one has no rank: its CTA takes every tile.
    let rank = (plan.cluster > 1).then(cluster_cta_rank);

    stage("1: Q RoPE, cos/sin, the lists' lengths; empty running statistics and partial");
    let position = load_position(&ctx.query);
    let q = load_query(plan, &ctx.query, tid);
    let rope = load_rope(&ctx.query, &q, position, tid);
    let swa_limit = load_limit(&ctx.swa, ctx.token);
    let extra_limit = load_limit(&ctx.extra, ctx.token);
    // The token's tiles in order (SWA, then compressed) go round the cluster's CTAs: the
    // list's first tile is the token's `tiles_before`-th.
    let lists = [
        ("swa_ids", &ctx.swa, swa_limit, plan.swa_tiles, 0),
        (
            "extra_ids",
            &ctx.extra,
            extra_limit,
            plan.extra_tiles,
            plan.swa_tiles,
        ),
    ];
    store_query(buf, &q, &rope);
    store_cos_sin(buf, &rope);
    let staged: Vec<_> = lists
        .into_iter()
        .filter(|(_, _, _, tiles, _)| *tiles > 0)
        .map(|(name, list, limit, _, tiles_before)| {
            let ids = smem_tile(name, plain(&[i64::from(list.width)], 4));
            stage_slot_ids(list, ctx.token, limit, &ids, tid);
            (list, ids, limit, tiles_before)
        })
        .collect();
    reset_running(plan, buf, tid);
    sync_threads();
    let mma = mma.after_sync(plan);
    let mut running = mma.running_outputs(plan, buf, tid);

    let mut done = Val::<u32>::constant(0);
    for (list, ids, limit, tiles_before) in &staged {
        let share = ListShare::of_rank(plan, list, ids, *limit, rank, *tiles_before);
        (running, done) = stream_list(ctx, &mma, running, &rescale, &share, done);
    }
    stage("6: the running outputs into the partial [H, 512], the statistics to the peers");
    running.finish(plan, buf);
    if let Some(rank) = rank {
        publish_running(plan, buf, tid, rank);
    }
    merge_stages(ctx, &mma, rank.unwrap_or(Val::constant(0)), precast);
}

/// The tiles of a list one CTA streams: of those whose first row is below `limit`, every
/// one (a cluster of one), or tiles `first`, `first + C`, ... of a cluster of C.
struct ListShare<'a> {
    list: &'a KvList,
    /// The list's slot ids, staged in shared memory in stage 1.
    ids: &'a SmemTile,
    limit: Val<i32>,
    round: Option<(Val<u32>, u32)>,
}

impl<'a> ListShare<'a> {
    /// The share of `list` of the CTA of `rank` (none: a cluster of one); the list's first
    /// tile is the token's `tiles_before`-th, and the token's tile `g` is rank `g % C`'s.
    #[device]
    fn of_rank(
        plan: &Plan,
        list: &'a KvList,
        ids: &'a SmemTile,
        limit: Val<i32>,
        rank: Option<Val<u32>>,
        tiles_before: u32,
    ) -> Self {
        let ctas = plan.cluster;
        let round = rank.map(|r| ((r + (ctas - tiles_before % ctas)) % ctas, ctas));
        ListShare {
            list,
            ids,
            limit,
            round,
        }
    }

    /// How many of the list's `live_tiles` tiles are this share's.
    #[device]
    fn count(&self, live_tiles: Val<u32>) -> Val<u32> {
        match self.round {
            None => live_tiles,
            Some((first, ctas)) => (live_tiles.max(first) - first + (ctas - 1)) / ctas,
        }
    }

    /// The first row of the share's first tile.
    #[device]
    fn first_row(&self) -> Val<u32> {
        match self.round {
            None => Val::constant(0),
            Some((first, _)) => first * TILE as u32,
        }
    }

    /// The first row of the share's `i`-th tile.
    #[device]
    fn row0(&self, i: Val<u32>) -> Val<u32> {
        let tile = match self.round {
            None => i,
            Some((first, ctas)) => first + i * ctas,
        };
        tile * TILE as u32
    }
}

/// Streams this CTA's `share` of a list's tiles into `running`; `done` counts the tiles
/// already streamed (their mbarrier phases). Returns the running outputs and the count
/// after these tiles.
#[device]
fn stream_list<'m>(
    ctx: &Ctx<'_>,
    mma: &'m Mma,
    running: RunningOutputs<'m>,
    rescale: &SmemTile,
    share: &ListShare<'_>,
    done: Val<u32>,
) -> (RunningOutputs<'m>, Val<u32>) {
    let (plan, buf, tid, warp) = (ctx.plan, ctx.buf, ctx.tid, ctx.warp);
    let (list, limit) = (share.list, share.limit);
    let rows = TILE as u32;
    let map = RowMap::new(tid, rows);

    stage("2: the list's first tile into registers");
    let live_tiles = (limit.max(0i32).bitcast::<u32>() + (rows - 1)) / rows;
    // The staged slot ids are -1 past the limit: the gathers need no limit.
    let slot = |row0| load_staged_slot(list, share.ids, &map, row0);
    let mut next = gather(list, &map, &slot(share.first_row()), None);
    let mut running = running;
    let mut done = done;
    for i in dyn_range(0u32, share.count(live_tiles)) {
        stage("2: this tile's dequant into shared memory; the next tile's loads in flight");
        let reload = || gather(list, &map, &slot(share.row0(i)), None);
        store_tile(buf, list, &map, &next, tid, fp8_dequant(ctx, &reload));
        let row0 = share.row0(i + 1u32);
        next = gather(list, &map, &slot(row0), None);
        // The MMAs read what the threads stored: make it visible to the async proxy.
        fence_proxy_async_shared();
        sync_threads();
        let parity = done & 1u32;

        let probs = score_tile(ctx, mma, parity, Reference::RunningMax(rescale));
        stage("5: O[512, 2H] = O * alpha + KV^T . [P_hi | P_lo]; column sums");
        running = running.add_tile(plan, buf, warp, rescale);
        column_sums(plan, buf, &probs, warp, ctx.lane);

        stage("6: the tile's O^T is in the running outputs; running statistics");
        running.fold_tile(plan, buf, warp, parity, rescale);
        // After fold_tile's barrier every column sum is in; the next tile rewrites the
        // sums and `rescale` only after its own barriers, so no barrier follows.
        fold_running(plan, buf, rescale, tid);
        done += 1u32;
    }
    (running, done)
}

/// How the streamed tiles scale fp8 records: one multiply a pair where the compressed
/// records are fp8 too. With NVFP4 compressed records only the SWA list is fp8 (one tile of a
/// token's five at NK 128), and one multiply there made ptxas spill 16 bytes at the
/// 128-register cap, so that kernel keeps two.
fn fp8_dequant<'a>(ctx: &Ctx<'_>, reload: &'a dyn Fn() -> Gathered) -> Fp8Dequant<'a> {
    if ctx.extra.record == ExtraRecord::Fp8 {
        Fp8Dequant::OneMultiply { reload }
    } else {
        Fp8Dequant::TwoMultiplies
    }
}
