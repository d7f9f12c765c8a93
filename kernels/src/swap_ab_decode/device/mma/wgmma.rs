//! sm_90a: both MMAs through [`WgmmaTiled`] with their accumulators in registers; S goes
//! through a shared-memory stand-in for the softmax (the module docs of `mma` say how the
//! tiles lie).

use dsl_core::arch::memory::{load, load_vec};
use dsl_core::arch::operand::SmemOperand;
use dsl_core::arch::sm90::wgmma;
use dsl_core::layout::{ComposedLayout, IntTuple, Layout, Major, Swizzle};
use dsl_core::tensor::{Regs, Shared, Tensor, WgmmaOperandA, WgmmaThread, WgmmaTiled};
use dsl_core::trace::{SmemTile, Val, trace_error};
use dsl_macros::device;
use half::bf16;

use super::{
    PartialUpdate, SWA_STEPS, TILE_STEPS, TileRows, cell_offsets, partial_as_outputs_tile,
    store_summed, value_operands,
};
use crate::swap_ab_decode::HEAD_DIM;
use crate::swap_ab_decode::device::plan::Plan;
use crate::swap_ab_decode::device::smem::{Buffers, checked};
use crate::swap_ab_decode::device::softmax::row_and_group;
use crate::swap_ab_decode::device::team::Team;

/// sm_90a: a team's tilings and its shared-memory stand-in for S `[kv_rows, H]` f32.
pub struct WgmmaStage {
    scores_split: ScoresSplit,
    outputs_mma: WgmmaTiled,
    team: Team,
}

/// How the S warpgroups share S = KV . Q^T and where its scores wait for the softmax.
enum ScoresSplit {
    /// Warpgroup g computes rows `64 g ..` of the tile over all of K, into rows `64 g ..`
    /// of the stand-in `scores`.
    Rows {
        mma: WgmmaTiled,
        scores: SmemTile,
        warpgroups: u32,
    },
    /// Two warpgroups compute the tile's 64 live rows ([`Plan::scores_split_k`]),
    /// warpgroup g over K-steps `16 g .. 16 g + 16` into `halves[g]` (the stand-in's rows
    /// `64 g ..`), which [`WgmmaStage::load_scores`] adds (two terms: the same sum in either
    /// order). Each MMA chain is half as long, and no MMA reads the 64 rows that hold no
    /// record.
    K {
        mma: WgmmaTiled,
        halves: [SmemTile; 2],
    },
}

/// K-steps of S (16 dims each), and those a warpgroup takes when two split K.
const SCORES_STEPS: i64 = (HEAD_DIM / 16) as i64;
const SCORES_HALF_STEPS: i64 = SCORES_STEPS / 2;

impl WgmmaStage {
    /// S is `m64nH` over a warpgroup a 64 rows of the team's KV tile (the first one or
    /// two of the team's), or over two that split K; O^T `m64n2H` (`m64nH` where P's
    /// halves accumulate together) over all of the team's warpgroups.
    #[track_caller]
    pub(super) fn new(plan: &Plan, buf: &Buffers, team: &Team) -> WgmmaStage {
        let heads = plan.heads;
        let scores_atom = wgmma::MmaF16Bf16Ss::bf16(heads, Major::K, Major::K);
        let scores_split = if plan.scores_split_k() {
            let half = |h| buf.p.view(checked("scores", plan.scores_half_layout(h)));
            ScoresSplit::K {
                mma: WgmmaTiled::ss(scores_atom, 1, 64, i64::from(heads)),
                halves: [half(0), half(1)],
            }
        } else {
            let warpgroups = plan.kv_rows / 64;
            ScoresSplit::Rows {
                mma: WgmmaTiled::ss(
                    scores_atom,
                    warpgroups,
                    i64::from(plan.kv_rows),
                    i64::from(heads),
                ),
                scores: buf.p.view(checked("scores", plan.scores_layout())),
                warpgroups,
            }
        };
        WgmmaStage {
            scores_split,
            outputs_mma: WgmmaTiled::ss(
                wgmma::MmaF16Bf16Ss::bf16(plan.outputs_columns(), Major::MN, Major::MN),
                team.warpgroups(),
                HEAD_DIM as i64,
                i64::from(plan.outputs_columns()),
            ),
            team: *team,
        }
    }

    /// This thread's part of the O MMA, over the team's warpgroups.
    #[track_caller]
    fn outputs_thread(&self) -> WgmmaThread {
        self.outputs_mma.thread_in_cta(self.team.first_warpgroup())
    }

