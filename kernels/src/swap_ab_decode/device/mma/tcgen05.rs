//! sm_100a: both MMAs through [`Tcgen05Tiled`] with their accumulators in tensor memory,
//! issued by one elected thread and committed to an mbarrier each (the module docs of
//! `mma` say how the tiles lie).

use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{Smem, load};
use dsl_core::arch::operand::SmemOperand;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::thread::{elect_one, thread_idx_x};
use dsl_core::layout::Major;
use dsl_core::tensor::{Tcgen05Tiled, Tensor, Tmem};
use dsl_core::trace::{Val, smem_alloc, trace_error};
use dsl_macros::device;
use half::bf16;

use super::{
    PartialUpdate, SWA_STEPS, TILE_STEPS, TileRows, partial_as_outputs_tile, store_summed,
    value_operands,
};
use crate::swap_ab_decode::device::plan::Plan;
use crate::swap_ab_decode::device::smem::Buffers;
use crate::swap_ab_decode::{HEAD_DIM, TILE};

/// sm_100a before the TMEM base is read back: the barriers (initialised) and the slot
/// `tcgen05.alloc` writes the base to.
#[derive(Clone, Copy)]
pub struct Tcgen05Setup {
    barriers: Tcgen05Barriers,
    slot: Smem,
    columns: u32,
}

/// Completion of S, then of O.
#[derive(Clone, Copy)]
struct Tcgen05Barriers {
    s_done: Mbarrier,
    o_done: Mbarrier,
}

/// sm_100a: the tilings, and their accumulators in the allocated tensor memory.
pub struct Tcgen05Stage {
    barriers: Tcgen05Barriers,
    base: TmemAddr,
    columns: u32,
    scores_mma: Tcgen05Tiled,
    outputs_mma: Tcgen05Tiled,
    /// S `[128, H]` and O^T `[512, 2H]` (`[512, H]` where P's halves accumulate together).
    scores: Tensor<f32, Tmem>,
    outputs: Tensor<f32, Tmem>,
}

impl Tcgen05Setup {
    /// The barriers and the base's slot; thread 0 initialises the barriers.
    #[device]
    pub(super) fn new(plan: &Plan, tid: Val<u32>) -> Tcgen05Setup {
        let bars = smem_alloc("mma_barriers", 16, 8).addr();
        let barriers = Tcgen05Barriers {
            s_done: Mbarrier::at(bars),
            o_done: Mbarrier::at(bars + 8),
        };
        let slot = smem_alloc("tmem_slot", 4, 16).addr();
        if tid == 0 {
            barriers.s_done.init(1u32);
            barriers.o_done.init(1u32);
            init_fence();
        }
        Tcgen05Setup {
            barriers,
            slot,
            columns: plan.tmem_columns,
        }
    }

    /// Warp 0 allocates the tensor memory.
    #[device]
    pub(super) fn allocate(&self, warp: Val<u32>) {
        if warp == 0 {
            tcgen05::alloc(self.slot, self.columns);
            tcgen05::relinquish_alloc_permit();
        }
        tcgen05::fence_before_thread_sync();
    }

    /// The stage at the base the allocation wrote (after a barrier).
    #[device]
    pub(super) fn read_base(&self, plan: &Plan) -> Tcgen05Stage {
        tcgen05::fence_after_thread_sync();
        let base = TmemAddr::from_base(load::<u32, _>(self.slot));
        Tcgen05Stage::new(plan, *self, base)
    }
}

impl Tcgen05Stage {
    fn new(plan: &Plan, setup: Tcgen05Setup, base: TmemAddr) -> Tcgen05Stage {
        let heads = plan.heads;
        let scores_mma = Tcgen05Tiled::ss(
            tcgen05::MmaF16Bf16Ss::bf16(TILE as u32, heads, Major::K, Major::K),
            Major::K,
            Major::K,
            i64::from(heads),
        );
        let outputs_mma = Tcgen05Tiled::ss_tile(
            tcgen05::MmaF16Bf16Ss::bf16(TILE as u32, plan.outputs_columns(), Major::MN, Major::MN),
            Major::MN,
            Major::MN,
            HEAD_DIM as i64,
            i64::from(plan.outputs_columns()),
        );
        if outputs_mma.columns() > plan.s_column {
            trace_error(format!(
                "O^T takes TMEM columns [0, {}), past S at column {}",
                outputs_mma.columns(),
                plan.s_column
            ));
        }
        Tcgen05Stage {
            barriers: setup.barriers,
            base,
            columns: setup.columns,
            scores: scores_mma.partition_fragment_c(base.column(plan.s_column)),
            outputs: outputs_mma.partition_fragment_c(base),
            scores_mma,
            outputs_mma,
        }
    }

