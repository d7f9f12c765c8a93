//! A GEMM tile written with tensors end to end, in the interpreter, exact against the host:
//! global -> shared copies through `local_partition`, the MMA through the tiled MMA's
//! partitions (wgmma SS and RS on sm_90a, tcgen05 SS with C in TMEM on sm_100a), and the C
//! fragment stored through `partition_c`. Inputs are small integers, so every product and
//! sum is exact in f32 whatever the order.

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
    k: i64,
    a: Vec<bf16>,
    b: Vec<bf16>,
}

impl Problem {
    fn new(k: i64) -> Self {
        let v = |i: i64, s: i64| bf16::from_f32(((i * s + 3) % 9 - 4) as f32);
        Problem {
            k,
            a: (0..M * k).map(|i| v(i, 7)).collect(),
            b: (0..N * k).map(|i| v(i, 5)).collect(),
        }
    }

    fn reference(&self) -> Vec<f32> {
        let mut c = vec![0.0f32; (M * N) as usize];
        for m in 0..M {
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
        let c = mem.alloc("c", (M * N * 4) as usize);
        let args = [
            Arg::tensor(a, &[M, self.k], &[self.k, 1]),
            Arg::tensor(b, &[N, self.k], &[self.k, 1]),
            Arg::tensor(c, &[M, N], &[N, 1]),
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
    let ta = ga.local_tile(&[M, 64], (0, kt));
    let tb = gb.local_tile(&[N, 64], (0, kt));
    ta.local_partition(copier, tid, v)
        .copy_to(&sa.local_partition(copier, tid, v));
    tb.local_partition(copier, tid, v)
        .copy_to(&sb.local_partition(copier, tid, v));
    fence_proxy_async_shared();
    sync_threads();
}

fn wgmma_kernel(k: i64, rs: bool) -> Kernel {
    trace_kernel("tensor_gemm_sm90", Target::Sm90a, || {
        threads(256, 1, 1);
        let (ga, gb, gc) = params();
        let sa =
            smem_tile("a", canonical::k_major(Swizzle::B128, M, 64, 2).unwrap()).tensor::<bf16>();
        let sb =
            smem_tile("b", canonical::k_major(Swizzle::B128, N, 64, 2).unwrap()).tensor::<bf16>();
        let copier: Layout = "(32,8):(8,1)".parse().unwrap();
        let tiled = if rs {
            WgmmaTiled::rs(MmaF16Bf16Rs::bf16(64, Major::K), Major::K, 2, M, N)
        } else {
            WgmmaTiled::ss(MmaF16Bf16Ss::bf16(64, Major::K, Major::K), 2, M, N)
        };
        let thr = tiled.thread(thread_idx_x());
        let acc = thr.partition_fragment_c();
        for kt in 0..k / 64 {
            stage_tiles(&ga, &gb, &sa, &sb, &copier, kt);
            let a = if rs {
                WgmmaOperandA::Regs(thr.partition_a_regs(&sa).load())
            } else {
                thr.partition_a(&sa, Major::K)
            };
            let b = thr.partition_b(&sb);
            wgmma::fence();
            thr.gemm(&acc, &a, &b, kt > 0);
            wgmma::commit_group();
            wgmma::wait_group(0);
            // The next K tile overwrites the shared tiles.
            sync_threads();
        }
        thr.partition_c(&gc.local_tile(&[M, N], (0, 0))).store(&acc);
    })
    .unwrap()
}

fn tcgen05_kernel(k: i64) -> Kernel {
    trace_kernel("tensor_gemm_sm100", Target::Sm100a, || {
        threads(128, 1, 1);
        let (ga, gb, gc) = params();
        let sa =
            smem_tile("a", canonical::k_major(Swizzle::B128, M, 64, 2).unwrap()).tensor::<bf16>();
        let sb =
            smem_tile("b", canonical::k_major(Swizzle::B128, N, 64, 2).unwrap()).tensor::<bf16>();
        let bar = smem_alloc("bar", 8, 8);
        let slot = smem_alloc("tmem_slot", 4, 4);
        let mbar = Mbarrier::at(bar.addr());
        let (tid, warp) = (thread_idx_x(), warp_id());
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::alloc(slot.addr(), 64);
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
        let tiled = Tcgen05Tiled::ss(
            tcgen05::MmaF16Bf16Ss::bf16(128, 64, Major::K, Major::K),
            Major::K,
            Major::K,
            N,
        );
        let d = tiled.partition_fragment_c(TmemAddr::from_base(base));
        let copier: Layout = "(16,8):(8,1)".parse().unwrap();
        for kt in 0..k / 64 {
            stage_tiles(&ga, &gb, &sa, &sb, &copier, kt);
            let (a, b) = (tiled.partition_a(&sa), tiled.partition_b(&sb));
            branch(tid.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
                if t {
                    tiled.gemm(&d, &a, &b, kt > 0);
                    tcgen05::commit(mbar);
                }
                ((), ())
            });
            mbar.wait((kt % 2) as u32);
            tcgen05::fence_after_thread_sync();
        }
        let c = tiled.load_c(&d, warp);
        tiled
            .partition_c(&gc.local_tile(&[M, N], (0, 0)), tid)
            .store(&c);
        tcgen05::fence_before_thread_sync();
        sync_threads();
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(TmemAddr::from_base(base), 64);
            }
            ((), ())
        });
    })
    .unwrap()
}

#[test]
fn wgmma_ss_tile_through_tensors_is_exact() {
    let p = Problem::new(2 * K);
    assert_eq!(p.run(&wgmma_kernel(p.k, false)), p.reference());
}

#[test]
fn wgmma_rs_tile_through_tensors_is_exact() {
    let p = Problem::new(2 * K);
    assert_eq!(p.run(&wgmma_kernel(p.k, true)), p.reference());
}

#[test]
fn tcgen05_tile_through_tensors_is_exact() {
    let p = Problem::new(2 * K);
    assert_eq!(p.run(&tcgen05_kernel(p.k)), p.reference());
}

/// The RS form assembles for sm_90a (when a ptxas is installed).
#[test]
fn wgmma_rs_assembles() {
    let kernel = wgmma_kernel(K, true);
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
