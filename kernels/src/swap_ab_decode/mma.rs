//! The stages that differ by target: the two MMAs and where their accumulators live.
//!
//! sm_100a: one elected thread issues `tcgen05.mma` into tensor memory and commits to an
//! mbarrier; threads read accumulators back with `tcgen05.ld` (warp w reads lane quadrant
//! w % 4). sm_90a: warpgroups issue `wgmma` into registers; S goes through a shared-memory
//! stand-in so the softmax reads the same rows and columns as from TMEM, and O is combined
//! straight from the registers into the partial.

use dsl_core::Target;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, load_vec, store, store_vec};
use dsl_core::arch::operand::{DescFormat, SmemOperand};
use dsl_core::arch::sm90::wgmma::{self, Accumulator};
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::elect_one;
use dsl_core::layout::{Major, UmmaInstrDesc};
use dsl_core::trace::{Val, trace_error};
use dsl_macros::device;

use super::plan::Plan;
use super::smem::Buffers;
use super::{HEAD_DIM, SWA_ROWS, TILE};

/// The MMA machinery of one target.
#[derive(Clone)]
pub enum Mma {
    Tcgen05 {
        /// Completion of S, then of O.
        s_done: Mbarrier,
        o_done: Mbarrier,
        slot: dsl_core::arch::memory::Smem,
        columns: u32,
        /// The allocation's base, once read back after the first barrier.
        tmem: Option<TmemAddr>,
    },
    Wgmma,
}

/// The bf16 instruction descriptor, or a trace error at the MMA stage that asked for it.
#[track_caller]
fn instr_desc(m: u32, n: u32, a: Major, b: Major) -> u32 {
    match UmmaInstrDesc::bf16(m, n) {
        Ok(d) => d.with_a_major(a).with_b_major(b).bits(),
        Err(e) => {
            trace_error(format!("tcgen05.mma shape: {e}"));
            0
        }
    }
}

impl Mma {
    /// Initialises the mbarriers (sm_100a).
    #[device]
    pub fn setup(plan: &Plan, buf: &Buffers, tid: Val<u32>) -> Mma {
        match plan.target() {
            Target::Sm90a => Mma::Wgmma,
            Target::Sm100a => {
                let bars = buf
                    .mma_barriers
                    .as_ref()
                    .expect("sm_100a allocates mbarriers");
                let s_done = Mbarrier::at(bars.addr());
                let o_done = Mbarrier::at(bars.addr() + 8);
                if tid == 0 {
                    s_done.init(1u32);
                    o_done.init(1u32);
                    init_fence();
                }
                Mma::Tcgen05 {
                    s_done,
                    o_done,
                    slot: buf
                        .tmem_slot
                        .as_ref()
                        .expect("sm_100a allocates a TMEM slot")
                        .addr(),
                    columns: plan.tmem_columns,
                    tmem: None,
                }
            }
        }
    }

    /// Allocates tensor memory (sm_100a), after the PDL wait: a predecessor on this SM may
    /// still hold it.
    #[device]
    pub fn allocate(&self, warp: Val<u32>) {
        if let Mma::Tcgen05 { slot, columns, .. } = self {
            if warp == 0 {
                tcgen05::alloc(*slot, *columns);
                tcgen05::relinquish_alloc_permit();
            }
            tcgen05::fence_before_thread_sync();
        }
    }

    /// After the barrier that publishes the inputs: read the TMEM base back (sm_100a).
    #[device]
    pub fn after_sync(self) -> Mma {
        match self {
            Mma::Tcgen05 {
                s_done,
                o_done,
                slot,
                columns,
                ..
            } => {
                tcgen05::fence_after_thread_sync();
                let base = TmemAddr::from_base(load::<u32, _>(slot));
                Mma::Tcgen05 {
                    s_done,
                    o_done,
                    slot,
                    columns,
                    tmem: Some(base),
                }
            }
            wgmma => wgmma,
        }
    }

    fn tmem(&self) -> TmemAddr {
        match self {
            Mma::Tcgen05 { tmem: Some(t), .. } => *t,
            _ => panic!("tensor memory is read back in after_sync, before any MMA"),
        }
    }

