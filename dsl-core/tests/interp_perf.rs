//! Interpreter throughput on a kernel shaped like the decode kernel's worst case: 16 CTAs of
//! 512 threads in one cluster, tens of thousands of instructions and virtual registers per
//! thread. Prints the rate; fails only if it is far too slow to be useful in CI.

use dsl_core::Target;
use dsl_core::arch::cluster::cluster_sync;
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{shfl_xor, thread_idx_x};
use dsl_core::interp::{Arg, Launch, Memory, Options, Program};
use dsl_core::trace::{KernelParam, Tensor, Val, cluster_dims, smem_alloc, threads, trace_kernel};

fn big_kernel(steps: u32) -> dsl_core::ir::Kernel {
    trace_kernel("big", Target::Sm100a, || {
        threads(512, 1, 1);
        cluster_dims(16, 1, 1);
        let x = Tensor::<f32, 1>::declare("x");
        let buf = smem_alloc("buf", 512 * 4, 16);
        let tid = thread_idx_x();
        let mut acc: Val<f32> = load(x.base() + tid.mul_wide(4));
        let mut k = tid;
        for i in 0..steps {
            acc = acc.fma(0.999_9, 0.5);
            k = (k * 1_664_525u32 + 1_013_904_223u32) ^ (k >> 13u32);
            if i % 16 == 0 {
                acc = (acc + shfl_xor(acc, 1 + i % 5)) * 0.5;
            }
            if i % 512 == 0 {
                store(buf.addr() + tid * 4u32, acc);
                sync_threads();
                let other: Val<f32> = load(buf.addr() + (tid ^ 1u32) * 4u32);
                acc = acc.max(other) - k.cast::<f32>() * 1e-9;
                sync_threads();
            }
        }
        cluster_sync();
        store(x.base() + tid.mul_wide(4), acc);
    })
    .unwrap()
}

#[test]
fn sixteen_ctas_of_512_threads_run_in_seconds() {
    let k = big_kernel(4000);
    let prog = Program::compile(&k).unwrap();
    let mut mem = Memory::new();
    let x = mem.alloc_from("x", &vec![1.0f32; 512]);
    let stats = prog
        .run(
            &mut mem,
            &[Arg::contiguous(x, &[512])],
            &Launch::grid([16, 1, 1]),
            &Options::default(),
        )
        .unwrap();
    println!(
        "{} virtual registers in {} slots ({} register + constants, {} KiB per warp); \
         {} lane-instructions ({} warp-instructions) in {:.3} s: {:.0} M lane-instructions/s",
        k.regs.len(),
        prog.slots(),
        prog.register_slots(),
        prog.warp_register_bytes() / 1024,
        stats.lane_instructions,
        stats.warp_instructions,
        stats.wall.as_secs_f64(),
        stats.lane_instructions_per_second() / 1e6
    );
    assert!(
        prog.slots() < 200,
        "liveness packs the registers: {}",
        prog.slots()
    );
    assert!(stats.lane_instructions > 100_000_000);
    assert!(
        stats.wall.as_secs_f64() < 30.0,
        "far too slow: {:?}",
        stats.wall
    );
    assert!(mem.read::<f32>(x).iter().all(|v| v.is_finite()));
}

