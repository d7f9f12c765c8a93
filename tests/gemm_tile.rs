//! The decode kernel's S shape as a plain GEMM tile: D[128, 32] = A[128, 512] . B[32, 512]^T
//! from 128-byte-swizzled K-major shared memory, with wgmma (sm_90a: two warpgroups of M=64)
//! and tcgen05 (sm_100a: one M=128 MMA into TMEM). Exact against the host (the values make
//! every product and sum exact in f32) in the interpreter on both targets and on a GPU.

use std::sync::Arc;

use cudarc::driver::DevicePtr;
use dsl_core::Target;
use dsl_core::arch::mbarrier::Mbarrier;
use dsl_core::arch::memory::{load, load_vec, store, store_vec};
use dsl_core::arch::operand::{DescFormat, SmemOperand};
use dsl_core::arch::sm90::wgmma;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{elect_one, lane_id, thread_idx_x, warp_id};
use dsl_core::interp::{self, Arg, Launch, Memory};
use dsl_core::jit::{self, KernelArg, TensorArg};
use dsl_core::layout::{Major, Swizzle, UmmaInstrDesc, canonical};
use dsl_core::trace::{Tensor, current_target, smem_alloc, smem_tile, threads};
use dsl_macros::kernel;
use half::bf16;

const M: usize = 128;
const N: usize = 32;
const K: usize = 512;

#[kernel]
fn gemm_tile(a: Tensor<bf16, 2>, b: Tensor<bf16, 2>, d: Tensor<f32, 2>) {
    threads(256, 1, 1);
    let a_tile = smem_tile(
        "a",
        canonical::k_major(Swizzle::B128, M as i64, K as i64, 2).unwrap(),
    );
    let b_tile = smem_tile(
        "b",
        canonical::k_major(Swizzle::B128, N as i64, K as i64, 2).unwrap(),
    );
    let tid = thread_idx_x();
    let warp = warp_id();
    // 16-byte pieces: piece p of a row-major [rows, 512] bf16 matrix is row p / 64, dims
    // (p % 64) * 8 ..; thread t takes pieces t, t + 256, ...
    let col = (tid % 64) * 8;
    for k in 0..(M * K / 8 / 256) as u32 {
        let row = tid / 64 + 4 * k;
        let piece = load_vec::<u32, 4, _>(a.base() + (row * 1024 + col * 2));
        store_vec(a_tile.at(row, col), piece);
    }
    for k in 0..(N * K / 8 / 256) as u32 {
        let row = tid / 64 + 4 * k;
        let piece = load_vec::<u32, 4, _>(b.base() + (row * 1024 + col * 2));
        store_vec(b_tile.at(row, col), piece);
    }
    fence_proxy_async_shared();
    sync_threads();
    let lane = lane_id();
    match current_target() {
        Target::Sm90a => {
            let a_op = SmemOperand::new(&a_tile, Major::K, DescFormat::Gmma);
            let b_op = SmemOperand::new(&b_tile, Major::K, DescFormat::Gmma);
            let group = warp >> 2;
            let rows = group * a_op.block_offset(64, 0);
            let acc = wgmma::Accumulator::zeros(N as u32);
            wgmma::fence();
            for ks in 0..(K / 16) as i64 {
                wgmma::mma_async(
                    &acc,
                    a_op.block_plus(0, 16 * ks, rows),
                    b_op.k_step(ks),
                    ks > 0,
                    0,
                    0,
                );
            }
            wgmma::commit_group();
            wgmma::wait_group(0);
            let row0 = group * 64 + (warp & 3u32) * 16 + lane / 4;
            for i in (0..N as u32 / 2).step_by(2) {
                let row = row0 + 8 * ((i >> 1) & 1);
                let c = (lane % 4) * 2 + 8 * (i >> 2);
                let at = d.base() + (row * N as u32 + c) * 4;
                store_vec(at, [acc.get(i as usize), acc.get(i as usize + 1)]);
            }
        }
        Target::Sm100a => {
            let slot = smem_alloc("tmem_slot", 4, 16).addr();
            let done = Mbarrier::at(smem_alloc("done", 8, 8).addr());
            if tid == 0 {
                done.init(1u32);
            }
            if warp == 0 {
                tcgen05::alloc(slot, 32);
            }
            tcgen05::fence_before_thread_sync();
            sync_threads();
            tcgen05::fence_after_thread_sync();
            let tmem = TmemAddr::from_base(load::<u32, _>(slot));
            let a_op = SmemOperand::new(&a_tile, Major::K, DescFormat::Umma);
            let b_op = SmemOperand::new(&b_tile, Major::K, DescFormat::Umma);
            let idesc = UmmaInstrDesc::bf16(M as u32, N as u32).unwrap().bits();
            if warp == 0 {
                if elect_one() {
                    for ks in 0..(K / 16) as i64 {
                        tcgen05::mma_f16(tmem, a_op.k_step(ks), b_op.k_step(ks), idesc, ks > 0);
                    }
                    tcgen05::commit(done);
                }
            }
            done.wait(0u32);
            tcgen05::fence_after_thread_sync();
            if warp < 4 {
                let words = tcgen05::ld_32x32b(tmem.warp_quadrant(warp), N);
                tcgen05::wait_ld();
                let row = warp * 32 + lane;
                for c in 0..N as u32 {
                    store(
                        d.base() + (row * N as u32 + c) * 4,
                        words[c as usize].bitcast::<f32>(),
                    );
                }
            }
            tcgen05::fence_before_thread_sync();
            sync_threads();
            if warp == 0 {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(tmem, 32);
            }
        }
    }
}

