//! The streamed schedule: grid (C, Y, G), a cluster of C CTAs (the key's `ctas`, often 1)
//! per token and group of 16 heads; Y is s_q, or with C = 1 as many tokens as the SMs hold
//! at once (a persistent grid, [`crate::swap_ab_decode::CompileKey::grid`]), each CTA
//! taking tokens y, y + Y, ... in turn. A CTA's warps are one team, or on sm_90a with fp8
//! compressed records two teams of 8 warps ([`Team`], `Plan::teams`), each with its own KV
//! tile, stage, scores and running outputs. The token's KV tiles (SWA tiles first, then
//! compressed ones; 128 rows each, 64 with two teams) go round the W = C x teams workers:
//! tile g is worker g % W's, worker `team C + rank`, and each worker walks its tiles keeping
//! an online softmax over them. The stages, as they appear in the PTX's stage comments
//! (with two teams, stages 2-6 twice, once a team):
//!
//! 1. the token's inputs (`prefetch.rs`): the position, Q and cos/sin, the lists' lengths
//!    and every slot id of both lists, into shared memory (-1 past the list's length);
//!    each team's first tile of the first list in flight; Q RoPE -> bf16 -> shared
//!    `[16, 512]`; the running statistics and outputs start empty. For a CTA's first
//!    token all of it after `griddepcontrol.wait`; for every later one all but the last
//!    two during the merge of the token before (stages 7-9);
//! 2. per list, the first tile's records in flight (through the stage they are already:
//!    stage 1's copies, or the previous list's last tile's; [`TileSource`]); then per
//!    tile whose first row is inside the list's length (a runtime loop):
//!    - KV dequant -> shared `[rows, 512]` bf16 from the records;
//!    - the next tile's records are issued, so they are in flight while this tile computes
//!      (the software pipeline: the records of tile t + 1 arrive during stages 3-6 of tile
//!      t; through the stage, after a list's last tile the next list's first). On sm_90a with fp8 compressed records, or with two teams, each row's record
//!      comes whole by one bulk copy (`cp.async.bulk`, issued by lanes of the team's
//!      second half of warps once the dequant's barrier has passed) into a shared-memory stage
//!      `[rows, 528]` bytes, completing on an mbarrier that the next dequant waits on
//!      ([`RawRows`]); with NVFP4 compressed records in one team, and on sm_100a (whose
//!      streamed partial has its own buffer, so the stage does not fit), every thread
//!      loads its chunks into registers;
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
//!    one peer, itself, behind plain barriers; with C > 1 each CTA merging and storing its
//!    share of the output units, which its peers push into its inbox over its record
//!    stages (`inbox.rs`) once its tiles are done, or, where there is no stage (sm_100a,
//!    the 32-head CTA), it pulls over distributed shared memory behind cluster barriers.
//!    Beside it, the CTA's next token's stage 1: its global reads once the partials are
//!    final, its slot ids staged and its first records in flight halfway through the
//!    merge passes.
//!
//! Why a persistent grid that overlaps the next token with the merge: Nsight Compute's warp
//! samples of the two-team kernel at s_q 512 (docs/performance.md has them) put 7.3% in
//! stage 1 (long scoreboard: the slot ids, then the records they name) and 11.8% in the
//! merge, where no record streams, and 11% of the tile loops waiting for records. A CTA of
//! one token a launch cannot load its next token's inputs; a CTA that walks tokens issues
//! them when the tiles' buffers free up (the stage, the slot ids and Q are not read by the
//! merge), so that the first records of token n + 1 arrive during token n's merge and its
//! first dequant need not wait. The shared memory is full (two teams take 222 KiB), so
//! nothing is double-buffered: the reads wait in registers (Q, the lengths and the ids,
//! about 25 a thread, once the accumulators are written out) and go to shared memory where
//! the merge no longer reads it. The mbarrier phases carry across tokens ([`Phases`]). On
//! an H100 (quick A/B in one run against the one-token CTAs) this measured 0.965x at H=16
//! NE 512 s_q 512, 0.931x at H=32, 0.975x at NE 1024 and 0.958x with NVFP4 records; a CTA's
//! first copies, now issued right after the slot ids' barrier, took 1.2% off s_q 128 and
//! 2.6% off `stream3` at s_q 32, whose CTAs take one token (docs/performance.md has the
//! table). A cluster of C > 1 stays one token a CTA: its grid is s_q clusters, which is
//! what fills the GPU at the token counts that pick it.
//!
//! Why the stage's copies run across the lists: each team used to start its second list
//! by issuing that list's first tile and waiting for it, a whole trip to memory exposed
//! once a token (a team's SWA tile is its first of five at NE 512). Now the dequant of a
//! list's last tile issues the next list's first. On an H100 (quick A/B in one run
//! against the persistent grid alone) that measured 0.964x at s_q 512, 0.955x at s_q 128,
//! 0.932x for `stream2` at s_q 64, 0.987x for `stream3` and 0.982x for `stream4` at s_q
//! 32. A first version also issued, at stage 1, the first tile of the next list for the
//! workers with no tile of the first (most of a cluster's: `stream3` has 6 workers for 2
//! SWA tiles): 2-5% faster at one CTA a token but 6.3% slower for `stream3` and 3.8% for
//! `stream4` at s_q 32, where the token's first wave of copies, every worker's tile at
//! once, delayed the SWA tiles of the workers that stream two tiles; those workers issue
//! as their second list starts.
//!
//! Why this shape: one CTA per SM (the KV tile alone is 128 KiB of shared memory) that
//! runs a single tile from gather to merge leaves the SM idle while the records arrive;
//! here the records of tile t + 1 are loaded during tile t's MMAs and softmax, and the
//! per-token merge, epilogue and launch are paid once per token instead of once per tile.
//! Taking each tile's probabilities against the running max (rather than the tile's own
//! and rescaling two terms) lets a tile's O^T add to the running one unscaled: on sm_90a
//! the running O^T is the wgmma accumulator itself, kept in registers across the tiles and
//! scaled by alpha before each tile's MMA (32 multiplies a thread, 64 with two teams,
//! instead of a shared-memory partial read, scaled and written back every tile), and the
//! partial is written once, over the KV tile. On sm_100a each tile's O^T lands in tensor
//! memory and stage 6 folds it into a partial in its own shared-memory buffer (32 KiB).
//! The accumulation order is fixed (each worker's tiles in row order, SWA first; the merge
//! in partial order), so the output is bitwise deterministic. 32 heads take two CTAs of
//! 16 (`stream`), which read and dequantise the same records (the second from L2 when the
//! two run together), or on sm_90a one CTA of 32 (`streamh32`, below).
//!
//! Why a CTA of 32 heads (sm_90a, `Schedule::STREAMED_32_HEADS`): two CTAs of 16 heads do a
//! token's gather and dequant twice, and the dequant is most of a tile's instructions.
//! One CTA of 32 heads does it once for both MMAs' columns, as one team of 16 warps with
//! 128-row tiles. Its buffers leave no room for the fp8 stage (Q alone is 32 KiB), so both
//! record formats come into registers a tile ahead. With P's hi and lo halves in columns
//! of their own, its running O^T took 64 accumulator registers a thread and ptxas spilled
//! about 250 bytes a thread at the 128-register cap; the halves accumulate into one O^T
//! here ([`super::plan::HiLo::Accumulated`]: 32 registers), and the kernel takes 117
//! registers with fp8 compressed records and 128 with NVFP4 (ptxas 13.5), no spill. On an
//! H100 at H=32 NE 512 s_q 512 it took 166.3 us (NVFP4) and 168.5 us (fp8) against 203.4
//! and 197.4 for two 16-head CTAs (0.818x, 0.853x). The dispatch model picks it where it
//! measured faster.
//!
//! Why two teams (sm_90a): one team of 16 warps runs each tile as one dependent chain in
//! lockstep (dequant, barrier, S on two warpgroups while two wait, softmax, O, barrier), so
//! the ALUs idle while the MMAs run and the tensor cores idle while the warps dequantise:
//! Nsight Compute put issue slots at 37-39% busy with barrier stalls the largest reason.
//! Two teams of 8 warps, each streaming its own 64-row tiles with its own buffers and a
//! named barrier (1 + team), run two such chains side by side, and the warp schedulers fill
//! one team's stalls with the other's work. The second team starts its first dequant once
//! the first team has finished its own ([`Team::wait_for_the_first_team`]), so that their
//! dequants and MMAs take turns. They share Q, the staged slot ids and the cos/sin row;
//! each writes its partial over its own KV tile and the merge folds the two like two peers
//! of a cluster (`kernel::merge_stages`, [`Plan::partials`]). A team's O^T is 64
//! accumulator registers a thread (512 dims x 32 columns over 256 threads, against 32 with
//! one team); the dequant reads each 16-byte chunk of the stage as it goes rather than all
//! eight at once, which keeps the teams' kernels at 123-127 registers with no spill. The
//! two teams' buffers take 220-225 KiB; on sm_100a (whose partial has its own buffer and
//! which has no stage) the CTA stays one team. NVFP4 compressed records, which one team
//! loads into registers a tile ahead, come through the stage with two teams (their 288-byte
//! records in its 528-byte rows): a tile in registers does not fit beside the 64
//! accumulator registers. On an H100 that took 10-16% off NVFP4 at s_q 64-512 against one
//! team's register loads (0.844x at NE 1024 s_q 512, 0.896x at NE 512) and left NVFP4
//! within 1.5% of fp8 a launch (docs/performance.md has the table). On an H100 (quick A/B
//! in one run against the one-team kernel of revision 8fee372, 5 replays, two rounds) two
//! staggered teams measured 0.942x at H=16 NE 512 s_q 512, 0.909x at s_q 128, 0.893x for
//! `stream2` at s_q 64, 0.987x for `stream3` at s_q 32 (where a CTA streams one or two
//! tiles), 0.964x at H=32 and 0.939x at NE 1024 s_q 512; started together, 0-4% slower than
//! staggered (docs/performance.md has the table). The persistent CTA staggers every token,
//! though the second team's first records are in its stage before the token starts:
//! starting a CTA's later tokens together measured 1.002-1.005x at s_q 512 (fp8, H=16 and
//! 32, NE 512 and 1024) and 1.016x with NVFP4 records (H100, quick A/B in one run).
//!
//! Why clusters of streamed CTAs: a CTA takes about 4.3 us for each 128 rows it streams
//! (its teams' together) after about 6.7 us of setup and epilogue (the dispatch model's fit
//! to H100 timings), whether or not other SMs have work, so a step whose tokens leave SMs
//! idle is bound by the rows of its busiest CTA. Split gives each tile its own CTA, but
//! from about 24 tokens its clusters of 6 (NE 512) or 10 (NE 1024) no longer fit the GPU
//! at once and take a second round; a cluster of 2-4 streamed CTAs gives each token 2-4
//! SMs and 2-5 tiles per CTA in one round, the cluster merge costing about 1 us.
//! `host/dispatch.rs` models both and picks per call. Because a token splits only within a
//! cluster and a persistent CTA takes whole tokens, the time steps with rounds of whole
//! tokens (1.63x from 112 tokens to 133 at H=16 NE 512 on an H100; docs/performance.md's
//! "Where the batch size steps the time" says what a split across clusters would need).
//!
//! Why bulk copies for fp8 records: Nsight Compute put the L1's LSU data pipe at 69% of its
//! peak over the one-CTA schedule at s_q 512 (issue slots 39%, DRAM 22%): 21.1 M
//! wavefronts, of which the records' 16-byte register loads took about one per 32-byte
//! sector (7.2 M; NVFP4 records, with 2.4 M fewer sectors, took 2.5 M fewer wavefronts). A
//! bulk copy writes shared memory outside that pipe, and the dequant's reads of the stage
//! cost a wavefront per 128 bytes: 15.5 M wavefronts (57%) with the stage. On the H200 that
//! took 8-13% off the one-CTA schedule (H=16 and 32, NE 512 and 1024), 6-8% off `stream2`
//! at 64 tokens (NE 512) and `stream3` at 32 (NE 1024), and nothing measurable off
//! `stream3` at 32 tokens NE 512 (docs/performance.md has the figures). With NVFP4 records,
//! whose loads are half the bytes, the stage measured slower in one team in most shapes (up
//! to 7%; for both lists, the SWA list alone or the NVFP4 list alone; 1% faster at 128
//! tokens) and one team does not use it. Copying half or three quarters of a tile's rows
//! and loading the rest into registers (the stage sized to what fits beside the rest)
//! measured between 0.96x and 1.08x the register loads. The stage's bytes come from the
//! scores stand-in, which now shares P's (`Plan::scores_layout`).
//!
//! Why the slot ids are staged: read from global memory a tile ahead, each tile's record
//! loads waited on its slot-id load first, and ptxas (at the 128-register cap it sinks the
//! record loads below the softmax) exposed that latency in every tile; from shared memory
//! the record loads issue at once, with no register held for a list's length. On the H200
//! that took 4-8% off the one-CTA schedule with fp8 records (docs/performance.md has the
//! figures). Stage 1 loads them across the list's width and masks them by its length as it
//! stores them ([`stage_slot_ids`]), so that they need not wait for the length's load.
//!
//! Why one multiply a pair in the fp8 dequant (`Fp8Dequant::OneMultiply`): the dequant is
//! the loop's most issue-bound stage (all 16 warps at once, between two barriers), and
//! folding 2^120 into the scale takes half its multiplies out of it: the compressed list's
//! loop issued 1074 instructions a warp a tile instead of 1170 (ptxas 13.5, sm_90a), which
//! took 2-2.5% off the one-CTA schedule on the H200 (docs/performance.md has the figures).
//! The rare scales above 2^7 take a second pass ([`Fp8Dequant`]). Its pairs come from
//! sign-widened bytes (`prmt` with sign replication), one op a pair fewer, and with the
//! softmax's reduce-scatter butterfly the loop issues 1004 instructions a tile. NVFP4
//! values are looked up rather than bit-moved (`e2m1x8_to_bf16x8`: a `prmt` whose selector
//! is four magnitudes reads a table of their bf16 bytes), which needs no multiply but the
//! scale's: that loop fell from 1341 instructions a warp a tile to 934, and NVFP4 records
//! took no longer than fp8 ones (docs/performance.md has the figures). The table holds the
//! values times 2^120 (`cvt::e2m1x8_scaled`), so that the e4m3 block scale is used with its
//! bits moved to bf16's places (times 2^-120) and a run-time `prmt` selector picks its
//! byte: no multiply by 2^120 nor shift and mask a scale, 1162 -> 1141 instructions in the
//! first team's compressed-list loop (ptxas 13.5, H=16 NE 512).
//!
//! Measured and not kept: staging the next tile's records in shared memory with `cp.async`
//! a tile ahead (no records in registers) was slower on the H200 than the register loads,
//! and so was prefetching the next tile's records into L2 with `cp.async.bulk.prefetch.L2`
//! (docs/performance.md has the figures). Nor were two restructurings toward warp roles:
//! committing the O MMA by halves of the dims so that the next tile's dequant starts under
//! it (slower), and producer and consumer warpgroups passing 64-row stages through named
//! barriers (3% faster, but spilling at the register cap); docs/performance.md has the
//! figures and what they leave open. Nor was S from the dequant's registers (RS wgmma: each
//! warpgroup dequantising a quarter of the staged tile straight into the A fragments of its
//! S MMAs, Q's dims permuted to match, the partials summed in the stand-in): no spills and
//! the same instructions a tile, but 1.10-1.16x slower on the H200 at the one-CTA schedule,
//! with the MMAs inside the dequant instead of beside a barrier. Nor was tracing the two
//! teams' stages 2-6 once, the team a run-time value (half the SASS; on the H200 "no
//! instruction" stalls fell from 9.9% to 3.1% of the samples and the wait at the
//! end-of-token barrier from 7.5% to 2.2%, yet the time stayed within 1% of this kernel's
//! and NVFP4 ran 1.4-2.0% slower: the balanced teams queue on the shared-memory pipe
//! instead; docs/performance.md's "One copy of the team loop"). Nor were the stage's copies
//! preceded by L2 prefetches of the tile after next (1.01-1.11x: each is one more bulk
//! operation a row), the O MMA issued K-step by K-step or S in two accumulators (within
//! 1%), or the column max reduced by the S warps (P is written over the S stand-in, so the
//! barrier it would drop also orders those writes after every warp's reads of S). In
//! clusters, neither the teams started together (within 1%: a cluster's token waits for its
//! busiest CTA's tiles, not for the stagger) nor each worker's later tiles prefetched into
//! L2 at stage 1 (1.04-1.12x) was kept. Nor was the kernel without that barrier, its
//! softmax warps owning whole rows (1.006x at s_q 512 on an H100: 1.7% more instructions,
//! and the warps did not wait there; docs/performance.md has the figures). Nor were the
//! running max moved only by a jump above 2^8 with the O^T multiplies skipped where a
//! warp's factors are 1 (0.994-1.029x: the multiplies are not what a tile waits for), nor
//! the stage's copies issued by every warp, the S warpgroup's while its MMAs run
//! (1.013-1.022x), nor S split over K on both of a team's warpgroups, its second half in
//! the record stage, whose copies then wait for the softmax (1.010-1.071x; the later copies
//! alone 1.005-1.051x). Left out part by part on an H100, the MMAs cost 18% of the s_q 512
//! time, the dequant 13%, memory 4% and the merge's passes 2% (8% for `stream3` at s_q 32,
//! where the cluster merge is on the token's latency chain); the rest is the tile's
//! bookkeeping and each token's prologue (docs/performance.md's "Where the streamed tile's
//! time goes" and "The merge's share"). NVFP4 is slower a token than fp8 at s_q 512 because
//! its dequant issues more instructions, not fewer: 526 a warp a tile against 416 (Nsight
//! Compute on an H100), its eight values a word taking 15 integer ops to fp8's 12, and
//! ptxas, at 127 registers, copying a lookup table's word into a register before 58 of its
//! 64 lookups a tile.

