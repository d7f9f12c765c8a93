//! The GEMM kernel: `C[M, N] = A[M, K] . B[N, K]^T` in bf16 with f32 accumulation, written
//! once for both targets.
//!
//! Roles (one CTA per SM, persistent over output tiles):
//! - warpgroup 0, the producer: one elected thread walks the tiles and K-blocks and, per
//!   stage, waits for the stage to be empty, arms its `full` barrier with the two boxes'
//!   bytes and issues two TMA loads (A `[128, 64]`, B `[256, 64]`, 128-byte swizzled: the
//!   canonical K-major layout the MMA reads). It keeps 40 registers.
//! - sm_90a, warpgroups 1 and 2, the consumers: each owns 64 rows of the tile and runs
//!   four `m64n256k16` wgmma per stage into 128 accumulator registers, then releases the
//!   stage; after the last K-block it converts and stores its rows. They grow to 232
//!   registers.
//! - sm_100a, warpgroup 1: warp 0's elected thread issues four `M=128, N=256` tcgen05 MMAs
//!   per stage into tensor memory and releases the stage with `tcgen05.commit`; after the
//!   tile it commits to the accumulator barrier, and the four warps read their 32 TMEM
//!   lanes each and store them.
//!
//! Ragged edges: the boxes are zero-filled past M, N and K by the copy engine, and the
//! epilogue stores only elements inside C.

use dsl_core::Target;
use dsl_core::arch::Accumulate;
use dsl_core::arch::cvt::f32x2_to_bf16x2;
use dsl_core::arch::mbarrier::Mbarrier;
use dsl_core::arch::memory::{Gmem, Smem, load, store_with};
use dsl_core::arch::sm90::wgmma;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{NamedBarrier, sync_threads};
use dsl_core::arch::thread::{elect_one, lane_id, thread_idx_x};
use dsl_core::arch::tma::TensorMap;
use dsl_core::layout::{Major, Swizzle, canonical};
use dsl_core::pipeline::roles::{RegisterPlan, warp_in_warpgroup, warpgroup_index};
use dsl_core::pipeline::scheduler::{Tile, TileScheduler};
use dsl_core::pipeline::{PipelineState, TmaPipeline};
use dsl_core::tensor::{self, Global, Regs, Shared, Tcgen05Tiled, Tmem, WgmmaThread, WgmmaTiled};
use dsl_core::trace::{
    IntoVal, Pred, SmemTile, Tensor, Val, current_target, dyn_range, min_ctas_per_sm, smem_alloc,
    smem_tile, stage, threads,
};
use dsl_macros::{device, kernel};
use half::bf16;

use super::tiling::{TILE_K, Tiling};

/// Registers per thread of the producer and of each consumer warpgroup (sm_90a): 128 x 40
/// + 256 x 232 = 384 x 168, the entry budget of a 384-thread CTA alone on its SM.
const PRODUCER_REGISTERS: u32 = 40;
const CONSUMER_REGISTERS: u32 = 232;
/// Tile rows of a band of the raster order, for L2 reuse of A and B.
const GROUP_M: u32 = 8;

/// What every role of the kernel reads: the operands, the shared-memory rings, the pipeline
/// between the producer and the MMA role, and the tile schedule.
struct Gemm {
    tiling: Tiling,
    a: TensorMap<bf16, 2>,
    b: TensorMap<bf16, 2>,
    c: Tensor<bf16, 2>,
    a_ring: SmemTile,
    b_ring: SmemTile,
    pipe: TmaPipeline,
    sched: TileScheduler,
    k_tiles: Val<u32>,
    /// C's rows and columns.
    m: Val<u32>,
    n: Val<u32>,
}

