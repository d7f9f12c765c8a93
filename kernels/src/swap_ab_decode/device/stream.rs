//! The streamed schedule: grid (1, s_q, G), one CTA per token and group of 16 heads walks
//! all of the token's KV tiles, 128 rows each (SWA tiles first, then compressed ones), and
//! keeps an online softmax over them. The stages, as they appear in the PTX's stage
//! comments:
//!
//! 1. after `griddepcontrol.wait`: the position, Q and cos/sin, the lists' lengths; Q RoPE
//!    -> bf16 -> shared `[16, 512]`; the running statistics and outputs start empty;
//! 2. per list, the first tile's slot ids and records into registers; then per tile whose
//!    first row is inside the list's length (a runtime loop):
//!    - KV dequant -> shared `[128, 512]` bf16 from the registers;
//!    - the next tile's slot ids and records are issued into the same registers, so they
//!      are in flight while this tile computes (the software pipeline: loads of tile
//!      t + 1 overlap stages 3-6 of tile t);
//!    - 3-4 as in the split schedule (S = KV . Q^T, softmax down each column with P =
//!      hi + lo), but against the running max M' = max(M, tile max): the column's first
//!      thread records alpha = 2^(M - M') and M' for its heads;
//!    - 5: O^T += V^T . P^T after the running O^T takes alpha per head, and the column
//!      sums;
//!    - 6: the running sum becomes alpha S + s and the running max M';
//! 7. `griddepcontrol.launch_dependents`;
//! 8. (with 9) the split schedule's merge with one peer, itself: the sink, the inverse
//!    RoPE, the MXFP8 cast and the o-fused store of all of the group's units;
//! 10. free TMEM.
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
//! accumulation order is fixed (SWA tiles, then compressed tiles, in row order), so the
//! output is bitwise deterministic. 32 heads take two CTAs, which read the same records
//! (the second from L2 when the two run together).
//!
//! Measured and not kept: staging the next tile's records in shared memory with
//! `cp.async` a tile ahead (no records in registers) was slower on the H200 than these
//! register loads, and so was prefetching the next tile's records into L2 with
//! `cp.async.bulk.prefetch.L2` (the README's performance section has the figures).

use dsl_core::arch::pdl::launch_dependents;
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::trace::{SmemTile, Tensor, Val, dyn_range, smem_tile, stage};
use dsl_macros::device;

use super::inputs::{
    KvList, RowMap, gather, load_limit, load_position, load_query, load_rope, load_slot,
    store_cos_sin, store_query, store_tile,
};
use super::kernel::{Ctx, score_tile, sum_columns};
use super::merge::{merge_and_store, pull_partials};
use super::mma::{Mma, MmaSetup, RunningOutputs};
use super::smem::plain;
use super::softmax::{Reference, fold_running, reset_running};
use crate::swap_ab_decode::TILE;

/// Stages 1 to 10 of a token's CTA.
#[device]
pub(super) fn run(ctx: &Ctx<'_>, mma: MmaSetup, precast: Option<Tensor<f32, 3>>) {
    let (plan, buf, tid, warp) = (ctx.plan, ctx.buf, ctx.tid, ctx.warp);
    // Each head's alpha (row 0) and new running max (row 1) of the current tile.
    let rescale = smem_tile("rescale", plain(&[2, i64::from(plan.heads)], 4));

    stage("1: Q RoPE, cos/sin, the lists' lengths; empty running statistics and partial");
    let position = load_position(&ctx.query);
    let q = load_query(plan, &ctx.query, tid);
    let rope = load_rope(&ctx.query, &q, position, tid);
    let swa_limit = load_limit(&ctx.swa, ctx.token);
    let extra_limit = load_limit(&ctx.extra, ctx.token);
    store_query(buf, &q, &rope);
    store_cos_sin(buf, &rope);
    reset_running(plan, buf, tid);
    sync_threads();
    let mma = mma.after_sync(plan);
    let mut running = mma.running_outputs(plan, buf, tid);

    let lists = [
        (&ctx.swa, swa_limit, plan.swa_tiles),
        (&ctx.extra, extra_limit, plan.extra_tiles),
    ];
    let mut done = Val::<u32>::constant(0);
    for (list, limit, tiles) in lists {
        if tiles > 0 {
            (running, done) = stream_list(ctx, &mma, running, &rescale, list, limit, done);
        }
    }

    stage("7: the running partial and statistics are final");
    running.finish(plan, buf);
    sync_threads();
    launch_dependents();

    stage("8-9: normalise with the sink, inverse RoPE, MXFP8 cast, o-fused store");
    let rank = Val::<u32>::constant(0);
    let pulls = pull_partials(plan, buf, tid, rank);
    let tensors = ctx.epilogue_tensors(precast);
    merge_and_store(plan, buf, &pulls, tid, rank, ctx.token, &tensors);

    stage("10: free tensor memory");
    sync_threads();
    mma.release(warp);
}

/// Streams the tiles of `list` whose first row is below `limit` into `running`; `done`
/// counts the tiles already streamed (their mbarrier phases). Returns the running outputs
/// and the count after these tiles.
#[device]
fn stream_list<'m>(
    ctx: &Ctx<'_>,
    mma: &'m Mma,
    running: RunningOutputs<'m>,
    rescale: &SmemTile,
    list: &KvList,
    limit: Val<i32>,
    done: Val<u32>,
) -> (RunningOutputs<'m>, Val<u32>) {
    let (plan, buf, tid, warp) = (ctx.plan, ctx.buf, ctx.tid, ctx.warp);
    let rows = TILE as u32;
    let map = RowMap::new(tid, rows);

    stage("2: the list's first tile into registers");
    let live_tiles = (limit.max(0i32).bitcast::<u32>() + (rows - 1)) / rows;
    let mut next = gather(
        list,
        &map,
        &load_slot(list, ctx.token, &map, Val::constant(0)),
        limit,
    );
    let mut running = running;
    let mut done = done;
    for t in dyn_range(0u32, live_tiles) {
        stage("2: this tile's dequant into shared memory; the next tile's loads in flight");
        store_tile(buf, list, &map, &next, tid);
        let row0 = (t + 1u32) * rows;
        next = gather(list, &map, &load_slot(list, ctx.token, &map, row0), limit);
        // The MMAs read what the threads stored: make it visible to the async proxy.
        fence_proxy_async_shared();
        sync_threads();
        let parity = done & 1u32;

        let probs = score_tile(ctx, mma, parity, Reference::RunningMax(rescale));
        stage("5: O[512, 2H] = O * alpha + KV^T . [P_hi | P_lo]; column sums");
        running = running.add_tile(plan, buf, warp, rescale);
        sum_columns(ctx, &probs);

        stage("6: running statistics; the tile's O^T is in the running outputs");
        fold_running(plan, buf, rescale, tid);
        running.fold_tile(plan, buf, warp, parity, rescale);
        done += 1u32;
    }
    (running, done)
}