use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{cluster_cta_rank, grid_dim_y};
use dsl_core::trace::Carry;
use dsl_core::trace::{Pred, SmemTile, Tensor, Val, dyn_range, smem_tile, stage};
use dsl_macros::{Carry, device};

use super::inbox::Inbox;
use super::inputs::{
    Fp8Dequant, Gathered, KvList, RowMap, Slot, gather, gather_chunk, load_staged_slot, store_tile,
};
use super::kernel::{Ctx, merge_stages, score_tile};
use super::merge::load_sinks;
use super::mma::{Mma, MmaSetup, RunningOutputs};
use super::plan::Plan;
use super::prefetch::{StagedList, TokenInputs, TokenLoads};
use super::smem::{Buffers, plain};
use super::softmax::{Reference, column_sums, fold_running, publish_running, reset_running};
use super::stage::{PhaseBefore, RawRows, StagePhase, Stages};
use super::team::{Team, buffer_name};
use crate::swap_ab_decode::ExtraRecord;

/// Stages 1 to 10 of a CTA of the token's cluster (a cluster of one when the key streams
/// by one CTA), its warps one team or two (`bufs`: each team's buffers), for token
/// `ctx.token` and every grid's y-th token after it.
#[device]
pub(super) fn run(
    ctx: &Ctx<'_>,
    bufs: &[Buffers],
    setup: MmaSetup,
    precast: Option<Tensor<f32, 3>>,
) {
    let (plan, tid) = (ctx.plan, ctx.tid);
    // Each head's alpha (row 0) and new running max (row 1) of a team's current tile.
    let rescales: Vec<SmemTile> = (0..plan.teams)
        .map(|t| {
            smem_tile(
                &buffer_name("rescale", t),
                plain(&[2, i64::from(plan.heads)], 4),
            )
        })
        .collect();
    // A cluster of one has no rank: its CTA takes every tile.
    let rank = (plan.cluster > 1).then(cluster_cta_rank);
    let lists = staged_lists(ctx, plan);
    // With NVFP4 compressed records one team's loads into registers measured faster on the
    // H200 than the stage (for both lists or for the SWA list alone): their loads are half
    // the bytes. Two teams have no registers to spare for a tile ahead.
    let stage_records = ctx.extra.record == ExtraRecord::Fp8 || plan.teams > 1;
    let stages = stage_records
        .then(|| Stages::allocate_if_they_fit(plan, tid))
        .flatten();
    // A cluster's CTA takes one token (its grid): its inbox is armed once.
    let inbox = stages
        .as_ref()
        .and_then(|stages| Inbox::over_stages(plan, tid, &stages.all));
    let raws: Vec<Option<RawRows>> = match stages {
        Some(stages) => stages.teams.into_iter().map(Some).collect(),
        None => (0..plan.teams).map(|_| None).collect(),
    };
    let first_tiles = FirstTiles {
        lists: &lists,
        raws: &raws,
        rank,
    };

    stage("1: the first token's lengths, slot ids, position and Q; its first records in flight");
    let first_loads = TokenLoads::issue(ctx, &lists, ctx.token);
    let merge_rank = rank.unwrap_or(Val::constant(0));
    let mut phases = Phases::start();
    let mut inputs = first_tiles.stage(ctx, first_loads, phases.stage, || Pred::constant(true));

    let tokens = ctx.params.q.extent(0).cast::<u32>();
    let mut token = ctx.token;
    while token < tokens {
        let ctx = ctx.for_token(token);
        stage("1: Q RoPE -> shared [16, 512], cos/sin; empty running statistics");
        inputs.store(ctx.buf);
        for team_buf in bufs {
            reset_running(plan, team_buf, tid);
        }
        if plan.teams > 1 {
            // The S MMAs read Q: with one team the first tile's fence and barrier publish
            // it to the async proxy, but two teams meet only here.
            fence_proxy_async_shared();
        }
        sync_threads();

        let streams = TeamStreams {
            lists: &lists,
            limits: &inputs.limits,
            rank,
            phases,
        };
        phases = in_own_team(&ctx, phases, |index, team| {
            let team_ctx = ctx.in_team(&bufs[index], team);
            streams.run(&team_ctx, &setup, raws[index].as_ref(), &rescales[index])
        });

        // Held across the tiles, the sink logits took ptxas to the 128-register cap of the
        // teams' kernels (127 from 123): a streamed CTA loads them as its merge starts.
        let sinks = load_sinks(plan, (tid, merge_rank), ctx.params.sink, &ctx.query.heads);
        // Beside the merge, the CTA's next token: its reads once the tiles' buffers are
        // free (past the CTA's last token, the last one's again, and no copies: no read
        // leaves the tensors), then its slot ids staged and, after a barrier, its first
        // records in flight.
        let next = token + grid_dim_y();
        inputs = merge_stages(
            &ctx,
            (merge_rank, &sinks, inbox.as_ref()),
            precast,
            || TokenLoads::issue(&ctx, &lists, next.min(tokens - 1u32)),
            |loads| first_tiles.stage(&ctx, loads, phases.stage, || next.lt(tokens)),
        );
        token = next;
    }
    setup.release(plan, ctx.warp);
}

