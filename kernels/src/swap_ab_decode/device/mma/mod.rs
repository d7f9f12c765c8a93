//! The stages that differ by target: the two MMAs and where their accumulators live, through
//! the tiled MMA atoms of `dsl_core::tensor`. This module is what the schedules call
//! ([`Mma`] and the types of its results); `tcgen05.rs` and `wgmma.rs` are the two targets'
//! stages behind it.
//!
//! Both MMAs are `D = A . B^T` with A and B in shared memory:
//! - S`[128, H]` = KV`[128, 512]` . Q`[H, 512]`^T, both K-major;
//! - O^T`[512, 2H]` = V^T`[512, rows]` . P^T (B = `[P_hi | P_lo]` stored `[2H, 128]`), both
//!   MN-major (V^T is the KV tile's transposed view); the `rows` K-steps are the tile's 64
//!   SWA rows, and the other 64 where the CTA holds a compressed tile
//!   ([`dsl_core::tensor::Tcgen05Tiled::gemm_k_steps`]). The 32-head streamed CTA instead
//!   adds V^T . P_hi^T and V^T . P_lo^T into one O^T`[512, H]` (P stored `[H, 2 rows]`),
//!   which halves its accumulator registers ([`HiLo`]).
//!
//! sm_100a ([`Tcgen05Stage`]): [`Tcgen05Tiled`](dsl_core::tensor::Tcgen05Tiled) with C in
//! tensor memory. S is an `m128nH` atom at columns `s_column ..`; O^T is an `m128n2H` atom
//! over four M blocks of 128 dims, which the tiling lays side by side at columns
//! `2H mb ..`. One elected thread issues and commits to an mbarrier; warp w reads its lane
//! quadrant w % 4 with `load_c`: the scores' column group w / 4, and row `tid` of O^T (M
//! block w / 4).
//!
//! sm_90a ([`WgmmaStage`]): [`WgmmaTiled`](dsl_core::tensor::WgmmaTiled) with C in
//! registers. S is `m64nH` over warpgroups 0 and 1 (rows 0..64 and 64..128), stored through
//! `partition_c` into a shared-memory stand-in so that the softmax reads the same rows and
//! columns as from TMEM; where a split CTA's tiles are all 64 rows, the two warpgroups
//! instead take the live 64 rows over a half of K each, and the softmax adds the two
//! halves' stand-ins (`ScoresSplit`); O^T is `m64n2H` (or `m64nH`) over the four warpgroups
//! (warpgroup g: dims `64 g ..` and `256 + 64 g ..`), kept in registers across the column
//! sums.
//!
//! Either way the partial `[H, 512]` is seen as O^T's C tile `[512, (H, 2)]`, the hi and lo
//! column of a head on one cell: `partition_c` of it says where each accumulator element
//! goes, and the two that meet there are summed (O = hi + lo).

mod tcgen05;
mod wgmma;

use dsl_core::Target;
use dsl_core::arch::memory::{load, store};
use dsl_core::ir::Reg;
use dsl_core::layout::{ComposedLayout, IntTuple, Layout, LayoutError};
use dsl_core::tensor::{Regs, Shared, Tensor};
use dsl_core::trace::{Carry, Pred, SmemTile, Val, trace_error};
use dsl_macros::device;
use half::bf16;

pub use self::tcgen05::{Tcgen05Setup, Tcgen05Stage};
pub use self::wgmma::WgmmaStage;
use super::plan::{HiLo, Plan};
use super::smem::{Buffers, checked};
use super::team::Team;
use crate::swap_ab_decode::{SWA_ROWS, TILE};

/// K-steps (16 rows of the KV tile each) of an SWA tile and of a compressed one.
const SWA_STEPS: i64 = (SWA_ROWS / 16) as i64;
const TILE_STEPS: i64 = (TILE / 16) as i64;

/// The MMA stage between its setup and the barrier that publishes the TMEM base (sm_100a);
/// sm_90a has nothing to set up.
pub enum MmaSetup {
    Tcgen05(Tcgen05Setup),
    Wgmma,
}

/// The MMA stage, ready to issue.
pub enum Mma {
    Tcgen05(Tcgen05Stage),
    Wgmma(WgmmaStage),
}

impl MmaSetup {
    /// Allocates the target's buffers; on sm_100a thread 0 initialises the mbarriers.
    #[track_caller]
    pub fn new(plan: &Plan, tid: Val<u32>) -> MmaSetup {
        match plan.target() {
            Target::Sm90a => MmaSetup::Wgmma,
            Target::Sm100a => MmaSetup::Tcgen05(Tcgen05Setup::new(plan, tid)),
        }
    }