    /// Stage 3: S[128, H] = KV[128, 512] . Q[H, 512]^T.
    #[device]
    pub fn scores(&self, plan: &Plan, buf: &Buffers, warp: Val<u32>) {
        let heads = plan.heads;
        match self {
            Mma::Tcgen05 { s_done, .. } => {
                let kv = SmemOperand::new(&buf.kv, Major::K, DescFormat::Umma);
                let q = SmemOperand::new(&buf.q, Major::K, DescFormat::Umma);
                let idesc = instr_desc(TILE as u32, heads, Major::K, Major::K);
                let d = self.tmem().column(plan.s_column);
                if warp == 0 {
                    if elect_one() {
                        tcgen05::fence_after_thread_sync();
                        for ks in 0..(HEAD_DIM / 16) as i64 {
                            tcgen05::mma_f16(d, kv.k_step(ks), q.k_step(ks), idesc, ks > 0);
                        }
                        tcgen05::commit(*s_done);
                    }
                }
            }
            Mma::Wgmma => {
                // Warpgroups 0 and 1 take rows 0..64 and 64..128.
                let kv = SmemOperand::new(&buf.kv, Major::K, DescFormat::Gmma);
                let q = SmemOperand::new(&buf.q, Major::K, DescFormat::Gmma);
                let scores = buf
                    .scores
                    .as_ref()
                    .expect("sm_90a keeps S in shared memory");
                if warp < 8 {
                    let group = warp >> 2;
                    let rows_offset = group * kv.block_offset(64, 0);
                    let acc = Accumulator::zeros(heads);
                    wgmma::fence();
                    for ks in 0..(HEAD_DIM / 16) as i64 {
                        let a = kv.block_plus(0, 16 * ks, rows_offset);
                        wgmma::mma_async(&acc, a, q.k_step(ks), ks > 0, 0, 0);
                    }
                    wgmma::commit_group();
                    wgmma::wait_group(0);
                    store_fragment(scores, &acc, group * 64, warp, heads / 2, 0);
                }
            }
        }
    }

    /// Stage 4's input: this thread's scores, row `32 (w % 4) + lane`, columns
    /// `(w / 4) * H/4 ..` of S.
    #[device]
    pub fn load_scores(
        &self,
        plan: &Plan,
        buf: &Buffers,
        warp: Val<u32>,
        lane: Val<u32>,
    ) -> Vec<Val<f32>> {
        let cols = plan.cols_per_thread;
        match self {
            Mma::Tcgen05 { s_done, .. } => {
                s_done.wait(0u32);
                tcgen05::fence_after_thread_sync();
                let base = self.tmem().column(plan.s_column);
                let at = base.warp_quadrant(warp) + (warp >> 2) * cols;
                let words = tcgen05::ld_32x32b(at, cols as usize);
                tcgen05::wait_ld();
                words.into_iter().map(|w| w.bitcast::<f32>()).collect()
            }
            Mma::Wgmma => {
                sync_threads();
                let scores = buf
                    .scores
                    .as_ref()
                    .expect("sm_90a keeps S in shared memory");
                let row = (warp & 3u32) * 32 + lane;
                let first = (warp >> 2) * cols;
                let mut out = Vec::new();
                for k4 in 0..cols / 4 {
                    out.extend(load_vec::<f32, 4, _>(scores.at(row, first + 4 * k4)));
                }
                out
            }
        }
    }

    /// Stage 5: O[512, 2H] = KV^T[512, rows] . [P_hi | P_lo][rows, 2H]; SWA tiles have 64
    /// rows (the tile's upper half never takes part), compressed tiles 128. Returns where
    /// the accumulators are until [`Mma::store_partial`] collects them.
    #[device]
    pub fn outputs(&self, plan: &Plan, buf: &Buffers, warp: Val<u32>, rank: Val<u32>) -> Outputs {
        let heads = plan.heads;
        let kv_t = buf
            .kv
            .view(buf.kv.layout().transposed().unwrap_or_else(|e| {
                trace_error(format!("KV^T view: {e}"));
                buf.kv.layout().clone()
            }));
        let swa_steps = (SWA_ROWS / 16) as i64;
        let all_steps = (TILE / 16) as i64;
        match self {
            Mma::Tcgen05 { o_done, .. } => {
                let a = SmemOperand::new(&kv_t, Major::MN, DescFormat::Umma);
                let b = SmemOperand::new(&buf.p, Major::MN, DescFormat::Umma);
                let idesc = instr_desc(TILE as u32, 2 * heads, Major::MN, Major::MN);
                let tmem = self.tmem();
                if warp == 0 {
                    if elect_one() {
                        tcgen05::fence_after_thread_sync();
                        for mb in 0..(HEAD_DIM / TILE) as i64 {
                            let d = tmem.column(mb as u32 * 2 * heads);
                            for ks in 0..swa_steps {
                                let a_desc = a.block(128 * mb, 16 * ks);
                                tcgen05::mma_f16(d, a_desc, b.k_step(ks), idesc, ks > 0);
                            }
                        }
                        if plan.extra_tiles > 0 {
                            if rank >= plan.swa_tiles {
                                for mb in 0..(HEAD_DIM / TILE) as i64 {
                                    let d = tmem.column(mb as u32 * 2 * heads);
                                    for ks in swa_steps..all_steps {
                                        let a_desc = a.block(128 * mb, 16 * ks);
                                        tcgen05::mma_f16(d, a_desc, b.k_step(ks), idesc, true);
                                    }
                                }
                            }
                        }
                        tcgen05::commit(*o_done);
                    }
                }
                Outputs::InTensorMemory
            }
            Mma::Wgmma => {
                // Warpgroup g takes dims [128 g, 128 g + 128) as two m64 blocks.
                let a = SmemOperand::new(&kv_t, Major::MN, DescFormat::Gmma);
                let b = SmemOperand::new(&buf.p, Major::MN, DescFormat::Gmma);
                let group = warp >> 2;
                let dims_offset = group * a.block_offset(128, 0);
                let accs = [Accumulator::zeros(2 * heads), Accumulator::zeros(2 * heads)];
                wgmma::fence();
                for (half, acc) in accs.iter().enumerate() {
                    for ks in 0..swa_steps {
                        let a_desc = a.block_plus(64 * half as i64, 16 * ks, dims_offset);
                        wgmma::mma_async(acc, a_desc, b.k_step(ks), ks > 0, 1, 1);
                    }
                }
                if plan.extra_tiles > 0 {
                    if rank >= plan.swa_tiles {
                        for (half, acc) in accs.iter().enumerate() {
                            for ks in swa_steps..all_steps {
                                let a_desc = a.block_plus(64 * half as i64, 16 * ks, dims_offset);
                                wgmma::mma_async(acc, a_desc, b.k_step(ks), true, 1, 1);
                            }
                        }
                    }
                }
                wgmma::commit_group();
                Outputs::InRegisters(accs)
            }
        }
    }