/// `C = A . B^T`: `a` maps A `[M, K]` (dims `[K, M]`, box `[64, 128]`), `b` maps B
/// `[N, K]` (dims `[K, N]`, box `[64, 256]`), both 128-byte swizzled; `c` is `[M, N]`
/// with unit column stride; `k` is K.
#[kernel]
pub fn gemm_bf16_tn(a: TensorMap<bf16, 2>, b: TensorMap<bf16, 2>, c: Tensor<bf16, 2>, k: Val<u32>) {
    let target = current_target();
    let tiling = Tiling::for_target(target);
    threads(tiling.threads(), 1, 1);
    min_ctas_per_sm(1);
    let a = a.with_box([TILE_K, tiling.tile_m]);
    let b = b.with_box([TILE_K, tiling.tile_n]);
    let a_ring = ring("a", tiling.tile_m, tiling.stages);
    let b_ring = ring("b", tiling.tile_n, tiling.stages);
    let pipe = match target {
        // Every consumer warp releases a stage once its wgmma have read it.
        Target::Sm90a => TmaPipeline::new(
            "ab",
            tiling.stages,
            tiling.stage_tx_bytes(),
            4 * tiling.consumers,
        ),
        Target::Sm100a => TmaPipeline::umma("ab", tiling.stages, tiling.stage_tx_bytes()),
    };
    let m = c.extent(0).cast::<u32>();
    let n = c.extent(1).cast::<u32>();
    let k_tiles = (k + (TILE_K - 1)) / TILE_K;
    let sched = TileScheduler::new(
        (m + (tiling.tile_m - 1)) / tiling.tile_m,
        (n + (tiling.tile_n - 1)) / tiling.tile_n,
        GROUP_M,
    );
    let g = Gemm {
        tiling,
        a,
        b,
        c,
        a_ring,
        b_ring,
        pipe,
        sched,
        k_tiles,
        m,
        n,
    };

    stage("setup: barriers");
    let tid = thread_idx_x();
    if tid == 0 {
        g.pipe.init();
        g.a.prefetch();
        g.b.prefetch();
    }
    match target {
        Target::Sm90a => {
            sync_threads();
            let wg = warpgroup_index();
            let plan =
                RegisterPlan::new(&[PRODUCER_REGISTERS, CONSUMER_REGISTERS, CONSUMER_REGISTERS]);
            if wg == 0 {
                plan.enter(0);
                stage("producer: TMA loads");
                produce(&g);
            } else {
                plan.enter(1);
                stage("consumers: wgmma and epilogue");
                consume_wgmma(&g);
            }
        }
        Target::Sm100a => {
            let slot = smem_alloc("tmem_slot", 4, 16).addr();
            let acc_full = Mbarrier::at(smem_alloc("acc_full", 8, 8).addr());
            if tid == 0 {
                acc_full.init(1u32);
            }
            let wg = warpgroup_index();
            if wg == 1 {
                if warp_in_warpgroup() == 0 {
                    tcgen05::alloc(slot, tiling.tile_n);
                }
            }
            tcgen05::fence_before_thread_sync();
            sync_threads();
            tcgen05::fence_after_thread_sync();
            let tmem = TmemAddr::from_base(load::<u32, _>(slot));
            if wg == 0 {
                stage("producer: TMA loads");
                produce(&g);
            } else {
                stage("MMA and epilogue: tcgen05");
                consume_tcgen05(&g, tmem, acc_full);
            }
            tcgen05::fence_before_thread_sync();
            sync_threads();
            if wg == 1 {
                if warp_in_warpgroup() == 0 {
                    tcgen05::fence_after_thread_sync();
                    tcgen05::dealloc(tmem, tiling.tile_n);
                }
            }
        }
    }
}

/// A ring of `stages` `[rows, 64]` bf16 tiles, K-major and 128-byte swizzled (the layout
/// the TMA boxes land in and the MMAs read), one stage after the other.
fn ring(name: &str, rows: u32, stages: u32) -> SmemTile {
    let layout = canonical::k_major(Swizzle::B128, (rows * stages) as i64, TILE_K as i64, 2)
        .expect("a [rows, 64] bf16 K-major tile is canonical");
    smem_tile(name, layout)
}

/// The first byte of stage `st` of a ring of `[rows, 64]` tiles (where its TMA box lands).
#[device]
fn stage_of(ring: &SmemTile, rows: u32, st: &PipelineState) -> Smem {
    stage_tile(ring, rows, st).at((0u32, 0u32))
}

/// The producer warpgroup: warp 0's elected thread loads every K-block of every tile.
#[device]
fn produce(g: &Gemm) {
    let (pipe, sched, tiling) = (&g.pipe, g.sched, g.tiling);
    if warp_in_warpgroup() == 0 {
        if elect_one() {
            let mut st = pipe.producer_start();
            let mut t = sched.first();
            while sched.is_valid(t) {
                let tile = sched.tile(t);
                let row = tile.m * tiling.tile_m;
                let col = tile.n * tiling.tile_n;
                for kt in dyn_range(0u32, g.k_tiles) {
                    let full = pipe.producer_acquire(&st);
                    let k0 = kt * TILE_K;
                    g.a.load(
                        stage_of(&g.a_ring, tiling.tile_m, &st),
                        [k0.into(), row.into()],
                        full,
                    );
                    g.b.load(
                        stage_of(&g.b_ring, tiling.tile_n, &st),
                        [k0.into(), col.into()],
                        full,
                    );
                    st = st.advance();
                }
                t = sched.next(t);
            }
            pipe.producer_tail(st);
        }
    }
}