    /// Allocates tensor memory (sm_100a), after the PDL wait: a predecessor on this SM may
    /// still hold it.
    #[track_caller]
    pub fn allocate(&self, warp: Val<u32>) {
        if let MmaSetup::Tcgen05(setup) = self {
            setup.allocate(warp);
        }
    }

    /// After the barrier that publishes the inputs, the stage of `team` working on `buf`:
    /// reads the TMEM base back (sm_100a, whose CTA is one team).
    #[track_caller]
    pub fn after_sync(&self, plan: &Plan, buf: &Buffers, team: &Team) -> Mma {
        match self {
            MmaSetup::Tcgen05(setup) => Mma::Tcgen05(setup.read_base(plan)),
            MmaSetup::Wgmma => Mma::Wgmma(WgmmaStage::new(plan, buf, team)),
        }
    }

    /// Frees tensor memory (sm_100a) after the CTA's last barrier, where no stage is at hand.
    #[track_caller]
    pub fn release(&self, plan: &Plan, warp: Val<u32>) {
        if let MmaSetup::Tcgen05(setup) = self {
            Mma::Tcgen05(setup.read_base(plan)).release(warp);
        }
    }
}

impl Mma {
    /// Stage 3: S = KV . Q^T.
    #[device]
    pub fn scores(&self, buf: &Buffers, team: &Team) {
        match self {
            Mma::Tcgen05(stage) => stage.scores(buf, team.warp),
            Mma::Wgmma(stage) => stage.scores(buf),
        }
    }

    /// Stage 4's input: this thread's scores, row `32 (w % Q) + lane`, columns
    /// `(w / Q) * H/4 ..` of S (Q lane quadrants, `softmax::row_and_group`); `parity` is
    /// the tile's mbarrier phase (sm_100a).
    #[device]
    pub fn load_scores(&self, plan: &Plan, team: &Team, parity: Val<u32>) -> Vec<Val<f32>> {
        match self {
            Mma::Tcgen05(stage) => stage.load_scores(plan, team.warp, parity),
            Mma::Wgmma(stage) => stage.load_scores(plan),
        }
    }

    /// Stage 5: O^T = V^T . [P_hi | P_lo]^T over the tile's `rows`. Returns where the
    /// accumulators are until [`Outputs::store_partial`] collects them.
    #[device]
    pub fn outputs(&self, plan: &Plan, buf: &Buffers, team: &Team, rows: TileRows) -> Outputs<'_> {
        match self {
            Mma::Tcgen05(stage) => {
                stage.outputs(plan, buf, team.warp, rows);
                Outputs::InTensorMemory(stage)
            }
            Mma::Wgmma(stage) => Outputs::InRegisters(stage, stage.outputs(plan, buf, rows, None)),
        }
    }

    /// Stage 10: frees tensor memory (sm_100a) once the cluster barrier has passed.
    #[track_caller]
    pub fn release(&self, warp: Val<u32>) {
        if let Mma::Tcgen05(stage) = self {
            stage.release(warp);
        }
    }
}

/// The rows of the KV tile that take part in O^T: the K-steps the MMA issues.
#[derive(Clone, Copy)]
pub enum TileRows {
    /// Split: 64 at an SWA rank (the tile's upper half never takes part), 128 at a
    /// compressed one (64 in a cluster of half tiles).
    ByRank(Val<u32>),
    /// All 128 (streamed tiles are 128 rows of either list).
    All,
}

impl TileRows {
    /// Whether split rank `rank` holds 128 rows (a compressed tile in a cluster of whole
    /// tiles; the SWA ranks hold 64): a runtime test, or none where every rank holds 64.
    pub(super) fn whole_tile_at(plan: &Plan, rank: Val<u32>) -> Option<Pred> {
        (plan.extra_tiles > 0 && plan.extra_tile_rows == TILE as u32)
            .then(|| rank.ge(plan.swa_tiles))
    }
}

/// How stage 6 writes a tile's O = hi + lo to the partial.
#[derive(Clone, Copy)]
pub enum PartialUpdate<'a> {
    /// The tile is the CTA's only one: store it.
    Store,
    /// Accumulate over the token's tiles: partial = partial * alpha + O, with `rescale`
    /// `[2, H]` f32 holding each head's alpha in row 0 (the tile's probabilities are taken
    /// against the running max, [`super::softmax::Reference::RunningMax`]).
    Rescale(&'a SmemTile),
}