    /// Stage 6: O = hi + lo -> the fp32 partial `[H, 512]` over the KV tile.
    #[device]
    pub fn store_partial(
        &self,
        plan: &Plan,
        buf: &Buffers,
        outputs: Outputs,
        warp: Val<u32>,
        lane: Val<u32>,
    ) {
        let heads = plan.heads;
        let partial = buf.partial(plan);
        match (self, outputs) {
            (Mma::Tcgen05 { o_done, .. }, Outputs::InTensorMemory) => {
                o_done.wait(0u32);
                tcgen05::fence_after_thread_sync();
                let block = warp >> 2;
                let at = self.tmem().warp_quadrant(warp) + block * (2 * heads);
                let words = tcgen05::ld_32x32b(at, 2 * heads as usize);
                tcgen05::wait_ld();
                let dim = block * TILE as u32 + (warp & 3u32) * 32 + lane;
                for h in 0..heads as usize {
                    let o = words[h].bitcast::<f32>() + words[heads as usize + h].bitcast::<f32>();
                    store(partial.at(h as u32, dim), o);
                }
                tcgen05::fence_before_thread_sync();
            }
            (Mma::Wgmma, Outputs::InRegisters(accs)) => {
                wgmma::wait_group(0);
                // Every warpgroup's MMAs have read the KV tile before anyone overwrites it.
                sync_threads();
                let group = warp >> 2;
                for (half, acc) in accs.iter().enumerate() {
                    let first_dim = group * 128 + 64 * half as u32;
                    store_fragment(&partial, acc, first_dim, warp, heads / 2, heads / 2);
                }
            }
            _ => panic!("outputs of one target stored by the other"),
        }
    }

    /// Stage 10: frees tensor memory (sm_100a) once the cluster barrier has passed.
    #[device]
    pub fn release(&self, warp: Val<u32>) {
        if let Mma::Tcgen05 { columns, .. } = self {
            if warp == 0 {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(self.tmem(), *columns);
            }
        }
    }
}

/// Where the O accumulators are between stages 5 and 6.
pub enum Outputs {
    InTensorMemory,
    /// sm_90a: two m64 blocks of `[64 dims, 2H]` a warpgroup, live across the column sums.
    InRegisters([Accumulator; 2]),
}

/// Writes an m64nN f32 wgmma fragment to `tile`: register i of thread (warp w, lane l) is
/// element (first_row + 16 (w % 4) + l / 4 + 8 ((i >> 1) & 1), 8 (i >> 2) + 2 (l % 4) + (i & 1)).
/// With `add_offset` > 0, columns c and c + add_offset are summed into column c (the O hi
/// and lo halves), and only the first `add_offset` columns are written, transposed
/// (`tile[col][row]`).
#[device]
fn store_fragment(
    tile: &dsl_core::trace::SmemTile,
    acc: &Accumulator,
    first_row: Val<u32>,
    warp: Val<u32>,
    regs: u32,
    add_offset: u32,
) {
    let lane = dsl_core::arch::thread::lane_id();
    let row_base = first_row + (warp & 3u32) * 16 + (lane >> 2);
    let col_base = (lane & 3u32) * 2;
    if add_offset == 0 {
        for i in (0..regs).step_by(2) {
            let row = row_base + 8 * ((i >> 1) & 1);
            let col = col_base + 8 * (i >> 2);
            store_vec(
                tile.at(row, col),
                [acc.get(i as usize), acc.get(i as usize + 1)],
            );
        }
    } else {
        for i in 0..regs {
            let row = row_base + 8 * ((i >> 1) & 1);
            let col = col_base + (8 * (i >> 2) + (i & 1));
            let o = acc.get(i as usize) + acc.get((i + add_offset) as usize);
            store(tile.at(col, row), o);
        }
    }
}