/// The decode kernel's shape: gather 128 rows x 512 bf16 per CTA into a K-major SW128 tile,
/// S[128, 32] = KV . Q^T in 32 chained tcgen05.mma, softmax-like work on TMEM loads, then
/// a cluster-wide exchange over DSMEM.
fn decode_shaped() -> dsl_core::ir::Kernel {
    use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
    use dsl_core::arch::memory::{load_vec, store_vec};
    use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
    use dsl_core::arch::sync::fence_proxy_async_shared;
    use dsl_core::arch::thread::{cluster_cta_rank, warp_id};
    use dsl_core::ir::SourceLoc;
    use dsl_core::trace::control::branch;
    use dsl_core::trace::stage;
    fn when(c: dsl_core::trace::Pred, f: impl FnOnce()) {
        let mut f = Some(f);
        branch(c, (), &[], SourceLoc::caller(), |t, ()| {
            if t && let Some(f) = f.take() {
                f();
            }
            ((), ())
        });
    }
    trace_kernel("decode_shaped", Target::Sm100a, || {
        threads(512, 1, 1);
        cluster_dims(16, 1, 1);
        let kv = Tensor::<u8, 1>::declare("kv");
        let q = Tensor::<u8, 1>::declare("q");
        let out = Tensor::<f32, 1>::declare("out");
        let kv_s = smem_alloc("kv", 128 * 1024, 1024);
        let q_s = smem_alloc("q", 32 * 1024, 1024);
        let red = smem_alloc("red", 512 * 4, 16);
        let bar = smem_alloc("bar", 8, 8);
        let slot = smem_alloc("slot", 4, 4);
        let mbar = Mbarrier::at(bar.addr());
        let tid = thread_idx_x();
        let warp = warp_id();
        let rank = cluster_cta_rank();
        stage("1: gather and swizzle");
        // 16-byte chunk c of row r of a [rows, 512] bf16 tile: atom column c / 8, chunk
        // (c % 8) ^ (r % 8) of the row's 128 bytes.
        let place = |rows: u32, r: Val<u32>, c: Val<u32>| {
            (c / 8u32) * (rows * 128) + r * 128u32 + (((r & 7u32) ^ (c & 7u32)) * 16u32)
        };
        let row = tid / 4u32;
        for i in 0..16u32 {
            let c = (tid & 3u32) + i * 4;
            let src = kv.base() + ((rank * 128u32 + row) * 1024u32 + c * 16u32).cast::<u64>();
            let v: [Val<u32>; 4] = load_vec(src);
            store_vec(kv_s.addr() + place(128, row, c), v);
        }
        for i in 0..4u32 {
            let idx = tid + i * 512;
            let (r, c) = (idx / 64u32, idx % 64u32);
            let v: [Val<u32>; 4] = load_vec(q.base() + (idx * 16u32).cast::<u64>());
            store_vec(q_s.addr() + place(32, r, c), v);
        }
        fence_proxy_async_shared();
        when(warp.eq(0u32), || tcgen05::alloc(slot.addr(), 32));
        when(tid.eq(0u32), || {
            mbar.init(1u32);
            init_fence();
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let d = TmemAddr::from_base(base);
        stage("2: S = KV . Q^T");
        let sw128 = 0x4000_4040_0001_0000u64; // K-major SW128, SBO 1024, bit 46.
        let kv_start = (kv_s.addr().value() >> 4u32).cast::<u64>();
        let q_start = (q_s.addr().value() >> 4u32).cast::<u64>();
        when(tid.eq(0u32), || {
            for j in 0..32u64 {
                let (col, step) = (j / 4, j % 4);
                let a = kv_start + (sw128 + col * (128 * 128 / 16) + step * 2);
                let b = q_start + (sw128 + col * (32 * 128 / 16) + step * 2);
                // bf16 -> f32, K-major A and B, N = 32, M = 128.
                tcgen05::mma_f16(d, a, b, 0x0808_0490u32, j > 0);
            }
            tcgen05::commit(mbar);
        });
        mbar.wait(0u32);
        tcgen05::fence_after_thread_sync();
        stage("3: softmax-like");
        // Warp w reads its lane quadrant, columns 8 * (w / 4) ..+ 8.
        let cols = tcgen05::ld_32x32b(d.warp_quadrant(warp) + (warp / 4u32) * 8u32, 8);
        tcgen05::wait_ld();
        let mut m = cols[0].bitcast::<f32>();
        for c in &cols[1..] {
            m = m.max(c.bitcast::<f32>());
        }
        for off in [16, 8, 4, 2, 1] {
            m = m.max(shfl_xor(m, off));
        }
        let mut sum = Val::<f32>::constant(0.0);
        for c in &cols {
            sum += ((c.bitcast::<f32>() - m) * std::f32::consts::LOG2_E).ex2();
        }
        store(red.addr() + tid * 4u32, sum);
        // The KV tile is free once the MMAs completed: reuse it for partials, as the decode
        // kernel does (every store is checked against the MMAs' in-flight reads).
        for i in 0..8u32 {
            let at = kv_s.addr() + (tid * 8u32 + i) * 16u32;
            store_vec(at, [sum.bitcast::<u32>(); 4]);
        }
        tcgen05::fence_before_thread_sync();
        sync_threads();
        stage("4: exchange");
        cluster_sync();
        let mut total = Val::<f32>::constant(0.0);
        for peer in 0..16u32 {
            let v: Val<f32> = load(red.addr().in_cta(peer) + tid * 4u32);
            total += v;
        }
        store(out.base() + (rank * 512u32 + tid).mul_wide(4), total);
        when(warp.eq(0u32), || {
            tcgen05::fence_after_thread_sync();
            tcgen05::dealloc(d, 32);
        });
        cluster_sync();
    })
    .unwrap()
}

#[test]
fn a_decode_shaped_cluster_runs_in_seconds() {
    let k = decode_shaped();
    let prog = Program::compile(&k).unwrap();
    let mut mem = Memory::new();
    let kv: Vec<u16> = (0..16 * 128 * 512u32)
        .map(|i| half::bf16::from_f32((i.wrapping_mul(7919) % 17) as f32 / 16.0 - 0.5).to_bits())
        .collect();
    let q: Vec<u16> = (0..32 * 512u32)
        .map(|i| half::bf16::from_f32((i.wrapping_mul(104_729) % 13) as f32 / 12.0 - 0.5).to_bits())
        .collect();
    let kv = mem.alloc_from("kv", &kv);
    let q = mem.alloc_from("q", &q);
    let out = mem.alloc("out", 16 * 512 * 4);
    let len = |mem: &Memory, b| mem.len(b) as i64;
    let args = [
        Arg::contiguous(kv, &[len(&mem, kv)]),
        Arg::contiguous(q, &[len(&mem, q)]),
        Arg::contiguous(out, &[16 * 512]),
    ];
    let stats = prog
        .run(
            &mut mem,
            &args,
            &Launch::grid([16, 1, 1]),
            &Options::default(),
        )
        .unwrap();
    println!(
        "decode-shaped cluster: {} lane-instructions ({} warp-instructions) in {:.3} s: {:.0} M \
         lane-instructions/s, {} KiB of registers per warp",
        stats.lane_instructions,
        stats.warp_instructions,
        stats.wall.as_secs_f64(),
        stats.lane_instructions_per_second() / 1e6,
        prog.warp_register_bytes() / 1024
    );
    assert!(stats.wall.as_secs_f64() < 30.0);
    assert!(
        mem.read::<f32>(out)
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
    );
}