/// Where the O^T accumulators are between stages 5 and 6.
pub enum Outputs<'a> {
    InTensorMemory(&'a Tcgen05Stage),
    /// sm_90a: this thread's fragment, live across the column sums.
    InRegisters(&'a WgmmaStage, Tensor<f32, Regs>),
}

impl Outputs<'_> {
    /// Stage 6: O = hi + lo -> the fp32 partial `[H, 512]`; `parity` is the tile's
    /// mbarrier phase (sm_100a).
    #[device]
    pub fn store_partial(
        self,
        plan: &Plan,
        buf: &Buffers,
        team: &Team,
        parity: Val<u32>,
        update: PartialUpdate<'_>,
    ) {
        match self {
            Outputs::InTensorMemory(stage) => {
                stage.store_partial(plan, buf, team.warp, parity, update)
            }
            Outputs::InRegisters(stage, acc) => {
                wgmma::wait_for_outputs(team);
                stage.store_partial(plan, buf, &acc, update);
            }
        }
    }
}

/// O^T summed over a token's tiles (streamed schedule). Each tile's probabilities are
/// taken against the running max, so the sum so far takes the tile's alpha and the tile's
/// O^T adds to it unscaled.
#[derive(Clone)]
pub enum RunningOutputs<'a> {
    /// sm_90a: the fragment stays in registers across the tiles and the MMA accumulates
    /// into it, so the partial is written once, after the last tile (over the KV tile).
    InRegisters(&'a WgmmaStage, Tensor<f32, Regs>),
    /// sm_100a: each tile's O^T lands in tensor memory, and stage 6 folds it into the
    /// partial in its own shared-memory buffer.
    InSharedMemory(&'a Tcgen05Stage),
}

impl Carry for RunningOutputs<'_> {
    fn regs(&self, out: &mut Vec<Reg>) {
        if let RunningOutputs::InRegisters(_, acc) = self {
            Carry::regs(acc, out);
        }
    }

    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        match self {
            RunningOutputs::InRegisters(stage, acc) => {
                RunningOutputs::InRegisters(stage, Carry::rebuild(acc, regs))
            }
            RunningOutputs::InSharedMemory(stage) => RunningOutputs::InSharedMemory(stage),
        }
    }

    fn static_diff(&self, other: &Self) -> Option<String> {
        match (self, other) {
            (RunningOutputs::InRegisters(_, a), RunningOutputs::InRegisters(_, b)) => {
                a.static_diff(b)
            }
            (RunningOutputs::InSharedMemory(_), RunningOutputs::InSharedMemory(_)) => None,
            _ => Some("the running outputs changed where they live".into()),
        }
    }
}

impl Mma {
    /// Stage 1 of the streamed schedule: an empty running O^T (a zeroed fragment on
    /// sm_90a, a zeroed partial on sm_100a).
    #[device]
    pub fn running_outputs(&self, plan: &Plan, buf: &Buffers, team: &Team) -> RunningOutputs<'_> {
        match self {
            Mma::Wgmma(stage) => RunningOutputs::InRegisters(stage, stage.empty_outputs()),
            Mma::Tcgen05(stage) => {
                buf.zero_partial(plan, team);
                RunningOutputs::InSharedMemory(stage)
            }
        }
    }
}

impl RunningOutputs<'_> {
    /// Stage 5: issues O^T += V^T . [P_hi | P_lo]^T over the tile's rows, on sm_90a after
    /// scaling the running fragment by each head's alpha (`rescale` row 0).
    #[device]
    pub fn add_tile(self, plan: &Plan, buf: &Buffers, team: &Team, rescale: &SmemTile) -> Self {
        match self {
            RunningOutputs::InRegisters(stage, acc) => {
                RunningOutputs::InRegisters(stage, stage.add_tile(plan, buf, rescale, acc))
            }
            RunningOutputs::InSharedMemory(stage) => {
                stage.outputs(plan, buf, team.warp, TileRows::All);
                self
            }
        }
    }

    /// Stage 6: the tile's MMA has read the KV tile (sm_90a), or its O^T is folded into
    /// the partial as partial * alpha + O (sm_100a); then a barrier, after which every
    /// thread's shared-memory writes of the tile (its column sums too) can be read by the
    /// team.
    #[device]
    pub fn fold_tile(
        &self,
        plan: &Plan,
        buf: &Buffers,
        team: &Team,
        parity: Val<u32>,
        rescale: &SmemTile,
    ) {
        match self {
            RunningOutputs::InRegisters(..) => wgmma::wait_for_outputs(team),
            RunningOutputs::InSharedMemory(stage) => {
                let update = PartialUpdate::Rescale(rescale);
                stage.store_partial(plan, buf, team.warp, parity, update);
                team.sync();
            }
        }
    }

    /// After the last tile: the partial `[H, 512]` holds O = hi + lo (sm_90a writes it
    /// from the fragment; sm_100a has folded every tile already).
    #[device]
    pub fn finish(self, plan: &Plan, buf: &Buffers) {
        if let RunningOutputs::InRegisters(stage, acc) = self {
            stage.store_partial(plan, buf, &acc, PartialUpdate::Store);
        }
    }
}

