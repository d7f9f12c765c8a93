//! The SwapAB decode kernel, written once for sm_100a (tcgen05 MMA into tensor memory) and
//! sm_90a (wgmma into registers); only the MMA stages differ by target ([`super::mma`]).
//!
//! Grid (C, s_q, G): one cluster of C CTAs per token and group of up to 32 heads (G = 2 or 4
//! for 64 or 128 heads; 8 heads are computed as 16, the padding never loaded or stored),
//! 512 threads each. CTA rank r < KT takes
//! SWA rows [64 r, 64 r + 64), the others 128 compressed rows each. The stages, as they
//! appear in the PTX's stage comments:
//!
//! 1. issue every global load first (slot ids, Q, KV 16-byte chunks, scales, cos/sin),
//!    predicated so that invalid rows read nothing, after `griddepcontrol.wait`;
//! 2. Q RoPE -> bf16 -> shared `[H, 512]`; KV dequant -> shared `[128, 512]` bf16 (both
//!    K-major, 128-byte swizzle) and a valid flag per row;
//! 3. S[128, H] = KV . Q^T (swap-AB: the KV rows are the MMA's M);
//! 4. softmax down each head's column: max over the tile's valid rows, p = 2^(s - max),
//!    P split into bf16 hi + lo -> shared `[2H, 128]` (MN-major);
//! 5. O[512, 2H] = KV^T . [P_hi | P_lo], meanwhile each head's column sum;
//! 6. O = hi + lo -> fp32 partial `[H, 512]` in shared memory (over the KV tile), and this
//!    CTA's (max, sum) per head;
//! 7. cluster barrier; `griddepcontrol.launch_dependents`;
//! 8. every CTA pulls its share of (head, 32-dim chunk) units from every peer's partial over
//!    DSMEM, in fixed peer order (bitwise deterministic), with every peer's statistics;
//! 9. merge with the attention sink, inverse RoPE, MXFP8 cast, o-fused store;
//! 10. split cluster barrier so no CTA exits while a peer may read its shared memory; free
//!     TMEM.

use dsl_core::arch::cluster::{cluster_arrive, cluster_wait};
use dsl_core::arch::memory::store;
use dsl_core::arch::pdl::{grid_dependency_wait, launch_dependents};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{block_idx_y, cluster_cta_rank, lane_id, thread_idx_x, warp_id};
use dsl_core::ir::Kernel;
use dsl_core::trace::{
    E4m3, Pred, Tensor, TraceError, Val, cluster_dims, current_target, min_ctas_per_sm, stage,
    threads, trace_error,
};
use dsl_macros::{device, kernel};
use half::bf16;

use super::inputs::{KvList, QueryInputs, stage_inputs, zero_stale_rows};
use super::merge::{EpilogueTensors, gather_stats, merge_and_store, pull_partials};
use super::mma::MmaSetup;
use super::plan::{HeadGroup, Plan};
use super::smem::Buffers;
use super::softmax::{column_sums, softmax_to_p, write_stats};
use super::{CompileKey, ExtraRecord, SWA_ROWS, THREADS, TILE};

/// The decode kernel for `key`. Its runtime parameters are the tensors of the decode call
/// (see the module docs of [`super`]) and `scale_log2 = softmax_scale * log2(e)`.
#[kernel(name = "swap_ab_decode")]
#[allow(clippy::too_many_arguments)]
pub fn swap_ab_decode(
    #[comptime] key: &CompileKey,
    q: Tensor<bf16, 3>,
    swa_cache: Tensor<u8, 3>,
    swa_idx: Tensor<i32, 2>,
    swa_len: Tensor<i32, 1>,
    extra_cache: Tensor<u8, 3>,
    extra_idx: Tensor<i32, 2>,
    extra_len: Tensor<i32, 1>,
    positions: Tensor<i64, 1>,
    cos_sin: Tensor<f32, 2>,
    sink: Tensor<f32, 1>,
    out: Tensor<E4m3, 3>,
    out_scale: Tensor<i32, 3>,
    scale_log2: Val<f32>,
) {
    let params = DecodeParams {
        q,
        swa_cache,
        swa_idx,
        swa_len,
        extra_cache,
        extra_idx,
        extra_len,
        positions,
        cos_sin,
        sink,
        out,
        out_scale,
        scale_log2,
    };
    decode(key, &params, None);
}