/// The lists with tiles in the key, in the token's order (SWA, then compressed), with
/// their slot ids' shared buffers.
fn staged_lists<'a>(ctx: &'a Ctx<'_>, plan: &Plan) -> Vec<StagedList<'a>> {
    let [swa_tiles, extra_tiles] = [&ctx.swa, &ctx.extra].map(|list| team_tiles(plan, list.width));
    [
        ("swa_ids", &ctx.swa, swa_tiles, 0),
        ("extra_ids", &ctx.extra, extra_tiles, swa_tiles),
    ]
    .into_iter()
    .filter(|(_, _, tiles, _)| *tiles > 0)
    .map(|(name, list, _, tiles_before)| StagedList {
        list,
        ids: smem_tile(name, plain(&[i64::from(list.width)], 4)),
        tiles_before,
    })
    .collect()
}

/// How many mbarrier phases a team has passed in the CTA's earlier tokens: its MMA
/// barriers' (sm_100a: one a tile) and its stage's (one a tile, one a token for the copies
/// past its last tile, and one for the empty first copies of a first list that had no
/// tile for it: [`TileSource`]).
#[derive(Clone, Copy, Carry)]
struct Phases {
    tiles: Val<u32>,
    stage: Val<u32>,
}

impl Phases {
    fn start() -> Phases {
        Phases {
            tiles: Val::constant(0),
            stage: Val::constant(0),
        }
    }
}

