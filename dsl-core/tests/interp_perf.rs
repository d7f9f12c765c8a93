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