/// The name of the production (`debug = false`) or debug entry point's kernel.
pub fn entry_name(debug: bool) -> &'static str {
    if debug {
        "swap_ab_decode_debug"
    } else {
        "swap_ab_decode"
    }
}

/// Traces the production or the debug entry point for `key` on the key's target.
pub fn trace_entry(key: &CompileKey, debug: bool) -> Result<Kernel, TraceError> {
    if debug {
        swap_ab_decode_debug(key.target, key)
    } else {
        swap_ab_decode(key.target, key)
    }
}

/// [`swap_ab_decode`] with a debug epilogue: it also writes the fp32 output before the
/// MXFP8 cast (after the inverse RoPE) to `precast` `[s_q, H, 512]`, so that engines can
/// check it against the reference's pre-cast values.
#[kernel(name = "swap_ab_decode_debug")]
#[allow(clippy::too_many_arguments)]
pub fn swap_ab_decode_debug(
    #[comptime] key: &CompileKey,
    q: Tensor<bf16, 3>,
    swa_cache: Tensor<u8, 3>,
    swa_idx: Tensor<i32, 2>,
    swa_len: Tensor<i32, 1>,
    extra_cache: Tensor<u8, 3>,
    extra_idx: Tensor<i32, 2>,
    extra_len: Tensor<i32, 1>,
    positions: Tensor<i64, 1>,
    cos_sin: Tensor<f32, 2>,
    sink: Tensor<f32, 1>,
    out: Tensor<E4m3, 3>,
    out_scale: Tensor<i32, 3>,
    scale_log2: Val<f32>,
    precast: Tensor<f32, 3>,
) {
    let params = DecodeParams {
        q,
        swa_cache,
        swa_idx,
        swa_len,
        extra_cache,
        extra_idx,
        extra_len,
        positions,
        cos_sin,
        sink,
        out,
        out_scale,
        scale_log2,
    };
    decode(key, &params, Some(precast));
}

/// The runtime parameters of both entry points.
pub struct DecodeParams {
    pub q: Tensor<bf16, 3>,
    pub swa_cache: Tensor<u8, 3>,
    pub swa_idx: Tensor<i32, 2>,
    pub swa_len: Tensor<i32, 1>,
    pub extra_cache: Tensor<u8, 3>,
    pub extra_idx: Tensor<i32, 2>,
    pub extra_len: Tensor<i32, 1>,
    pub positions: Tensor<i64, 1>,
    pub cos_sin: Tensor<f32, 2>,
    pub sink: Tensor<f32, 1>,
    pub out: Tensor<E4m3, 3>,
    pub out_scale: Tensor<i32, 3>,
    pub scale_log2: Val<f32>,
}