/// Each team's first tile of the token's first list, issued into its stage ahead of its
/// stream (phase 0 of the token): for the CTA's first token after stage 1's barrier, for
/// every later one halfway through the merge of the token before, so that its records
/// arrive while that merge runs. Nothing where the records come into registers.
struct FirstTiles<'a> {
    lists: &'a [StagedList<'a>],
    raws: &'a [Option<RawRows>],
    rank: Option<Val<u32>>,
}

impl FirstTiles<'_> {
    /// A token's slot ids from `loads` into shared memory, a barrier, then its first
    /// tiles' copies (none where the records come into registers), the stage's phase
    /// `phase` of this thread's team, where `when` holds. Returns what stage 1 still
    /// stores.
    #[device]
    fn stage(
        &self,
        ctx: &Ctx<'_>,
        loads: TokenLoads,
        phase: Val<u32>,
        when: impl FnOnce() -> Pred,
    ) -> TokenInputs {
        let inputs = loads.stage_ids(ctx, self.lists);
        // Each team's threads store ids that the other team's issuers read.
        in_own_team(ctx, (), |_, team| team.meet_before_the_cta());
        sync_threads();
        if self.raws.iter().all(Option::is_none) {
            return inputs;
        }
        if when() {
            self.issue(ctx, &inputs.limits, phase);
        }
        inputs
    }

    /// Each team's copies of its first list's first tile.
    #[device]
    fn issue(&self, ctx: &Ctx<'_>, limits: &[Val<i32>], phase: Val<u32>) {
        in_own_team(ctx, (), |index, team| {
            let worker = Worker::of(ctx.plan, &team, self.rank);
            let first = ListShare::of_worker(ctx.plan, &self.lists[0], limits[0], worker);
            if let Some(raw) = &self.raws[index] {
                let before = PhaseBefore::Unseen;
                first.issue(raw, first.first_row(), StagePhase { phase, before }, &team);
            }
        })
    }
}

