//! The SwapAB decode kernel, written once for sm_100a (tcgen05 MMA into tensor memory) and
//! sm_90a (wgmma into registers); only the MMA stages differ by target (`mma/`).
//! 512 threads a CTA; 8 heads are computed as 16, the padding never loaded or stored.
//!
//! Two schedules share every stage (loads, dequant, MMAs, softmax, merge, epilogue), and
//! the key picks one ([`crate::swap_ab_decode::Schedule`]):
//! - split (`split.rs`): grid (C, s_q, G), a cluster of C CTAs per token, one KV tile each,
//!   merged over distributed shared memory. The shortest dependent chain per token: for
//!   steps whose tokens do not fill the GPU.
//! - streamed (`stream.rs`): a cluster of C CTAs (often 1) per token and group of 16 heads
//!   streams the token's tiles, every C-th tile a CTA, through a two-deep software pipeline
//!   with an online softmax, merged as split merges when C > 1. Each SM's chain of tiles
//!   keeps the next tile's records in flight: for steps with enough tokens to fill the GPU
//!   (C = 1, a persistent grid whose CTAs take the next token's inputs during the merge),
//!   or to fill it with 2-4 SMs a token.
//!
//! This file holds the entry points and the setup both share.

use dsl_core::arch::cluster::{cluster_arrive, cluster_wait};
use dsl_core::arch::pdl::{grid_dependency_wait, launch_dependents};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{block_idx_y, lane_id, thread_idx_x, warp_id};
use dsl_core::ir::Kernel;
use dsl_core::trace::{
    E4m3, Tensor, TraceError, Val, cluster_dims, current_target, min_ctas_per_sm, stage, threads,
    trace_error,
};
use dsl_macros::{KernelParam, device, kernel};
use half::bf16;

use super::inbox::Inbox;
use super::inputs::{KvList, QueryInputs};
use super::merge::{EpilogueTensors, MergeAndStore, gather_stats, pull_partials};
use super::mma::{Mma, MmaSetup};
use super::plan::{HeadGroup, Plan};
use super::smem::Buffers;
use super::softmax::{Reference, column_sums, softmax_to_p};
use super::team::Team;
use super::{split, stream};
use crate::swap_ab_decode::{CompileKey, ExtraRecord, Schedule, THREADS};

/// The decode kernel for `key`. Its runtime parameters are the tensors of the decode call
/// (see the module docs of [`crate::swap_ab_decode`]) and `scale_log2 = softmax_scale *
/// log2(e)`, [`DecodeParams`] in order.
#[kernel(name = "swap_ab_decode")]
pub fn swap_ab_decode(#[comptime] key: &CompileKey, params: DecodeParams) {
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
pub fn swap_ab_decode_debug(
    #[comptime] key: &CompileKey,
    params: DecodeParams,
    precast: Tensor<f32, 3>,
) {
    decode(key, &params, Some(precast));
}

/// The runtime parameters of both entry points, one PTX parameter a field in this order
/// (what the host's launch arguments follow).
#[derive(KernelParam)]
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

/// What both schedules work with: the plan, the team of warps this thread works in and its
/// buffers, this thread in the CTA, the token's inputs.
pub(super) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub params: &'a DecodeParams,
    pub buf: &'a Buffers,
    pub team: Team,
    pub tid: Val<u32>,
    pub warp: Val<u32>,
    pub lane: Val<u32>,
    pub token: Val<u32>,
    pub query: QueryInputs,
    pub swa: KvList,
    pub extra: KvList,
}

impl<'a> Ctx<'a> {
    /// The same token and thread, working in `team` with its buffers `buf`.
    pub fn in_team(&self, buf: &'a Buffers, team: Team) -> Ctx<'a> {
        Ctx {
            buf,
            team,
            query: self.query,
            swa: self.swa,
            extra: self.extra,
            ..*self
        }
    }

    /// The same thread and team, working on `token`.
    pub fn for_token(&self, token: Val<u32>) -> Ctx<'a> {
        Ctx {
            token,
            query: QueryInputs {
                token,
                ..self.query
            },
            swa: self.swa,
            extra: self.extra,
            ..*self
        }
    }

    /// What stage 9 reads and writes in global memory.
    pub fn epilogue_tensors(&self, precast: Option<Tensor<f32, 3>>) -> EpilogueTensors {
        EpilogueTensors {
            token: self.token,
            heads: self.query.heads,
            out: self.params.out,
            out_scale: self.params.out_scale,
            precast,
        }
    }
}

/// Stages 3-4 of one tile, the same in both schedules: S = KV . Q^T and the softmax down
/// each head's column (against `reference`) into P = hi + lo, up to the barrier after which
/// the O MMA may read P. `parity` is the tile's mbarrier phase (sm_100a). Returns this
/// thread's probabilities for the column sums ([`sum_columns`] when split; streamed, they
/// are summed behind the O MMA's barrier).
#[device]
pub(super) fn score_tile(
    ctx: &Ctx<'_>,
    mma: &Mma,
    parity: Val<u32>,
    reference: Reference<'_>,
) -> Vec<Val<f32>> {
    let (plan, buf, team) = (ctx.plan, ctx.buf, &ctx.team);
    stage("3: S[128, H] = KV . Q^T");
    mma.scores(buf, team);

    stage("4: softmax down each head's column; P = hi + lo");
    let scores = mma.load_scores(plan, team, parity);
    let probs = softmax_to_p(plan, buf, scores, ctx.params.scale_log2, team, reference);
    fence_proxy_async_shared();
    team.sync();
    probs
}