/// Values whose products and 512-term sums are exact in f32: multiples of 1/4 up to 2.
fn operands() -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let value = |i: usize, salt: usize| ((i * 7 + salt * 13) % 17) as f32 / 4.0 - 2.0;
    let a: Vec<f32> = (0..M * K).map(|i| value(i, 1)).collect();
    let b: Vec<f32> = (0..N * K).map(|i| value(i, 3)).collect();
    let d = (0..M * N)
        .map(|i| {
            let (m, n) = (i / N, i % N);
            (0..K)
                .map(|k| a[m * K + k] as f64 * b[n * K + k] as f64)
                .sum::<f64>() as f32
        })
        .collect();
    let to_bf16 = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect();
    (to_bf16(a), to_bf16(b), d)
}

#[test]
fn gemm_tile_is_exact_in_the_interpreter() {
    let (a, b, want) = operands();
    for target in Target::ALL {
        let kernel = gemm_tile(target).unwrap_or_else(|e| panic!("{e}"));
        let mut mem = Memory::new();
        let (ab, bb) = (mem.alloc_from("a", &a), mem.alloc_from("b", &b));
        let db = mem.alloc_from("d", &vec![f32::NAN; M * N]);
        let args = [
            Arg::contiguous(ab, &[M as i64, K as i64]),
            Arg::contiguous(bb, &[N as i64, K as i64]),
            Arg::contiguous(db, &[M as i64, N as i64]),
        ];
        interp::run(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
        assert_eq!(mem.read::<f32>(db), want, "{target}");
    }
}

#[test]
fn gpu_gemm_tile_is_exact() {
    let Some(dev) = jit::test_device(Target::Sm90a).map(Arc::new) else {
        return;
    };
    let (a, b, want) = operands();
    let stream = dev.stream();
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let (ad, bd) = (
        stream.clone_htod(&bits(&a)).unwrap(),
        stream.clone_htod(&bits(&b)).unwrap(),
    );
    let dd = stream.clone_htod(&vec![f32::NAN; M * N]).unwrap();
    let kernel = dev.load(&gemm_tile(Target::Sm90a).unwrap()).unwrap();
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
            ad.device_ptr(stream).0,
            [M as i64, K as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
            bd.device_ptr(stream).0,
            [N as i64, K as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<f32, 2>(
            dd.device_ptr(stream).0,
            [M as i64, N as i64],
        )),
    ];
    // SAFETY: the three buffers hold the shapes above.
    unsafe { kernel.launch(stream, jit::Launch::new([1, 1, 1]), &args) }.unwrap();
    assert_eq!(stream.clone_dtoh(&dd).unwrap(), want);
    eprintln!(
        "gpu_gemm_tile_is_exact: [128, 32] = [128, 512] . [32, 512]^T by wgmma matches the host exactly"
    );
}
