//! A GEMM tile written with tensors end to end, in the interpreter, exact against the host:
//! global -> shared copies through `local_partition`, the MMA through the tiled MMA's
//! partitions (wgmma SS and RS on sm_90a, tcgen05 SS with C in TMEM on sm_100a), and the C
//! fragment stored through `partition_c`; K-steps issued in two ranges (`gemm_k_steps`), and
//! a tcgen05 tile of two M blocks side by side in tensor memory. Inputs are small integers,
//! so every product and sum is exact in f32 whatever the order.

use dsl_core::Target;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::load;
use dsl_core::arch::sm90::wgmma::{self, MmaF16Bf16Rs, MmaF16Bf16Ss};
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{thread_idx_x, warp_id};
use dsl_core::interp::{Arg, Launch, Memory, run};
use dsl_core::ir::{Kernel, SourceLoc};
use dsl_core::layout::{Layout, Major, Swizzle, canonical};
use dsl_core::tensor::{Tcgen05Tiled, WgmmaOperandA, WgmmaTiled};
use dsl_core::trace::control::branch;
use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, smem_tile, threads, trace_kernel};
use half::bf16;

const M: i64 = 128;
const N: i64 = 64;
const K: i64 = 64;

/// A [M, K] and B [N, K] row-major (TN), C [M, N] row-major f32, K in tiles of 64.
struct Problem {
    m: i64,
    k: i64,
    a: Vec<bf16>,
    b: Vec<bf16>,
}

impl Problem {
    fn new(m: i64, k: i64) -> Self {
        let v = |i: i64, s: i64| bf16::from_f32(((i * s + 3) % 9 - 4) as f32);
        Problem {
            m,
            k,
            a: (0..m * k).map(|i| v(i, 7)).collect(),
            b: (0..N * k).map(|i| v(i, 5)).collect(),
        }
    }

    fn reference(&self) -> Vec<f32> {
        let mut c = vec![0.0f32; (self.m * N) as usize];
        for m in 0..self.m {
            for n in 0..N {
                let dot: f64 = (0..self.k)
                    .map(|k| {
                        f64::from(self.a[(m * self.k + k) as usize].to_f32())
                            * f64::from(self.b[(n * self.k + k) as usize].to_f32())
                    })
                    .sum();
                c[(m * N + n) as usize] = dot as f32;
            }
        }
        c
    }

    fn run(&self, kernel: &Kernel) -> Vec<f32> {
        let mut mem = Memory::new();
        let a = mem.alloc_from("a", &self.a);
        let b = mem.alloc_from("b", &self.b);
        let c = mem.alloc("c", (self.m * N * 4) as usize);
        let args = [
            Arg::tensor(a, &[self.m, self.k], &[self.k, 1]),
            Arg::tensor(b, &[N, self.k], &[self.k, 1]),
            Arg::tensor(c, &[self.m, N], &[N, 1]),
        ];
        run(kernel, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
        mem.read::<f32>(c)
    }
}

/// The three global tensors, row-major with a runtime row stride.
fn params() -> (
    dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Global>,
    dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Global>,
    dsl_core::tensor::Tensor<f32, dsl_core::tensor::Global>,
) {
    let a = Tensor::<bf16, 2>::declare("a");
    let b = Tensor::<bf16, 2>::declare("b");
    let c = Tensor::<f32, 2>::declare("c");
    (
        a.view([None, Some(1)]).assume_aligned(8),
        b.view([None, Some(1)]).assume_aligned(8),
        c.view([None, Some(1)]).assume_aligned(2),
    )
}

/// Copies K tile `kt` of A and B into the shared tiles through a thread partition of
/// 8 bf16 (16 bytes) per thread and step.
fn stage_tiles(
    ga: &dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Global>,
    gb: &dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Global>,
    sa: &dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Shared>,
    sb: &dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Shared>,
    copier: &Layout,
    kt: i64,
) {
    let tid = thread_idx_x();
    let v = Some(&[1, 8][..]);
    let m = sa.static_extent(0).unwrap();
    let ta = ga.local_tile(&[m, 64], (0, kt));
    let tb = gb.local_tile(&[N, 64], (0, kt));
    ta.local_partition(copier, tid, v)
        .copy_to(&sa.local_partition(copier, tid, v));
    tb.local_partition(copier, tid, v)
        .copy_to(&sb.local_partition(copier, tid, v));
    fence_proxy_async_shared();
    sync_threads();
}

/// How a K tile's four K-steps are issued: one `gemm`, or `gemm_k_steps` over 0..2 and 2..4.
#[derive(Clone, Copy)]
enum Steps {
    Whole,
    TwoRanges,
}

/// Where a K tile lands in shared memory: one tile, or stage `kt % 2` of a two-stage ring
/// chosen at run time (the stage index of a pipeline).
#[derive(Clone, Copy, PartialEq)]
enum Tiles {
    Single,
    RuntimeStage,
}

impl Tiles {
    fn stages(self) -> i64 {
        match self {
            Tiles::Single => 1,
            Tiles::RuntimeStage => 2,
        }
    }