    /// The S warpgroups compute S and store it to the stand-in.
    #[device]
    pub(super) fn scores(&self, buf: &Buffers) {
        match &self.scores_split {
            ScoresSplit::Rows {
                mma,
                scores,
                warpgroups,
            } => {
                if self.team.warp < 4 * *warpgroups {
                    let thr = mma.thread_in_cta(self.team.first_warpgroup());
                    let kv = thr.partition_a(&buf.kv.tensor::<bf16>(), Major::K);
                    let q = thr.partition_b(&buf.q.tensor::<bf16>());
                    let acc = thr.partition_fragment_c();
                    scores_over_k_steps(&thr, (&acc, &kv, &q), 0..SCORES_STEPS, scores);
                }
            }
            ScoresSplit::K { mma, halves } => {
                if self.team.warp < 8 {
                    let thr = mma.thread_in_cta(self.team.first_warpgroup());
                    let live_rows = buf
                        .kv
                        .tensor::<bf16>()
                        .local_tile(&[64, HEAD_DIM as i64], (0u32, 0u32));
                    let kv = thr.partition_a(&live_rows, Major::K);
                    let q = thr.partition_b(&buf.q.tensor::<bf16>());
                    let acc = thr.partition_fragment_c();
                    // Each path commits, waits for and stores its own MMAs (`outputs` says
                    // why).
                    let half = |g: usize| {
                        let first = SCORES_HALF_STEPS * g as i64;
                        let steps = first..first + SCORES_HALF_STEPS;
                        scores_over_k_steps(&thr, (&acc, &kv, &q), steps, &halves[g]);
                    };
                    if self.team.warp < 4 {
                        half(0);
                    } else {
                        half(1);
                    }
                }
            }
        }
    }

    #[device]
    pub(super) fn load_scores(&self, plan: &Plan) -> Vec<Val<f32>> {
        self.team.sync();
        let cols = plan.cols_per_thread;
        let (_, group, row) = row_and_group(plan, &self.team);
        let first = group * cols;
        let mut out = Vec::new();
        for k4 in 0..cols / 4 {
            let col = first + 4 * k4;
            match &self.scores_split {
                ScoresSplit::Rows { scores, .. } => {
                    out.extend(load_vec::<f32, 4, _>(scores.at(row, col)));
                }
                // Rows past the live 64 are masked by their valid flags: any sum will do.
                ScoresSplit::K { halves, .. } => {
                    let live_row = row & 63u32;
                    let low = load_vec::<f32, 4, _>(halves[0].at(live_row, col));
                    let high = load_vec::<f32, 4, _>(halves[1].at(live_row, col));
                    out.extend((0..4).map(|e| low[e] + high[e]));
                }
            }
        }
        out
    }

    /// Every warpgroup issues its rows of O^T, onto `running` (the streamed schedule's
    /// fragment) or into a fresh fragment; the caller waits in stage 6.
    #[device]
    pub(super) fn outputs(
        &self,
        plan: &Plan,
        buf: &Buffers,
        rows: TileRows,
        running: Option<Tensor<f32, Regs>>,
    ) -> Tensor<f32, Regs> {
        let thr = self.outputs_thread();
        let (v_t, p) = value_operands(plan, buf);
        let v_t = thr.partition_a(&v_t, Major::MN);
        let p: Vec<_> = p.iter().map(|p| thr.partition_b(p)).collect();
        let onto = running.is_some();
        let acc = running.unwrap_or_else(|| thr.partition_fragment_c());
        let issue = |steps: std::ops::Range<i64>| {
            wgmma::fence();
            for (i, p) in p.iter().enumerate() {
                thr.gemm_k_steps(&acc, &v_t, p, steps.clone(), onto || i > 0);
            }
            wgmma::commit_group();
        };
        match rows {
            TileRows::All => issue(0..i64::from(plan.kv_rows / 16)),
            TileRows::ByRank(rank) => match TileRows::whole_tile_at(plan, rank) {
                // Each path fences and commits its own wgmmas: where the paths join with
                // MMAs in flight, ptxas 13.0 (the JIT of CUDA 13.0 drivers) injects a fence
                // of its own and reports it (C7519).
                Some(whole) => {
                    if whole {
                        issue(0..TILE_STEPS);
                    } else {
                        issue(0..SWA_STEPS);
                    }
                }
                None => issue(0..SWA_STEPS),
            },
        }
        acc
    }