/// Stage `st` of a ring of `[rows, 64]` tiles, as the tensor the tiled MMA partitions.
fn stage_tile(ring: &SmemTile, rows: u32, st: &PipelineState) -> tensor::Tensor<bf16, Shared> {
    ring.tensor::<bf16>()
        .local_tile(&[i64::from(rows), i64::from(TILE_K)], (st.index(), 0u32))
}

/// C tile `tile` as a global tensor, unit column stride.
fn c_tile(g: &Gemm, tile: Tile) -> tensor::Tensor<bf16, Global> {
    let tiling = g.tiling;
    g.c.view([None, Some(1)]).local_tile(
        &[i64::from(tiling.tile_m), i64::from(tiling.tile_n)],
        (tile.m, tile.n),
    )
}

/// Whether C tile `tile` lies wholly inside C (its stores need no bounds checks).
fn tile_is_whole(g: &Gemm, tile: Tile) -> Pred {
    let tiling = g.tiling;
    ((tile.m + 1) * tiling.tile_m).le(g.m) & ((tile.n + 1) * tiling.tile_n).le(g.n)
}

/// A consumer warpgroup of sm_90a: rows `64 * group ..` of every tile, through the tiled
/// wgmma over both consumer warpgroups.
#[device]
fn consume_wgmma(g: &Gemm) {
    let (pipe, sched, tiling) = (&g.pipe, g.sched, g.tiling);
    let atom = wgmma::MmaF16Bf16Ss::bf16(tiling.tile_n, Major::K, Major::K);
    let tiled = WgmmaTiled::ss(
        atom,
        tiling.consumers,
        i64::from(tiling.tile_m),
        i64::from(tiling.tile_n),
    );
    let thr = tiled.thread(thread_idx_x() - 128u32);
    let acc = thr.partition_fragment_c();
    let mut st = pipe.consumer_start();
    let mut t = sched.first();
    while sched.is_valid(t) {
        let tile = sched.tile(t);
        for kt in dyn_range(0u32, g.k_tiles) {
            pipe.consumer_wait(&st);
            let a = thr.partition_a(&stage_tile(&g.a_ring, tiling.tile_m, &st), Major::K);
            let b = thr.partition_b(&stage_tile(&g.b_ring, tiling.tile_n, &st));
            wgmma::fence();
            thr.gemm(&acc, &a, &b, Accumulate::Runtime(kt.gt(0u32)));
            wgmma::commit_group();
            wgmma::wait_group(0);
            if lane_id() == 0 {
                pipe.consumer_release(&st);
            }
            st = st.advance();
        }
        store_wgmma_tile(g, &thr, &acc, tile);
        t = sched.next(t);
    }
}

/// Writes a consumer's part of the accumulator as bf16 through `partition_c` of the C tile:
/// values `2i` and `2i + 1` are adjacent columns, one 4-byte store. Only a tile on C's edge
/// checks bounds.
#[device]
fn store_wgmma_tile(g: &Gemm, thr: &WgmmaThread, acc: &tensor::Tensor<f32, Regs>, tile: Tile) {
    let c = thr.partition_c(&c_tile(g, tile));
    if tile_is_whole(g, tile) {
        store_pairs(&c, acc, |_| None);
    } else {
        let (row0, col0) = (tile.m * g.tiling.tile_m, tile.n * g.tiling.tile_n);
        store_pairs(&c, acc, |value| {
            let (row, col) = thr.coord_c(value);
            Some((row0 + row).lt(g.m) & (col0 + col).lt(g.n))
        });
    }
}