    /// The `[rows, 64]` tile K tile `kt` uses, of a buffer of `stages()` such tiles.
    fn tile(
        self,
        buffer: &dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Shared>,
        rows: i64,
        kt: i64,
    ) -> dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Shared> {
        match self {
            Tiles::Single => buffer.clone(),
            Tiles::RuntimeStage => {
                // Zero at run time (threads < 2^16), so the stage index is a runtime value.
                let stage = (thread_idx_x() >> 16u32) + (kt % 2) as u32;
                buffer.local_tile(&[rows, 64], (stage, 0u32))
            }
        }
    }
}

/// A ring of `stages` `[rows, 64]` bf16 K-major tiles, 128-byte swizzled.
fn smem_ring(
    name: &str,
    rows: i64,
    stages: i64,
) -> dsl_core::tensor::Tensor<bf16, dsl_core::tensor::Shared> {
    smem_tile(
        name,
        canonical::k_major(Swizzle::B128, rows * stages, 64, 2).unwrap(),
    )
    .tensor::<bf16>()
}

fn wgmma_kernel(k: i64, rs: bool, steps: Steps) -> Kernel {
    wgmma_kernel_in(k, rs, steps, Tiles::Single)
}

fn wgmma_kernel_in(k: i64, rs: bool, steps: Steps, tiles: Tiles) -> Kernel {
    trace_kernel("tensor_gemm_sm90", Target::Sm90a, || {
        threads(256, 1, 1);
        let (ga, gb, gc) = params();
        let ring_a = smem_ring("a", M, tiles.stages());
        let ring_b = smem_ring("b", N, tiles.stages());
        let copier: Layout = "(32,8):(8,1)".parse().unwrap();
        let tiled = if rs {
            WgmmaTiled::rs(MmaF16Bf16Rs::bf16(64, Major::K), Major::K, 2, M, N)
        } else {
            WgmmaTiled::ss(MmaF16Bf16Ss::bf16(64, Major::K, Major::K), 2, M, N)
        };
        let thr = tiled.thread(thread_idx_x());
        let acc = thr.partition_fragment_c();
        for kt in 0..k / 64 {
            let (sa, sb) = (tiles.tile(&ring_a, M, kt), tiles.tile(&ring_b, N, kt));
            stage_tiles(&ga, &gb, &sa, &sb, &copier, kt);
            let a = if rs {
                WgmmaOperandA::Regs(thr.partition_a_regs(&sa).load())
            } else {
                thr.partition_a(&sa, Major::K)
            };
            let b = thr.partition_b(&sb);
            wgmma::fence();
            match steps {
                Steps::Whole => thr.gemm(&acc, &a, &b, kt > 0),
                Steps::TwoRanges => {
                    thr.gemm_k_steps(&acc, &a, &b, 0..2, kt > 0);
                    thr.gemm_k_steps(&acc, &a, &b, 2..4, true);
                }
            }
            wgmma::commit_group();
            wgmma::wait_group(0);
            // The next K tile overwrites the shared tiles.
            sync_threads();
        }
        thr.partition_c(&gc.local_tile(&[M, N], (0, 0))).store(&acc);
    })
    .unwrap()
}

/// tcgen05 over `[m, N]` (m = 128, or 256: two M blocks side by side in tensor memory) with
/// `m` threads, each storing its row.
fn tcgen05_kernel(m: i64, k: i64, steps: Steps) -> Kernel {
    tcgen05_kernel_in(m, k, steps, Tiles::Single)
}

fn tcgen05_kernel_in(m: i64, k: i64, steps: Steps, tiles: Tiles) -> Kernel {
    trace_kernel("tensor_gemm_sm100", Target::Sm100a, || {
        threads(m as u32, 1, 1);
        // One block of N columns for each 128 rows.
        let columns = (N * m / 128) as u32;
        let (ga, gb, gc) = params();
        let ring_a = smem_ring("a", m, tiles.stages());
        let ring_b = smem_ring("b", N, tiles.stages());
        let bar = smem_alloc("bar", 8, 8);
        let slot = smem_alloc("tmem_slot", 4, 4);
        let mbar = Mbarrier::at(bar.addr());
        let (tid, warp) = (thread_idx_x(), warp_id());
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::alloc(slot.addr(), columns);
                tcgen05::relinquish_alloc_permit();
            }
            ((), ())
        });
        branch(tid.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                mbar.init(1u32);
                init_fence();
            }
            ((), ())
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let tiled = Tcgen05Tiled::ss_tile(
            tcgen05::MmaF16Bf16Ss::bf16(128, 64, Major::K, Major::K),
            Major::K,
            Major::K,
            m,
            N,
        );
        assert_eq!(tiled.columns(), columns);
        let d = tiled.partition_fragment_c(TmemAddr::from_base(base));
        let copier = Layout::new(
            dsl_core::layout::IntTuple::of(&[m / 8, 8]),
            dsl_core::layout::IntTuple::of(&[8, 1]),
        )
        .unwrap();
        for kt in 0..k / 64 {
            let (sa, sb) = (tiles.tile(&ring_a, m, kt), tiles.tile(&ring_b, N, kt));
            stage_tiles(&ga, &gb, &sa, &sb, &copier, kt);
            let (a, b) = (tiled.partition_a(&sa), tiled.partition_b(&sb));
            branch(tid.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
                if t {
                    match steps {
                        Steps::Whole => tiled.gemm(&d, &a, &b, kt > 0),
                        Steps::TwoRanges => {
                            tiled.gemm_k_steps(&d, &a, &b, 0..2, kt > 0);
                            tiled.gemm_k_steps(&d, &a, &b, 2..4, true);
                        }
                    }
                    tcgen05::commit(mbar);
                }
                ((), ())
            });
            mbar.wait((kt % 2) as u32);
            tcgen05::fence_after_thread_sync();
        }
        let c = tiled.load_c(&d, warp);
        tiled
            .partition_c(&gc.local_tile(&[m, N], (0, 0)), tid)
            .store(&c);
        tcgen05::fence_before_thread_sync();
        sync_threads();
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(TmemAddr::from_base(base), columns);
            }
            ((), ())
        });
    })
    .unwrap()
}