    #[device]
    pub(super) fn scores(&self, buf: &Buffers, warp: Val<u32>) {
        let kv = self.scores_mma.partition_a(&buf.kv.tensor::<bf16>());
        let q = self.scores_mma.partition_b(&buf.q.tensor::<bf16>());
        if warp == 0 {
            if elect_one() {
                tcgen05::fence_after_thread_sync();
                self.scores_mma.gemm(&self.scores, &kv, &q, false);
                tcgen05::commit(self.barriers.s_done);
            }
        }
    }

    /// Warp w's lane quadrant of S, column group w / 4.
    #[device]
    pub(super) fn load_scores(
        &self,
        plan: &Plan,
        warp: Val<u32>,
        parity: Val<u32>,
    ) -> Vec<Val<f32>> {
        let cols = plan.cols_per_thread;
        self.barriers.s_done.wait(parity);
        tcgen05::fence_after_thread_sync();
        let group = self
            .scores
            .local_tile(&[TILE as i64, i64::from(cols)], (0u32, warp >> 2u32));
        let s = self.scores_mma.load_c(&group, warp);
        (0..i64::from(cols)).map(|i| s.get(i)).collect()
    }

    /// Stage 6: waits for O^T and writes O = hi + lo to the partial.
    #[device]
    pub(super) fn store_partial(
        &self,
        plan: &Plan,
        buf: &Buffers,
        warp: Val<u32>,
        parity: Val<u32>,
        update: PartialUpdate<'_>,
    ) {
        let partial = partial_as_outputs_tile(plan, buf);
        let tid = thread_idx_x();
        self.barriers.o_done.wait(parity);
        tcgen05::fence_after_thread_sync();
        let o = self.outputs_mma.load_c(&self.outputs, warp);
        let head_of = |i| self.outputs_mma.coord_c(tid, i).1 % plan.heads;
        let dst = self.outputs_mma.partition_c(&partial, tid);
        store_summed(&dst, &o, update, head_of);
        tcgen05::fence_before_thread_sync();
    }

    #[device]
    pub(super) fn outputs(&self, plan: &Plan, buf: &Buffers, warp: Val<u32>, rows: TileRows) {
        let (v_t, p) = value_operands(plan, buf);
        let v_t = self.outputs_mma.partition_a(&v_t);
        let p: Vec<SmemOperand> = p.iter().map(|p| self.outputs_mma.partition_b(p)).collect();
        let o = &self.outputs;
        // Each of P's operands over `steps`, the first from zero where `fresh`.
        let issue = |steps: std::ops::Range<i64>, fresh: bool| {
            for (i, p) in p.iter().enumerate() {
                let accumulate = !fresh || i > 0;
                self.outputs_mma
                    .gemm_k_steps(o, &v_t, p, steps.clone(), accumulate);
            }
        };
        if warp == 0 {
            if elect_one() {
                tcgen05::fence_after_thread_sync();
                match rows {
                    TileRows::All => issue(0..TILE_STEPS, true),
                    TileRows::ByRank(rank) => {
                        issue(0..SWA_STEPS, true);
                        if let Some(whole) = TileRows::whole_tile_at(plan, rank) {
                            if whole {
                                issue(SWA_STEPS..TILE_STEPS, false);
                            }
                        }
                    }
                }
                tcgen05::commit(self.barriers.o_done);
            }
        }
    }

    /// Warp 0 frees the tensor memory.
    #[device]
    pub(super) fn release(&self, warp: Val<u32>) {
        if warp == 0 {
            tcgen05::fence_after_thread_sync();
            tcgen05::dealloc(self.base, self.columns);
        }
    }
}
