//! The split schedule: grid (C, s_q, G), one cluster of C CTAs per token and group of up
//! to 32 heads (G = 2 or 4 for 64 or 128 heads). CTA rank r < KT takes SWA rows
//! [64 r, 64 r + 64), the others 128 compressed rows each, or 64 in a cluster of half
//! tiles (`Schedule::SPLIT_HALF_TILES`: twice the compressed CTAs, each with half
//! the loads, dequant and O MMA of a full tile). The stages, as they appear in
//! the PTX's stage comments:
//!
//! 1. issue every global load first (slot ids, Q, KV 16-byte chunks, scales, cos/sin),
//!    predicated so that invalid rows read nothing, after `griddepcontrol.wait`;
//! 2. Q RoPE -> bf16 -> shared `[H, 512]`; KV dequant -> shared `[128, 512]` bf16 (both
//!    K-major, 128-byte swizzle) and a valid flag per row;
//! 3. S[128, H] = KV . Q^T (swap-AB: the KV rows are the MMA's M; on sm_90a, where every
//!    tile of the key is 64 rows, S[64, H] by two warpgroups each over half of K);
//! 4. softmax down each head's column: max over the tile's valid rows, p = 2^(s - max),
//!    P split into bf16 hi + lo -> shared `[2H, 128]` (MN-major);
//! 5. O[512, 2H] = KV^T . [P_hi | P_lo], meanwhile each head's column sum;
//! 6. O = hi + lo -> fp32 partial `[H, 512]` in shared memory (over the KV tile), and this
//!    CTA's (max, sum) per head;
//! 7. with 16 heads a CTA, every CTA pushes each peer's share of (head, 32-dim chunk) units
//!    and its statistics into that peer's inbox with `st.async` (`inbox.rs`); with 32 (no
//!    room for an inbox) a cluster barrier; `griddepcontrol.launch_dependents`;
//! 8. every CTA takes its share of units from every peer's partial, from its inbox once
//!    its mbarrier has seen every peer's bytes (its own from its partial) or over DSMEM, in
//!    fixed peer order (bitwise deterministic), with every peer's statistics;
//! 9. merge with the attention sink, inverse RoPE, MXFP8 cast, o-fused store;
//! 10. split cluster barrier so no CTA exits while a peer may read or store into its
//!     shared memory; free TMEM.

use dsl_core::arch::memory::store;
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::cluster_cta_rank;
use dsl_core::trace::{Pred, Tensor, Val, stage};
use dsl_macros::device;

use super::inbox::Inbox;
use super::inputs::{stage_inputs, zero_stale_rows};
use super::kernel::{Ctx, merge_stages, score_tile, sum_columns};
use super::merge::load_sinks;
use super::mma::{MmaSetup, PartialUpdate, TileRows};
use super::softmax::{Reference, write_stats};
use crate::swap_ab_decode::SWA_ROWS;

/// Stages 1 to 10 of a CTA's one tile.
#[device]
pub(super) fn run(ctx: &Ctx<'_>, mma: MmaSetup, precast: Option<Tensor<f32, 3>>) {
    let (plan, buf, tid, team) = (ctx.plan, ctx.buf, ctx.tid, &ctx.team);
    let rank = cluster_cta_rank();
    let (swa, extra, query) = (&ctx.swa, &ctx.extra, &ctx.query);

    stage("1-2: loads, Q RoPE, KV dequant into shared memory");
    let inbox = Inbox::allocate_if_it_fits(plan, tid);
    let sinks = load_sinks(plan, (tid, rank), ctx.params.sink, &query.heads);
    let mut tile_live = Pred::constant(false);
    let swa_rows = SWA_ROWS as u32;
    let extra_rows = plan.extra_tile_rows;
    if plan.swa_tiles > 0 && plan.extra_tiles > 0 {
        if rank < plan.swa_tiles {
            tile_live = stage_inputs(plan, swa, query, buf, team, rank * swa_rows, swa_rows);
            zero_stale_rows(plan, buf, tid, swa_rows);
        } else {
            let row0 = (rank - plan.swa_tiles) * extra_rows;
            tile_live = stage_inputs(plan, extra, query, buf, team, row0, extra_rows);
            zero_stale_rows(plan, buf, tid, extra_rows);
        }
    } else if plan.swa_tiles > 0 {
        tile_live = stage_inputs(plan, swa, query, buf, team, rank * swa_rows, swa_rows);
        zero_stale_rows(plan, buf, tid, swa_rows);
    } else {
        tile_live = stage_inputs(plan, extra, query, buf, team, rank * extra_rows, extra_rows);
        zero_stale_rows(plan, buf, tid, extra_rows);
    }
    // The MMAs read what the threads stored: make it visible to the async proxy.
    fence_proxy_async_shared();
    sync_threads();
    let mma = mma.after_sync(plan, buf, team);
    let parity = Val::<u32>::constant(0);

    if tile_live {
        let probs = score_tile(ctx, &mma, parity, Reference::TileMax);
        stage("5: O[512, 2H] = KV^T . [P_hi | P_lo]; column sums");
        let outputs = mma.outputs(plan, buf, team, TileRows::ByRank(rank));
        sum_columns(ctx, &probs);
        write_stats(plan, buf, tid, rank);

        stage("6: O = hi + lo -> fp32 partial [H, 512] over the KV tile");
        outputs.store_partial(plan, buf, team, parity, PartialUpdate::Store);
    } else {
        stage("6: no valid row: a zero partial and zero statistics for the peers");
        let zero = Val::<f32>::constant(0.0);
        if tid < plan.heads {
            store(buf.stat(rank, 0, tid), zero);
            store(buf.stat(rank, 1, tid), zero);
        }
        buf.zero_partial(plan, team);
    }

    merge_stages(ctx, (rank, &sinks, inbox.as_ref()), precast, || (), |()| ());
    mma.release(ctx.warp);
}