#[test]
fn wgmma_ss_tile_through_tensors_is_exact() {
    let p = Problem::new(M, 2 * K);
    assert_eq!(
        p.run(&wgmma_kernel(p.k, false, Steps::Whole)),
        p.reference()
    );
}

#[test]
fn wgmma_rs_tile_through_tensors_is_exact() {
    let p = Problem::new(M, 2 * K);
    assert_eq!(p.run(&wgmma_kernel(p.k, true, Steps::Whole)), p.reference());
}

#[test]
fn wgmma_k_steps_in_two_ranges_are_exact() {
    let p = Problem::new(M, 2 * K);
    for rs in [false, true] {
        let kernel = wgmma_kernel(p.k, rs, Steps::TwoRanges);
        assert_eq!(p.run(&kernel), p.reference(), "rs = {rs}");
    }
}

#[test]
fn tcgen05_tile_through_tensors_is_exact() {
    let p = Problem::new(M, 2 * K);
    assert_eq!(p.run(&tcgen05_kernel(M, p.k, Steps::Whole)), p.reference());
}

/// Two M blocks of 128 rows, the second at the columns after the first's, each loaded by
/// the warps of its 128 threads; K-steps in two ranges.
#[test]
fn tcgen05_two_m_blocks_in_two_k_ranges_are_exact() {
    let p = Problem::new(2 * M, 2 * K);
    let kernel = tcgen05_kernel(p.m, p.k, Steps::TwoRanges);
    assert_eq!(p.run(&kernel), p.reference());
}

/// A stage of a ring picked at run time gives the MMAs the numbers of a single tile: the
/// descriptors' start addresses move at run time, their layouts stay the checked ones.
#[test]
fn wgmma_ss_tile_of_a_runtime_stage_is_exact() {
    let p = Problem::new(M, 4 * K);
    let single = p.run(&wgmma_kernel_in(p.k, false, Steps::Whole, Tiles::Single));
    let staged = p.run(&wgmma_kernel_in(
        p.k,
        false,
        Steps::Whole,
        Tiles::RuntimeStage,
    ));
    assert_eq!(staged, single);
    assert_eq!(staged, p.reference());
}