/// Stage 5's second half, beside the O MMA the schedule has issued: each head's column sum
/// of `probs`, up to the barrier after which the tile's statistics can be read.
#[device]
pub(super) fn sum_columns(ctx: &Ctx<'_>, probs: &[Val<f32>]) {
    column_sums(ctx.plan, ctx.buf, probs, &ctx.team);
    ctx.team.sync();
}

/// Stages 7-10, the same in both schedules once this CTA's partial and statistics are in
/// its shared memory (entry `rank` of the statistics): publish them to the cluster (with
/// an `inbox`, push them into the peers' inboxes), take this CTA's output units from every
/// peer in rank order, merge with the sink, inverse RoPE, MXFP8 cast and o-fused store
/// (with the sink logits `sinks` the CTA loaded, [`load_sinks`](super::merge::load_sinks));
/// no CTA exits while a peer may still read its shared memory or store into it. A streamed
/// CTA without peers needs only its own barriers. Beside the merge (what a persistent CTA
/// does for its next token): `after_publish` once every partial and statistic is final
/// (the shared memory the tiles used is free), and `halfway`, between two passes of stage
/// 9, with what `after_publish` returned (loads it issued); the merge returns what
/// `halfway` returns.
#[device]
pub(super) fn merge_stages<T, U>(
    ctx: &Ctx<'_>,
    (rank, sinks, inbox): (Val<u32>, &[Val<f32>], Option<&Inbox>),
    precast: Option<Tensor<f32, 3>>,
    after_publish: impl FnOnce() -> T,
    halfway: impl FnOnce(T) -> U,
) -> U {
    let (plan, buf, tid) = (ctx.plan, ctx.buf, ctx.tid);
    let peers = plan.merges_peers();
    stage("7: every partial and statistic is final");
    match inbox {
        Some(inbox) => {
            sync_threads();
            inbox.push(plan, buf, tid, rank);
        }
        None if peers => {
            cluster_arrive();
            cluster_wait();
        }
        None => sync_threads(),
    }
    launch_dependents();
    let issued = after_publish();

    stage("8: this CTA's units from every peer, in fixed peer order");
    let pulls = match inbox {
        Some(inbox) => inbox.receive(plan, buf, tid, rank),
        None => {
            let pulls = pull_partials(plan, buf, tid, rank);
            if peers {
                gather_stats(plan, buf, tid, rank);
                sync_threads();
            }
            pulls
        }
    };

    stage("9: merge with the sink, inverse RoPE, MXFP8 cast, o-fused store");
    let tensors = ctx.epilogue_tensors(precast);
    let merge = MergeAndStore::new(plan, buf, &pulls, sinks, (tid, rank), &tensors);
    let half = merge.passes() / 2;
    for pass in 0..half {
        merge.pass(pass);
    }
    let beside = halfway(issued);
    for pass in half..merge.passes() {
        merge.pass(pass);
    }

    stage("10: nobody exits while a peer may still read its shared memory; free TMEM");
    if peers {
        cluster_wait();
    } else {
        sync_threads();
    }
    beside
}

/// The kernel body: the checks and setup both schedules share, then the key's schedule.
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

    let bufs = Buffers::allocate(&plan);
    let tid = thread_idx_x();
    let token = block_idx_y();
    let heads = HeadGroup::of_this_cta(&plan);
    let list = |cache, idx, len, width: usize, page: usize, record| KvList {
        cache,
        idx,
        len,
        width: width as u32,
        page: page as u32,
        record,
    };
    let (warp, lane) = (warp_id(), lane_id());
    let ctx = Ctx {
        plan: &plan,
        params,
        buf: &bufs[0],
        team: Team::whole_cta(tid, warp, lane),
        tid,
        warp,
        lane,
        token,
        query: QueryInputs {
            q: params.q,
            positions: params.positions,
            cos_sin: params.cos_sin,
            token,
            heads,
        },
        swa: list(
            params.swa_cache,
            params.swa_idx,
            params.swa_len,
            key.swa_width,
            key.swa_page,
            ExtraRecord::Fp8,
        ),
        extra: list(
            params.extra_cache,
            params.extra_idx,
            params.extra_len,
            key.extra_width,
            key.extra_page,
            key.extra_record,
        ),
    };

    stage("0: barriers, tensor memory, wait for the previous grid");
    let mma = MmaSetup::new(&plan, tid);
    // Every global read below may depend on the PDL predecessor.
    grid_dependency_wait();
    mma.allocate(ctx.warp);
    match key.schedule {
        Schedule::Split { .. } => split::run(&ctx, mma, precast),
        Schedule::Streamed { .. } => stream::run(&ctx, &bufs, mma, precast),
    }
}
