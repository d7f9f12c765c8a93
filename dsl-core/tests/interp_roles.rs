//! Warp roles in the interpreter: named barriers between subsets of warps, `setmaxnreg`
//! register budgets shared through the CTA's pool, and the deadlock report that names
//! what every waiting role waits for.

mod common;

use common::{expect, when};
use dsl_core::Target;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::sync::{NamedBarrier, set_max_nreg, sync_threads};
use dsl_core::arch::thread::{thread_idx_x, warp_id};
use dsl_core::interp::{Arg, FaultKind, InterpError, Launch, Memory, run};
use dsl_core::ir::{Kernel, SourceLoc};
use dsl_core::trace::control::branch;
use dsl_core::trace::{KernelParam, Tensor, Val, max_regs, smem_alloc, threads, trace_kernel};

fn run_out(k: &Kernel, words: usize) -> Result<Vec<u32>, InterpError> {
    let mut mem = Memory::new();
    let out = mem.alloc("out", words * 4);
    run(
        k,
        &mut mem,
        &[Arg::contiguous(out, &[words as i64])],
        &Launch::grid([1, 1, 1]),
    )?;
    Ok(mem.read::<u32>(out))
}

#[test]
fn named_barriers_hand_data_between_pairs_of_warps() {
    // Warps 0 and 2 produce and `bar.arrive`; warps 1 and 3 `bar.sync` on their own id and
    // read what their producer wrote. Each pair runs several generations.
    let k = trace_kernel("named", Target::Sm90a, || {
        threads(128, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let buf = smem_alloc("buf", 2 * 4 * 32 * 4, 16);
        let tid = thread_idx_x();
        let wid = warp_id();
        let pair = wid / 2u32;
        let lane = tid % 32u32;
        for round in 0..4u32 {
            let slot = buf.addr() + ((pair * 4u32 + round) * 32u32 + lane) * 4u32;
            let ready = [NamedBarrier::new(1, 64), NamedBarrier::new(2, 64)];
            let done = [NamedBarrier::new(3, 64), NamedBarrier::new(4, 64)];
            for p in 0..2u32 {
                when(pair.eq(p), || {
                    branch(
                        (wid % 2u32).eq(0u32),
                        (),
                        &[],
                        SourceLoc::caller(),
                        |prod, ()| {
                            if prod {
                                store(slot, tid * 10u32 + round);
                                ready[p as usize].arrive();
                                done[p as usize].sync();
                            } else {
                                ready[p as usize].sync();
                                let v: Val<u32> = load(slot);
                                store(
                                    out.base() + ((pair * 4u32 + round) * 32u32 + lane).mul_wide(4),
                                    v,
                                );
                                done[p as usize].arrive();
                            }
                            ((), ())
                        },
                    );
                });
            }
        }
    })
    .unwrap();
    let got = run_out(&k, 2 * 4 * 32).unwrap();
    for pair in 0..2u32 {
        for round in 0..4u32 {
            for lane in 0..32u32 {
                let producer = pair * 64 + lane;
                assert_eq!(
                    got[((pair * 4 + round) * 32 + lane) as usize],
                    producer * 10 + round
                );
            }
        }
    }
}

#[test]
fn a_named_barrier_with_mismatched_counts_is_a_fault() {
    let k = trace_kernel("mismatch", Target::Sm90a, || {
        threads(128, 1, 1);
        let _out = Tensor::<u32, 1>::declare("out");
        when(warp_id().eq(0u32), || NamedBarrier::new(1, 64).sync());
        when(warp_id().eq(1u32), || NamedBarrier::new(1, 96).arrive());
    })
    .unwrap();
    expect(
        &run_out(&k, 1).unwrap_err(),
        FaultKind::DivergentBarrier,
        &[
            "`bar.arrive`",
            "bar.arrive 1, 96 while 32 thread(s) arrived at barrier 1 with a count of 64",
            "by warp 1",
        ],
    );
    // A warp that arrives twice before the barrier completed.
    let k = trace_kernel("twice", Target::Sm90a, || {
        threads(128, 1, 1);
        let _out = Tensor::<u32, 1>::declare("out");
        when(warp_id().eq(0u32), || {
            NamedBarrier::new(2, 64).arrive();
            NamedBarrier::new(2, 64).arrive();
        });
    })
    .unwrap();
    expect(
        &run_out(&k, 1).unwrap_err(),
        FaultKind::DivergentBarrier,
        &["warp 0 arrives a second time before the barrier completed (32 of 64"],
    );
}

/// 3 warpgroups at 168 registers: the producer gives registers to two consumers.
fn roles_kernel(name: &str, producer: (u32, bool), consumer: (u32, bool)) -> Kernel {
    trace_kernel(name, Target::Sm90a, || {
        threads(384, 1, 1);
        max_regs(168);
        let out = Tensor::<u32, 1>::declare("out");
        let tid = thread_idx_x();
        branch(
            (tid / 128u32).eq(0u32),
            (),
            &[],
            SourceLoc::caller(),
            |p, ()| {
                if p {
                    set_max_nreg(producer.0, producer.1);
                } else {
                    set_max_nreg(consumer.0, consumer.1);
                }
                ((), ())
            },
        );
        sync_threads();
        store(out.base() + tid.mul_wide(4), tid);
    })
    .unwrap()
}

#[test]
fn setmaxnreg_moves_registers_between_warpgroups() {
    // CUTLASS's split: 128 x 40 + 256 x 232 = 384 x 168 registers.
    let k = roles_kernel("split", (40, false), (232, true));
    let got = run_out(&k, 384).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as u32));
}