/// `body` for this thread's team and the team's index: the CTA's one team, or of two the
/// one this thread's warp is in (a runtime branch, `body` traced in each arm; `otherwise`
/// is what the branch starts from).
#[device]
fn in_own_team<R: Carry>(ctx: &Ctx<'_>, otherwise: R, body: impl Fn(usize, Team) -> R) -> R {
    match ctx.plan.teams {
        1 => body(0, ctx.team),
        _ => {
            let mut result = otherwise;
            if ctx.warp < 8 {
                result = body(0, Team::of_two(0, ctx.tid, ctx.warp, ctx.lane));
            } else {
                result = body(1, Team::of_two(1, ctx.tid, ctx.warp, ctx.lane));
            }
            result
        }
    }
}

/// What every team streams of a token: the lists with their staged slot ids and limits, in
/// order, this CTA's rank in its cluster (none: a cluster of one), and the phases its
/// barriers passed in earlier tokens.
struct TeamStreams<'a> {
    lists: &'a [StagedList<'a>],
    limits: &'a [Val<i32>],
    rank: Option<Val<u32>>,
    phases: Phases,
}

impl TeamStreams<'_> {
    /// Stages 2-6 of `ctx`'s team: its share of every list's tiles into its running outputs,
    /// then those into its partial and its statistics to its entry. Returns the phases its
    /// barriers have passed after this token.
    #[device]
    fn run(
        &self,
        ctx: &Ctx<'_>,
        setup: &MmaSetup,
        raw: Option<&RawRows>,
        rescale: &SmemTile,
    ) -> Phases {
        let (plan, buf, team) = (ctx.plan, ctx.buf, &ctx.team);
        let mma = setup.after_sync(plan, buf, team);
        let mut running = mma.running_outputs(plan, buf, team);
        let worker = Worker::of(plan, team, self.rank);
        let shares = team_shares(plan, self.lists, self.limits, worker);
        let mut done = Val::<u32>::constant(0);
        let mut base = self.phases.stage;
        for (index, share) in shares.iter().enumerate() {
            // Through the stage, where the previous list had no tile for the team, this
            // list's first issues as the list starts, one phase past the previous list's
            // empty first.
            let first_at_start =
                (index > 0 && raw.is_some()).then(|| shares[index - 1].tiles().eq(0u32));
            if let Some(at_start) = first_at_start {
                base += at_start.select(1u32, 0u32);
            }
            let source = TileSource {
                share,
                following: shares.get(index + 1),
                first_at_start,
                stage: raw,
                base,
            };
            let phases = TilePhases {
                mma: self.phases.tiles,
                done,
            };
            (running, done) = stream_list(ctx, &mma, running, rescale, &source, phases);
        }
        team.streamed_no_tile(done);
        stage("6: the running outputs into the partial [H, 512], the statistics to the peers");
        running.finish(plan, buf);
        if let Some(rank) = self.rank {
            publish_running(plan, buf, team, rank);
        }
        team.meet_before_the_cta();
        Phases {
            tiles: self.phases.tiles + done,
            stage: base + done + 1u32,
        }
    }
}