#[test]
fn tcgen05_ss_tile_of_a_runtime_stage_is_exact() {
    let p = Problem::new(2 * M, 4 * K);
    let single = p.run(&tcgen05_kernel_in(p.m, p.k, Steps::Whole, Tiles::Single));
    let staged = p.run(&tcgen05_kernel_in(
        p.m,
        p.k,
        Steps::Whole,
        Tiles::RuntimeStage,
    ));
    assert_eq!(staged, single);
    assert_eq!(staged, p.reference());
}

/// A runtime offset that is not a whole number of swizzle periods cannot keep the layout
/// the descriptor describes: a trace error that says how to offset the tile instead.
#[test]
fn an_operand_offset_by_a_runtime_row_is_a_trace_error() {
    let err = trace_kernel("tensor_gemm_bad_offset", Target::Sm100a, || {
        threads(128, 1, 1);
        let ring = smem_ring("a", M, 2);
        let row = thread_idx_x() >> 16u32;
        let tile = ring.local_tile(&[M, 64], (0u32, 0u32));
        let shifted = tile.local_tile(&[1, 64], (row, 0u32));
        let tiled = Tcgen05Tiled::ss(
            tcgen05::MmaF16Bf16Ss::bf16(128, 64, Major::K, Major::K),
            Major::K,
            Major::K,
            N,
        );
        tiled.partition_a(&shifted);
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("runtime offset in steps of"), "{err}");
}

/// The RS form assembles for sm_90a (when a ptxas is installed).
#[test]
fn wgmma_rs_assembles() {
    let kernel = wgmma_kernel(K, true, Steps::Whole);
    let ptx = dsl_core::emit::ptx::emit(&kernel).unwrap();
    assert!(
        ptx.text.contains("}, {%r"),
        "the RS form takes A as registers"
    );
    match dsl_core::ptxas::assemble(&ptx) {
        Ok(_) => {}
        Err(dsl_core::ptxas::PtxasError::NotFound) => eprintln!("SKIPPED: no ptxas"),
        Err(e) => panic!("{e}"),
    }
}

/// The SS tiling run by warpgroups `first ..= first + 1` of the CTA
/// (`WgmmaTiled::thread_in_cta`) after warpgroups 0 and 1 staged the tiles: the numbers of
/// the tiling at warpgroup 0. First warpgroup 2 takes the warpgroup from `%tid.x >> 7`
/// masked, 1 (not a multiple of the tiling's two) with a subtraction.
#[test]
fn wgmma_ss_tile_on_later_warpgroups_of_the_cta_is_exact() {
    let p = Problem::new(M, K);
    for first in [1u32, 2] {
        let kernel = trace_kernel("tensor_gemm_later_warpgroups", Target::Sm90a, || {
            threads(128 * (first + 2), 1, 1);
            let (ga, gb, gc) = params();
            let (sa, sb) = (smem_ring("a", M, 1), smem_ring("b", N, 1));
            let copier: Layout = "(32,8):(8,1)".parse().unwrap();
            let tid = thread_idx_x();
            branch(
                tid.lt(256u32),
                (),
                &[],
                SourceLoc::caller(),
                |stager, ()| {
                    if stager {
                        let v = Some(&[1, 8][..]);
                        let ta = ga.local_tile(&[M, 64], (0, 0));
                        let tb = gb.local_tile(&[N, 64], (0, 0));
                        ta.local_partition(&copier, tid, v)
                            .copy_to(&sa.local_partition(&copier, tid, v));
                        tb.local_partition(&copier, tid, v)
                            .copy_to(&sb.local_partition(&copier, tid, v));
                        fence_proxy_async_shared();
                    }
                    ((), ())
                },
            );
            sync_threads();
            let tiled = WgmmaTiled::ss(MmaF16Bf16Ss::bf16(64, Major::K, Major::K), 2, M, N);
            let mine = !tid.lt(128 * first);
            branch(mine, (), &[], SourceLoc::caller(), |mma, ()| {
                if mma {
                    let thr = tiled.thread_in_cta(first);
                    let acc = thr.partition_fragment_c();
                    let (a, b) = (thr.partition_a(&sa, Major::K), thr.partition_b(&sb));
                    wgmma::fence();
                    thr.gemm(&acc, &a, &b, false);
                    wgmma::commit_group();
                    wgmma::wait_group(0);
                    thr.partition_c(&gc.local_tile(&[M, N], (0, 0))).store(&acc);
                }
                ((), ())
            });
        })
        .unwrap();
        assert_eq!(p.run(&kernel), p.reference(), "first warpgroup {first}");
    }
}