/// Stores `values` (f32, as many as `c` has elements) into `c` as bf16 pairs: values `2i`
/// and `2i + 1` of `c` are adjacent columns, stored where `guard(2i)` holds (everywhere when
/// it is `None`).
fn store_pairs(
    c: &tensor::Tensor<bf16, Global>,
    values: &tensor::Tensor<f32, Regs>,
    guard: impl Fn(i64) -> Option<Pred>,
) {
    let count = c.static_size().unwrap_or(0);
    for first in (0..count).step_by(2) {
        store_pair(
            c.at(first),
            values.get(first),
            values.get(first + 1),
            guard(first),
        );
    }
}

/// Two f32 values as one bf16 pair of C, stored where `guard` holds.
#[track_caller]
fn store_pair(at: Gmem, lo: Val<f32>, hi: Val<f32>, guard: Option<Pred>) {
    let pair = f32x2_to_bf16x2(lo, hi).bitcast::<u32>();
    store_with::<u32, 1, _>(at, [pair.operand()], guard);
}

/// The MMA-and-epilogue warpgroup of sm_100a.
#[device]
fn consume_tcgen05(g: &Gemm, tmem: TmemAddr, acc_full: Mbarrier) {
    let (pipe, sched, tiling) = (&g.pipe, g.sched, g.tiling);
    let (tile_m, tile_n) = (i64::from(tiling.tile_m), i64::from(tiling.tile_n));
    let atom = tcgen05::MmaF16Bf16Ss::bf16(tiling.tile_m, tiling.tile_n, Major::K, Major::K);
    let tiled = Tcgen05Tiled::ss_tile(atom, Major::K, Major::K, tile_m, tile_n);
    let acc = tiled.partition_fragment_c(tmem);
    let warp = warp_in_warpgroup();
    let mut st = pipe.consumer_start();
    let mut acc_phase = Val::constant(0u32);
    let mut t = sched.first();
    while sched.is_valid(t) {
        let tile = sched.tile(t);
        if warp == 0 {
            if elect_one() {
                for kt in dyn_range(0u32, g.k_tiles) {
                    pipe.consumer_wait(&st);
                    let a = tiled.partition_a(&stage_tile(&g.a_ring, tiling.tile_m, &st));
                    let b = tiled.partition_b(&stage_tile(&g.b_ring, tiling.tile_n, &st));
                    tcgen05::fence_after_thread_sync();
                    tiled.gemm(&acc, &a, &b, Accumulate::Runtime(kt.gt(0u32)));
                    pipe.consumer_release(&st);
                    st = st.advance();
                }
                tcgen05::commit(acc_full);
            }
        }
        acc_full.wait(acc_phase);
        acc_phase ^= 1u32;
        tcgen05::fence_after_thread_sync();
        store_tmem_tile(g, &tiled, &acc, tile);
        // The next tile's first MMA overwrites the accumulator: every warp has read it.
        tcgen05::fence_before_thread_sync();
        NamedBarrier::new(1, 128).sync();
        tcgen05::fence_after_thread_sync();
        t = sched.next(t);
    }
}

/// Columns of the accumulator read from TMEM at once: 32 registers per thread.
const TMEM_CHUNK: i64 = 32;

/// Reads the accumulator from TMEM (warp w: lanes 32 w ..) through the TMEM copy atom, a
/// chunk of columns at a time, and stores each thread's row of the chunk as bf16 pairs
/// through `partition_c` of the C tile.
#[device]
fn store_tmem_tile(g: &Gemm, tiled: &Tcgen05Tiled, acc: &tensor::Tensor<f32, Tmem>, tile: Tile) {
    let tiling = g.tiling;
    let warp = warp_in_warpgroup();
    let thread = thread_idx_x() - 128u32;
    let c = tiled.partition_c(&c_tile(g, tile), thread);
    let (row, _) = tiled.coord_c(thread, 0);
    let row_in: Pred = (tile.m * tiling.tile_m + row).lt(g.m);
    let col0 = tile.n * tiling.tile_n;
    let rows = i64::from(tiling.tile_m);
    for chunk in 0..i64::from(tiling.tile_n) / TMEM_CHUNK {
        let columns = acc.local_tile(&[rows, TMEM_CHUNK], (0u32, chunk as u32));
        let words = tiled.load_c(&columns, warp);
        let c_chunk = c.local_tile(&[TMEM_CHUNK], chunk as u32);
        store_pairs(&c_chunk, &words, |value| {
            let (_, col) = tiled.coord_c(thread, TMEM_CHUNK * chunk + value);
            Some(row_in & (col0 + col).lt(g.n))
        });
    }
}