#[test]
fn setmaxnreg_misuse_is_a_fault() {
    let k = roles_kernel("dec_up", (200, false), (168, true));
    expect(
        &run_out(&k, 384).unwrap_err(),
        FaultKind::Collective,
        &[
            "`setmaxnreg.dec`",
            "setmaxnreg.dec 200: warpgroup 0 holds 168 registers per thread",
        ],
    );
    let k = roles_kernel("inc_down", (168, false), (120, true));
    expect(
        &run_out(&k, 384).unwrap_err(),
        FaultKind::Collective,
        &["setmaxnreg.inc 120: warpgroup 1 holds 168 registers per thread"],
    );
    // One warp of the warpgroup at another setmaxnreg.
    let k = trace_kernel("diverged", Target::Sm90a, || {
        threads(128, 1, 1);
        max_regs(168);
        let _out = Tensor::<u32, 1>::declare("out");
        branch(warp_id().eq(0u32), (), &[], SourceLoc::caller(), |p, ()| {
            if p {
                set_max_nreg(160, false);
            } else {
                set_max_nreg(152, false);
            }
            ((), ())
        });
    })
    .unwrap();
    expect(
        &run_out(&k, 1).unwrap_err(),
        FaultKind::Collective,
        &[
            "while warps of its warpgroup wait at another setmaxnreg",
            "the warpgroup diverged",
        ],
    );
}

#[test]
fn a_deadlock_names_what_every_role_waits_for() {
    // Warpgroup 0 asks for registers nobody gives back (384 x 168 fills the pool), so it
    // never reaches the named barrier warpgroup 1 waits at, nor arms warpgroup 2's mbarrier.
    let k = trace_kernel("stuck", Target::Sm90a, || {
        threads(384, 1, 1);
        max_regs(168);
        let _out = Tensor::<u32, 1>::declare("out");
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let tid = thread_idx_x();
        let wg = tid / 128u32;
        when(tid.eq(0u32), || {
            bar.init(1u32);
            init_fence();
        });
        sync_threads();
        when(wg.eq(0u32), || {
            set_max_nreg(232, true);
            NamedBarrier::new(1, 256).arrive();
            bar.arrive();
        });
        when(wg.eq(1u32), || NamedBarrier::new(1, 256).sync());
        when(wg.eq(2u32), || bar.wait(0u32));
    })
    .unwrap();
    let e = run_out(&k, 1).unwrap_err();
    let d = e
        .deadlock()
        .unwrap_or_else(|| panic!("not a deadlock: {e}"));
    assert_eq!(d.blocked.len(), 12, "{e}");
    let text = e.to_string();
    for needle in [
        "warp 0: `setmaxnreg.inc`",
        "8192 more registers for warpgroup 0 to grow from 168 to 232 per thread: the CTA's \
         pool of 65536 has 1024 free",
        "warp 4: `bar.sync (named)`",
        "named barrier 1: 128 of 256 threads arrived (warps [4, 5, 6, 7])",
        "warp 11: `mbarrier.try_wait.parity`",
        "the phase of parity 0 of the mbarrier at shared 0x400 to complete (it is in phase 0 \
         with 1 of 1 arrivals pending",
    ] {
        assert!(text.contains(needle), "`{needle}` missing from:\n{text}");
    }
}