/// The kernel body: stages 0 to 10.
#[device]
fn decode(key: &CompileKey, params: &DecodeParams, precast: Option<Tensor<f32, 3>>) {
    if key.target != current_target() {
        trace_error(format!(
            "the key is for {} but the kernel is traced for {}",
            key.target,
            current_target()
        ));
    }
    if let Err(e) = key.validate() {
        trace_error(format!("invalid compile key {key}: {e}"));
    }
    let plan = Plan::new(key);
    threads(THREADS as u32, 1, 1);
    // 150+ KiB of shared memory allows one CTA per SM anyway; saying so lets ptxas budget
    // 128 registers a thread.
    min_ctas_per_sm(1);
    cluster_dims(plan.cluster, 1, 1);

    let buf = Buffers::allocate(&plan);
    let tid = thread_idx_x();
    let warp = warp_id();
    let lane = lane_id();
    let rank = cluster_cta_rank();
    let token = block_idx_y();
    let heads = HeadGroup::of_this_cta(&plan);
    let query = QueryInputs {
        q: params.q,
        positions: params.positions,
        cos_sin: params.cos_sin,
        token,
        heads,
    };
    let swa = KvList {
        cache: params.swa_cache,
        idx: params.swa_idx,
        len: params.swa_len,
        width: key.swa_width as u32,
        page: key.swa_page as u32,
        record: ExtraRecord::Fp8,
    };
    let extra = KvList {
        cache: params.extra_cache,
        idx: params.extra_idx,
        len: params.extra_len,
        width: key.extra_width as u32,
        page: key.extra_page as u32,
        record: key.extra_record,
    };

    stage("0: barriers, tensor memory, wait for the previous grid");
    let mma = MmaSetup::new(&plan, tid);
    // Every global read below may depend on the PDL predecessor.
    grid_dependency_wait();
    mma.allocate(warp);

    stage("1-2: loads, Q RoPE, KV dequant into shared memory");
    let mut tile_live = Pred::constant(false);
    let swa_rows = SWA_ROWS as u32;
    let tile_rows = TILE as u32;
    if plan.swa_tiles > 0 && plan.extra_tiles > 0 {
        if rank < plan.swa_tiles {
            tile_live = stage_inputs(&plan, &swa, &query, &buf, tid, rank * swa_rows, swa_rows);
            zero_stale_rows(&buf, tid, swa_rows);
        } else {
            let row0 = (rank - plan.swa_tiles) * tile_rows;
            tile_live = stage_inputs(&plan, &extra, &query, &buf, tid, row0, tile_rows);
        }
    } else if plan.swa_tiles > 0 {
        tile_live = stage_inputs(&plan, &swa, &query, &buf, tid, rank * swa_rows, swa_rows);
        zero_stale_rows(&buf, tid, swa_rows);
    } else {
        tile_live = stage_inputs(
            &plan,
            &extra,
            &query,
            &buf,
            tid,
            rank * tile_rows,
            tile_rows,
        );
    }
    // The MMAs read what the threads stored: make it visible to the async proxy.
    fence_proxy_async_shared();
    sync_threads();
    let mma = mma.after_sync(&plan);

    if tile_live {
        stage("3: S[128, H] = KV . Q^T");
        mma.scores(&buf, warp);

        stage("4: softmax down each head's column; P = hi + lo");
        let scores = mma.load_scores(&plan, warp, lane);
        let probs = softmax_to_p(&plan, &buf, scores, params.scale_log2, warp, lane);
        fence_proxy_async_shared();
        sync_threads();

        stage("5: O[512, 2H] = KV^T . [P_hi | P_lo]; column sums");
        let outputs = mma.outputs(&plan, &buf, warp, rank);
        column_sums(&plan, &buf, &probs, warp, lane);
        sync_threads();
        write_stats(&plan, &buf, tid, rank);

        stage("6: O = hi + lo -> fp32 partial [H, 512] over the KV tile");
        outputs.store_partial(&plan, &buf, warp);
    } else {
        stage("6: no valid row: a zero partial and zero statistics for the peers");
        let zero = Val::<f32>::constant(0.0);
        if tid < plan.heads {
            store(buf.stat(rank, 0, tid), zero);
            store(buf.stat(rank, 1, tid), zero);
        }
        buf.zero_partial(&plan, tid);
    }

    stage("7: every partial and statistic is final");
    cluster_arrive();
    cluster_wait();
    launch_dependents();

    stage("8: pull this CTA's units from every peer, in fixed peer order");
    let pulls = pull_partials(&plan, &buf, tid, rank);
    gather_stats(&plan, &buf, tid, rank);
    sync_threads();

    stage("9: merge with the sink, inverse RoPE, MXFP8 cast, o-fused store");
    let tensors = EpilogueTensors {
        heads,
        sink: params.sink,
        out: params.out,
        out_scale: params.out_scale,
        precast,
    };
    merge_and_store(&plan, &buf, &pulls, tid, rank, token, &tensors);

    stage("10: nobody exits while a peer may still read its shared memory");
    cluster_wait();
    mma.release(warp);
}