/// The operands of O^T = V^T . P^T: the KV tile transposed `[512, kv_rows]`, and P as the
/// B operands the O MMA adds up ([`HiLo`]): `[2H, kv_rows]` once, or the hi and lo halves
/// `[H, kv_rows]` (the two K ranges of [`Plan::p_layout`]).
#[track_caller]
fn value_operands(plan: &Plan, buf: &Buffers) -> (Tensor<bf16, Shared>, Vec<Tensor<bf16, Shared>>) {
    let v_t = match buf.kv.layout().transposed() {
        Ok(layout) => buf.kv.view(layout),
        Err(e) => {
            trace_error(format!("KV^T view: {e}"));
            buf.kv.clone()
        }
    };
    let p = buf.p.tensor::<bf16>();
    let p = match plan.hi_lo {
        HiLo::Columns => vec![p],
        HiLo::Accumulated => {
            let half = [i64::from(plan.heads), i64::from(plan.kv_rows)];
            (0u32..2).map(|h| p.local_tile(&half, (0u32, h))).collect()
        }
    };
    (v_t.tensor::<bf16>(), p)
}

/// The partial `[H, 512]` as O^T's C tile `[512 dims, (H, c)]`, c the accumulator columns
/// of a head ([`HiLo::columns`]): column `h + H half` is head h's P_hi (half 0) or P_lo
/// (half 1) column, and both land on `partial[h][dim]`.
#[track_caller]
fn partial_as_outputs_tile(plan: &Plan, buf: &Buffers) -> Tensor<f32, Shared> {
    let layout = plan.partial_layout().and_then(|partial| {
        let (heads, dims) = (partial.layout().mode(0)?, partial.layout().mode(1)?);
        let hi_lo = Layout::new(
            IntTuple::tuple([
                heads.shape().clone(),
                IntTuple::from(i64::from(plan.hi_lo.columns())),
            ]),
            IntTuple::tuple([heads.stride().clone(), IntTuple::from(0)]),
        )?;
        ComposedLayout::new(
            partial.swizzle(),
            partial.offset_bytes(),
            Layout::from_modes([dims, hi_lo]),
            4,
        )
    });
    buf.partial()
        .view(checked("O^T over the partial", layout))
        .tensor::<f32>()
}

/// Writes each cell of `dst` once, with the sum of the elements of `acc` (of `dst`'s
/// shape) that land on it, in flat order: hi + lo where `dst` is a partition of
/// [`partial_as_outputs_tile`] with two columns a head. `head_of(i)` is the head of
/// `acc`'s element `i`, which picks the cell's rescale factors.
#[track_caller]
fn store_summed(
    dst: &Tensor<f32, Shared>,
    acc: &Tensor<f32, Regs>,
    update: PartialUpdate<'_>,
    head_of: impl Fn(i64) -> Val<u32>,
) {
    let cells = match cell_offsets(dst) {
        Ok(cells) => cells,
        Err(e) => {
            trace_error(format!("summing a fragment into {dst:?}: {e}"));
            return;
        }
    };
    let mut sums: Vec<(i64, i64, Val<f32>)> = Vec::new();
    for (i, cell) in cells.into_iter().enumerate() {
        let value = acc.get(i as i64);
        match sums.iter_mut().find(|(c, _, _)| *c == cell) {
            Some((_, _, sum)) => *sum += value,
            None => sums.push((cell, i as i64, value)),
        }
    }
    for (_, first, sum) in sums {
        let at = dst.at(IntTuple::from(first));
        match update {
            PartialUpdate::Store => store(at, sum),
            PartialUpdate::Rescale(rescale) => {
                let head = head_of(first);
                let alpha: Val<f32> = load(rescale.at(0u32, head));
                let old: Val<f32> = load(at);
                store(at, old.fma(alpha, sum));
            }
        }
    }
}

/// The element offset of every flat index of a per-thread tensor (its static layout).
fn cell_offsets(t: &Tensor<f32, Shared>) -> Result<Vec<i64>, LayoutError> {
    let layout = t.layout().to_static()?;
    (0..layout.static_size())
        .map(|i| layout.offset_of_index(i))
        .collect()
}