    /// Stage 6 once the fragment is complete: O = hi + lo to the partial.
    #[track_caller]
    pub(super) fn store_partial(
        &self,
        plan: &Plan,
        buf: &Buffers,
        acc: &Tensor<f32, Regs>,
        update: PartialUpdate<'_>,
    ) {
        let partial = partial_as_outputs_tile(plan, buf);
        let thr = self.outputs_thread();
        let head_of = |i| thr.coord_c(i).1 % plan.heads;
        store_summed(&thr.partition_c(&partial), acc, update, head_of);
    }

    /// An empty running O^T: a zeroed fragment.
    #[track_caller]
    pub(super) fn empty_outputs(&self) -> Tensor<f32, Regs> {
        self.outputs_thread().partition_fragment_c()
    }

    /// Issues `running` (scaled by each head's alpha, `rescale` row 0) += V^T . P^T over
    /// the tile's rows.
    #[track_caller]
    pub(super) fn add_tile(
        &self,
        plan: &Plan,
        buf: &Buffers,
        rescale: &SmemTile,
        running: Tensor<f32, Regs>,
    ) -> Tensor<f32, Regs> {
        let thr = self.outputs_thread();
        let alpha = thr.partition_c(&head_factors_as_outputs_tile(plan, rescale));
        let acc = scaled(&running, &alpha);
        self.outputs(plan, buf, TileRows::All, Some(acc))
    }
}

/// `thr`'s S MMAs over K-steps `steps` into `acc` (from zero), committed and waited for,
/// then stored to its part of `scores`.
#[track_caller]
fn scores_over_k_steps(
    thr: &WgmmaThread,
    (acc, kv, q): (&Tensor<f32, Regs>, &WgmmaOperandA, &SmemOperand),
    steps: std::ops::Range<i64>,
    scores: &SmemTile,
) {
    wgmma::fence();
    thr.gemm_k_steps(acc, kv, q, steps, false);
    wgmma::commit_group();
    wgmma::wait_group(0);
    thr.partition_c(&scores.tensor::<f32>()).store(acc);
}

/// Waits for this thread's O MMAs, then for every warpgroup's of the team, before anyone
/// overwrites the KV tile they read.
#[device]
pub(super) fn wait_for_outputs(team: &Team) {
    wgmma::wait_group(0);
    team.sync();
}

/// Row 0 of `rescale` `[2, H]` (a factor per head) as O^T's C tile `[512 dims, (H, c)]`:
/// every dim and each accumulator column of a head (hi and lo, or their sum) see the
/// head's factor.
#[track_caller]
fn head_factors_as_outputs_tile(plan: &Plan, rescale: &SmemTile) -> Tensor<f32, Shared> {
    let heads = i64::from(plan.heads);
    let columns = i64::from(plan.hi_lo.columns());
    let layout = Layout::new(
        IntTuple::tuple([
            IntTuple::from(HEAD_DIM as i64),
            IntTuple::tuple([IntTuple::from(heads), IntTuple::from(columns)]),
        ]),
        IntTuple::tuple([
            IntTuple::from(0),
            IntTuple::tuple([IntTuple::from(1), IntTuple::from(0)]),
        ]),
    )
    .and_then(|layout| ComposedLayout::new(Swizzle::NONE, 0, layout, 4));
    rescale
        .view(checked("head factors over O^T", layout))
        .tensor::<f32>()
}

/// `acc` times `factors` (a partition of `acc`'s shape), elementwise: each distinct cell of
/// `factors` is loaded once.
#[track_caller]
fn scaled(acc: &Tensor<f32, Regs>, factors: &Tensor<f32, Shared>) -> Tensor<f32, Regs> {
    let (cells, registers) = match (cell_offsets(factors), acc.layout().to_static()) {
        (Ok(cells), Ok(registers)) => (cells, registers),
        (Err(e), _) | (_, Err(e)) => {
            trace_error(format!("scaling a fragment by {factors:?}: {e}"));
            return acc.clone();
        }
    };
    let mut loaded: Vec<(i64, Val<f32>)> = Vec::new();
    let mut values: Vec<Option<Val<f32>>> = vec![None; acc.regs().len()];
    for (i, cell) in cells.into_iter().enumerate() {
        let factor = match loaded.iter().find(|(c, _)| *c == cell) {
            Some((_, f)) => *f,
            None => {
                let f: Val<f32> = load(factors.at(IntTuple::from(i as i64)));
                loaded.push((cell, f));
                f
            }
        };
        let register = registers.offset_of_index(i as i64).unwrap_or_default();
        values[register as usize] = Some(acc.get(i as i64) * factor);
    }
    let values: Vec<Val<f32>> = values
        .into_iter()
        .map(|v| v.expect("a fragment's layout covers every register"))
        .collect();
    Tensor::from_values(&values, acc.layout().clone())
}