/// Which of the token's W = C x teams workers a team of a CTA is: the token's tile g is
/// worker g % W's, and worker `team C + rank` is team `team` of cluster rank `rank`, so
/// that the cluster's SMs take the tiles in turn and each SM's two teams tiles C apart.
#[derive(Clone, Copy)]
struct Worker {
    /// `team C + rank`; none where W = 1 (one team, no cluster).
    index: Option<Val<u32>>,
    count: u32,
}

impl Worker {
    #[device]
    fn of(plan: &Plan, team: &Team, rank: Option<Val<u32>>) -> Worker {
        let first_of_team = team.index * plan.cluster;
        let index = match rank {
            Some(rank) if first_of_team == 0 => Some(rank),
            Some(rank) => Some(rank + first_of_team),
            None if plan.teams > 1 => Some(Val::constant(first_of_team)),
            None => None,
        };
        Worker {
            index,
            count: plan.partials(),
        }
    }
}

/// The tiles of a list `width` rows wide, of a team's `kv_rows` rows each.
fn team_tiles(plan: &Plan, width: u32) -> u32 {
    width.div_ceil(plan.kv_rows)
}

/// How many of a token's tiles (both lists full) the busiest CTA of a streamed cluster
/// takes, its teams' together, by [`Worker`]'s rule: the host's dispatch model times a
/// streamed launch by it, since a CTA's teams share its SM. `stream4` at NE 512 takes 3
/// of a token's 10 tiles on its first CTA, `stream3` 4, though both have workers of two.
pub(crate) fn busiest_cta_tiles(plan: &Plan) -> u32 {
    let widths = [plan.key.swa_width, plan.key.extra_width];
    let tiles: u32 = widths.map(|w| team_tiles(plan, w as u32)).iter().sum();
    let workers = plan.partials();
    let tiles_of = |worker: u32| tiles.saturating_sub(worker).div_ceil(workers);
    (0..plan.cluster)
        .map(|rank| {
            (0..plan.teams)
                .map(|team| tiles_of(team * plan.cluster + rank))
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// The tiles of a list one worker streams: of those whose first row is below `limit`,
/// every one (a single worker), or tiles `first`, `first + W`, ... of W workers.
struct ListShare<'a> {
    staged: &'a StagedList<'a>,
    limit: Val<i32>,
    rows: u32,
    round: Option<(Val<u32>, u32)>,
}

/// `worker`'s shares of the token's lists, in order.
#[device]
fn team_shares<'a>(
    plan: &Plan,
    lists: &'a [StagedList<'a>],
    limits: &[Val<i32>],
    worker: Worker,
) -> Vec<ListShare<'a>> {
    lists
        .iter()
        .zip(limits)
        .map(|(staged, &limit)| ListShare::of_worker(plan, staged, limit, worker))
        .collect()
}

impl<'a> ListShare<'a> {
    /// The share of `staged`'s list of `worker`; the list's first tile is the token's
    /// `tiles_before`-th, and the token's tile `g` is worker `g % W`'s.
    #[device]
    fn of_worker(plan: &Plan, staged: &'a StagedList<'a>, limit: Val<i32>, worker: Worker) -> Self {
        let workers = worker.count;
        let tiles_before = staged.tiles_before;
        let round = worker
            .index
            .map(|w| ((w + (workers - tiles_before % workers)) % workers, workers));
        ListShare {
            staged,
            limit,
            rows: plan.kv_rows,
            round,
        }
    }

    fn list(&self) -> &'a KvList {
        self.staged.list
    }

    /// How many of the list's tiles whose first row is below the limit are this share's.
    #[device]
    fn tiles(&self) -> Val<u32> {
        let rows = self.rows;
        let live_tiles = (self.limit.max(0i32).bitcast::<u32>() + (rows - 1)) / rows;
        match self.round {
            None => live_tiles,
            Some((first, workers)) => (live_tiles.max(first) - first + (workers - 1)) / workers,
        }
    }

    /// The stage's copies of the tile at `row0` (nothing for rows past the limit) as its
    /// phase `phase`.
    #[track_caller]
    fn issue(&self, stage: &RawRows, row0: Val<u32>, phase: StagePhase, team: &Team) {
        stage.issue(self.staged.list, &self.staged.ids, row0, phase, team);
    }

    /// The first row of the share's first tile.
    #[device]
    fn first_row(&self) -> Val<u32> {
        match self.round {
            None => Val::constant(0),
            Some((first, _)) => first * self.rows,
        }
    }

    /// The first row of the share's `i`-th tile.
    #[device]
    fn row0(&self, i: Val<u32>) -> Val<u32> {
        let tile = match self.round {
            None => i,
            Some((first, workers)) => first + i * workers,
        };
        tile * self.rows
    }
}

/// A team's tiles before a list: `done` of the token's (from 0), and `mma` of the CTA's
/// earlier tokens, whose MMA barriers passed a phase each.
struct TilePhases {
    mma: Val<u32>,
    done: Val<u32>,
}

/// Streams this team's `share` of a list's tiles into `running`, after the tiles `phases`
/// counts. Returns the running outputs and the token's tile count after these tiles.
#[device]
fn stream_list<'m>(
    ctx: &Ctx<'_>,
    mma: &'m Mma,
    running: RunningOutputs<'m>,
    rescale: &SmemTile,
    source: &TileSource<'_>,
    phases: TilePhases,
) -> (RunningOutputs<'m>, Val<u32>) {
    let (plan, buf, team) = (ctx.plan, ctx.buf, &ctx.team);
    let share = source.share;
    let list = share.list();
    let map = RowMap::new(team, plan.kv_rows, list);

    stage("2: the list's first tile in flight");
    let count = share.tiles();
    let mut next = source.start(&map, team);
    let mut running = running;
    let mut done = phases.done;
    for i in dyn_range(0u32, count) {
        stage("2: this tile's dequant into shared memory; the next tile's loads in flight");
        team.wait_for_the_first_team(done);
        let row0 = share.row0(i);
        let tile = source.take(&map, &next, row0, done);
        let words = |k| source.chunk(&map, &tile, k);
        let reload = |k| source.chunk_again(&map, &tile, row0, k);
        let dequant = fp8_dequant(ctx, &reload);
        store_tile(buf, list, &map, &tile, &words, team, dequant);
        let row0 = share.row0(i + 1u32);
        next = source.load_registers(&map, row0);
        // The MMAs read what the threads stored: make it visible to the async proxy.
        fence_proxy_async_shared();
        team.sync();
        team.first_dequant_done(done);
        // Every thread has read the stage: the next tile's copies may overwrite it.
        source.issue_next(i + 1u32, count, done, team);
        let parity = (phases.mma + done) & 1u32;

        let probs = score_tile(ctx, mma, parity, Reference::RunningMax(rescale));
        stage("5: O[512, 2H] = O * alpha + KV^T . [P_hi | P_lo]; column sums");
        running = running.add_tile(plan, buf, team, rescale);
        column_sums(plan, buf, &probs, team);

        stage("6: the tile's O^T is in the running outputs; running statistics");
        running.fold_tile(plan, buf, team, parity, rescale);
        // After fold_tile's barrier every column sum is in; the next tile rewrites the
        // sums and `rescale` only after its own barriers, so no barrier follows.
        fold_running(plan, buf, rescale, team);
        done += 1u32;
    }
    (running, done)
}

/// Where a list's tiles come from: the stage ([`RawRows`]: one bulk copy a row), or loads
/// into registers a tile ahead.
///
/// The stage's copies of a team's tiles run across its lists: the first list's first tile
/// is in flight before the stream ([`FirstTiles`]); after each tile's dequant the team
/// issues its next tile, of this list's share or, after the share's last, the following
/// list's first, so that the list does not start by waiting for its records. Where the
/// first list has no tile for the team (a worker of a cluster past the SWA tiles), its
/// first copies copy nothing, and the next list's first issue as that list starts: at
/// stage 1 they would add to the token's first wave of copies, which holds the SWA tiles
/// that a cluster's slowest workers stream first (every worker's first tile at once
/// measured 6% slower for `stream3` at s_q 32). Past the last list's last tile the copies
/// are of its next tile, whose ids are -1: the phase completes with nothing copied, and
/// only its issuers wait for it, before their next arrival ([`RawRows::issue`]: an
/// arrival before it completed would count towards it). So no tile count is held in the
/// loop: the team's tile with `done` before it is the stage's phase `base + done`
/// ([`TileSource::phase`]), where `base` counts the phases before the list's first tile
/// (the CTA's earlier tokens, and an empty first list). Loads into registers stay within
/// a list (the two lists' records differ in form), each list's first issued as it starts.
struct TileSource<'a> {
    share: &'a ListShare<'a>,
    following: Option<&'a ListShare<'a>>,
    first_at_start: Option<Pred>,
    stage: Option<&'a RawRows>,
    base: Val<u32>,
}

impl<'a> TileSource<'a> {
    /// The stage's phase of the team's tile with `done` of the token's before it.
    fn phase(&self, done: Val<u32>) -> Val<u32> {
        self.base + done
    }

    #[track_caller]
    fn slot(&self, map: &RowMap, row0: Val<u32>) -> Slot {
        load_staged_slot(self.share.list(), &self.share.staged.ids, map, row0)
    }

    /// The tile at `row0` into registers, issued now; none through the stage. The staged
    /// slot ids are -1 past the limit: the gathers need no limit.
    #[track_caller]
    fn load_registers(&self, map: &RowMap, row0: Val<u32>) -> Option<Gathered> {
        self.stage
            .is_none()
            .then(|| gather(self.share.list(), map, &self.slot(map, row0), None))
    }

    /// The list's first tile: its copies where they issue as the list starts (the loop-top
    /// barrier has passed the previous list's empty copies), or its loads into registers.
    #[device]
    fn start(&self, map: &RowMap, team: &Team) -> Option<Gathered> {
        if let (Some(stage), Some(at_start)) = (self.stage, self.first_at_start) {
            if at_start {
                let first = StagePhase {
                    phase: self.base,
                    before: PhaseBefore::Unseen,
                };
                self.share.issue(stage, self.share.first_row(), first, team);
            }
        }
        self.load_registers(map, self.share.first_row())
    }

    /// After the dequant of the share's tile `next - 1` of `count`, the CTA's tile `done`:
    /// the stage's copies of the team's next tile, the share's tile `next` or the following
    /// list's first.
    #[device]
    fn issue_next(&self, next: Val<u32>, count: Val<u32>, done: Val<u32>, team: &Team) {
        let Some(stage) = self.stage else {
            return;
        };
        // The phase before is the tile just dequantised, which every thread waited for.
        let share = self.share;
        let phase = StagePhase {
            phase: self.phase(done) + 1u32,
            before: PhaseBefore::Waited,
        };
        match self.following {
            None => share.issue(stage, share.row0(next), phase, team),
            Some(following) => {
                if next < count {
                    share.issue(stage, share.row0(next), phase, team);
                } else {
                    following.issue(stage, following.first_row(), phase, team);
                }
            }
        }
    }

    /// The tile at `row0` for the dequant, the CTA's tile `done`: `registers`, or the stage
    /// once its copies are in.
    #[track_caller]
    fn take(
        &self,
        map: &RowMap,
        registers: &Option<Gathered>,
        row0: Val<u32>,
        done: Val<u32>,
    ) -> Gathered {
        match (self.stage, registers) {
            (Some(stage), _) => {
                stage.wait(self.phase(done) & 1u32);
                stage.gathered(self.share.list(), map, &self.slot(map, row0))
            }
            (None, Some(registers)) => registers.clone(),
            (None, None) => unreachable!("a list without the stage loads into registers"),
        }
    }

    /// Chunk `k` of values of the tile `tile` took: loaded from the stage now, or held in
    /// registers.
    #[track_caller]
    fn chunk(&self, map: &RowMap, tile: &Gathered, k: usize) -> [Val<u32>; 4] {
        match self.stage {
            Some(stage) => stage.chunk(map, tile, k),
            None => tile.held(k),
        }
    }

    /// Chunk `k` of the tile at `row0` again (the wide-scale pass), whose first read was
    /// `first`: from the stage, which still holds its rows, or global memory.
    #[track_caller]
    fn chunk_again(
        &self,
        map: &RowMap,
        first: &Gathered,
        row0: Val<u32>,
        k: usize,
    ) -> [Val<u32>; 4] {
        match self.stage {
            Some(stage) => stage.chunk(map, first, k),
            None => gather_chunk(self.share.list(), map, &self.slot(map, row0), k),
        }
    }
}

/// How the streamed tiles scale fp8 records: one multiply a pair where the compressed
/// records are fp8 too, or where two teams stage every record. With NVFP4 compressed records
/// in one team's registers only the SWA list is fp8 (one tile of a token's five at NK
/// 128), and one multiply there made ptxas spill 16 bytes at the 128-register cap, so
/// that kernel keeps two.
fn fp8_dequant<'a>(ctx: &Ctx<'_>, reload: &'a dyn Fn(usize) -> [Val<u32>; 4]) -> Fp8Dequant<'a> {
    if ctx.extra.record == ExtraRecord::Fp8 || ctx.plan.teams > 1 {
        Fp8Dequant::OneMultiply { reload }
    } else {
        Fp8Dequant::TwoMultiplies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::{CompileKey, Schedule};

    fn busiest(key: &str, schedule: Schedule) -> u32 {
        let key: CompileKey = key.parse().unwrap();
        busiest_cta_tiles(&Plan::new(&key.with_schedule(schedule)))
    }

    /// Two teams of 64-row tiles (a token's 10 at NE 512, 18 at NE 1024) or one team of
    /// 128 rows (the 32-head CTA: 5), dealt out as `Worker` says.
    #[test]
    fn the_busiest_cta_takes_its_teams_tiles_together() {
        let ne512 = "h16_nk128_ne512_fp8_p64x64_sm90a";
        let counts = (1..=4).map(|c| busiest(ne512, Schedule::streamed(c)));
        assert_eq!(counts.collect::<Vec<_>>(), [10, 5, 4, 3]);
        let ne1024 = "h16_nk128_ne1024_fp8_p64x64_sm90a";
        let counts = (1..=4).map(|c| busiest(ne1024, Schedule::streamed(c)));
        assert_eq!(counts.collect::<Vec<_>>(), [18, 9, 6, 5]);
        let h32 = "h32_nk128_ne512_nvfp4_p64x64_sm90a";
        assert_eq!(busiest(h32, Schedule::STREAMED_32_HEADS), 5);
    }
}
